// The matching engine's link when the first rail fails
// (common/engine/net_link.cpp), over a core that talks to itself on
// tcp;ofi_rxm over two NICs (as test_core_rail0.cpp).  A lone message to
// a peer that another rail reaches goes by inject with its buffer kept
// until the peer's grant shows it handed on; when the first rail is out
// for the peer, the next message is refused there and the peer moves to
// the other rail, the kept message going again there (or at once, when
// the link follows the rails the core took out); a grant covering a kept
// message frees it.  A rail the core takes out and puts back (the peer
// answered over it) is left and then taken again, a peer whose own rail
// it was moving back to it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_test_iface.hpp"
#include "core_with_self.hpp"
#include "efa_core_msg.h"
#include "net_link.hpp"

namespace {

using efa::engine::NetLink;
using efa::engine::NetParams;

constexpr size_t kFrame = 16;

class NetLinkRail0 : public ::testing::Test {
  protected:
    void SetUp() override {
        efa_core_params_t p;
        if (!core_test_two_rails(&nics_, &p)) {
            GTEST_SKIP() << "no interface beside loopback for a second rail";
        }
        p.rail_retry = 0;
        p.rail_failover = true;
        p.peer_timeout = 60;
        ASSERT_TRUE(self_.open(p));
        core_ = self_.core();
        ASSERT_EQ(efa_core_get_info(core_)->num_nics, 2) << "two rails: " << nics_;
        nctx_ = efa_core_get_info(core_)->num_contexts;
        ASSERT_GE(efa_core_get_info(core_)->inject_size,
                  sizeof(efa::engine::NetHdr) + efa::engine::net_span(kFrame))
            << "the provider injects no message of one small frame";
        NetParams np;
        np.core = core_;
        np.rail_failover = true;
        int err = 0;
        link_ = NetLink::create(np, &NetLinkRail0::sent, this, err);
        ASSERT_TRUE(link_) << "NetLink::create: " << err;
        const efa_peer_t *self = self_.self();
        peer_ = link_->add_peer(0, self->addr[0], efa_core_rail_ctx(core_, 0, 0), 0, self->addr[0],
                                efa_core_rail_ctx(core_, 0, 0));
        link_->add_turn(peer_, 1, self->addr[static_cast<size_t>(nctx_)],
                        efa_core_rail_ctx(core_, 1, 0));
        // tcp;ofi_rxm connects on first use (-FI_EAGAIN until then): each
        // rail's connection up before the link's first message.
        for (int r = 0; r < 2; ++r) {
            const uint64_t byte = 0;
            int rc = -FI_EAGAIN;
            for (int i = 0; i < 5000 && -FI_EAGAIN == rc; ++i) {
                rc = efa_ctx_try_inject(efa_core_rail_ctx(core_, r, 0), &byte, sizeof(byte),
                                        self->addr[static_cast<size_t>(r * nctx_)]);
                efa_core_progress(core_);
                usleep(100);
            }
            ASSERT_EQ(rc, 0) << "rail " << r << " does not reach the process itself";
        }
    }
    void TearDown() override {
        for (int i = 0; link_ && i < 5000 && !link_->idle(); ++i) {
            pump();
        }
    }
    static void sent(void *owner, NetLink::Buf *b, NetLink::Peer *, int err) {
        auto *t = static_cast<NetLinkRail0 *>(owner);
        if (b) {
            ++t->completed_;
            t->last_err_ = err;
            t->link_->release(b);
        } else {
            t->last_err_ = err;
        }
    }
    // One small frame to the peer (posted at once: nothing in flight).
    void send_small() {
        void *f = link_->reserve(peer_, kFrame);
        ASSERT_NE(f, nullptr);
        memset(f, 0x5a, kFrame);
        link_->commit(peer_, kFrame);
    }
    void pump() {
        link_->progress();
        efa_core_progress(core_);
        usleep(100);
    }

