// A lost peer's posts and the owners' buffers (core_deadline.cpp): once an
// owner hears that its operation failed, the provider must not get or
// touch its buffer any more (the MTL releases the registration, the
// application may free the memory).  Posts still waiting in a context's
// backlog (ctx_post.hpp) leave it, and are never posted; a receive the
// provider holds is cancelled, and its owner hears only when the provider
// hands it back, or after a further peer_timeout if it never does.
//
// The provider's answers are scripted where its timing cannot be forced
// (the post closures return what the test says, as in test_ctx_backlog.cpp,
// on a real context of a shm core with the deadline on); the last test
// takes shm's own cancel.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <deque>
#include <vector>

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "core.hpp"
#include "core_test_op.hpp"
#include "core_test_params.hpp"
#include "core_with_self.hpp"
#include "ctx_post.hpp"
#include "scripted_provider.hpp"

namespace {

// An operation that counts its completions.
struct CountedOp {
    efa_op_t op{};
    int completions = 0;
    int err = 1;
    size_t len = 0;
    bool orphaned = false; // the last completion said the provider still holds it
    CountedOp() {
        op.complete = [](efa_op_t *o, const efa_cqe_t *c) {
            auto *self = reinterpret_cast<CountedOp *>(o);
            ++self->completions;
            self->err = c->err;
            self->len = c->len;
            self->orphaned = c->orphaned;
        };
        op.rx_class = EFA_RX_USER;
    }
};

constexpr int kLost = -FI_EHOSTUNREACH;

class LostPeerPosts : public ::testing::Test {
  protected:
    void SetUp() override {
        efa_core_params_t p = core_test_params("shm");
        p.peer_timeout = 1; // the deadline on; a held receive gets 1 s more
        ASSERT_TRUE(core_.open(p));
        ctx_ = efa_core_ctx(core_.core(), 0);
        ASSERT_NE(ctx_, nullptr);
        peer_ = core_.self()->addr[0];
        inflight_ = ctx_->inflight.load();
    }
    // A tracked send or receive to the peer, as efa_ctx_tsend and efa_ctx_trecv post
    // them, through the scripted provider.
    int send(CountedOp &op, int id) {
        return efa::post::tracked_post(
            ctx_, peer_, &op.op, efa::post::kSend, FI_SEND | FI_TAGGED, [&](efa_op_t *pop) {
                return efa::post::submit(ctx_, ctx_->tx_backlog, "fi_tsend", pop,
                                         provider_.post(id));
            });
    }
    int recv(CountedOp &op, int id, bool lose_first = false) {
        return efa::post::tracked_post(ctx_, peer_, &op.op, efa::PeerDeadline::Kind::Recv,
                                       FI_RECV | FI_TAGGED, [&](efa_op_t *pop) {
                                           if (lose_first) {
                                               lose_peer();
                                           }
                                           return efa::post::submit_recv(ctx_, "fi_trecv", pop,
                                                                         provider_.post(id));
                                       });
    }
    void lose_peer() { efa_core_peer_lost(core_.core(), peer_, kLost, "the unit test lost it"); }
    void progress(int n = 4) {
        for (int i = 0; i < n; ++i) {
            efa_core_progress(core_.core());
        }
    }
    // The provider hands back a stand-in it held, as drain() does.
    void hand_back(efa_op_t *standin, int err, size_t len = 0) {
        efa::post::release_slot(ctx_, standin);
        efa::inflight_done(ctx_, standin);
        efa_cqe_t cqe{err, FI_RECV | FI_TAGGED, 0, 0, len, 0, FI_ADDR_NOTAVAIL, false, false};
        standin->complete(standin, &cqe);
    }

    CoreWithSelf core_;
    efa_ctx_t *ctx_ = nullptr;
    fi_addr_t peer_ = FI_ADDR_UNSPEC;
    int inflight_ = 0;
    ScriptedProvider provider_;
};

} // namespace

TEST_F(LostPeerPosts, ASendWaitingInTheBacklogIsNeverPostedOnceItsPeerIsLost) {
    provider_.answers = {-FI_EAGAIN};
    CountedOp op;
    ASSERT_EQ(send(op, 0), 0);
    ASSERT_EQ(ctx_->tx_backlog.size.load(), 1u);
    lose_peer();
    EXPECT_EQ(op.completions, 1);
    EXPECT_EQ(op.err, kLost);
    EXPECT_FALSE(op.orphaned) << "the provider never had it: its buffer is free";
    EXPECT_EQ(ctx_->tx_backlog.size.load(), 0u) << "the failed send still waits to be posted";
    progress();
    EXPECT_TRUE(provider_.accepted.empty())
        << "posted with its owner's buffer after the owner heard it failed";
    EXPECT_EQ(op.completions, 1);
    EXPECT_EQ(ctx_->inflight.load(), inflight_);
}

