// The receiver's restoring of each sender's order (net_order.hpp):
// messages handed on strictly by sequence number, early ones held and
// released by the one they waited for, duplicates and absurd numbers
// dropped.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net_order.hpp"

using efa::engine::NetOrder;
using V = NetOrder::Verdict;

namespace {

struct Sink {
    std::vector<std::string> got;
    void operator()(const uint8_t *m, size_t len) {
        got.emplace_back(reinterpret_cast<const char *>(m), len);
    }
};

V arrive(NetOrder &o, Sink &s, uint32_t sender, uint64_t seq, const std::string &text) {
    return o.arrive(sender, seq, reinterpret_cast<const uint8_t *>(text.data()), text.size(),
                    [&](const uint8_t *m, size_t l) { s(m, l); });
}

} // namespace

TEST(NetOrder, InOrderGoesStraightThrough) {
    NetOrder o(2);
    Sink s;
    EXPECT_EQ(V::kDelivered, arrive(o, s, 1, 0, "a"));
    EXPECT_EQ(V::kDelivered, arrive(o, s, 1, 1, "b"));
    EXPECT_EQ((std::vector<std::string>{"a", "b"}), s.got);
    EXPECT_EQ(2u, o.next(1));
    EXPECT_EQ(0u, o.next(0));
    EXPECT_EQ(0u, o.reordered());
}

TEST(NetOrder, EarlyMessagesWaitForTheOnesBefore) {
    NetOrder o(1);
    Sink s;
    EXPECT_EQ(V::kHeld, arrive(o, s, 0, 2, "c"));
    EXPECT_EQ(V::kHeld, arrive(o, s, 0, 1, "b"));
    EXPECT_TRUE(s.got.empty());
    EXPECT_EQ(2u, o.held());
    EXPECT_EQ(V::kDelivered, arrive(o, s, 0, 0, "a"));
    EXPECT_EQ((std::vector<std::string>{"a", "b", "c"}), s.got);
    EXPECT_EQ(0u, o.held());
    EXPECT_EQ(2u, o.reordered());
    // A gap stays a gap: 4 waits for 3.
    EXPECT_EQ(V::kHeld, arrive(o, s, 0, 4, "e"));
    EXPECT_EQ(3u, s.got.size());
    EXPECT_EQ(V::kDelivered, arrive(o, s, 0, 3, "d"));
    EXPECT_EQ((std::vector<std::string>{"a", "b", "c", "d", "e"}), s.got);
}

TEST(NetOrder, SendersAreIndependent) {
    NetOrder o(3);
    Sink s;
    EXPECT_EQ(V::kHeld, arrive(o, s, 0, 1, "0b"));
    EXPECT_EQ(V::kDelivered, arrive(o, s, 2, 0, "2a"));
    EXPECT_EQ(V::kDelivered, arrive(o, s, 0, 0, "0a"));
    EXPECT_EQ((std::vector<std::string>{"2a", "0a", "0b"}), s.got);
}

TEST(NetOrder, DuplicatesAndCorruptedNumbersAreDropped) {
    NetOrder o(2, 100);
    Sink s;
    EXPECT_EQ(V::kDelivered, arrive(o, s, 0, 0, "a"));
    EXPECT_EQ(V::kDuplicate, arrive(o, s, 0, 0, "a again"));
    EXPECT_EQ(V::kHeld, arrive(o, s, 0, 5, "f"));
    EXPECT_EQ(V::kDuplicate, arrive(o, s, 0, 5, "f again"));
    EXPECT_EQ(V::kTooFar, arrive(o, s, 0, 1000, "far"));
    EXPECT_EQ(V::kTooFar, arrive(o, s, 7, 0, "no such sender"));
    EXPECT_EQ(2u, o.dropped());    // corrupted numbers: kTooFar
    EXPECT_EQ(2u, o.duplicates()); // copies (a message sent again over another rail)
    EXPECT_EQ((std::vector<std::string>{"a"}), s.got);
    EXPECT_EQ(1u, o.held());
}

