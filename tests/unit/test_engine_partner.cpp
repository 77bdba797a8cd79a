// Partnered receives of the matching engine (efa_engine.h): a receive from
// any source (MPI_ANY_SOURCE) posted both to the engine and to the provider,
// so that a message the engine matches is held until the provider's half is
// cancelled, or handed on in order when the provider's half took one.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "efa_engine.h"
#include "engine.hpp"
#include "engine_pair.hpp"
#include "engine_test_req.hpp"

namespace {

using engine_test::on_complete;
using engine_test::pattern;
using engine_test::Req;

struct PartnerReq {
    Req r;
    int cancels = 0; // partner_cancel calls
};

void on_partner_cancel(efa_engine_req_t *on) {
    auto *r = reinterpret_cast<Req *>(reinterpret_cast<char *>(on) - offsetof(Req, on));
    reinterpret_cast<PartnerReq *>(r)->cancels++;
}

class EnginePartner : public engine_test::EnginePair {
  protected:
    int post_partnered(PartnerReq &p, void *buf, size_t len, int32_t tag) {
        p.r.on.complete = on_complete;
        p.r.on.partner_cancel = on_partner_cancel;
        p.r.on.buf = buf;
        p.r.on.buflen = len;
        const int rc = efa_engine_recv_partnered(b, 3, EFA_ENGINE_ANY, tag, &p.r.on);
        if (0 == rc) {
            efa_engine_partner_armed(b, &p.r.on); // the other half is "posted"
        }
        return rc;
    }
    // Two messages of one sender to b, then b polls: a partnered receive
    // holds the first, so the second must stay unread.
    void send_two_and_poll(const std::vector<uint8_t> &first, const std::vector<uint8_t> &second) {
        Req s1, s2;
        EXPECT_EQ(1, send(a, s1, 1, first, 8));
        EXPECT_EQ(1, send(a, s2, 1, second, 8));
        for (int i = 0; i < 10; ++i) {
            efa_engine_progress(b);
        }
    }
    uint64_t received(efa_engine_t *e) {
        efa_engine_stats_t st;
        efa_engine_get_stats(e, &st);
        return st.frames_received;
    }
};

TEST_F(EnginePartner, AWaitingMessageIsTakenWithoutThePartner) {
    open();
    Req s;
    const auto data = pattern(20, 4);
    EXPECT_EQ(1, send(a, s, 1, data, 8));
    efa_engine_progress(b);
    PartnerReq p;
    std::vector<uint8_t> got(20);
    EXPECT_EQ(1, post_partnered(p, got.data(), got.size(), 8)); // nothing to post elsewhere
    EXPECT_EQ(0, p.cancels);
    EXPECT_EQ(data, got);
}

TEST_F(EnginePartner, TheOtherHalfMatchedFirst) {
    open();
    PartnerReq p;
    std::vector<uint8_t> got(20), got2(20);
    EXPECT_EQ(0, post_partnered(p, got.data(), got.size(), 8));
    EXPECT_EQ(0, efa_engine_partner_done(b, &p.r.on, true)); // the provider took one
    Req s, r2;
    EXPECT_EQ(1, send(a, s, 1, pattern(20, 1), 8));
    for (int i = 0; i < 10; ++i) {
        efa_engine_progress(b);
    }
    EXPECT_EQ(0, p.r.completions); // forgotten by the engine
    EXPECT_EQ(0, p.cancels);
    EXPECT_EQ(1, post(b, r2, got2.data(), got2.size(), 3, 0, 8)); // it waited unexpected
}

TEST_F(EnginePartner, HeldUntilTheCancelThenDelivered) {
    open();
    PartnerReq p;
    std::vector<uint8_t> got(20);
    EXPECT_EQ(0, post_partnered(p, got.data(), got.size(), 8));
    const auto first = pattern(20, 1), second = pattern(20, 2);
    send_two_and_poll(first, second);
    EXPECT_EQ(1, p.cancels);
    EXPECT_EQ(0, p.r.completions);
    EXPECT_EQ(1u, received(b)) << "a frame was read while a message was held";
    EXPECT_EQ(1, efa_engine_partner_done(b, &p.r.on, false)); // cancelled: the engine's now
    EXPECT_EQ(1, p.r.completions);
    EXPECT_EQ(first, got);
    Req r2;
    std::vector<uint8_t> got2(20);
    ASSERT_TRUE(until([&] { return received(b) == 2; }));
    EXPECT_EQ(1, post(b, r2, got2.data(), got2.size(), 3, 0, 8));
    EXPECT_EQ(second, got2);
}

TEST_F(EnginePartner, HeldThenHandedToTheNextReceiveInOrder) {
    open();
    PartnerReq p;
    Req r2, r3;
    std::vector<uint8_t> got(20), got2(20), got3(20);
    EXPECT_EQ(0, post_partnered(p, got.data(), got.size(), 8));
    EXPECT_EQ(0, post(b, r2, got2.data(), got2.size(), 3, 0, 8));
    const auto first = pattern(20, 1), second = pattern(20, 2);
    send_two_and_poll(first, second);
    EXPECT_EQ(1, p.cancels);
    EXPECT_EQ(0, r2.completions); // the second message is not read yet
    // The provider took a message for p first: the held one goes to r2.
    EXPECT_EQ(0, efa_engine_partner_done(b, &p.r.on, true));
    EXPECT_EQ(1, r2.completions);
    EXPECT_EQ(first, got2);
    EXPECT_EQ(0, p.r.completions);
    ASSERT_TRUE(until([&] { return received(b) == 2; }));
    EXPECT_EQ(1, post(b, r3, got3.data(), got3.size(), 3, 0, 8));
    EXPECT_EQ(second, got3);
}

// With threads a message can match the engine's half before the other half
// is posted: it is held, and the cancel is asked for only once armed.
TEST_F(EnginePartner, NoCancelBeforeTheOtherHalfIsPosted) {
    open();
    PartnerReq p;
    std::vector<uint8_t> got(20);
    p.r.on.complete = on_complete;
    p.r.on.partner_cancel = on_partner_cancel;
    p.r.on.buf = got.data();
    p.r.on.buflen = got.size();
    EXPECT_EQ(0, efa_engine_recv_partnered(b, 3, EFA_ENGINE_ANY, 8, &p.r.on)); // not armed yet
    Req s;
    const auto data = pattern(20, 3);
    EXPECT_EQ(1, send(a, s, 1, data, 8));
    for (int i = 0; i < 10; ++i) {
        efa_engine_progress(b);
    }
    EXPECT_EQ(1u, received(b)); // matched and held ...
    EXPECT_EQ(0, p.cancels);    // ... but nothing to cancel yet
    efa_engine_partner_armed(b, &p.r.on);
    EXPECT_EQ(1, p.cancels);
    EXPECT_EQ(1, efa_engine_partner_done(b, &p.r.on, false));
    EXPECT_EQ(1, p.r.completions);
    EXPECT_EQ(data, got);
}

TEST_F(EnginePartner, HeldRendezvousIsReadAfterTheCancel) {
    open();
    PartnerReq p;
    const auto big = pattern(100000, 7);
    std::vector<uint8_t> got(big.size());
    EXPECT_EQ(0, post_partnered(p, got.data(), got.size(), 8));
    Req s;
    EXPECT_EQ(0, send(a, s, 1, big, 8));
    ASSERT_TRUE(until([&] { return p.cancels == 1; }));
    EXPECT_EQ(1, efa_engine_partner_done(b, &p.r.on, false));
    ASSERT_TRUE(until([&] { return p.r.completions == 1 && s.completions == 1; }));
    EXPECT_EQ(big, got);
}

// With threads, another thread's progress may hold a message for the
// receive between the post's lock and the call's return: the receive was
// posted (0), so its caller posts the other half and arms it, and the
// held message is delivered after that half's cancel.  (Deciding after
// the lock, the call took the held receive for one matched at its post:
// the other half was never posted, nothing released the hold, and the
// engine stopped reading its rings for good.)  The hook runs that
// progress at exactly that point, in this thread.
TEST_F(EnginePartner, AMessageHeldAsThePostReturnsLeavesTheReceivePosted) {
    thread_safe = true;
    open();
    Req s;
    const auto data = pattern(20, 6);
    EXPECT_EQ(1, send(a, s, 1, data, 8)); // in b's ring, not read yet
    efa::engine::Engine *eb = b->engine.get();
    eb->after_partner_post = [](void *e) {
        for (int i = 0; i < 10; ++i) {
            efa_engine_progress(static_cast<efa_engine_t *>(e));
        }
    };
    eb->after_partner_post_arg = b;
    PartnerReq p;
    std::vector<uint8_t> got(20);
    p.r.on.complete = on_complete;
    p.r.on.partner_cancel = on_partner_cancel;
    p.r.on.buf = got.data();
    p.r.on.buflen = got.size();
    const int rc = efa_engine_recv_partnered(b, 3, EFA_ENGINE_ANY, 8, &p.r.on);
    eb->after_partner_post = nullptr;
    ASSERT_EQ(0, rc) << "a receive held after its post taken for one matched at it";
    EXPECT_EQ(1u, received(b)); // the hook's progress matched and held it
    EXPECT_EQ(0, p.cancels);
    efa_engine_partner_armed(b, &p.r.on);
    EXPECT_EQ(1, p.cancels);
    EXPECT_EQ(1, efa_engine_partner_done(b, &p.r.on, false));
    EXPECT_EQ(1, p.r.completions);
    EXPECT_EQ(data, got);
}

// With threads, the provider's half can complete in one thread while
// another calls its cancel: the completion waits for the call to return,
// since its caller hands the request back (MPI_Recv's, on its stack, is
// reused at once by the next receive, whose half the late cancel would
// then cancel, or whose memory it would read).
struct BlockingCancel {
    PartnerReq p;
    std::atomic<bool> entered{false}, release{false};
};

void on_blocking_cancel(efa_engine_req_t *on) {
    auto *r = reinterpret_cast<Req *>(reinterpret_cast<char *>(on) - offsetof(Req, on));
    auto *bc = reinterpret_cast<BlockingCancel *>(reinterpret_cast<PartnerReq *>(r));
    bc->p.cancels++;
    bc->entered = true;
    while (!bc->release) {
        std::this_thread::yield();
    }
}

TEST_F(EnginePartner, TheOtherHalfsCompletionWaitsForItsCancelInAnotherThread) {
    thread_safe = true;
    open();
    BlockingCancel bc;
    std::vector<uint8_t> got(20), got2(20);
    bc.p.r.on.complete = on_complete;
    bc.p.r.on.partner_cancel = on_blocking_cancel;
    bc.p.r.on.buf = got.data();
    bc.p.r.on.buflen = got.size();
    ASSERT_EQ(0, efa_engine_recv_partnered(b, 3, EFA_ENGINE_ANY, 8, &bc.p.r.on));
    efa_engine_partner_armed(b, &bc.p.r.on);
    Req r2;
    EXPECT_EQ(0, post(b, r2, got2.data(), got2.size(), 3, 0, 8));
    Req s;
    const auto data = pattern(20, 5);
    EXPECT_EQ(1, send(a, s, 1, data, 8));
    // Thread 1: its progress holds the message and calls the cancel.
    std::thread progress([&] {
        for (int i = 0; i < 1000 && !bc.entered; ++i) {
            efa_engine_progress(b);
        }
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!bc.entered && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
    }
    ASSERT_TRUE(bc.entered.load()) << "the engine never asked for the other half's cancel";
    // Thread 2: the provider's half took a message meanwhile.
    std::atomic<bool> returned{false};
    std::thread completion([&] {
        EXPECT_EQ(0, efa_engine_partner_done(b, &bc.p.r.on, true));
        returned = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(returned.load()) << "the request was handed back while its cancel was running";
    bc.release = true;
    progress.join();
    completion.join();
    EXPECT_TRUE(returned.load());
    EXPECT_EQ(1, bc.p.cancels);
    EXPECT_EQ(0, bc.p.r.completions);
    EXPECT_EQ(1, r2.completions); // the held message went on to the next receive
    EXPECT_EQ(data, got2);
}

} // namespace
