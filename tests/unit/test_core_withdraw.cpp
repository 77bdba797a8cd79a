// Withdrawing a message the receiver has not matched
// (common/core/core_withdraw.cpp), between two real processes on
// tcp;ofi_rxm, whose rendezvous sends stay incomplete until the receiver
// matches them.  The peer is a forked child with a core of its own; what it
// posts decides the answer:
//  - nothing matching: the parent's large send is held; the withdrawal
//    takes it (answer 1) and the send then completes; one that names
//    another seq or another length takes nothing (answer 0);
//  - a receive that matched: the withdrawal finds nothing (answer 0).
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_test_op.hpp"
#include "core_test_params.hpp"
#include "efa_tag.h"
#include "forked_core_peer.hpp"

namespace {

constexpr const char *kProvider = "tcp;ofi_rxm";
constexpr size_t kLarge = 1 << 20; // rxm's rendezvous: held until matched
constexpr uint64_t kTag = 0x2a;    // the envelope (communicator 0, tag 42)
constexpr uint64_t kHello = 0x1;   // the first message, which sets up the connection

// The tag of the large message: the envelope with a seq, as mtl_efa sends
// it (efa_tag.h, the layout with CQ data).
uint64_t with_seq(uint32_t seq) {
    const efa_tag_layout_t l = EFA_TAG_LAYOUT_WITH_CQ_DATA;
    const efa_tag_codec_t c = efa_tag_codec_make(&l);
    return efa_tag_codec_with_seq(&c, kTag, seq);
}

struct Withdrawal {
    efa_withdraw_t w{};
    bool done = false;
    int result = -1000;
    Withdrawal() {
        w.done = [](efa_withdraw_t *wd, int result) {
            auto *self = reinterpret_cast<Withdrawal *>(wd);
            self->done = true;
            self->result = result;
        };
    }
};

void wait_withdrawal(efa_core_t *core, const Withdrawal &w, double limit) {
    for (int i = 0; i < static_cast<int>(limit * 1000) && !w.done; ++i) {
        efa_core_progress(core);
        usleep(1000);
    }
}

// The child: takes the hello, then (if kMatch) posts a receive for the
// envelope whatever its seq, and then only progresses (the parent checks
// what its own side sees).
template <bool kMatch> void child_body(efa_core_t *core) {
    efa_ctx_t *ctx = efa_core_ctx(core, 0);
    static char hello[8];
    static std::vector<char> big(kLarge);
    CoreTestOp h, r;
    efa_ctx_trecv(ctx, hello, sizeof(hello), nullptr, FI_ADDR_UNSPEC, kHello, 0, &h.op);
    if (kMatch) {
        const efa_tag_layout_t l = EFA_TAG_LAYOUT_WITH_CQ_DATA;
        efa_ctx_trecv(ctx, big.data(), big.size(), nullptr, FI_ADDR_UNSPEC, kTag,
                      efa_tag_recv_ignore(&l, false, false), &r.op);
    }
    for (;;) {
        efa_core_progress(core);
        usleep(200);
    }
}

template <bool kMatch> class WithdrawFrom : public ::testing::Test {
  protected:
    void SetUp() override {
        auto child_fn = [](int to_parent, int from_parent) {
            forked_core_peer::child(core_test_params(kProvider), to_parent, from_parent,
                                    child_body<kMatch>);
        };
        const char *why = nullptr;
        efa_core_params_t params = core_test_params(kProvider);
        params.peer_timeout = peer_timeout();
        ASSERT_TRUE(forked_core_peer::start(params, child_fn, &child_, &core_, &peer_, &why))
            << why << " (" << kProvider << ")";
        ctx_ = efa_core_ctx(core_, 0);
        CoreTestOp hello;
        ASSERT_EQ(
            efa_ctx_tsend(ctx_, buf_.data(), 8, nullptr, peer_->addr[0], kHello, 0, &hello.op), 0);
        core_test_wait(core_, hello, 10);
        ASSERT_TRUE(hello.done) << "the first message to the child never completed";
        if (!efa_core_can_withdraw(core_)) {
            GTEST_FAIL() << "the core says it cannot withdraw on " << kProvider;
        }
    }
    void TearDown() override { forked_core_peer::stop_all(child_, core_, peer_); }
    virtual int peer_timeout() const { return 0; }
    // The large message to the child, progressed for 'secs'.
    void send_large(uint64_t tag, CoreTestOp *send, double secs) {
        ASSERT_EQ(
            efa_ctx_tsend(ctx_, buf_.data(), kLarge, nullptr, peer_->addr[0], tag, 0, &send->op),
            0);
        core_test_wait(core_, *send, secs);
    }
    // Asks the child to withdraw 'tag' of 'len' bytes; the answer
    // (asserted to come).
    int withdraw(uint64_t tag, double limit, size_t len = kLarge) {
        Withdrawal w;
        EXPECT_EQ(efa_ctx_withdraw(ctx_, peer_->addr[0], tag, len, &w.w), 0);
        wait_withdrawal(core_, w, limit);
        EXPECT_TRUE(w.done) << "no answer in " << limit << " s";
        return w.done ? w.result : -1000;
    }
    pid_t child_ = -1;
    efa_core_t *core_ = nullptr;
    efa_ctx_t *ctx_ = nullptr;
    efa_peer_t *peer_ = nullptr;
    std::vector<char> buf_ = std::vector<char>(kLarge, 7);
};

using WithdrawFromIdleChild = WithdrawFrom<false>;
using WithdrawFromReceivingChild = WithdrawFrom<true>;

// The parent's peer deadline at 2 s, for a child that stops answering.
class WithdrawFromStoppedChild : public WithdrawFrom<false> {
  protected:
    int peer_timeout() const override { return 2; }
};

TEST_F(WithdrawFromIdleChild, AHeldMessageIsTakenAndItsSendCompletes) {
    CoreTestOp send;
    send_large(with_seq(5), &send, 1.0);
    ASSERT_FALSE(send.done) << "rxm completed a rendezvous send nobody matched: nothing to test";
    EXPECT_EQ(withdraw(with_seq(5), 10), 1) << "the child did not take the message";
    core_test_wait(core_, send, 5);
    EXPECT_TRUE(send.done) << "the withdrawn message's send never completed";
}

TEST_F(WithdrawFromIdleChild, AnotherSeqIsNotTaken) {
    CoreTestOp send;
    send_large(with_seq(5), &send, 0);
    EXPECT_EQ(withdraw(with_seq(6), 10), 0) << "a message with another seq was taken";
    core_test_wait(core_, send, 1.0);
    EXPECT_FALSE(send.done) << "the message that was not named left the receiver's queue";
}

// The seq wraps: a waiting message with the same tag but another length
// is an older one, not the one asked for, and stays.
TEST_F(WithdrawFromIdleChild, AnotherLengthIsNotTaken) {
    CoreTestOp send;
    send_large(with_seq(5), &send, 0);
    EXPECT_EQ(withdraw(with_seq(5), 10, kLarge / 2), 0) << "a message of another length was taken";
    core_test_wait(core_, send, 1.0);
    EXPECT_FALSE(send.done) << "the message that was not named left the receiver's queue";
}

TEST_F(WithdrawFromReceivingChild, AMatchedMessageIsNotTaken) {
    CoreTestOp send;
    send_large(with_seq(9), &send, 10);
    ASSERT_TRUE(send.done) << "the child's receive never matched";
    EXPECT_EQ(withdraw(with_seq(9), 10), 0) << "a matched message was reported withdrawn";
}

// A receiver lost before it answers (stopped, as across a partition): the
// peer deadline's watch ends the wait with an error, never a hang.
TEST_F(WithdrawFromStoppedChild, ALostReceiverEndsTheWaitWithAnError) {
    CoreTestOp send;
    send_large(with_seq(3), &send, 0.5);
    ASSERT_FALSE(send.done);
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    const int result = withdraw(with_seq(3), 15); // a 2 s deadline
    kill(child_, SIGCONT);
    EXPECT_LT(result, 0) << "a stopped receiver answered";
    EXPECT_NE(result, -1000) << "no answer 15 s after the receiver stopped";
}

// The receiver declared lost at once, while the request's send and the
// watch are both the core's: done is the last thing the withdrawal calls
// (its memory is the caller's to free from there), with an error.
TEST_F(WithdrawFromStoppedChild, ALostReceiverCallsNothingAfterDone) {
    CoreTestOp send;
    send_large(with_seq(4), &send, 0.5);
    ASSERT_FALSE(send.done);
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    static int calls_after_done;
    calls_after_done = 0;
    Withdrawal w;
    w.w.done = [](efa_withdraw_t *wd, int result) {
        auto *self = reinterpret_cast<Withdrawal *>(wd);
        self->done = true;
        self->result = result;
        // As if freed and reused: any later call of the watch is counted.
        wd->watch.complete = [](efa_op_t *, const efa_cqe_t *) { ++calls_after_done; };
        wd->send.complete = wd->watch.complete;
    };
    ASSERT_EQ(efa_ctx_withdraw(ctx_, peer_->addr[0], with_seq(4), kLarge, &w.w), 0);
    efa_core_peer_lost(core_, peer_->addr[0], -FI_EHOSTUNREACH, "the unit test lost it");
    wait_withdrawal(core_, w, 5);
    for (int i = 0; i < 50; ++i) {
        efa_core_progress(core_);
        usleep(1000);
    }
    kill(child_, SIGCONT);
    EXPECT_TRUE(w.done) << "the lost receiver's withdrawal never ended";
    EXPECT_LT(w.result, 0);
    EXPECT_EQ(calls_after_done, 0) << "the withdrawal's memory was used after done";
}

} // namespace
