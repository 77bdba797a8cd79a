// A context's backlog (ctx_post.hpp, flushed by ctx_progress.cpp): a post
// that finds the provider's queue full is kept and posted later from
// progress, in order, and the caller sees success.  The provider's answers
// are scripted here (the post closures return what the test says), on a
// real context of a shm core, so the backlog's own logic is what is tested.
#include <gtest/gtest.h>

#include <deque>
#include <thread>
#include <vector>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_test_params.hpp"
#include "core_with_self.hpp"
#include "ctx_post.hpp"
#include "scripted_provider.hpp"

namespace {

struct TestOp {
    efa_op_t op{};
    int completions = 0;
    int last_err = 0;
};

void record_completion(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *t = reinterpret_cast<TestOp *>(op);
    ++t->completions;
    t->last_err = cqe->err;
}

class CtxBacklog : public ::testing::Test {
  public:
    int submit(int id) {
        return efa::post::submit(ctx_, ctx_->tx_backlog, "fi_send", &ops_[id].op,
                                 provider_.post(id));
    }
    int submit_rx(int id) { // (the receive backlog, without a queue slot's count)
        return efa::post::submit(ctx_, ctx_->rx_backlog, "fi_recv", &ops_[id].op,
                                 provider_.post(id));
    }

  protected:
    void SetUp() override {
        ASSERT_TRUE(core_.open(core_test_params("shm")));
        ctx_ = efa_core_ctx(core_.core(), 0);
        ASSERT_NE(ctx_, nullptr);
        for (auto &t : ops_) {
            t.op.complete = record_completion;
        }
    }
    // Posts that were accepted hold their operations in flight until a
    // completion the scripted provider never gives: the test ends them.
    void TearDown() override {
        for (auto &t : ops_) {
            if (t.op.net_counted) {
                efa::inflight_done(ctx_, &t.op);
            }
        }
    }
    CoreWithSelf core_;
    efa_ctx_t *ctx_ = nullptr;
    ScriptedProvider provider_;
    TestOp ops_[6];
};

TEST_F(CtxBacklog, AFullQueueDefersThePostAndTheCallerSeesSuccess) {
    provider_.answers = {-FI_EAGAIN};
    EXPECT_EQ(submit(0), 0);
    EXPECT_EQ(ctx_->tx_backlog.size.load(), 1u);
    EXPECT_EQ(ctx_->tx_backlog.deferred.load(), 1u);
    EXPECT_TRUE(provider_.accepted.empty());
    EXPECT_EQ(ops_[0].completions, 0) << "a deferred post is not an error";
}

TEST_F(CtxBacklog, LaterPostsQueueBehindAndProgressPostsThemInOrder) {
    provider_.answers = {-FI_EAGAIN};
    for (int id = 0; id < 4; ++id) {
        EXPECT_EQ(submit(id), 0);
    }
    // Only the first reached the provider: the rest would have overtaken it.
    EXPECT_TRUE(provider_.accepted.empty());
    EXPECT_EQ(ctx_->tx_backlog.size.load(), 4u);
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(ctx_->tx_backlog.size.load(), 0u);
    // The backlog is empty again: the next post goes straight through.
    EXPECT_EQ(submit(4), 0);
    EXPECT_EQ(provider_.accepted.back(), 4);
}

TEST_F(CtxBacklog, AFlushStopsWhereTheQueueIsFullAgain) {
    provider_.answers = {-FI_EAGAIN};
    for (int id = 0; id < 3; ++id) {
        submit(id);
    }
    provider_.answers = {0, -FI_EAGAIN}; // room for one, then full
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0}));
    EXPECT_EQ(ctx_->tx_backlog.size.load(), 2u);
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0, 1, 2}));
}

TEST_F(CtxBacklog, ShmsENOMEMCountsAsAFullQueue) {
    provider_.answers = {-FI_ENOMEM};
    EXPECT_EQ(submit(0), 0);
    EXPECT_EQ(ctx_->tx_backlog.size.load(), 1u);
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0}));
}

