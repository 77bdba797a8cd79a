// The first rail lost to a peer that other rails still reach
// (common/core/core_rail0.cpp), with a core that talks to itself on
// tcp;ofi_rxm over two NICs (this host's interface and the loopback one,
// as test_core_rail_back.cpp).  Where nothing pinned the first rail, its
// loss takes it out for the peer alone: posts on it are refused, a read
// goes by the other rail, what waits on the process lives on through
// probes over the other rail, and only the other rail's loss then is the
// peer's.  A component that pinned the first rail keeps its loss the
// peer's, as before.  With common_efa_rail_retry set, the first rail is
// asked again like any and comes back once the peer answers over it; a
// rail's failed untagged receive buffers are posted again after it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_test_iface.hpp"
#include "core_test_read.hpp"
#include "core_with_self.hpp"
#include "efa_core_msg.h"

namespace {

constexpr size_t kLen = 1 << 20;

class CoreRail0 : public ::testing::Test {
  protected:
    void open(int peer_timeout = 60, bool failover = true, int retry_s = 0) {
        efa_core_params_t p;
        if (!core_test_two_rails(&nics_, &p)) {
            GTEST_SKIP() << "no interface beside loopback for a second rail";
        }
        p.rail_retry = retry_s;
        p.rail_failover = failover;
        p.peer_timeout = peer_timeout;
        ASSERT_TRUE(self_.open(p));
        core_ = self_.core();
        ASSERT_EQ(efa_core_get_info(core_)->num_nics, 2) << "two rails: " << nics_;
        ASSERT_TRUE(efa_core_get_info(core_)->has_tagged) << "the probes need tags";
        nctx_ = efa_core_get_info(core_)->num_contexts;
        ASSERT_NE(rail_addr(1), FI_ADDR_NOTAVAIL) << "rail 1 does not reach the process itself";
        ASSERT_TRUE(self_.self()->rails_mutual & 2u) << "rail 1 does not pair back";
    }
    fi_addr_t rail_addr(int rail) const { return efa_peer_rail_addr(self_.self(), rail, 0, nctx_); }
    fi_addr_t first() const { return self_.self()->addr[0]; }
    // The first rail's key expires or fails, as the deadline would find
    // it; then progress until the notice to the peer (itself, over the
    // other rail) has gone and come: tcp;ofi_rxm leaks a message still
    // in flight when its endpoint closes.
    bool lose_first() {
        const uint64_t told = core_test_counters().rail_out_notices;
        const bool lost = efa::rail0_lost(core_, first(), -FI_ETIMEDOUT, "the test");
        for (int i = 0;
             i < 2000 && lost && !(notices_done() && core_test_counters().rail_out_notices > told);
             ++i) {
            efa_core_progress(core_);
            usleep(1000);
        }
        return lost;
    }
    bool notices_done() {
        std::lock_guard<std::mutex> guard(core_->deadline_lock);
        return core_->answers_out.empty();
    }

    // A 1 MiB read of the process's own buffer planned as the engine
    // plans one (the first rail's context and address, the peer's rails).
    int read_planned() {
        return core_test_read_self(core_, kLen, [this](efa_rail_read_req_t &r, efa_mr_t *mr) {
            r.ctx = efa_core_rail_ctx(core_, 0, 0);
            r.addr = first();
            r.peer = self_.self();
            r.rkeys = 2;
            r.rkey[0] = efa_mr_key(mr);
            r.rkey[1] = efa_mr_rail_key(mr, 1);
        });
    }