TEST_F(LostPeerPosts, AReceiveWaitingInTheBacklogIsNeverPostedOnceItsPeerIsLost) {
    provider_.answers = {-FI_EAGAIN};
    CountedOp op;
    ASSERT_EQ(recv(op, 0), 0);
    ASSERT_EQ(ctx_->rx_backlog.size.load(), 1u);
    lose_peer();
    EXPECT_EQ(op.completions, 1) << "the provider never had it: nothing to wait for";
    EXPECT_EQ(op.err, kLost);
    EXPECT_EQ(ctx_->rx_backlog.size.load(), 0u);
    progress();
    EXPECT_TRUE(provider_.accepted.empty())
        << "a buffer posted for the provider to write after its owner heard it failed";
    EXPECT_EQ(op.completions, 1);
    EXPECT_EQ(ctx_->inflight.load(), inflight_);
}

// Another thread declares the peer lost between the post's tracking and its
// joining the backlog: the flush finds it marked and drops it.
TEST_F(LostPeerPosts, ASendThatJoinsTheBacklogAsItsPeerIsLostIsDroppedByTheFlush) {
    provider_.answers = {-FI_EAGAIN};
    CountedOp op;
    const int rc = efa::post::tracked_post(
        ctx_, peer_, &op.op, efa::post::kSend, FI_SEND | FI_TAGGED, [&](efa_op_t *pop) {
            lose_peer();
            return efa::post::submit(ctx_, ctx_->tx_backlog, "fi_tsend", pop, provider_.post(0));
        });
    ASSERT_EQ(rc, 0);
    EXPECT_EQ(op.completions, 1);
    EXPECT_EQ(op.err, kLost);
    ASSERT_EQ(ctx_->tx_backlog.size.load(), 1u) << "(the scene: it joined after the loss)";
    progress();
    EXPECT_TRUE(provider_.accepted.empty()) << "a failed send was posted by the flush";
    EXPECT_EQ(ctx_->tx_backlog.size.load(), 0u);
    EXPECT_EQ(op.completions, 1);
    EXPECT_EQ(ctx_->inflight.load(), inflight_);
}

// The same with a receive: its owner hears when the flush drops it.
TEST_F(LostPeerPosts, AReceiveThatJoinsTheBacklogAsItsPeerIsLostIsDroppedByTheFlush) {
    provider_.answers = {-FI_EAGAIN};
    CountedOp op;
    ASSERT_EQ(recv(op, 0, true), 0);
    ASSERT_EQ(ctx_->rx_backlog.size.load(), 1u) << "(the scene: it joined after the loss)";
    progress();
    EXPECT_TRUE(provider_.accepted.empty()) << "a failed receive was posted by the flush";
    EXPECT_EQ(ctx_->rx_backlog.size.load(), 0u);
    EXPECT_EQ(op.completions, 1) << "the dropped receive's owner was never told";
    EXPECT_EQ(op.err, kLost);
    EXPECT_EQ(ctx_->inflight.load(), inflight_);
}

// A send the provider holds (not handed back yet): its owner is told at
// once, and told that the provider may still read its buffer, so that the
// buffer is not given to another message; the provider's late hand-back
// tells nobody.
TEST_F(LostPeerPosts, ASendTheProviderHoldsFailsAtOnceAsOrphaned) {
    CountedOp op;
    ASSERT_EQ(send(op, 0), 0);
    ASSERT_EQ(provider_.accepted.size(), 1u);
    efa_op_t *standin = op.op.tracker;
    ASSERT_NE(standin, nullptr);
    lose_peer();
    EXPECT_EQ(op.completions, 1);
    EXPECT_EQ(op.err, kLost);
    EXPECT_TRUE(op.orphaned) << "its owner would reuse a buffer the provider may still read";
    EXPECT_EQ(core_.core()->orphans.size(), 1u);
    efa::post::release_slot(ctx_, standin);
    efa::inflight_done(ctx_, standin);
    efa_cqe_t cqe{0, FI_SEND | FI_TAGGED, 0, 0, 0, 0, FI_ADDR_NOTAVAIL, false, false};
    standin->complete(standin, &cqe);
    EXPECT_EQ(op.completions, 1) << "the late hand-back reached the owner";
    EXPECT_TRUE(core_.core()->orphans.empty());
}

// A receive the provider holds (matched to a message that is still
// arriving, say): cancelled, but its owner hears only when the provider
// gives the buffer back.
TEST_F(LostPeerPosts, AReceiveTheProviderHoldsFailsOnlyWhenTheProviderHandsItBack) {
    CountedOp op;
    ASSERT_EQ(recv(op, 0), 0);
    ASSERT_EQ(provider_.accepted.size(), 1u);
    efa_op_t *standin = op.op.tracker;
    ASSERT_NE(standin, nullptr);
    lose_peer();
    progress();
    EXPECT_EQ(op.completions, 0) << "told while the provider may still write into its buffer";
    hand_back(standin, -FI_ECANCELED);
    EXPECT_EQ(op.completions, 1);
    EXPECT_EQ(op.err, kLost) << "a cancel the owner never asked for reads as the peer's loss";
    EXPECT_FALSE(op.orphaned) << "handed back: the provider is done with the buffer";
    EXPECT_EQ(op.op.tracker, nullptr);
    progress();
    EXPECT_EQ(op.completions, 1);
}

