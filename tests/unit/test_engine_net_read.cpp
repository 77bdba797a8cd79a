// Rendezvous by RMA read with a peer on another node
// (engine_read.cpp): the receiver reads a large message straight
// out of the sender's registered buffer and answers FIN.  Matched on
// arrival and matched later (unexpected), in several pieces, truncated,
// with local registrations (the forced direct mode), below the size
// threshold (streamed), and a read the provider refuses, which falls back
// to streaming without losing a byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include <rdma/fi_errno.h>

#include "efa_core.h"
#include "efa_engine.h"
#include "net_link_fixture.hpp"
#include "engine_test_req.hpp"

namespace {

using engine_test::EngineNet;
using engine_test::note;
using engine_test::pattern;
using engine_test::Req;

class EngineNetRead : public EngineNet {
  protected:
    // Open with reads from 4 KiB; false (and the test skips) when the
    // provider has no FI_RMA.
    bool open_reading(int direct_mtu = 0) {
        read_min = 4096;
        open(16, 4096, false, direct_mtu);
        return nullptr != e && efa_core_get_info(core)->has_rma;
    }
    // One message of len bytes into a receive of buflen bytes; the
    // receive is posted before the send (matched on arrival) or after
    // the message arrived (unexpected).
    void one(size_t len, size_t buflen, bool recv_first, Req &rr) {
        auto msg = pattern(len, 9);
        std::vector<uint8_t> got(buflen);
        std::vector<Req> sends(1), recvs(1);
        if (recv_first) {
            recv(got, 31, recvs[0]);
        }
        note(send(msg, 31, false, sends[0]), sends[0]);
        if (!recv_first) {
            for (int i = 0; i < 20000; ++i) {
                progress();
            }
            EXPECT_EQ(0, sends[0].completions) << "the send completed before any receive";
            recv(got, 31, recvs[0]);
        }
        ASSERT_TRUE(wait_all(recvs));
        ASSERT_TRUE(wait_all(sends));
        EXPECT_EQ(0, sends[0].on.err);
        const size_t n = std::min(len, buflen);
        EXPECT_TRUE(std::equal(msg.begin(), msg.begin() + n, got.begin())) << "bytes differ";
        rr = recvs[0];
    }
};

} // namespace

TEST_F(EngineNetRead, AMatchedRendezvousIsReadByRma) {
    if (!open_reading()) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    Req r;
    one(200000, 200000, true, r);
    EXPECT_EQ(0, r.on.err);
    EXPECT_EQ(200000u, r.on.msg_len);
    const auto s = stats();
    EXPECT_EQ(1u, s.net_read);
    EXPECT_EQ(0u, s.streamed) << "the bytes were streamed, not read";
    EXPECT_EQ(0u, s.net_read_failed);
    // RTS and FIN: two provider messages, not one per 16 KiB
    EXPECT_LE(s.net_sent, 2u);
}

TEST_F(EngineNetRead, AnUnexpectedRendezvousIsReadOnceMatched) {
    if (!open_reading()) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    Req r;
    one(100000, 100000, false, r);
    EXPECT_EQ(0, r.on.err);
    EXPECT_EQ(1u, stats().net_read);
    EXPECT_EQ(1u, stats().unexpected);
}

TEST_F(EngineNetRead, AReadInSeveralPieces) {
    read_piece = 30000;
    if (!open_reading()) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    Req r;
    one(100001, 100001, true, r); // 4 pieces, the last of 10001 bytes
    EXPECT_EQ(0, r.on.err);
    EXPECT_EQ(1u, stats().net_read);
}

TEST_F(EngineNetRead, ATruncatedReadFillsTheBufferAndSaysSo) {
    if (!open_reading()) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    Req r;
    one(90000, 50000, true, r);
    EXPECT_EQ(-FI_ETRUNC, r.on.err);
    EXPECT_EQ(90000u, r.on.msg_len);
    EXPECT_EQ(1u, stats().net_read);
}

// A receive of no bytes truncates a large message at once: the sender is
// told it is done (FIN), not asked to stream every byte to be dropped.
TEST_F(EngineNetRead, AnEmptyReceiveTruncatesWithoutStreaming) {
    read_min = 300000;
    open(16, 4096);
    Req r;
    one(200000, 0, true, r);
    EXPECT_EQ(-FI_ETRUNC, r.on.err);
    EXPECT_EQ(200000u, r.on.msg_len);
    EXPECT_EQ(0u, stats().streamed);
    EXPECT_EQ(0u, stats().net_read);
}

// The forced direct mode wants local registrations (FI_MR_LOCAL): the
// receive buffer is registered for the read.
TEST_F(EngineNetRead, LocalRegistrationsInTheDirectMode) {
    if (!open_reading(2048)) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    ASSERT_TRUE(efa_core_get_info(core)->mr_local);
    Req r;
    one(70000, 70000, true, r);
    EXPECT_EQ(0, r.on.err);
    EXPECT_EQ(1u, stats().net_read);
}

TEST_F(EngineNetRead, BelowTheThresholdTheBytesStream) {
    read_min = 300000;
    open(16, 4096);
    Req r;
    one(200000, 200000, true, r);
    EXPECT_EQ(0u, stats().net_read);
    EXPECT_EQ(1u, stats().streamed);
}

// A read the provider refuses (a wrong key): the receiver answers CTS
// instead and the sender streams the message; nothing is lost.
TEST_F(EngineNetRead, AFailedReadFallsBackToStreaming) {
    fail_reads = true;
    if (!open_reading()) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    Req r;
    one(150000, 150000, true, r);
    EXPECT_EQ(0, r.on.err);
    const auto s = stats();
    EXPECT_EQ(0u, s.net_read);
    EXPECT_EQ(1u, s.net_read_failed);
    EXPECT_EQ(1u, s.streamed);
}
