// MsgFlow (msg_flow.hpp).
#include "msg_flow.hpp"

#include <algorithm>

namespace efa {

void MsgFlow::init(int32_t w, size_t off) {
    waiting_head = waiting_tail = nullptr;
    num_waiting = 0;
    window = w > 0 ? w : 1;
    // Half a window: the credits come back before the sender runs dry, in
    // one message for many.
    threshold = window / 2 > 0 ? window / 2 : 1;
    link_off = off;
}

void MsgFlow::init_peer(efa_flow_peer_t *p) const {
    *p = efa_flow_peer_t{};
    p->credits = window;
}

void MsgFlow::wait(efa_flow_peer_t *p) {
    if (p->waiting) {
        return;
    }
    p->waiting = true;
    p->next_waiting = nullptr;
    if (waiting_tail) {
        waiting_tail->next_waiting = p;
    } else {
        waiting_head = p;
    }
    waiting_tail = p;
    num_waiting = num_waiting + 1;
}

void MsgFlow::received(efa_flow_peer_t *p, uint16_t returned, bool counts) {
    // Never above the window: a peer returns only what it was sent, and a
    // forged count must not overflow the credits (negative: the peer's
    // sends would stall for good).
    p->credits =
        static_cast<int32_t>(std::min<int64_t>(int64_t{p->credits} + returned, int64_t{window}));
    if (counts && ++p->owed >= threshold) {
        p->credit_due = true;
        wait(p);
    }
}

void MsgFlow::unsent(efa_flow_peer_t *p, uint16_t given, bool took_credit) {
    p->owed += given;
    if (took_credit) {
        ++p->credits;
    }
    if (p->owed >= threshold) {
        p->credit_due = true;
    }
    if (p->credit_due || p->head) {
        wait(p);
    }
}

void MsgFlow::enqueue(efa_flow_peer_t *p, void *item) {
    *link(item) = nullptr;
    if (p->tail) {
        *link(p->tail) = item;
    } else {
        p->head = item;
    }
    p->tail = item;
    wait(p);
}

void *MsgFlow::pop(efa_flow_peer_t *p) {
    void *item = p->head;
    if (item) {
        dequeue_through(p, item);
    }
    return item;
}

void MsgFlow::push_front(efa_flow_peer_t *p, void *item) {
    *link(item) = p->head;
    p->head = item;
    if (!p->tail) {
        p->tail = item;
    }
}

void MsgFlow::dequeue_through(efa_flow_peer_t *p, void *last) {
    p->head = *link(last);
    if (!p->head) {
        p->tail = nullptr;
    }
    *link(last) = nullptr;
}

void MsgFlow::requeue_front(efa_flow_peer_t *p, void *first, void *last) {
    *link(last) = p->head;
    p->head = first;
    if (!p->tail) {
        p->tail = last;
    }
}

int32_t MsgFlow::drain(bool (*drain_peer)(void *arg, efa_flow_peer_t *p), void *arg) {
    efa_flow_peer_t *prev = nullptr;
    for (efa_flow_peer_t *p = waiting_head; p;) {
        efa_flow_peer_t *next = p->next_waiting;
        const bool room = drain_peer(arg, p);
        if (!p->head && !p->credit_due) {
            (prev ? prev->next_waiting : waiting_head) = next;
            if (waiting_tail == p) {
                waiting_tail = prev;
            }
            p->waiting = false;
            p->next_waiting = nullptr;
            num_waiting = num_waiting - 1;
        } else {
            prev = p;
        }
        if (!room) {
            break;
        }
        p = next;
    }
    return num_waiting;
}

} // namespace efa

// The C seam (efa_msg_flow.h)

extern "C" {

void efa_flow_init(efa_flow_t *f, int32_t window, size_t link_off) {
    efa::MsgFlow::of(f)->init(window, link_off);
}

void efa_flow_peer_init(const efa_flow_t *f, efa_flow_peer_t *p) {
    efa::MsgFlow::of(f)->init_peer(p);
}

void efa_flow_received(efa_flow_t *f, efa_flow_peer_t *p, uint16_t returned, bool counts) {
    efa::MsgFlow::of(f)->received(p, returned, counts);
}

void efa_flow_unsent(efa_flow_t *f, efa_flow_peer_t *p, uint16_t given, bool took_credit) {
    efa::MsgFlow::of(f)->unsent(p, given, took_credit);
}

void efa_flow_enqueue(efa_flow_t *f, efa_flow_peer_t *p, void *item) {
    efa::MsgFlow::of(f)->enqueue(p, item);
}

void *efa_flow_pop(efa_flow_t *f, efa_flow_peer_t *p) {
    return efa::MsgFlow::of(f)->pop(p);
}

void efa_flow_push_front(efa_flow_t *f, efa_flow_peer_t *p, void *item) {
    efa::MsgFlow::of(f)->push_front(p, item);
}

void efa_flow_dequeue_through(efa_flow_t *f, efa_flow_peer_t *p, void *last) {
    efa::MsgFlow::of(f)->dequeue_through(p, last);
}

void efa_flow_requeue_front(efa_flow_t *f, efa_flow_peer_t *p, void *first, void *last) {
    efa::MsgFlow::of(f)->requeue_front(p, first, last);
}

int32_t efa_flow_drain(efa_flow_t *f, bool (*drain_peer)(void *arg, efa_flow_peer_t *p),
                       void *arg) {
    return efa::MsgFlow::of(f)->drain(drain_peer, arg);
}

} // extern "C"
