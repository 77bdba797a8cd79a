// The matching engine's provider messages at their limits (net_link.hpp):
// frames that fill a buffer whose size is not a multiple of the frame
// alignment (an odd common_efa_direct_mode_mtu), and the credit that
// bounds what a receiver holds for a sender after a message comes late.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "efa_engine.h"
#include "net_link.hpp"
#include "net_link_fixture.hpp"
#include "engine_test_req.hpp"

namespace {

using engine_test::EngineNet;
using engine_test::note;
using engine_test::pattern;
using engine_test::Req;

class EngineNetOddMtu : public EngineNet, public ::testing::WithParamInterface<int> {
  protected:
    // Every size in [from, to), count at a time, synchronous or not: each
    // arrives whole, and no send or receive fails.
    void send_sizes(size_t from, size_t to, bool sync, int32_t t) {
        constexpr size_t kBatch = 48;
        for (size_t first = from; first < to; first += kBatch) {
            const size_t n = std::min(kBatch, to - first);
            std::vector<std::vector<uint8_t>> bufs, got;
            std::vector<Req> sends(n), recvs(n);
            for (size_t i = 0; i < n; ++i) {
                got.emplace_back(first + i + 8);
                recv(got.back(), t, recvs[i]);
            }
            for (size_t i = 0; i < n; ++i) {
                bufs.push_back(pattern(first + i, static_cast<uint8_t>(first + i)));
                note(send(bufs.back(), t, sync, sends[i]), sends[i]);
            }
            ASSERT_TRUE(wait_all(recvs)) << "MTU " << GetParam() << ": sizes " << first << "..";
            ASSERT_TRUE(wait_all(sends)) << "MTU " << GetParam() << ": sizes " << first << "..";
            for (size_t i = 0; i < n; ++i) {
                ASSERT_EQ(0, sends[i].on.err) << "MTU " << GetParam() << ", " << first + i << " B";
                ASSERT_EQ(0, recvs[i].on.err) << "MTU " << GetParam() << ", " << first + i << " B";
                ASSERT_EQ(first + i, recvs[i].on.msg_len);
                got[i].resize(first + i);
                ASSERT_EQ(bufs[i], got[i]) << "MTU " << GetParam() << ", " << first + i << " B";
            }
        }
    }
};

} // namespace

// Every size up to past the eager limit (net_eager 1024 here, less where
// the MTU is smaller), eager and synchronous, and messages streamed in
// DATA frames that fill a whole provider message: at MTU 1025 a 969-byte
// synchronous send took a 1001-byte frame, padded to 1032 bytes in the
// message, which the provider refused, and the peer was failed.
TEST_P(EngineNetOddMtu, EverySizeUpToTheEagerLimitAndStreamed) {
    open(16, 4096, false, GetParam());
    send_sizes(0, 1100, true, 31);
    send_sizes(0, 1100, false, 32);
    send_sizes(20000, 20004, false, 33); // streamed
    const auto s = stats();
    EXPECT_GT(s.streamed, 0u);
    EXPECT_EQ(0u, s.dropped);
}

INSTANTIATE_TEST_SUITE_P(Mtus, EngineNetOddMtu, ::testing::Values(1025, 1031, 1100, 2047, 4097));

namespace {

// What the receiver grants here (window 1): kFirstGrant messages beyond
// those it handed on.
constexpr uint64_t kGrant = efa::engine::kFirstGrant;

// The receives that completed.
int completed(const std::vector<Req> &rs) {
    int n = 0;
    for (const Req &r : rs) {
        n += r.completions;
    }
    return n;
}

} // namespace

