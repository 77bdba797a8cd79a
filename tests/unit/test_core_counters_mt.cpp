// The completions counter (the pvar common_efa_completions) under
// MPI_THREAD_MULTIPLE: several threads drain the same context at once,
// and every completion they read is counted, none lost between them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core_test_params.hpp"
#include "core_with_self.hpp"

namespace {

// An operation another thread's progress may complete.
struct SharedOp {
    efa_op_t op{};
    std::atomic<bool> done{false};
    std::atomic<int> err{1};
    SharedOp() {
        op.complete = [](efa_op_t *o, const efa_cqe_t *c) {
            auto *self = reinterpret_cast<SharedOp *>(o);
            self->err.store(c->err, std::memory_order_relaxed);
            self->done.store(true, std::memory_order_release);
        };
    }
};

bool wait_both(efa_core_t *core, const SharedOp &a, const SharedOp &b) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!(a.done.load(std::memory_order_acquire) && b.done.load(std::memory_order_acquire))) {
        if (std::chrono::steady_clock::now() > until) {
            return false;
        }
        efa_core_progress(core);
    }
    return true;
}

TEST(CoreCountersThreaded, ConcurrentDrainsLoseNoCompletion) {
    CoreWithSelf self;
    efa_core_params_t p = core_test_params("shm");
    p.thread_multiple = 1;
    ASSERT_TRUE(self.open(p));
    efa_core_t *core = self.core();
    efa_ctx_t *ctx = efa_core_ctx(core, 0);
    ASSERT_NE(ctx, nullptr);
    const fi_addr_t me = self.self()->addr[0];

    efa_core_counters_t start;
    efa_core_get_counters(core, &start);
    constexpr int kThreads = 4;
    constexpr int kRounds = 1500;
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            char in[8], out[8] = "mt";
            for (int i = 0; i < kRounds; ++i) {
                SharedOp recv, send;
                recv.op.rx_class = EFA_RX_USER;
                const uint64_t tag = 100 + static_cast<uint64_t>(t);
                if (efa_ctx_trecv(ctx, in, sizeof(in), nullptr, me, tag, 0, &recv.op) != 0 ||
                    efa_ctx_tsend(ctx, out, sizeof(out), nullptr, me, tag, 0, &send.op) != 0 ||
                    !wait_both(core, recv, send) || recv.err.load() != 0 || send.err.load() != 0) {
                    failures.fetch_add(1);
                    return;
                }
            }
        });
    }
    for (auto &th : threads) {
        th.join();
    }
    ASSERT_EQ(failures.load(), 0);
    efa_core_counters_t end;
    efa_core_get_counters(core, &end);
    // Each round's receive and send came back through some thread's drain.
    EXPECT_GE(end.completions - start.completions, 2ull * kThreads * kRounds);
}

} // namespace
