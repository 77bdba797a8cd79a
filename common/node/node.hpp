// The on-node stack of one process: ONE inbox file serving every component
// that talks to processes of its job on this node (mtl_efa's engine,
// btl_efa's rings), instead of one file per component.
//
// Channels by ring range.  The inbox has nchannels x nlocal rings; channel
// c owns rings [c * nlocal, (c + 1) * nlocal), and a sender of local rank r
// writes ring c * nlocal + r of its peer's inbox.  Each channel polls only
// its own block (shm::Inbox::poll_range), so frames never carry a channel
// byte (frame sizes stay) and one channel that stops reading (the engine
// while it holds a message) never stalls another.
//
// The card.  What a process publishes once, under one modex key, for the
// processes of its node: the inbox's cookie, its local rank, and which
// channels it serves (a bit per channel: a component whose channel is off
// in one process, by choice or by a failure, is then reached by the
// provider there while the other keeps its rings).
//
// Lifetime: refcounted per process (efa_node_acquire/release in
// efa_node.h); the inbox file is unlinked when the last user lets go.
#ifndef EFA_NODE_HPP
#define EFA_NODE_HPP

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "efa_node.h"
#include "shm_ring.hpp"

namespace efa::node {

class Node {
  public:
    // err: 0 or a negative errno (Inbox::create's).
    static std::unique_ptr<Node> create(const efa_node_params_t &p, int &err);

    const std::string &path() const { return inbox_->path(); }
    std::string path_of(uint32_t vpid) const;
    uint32_t nlocal() const { return nlocal_; }
    uint32_t local_rank() const { return local_rank_; }
    size_t max_frame() const { return inbox_->geometry().max_frame(); }
    uint64_t dropped() const { return inbox_->dropped(); }
    efa_node_card_t card() const;

    // reserve: every ring of the channel reserved now (a sender of that
    // channel must never fail to attach for want of room).
    int open_channel(uint32_t c, bool reserve);
    void close_channel(uint32_t c) { channels_ &= ~(1u << c); }

    // Frames of channel c's rings; deliver(ring, frame, len) is told the
    // sender's local rank.
    template <class F>
    __attribute__((always_inline)) int poll(uint32_t c, F &&deliver, int budget) {
        return inbox_->poll_range(c * nlocal_, nlocal_, static_cast<F &&>(deliver), budget);
    }
    // The inbox itself, for a channel that polls its block of rings
    // (c * nlocal(), nlocal()) on its own hot path.
    shm::Inbox *inbox() const { return inbox_.get(); }

    // This process's ring of channel c in the inbox of process vpid, whose
    // card is 'card': -ENOENT when that process does not serve channel c,
    // else Outbox::attach's errors.
    // When the name does not lead to the inbox, the process's own
    // descriptor of it (card.inbox_fd) does (counted: by_descriptor()).
    std::unique_ptr<shm::Outbox> attach(uint32_t vpid, const efa_node_card_t &card, uint32_t c,
                                        int &err) const;
    uint32_t by_descriptor() const { return by_descriptor_.load(std::memory_order_relaxed); }

  private:
    Node() = default;
    std::unique_ptr<shm::Inbox> inbox_;
    std::string dir_, job_tag_;
    uint32_t local_rank_ = 0, nlocal_ = 0, channels_ = 0;
    mutable std::atomic<uint32_t> by_descriptor_{0};
};

// The C handle's object (for the engine, which takes an efa_node_t *).
Node &of(efa_node_t *n);
// A handle of its own for n, not the process's node (tests that play
// several processes in one): efa_node_release frees it.
efa_node_t *adopt(std::unique_ptr<Node> n);

} // namespace efa::node

// The C handle (efa_node.h): the node and the references to it.
struct efa_node {
    std::unique_ptr<efa::node::Node> node;
    unsigned refs = 0;
};

#endif
