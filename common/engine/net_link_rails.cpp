// The matching engine's link over several NICs (net_link.hpp, "Rails"):
// which rails a peer's messages leave for good and which one takes over
// (its home), posts that move a peer off a rail the core refuses, and the
// injected messages kept for a first rail that may fail.  What a failed
// send carried goes again from net_link.cpp's fail_over.
#include <cstring>

#include <rdma/fi_errno.h>

#include "efa_core_msg.h"
#include "net_link.hpp"

namespace efa::engine {

namespace {
// Injected messages kept for a first rail that may fail (Peer::kept): per
// peer (a round trip needs one: the answer's grant confirms it), and in
// all, so that kept buffers never starve the link (max_bufs).
constexpr uint32_t kKeptPerPeer = 4;
constexpr uint32_t kKeptMax = 64;

uint64_t buf_seq(const uint8_t *data) {
    NetHdr h;
    memcpy(&h, data, sizeof(h));
    return h.seq;
}
} // namespace

void NetLink::set_inject(Peer *p) const {
    const bool alone = 1u == p->live || !params_.rail_failover; // nothing to fail over to
    p->may_inject = 0 == p->rail && alone;
    p->keep_injected = 0 == p->rail && !alone;
}

bool NetLink::can_keep(const Peer *p) const {
    return p->kept_n < kKeptPerPeer && kept_ < kKeptMax;
}

void NetLink::keep(Peer *p, Buf *b) {
    b->next_free = p->kept;
    p->kept = b;
    ++p->kept_n;
    ++kept_;
}

// p's grant (p->limit) says how many of this process's messages p has
// handed on: limit - credit (both ends run with the same window, so the
// same credit).  The kept ones below that are done.
void NetLink::confirm_kept(Peer *p) {
    const uint64_t handed_on = p->limit > params_.credit ? p->limit - params_.credit : 0;
    for (Buf **at = &p->kept; *at;) {
        Buf *b = *at;
        if (buf_seq(b->data) >= handed_on) {
            at = &b->next_free;
            continue;
        }
        *at = b->next_free;
        b->next_free = free_;
        free_ = b;
        --p->kept_n;
        --kept_;
    }
}

// The first rail left p: its injected messages not known handed on go
// again over the home rail (posted from progress, counted in flight
// like any; p drops the copies of those that had arrived), and the
// grant said by inject last is said again.
void NetLink::resend_kept(Peer *p) {
    while (Buf *b = p->kept) {
        p->kept = b->next_free;
        --p->kept_n;
        --kept_;
        ++p->inflight;
        ++inflight_;
        resend_.push_back(b);
        ++stats_.failed_over;
        pending_ = true;
    }
    if (p->grant_out > kFirstGrant) {
        p->grant_said = 0;
        if (!p->grant_due) {
            p->grant_due = true;
            grants_.push_back(p);
            pending_ = true;
        }
    }
}

// p's messages leave rail for good: those that were its own go over its
// home rail (the lowest left), and its turns skip it.
void NetLink::drop_rail(Peer *p, int rail) {
    p->turn_mask = static_cast<uint8_t>(p->turn_mask & ~(1u << rail));
    p->live = static_cast<uint8_t>(p->live & ~(1u << rail));
    if (p->live && !(p->live & (1u << p->home))) {
        p->home = static_cast<uint8_t>(__builtin_ctz(p->live));
    }
    if (p->rail == rail) {
        p->rail = p->home;
        p->ctx = p->rail_ctx[p->home];
        p->addr = p->rail_addr[p->home];
    }
    set_inject(p);
    if (0 == rail) {
        resend_kept(p);
    }
}

// Rails the core put back for p (bits of 'rails', each left): p's
// messages take them again, in turn where they
// took turns before, p's own rail is its rail again, and the home is the
// lowest rail again (the first, once it is back).  The peer's stream is
// ordered by sequence numbers, whatever rail each message takes.
void NetLink::take_back(Peer *p, uint8_t rails) {
    for (; rails; rails &= static_cast<uint8_t>(rails - 1)) {
        const int r = __builtin_ctz(rails);
        const auto bit = static_cast<uint8_t>(1u << r);
        if (!p->rail_ctx[r]) {
            continue;
        }
        p->live = static_cast<uint8_t>(p->live | bit);
        p->back = static_cast<uint8_t>(p->back | bit);
        if (p->turn_rails & bit) {
            p->turn_mask = static_cast<uint8_t>(p->turn_mask | bit);
        }
        if (p->own_rail == r && p->rail != r) { // (its home stays: the lowest left)
            p->rail = r;
            p->ctx = p->rail_ctx[r];
            p->addr = p->rail_addr[r];
        }
        ++stats_.taken_back;
    }
    if (p->live) {
        p->home = static_cast<uint8_t>(__builtin_ctz(p->live));
    }
    set_inject(p);
}

void NetLink::leave_rails_out() {
    if (!params_.rail_failover) {
        return;
    }
    for (const std::unique_ptr<Peer> &up : peers_) {
        Peer *p = up.get();
        if (!p->rails_down) {
            continue; // not known
        }
        // Put back by the core since the last sweep, however p left them
        // (here, a post the core refused, a failed send): taken again.  A
        // rail left for a failure the core never saw stays left.  (The
        // core clears a rail's down bit before it sets its back bit: the
        // down bits are read after the back bits are taken, so that none
        // taken is masked by a down bit read before it was cleared.)
        if (p->rails_back && __atomic_load_n(p->rails_back, __ATOMIC_RELAXED)) {
            const uint32_t back = __atomic_exchange_n(p->rails_back, 0u, __ATOMIC_ACQ_REL);
            const uint32_t down_now = __atomic_load_n(p->rails_down, __ATOMIC_ACQUIRE);
            if (const auto rails = static_cast<uint8_t>(back & ~down_now & ~p->live)) {
                take_back(p, rails);
            }
        }
        const uint32_t down = __atomic_load_n(p->rails_down, __ATOMIC_RELAXED);
        if (p->live == (p->live & -p->live)) {
            continue; // one rail left: its loss is the peer's
        }
        uint32_t out = down & p->live;
        while (out && p->live != out) {
            const int r = __builtin_ctz(out);
            out &= out - 1;
            drop_rail(p, r);
        }
    }
}

// The same, where failover is on: true when rail is out for p now (or
// was already), false when it is p's last rail or failover is off.
// Whatever else p has in flight on the rail fails too and comes to
// fail_over.
bool NetLink::leave_rail(Peer *p, int rail) {
    if (!params_.rail_failover) {
        return false;
    }
    if (p->live & (1u << rail)) {
        if (p->live == (1u << rail)) {
            return false;
        }
        drop_rail(p, rail);
    }
    return 0 != p->live && rail != p->home; // (a home to go to: each failure there drops it)
}

// b to p over 'rail', with a completion (desc: the rail's registration of
// the slab).
int NetLink::send_on(Peer *p, Buf *b, int rail) {
    void *desc = rail && b->mr ? efa_mr_rail_desc(b->mr, rail) : b->desc;
    b->rail = rail;
    return efa_ctx_try_send(p->rail_ctx[rail], b->data, b->used, desc, p->rail_addr[rail], &b->op);
}

// b to p over 'rail', with a completion; a rail the core refuses (the
// peer's rail taken out before this message's turn) leaves p and the
// message goes over its home rail.
int NetLink::post_buf(Peer *p, Buf *b, int rail) {
    if (rail && b->mr && !efa_mr_rail_desc(b->mr, rail)) {
        // The rail's domain has no registration of this slab (refused):
        // where the provider wants descriptors, the peer keeps off it,
        // unless it is the peer's last (then the message cannot go).
        if (0 == (p->live & ~(1u << rail))) {
            return -FI_ENOMEM;
        }
        drop_rail(p, rail);
        rail = p->home;
    }
    int rc = send_on(p, b, rail);
    while (rc && -FI_EAGAIN != rc && leave_rail(p, rail)) { // (each turn one rail fewer)
        rail = p->home;
        rc = send_on(p, b, rail);
    }
    if (0 == rc && rail) {
        ++stats_.rail_sent;
        stats_.turns += rail != p->rail ? 1 : 0;
    }
    return rc;
}

} // namespace efa::engine
