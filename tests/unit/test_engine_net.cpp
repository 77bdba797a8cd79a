// The matching engine reaching a peer through the provider (net_link.hpp):
// one engine without rings sends to itself through a whole core on the shm
// provider (from context 1 to context 0's untagged receive pool), as it
// would to a process on another node.  Eager and streamed rendezvous
// messages, synchronous sends, packing of queued messages (and none when
// it is off), and MPI order kept when the provider's messages arrive
// swapped.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>
#include <unistd.h>

#include "efa_core.h"
#include "efa_engine.h"
#include "net_link_fixture.hpp"
#include "engine_test_req.hpp"

namespace {

using engine_test::EngineNet;
using engine_test::note;
using engine_test::pattern;
using engine_test::Req;

} // namespace

TEST_F(EngineNet, EagerAndStreamedRendezvous) {
    open(16, 4096);
    auto small = pattern(100, 1), large = pattern(200000, 2);
    std::vector<Req> sends(2), recvs(2);
    note(send(small, 1, false, sends[0]), sends[0]);
    note(send(large, 2, false, sends[1]), sends[1]);
    std::vector<uint8_t> got_small(100), got_large(200000);
    recv(got_small, 1, recvs[0]);
    recv(got_large, 2, recvs[1]);
    ASSERT_TRUE(wait_all(recvs));
    ASSERT_TRUE(wait_all(sends));
    EXPECT_EQ(small, got_small);
    EXPECT_EQ(large, got_large);
    EXPECT_EQ(0, recvs[1].on.err);
    EXPECT_EQ(200000u, recvs[1].on.msg_len);
    const auto s = stats();
    EXPECT_EQ(1u, s.rendezvous);
    EXPECT_EQ(1u, s.streamed);
    EXPECT_EQ(0u, s.single_copy); // never across nodes
    EXPECT_GT(s.net_sent, 2u);
    EXPECT_EQ(s.net_sent, s.net_received);
    EXPECT_EQ(0u, s.dropped);
}

// The forced direct mode: provider messages of at most 2 KiB, arriving in
// swapped pairs; eager and streamed messages still arrive whole and in
// MPI order.
TEST_F(EngineNet, DirectModeSmallMtuAndSwappedArrivals) {
    open(16, 1024, false, 2048);
    constexpr int kN = 20;
    std::vector<std::vector<uint8_t>> bufs;
    std::vector<Req> sends(kN), recvs(kN);
    for (int i = 0; i < kN; ++i) {
        // every fourth one far over the MTU (streamed), the others eager
        bufs.push_back(pattern(i % 4 == 3 ? 50000 + i : 100 + i, static_cast<uint8_t>(i)));
        note(send(bufs.back(), 13, false, sends[i]), sends[i]);
    }
    std::vector<std::vector<uint8_t>> got(kN, std::vector<uint8_t>(60000));
    for (int i = 0; i < kN; ++i) {
        recv(got[i], 13, recvs[i]);
    }
    ASSERT_TRUE(wait_all(recvs));
    ASSERT_TRUE(wait_all(sends));
    for (int i = 0; i < kN; ++i) {
        ASSERT_EQ(bufs[i].size(), recvs[i].on.msg_len) << "message " << i << " out of order";
        got[i].resize(bufs[i].size());
        EXPECT_EQ(bufs[i], got[i]) << "message " << i;
    }
    const auto s = stats();
    EXPECT_GT(s.streamed, 0u);
    EXPECT_GT(s.net_reordered, 0u) << "the core's swap put nothing out of order";
    EXPECT_EQ(0u, s.dropped);
}

TEST_F(EngineNet, SynchronousSendWaitsForTheMatch) {
    open(16, 4096);
    auto msg = pattern(64, 3);
    std::vector<Req> sends(1), recvs(1);
    note(send(msg, 7, true, sends[0]), sends[0]);
    for (int i = 0; i < 20000; ++i) {
        progress();
    }
    EXPECT_EQ(0, sends[0].completions) << "a synchronous send completed before its match";
    std::vector<uint8_t> got(64);
    recv(got, 7, recvs[0]);
    ASSERT_TRUE(wait_all(recvs));
    ASSERT_TRUE(wait_all(sends));
    EXPECT_EQ(msg, got);
}

// With one provider message in flight per peer, the messages posted
// meanwhile are packed; they arrive whole and in order.
TEST_F(EngineNet, QueuedMessagesArePackedAndKeepTheirOrder) {
    open(1, 4096);
    constexpr int kN = 60;
    send_burst_in_order(kN);
    const auto s = stats();
    EXPECT_GT(s.net_batched, 0u);
    EXPECT_LT(s.net_sent, static_cast<uint64_t>(kN));
    // A burst between two progress calls injects its first message only.
    EXPECT_LE(s.net_injected, 1u);
}