TEST_F(CtxBacklog, ARefusalOnTheFirstPostGoesToTheCaller) {
    const int before = ctx_->inflight.load();
    provider_.answers = {-FI_EINVAL};
    EXPECT_EQ(submit(0), -FI_EINVAL);
    EXPECT_EQ(ctx_->tx_backlog.size.load(), 0u);
    EXPECT_EQ(ops_[0].completions, 0) << "the caller has the error: no completion as well";
    EXPECT_EQ(ctx_->inflight.load(), before) << "a refused post is not in flight";
}

TEST_F(CtxBacklog, ALateRefusalCompletesItsOperationWithTheErrorAndTheRestGoOn) {
    provider_.answers = {-FI_EAGAIN};
    for (int id = 0; id < 3; ++id) {
        submit(id);
    }
    const int before = ctx_->inflight.load();
    provider_.answers = {0, -FI_EINVAL, 0};
    efa_core_progress(core_.core());
    // (the flush stops at the refusal: its owner's other way goes first)
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0}));
    EXPECT_EQ(ops_[1].completions, 1);
    EXPECT_EQ(ops_[1].last_err, -FI_EINVAL);
    EXPECT_EQ(ctx_->inflight.load(), before - 1) << "the failed one is no longer in flight";
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0, 2}));
    EXPECT_EQ(ops_[0].completions + ops_[2].completions, 0);
    EXPECT_EQ(ctx_->tx_backlog.size.load(), 0u);
}

// An owner told from the backlog that its post was refused (a device
// buffer the provider will not take) posts it again another way (through
// the host): that post takes the refused one's place, ahead of the posts
// queued after it (the same peer's next message, a later receive), and
// two such posts keep their order.
CtxBacklog *g_backlog_test = nullptr;
void repost_twice(efa_op_t *op, const efa_cqe_t *cqe) {
    record_completion(op, cqe);
    EXPECT_EQ(g_backlog_test->submit(4), 0);
    EXPECT_EQ(g_backlog_test->submit(5), 0);
}

TEST_F(CtxBacklog, APostMadeForARefusedOneTakesItsPlace) {
    provider_.answers = {-FI_EAGAIN};
    for (int id = 0; id < 3; ++id) {
        submit(id);
    }
    g_backlog_test = this;
    ops_[1].op.complete = repost_twice;
    provider_.answers = {0, -FI_EINVAL};
    efa_core_progress(core_.core());
    EXPECT_EQ(ops_[1].completions, 1);
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0, 4, 5, 2}))
        << "a post queued after the refused one overtook it";
    // Once told, posts go to the tail again.
    provider_.answers = {-FI_EAGAIN};
    submit(3);
    EXPECT_EQ(ctx_->tx_backlog.size.load(), 1u);
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted.back(), 3);
    g_backlog_test = nullptr;
}

// Another thread's post while the owner is told of a refusal that emptied
// the backlog: it must not go straight to the provider (the backlog looks
// empty), ahead of the refused post's replacement.
void another_thread_posts_then_owner_reposts(efa_op_t *op, const efa_cqe_t *cqe) {
    record_completion(op, cqe);
    std::thread other([] { EXPECT_EQ(g_backlog_test->submit(2), 0); });
    other.join();
    EXPECT_EQ(g_backlog_test->submit(4), 0);
}

TEST_F(CtxBacklog, AnotherThreadsPostWaitsBehindTheRefusedPostsReplacement) {
    provider_.answers = {-FI_EAGAIN};
    for (int id = 0; id < 2; ++id) {
        submit(id);
    }
    g_backlog_test = this;
    ops_[1].op.complete = another_thread_posts_then_owner_reposts;
    provider_.answers = {0, -FI_EINVAL};
    efa_core_progress(core_.core());
    ASSERT_EQ(ops_[1].completions, 1);
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0, 4, 2}))
        << "another thread's post overtook the refused one's replacement";
    EXPECT_EQ(ctx_->tx_backlog.size.load(), 0u) << "the backlog's count is off";
    g_backlog_test = nullptr;
}

