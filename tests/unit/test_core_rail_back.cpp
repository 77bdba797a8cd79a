// A lost rail brought back (common/core/core_rail_back.cpp), with a core
// that talks to itself on tcp;ofi_rxm over two NICs (this host's interface
// and the loopback one, as test_core_rdv.cpp): rail 1 is taken out for the
// peer as a failure on it would (efa_core_peer_lost with the rail's key),
// then, common_efa_rail_retry seconds later, the core pings the peer over
// rail 1 alone, the peer (itself) answers over it, and the rail is back:
// planned again (efa_peer_rail_addr), its deadline key alive (a read over
// it completes), and counted.  With the retry at 0 it stays out.  The
// loss drops every registration, and the peer (itself) is told over the
// first rail, which drops its own and takes the rail out too where it has
// not yet.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "control_tags.hpp"
#include "core.hpp"
#include "core_test_iface.hpp"
#include "core_test_params.hpp"
#include "core_test_read.hpp"
#include "core_with_self.hpp"
#include "efa_device.h"

namespace {

constexpr size_t kLen = 1 << 20;

class CoreRailBack : public ::testing::Test {
  protected:
    // reuse: registrations kept idle and found again (as with Open MPI's
    // memory hooks on).
    void open(int retry_s, bool reuse = false, bool failover = true, int contexts = 0) {
        efa_core_params_t p;
        if (!core_test_two_rails(&nics_, &p)) {
            GTEST_SKIP() << "no interface beside loopback for a second rail";
        }
        if (contexts) {
            p.num_contexts = contexts;
        }
        p.rail_retry = retry_s;
        p.mem_release_hooks = reuse;
        p.rail_failover = failover;
        p.peer_timeout = 60;
        ASSERT_TRUE(self_.open(p));
        core_ = self_.core();
        ASSERT_EQ(efa_core_get_info(core_)->num_nics, 2) << "two rails: " << nics_;
        ASSERT_TRUE(efa_core_get_info(core_)->has_tagged) << "the pings need tags";
        nctx_ = efa_core_get_info(core_)->num_contexts;
        ASSERT_NE(rail1(), FI_ADDR_NOTAVAIL) << "rail 1 does not reach the process itself";
    }
    fi_addr_t rail1() const { return efa_peer_rail_addr(self_.self(), 1, 0, nctx_); }
    // A notice from the peer (itself) that it took out its rail 'rail',
    // as core_probe.cpp hands one over, then the progress call that acts
    // on it; 'other' names another process.
    void notice(int rail, bool other = false) {
        const uint64_t id = (core_->probe_id ^ (other ? 1 : 0)) & efa::control::kRailOutIdMask;
        efa::rail_out_received(core_, id, FI_ADDR_NOTAVAIL, rail);
        efa_core_progress(core_);
    }
    // Rail 1 fails for the peer, as an error completion on it would say.
    void lose_rail1() {
        efa_core_peer_lost(core_, efa::rail_key(self_.self()->addr[0], 1), -FI_EIO,
                           "the test took it out");
    }
    // Progress until rail 1 reaches again, or 'limit' seconds.
    bool wait_back(double limit) {
        for (int i = 0; i < static_cast<int>(limit * 1000); ++i) {
            efa_core_progress(core_);
            if (rail1() != FI_ADDR_NOTAVAIL) {
                return true;
            }
            usleep(1000);
        }
        return false;
    }
    // A 1 MiB read of the process's own buffer over rail 1 alone, to its
    // rail-1 address whatever the plans say (the deadline refuses it while
    // the rail is out); its completion's error (1: none came).
    int read_over_rail1() {
        return core_test_read_self(core_, kLen, [this](efa_rail_read_req_t &r, efa_mr_t *mr) {
            r.ctx = efa_core_rail_ctx(core_, 1, 0);
            r.addr = self_.self()->addr[static_cast<size_t>(nctx_)];
            r.peer = nullptr; // this rail alone
            r.rkeys = 1;
            r.rkey[0] = efa_mr_rail_key(mr, 1);
        });
    }

