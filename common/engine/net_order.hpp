// Putting the engine's messages from other nodes back in the order they
// were sent.
//
// The matching engine relies on each sender's frames arriving in the order
// they were written (that is what gives MPI's non-overtaking order).  A
// ring keeps that order by itself; the provider need not: a sender's
// messages may leave by several endpoints, and a provider like efa-direct
// promises no order at all.  So each provider message carries a sequence
// number per (sender, receiver), counted from 0, and the receiver hands
// messages on strictly in that order: one that comes early is copied and
// held until the ones before it are in; one whose number was handed on
// already (a duplicate) or lies absurdly far ahead (a corrupted header)
// is dropped and counted.  What it holds is bounded by the sender, which
// sends no further than the receiver's grant (net_link.hpp), and the
// engine's window is that credit: a number beyond it (a corrupted header,
// a sender that ignores its grant) is dropped, not held.  No I/O here: unit-tested alone
// (tests/unit/test_net_order.cpp).
#ifndef EFA_NET_ORDER_HPP
#define EFA_NET_ORDER_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace efa::engine {

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
        : next_(senders, 0), held_(senders), held_bytes_(senders, 0), window_(window) {}

    // A message (len bytes at msg) numbered seq arrived from sender:
    // deliver(msg, len) is called for it and for every held one it
    // unblocks, in sequence order.  deliver must not call arrive().
    template <class F>
    Verdict arrive(uint32_t sender, uint64_t seq, const uint8_t *msg, size_t len, F &&deliver) {
        if (sender >= next_.size()) {
            __atomic_fetch_add(&dropped_, 1, __ATOMIC_RELAXED);
            return Verdict::kTooFar;
        }
        uint64_t &next = next_[sender];
        if (seq < next) {
            ++(UINT64_MAX == next ? discarded_ : duplicates_);
            return Verdict::kDuplicate;
        }
        if (seq != next) {
            if (seq - next > window_) {
                __atomic_fetch_add(&dropped_, 1, __ATOMIC_RELAXED);
                return Verdict::kTooFar;
            }
            if (held_[sender].count(seq)) {
                ++duplicates_;
                return Verdict::kDuplicate;
            }
            held_[sender].emplace(seq, std::vector<uint8_t>(msg, msg + len));
            ++held_count_;
            held_bytes_[sender] += len;
            held_bytes_max_ = std::max(held_bytes_max_, held_bytes_[sender]);
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
            held_bytes_[sender] -= m.size();
            deliver(m.data(), m.size());
            ++next;
        }
        return Verdict::kDelivered;
    }

    // Senders whose stream has stood still for limit_ms: messages of theirs
    // are held, waiting for one that has not come, and the one awaited is
    // the same as at least limit_ms ago (now_ms: a monotonic clock).  On a
    // reliable provider such a gap means the provider lost that message;
    // the caller fails the sender.  Each call remembers where every
    // blocked stream stands; a stream that moved starts over.
    std::vector<uint32_t> stalled(uint64_t now_ms, uint64_t limit_ms) {
        std::vector<uint32_t> out;
        if (0 == held_count_) {
            return out;
        }
        if (since_.size() != next_.size()) {
            since_.assign(next_.size(), Mark{});
        }
        for (uint32_t s = 0; s < next_.size(); ++s) {
            Mark &m = since_[s];
            if (held_[s].empty()) {
                m = Mark{};
                continue;
            }
            // (the caller's clock leaves out time away from progress,
            // whose sum threads may overcount: it can step back)
            if (!m.armed || m.next != next_[s]) {
                m = Mark{true, next_[s], now_ms};
            } else if (now_ms >= m.at && now_ms - m.at >= limit_ms) {
                out.push_back(s);
            }
        }
        return out;
    }

    // Forget what sender's stream holds (it was failed): its held messages
    // are dropped and counted, and so is everything it sends later.
    void close(uint32_t sender) {
        if (sender >= next_.size()) {
            return;
        }
        discarded_ += held_[sender].size();
        held_count_ -= held_[sender].size();
        held_[sender].clear();
        held_bytes_[sender] = 0;
        next_[sender] = UINT64_MAX; // nothing numbered can be next again
    }

    // The number the next message from sender must carry.
    uint64_t next(uint32_t sender) const { return sender < next_.size() ? next_[sender] : 0; }
    size_t held() const { return held_count_; }
    size_t held(uint32_t sender) const { return sender < held_.size() ? held_[sender].size() : 0; }
    size_t held_bytes(uint32_t sender) const {
        return sender < held_bytes_.size() ? held_bytes_[sender] : 0;
    }
    // The most bytes ever held for one sender.
    size_t held_bytes_max() const { return held_bytes_max_; }
    uint64_t reordered() const { return reordered_; }
    // (read without the engine's lock: atomic)
    uint64_t dropped() const { return __atomic_load_n(&dropped_, __ATOMIC_RELAXED); }
    // Copies of messages handed on or held already (a message sent again
    // over another rail after its own failed, though it had come): no
    // corruption, not among dropped().
    uint64_t duplicates() const { return duplicates_; }
    // Messages of closed streams: held when closed, or arrived after.
    uint64_t discarded() const { return discarded_; }

  private:
    struct Mark {
        bool armed = false; // a gap was seen at this sender's 'next'
        uint64_t next = 0;
        uint64_t at = 0; // when
    };
    std::vector<Mark> since_;
    std::vector<uint64_t> next_;
    std::vector<std::map<uint64_t, std::vector<uint8_t>>> held_;
    std::vector<size_t> held_bytes_; // by sender
    size_t held_bytes_max_ = 0;
    uint64_t window_;
    size_t held_count_ = 0;
    uint64_t reordered_ = 0;
    uint64_t dropped_ = 0;
    uint64_t duplicates_ = 0;
    uint64_t discarded_ = 0;
};

} // namespace efa::engine

#endif