// A sender whose message 2 comes late (held back by the test hook for many
// progress calls) and that keeps sending: the receiver, which handed on
// messages 0 and 1, granted it up to 2 + kGrant, so it holds kGrant - 1
// messages at most; the sender stops there and queues the rest, and once
// the late one is in, everything arrives in order and the sender goes on.
// (Here the engine sends to itself: its grants travel in the headers of
// its own messages.)  Before the credit, every message sent was held.
TEST_F(EngineNet, LateMessageStopsTheSenderAtItsGrant) {
    delay = 3; // the third provider message to arrive: message 2
    open(1, 0);
    constexpr int kN = static_cast<int>(3 * kGrant);
    constexpr size_t kLen = 1000;
    std::vector<std::vector<uint8_t>> bufs, got(kN, std::vector<uint8_t>(kLen));
    std::vector<Req> sends(kN), recvs(kN);
    for (int i = 0; i < kN; ++i) {
        recv(got[i], 41, recvs[i]);
    }
    for (int i = 0; i < kN; ++i) {
        bufs.push_back(pattern(kLen, static_cast<uint8_t>(i)));
        note(send(bufs.back(), 41, false, sends[i]), sends[i]);
        progress();
    }
    for (int i = 0; i < 8000; ++i) { // (the shim holds it for 16384)
        progress();
    }
    auto s = stats();
    // One frame per message (no coalescing).
    EXPECT_EQ(2u + kGrant, s.net_sent) << "the sender did not stop at its grant";
    EXPECT_GE(s.net_no_credit, 1u);
    EXPECT_EQ(2, completed(recvs)) << "only the messages before the late one are handed on";
    // The held bytes: at most kGrant - 1 provider messages of one frame.
    EXPECT_LE(s.net_held_bytes_max, (kGrant - 1) * (kLen + 64)) << "more held than granted";
    EXPECT_GT(s.net_held_bytes_max, 0u);
    ASSERT_TRUE(wait_all(recvs));
    ASSERT_TRUE(wait_all(sends));
    for (int i = 0; i < kN; ++i) {
        ASSERT_EQ(0, recvs[i].on.err);
        ASSERT_EQ(bufs[i], got[i]) << "message " << i << " out of order";
    }
    s = stats();
    EXPECT_EQ(static_cast<uint64_t>(kN), s.net_sent);
    EXPECT_EQ(s.net_sent, s.net_received);
    EXPECT_LE(s.net_held_bytes_max, (kGrant - 1) * (kLen + 64));
    EXPECT_EQ(0u, s.dropped);
}

// The same loss with nothing more to send once the late message is in: no
// message carries the new grant, so it goes alone (a grant message, not
// among the messages sent or received), once.
TEST_F(EngineNet, AGrantGoesAloneWhenNoMessageCarriesIt) {
    delay = 3;
    open(1, 0);
    constexpr int kN = static_cast<int>(2 + kGrant);
    std::vector<std::vector<uint8_t>> bufs, got(kN, std::vector<uint8_t>(100));
    std::vector<Req> sends(kN), recvs(kN);
    for (int i = 0; i < kN; ++i) {
        recv(got[i], 43, recvs[i]);
        bufs.push_back(pattern(100, static_cast<uint8_t>(i)));
        note(send(bufs.back(), 43, false, sends[i]), sends[i]);
        progress();
    }
    ASSERT_TRUE(wait_all(recvs));
    ASSERT_TRUE(wait_all(sends));
    for (int i = 0; i < kN; ++i) {
        ASSERT_EQ(bufs[i], got[i]) << "message " << i;
    }
    const auto s = stats();
    EXPECT_EQ(static_cast<uint64_t>(kN), s.net_sent);
    EXPECT_EQ(s.net_sent, s.net_received);
    EXPECT_EQ(1u, s.net_grants);
}

// Credit never stalls a stream without a loss: many more messages than
// the grant, in one burst, all arrive (grants flow back as the receiver
// hands messages on), without a message held.
TEST_F(EngineNet, GrantsKeepALongStreamGoing) {
    open(2, 0);
    constexpr int kN = static_cast<int>(8 * kGrant);
    std::vector<std::vector<uint8_t>> bufs, got(kN, std::vector<uint8_t>(64));
    std::vector<Req> sends(kN), recvs(kN);
    for (int i = 0; i < kN; ++i) {
        recv(got[i], 42, recvs[i]);
    }
    for (int i = 0; i < kN; ++i) {
        bufs.push_back(pattern(48, static_cast<uint8_t>(i)));
        note(send(bufs.back(), 42, false, sends[i]), sends[i]);
    }
    ASSERT_TRUE(wait_all(recvs));
    ASSERT_TRUE(wait_all(sends));
    for (int i = 0; i < kN; ++i) {
        got[i].resize(recvs[i].on.msg_len);
        ASSERT_EQ(bufs[i], got[i]) << "message " << i;
    }
    const auto s = stats();
    EXPECT_GT(s.net_sent, kGrant);
    EXPECT_EQ(s.net_sent, s.net_received);
    EXPECT_EQ(0u, s.net_held_bytes_max);
    EXPECT_EQ(0u, s.dropped);
}