    CoreWithSelf self_;
    efa_core_t *core_ = nullptr;
    int nctx_ = 1;
    std::string nics_;
};

TEST_F(CoreRailBack, LostRailAnswersItsPingAndIsBack) {
    open(1);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    const efa_core_counters_t before = core_test_counters();
    lose_rail1();
    EXPECT_EQ(rail1(), FI_ADDR_NOTAVAIL) << "rail 1 still planned after its loss";
    EXPECT_EQ(core_test_counters().rails_lost, before.rails_lost + 1);
    // Not before its wait (1 s): a tenth of it in progress leaves it out.
    EXPECT_FALSE(wait_back(0.1)) << "back before common_efa_rail_retry";
    ASSERT_TRUE(wait_back(5)) << "rail 1 never came back";
    const efa_core_counters_t after = core_test_counters();
    EXPECT_EQ(after.rails_back, before.rails_back + 1);
    EXPECT_EQ(after.rails_lost, before.rails_lost + 1);
    // Said to each owner that moves off a lost rail: the engine and btl_efa.
    EXPECT_EQ(__atomic_load_n(&self_.self()->rails_back, __ATOMIC_RELAXED), 2u);
    EXPECT_EQ(__atomic_load_n(&self_.self()->rails_back_btl, __ATOMIC_RELAXED), 2u);
    // Its deadline key is alive again: a read over it completes whole.
    EXPECT_EQ(read_over_rail1(), 0);
    const efa_core_counters_t read = core_test_counters();
    EXPECT_GE(read.nic_rma_bytes[1], after.nic_rma_bytes[1] + kLen) << "not counted on NIC 1";
}

// A lost rail drops every registration (rail_lost): an operation of a
// peer that the provider still held on the silent rail, going on once the
// link is back, then carries keys that name nothing.  An idle registration
// is not found again after the loss; a held one stays valid for its
// holder, and a new acquire of its range registers anew.
TEST_F(CoreRailBack, LostRailDropsEveryRegistration) {
    open(60, true);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    std::vector<uint8_t> idle_buf(kLen, 1), held_buf(kLen, 2);
    auto acquire = [this](std::vector<uint8_t> &b) {
        int err = 0;
        efa_mr_t *mr = efa_core_mr_acquire(core_, b.data(), b.size(), FI_REMOTE_READ, &err);
        EXPECT_NE(mr, nullptr) << "registration: " << err;
        return mr;
    };
    efa_mr_t *idle = acquire(idle_buf);
    ASSERT_NE(idle, nullptr);
    const uint64_t idle_key = efa_mr_key(idle);
    efa_core_mr_release(core_, idle);
    efa_mr_t *again = acquire(idle_buf);
    ASSERT_NE(again, nullptr);
    EXPECT_EQ(efa_mr_key(again), idle_key) << "the cache did not keep the idle registration";
    efa_core_mr_release(core_, again);
    efa_mr_t *held = acquire(held_buf);
    ASSERT_NE(held, nullptr);
    const uint64_t held_key = efa_mr_key(held);

    lose_rail1();
    efa_core_progress(core_); // the cache applies the drop

    efa_mr_t *fresh = acquire(idle_buf);
    ASSERT_NE(fresh, nullptr);
    EXPECT_NE(efa_mr_key(fresh), idle_key) << "an idle registration outlived the lost rail";
    efa_mr_t *fresh_held = acquire(held_buf);
    ASSERT_NE(fresh_held, nullptr);
    EXPECT_NE(efa_mr_key(fresh_held), held_key) << "a held registration was found again";
    EXPECT_EQ(efa_mr_key(held), held_key) << "the holder's registration changed under it";
    efa_core_mr_release(core_, fresh_held);
    efa_core_mr_release(core_, fresh);
    efa_core_mr_release(core_, held);
}

TEST_F(CoreRailBack, LostRailTellsThePeer) {
    open(60);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    const uint64_t before = core_test_counters().rail_out_notices,
                   lost = core_test_counters().rails_lost;
    lose_rail1();
    bool told = false;
    for (int i = 0; i < 2000 && !told; ++i) {
        efa_core_progress(core_);
        told = core_test_counters().rail_out_notices > before;
        usleep(1000);
    }
    EXPECT_TRUE(told) << "no notice of the lost rail came over the first rail in 2 s";
    EXPECT_EQ(core_test_counters().rail_out_notices, before + 1) << "one loss, one notice";
    EXPECT_EQ(core_test_counters().rails_lost, lost + 1)
        << "the notice of a rail out already took it out again";
}

// The notice's receiving end takes out the rail that meets the peer's NIC
// (its peer may have seen it fail at once, where this side would wait its
// deadline), once; a rail that meets none, or failover off, takes nothing.
TEST_F(CoreRailBack, PeersNoticeTakesTheRailOut) {
    open(60);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    const uint64_t lost = core_test_counters().rails_lost;
    notice(2); // no rail of this process meets a NIC 2 of the peer
    notice(1, true);
    EXPECT_NE(rail1(), FI_ADDR_NOTAVAIL) << "a notice naming no rail here, or from a stranger";
    notice(1);
    EXPECT_EQ(rail1(), FI_ADDR_NOTAVAIL) << "the peer's notice left the rail in";
    EXPECT_EQ(core_test_counters().rails_lost, lost + 1);
    notice(1);
    EXPECT_EQ(core_test_counters().rails_lost, lost + 1)
        << "a rail out already was taken out again";
}

TEST_F(CoreRailBack, PeersNoticeWithoutFailoverTakesNothing) {
    open(60, false, false);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    const efa_core_counters_t before = core_test_counters();
    notice(1);
    EXPECT_NE(rail1(), FI_ADDR_NOTAVAIL);
    EXPECT_EQ(core_test_counters().rails_lost, before.rails_lost);
    EXPECT_EQ(core_test_counters().peers_lost, before.peers_lost)
        << "the notice was taken as the peer's loss";
    EXPECT_EQ(core_test_counters().rail_out_notices, before.rail_out_notices + 1);
}

// The notice's receiving end: a peer that had nothing in flight on the rail
// drops its registrations too; a notice from a process not known here
// drops nothing.
TEST_F(CoreRailBack, PeersNoticeDropsEveryRegistration) {
    open(60, true);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    std::vector<uint8_t> buf(kLen, 3);
    auto key_now = [&]() {
        int err = 0;
        efa_mr_t *mr = efa_core_mr_acquire(core_, buf.data(), buf.size(), FI_REMOTE_READ, &err);
        EXPECT_NE(mr, nullptr) << "registration: " << err;
        const uint64_t key = mr ? efa_mr_key(mr) : FI_KEY_NOTAVAIL;
        if (mr) {
            efa_core_mr_release(core_, mr);
        }
        return key;
    };
    const uint64_t key = key_now();
    ASSERT_EQ(key_now(), key) << "the cache did not keep the idle registration";

    notice(0, true);
    efa_core_progress(core_);
    EXPECT_EQ(key_now(), key) << "a notice from an unknown process dropped a registration";

    const uint64_t before = core_test_counters().rail_out_notices;
    notice(0); // (a rail that meets nothing here: only the registrations)
    efa_core_progress(core_);
    EXPECT_NE(key_now(), key) << "a registration outlived the peer's notice";
    EXPECT_EQ(core_test_counters().rail_out_notices, before + 1);
}

TEST_F(CoreRailBack, LostAgainWaitsTwiceAsLong) {
    open(1);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    lose_rail1();
    ASSERT_TRUE(wait_back(5));
    lose_rail1();
    EXPECT_EQ(rail1(), FI_ADDR_NOTAVAIL);
    // 2 s now: still out after 1.3 s, back within a few more.
    EXPECT_FALSE(wait_back(1.3)) << "the second loss did not wait longer";
    EXPECT_TRUE(wait_back(6)) << "rail 1 never came back the second time";
}

// With two contexts each one's operations on rail 1 are tracked under its
// own key: a loss found on the second context's is the rail's for both,
// said and counted once, and the first context's key is dead with it.
TEST_F(CoreRailBack, LostOnOneContextIsLostOnEach) {
    open(60, false, true, 2);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    ASSERT_EQ(nctx_, 2);
    const fi_addr_t first_ctx = efa::rail_key(self_.self()->addr[0], 1);
    const fi_addr_t second_ctx = efa::rail_key(self_.self()->addr[1], 1);
    const uint64_t before = core_test_counters().rails_lost,
                   notices = core_test_counters().rail_out_notices;
    efa_core_peer_lost(core_, second_ctx, -FI_EIO, "the test took it out");
    EXPECT_EQ(rail1(), FI_ADDR_NOTAVAIL);
    EXPECT_EQ(core_test_counters().rails_lost, before + 1);
    // Its notice to the peer (itself) goes and comes before the core
    // closes (tcp;ofi_rxm leaks a message in flight at close).
    for (int i = 0; i < 2000 && core_test_counters().rail_out_notices == notices; ++i) {
        efa_core_progress(core_);
        usleep(1000);
    }
    EXPECT_EQ(core_test_counters().rail_out_notices, notices + 1) << "one loss, one notice";
    {
        std::lock_guard<std::mutex> guard(core_->deadline_lock);
        EXPECT_TRUE(core_->deadline.dead(first_ctx)) << "the first context still waits on rail 1";
    }
    efa_core_peer_lost(core_, first_ctx, -FI_EIO, "the test took it out");
    EXPECT_EQ(core_test_counters().rails_lost, before + 1) << "the loss was said again";
}

TEST_F(CoreRailBack, RetryZeroLeavesItOut) {
    open(0);
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    lose_rail1();
    EXPECT_FALSE(wait_back(2.5)) << "came back with common_efa_rail_retry 0";
    EXPECT_NE(read_over_rail1(), 0) << "a read over a rail taken out was not refused";
}

} // namespace