// A burst of kBurst small messages to one peer (the window 16): they
// arrive whole and in order; returns the provider messages it took.
class EngineNetBurst : public EngineNet {
  protected:
    static constexpr int kBurst = 60;
    uint64_t burst() {
        open(16, 4096);
        // (a first message makes the peer known: until then its messages
        // queue, and go packed whatever the windows)
        EXPECT_TRUE(send_one_and_receive(pattern(8, 1), 8));
        const uint64_t before = stats().net_sent;
        send_burst_in_order(kBurst);
        return stats().net_sent - before;
    }
};

// Such a burst packs once small_window messages are in flight, though the
// window would let more go alone: the first injected, one posted alone,
// the rest packed 64 at most.
TEST_F(EngineNetBurst, SmallMessagesPackBeyondTheSmallWindow) {
    small_window = 2;
    EXPECT_LE(burst(), 4u);
}

// With the small window as large as the window, the same burst takes a
// provider message per message up to the window.
TEST_F(EngineNetBurst, ASmallWindowAsLargeAsTheWindowPacksLater) {
    small_window = 16;
    EXPECT_GE(burst(), 16u);
}

// A lone small message goes by inject (no completion to reap); one per
// progress call and peer, so that a ping-pong injects every message.
TEST_F(EngineNet, LoneSmallMessagesGoByInject) {
    open(16, 4096);
    if (0 == efa_core_get_info(core)->inject_size) {
        GTEST_SKIP() << "the provider has no inject";
    }
    constexpr int kN = 5;
    for (int i = 0; i < kN; ++i) {
        auto msg = pattern(32, static_cast<uint8_t>(i));
        std::vector<Req> sends(1), recvs(1);
        note(send(msg, 21, false, sends[0]), sends[0]);
        std::vector<uint8_t> got(32);
        recv(got, 21, recvs[0]);
        ASSERT_TRUE(wait_all(recvs));
        ASSERT_TRUE(wait_all(sends));
        EXPECT_EQ(msg, got) << "message " << i;
    }
    const auto s = stats();
    EXPECT_EQ(static_cast<uint64_t>(kN), s.net_sent);
    EXPECT_EQ(static_cast<uint64_t>(kN), s.net_injected);
    EXPECT_EQ(s.net_sent, s.net_received);
}

// ... unless switched off (net_no_inject).
TEST_F(EngineNet, NoInjectWhenOff) {
    no_inject = true;
    open(16, 4096);
    EXPECT_TRUE(send_one_and_receive(pattern(32, 7), 22));
    EXPECT_EQ(0u, stats().net_injected);
}

TEST_F(EngineNet, NoPackingWhenCoalescingIsOff) {
    open(1, 0);
    constexpr int kN = 30;
    auto msg = pattern(16, 4);
    std::vector<Req> sends(kN), recvs(kN);
    for (int i = 0; i < kN; ++i) {
        note(send(msg, 11, false, sends[i]), sends[i]);
    }
    std::vector<std::vector<uint8_t>> got(kN, std::vector<uint8_t>(16));
    for (int i = 0; i < kN; ++i) {
        recv(got[i], 11, recvs[i]);
    }
    ASSERT_TRUE(wait_all(recvs));
    ASSERT_TRUE(wait_all(sends));
    for (auto &g : got) {
        EXPECT_EQ(msg, g);
    }
    const auto s = stats();
    EXPECT_EQ(0u, s.net_batched);
    EXPECT_GE(s.net_sent, static_cast<uint64_t>(kN));
}

// The test hook swaps arriving provider messages in pairs: the sequence
// numbers put them back, so receives see the messages in the order sent.
TEST_F(EngineNet, SwappedArrivalsAreReordered) {
    open(64, 0, true);
    constexpr int kN = 41;
    std::vector<std::vector<uint8_t>> bufs;
    std::vector<Req> sends(kN), recvs(kN);
    std::vector<std::vector<uint8_t>> got(kN, std::vector<uint8_t>(64));
    for (int i = 0; i < kN; ++i) {
        recv(got[i], 13, recvs[i]);
    }
    for (int i = 0; i < kN; ++i) {
        bufs.push_back(pattern(20 + i % 7, static_cast<uint8_t>(i)));
        note(send(bufs.back(), 13, false, sends[i]), sends[i]);
        progress();
    }
    ASSERT_TRUE(wait_all(recvs));
    for (int i = 0; i < kN; ++i) {
        got[i].resize(recvs[i].on.msg_len);
        EXPECT_EQ(bufs[i], got[i]) << "message " << i;
    }
    EXPECT_GT(stats().net_reordered, 0u);
}
