// The peer deadline's probe between two real processes on tcp;ofi_rxm,
// whose sends complete once a local socket takes them: only the peer's
// answer may keep a peer alive.  The peer is a forked child with a core of
// its own; the parent watches it (as btl_efa does for pml ob1) with a 2 s
// deadline.  A child that keeps calling progress answers every probe and
// is never declared lost; a stopped child (SIGSTOP: its sockets still take
// what is sent, as across a partition) answers nothing and must be.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_test_op.hpp"
#include "core_test_params.hpp"
#include "forked_core_peer.hpp"

namespace {

constexpr const char *kProvider = "tcp;ofi_rxm";

efa_core_params_t params(int peer_timeout) {
    efa_core_params_t p = core_test_params(kProvider);
    p.peer_timeout = peer_timeout;
    return p;
}

using Op = CoreTestOp;

// The parent's side: its core, the child in its table, and a message that
// reached the child (so that the connection stands before any probe).  The
// child (deadline off: it only answers) calls progress until killed.
class ProbedChild : public ::testing::Test {
  protected:
    void SetUp() override {
        auto child_fn = [](int to_parent, int from_parent) {
            forked_core_peer::child(params(0), to_parent, from_parent, [](efa_core_t *core) {
                for (;;) {
                    efa_core_progress(core);
                    usleep(200);
                }
            });
        };
        const char *why = nullptr;
        ASSERT_TRUE(forked_core_peer::start(params(2), child_fn, &child_, &core_, &peer_, &why))
            << why << " (" << kProvider << ")";
        if (!connect_first()) {
            return;
        }
        Op hello;
        ASSERT_EQ(efa_ctx_tsend(efa_core_ctx(core_, 0), buf_, sizeof(buf_), nullptr, peer_->addr[0],
                                1, 0, &hello.op),
                  0);
        core_test_wait(core_, hello, 10);
        ASSERT_TRUE(hello.done) << "the first message to the child never completed";
        ASSERT_EQ(hello.err, 0);
    }
    void TearDown() override { forked_core_peer::stop_all(child_, core_, peer_); }
    virtual bool connect_first() const { return true; }
    pid_t child_ = -1;
    efa_core_t *core_ = nullptr;
    efa_peer_t *peer_ = nullptr;
    char buf_[8] = {};
};

// The same child, never sent anything before it stops: tcp;ofi_rxm's
// connection to it never comes up, and every send to it is refused
// (-FI_EAGAIN) for as long as it stays stopped.
class UnconnectedChild : public ProbedChild {
  protected:
    bool connect_first() const override { return false; }
};

} // namespace

TEST_F(ProbedChild, AnAnsweringPeerIsNeverDeclaredLost) {
    Op watch;
    ASSERT_EQ(efa_core_peer_watch(core_, peer_, &watch.op), 0);
    core_test_wait(core_, watch, 6); // three deadlines: probed at least twice
    EXPECT_FALSE(watch.done) << "a peer that answers its probes was declared lost: "
                             << fi_strerror(-watch.err);
    efa_core_peer_unwatch(core_, &watch.op);
}

TEST_F(ProbedChild, AStoppedPeerWhoseSocketTakesTheProbeIsDeclaredLost) {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    Op watch;
    ASSERT_EQ(efa_core_peer_watch(core_, peer_, &watch.op), 0);
    const double took = core_test_wait(core_, watch, 10);
    ASSERT_TRUE(watch.done) << "a stopped peer was still alive after 10 s (its probes' sends "
                               "completed at the socket and counted as answers)";
    EXPECT_EQ(watch.err, -FI_ETIMEDOUT);
    EXPECT_GE(took, 1.5);
    EXPECT_LE(took, 5.0);
}

TEST_F(UnconnectedChild, APeerWhoseConnectionNeverComesUpIsDeclaredLost) {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    Op watch;
    ASSERT_EQ(efa_core_peer_watch(core_, peer_, &watch.op), 0);
    const double took = core_test_wait(core_, watch, 10);
    ASSERT_TRUE(watch.done) << "a stopped peer that no probe could be posted to was still alive "
                               "after 10 s";
    EXPECT_EQ(watch.err, -FI_ETIMEDOUT);
    EXPECT_LE(took, 6.0);
}