TEST_F(LostPeerPosts, AHeldReceiveThatCompletedWholeIsDeliveredAsItIs) {
    CountedOp op;
    ASSERT_EQ(recv(op, 0), 0);
    efa_op_t *standin = op.op.tracker;
    ASSERT_NE(standin, nullptr);
    lose_peer();
    EXPECT_EQ(op.completions, 0);
    hand_back(standin, 0, 48); // the message had matched and arrived
    EXPECT_EQ(op.completions, 1);
    EXPECT_EQ(op.err, 0);
    EXPECT_EQ(op.len, 48u);
}

// A provider that never gives a held receive back must not hold the job
// for ever: after a further peer_timeout the owner is told anyway, once.
TEST_F(LostPeerPosts, AReceiveTheProviderKeepsFailsAfterAFurtherTimeout) {
    CountedOp op;
    ASSERT_EQ(recv(op, 0), 0);
    efa_op_t *standin = op.op.tracker;
    ASSERT_NE(standin, nullptr);
    lose_peer();
    const auto t0 = std::chrono::steady_clock::now();
    double took = 0;
    while (0 == op.completions && took < 5) {
        efa_core_progress(core_.core());
        usleep(1000);
        took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    ASSERT_EQ(op.completions, 1) << "the owner of a receive the provider kept was never told";
    EXPECT_EQ(op.err, kLost);
    EXPECT_TRUE(op.orphaned) << "the provider may still write the buffer: its owner must know";
    EXPECT_GE(took, 0.9) << "told before the provider had its grace";
    EXPECT_LE(took, 3.0);
    hand_back(standin, -FI_ECANCELED); // late: frees the stand-in, tells nobody
    EXPECT_EQ(op.completions, 1);
}

// On a real provider (shm): a receive posted for the lost peer is
// cancelled, and its owner hears through the cancel's completion.
TEST_F(LostPeerPosts, AReceiveAtTheProviderFailsThroughItsCancelsCompletion) {
    CoreTestOp op;
    char buf[64];
    ASSERT_EQ(efa_ctx_trecv(ctx_, buf, sizeof(buf), nullptr, peer_, 77, 0, &op.op), 0);
    lose_peer();
    EXPECT_FALSE(op.done) << "told before the provider let go of the buffer";
    const double took = core_test_wait(core_.core(), op, 5);
    ASSERT_TRUE(op.done);
    EXPECT_EQ(op.err, kLost);
    EXPECT_LT(took, 0.9) << "shm's cancel did not come back: the grace ended it";
    EXPECT_EQ(ctx_->inflight.load(), inflight_);
}

// Another thread declares the peer lost between the post's tracking and a
// post the provider refuses outright: the owner was told of the loss, so
// the post is taken as made (told once, not also by the post's error), and
// the stand-in, which the provider never got, is no orphan.
TEST_F(LostPeerPosts, ASendRefusedAsItsPeerIsLostIsToldOnce) {
    provider_.answers = {-FI_EINVAL};
    CountedOp op;
    const int rc = efa::post::tracked_post(
        ctx_, peer_, &op.op, efa::post::kSend, FI_SEND | FI_TAGGED, [&](efa_op_t *pop) {
            lose_peer();
            return efa::post::submit(ctx_, ctx_->tx_backlog, "fi_tsend", pop, provider_.post(0));
        });
    EXPECT_EQ(rc, 0) << "the post's error besides the loss: its owner would hear twice";
    EXPECT_EQ(op.completions, 1);
    EXPECT_EQ(op.err, kLost);
    EXPECT_EQ(op.op.tracker, nullptr);
    EXPECT_TRUE(core_.core()->orphans.empty()) << "a stand-in the provider never got kept";
    progress();
    EXPECT_EQ(op.completions, 1);
    EXPECT_EQ(ctx_->inflight.load(), inflight_);
}

// The same with a receive, whose owner waits for the provider to hand it
// back: the provider never got it, so its owner hears of the post's error
// (once), and nothing later (no release after the further timeout).
TEST_F(LostPeerPosts, AReceiveRefusedAsItsPeerIsLostFailsItsPostOnly) {
    provider_.answers = {-FI_EINVAL};
    CountedOp op;
    EXPECT_NE(recv(op, 0, true), 0);
    EXPECT_EQ(op.completions, 0);
    EXPECT_EQ(op.op.tracker, nullptr);
    EXPECT_TRUE(core_.core()->orphans.empty());
    EXPECT_TRUE(core_.core()->held_recvs.empty()) << "a receive the provider never got held";
    usleep(1200 * 1000); // beyond the held receives' further peer_timeout
    progress();
    EXPECT_EQ(op.completions, 0) << "told again after its post failed";
    EXPECT_EQ(ctx_->inflight.load(), inflight_);
}