// A peer's notice drops device registrations too, and at once: the device
// cache sees no progress call (only the host cache's queue is applied
// there), so an idle registration of device memory would keep its key
// until some later device transfer, which may never come.  (shm, which
// takes the fake device's memory through FI_HMEM; the notice names a NIC
// that meets nothing here: only the registrations go.)
TEST(CoreRailOutDevice, APeersNoticeDropsIdleDeviceRegistrationsAtOnce) {
    efa_core_params_t p = core_test_params("shm");
    p.debug_fake_device = true;
    p.debug_fake_device_hmem = true;
    p.hmem = true;
    p.mem_release_hooks = true; // (idle registrations kept and found again)
    CoreWithSelf self;
    ASSERT_TRUE(self.open(p));
    efa_core_t *core = self.core();
    ASSERT_TRUE(efa_core_get_info(core)->hmem) << "shm took no device memory";
    ASSERT_NE(core->dev_mr_cache, nullptr);
    void *dev = efa_fake_device_alloc(kLen);
    ASSERT_NE(dev, nullptr);
    int err = 0;
    efa_mr_t *idle = efa_core_mr_acquire_device(core, dev, kLen, FI_REMOTE_WRITE, &err);
    ASSERT_NE(idle, nullptr) << "registration: " << err;
    efa_core_mr_release(core, idle);
    const uint64_t before = core->dev_mr_cache->counts().invalidations;

    efa::rail_out_received(core, core->probe_id & efa::control::kRailOutIdMask, FI_ADDR_NOTAVAIL,
                           3);

    EXPECT_GT(core->dev_mr_cache->counts().invalidations, before)
        << "the idle device registration outlived the notice until the next device call";
    efa_fake_device_free(dev);
    efa_fake_device_visible(false);
}
