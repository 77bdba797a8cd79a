// The matching engine's link and a message the provider still holds when
// its peer is declared lost (common/engine/net_link.cpp): the core tells
// the link at once that it failed, orphaned (efa_cqe_t.orphaned), and the
// buffer is retired rather than given to the next message.  A peer that
// is alive after all (a partition that healed) could still receive the
// bytes; written over by a message for another peer, they would be
// delivered to the wrong process.  A message that completed normally
// gives its buffer back as before.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <memory>

#include <rdma/fi_errno.h>

#include "core_test_params.hpp"
#include "core_with_self.hpp"
#include "net_link.hpp"

namespace {

using efa::engine::NetLink;
using efa::engine::NetParams;

constexpr size_t kFrame = 64;

class NetLinkOrphan : public ::testing::Test {
  protected:
    void SetUp() override {
        efa_core_params_t p = core_test_params("shm");
        p.peer_timeout = 60; // the deadline on, never expiring by itself here
        ASSERT_TRUE(self_.open(p));
        core_ = self_.core();
        NetParams np;
        np.core = core_;
        np.inject = false; // every message has a completion
        int err = 0;
        link_ = NetLink::create(np, &NetLinkOrphan::sent, this, err);
        ASSERT_TRUE(link_) << "NetLink::create: " << err;
        to_ = self_.self()->addr[0];
        peer_ = link_->add_peer(0, to_, efa_core_ctx(core_, 0), 0, to_, efa_core_ctx(core_, 0));
    }
    static void sent(void *owner, NetLink::Buf *b, NetLink::Peer *, int err) {
        auto *t = static_cast<NetLinkOrphan *>(owner);
        t->last_err_ = err;
        if (b) {
            ++t->completed_;
            t->last_buf_ = b;
            if (!t->hold_) {
                t->link_->release(b);
            }
        }
    }
    void send_one() {
        void *f = link_->reserve(peer_, kFrame);
        ASSERT_NE(f, nullptr);
        memset(f, 0x5a, kFrame);
        link_->commit(peer_, kFrame);
    }
    // Until 'n' messages completed (shm's first send to a new peer waits
    // until the peer's region is mapped).
    void pump_until(int n) {
        for (int i = 0; i < 20000 && completed_ < n; ++i) {
            link_->progress();
            efa_core_progress(core_);
            usleep(50);
        }
    }

    CoreWithSelf self_;
    efa_core_t *core_ = nullptr;
    std::unique_ptr<NetLink> link_;
    NetLink::Peer *peer_ = nullptr;
    fi_addr_t to_ = FI_ADDR_UNSPEC;
    int completed_ = 0;
    int last_err_ = 0;
    NetLink::Buf *last_buf_ = nullptr;
    bool hold_ = false; // the owner keeps the buffer (as fail_over does, posting it again)
};

} // namespace

TEST_F(NetLinkOrphan, AMessageTheProviderHoldsAsItsPeerIsLostNeverLendsItsBuffer) {
    send_one();
    pump_until(1);
    ASSERT_EQ(completed_, 1) << "the first message never completed";
    ASSERT_EQ(last_err_, 0);
    EXPECT_EQ(link_->stats().retired, 0u) << "a message that completed normally kept its buffer";
    NetLink::Buf *reused = last_buf_;

    send_one(); // posted (the peer's region is mapped), not handed back yet
    ASSERT_EQ(completed_, 1);
    efa_core_peer_lost(core_, to_, -FI_EHOSTUNREACH, "the unit test lost it");
    ASSERT_EQ(completed_, 2) << "the link was not told of its message's failure at once";
    EXPECT_EQ(last_err_, -FI_EHOSTUNREACH);
    EXPECT_EQ(last_buf_, reused) << "(the first message's buffer went to the second)";
    EXPECT_EQ(link_->stats().retired, 1u)
        << "the buffer the provider may still read went back to the free list";
    EXPECT_TRUE(link_->idle());
    for (int i = 0; i < 100; ++i) { // the provider's late hand-back reaches nobody
        efa_core_progress(core_);
    }
    EXPECT_EQ(completed_, 2);
}

// fail_over posts a failed message's own buffer again where it has no
// memory for another; that post's normal completion must not undo the
// orphaned mark of the first: the provider may still read the buffer.
TEST_F(NetLinkOrphan, ABufferOrphanedOnceStaysRetiredAfterItsPostAgainCompletes) {
    send_one();
    pump_until(1);
    ASSERT_EQ(completed_, 1) << "the first message never completed";
    hold_ = true;
    send_one();
    efa_core_peer_lost(core_, to_, -FI_EHOSTUNREACH, "the unit test lost it");
    ASSERT_EQ(completed_, 2) << "the link was not told of its message's failure at once";
    NetLink::Buf *b = last_buf_;
    efa_cqe_t again{}; // (the post again completing normally)
    b->op.complete(&b->op, &again);
    ASSERT_EQ(completed_, 3);
    link_->release(b);
    EXPECT_EQ(link_->stats().retired, 1u)
        << "a buffer the provider may still read went back to the free list";
}
