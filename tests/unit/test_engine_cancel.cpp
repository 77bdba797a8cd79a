// Cancelling sends in the matching engine (efa_engine_cancel_send): a
// message still unexpected at the receiver is withdrawn whatever its size
// and mode, a standard-mode eager one included (complete at the sender
// once written: the caller polls for the receiver's answer); one that
// matched, or that a probe claimed, is kept.  The withdrawal names the
// message by its number among its sender's messages, so with two of the
// same envelope the cancelled one goes, and a message of another sender
// with the same number stays.  By the rings (EnginePair) and by the
// provider (EngineNet).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include <rdma/fi_errno.h>

#include "efa_engine.h"
#include "engine_pair.hpp"
#include "net_link_fixture.hpp"
#include "engine_test_req.hpp"

namespace {

using engine_test::on_complete;
using engine_test::pattern;
using engine_test::Req;

constexpr uint32_t kCid = 3;

class EngineCancel : public engine_test::EnginePair {
  protected:
    // Is a message of (kCid, src, tag) waiting at e?  (A probe, not claimed.)
    static bool waiting(efa_engine_t *e, int32_t tag, int32_t src = 0) {
        efa_engine_probe_t out{};
        return 1 == efa_engine_probe(e, kCid, src, tag, false, &out);
    }
    // Cancel a send of engine 'from' and wait for the answer: the cancel's
    // last result (1 withdrawn, 0 not, -FI_EAGAIN still asking).
    int cancel(efa_engine_t *from, Req &s) {
        int rc = efa_engine_cancel_send(from, &s.on);
        until([&] { return -FI_EAGAIN != (rc = efa_engine_cancel_send(from, &s.on)); });
        return rc;
    }
    // Receive (kCid, src, tag) at e and check the bytes.
    void expect_received(efa_engine_t *e, int32_t tag, const std::vector<uint8_t> &data,
                         int32_t src = 0) {
        std::vector<uint8_t> got(data.size() + 8, 0xee);
        Req r;
        const int rc = post(e, r, got.data(), got.size(), kCid, src, tag);
        ASSERT_GE(rc, 0);
        ASSERT_TRUE(until([&] { return 1 == rc || 1 == r.completions; }));
        EXPECT_EQ(0, r.on.err);
        ASSERT_EQ(data.size(), r.on.msg_len);
        EXPECT_EQ(0, data.empty() ? 0 : memcmp(got.data(), data.data(), data.size()));
    }
};

// MPICH's scancel in small: a standard send complete at the sender, still
// unexpected at the receiver, is withdrawn; a later one of the same
// envelope arrives intact.
TEST_F(EngineCancel, ACompleteSendStillUnexpectedIsWithdrawn) {
    open();
    Req s;
    ASSERT_EQ(1, send(a, s, 1, pattern(100, 1), 20)); // complete at once
    ASSERT_TRUE(until([&] { return waiting(b, 20); }));
    EXPECT_EQ(1, cancel(a, s)) << "an unexpected message was not withdrawn";
    EXPECT_EQ(0, s.completions) << "a complete send's callback was called again";
    EXPECT_FALSE(waiting(b, 20)) << "the withdrawn message is still receivable";
    EXPECT_EQ(1, efa_engine_cancel_send(a, &s.on)) << "asked twice: the outcome changed";
    Req s2;
    const auto later = pattern(100, 2);
    ASSERT_EQ(1, send(a, s2, 1, later, 20));
    expect_received(b, 20, later);
    EXPECT_EQ(0u, efa_engine_dropped(a) + efa_engine_dropped(b));
}

// MPICH's scancel_unmatch: of two messages of one envelope, the second is
// cancelled; the receiver gets the first.
TEST_F(EngineCancel, OfTwoAlikeTheCancelledOneGoes) {
    open();
    Req s1, s2;
    const auto first = pattern(4, 1);
    ASSERT_EQ(1, send(a, s1, 1, first, 0));
    ASSERT_EQ(1, send(a, s2, 1, pattern(4, 2), 0));
    EXPECT_EQ(1, cancel(a, s2));
    expect_received(b, 0, first);
    EXPECT_FALSE(waiting(b, 0)) << "the cancelled message arrived all the same";
    EXPECT_EQ(0, cancel(a, s1)) << "a received message reported withdrawn";
}

TEST_F(EngineCancel, AMatchedOrClaimedSendIsKept) {
    open();
    const auto data = pattern(300, 4);
    Req s;
    ASSERT_EQ(1, send(a, s, 1, data, 21));
    expect_received(b, 21, data);
    EXPECT_EQ(0, cancel(a, s)) << "a matched message reported withdrawn";
    EXPECT_EQ(0, efa_engine_cancel_send(a, &s.on));

    // Claimed by a matched probe: it belongs to that probe's receive.
    Req s2;
    ASSERT_EQ(1, send(a, s2, 1, data, 22));
    efa_engine_probe_t out{};
    ASSERT_TRUE(until([&] { return 1 == efa_engine_probe(b, kCid, 0, 22, true, &out); }));
    EXPECT_EQ(0, cancel(a, s2)) << "a claimed message reported withdrawn";
    std::vector<uint8_t> got(data.size(), 0);
    Req r;
    r.on.complete = on_complete;
    r.on.buf = got.data();
    r.on.buflen = got.size();
    const int rc = efa_engine_mrecv(b, out.msg, &r.on);
    ASSERT_TRUE(until([&] { return 1 == rc || 1 == r.completions; }));
    EXPECT_EQ(0, memcmp(got.data(), data.data(), data.size()));
    EXPECT_EQ(0u, efa_engine_dropped(a) + efa_engine_dropped(b));
}

// Every size (header only, short frame, full slot, rendezvous) and mode:
// once unexpected at the receiver, cancelled.  A send not complete yet
// (synchronous, rendezvous) completes by its callback as cancelled; one
// complete already is answered to the poll.
TEST_F(EngineCancel, EverySizeAndModeUnexpectedIsWithdrawn) {
    open();
    int32_t tag = 100;
    for (size_t len : {size_t{0}, size_t{1}, size_t{40}, size_t{41}, size_t{900}, size_t{100000}}) {
        for (bool sync : {false, true}) {
            const std::string what = std::to_string(len) + (sync ? " bytes, sync" : " bytes");
            const auto data = pattern(len, static_cast<uint8_t>(tag));
            Req s;
            const int rc = send(a, s, 1, data, ++tag, sync);
            ASSERT_GE(rc, 0) << what;
            ASSERT_TRUE(until([&] { return waiting(b, tag); })) << what;
            if (1 == rc) {
                EXPECT_EQ(1, cancel(a, s)) << what;
                EXPECT_EQ(0, s.completions) << what;
            } else {
                EXPECT_EQ(0, efa_engine_cancel_send(a, &s.on)) << what;
                ASSERT_TRUE(until([&] { return 1 == s.completions; })) << what;
                EXPECT_EQ(-FI_ECANCELED, s.on.err) << what;
            }
            EXPECT_FALSE(waiting(b, tag)) << what << ": still receivable";
        }
    }
    EXPECT_EQ(0u, efa_engine_dropped(a) + efa_engine_dropped(b));
}

// Messages are numbered per sender: a's first message and b's first
// message to itself carry the same number, and the same envelope;
// cancelling b's withdraws b's alone.
TEST_F(EngineCancel, ANumberNamesOneSendersMessage) {
    open();
    Req from_a, from_b;
    const auto a_data = pattern(64, 7);
    ASSERT_EQ(1,
              efa_engine_send(a, 1, kCid, 0, 9, a_data.data(), a_data.size(), false, &from_a.on));
    ASSERT_TRUE(until([&] { return waiting(b, 9); }));
    const auto b_data = pattern(64, 8);
    from_b.on.complete = on_complete;
    ASSERT_EQ(1,
              efa_engine_send(b, 1, kCid, 0, 9, b_data.data(), b_data.size(), false, &from_b.on));
    EXPECT_EQ(1, cancel(b, from_b));
    expect_received(b, 9, a_data);
    EXPECT_FALSE(waiting(b, 9));
}

class EngineNetCancel : public engine_test::EngineNet {};

// The same through the provider (a peer on another node under own
// matching): the request and its answer travel in provider messages.
TEST_F(EngineNetCancel, ACompleteSendStillUnexpectedIsWithdrawn) {
    open(8, 0);
    efa_engine_probe_t out{};
    auto waiting = [&](int32_t t) {
        progress();
        return 1 == efa_engine_probe(e, 5, EFA_ENGINE_ANY, t, false, &out);
    };
    auto cancel = [&](Req &s) {
        int rc = efa_engine_cancel_send(e, &s.on);
        for (int i = 0; i < 2000000 && -FI_EAGAIN == rc; ++i) {
            progress();
            rc = efa_engine_cancel_send(e, &s.on);
        }
        return rc;
    };
    for (size_t len : {size_t{8}, size_t{1000}}) {
        Req s;
        const int32_t t = static_cast<int32_t>(len);
        ASSERT_EQ(1, send(pattern(len, 1), t, false, s));
        bool seen = false;
        for (int i = 0; i < 2000000 && !seen; ++i) {
            seen = waiting(t);
        }
        ASSERT_TRUE(seen) << len;
        EXPECT_EQ(1, cancel(s)) << len;
        EXPECT_EQ(0, s.completions) << len;
        EXPECT_FALSE(waiting(t)) << len << ": the withdrawn message is still receivable";
        // A later one of the same envelope arrives intact, and then a
        // cancel finds it matched.
        Req s2, r;
        const auto later = pattern(len, 2);
        engine_test::note(send(later, t, false, s2), s2);
        std::vector<uint8_t> got(len, 0);
        recv(got, t, r);
        for (int i = 0; i < 2000000 && 0 == r.completions; ++i) {
            progress();
        }
        ASSERT_EQ(1, r.completions) << len;
        EXPECT_EQ(0, memcmp(got.data(), later.data(), len)) << len;
        EXPECT_EQ(0, cancel(s2)) << len << ": a matched message reported withdrawn";
    }
    EXPECT_EQ(0u, stats().dropped);
}

} // namespace
