// Matching for the matching engine: the posted-receive queue and the
// unexpected-message queue, MPI's rules and nothing else (no I/O).
//
// Both queues are FIFO lists threaded through the entries themselves
// (efa_engine_link_t), so posting and matching allocate nothing.  One
// queue each for the whole engine, searched from the front: MPI's order is
// "the first posted receive that matches" and "the first arrived message
// that matches", and in the common cases (receives posted in the order
// messages come) the match is at the front.
#ifndef EFA_ENGINE_MATCH_HPP
#define EFA_ENGINE_MATCH_HPP

#include <cstddef>
#include <cstdint>

#include "efa_engine.h"
#include "path_counts.hpp"

namespace efa::engine {

struct Envelope {
    uint32_t cid;
    int32_t src;
    int32_t tag;
};

// Does a receive for (cid, src, tag) take a message sent as m?  A wildcard
// tag never takes a negative tag (Open MPI's own traffic).
inline bool matches(uint32_t cid, int32_t src, int32_t tag, const Envelope &m) {
    return cid == m.cid && (EFA_ENGINE_ANY == src || src == m.src) &&
           (EFA_ENGINE_ANY == tag ? m.tag >= 0 : tag == m.tag);
}

// A message that arrived before its receive.  What follows the envelope
// is the engine's (engine.cpp): the frame's protocol fields and,
// for a small message, its bytes.
struct Message {
    efa_engine_link_t link; // first
    Envelope env;
    uint8_t type;
    uint8_t flags;
    uint32_t sender; // vpid
    uint64_t id;     // the sender's request
    size_t len;      // the message's length
    uint64_t addr;   // rendezvous: where the bytes are in the sender
    uint64_t cookie_addr, cookie;
    uint32_t pid;
    uint32_t rails;            // a read offer: NICs the sender registered on (striped reads)
    uint64_t rail_key[3];      // its keys on the sender's NIC 1, 2, 3
    uint32_t via;              // the ring it came by (deliver()'s ring): its sender
    uint64_t seq;              // its number among the messages that came by 'via' (from 1)
    alignas(8) uint8_t data[]; // eager: len bytes
};

// An intrusive FIFO.
class List {
  public:
    List() { head_.prev = head_.next = &head_; }
    List(const List &) = delete;
    List &operator=(const List &) = delete;
    bool empty() const { return head_.next == &head_; }
    size_t size() const { return size_; }
    efa_engine_link_t *front() { return empty() ? nullptr : head_.next; }
    efa_engine_link_t *end() { return &head_; }
    void push_back(efa_engine_link_t *l) {
        l->prev = head_.prev;
        l->next = &head_;
        head_.prev->next = l;
        head_.prev = l;
        ++size_;
    }
    // Unlinks l and marks it unlinked (next == nullptr).
    void remove(efa_engine_link_t *l) {
        l->prev->next = l->next;
        l->next->prev = l->prev;
        l->next = l->prev = nullptr;
        --size_;
    }

  private:
    efa_engine_link_t head_;
    size_t size_ = 0;
};

inline efa_engine_req_t *req_of(efa_engine_link_t *l) {
    return reinterpret_cast<efa_engine_req_t *>(reinterpret_cast<char *>(l) -
                                                offsetof(efa_engine_req_t, link));
}
inline Message *msg_of(efa_engine_link_t *l) {
    return reinterpret_cast<Message *>(l);
}

// A receive that only processes of this node can match (its source is on
// this node, or it takes any source of a communicator with no process
// elsewhere): while only such receives wait, nothing the process waits for
// can come from the provider (efa_engine_recv_local).  One of the engine's
// request flags (engine.hpp), kept here because the queue counts it.
constexpr uint8_t kReqLocal = 128;

class Matcher {
  public:
    // A new receive (r->cid, r->src, r->tag): the first waiting message it
    // takes, removed from the queue; or nullptr, and r waits in the posted
    // queue.
    Message *post(efa_engine_req_t *r);
    // A new message: the first posted receive that takes it, removed; or
    // nullptr (the caller then queues the message with add_unexpected).
    efa_engine_req_t *arrive(const Envelope &env);
    void add_unexpected(Message *m) {
        unexpected_.push_back(&m->link);
        counts::add(counts::kUnexpected, 1);
        counts::peak(counts::kUnexpectedPeak, unexpected_.size());
    }
    // The first waiting message a receive for (cid, src, tag) would take;
    // removed from the queue if 'take'.
    Message *probe(uint32_t cid, int32_t src, int32_t tag, bool take);
    // Remove a receive still waiting; false if it matched already.
    bool cancel(efa_engine_req_t *r);
    // Remove the waiting message number 'seq' of those that came by ring
    // 'via'; nullptr if none waits (it matched, or was claimed by a probe)
    // or seq is 0 (no message's number).
    Message *withdraw(uint32_t via, uint64_t seq);

    size_t posted() const { return posted_.size(); }
    // Of those, the receives a process on another node may match (not
    // kReqLocal): the ones the provider must be polled for.
    size_t posted_net() const { return posted_net_; }
    // Calls f(r) for every receive waiting in the posted queue, in order
    // (f must not change the queue).
    template <class F> void each_posted(F &&f) {
        for (efa_engine_link_t *l = posted_.front(); l && l != posted_.end(); l = l->next) {
            f(req_of(l));
        }
    }
    size_t unexpected() const { return unexpected_.size(); }
    // Hand every waiting message to f (which frees it) and empty the queue.
    template <class F> void drain_unexpected(F &&f) {
        while (efa_engine_link_t *l = unexpected_.front()) {
            unexpected_.remove(l);
            f(msg_of(l));
        }
    }

    // Hand communicator cid's waiting messages to f (which frees them),
    // taken out of the queue; how many.
    template <class F> size_t drain_unexpected_of(uint32_t cid, F &&f) {
        size_t n = 0;
        for (efa_engine_link_t *l = unexpected_.front(); l && l != unexpected_.end();) {
            efa_engine_link_t *next = l->next;
            if (msg_of(l)->env.cid == cid) {
                unexpected_.remove(l);
                f(msg_of(l));
                ++n;
            }
            l = next;
        }
        return n;
    }

  private:
    void unposted(const efa_engine_req_t *r) { posted_net_ -= (r->flags & kReqLocal) ? 0 : 1; }

    List posted_;
    List unexpected_;
    size_t posted_net_ = 0;
};

} // namespace efa::engine

#endif
