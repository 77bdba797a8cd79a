// The paced provider poll (efa_core_progress_paced, core_pace.cpp) through
// a whole core on the shm provider: two contexts of one process send to
// each other, and shm hands a message over only when the receiving
// context's completion queue is read, so "delivered" means "polled".
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <vector>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_test_params.hpp"
#include "efa_core_msg.h"

namespace {

constexpr int kIntervalUs = 1000000; // long enough that a skipped poll shows

efa_core_params_t shm_params(int interval_us, int interval_max_us) {
    efa_core_params_t p = core_test_params("shm");
    p.num_contexts = 2;
    p.net_poll_interval_us = interval_us;
    p.net_poll_interval_max_us = interval_max_us;
    return p;
}

int g_arrived = 0;
void count_arrivals(void *, efa_ctx_t *, void *, size_t, int err, fi_addr_t) {
    if (err == 0) {
        ++g_arrived;
    }
}

// A core whose contexts 0 and 1 know each other's addresses.
class TwoContexts {
  public:
    explicit TwoContexts(int interval_us, int interval_max_us = 0) {
        efa_core_params_t p = shm_params(interval_us, interval_max_us);
        int err = 0;
        core_ = efa_core_acquire(&p, &err);
        EXPECT_NE(core_, nullptr) << "efa_core_acquire(shm): " << err;
        if (!core_) {
            return;
        }
        const void *blob = nullptr;
        size_t len = 0;
        EXPECT_EQ(efa_core_local_blob(core_, &blob, &len), 0);
        self_ = efa_core_peer_get(core_, blob, len, &err);
        EXPECT_NE(self_, nullptr) << err;
        g_arrived = 0;
        EXPECT_EQ(efa_core_msg_set_handler(core_, count_arrivals, nullptr), 0);
    }
    ~TwoContexts() {
        if (self_) {
            efa_core_peer_put(core_, self_);
        }
        if (core_) {
            efa_core_set_doorbell(core_, nullptr);
            efa_core_msg_set_handler(core_, nullptr, nullptr);
            efa_core_release(core_);
        }
    }
    TwoContexts(const TwoContexts &) = delete;
    TwoContexts &operator=(const TwoContexts &) = delete;

    bool ok() const { return core_ && self_; }
    efa_core_t *core() const { return core_; }
    // An untagged message from context 1 to context 0 (into the pool).
    // shm answers -FI_EAGAIN until the sender's progress has mapped the
    // peer's region (the first message): full progress until it takes it.
    void inject_to_ctx0() {
        static const char kMsg[8] = "pace";
        int rc = -FI_EAGAIN;
        for (int i = 0; i < 100000 && rc == -FI_EAGAIN; ++i) {
            rc = efa_ctx_try_inject(efa_core_ctx(core_, 1), kMsg, sizeof(kMsg), self_->addr[0]);
            if (rc == -FI_EAGAIN) {
                efa_core_progress(core_);
            }
        }
        ASSERT_EQ(rc, 0);
    }
    fi_addr_t addr(int i) const { return self_->addr[i]; }
    // Paced progress calls until 'done' or 'calls' calls; the calls made.
    template <typename Done> int paced_until(Done done, int calls) {
        int n = 0;
        while (!done() && n < calls) {
            efa_core_progress_paced(core_);
            ++n;
        }
        return n;
    }
    // Settle: one message through (shm has mapped the peer then), then
    // enough quiet paced calls that the warm period after it is over and
    // the interval has restarted.
    void settle() {
        inject_to_ctx0();
        for (int i = 0; i < 100000 && g_arrived == 0; ++i) {
            efa_core_progress(core_);
        }
        ASSERT_EQ(g_arrived, 1) << "no message through shm at all";
        g_arrived = 0;
        spin_paced(20000); // far longer than the warm period (1 ms)
    }
    // Quiet paced calls until the paced wait is wait_us (2 s at most).
    bool spin_until_wait(uint64_t wait_us) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (efa_core_net_wait_us(core_) != wait_us && std::chrono::steady_clock::now() < end) {
            efa_core_progress_paced(core_);
        }
        return efa_core_net_wait_us(core_) == wait_us;
    }
    // A progress loop that finds nothing, for 'us' microseconds.
    void spin_paced(int us) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
        while (std::chrono::steady_clock::now() < end) {
            efa_core_progress_paced(core_);
        }
    }

  private:
    efa_core_t *core_ = nullptr;
    efa_peer_t *self_ = nullptr;
};

