// efa_core_get_counters (core_counters.cpp), what the MPI_T performance
// variables common_efa_* read: completions counted as the provider hands
// them back, registrations as the cache serves or makes them, a lost peer
// once however often it is declared lost; and zeros without a core.
#include <gtest/gtest.h>

#include <vector>

#include <rdma/fi_errno.h>

#include "core_test_op.hpp"
#include "core_test_params.hpp"
#include "core_with_self.hpp"

namespace {

efa_core_counters_t counters(efa_core_t *core) {
    efa_core_counters_t c;
    efa_core_get_counters(core, &c);
    return c;
}

TEST(CoreCounters, NoCoreReadsZeros) {
    efa_core_counters_t c;
    c.completions = 7;
    efa_core_get_counters(nullptr, &c);
    EXPECT_EQ(c.completions, 0u);
    EXPECT_EQ(c.mr_misses, 0u);
    EXPECT_EQ(c.peers_lost, 0u);
}

TEST(CoreCounters, CompletionsRegistrationsAndLostPeers) {
    CoreWithSelf self;
    efa_core_params_t p = core_test_params("shm");
    p.mem_release_hooks = true; // the cache reuses registrations (as under Open MPI's hooks)
    ASSERT_TRUE(self.open(p));
    efa_core_t *core = self.core();
    const efa_core_counters_t start = counters(core);

    // A message to itself: the receive and the send complete.
    efa_ctx_t *ctx = efa_core_ctx(core, 0);
    ASSERT_NE(ctx, nullptr);
    char in[64] = {0}, out[64] = "counted";
    CoreTestOp recv, send;
    recv.op.rx_class = EFA_RX_USER;
    ASSERT_EQ(efa_ctx_trecv(ctx, in, sizeof(in), nullptr, self.self()->addr[0], 42, 0, &recv.op),
              0);
    ASSERT_EQ(efa_ctx_tsend(ctx, out, sizeof(out), nullptr, self.self()->addr[0], 42, 0, &send.op),
              0);
    core_test_wait(core, recv, 5.0);
    core_test_wait(core, send, 5.0);
    ASSERT_TRUE(recv.done && send.done);
    EXPECT_GE(counters(core).completions, start.completions + 2);

    // The first registration of a buffer is the provider's, the second the
    // cache's.
    const efa_core_counters_t before_mr = counters(core);
    std::vector<char> buf(1 << 16);
    int err = 0;
    efa_mr_t *a = efa_core_mr_acquire(core, buf.data(), buf.size(), FI_SEND, &err);
    ASSERT_NE(a, nullptr) << err;
    efa_core_mr_release(core, a);
    efa_mr_t *b = efa_core_mr_acquire(core, buf.data(), buf.size(), FI_SEND, &err);
    ASSERT_NE(b, nullptr) << err;
    efa_core_mr_release(core, b);
    const efa_core_counters_t mr = counters(core);
    EXPECT_EQ(mr.mr_misses, before_mr.mr_misses + 1);
    EXPECT_EQ(mr.mr_hits, before_mr.mr_hits + 1);

    // A peer declared lost counts once, however often it is declared.
    efa_core_peer_lost(core, self.self()->addr[0], -FI_EHOSTUNREACH, "a test");
    efa_core_peer_lost(core, self.self()->addr[0], -FI_EHOSTUNREACH, "a test, again");
    EXPECT_EQ(counters(core).peers_lost, start.peers_lost + 1);
    EXPECT_EQ(counters(core).posts_waiting, 0u);
}

// The process's counts keep what a released core counted: a counter never
// goes down, not even after finalize (MPI_T tools read on).
TEST(CoreCounters, ReleasedCoresStayCounted) {
    efa_core_counters_t before_open;
    efa_core_get_current_counters(&before_open);
    uint64_t seen = 0;
    {
        CoreWithSelf self;
        ASSERT_TRUE(self.open(core_test_params("shm")));
        efa_ctx_t *ctx = efa_core_ctx(self.core(), 0);
        char in[8] = {0}, out[8] = "x";
        CoreTestOp recv, send;
        recv.op.rx_class = EFA_RX_USER;
        ASSERT_EQ(efa_ctx_trecv(ctx, in, sizeof(in), nullptr, self.self()->addr[0], 7, 0, &recv.op),
                  0);
        ASSERT_EQ(
            efa_ctx_tsend(ctx, out, sizeof(out), nullptr, self.self()->addr[0], 7, 0, &send.op), 0);
        core_test_wait(self.core(), recv, 5.0);
        core_test_wait(self.core(), send, 5.0);
        ASSERT_TRUE(recv.done && send.done);
        efa_core_counters_t open_now;
        efa_core_get_current_counters(&open_now);
        seen = open_now.completions;
        EXPECT_GE(seen, before_open.completions + 2);
    } // released here
    efa_core_counters_t after_release;
    efa_core_get_current_counters(&after_release);
    EXPECT_GE(after_release.completions, seen);
    EXPECT_EQ(after_release.posts_waiting, 0u);
}

} // namespace