    CoreWithSelf self_;
    efa_core_t *core_ = nullptr;
    int nctx_ = 1;
    std::string nics_;
};

TEST_F(CoreRail0, TheFirstRailLeavesThePeerAloneWhereNothingPinsIt) {
    open();
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    const efa_core_counters_t before = core_test_counters();
    ASSERT_TRUE(lose_first()) << "the first rail's loss was not taken as a rail's";
    EXPECT_EQ(rail_addr(0), FI_ADDR_NOTAVAIL) << "the first rail still planned";
    EXPECT_NE(rail_addr(1), FI_ADDR_NOTAVAIL) << "the other rail went with it";
    EXPECT_EQ(efa::home_rail(self_.self()), 1);
    const efa_core_counters_t after = core_test_counters();
    EXPECT_EQ(after.rails_lost, before.rails_lost + 1);
    EXPECT_EQ(after.peers_lost, before.peers_lost) << "the peer was declared lost";
    EXPECT_EQ(efa_core_peer_state(core_, self_.self()), 0)
        << "a first rail alone out reads as the peer's loss";
    // A message over the first rail is refused at once; its owner goes
    // by another (the engine's NetLink).
    char byte = 1;
    efa_op_t op{};
    op.complete = efa_op_complete_nothing;
    EXPECT_EQ(efa_ctx_try_send(efa_core_rail_ctx(core_, 0, 0), &byte, 1, nullptr, first(), &op),
              -FI_EHOSTUNREACH);
    EXPECT_EQ(efa_ctx_try_inject(efa_core_rail_ctx(core_, 0, 0), &byte, 1, first()),
              -FI_EHOSTUNREACH);
    // A read planned on the first rail goes by the other, whole.
    EXPECT_EQ(read_planned(), 0);
    EXPECT_GE(core_test_counters().nic_rma_bytes[1], after.nic_rma_bytes[1] + kLen)
        << "the read did not go over NIC 1";
    // Lost again: it is out already, so that is the process's loss.
    EXPECT_FALSE(lose_first());
}

// common_efa_rail_retry seconds after its loss the core pings the peer
// over the first rail (a peer probe there), the peer (itself) answers
// over it, and the answer puts it back: planned again, the home again,
// posts on it taken.
TEST_F(CoreRail0, TheFirstRailComesBackOnceThePeerAnswersOverIt) {
    open(60, true, 1);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    const efa_core_counters_t before = core_test_counters();
    ASSERT_TRUE(lose_first());
    ASSERT_EQ(rail_addr(0), FI_ADDR_NOTAVAIL);
    EXPECT_EQ(efa::home_rail(self_.self()), 1);
    EXPECT_EQ(core_->rail0_out_peers.load(), 1);
    bool back = false;
    for (int i = 0; i < 5000 && !back; ++i) {
        efa_core_progress(core_);
        back = rail_addr(0) != FI_ADDR_NOTAVAIL;
        usleep(1000);
    }
    ASSERT_TRUE(back) << "the first rail never came back";
    EXPECT_EQ(efa::home_rail(self_.self()), 0);
    // Posts on the first rail no longer look it up (no lock per post).
    EXPECT_EQ(core_->rail0_out_peers.load(), 0);
    const efa_core_counters_t after = core_test_counters();
    EXPECT_EQ(after.rails_back, before.rails_back + 1);
    EXPECT_EQ(after.peers_lost, before.peers_lost) << "the peer was declared lost";
    char byte = 1;
    EXPECT_NE(efa_ctx_try_inject(efa_core_rail_ctx(core_, 0, 0), &byte, 1, first()),
              -FI_EHOSTUNREACH)
        << "posts on the first rail still refused once it is back";
    // A read planned on the first rail goes by it again.
    EXPECT_EQ(read_planned(), 0);
    EXPECT_GE(core_test_counters().nic_rma_bytes[0], after.nic_rma_bytes[0] + kLen / 2)
        << "the read did not go over NIC 0";
    // Lost again: taken out again, not the peer's loss.
    EXPECT_TRUE(lose_first());
    EXPECT_EQ(core_->rail0_out_peers.load(), 1);
}

// After the first rail, the other's loss leaves the peer no rail: the
// peer's loss, its operations failed on both.
TEST_F(CoreRail0, TheLastRailLeftIsThePeers) {
    open();
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    ASSERT_TRUE(lose_first());
    struct Watch {
        efa_op_t op{};
        int err = 1; // (1: not called)
    } w;
    w.op.complete = [](efa_op_t *op, const efa_cqe_t *cqe) {
        reinterpret_cast<Watch *>(op)->err = cqe->err;
    };
    ASSERT_EQ(efa_core_peer_watch(core_, self_.self(), &w.op), 0);
    const efa_core_counters_t before = core_test_counters();
    efa_core_peer_lost(core_, efa::rail_key(first(), 1), -FI_EIO, "the test took it out");
    EXPECT_EQ(core_test_counters().peers_lost, before.peers_lost + 1)
        << "the last rail's loss was not the peer's";
    // Told as a lost process (ULFM's MPI_ERR_PROC_FAILED), whatever failed
    // on the last rail.
    for (int i = 0; i < 100 && 1 == w.err; ++i) {
        efa_core_progress(core_);
    }
    EXPECT_EQ(w.err, -FI_EHOSTUNREACH);
    EXPECT_EQ(core_test_counters().rails_lost, before.rails_lost)
        << "taken as one more rail's loss";
    EXPECT_EQ(efa_core_peer_state(core_, self_.self()), 1) << "the peer's loss not read as one";
}

// A component whose messages must stay on the first rail pins it: its
// loss is then the peer's, as is the first rail's loss without failover.
TEST_F(CoreRail0, APinnedFirstRailIsThePeers) {
    open();
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    efa_core_pin_rail0(core_, "the test's messages");
    EXPECT_FALSE(lose_first()) << "a pinned first rail was taken out alone";
    EXPECT_NE(rail_addr(0), FI_ADDR_NOTAVAIL);
}

TEST_F(CoreRail0, WithoutFailoverTheFirstRailIsThePeers) {
    open(60, false);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    EXPECT_FALSE(lose_first());
    EXPECT_NE(rail_addr(0), FI_ADDR_NOTAVAIL);
}

// What waits on the process (a watch: a receive posted for it alone)
// stays under its first-rail key; with the first rail out, the probes
// that keep it alive go by the other rail and their answers come back
// there.  Probes over the first rail (its ping receives cancelled here)
// would go unanswered and the peer be declared lost after one timeout
// (2 s here).
TEST_F(CoreRail0, ProbesOverTheOtherRailKeepAWatchedPeerAlive) {
    open(2);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    ASSERT_TRUE(lose_first());
    // The first NIC takes no more pings, as a dead NIC would not: a probe
    // over it would never be answered.
    for (efa_op_t *op : core_->probe_recvs) {
        for (int i = 0; i < nctx_; ++i) {
            (void)fi_cancel(&efa_core_rail_ctx(core_, 0, i)->ep->fid, &op->fi_ctx);
        }
    }
    for (int i = 0; i < 100; ++i) {
        efa_core_progress(core_); // the cancels complete
    }
    struct Watch {
        efa_op_t op{};
        bool called = false;
    } w;
    w.op.complete = [](efa_op_t *op, const efa_cqe_t *) {
        reinterpret_cast<Watch *>(op)->called = true;
    };
    ASSERT_EQ(efa_core_peer_watch(core_, self_.self(), &w.op), 0);
    const efa_core_counters_t before = core_test_counters();
    for (int i = 0; i < 5000 && !w.called; ++i) { // 2.5 timeouts
        efa_core_progress(core_);
        usleep(1000);
    }
    EXPECT_FALSE(w.called) << "the watched peer was declared lost";
    EXPECT_EQ(core_test_counters().peers_lost, before.peers_lost);
    EXPECT_TRUE(efa_core_peer_unwatch(core_, &w.op));
}

} // namespace