// What the owner posts into another backlog meanwhile keeps its place
// there (behind what waits), and the refused post's replacement still
// takes the first place in its own.
void repost_here_and_there(efa_op_t *op, const efa_cqe_t *cqe) {
    record_completion(op, cqe);
    EXPECT_EQ(g_backlog_test->submit_rx(5), 0);
    EXPECT_EQ(g_backlog_test->submit(4), 0);
}

TEST_F(CtxBacklog, APostIntoAnotherBacklogMeanwhileKeepsItsPlaceThere) {
    provider_.answers = {-FI_EAGAIN};
    for (int id = 0; id < 3; ++id) {
        submit(id);
    }
    provider_.answers = {-FI_EAGAIN};
    submit_rx(3);
    ASSERT_EQ(ctx_->rx_backlog.size.load(), 1u);
    g_backlog_test = this;
    ops_[1].op.complete = repost_here_and_there;
    provider_.answers = {0, -FI_EINVAL, -FI_EAGAIN, -FI_EAGAIN};
    efa_core_progress(core_.core());
    ASSERT_EQ(ops_[1].completions, 1);
    ASSERT_EQ(ctx_->rx_backlog.ops.size(), 2u);
    EXPECT_EQ(ctx_->rx_backlog.ops[0].op, &ops_[3].op) << "a post into another backlog went first";
    EXPECT_EQ(ctx_->rx_backlog.ops[1].op, &ops_[5].op);
    ASSERT_FALSE(ctx_->tx_backlog.ops.empty());
    EXPECT_EQ(ctx_->tx_backlog.ops[0].op, &ops_[4].op);
    EXPECT_FALSE(ctx_->tx_backlog.reposting.load()) << "the flush left its backlog held";
    provider_.answers = {};
    efa_core_progress(core_.core());
    g_backlog_test = nullptr;
}

TEST_F(CtxBacklog, ReceivesWithoutAQueueSlotWaitAndInternalOnesDoNotWaitBehindThem) {
    // One slot for user receives, two in all.
    ASSERT_EQ(ctx_->rx_posted.load(), 0) << "nothing of the core's own is posted here";
    const int capacity = ctx_->rx_capacity, user_capacity = ctx_->rx_user_capacity;
    ctx_->rx_capacity = 2;
    ctx_->rx_user_capacity = 1;
    auto recv = [&](int id, uint8_t cls) {
        ops_[id].op.rx_class = cls;
        return efa::post::submit_recv(ctx_, "fi_trecv", &ops_[id].op, provider_.post(id));
    };
    EXPECT_EQ(recv(0, EFA_RX_USER), 0);
    EXPECT_EQ(recv(1, EFA_RX_USER), 0); // no user slot left: waits
    EXPECT_EQ(recv(2, EFA_RX_INTERNAL), 0);
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0, 2}));
    EXPECT_EQ(ctx_->rx_backlog.size.load(), 1u);
    EXPECT_EQ(ctx_->rx_internal_backlog.size.load(), 0u);
    // Still no slot: progress leaves it waiting without asking the provider.
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted.size(), 2u);
    // The first receive completes (its slot comes back): the second goes.
    efa::post::release_slot(ctx_, &ops_[0].op);
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0, 2, 1}));
    EXPECT_EQ(ctx_->rx_backlog.size.load(), 0u);
    efa::post::release_slot(ctx_, &ops_[1].op);
    efa::post::release_slot(ctx_, &ops_[2].op);
    ctx_->rx_capacity = capacity;
    ctx_->rx_user_capacity = user_capacity;
}