    CoreWithSelf self_;
    efa_core_t *core_ = nullptr;
    int nctx_ = 1;
    std::string nics_;
    std::unique_ptr<NetLink> link_;
    NetLink::Peer *peer_ = nullptr;
    int completed_ = 0;
    int last_err_ = 0;
};

TEST_F(NetLinkRail0, AnInjectedMessageIsKeptAndGoesAgainWhenTheFirstRailFails) {
    ASSERT_TRUE(peer_->keep_injected) << "a peer with another rail: injects keep their buffer";
    send_small();
    EXPECT_EQ(link_->stats().injected, 1u);
    EXPECT_EQ(peer_->kept_n, 1u) << "the injected message's buffer was not kept";
    ASSERT_TRUE(efa::rail0_lost(core_, self_.self()->addr[0], -FI_ETIMEDOUT, "the test"));
    link_->progress(); // (the next message may not inject: one per progress call)
    send_small();      // refused on the first rail: the peer moves, the kept one goes again
    EXPECT_EQ(peer_->rail, 1) << "the peer's messages did not move off the first rail";
    EXPECT_EQ(peer_->kept_n, 0u);
    EXPECT_FALSE(peer_->keep_injected || peer_->may_inject) << "injects on the other rail";
    for (int i = 0; i < 5000 && completed_ < 2; ++i) {
        pump();
    }
    EXPECT_EQ(completed_, 2) << "the kept message and the new one did not both complete";
    EXPECT_EQ(last_err_, 0);
    EXPECT_EQ(link_->stats().failed_over, 1u) << "the kept message was not sent again";
    EXPECT_EQ(peer_->error, 0);
}

// A round trip waits on the kept message: nothing else goes to the peer,
// so no post is refused; the link follows the core's rails out instead.
TEST_F(NetLinkRail0, AKeptMessageGoesAgainWithNothingElseSent) {
    peer_->rails_down = &self_.self()->rails_down;
    send_small();
    ASSERT_EQ(peer_->kept_n, 1u);
    link_->leave_rails_out();
    EXPECT_EQ(peer_->kept_n, 1u) << "left the first rail while the core still had it";
    ASSERT_TRUE(efa::rail0_lost(core_, self_.self()->addr[0], -FI_ETIMEDOUT, "the test"));
    link_->leave_rails_out();
    EXPECT_EQ(peer_->rail, 1) << "the peer stayed on the rail the core took out";
    EXPECT_EQ(peer_->live, 2u);
    EXPECT_EQ(peer_->kept_n, 0u);
    for (int i = 0; i < 5000 && completed_ < 1; ++i) {
        pump();
    }
    EXPECT_EQ(completed_, 1) << "the kept message did not go again";
    EXPECT_EQ(last_err_, 0);
    EXPECT_EQ(link_->stats().failed_over, 1u);
    EXPECT_EQ(peer_->error, 0);
}

TEST_F(NetLinkRail0, APeersGrantFreesTheKeptMessages) {
    send_small();
    ASSERT_EQ(peer_->kept_n, 1u);
    // The peer has handed on message 0: its grant is one past the credit.
    link_->granted(peer_, link_->credit() + 1);
    EXPECT_EQ(peer_->kept_n, 0u) << "a message the peer handed on stayed kept";
}

TEST_F(NetLinkRail0, AGrantBelowAKeptMessageKeepsIt) {
    send_small();
    link_->progress(); // the next lone message may inject again
    send_small();
    ASSERT_EQ(peer_->kept_n, 2u) << "two lone messages, both injected and kept";
    link_->granted(peer_, link_->credit() + 1); // message 0 handed on, not message 1
    EXPECT_EQ(peer_->kept_n, 1u);
}

// The core takes the second rail out and puts it back: the link leaves it
// and takes it again, and a peer whose messages went over it has them go
// there again.
TEST_F(NetLinkRail0, ARailTheCorePutsBackIsTakenAgain) {
    const efa_peer_t *self = self_.self();
    NetLink::Peer *q =
        link_->add_peer(1, self->addr[0], efa_core_rail_ctx(core_, 0, 0), 1,
                        self->addr[static_cast<size_t>(nctx_)], efa_core_rail_ctx(core_, 1, 0));
    ASSERT_NE(q, nullptr);
    // (one process behind both: each link peer takes the core's word
    // from a word of its own, as each has a core peer of its own)
    uint32_t q_back = 0;
    for (NetLink::Peer *p : {peer_, q}) {
        p->rails_down = &self->rails_down;
    }
    peer_->rails_back = &self_.self()->rails_back;
    q->rails_back = &q_back;
    ASSERT_EQ(q->rail, 1);
    efa::rail_lost(core_, self->addr[0], 1, "the process itself", "the test");
    ASSERT_TRUE(__atomic_load_n(&self->rails_down, __ATOMIC_RELAXED) & 2u);
    link_->leave_rails_out();
    EXPECT_EQ(q->rail, 0) << "the peer stayed on the rail the core took out";
    EXPECT_EQ(q->live, 1u);
    EXPECT_EQ(peer_->live, 1u);
    // What put_back does once the peer answered over the rail.
    __atomic_and_fetch(&self_.self()->rails_down, ~2u, __ATOMIC_RELAXED);
    link_->leave_rails_out();
    EXPECT_EQ(q->live, 1u) << "taken again with no word from the core that it put it back";
    __atomic_or_fetch(&self_.self()->rails_back, 2u, __ATOMIC_RELAXED);
    q_back = 2u;
    link_->leave_rails_out();
    EXPECT_EQ(q->live, 3u) << "the rail put back was not taken again";
    EXPECT_EQ(peer_->live, 3u);
    EXPECT_EQ(q->rail, 1) << "the peer's messages did not go back to their own rail";
    EXPECT_EQ(peer_->rail, 0);
    EXPECT_EQ(link_->stats().taken_back, 2u);
    void *f = link_->reserve(q, kFrame);
    ASSERT_NE(f, nullptr);
    memset(f, 0x3c, kFrame);
    link_->commit(q, kFrame);
    for (int i = 0; i < 5000 && completed_ < 1; ++i) {
        pump();
    }
    EXPECT_EQ(completed_, 1);
    EXPECT_EQ(last_err_, 0);
    EXPECT_EQ(link_->stats().sent_back, 1u) << "the message did not go over the rail taken back";
    EXPECT_EQ(q_back, 0u) << "the link did not take the core's word";
    // Taken out again: left again (a flapping link fails over each time).
    __atomic_or_fetch(&self_.self()->rails_down, 2u, __ATOMIC_RELAXED);
    link_->leave_rails_out();
    EXPECT_EQ(q->rail, 0);
    EXPECT_EQ(q->live, 1u);
}

// The first rail taken out and put back: the peer's messages go there
// again, the first is the home again, and a lone message there keeps its
// buffer again (another rail could take it over).
TEST_F(NetLinkRail0, TheFirstRailPutBackIsTheHomeAgain) {
    peer_->rails_down = &self_.self()->rails_down;
    peer_->rails_back = &self_.self()->rails_back;
    ASSERT_TRUE(efa::rail0_lost(core_, self_.self()->addr[0], -FI_ETIMEDOUT, "the test"));
    link_->leave_rails_out();
    ASSERT_EQ(peer_->rail, 1);
    ASSERT_EQ(peer_->home, 1);
    __atomic_and_fetch(&self_.self()->rails_down, ~1u, __ATOMIC_RELAXED);
    __atomic_or_fetch(&self_.self()->rails_back, 1u, __ATOMIC_RELAXED);
    link_->leave_rails_out();
    EXPECT_EQ(peer_->live, 3u);
    EXPECT_EQ(peer_->rail, 0) << "the peer's messages did not go back to the first rail";
    EXPECT_EQ(peer_->home, 0);
    EXPECT_TRUE(peer_->keep_injected);
    send_small();
    EXPECT_EQ(peer_->kept_n, 1u) << "a lone message on the first rail did not keep its buffer";
    for (int i = 0; i < 5000 && 0 == link_->stats().injected; ++i) {
        pump();
    }
    EXPECT_EQ(link_->stats().injected, 1u);
    EXPECT_EQ(link_->stats().taken_back, 1u);
    EXPECT_EQ(link_->stats().sent_back, 1u) << "the inject over the first rail not counted";
}

// The first rail left by a post the core refused, and put back before
// the link's next sweep saw it out: taken again all the same (the core's
// word is the bit it sets in rails_back, not what a sweep happened to
// see).
TEST_F(NetLinkRail0, ARailLeftByARefusedPostIsTakenAgain) {
    peer_->rails_down = &self_.self()->rails_down;
    peer_->rails_back = &self_.self()->rails_back;
    ASSERT_TRUE(efa::rail0_lost(core_, self_.self()->addr[0], -FI_ETIMEDOUT, "the test"));
    send_small(); // refused on the first rail: the peer moves off it
    ASSERT_EQ(peer_->rail, 1);
    __atomic_and_fetch(&self_.self()->rails_down, ~1u, __ATOMIC_RELAXED);
    __atomic_or_fetch(&self_.self()->rails_back, 1u, __ATOMIC_RELAXED);
    link_->leave_rails_out();
    EXPECT_EQ(peer_->rail, 0) << "a rail left by a refused post stayed left once put back";
    EXPECT_EQ(peer_->live, 3u);
    EXPECT_TRUE(peer_->keep_injected);
}

} // namespace