// The untagged receive buffers of a rail whose receives failed (here
// cancelled, as a failing NIC fails them) rest, and are posted again once
// common_efa_rail_retry seconds have passed: a link that comes back, which
// the peers' pings find through the probe receives, has buffers for its
// messages too.  Without the parameter they stay out, as the rail does.
TEST_F(CoreRail0, ARailsFailedReceiveBuffersArePostedAgainAfterTheRetry) {
    open(60, true, 1);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    static int failures;
    failures = 0;
    const efa_msg_handler_fn count_failures = [](void *, efa_ctx_t *, void *, size_t, int err,
                                                 fi_addr_t) { failures += err ? 1 : 0; };
    ASSERT_EQ(efa_core_msg_set_handler(core_, count_failures, nullptr), 0);
    const size_t full = efa_core_msg_posted(core_, 1);
    ASSERT_GT(full, 0u) << "no receive buffers on the second NIC";
    // (the provider hands the cancels back one poll at a time)
    size_t least = full;
    for (int i = 0; i < 10000 && static_cast<size_t>(failures) < full; ++i) {
        if (i < 5) {
            efa_core_msg_cancel_rail(core_, 1);
        }
        efa_core_progress(core_);
        least = std::min(least, efa_core_msg_posted(core_, 1));
        usleep(1000);
    }
    ASSERT_EQ(static_cast<size_t>(failures), full) << "the channel did not hear of each";
    EXPECT_LT(least, full) << "none was taken out";
    EXPECT_EQ(efa_core_msg_posted(core_, 0), full) << "the first NIC's were touched";
    for (int i = 0; i < 5000 && efa_core_msg_posted(core_, 1) < full; ++i) {
        efa_core_progress(core_);
        usleep(1000);
    }
    EXPECT_EQ(efa_core_msg_posted(core_, 1), full) << "not posted again after the retry's second";
    efa_core_msg_set_handler(core_, nullptr, nullptr);
}

TEST_F(CoreRail0, WithoutTheRetryARailsFailedReceiveBuffersStayOut) {
    open(60, true, 0);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    const efa_msg_handler_fn none = [](void *, efa_ctx_t *, void *, size_t, int, fi_addr_t) {};
    ASSERT_EQ(efa_core_msg_set_handler(core_, none, nullptr), 0);
    ASSERT_GT(efa_core_msg_posted(core_, 1), 0u);
    for (int i = 0; i < 10000 && efa_core_msg_posted(core_, 1) > 0; ++i) {
        if (i < 5) {
            efa_core_msg_cancel_rail(core_, 1);
        }
        efa_core_progress(core_);
        usleep(1000);
    }
    for (int i = 0; i < 1500; ++i) { // (more than a second: nothing comes back)
        efa_core_progress(core_);
        usleep(1000);
    }
    EXPECT_EQ(efa_core_msg_posted(core_, 1), 0u);
    efa_core_msg_set_handler(core_, nullptr, nullptr);
}