// An internal receive waiting for a slot (a synchronous send's
// acknowledgement) holds back no peek behind it: a probe that spins for its
// answer would wait on the slot, which the peer it probes may hold.
TEST_F(CtxBacklog, APeekGoesPastAnInternalReceiveWaitingForASlot) {
    const int capacity = ctx_->rx_capacity, user_capacity = ctx_->rx_user_capacity;
    ctx_->rx_capacity = 1;
    ctx_->rx_user_capacity = 0;
    ops_[0].op.rx_class = EFA_RX_INTERNAL;
    ops_[1].op.rx_class = EFA_RX_INTERNAL;
    EXPECT_EQ(efa::post::submit_recv(ctx_, "fi_trecv", &ops_[0].op, provider_.post(0)), 0);
    EXPECT_EQ(efa::post::submit_recv(ctx_, "fi_trecv", &ops_[1].op, provider_.post(1)), 0);
    ASSERT_EQ(ctx_->rx_internal_backlog.size.load(), 1u) << "the second waits for a slot";
    // A peek behind it (no slot): queued, then posted by progress.
    EXPECT_EQ(efa::post::submit(ctx_, ctx_->rx_internal_backlog, "fi_trecvmsg(FI_PEEK)",
                                &ops_[2].op, provider_.post(2), true),
              0);
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0, 2}));
    EXPECT_EQ(ctx_->rx_internal_backlog.size.load(), 1u) << "the receive still waits";
    efa::post::release_slot(ctx_, &ops_[0].op);
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0, 2, 1}));
    efa::post::release_slot(ctx_, &ops_[1].op);
    ctx_->rx_capacity = capacity;
    ctx_->rx_user_capacity = user_capacity;
}

// A claiming peek does not overtake a user receive that waits for the
// provider: the receive, posted first, matches first.
TEST_F(CtxBacklog, AClaimWaitsBehindUserReceivesWaitingForTheProvider) {
    ops_[0].op.rx_class = EFA_RX_USER;
    provider_.answers = {-FI_EAGAIN};
    EXPECT_EQ(efa::post::submit_recv(ctx_, "fi_trecv", &ops_[0].op, provider_.post(0)), 0);
    ASSERT_EQ(ctx_->rx_backlog.size.load(), 1u);
    // (efa_ctx_tpeek's choice of backlog, with the scripted post)
    ASSERT_EQ(efa_ctx_tpeek(ctx_, FI_ADDR_UNSPEC, 0, 0, true, &ops_[1].op), 0);
    EXPECT_EQ(ctx_->rx_backlog.size.load(), 2u) << "the claim went past the waiting receive";
    EXPECT_EQ(ctx_->rx_internal_backlog.size.load(), 0u);
    {
        std::lock_guard<std::mutex> guard(ctx_->rx_backlog.lock);
        ctx_->rx_backlog.ops.clear(); // (the real peek is not for this test's provider)
        ctx_->rx_backlog.size.store(0);
    }
    efa::inflight_done(ctx_, &ops_[1].op);
}

// A standing receive the provider finds no room for is parked and posted
// by progress, not lost.
TEST_F(CtxBacklog, AStandingReceiveWithoutRoomIsPostedLater) {
    provider_.answers = {-FI_EAGAIN};
    EXPECT_EQ(efa::repost_standing(ctx_, &ops_[0].op, "fi_trecv (test)", provider_.post(0)), 0);
    EXPECT_TRUE(provider_.accepted.empty());
    EXPECT_EQ(ctx_->rx_internal_backlog.size.load(), 1u);
    efa_core_progress(core_.core());
    EXPECT_EQ(provider_.accepted, (std::vector<int>{0}));
    EXPECT_EQ(ctx_->rx_internal_backlog.size.load(), 0u);
    provider_.answers = {-FI_EINVAL};
    EXPECT_EQ(efa::repost_standing(ctx_, &ops_[1].op, "fi_trecv (test)", provider_.post(1)),
              -FI_EINVAL)
        << "another refusal is the caller's";
}

} // namespace