// A second-long interval, a doorbell, and that bell rung once the core is
// quiet (as a process of this node does after sending by the provider).
class BellRungWhenQuiet : public TwoContexts {
  public:
    BellRungWhenQuiet() : TwoContexts(kIntervalUs, kIntervalUs) {
        if (!ok()) {
            return;
        }
        efa_core_set_doorbell(core(), &bell_);
        settle();
        __atomic_store_n(&bell_, 1u, __ATOMIC_RELEASE);
    }
    uint32_t bell() const { return __atomic_load_n(&bell_, __ATOMIC_ACQUIRE); }

  private:
    uint32_t bell_ = 0;
};

struct Recv {
    efa_op_t op{};
    bool done = false;
    Recv() {
        op.complete = [](efa_op_t *o, const efa_cqe_t *) {
            reinterpret_cast<Recv *>(o)->done = true;
        };
    }
};

} // namespace

// Nothing in flight, no interest: progress calls leave the provider alone,
// and the interval still brings the message in.
TEST(CorePace, AQuietCoreSkipsTheProviderUntilTheInterval) {
    TwoContexts t(kIntervalUs);
    ASSERT_TRUE(t.ok());
    t.settle();
    t.inject_to_ctx0();
    const auto t0 = std::chrono::steady_clock::now();
    t.paced_until([] { return g_arrived > 0; }, 2000);
    EXPECT_EQ(g_arrived, 0) << "the provider was polled although nothing was in flight";
    while (g_arrived == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
        efa_core_progress_paced(t.core());
        usleep(100);
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(g_arrived, 1) << "the interval never polled the provider";
    EXPECT_GE(waited, 0.5); // not before the interval (1 s) had mostly passed
    EXPECT_LE(waited, 4.0);
}

// A receive in flight: every call polls, and the count returns to zero.
TEST(CorePace, AnOperationInFlightIsPolledOnEveryCall) {
    TwoContexts t(kIntervalUs);
    ASSERT_TRUE(t.ok());
    t.settle();
    static char buf[8];
    Recv recv;
    efa_ctx_t *ctx0 = efa_core_ctx(t.core(), 0);
    ASSERT_EQ(efa_ctx_trecv(ctx0, buf, sizeof(buf), nullptr, t.addr(1), 7, 0, &recv.op), 0);
    EXPECT_EQ(ctx0->inflight.load(), 1);
    ASSERT_EQ(efa_ctx_tinject(efa_core_ctx(t.core(), 1), "tagged!", 8, t.addr(0), 7, 0), 0);
    const int calls = t.paced_until([&] { return recv.done; }, 1000);
    EXPECT_TRUE(recv.done) << "a posted receive waited for the paced interval";
    EXPECT_LT(calls, 50);
    EXPECT_EQ(ctx0->inflight.load(), 0);
}

// The same on the second context, twice: the first completion clears the
// core's "posted" flag (core_pace.cpp, work_posted) and the next post must
// set it again, or its receive would wait for the interval (1 s).
TEST(CorePace, EachNewPostIsPolledOnEveryCallAfterAQuietSpell) {
    TwoContexts t(kIntervalUs);
    ASSERT_TRUE(t.ok());
    t.settle();
    static char buf[8];
    efa_ctx_t *ctx1 = efa_core_ctx(t.core(), 1);
    for (int round = 0; round < 2; ++round) {
        Recv recv;
        ASSERT_EQ(efa_ctx_trecv(ctx1, buf, sizeof(buf), nullptr, t.addr(0), 9, 0, &recv.op), 0);
        ASSERT_EQ(efa_ctx_tinject(efa_core_ctx(t.core(), 0), "tagged!", 8, t.addr(1), 9, 0), 0);
        const int calls = t.paced_until([&] { return recv.done; }, 1000);
        EXPECT_TRUE(recv.done) << "round " << round << ": a posted receive waited for the interval";
        EXPECT_LT(calls, 50);
        t.spin_paced(20000); // quiet: the flag is cleared, pacing resumes
    }
}

// A component's interest polls on every call; traffic then keeps the
// provider polled for a while, and a lull lets pacing start again.
TEST(CorePace, InterestAndRecentTrafficPollOnEveryCall) {
    TwoContexts t(kIntervalUs);
    ASSERT_TRUE(t.ok());
    t.settle();
    efa_core_net_interest(t.core(), 1);
    t.inject_to_ctx0();
    EXPECT_LT(t.paced_until([] { return g_arrived == 1; }, 1000), 50);
    EXPECT_EQ(g_arrived, 1) << "an interest did not make every call poll";
    efa_core_net_interest(t.core(), -1);

    // Just after traffic: warm, polled on every call.
    t.inject_to_ctx0();
    t.paced_until([] { return g_arrived == 2; }, 1000);
    EXPECT_EQ(g_arrived, 2) << "the provider went unpolled right after traffic";

    // After a lull longer than the warm period (a progress loop that finds
    // nothing for 20 ms): paced again.
    t.spin_paced(20000);
    t.inject_to_ctx0();
    t.paced_until([] { return g_arrived == 3; }, 2000);
    EXPECT_EQ(g_arrived, 2) << "still polled on every call after the lull";
    for (int i = 0; i < 100; ++i) {
        efa_core_progress(t.core());
    }
    EXPECT_EQ(g_arrived, 3);
}

// net_poll_interval 0: the provider is polled on every call, as before.
TEST(CorePace, IntervalZeroPollsOnEveryCall) {
    TwoContexts t(0);
    ASSERT_TRUE(t.ok());
    t.settle();
    t.inject_to_ctx0();
    EXPECT_LT(t.paced_until([] { return g_arrived == 1; }, 1000), 50);
    EXPECT_EQ(g_arrived, 1);
}

// The wait between paced polls doubles while the provider stays quiet, up
// to net_poll_interval_max, and a poll that finds something starts it
// again from net_poll_interval.
TEST(CorePace, TheWaitDoublesWhileQuietAndRestartsAfterTraffic) {
    TwoContexts t(1000, 8000);
    ASSERT_TRUE(t.ok());
    t.settle();
    // 1, 2, 4, then 8 ms: about 8 ms of quiet calls (a loaded machine may
    // take longer to make them).
    EXPECT_TRUE(t.spin_until_wait(8000)) << "the wait stayed at " << efa_core_net_wait_us(t.core());
    t.inject_to_ctx0();
    const auto t0 = std::chrono::steady_clock::now();
    while (g_arrived == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
        efa_core_progress_paced(t.core());
    }
    ASSERT_EQ(g_arrived, 1) << "the longest wait never polled the provider";
    EXPECT_EQ(efa_core_net_wait_us(t.core()), 1000u) << "traffic did not restart the wait";
    EXPECT_TRUE(t.spin_until_wait(8000)) << "the wait stayed at " << efa_core_net_wait_us(t.core());
    // It never goes beyond the longest.
    t.spin_paced(20000);
    EXPECT_EQ(efa_core_net_wait_us(t.core()), 8000u);
}

// net_poll_interval_max at or below net_poll_interval: a fixed interval.
TEST(CorePace, AMaxAtOrBelowTheIntervalKeepsItFixed) {
    TwoContexts t(1000, 500);
    ASSERT_TRUE(t.ok());
    t.settle();
    t.spin_paced(20000);
    EXPECT_EQ(efa_core_net_wait_us(t.core()), 1000u);
}

// A process of this node that sent by the provider rings the doorbell
// before its message is in: from the ring on, every call polls until a
// poll finds a completion (a second-long interval would otherwise hold
// the message), the bell is answered (cleared), and the next message
// after that completion is polled for too (the warm period).
TEST(CorePace, ARungDoorbellPollsUntilSomethingComes) {
    BellRungWhenQuiet t;
    ASSERT_TRUE(t.ok());
    t.spin_paced(3000); // nothing yet, longer than the warm period
    EXPECT_EQ(t.bell(), 0u) << "the bell was not answered";
    t.inject_to_ctx0();
    EXPECT_LT(t.paced_until([] { return g_arrived == 1; }, 1000), 50);
    EXPECT_EQ(g_arrived, 1) << "after the bell the provider was left for the interval";
    t.inject_to_ctx0();
    EXPECT_LT(t.paced_until([] { return g_arrived == 2; }, 1000), 50);
    EXPECT_EQ(g_arrived, 2) << "no warm period after what the bell announced";
}

// A bell whose message never comes (a native one-sided operation brings
// the target no completion) stops making every call poll after a second.
TEST(CorePace, ADoorbellWithNothingAfterItLapses) {
    BellRungWhenQuiet t;
    ASSERT_TRUE(t.ok());
    t.spin_paced(1200000); // past the bell's second
    t.inject_to_ctx0();
    t.paced_until([] { return g_arrived > 0; }, 2000);
    EXPECT_EQ(g_arrived, 0) << "still polled on every call a second after an unanswered bell";
}