TEST(NetOrder, HeldBytesAreCopies) {
    NetOrder o(1);
    Sink s;
    std::string early = "early";
    EXPECT_EQ(V::kHeld, arrive(o, s, 0, 1, early));
    early = "XXXXX"; // the provider reuses its receive buffer
    EXPECT_EQ(V::kDelivered, arrive(o, s, 0, 0, "first"));
    EXPECT_EQ((std::vector<std::string>{"first", "early"}), s.got);
}

// A gap that stays open is reported once it has stood still for the limit;
// one that moves starts the clock again, and a stream without held
// messages is never stalled.
TEST(NetOrder, StalledAfterTheGapStandsStillForTheLimit) {
    NetOrder o(3);
    Sink s;
    EXPECT_TRUE(o.stalled(0, 100).empty()); // nothing held
    arrive(o, s, 1, 0, "a");
    EXPECT_EQ(V::kHeld, arrive(o, s, 1, 2, "c")); // 1 is missing
    EXPECT_EQ(V::kHeld, arrive(o, s, 2, 1, "y")); // 0 is missing
    EXPECT_TRUE(o.stalled(1000, 100).empty());    // first seen now
    EXPECT_TRUE(o.stalled(1099, 100).empty());
    EXPECT_EQ(V::kDelivered, arrive(o, s, 2, 0, "x")); // sender 2's gap closes
    EXPECT_EQ((std::vector<uint32_t>{1}), o.stalled(1100, 100));
    EXPECT_EQ(V::kHeld, arrive(o, s, 1, 4, "e"));
    EXPECT_EQ(V::kDelivered, arrive(o, s, 1, 1, "b")); // moved: 3 now missing
    EXPECT_TRUE(o.stalled(1200, 100).empty());         // the clock starts again
    EXPECT_EQ((std::vector<uint32_t>{1}), o.stalled(1300, 100));
    EXPECT_EQ(1u, o.held(1));
}

// A closed stream drops what it held and everything it sends later.
TEST(NetOrder, ClosedStreamDropsHeldAndLaterMessages) {
    NetOrder o(2);
    Sink s;
    arrive(o, s, 0, 1, "b");
    arrive(o, s, 0, 2, "c");
    EXPECT_EQ(2u, o.held());
    o.close(0);
    EXPECT_EQ(0u, o.held());
    EXPECT_EQ(V::kDuplicate, arrive(o, s, 0, 0, "a"));
    EXPECT_EQ(3u, o.discarded());
    EXPECT_EQ(0u, o.dropped()); // (dropped counts corrupted headers only)
    EXPECT_TRUE(s.got.empty());
    EXPECT_TRUE(o.stalled(5000, 1).empty());
    EXPECT_EQ(V::kDelivered, arrive(o, s, 1, 0, "z")); // the others flow on
}

// What each sender's early messages take, counted by sender (what the
// credit of net_link.hpp bounds): it grows while they wait, returns to
// 0 once they are handed on or the stream is closed, and the most ever
// held for one sender is kept.
TEST(NetOrder, HeldBytesAreCountedBySender) {
    NetOrder o(2);
    Sink s;
    EXPECT_EQ(V::kHeld, arrive(o, s, 0, 1, "abc"));
    EXPECT_EQ(V::kHeld, arrive(o, s, 0, 2, "defgh"));
    EXPECT_EQ(V::kHeld, arrive(o, s, 1, 3, "zz"));
    EXPECT_EQ(8u, o.held_bytes(0));
    EXPECT_EQ(2u, o.held_bytes(1));
    EXPECT_EQ(8u, o.held_bytes_max());
    EXPECT_EQ(V::kDelivered, arrive(o, s, 0, 0, "x"));
    EXPECT_EQ(0u, o.held_bytes(0));
    EXPECT_EQ(8u, o.held_bytes_max());
    o.close(1);
    EXPECT_EQ(0u, o.held_bytes(1));
    EXPECT_EQ(0u, o.held());
    EXPECT_EQ(0u, o.held_bytes(7)); // not a sender
}
