// Putting the engine's messages from other nodes back in the order they
// were sent.
//
// The on-node engine relies on each sender's frames arriving in the order
// they were written (that is what gives MPI's non-overtaking order).  A
// ring keeps that order by itself; the provider need not: a sender's
// messages may leave by several endpoints, and a provider like efa-direct
// promises no order at all.  So each provider message carries a sequence
// number per (sender, receiver), counted from 0, and the receiver hands
// messages on strictly in that order: one that comes early is copied and
// held until the ones before it are in; one whose number was handed on
// already (a duplicate) or lies absurdly far ahead (a corrupted header)
// is dropped and counted.  No I/O here: unit-tested alone
// (tests/unit/test_net_order.cpp).
#ifndef EFA_NET_ORDER_HPP
#define EFA_NET_ORDER_HPP

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace efa::onnode {

class NetOrder {
  public:
    enum class Verdict {
        kDelivered, // handed on, with every held message it unblocked
        kHeld,      // early: copied and kept
        kDuplicate, // its number was handed on already: dropped
        kTooFar,    // beyond the window, or an unknown sender: dropped
    };

    // senders: every sender is below it; window: how far ahead of the
    // next expected number a message may be and still be held.
    explicit NetOrder(uint32_t senders = 0, uint64_t window = 1u << 16)
        : next_(senders, 0), held_(senders), window_(window) {}

    // A message (len bytes at msg) numbered seq arrived from sender:
    // deliver(msg, len) is called for it and for every held one it
    // unblocks, in sequence order.  deliver must not call arrive().
    template <class F>
    Verdict arrive(uint32_t sender, uint64_t seq, const uint8_t *msg, size_t len, F &&deliver) {
        if (sender >= next_.size()) {
            ++dropped_;
            return Verdict::kTooFar;
        }
        uint64_t &next = next_[sender];
        if (seq < next) {
            ++dropped_;
            return Verdict::kDuplicate;
        }
        if (seq != next) {
            if (seq - next > window_ || held_[sender].count(seq)) {
                ++dropped_;
                return seq - next > window_ ? Verdict::kTooFar : Verdict::kDuplicate;
            }
            held_[sender].emplace(seq, std::vector<uint8_t>(msg, msg + len));
            ++held_count_;
            ++reordered_;
            return Verdict::kHeld;
        }
        deliver(msg, len);
        ++next;
        auto &h = held_[sender];
        while (!h.empty() && h.begin()->first == next) {
            std::vector<uint8_t> m = std::move(h.begin()->second);
            h.erase(h.begin());
            --held_count_;
            deliver(m.data(), m.size());
            ++next;
        }
        return Verdict::kDelivered;
    }

    // The number the next message from sender must carry.
    uint64_t next(uint32_t sender) const { return sender < next_.size() ? next_[sender] : 0; }
    size_t held() const { return held_count_; }
    uint64_t reordered() const { return reordered_; }
    uint64_t dropped() const { return dropped_; }

  private:
    std::vector<uint64_t> next_;
    std::vector<std::map<uint64_t, std::vector<uint8_t>>> held_;
    uint64_t window_;
    size_t held_count_ = 0;
    uint64_t reordered_ = 0;
    uint64_t dropped_ = 0;
};

} // namespace efa::onnode

#endif
