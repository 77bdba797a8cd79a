// The peer deadline's probe between two real processes on tcp;ofi_rxm,
// whose sends complete once a local socket takes them: only the peer's
// answer may keep a peer alive.  The peer is a forked child with a core of
// its own; the parent watches it (as btl_efa does for pml ob1) with a 2 s
// deadline.  A child that keeps calling progress answers every probe and
// is never declared lost; a stopped child (SIGSTOP: its sockets still take
// what is sent, as across a partition) answers nothing and must be.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_test_op.hpp"
#include "core_test_params.hpp"

namespace {

constexpr const char *kProvider = "tcp;ofi_rxm";

efa_core_params_t params(int peer_timeout) {
    efa_core_params_t p = core_test_params(kProvider);
    p.peer_timeout = peer_timeout;
    return p;
}

bool write_blob(int fd, const std::vector<uint8_t> &blob) {
    const uint32_t n = static_cast<uint32_t>(blob.size());
    return write(fd, &n, sizeof(n)) == sizeof(n) &&
           write(fd, blob.data(), n) == static_cast<ssize_t>(n);
}

bool read_all(int fd, void *buf, size_t len) {
    auto *p = static_cast<char *>(buf);
    while (len > 0) {
        ssize_t r = read(fd, p, len);
        if (r <= 0) {
            return false;
        }
        p += r;
        len -= static_cast<size_t>(r);
    }
    return true;
}

bool read_blob(int fd, std::vector<uint8_t> *blob) {
    uint32_t n = 0;
    if (!read_all(fd, &n, sizeof(n)) || n > 65536) {
        return false;
    }
    blob->resize(n);
    return read_all(fd, blob->data(), n);
}

// The child: a core of its own (deadline off: it only answers), the
// parent in its table, then progress until killed.
[[noreturn]] void child_main(int to_parent, int from_parent) {
    efa_core_params_t p = params(0);
    int err = 0;
    efa_core_t *core = efa_core_acquire(&p, &err);
    if (!core || !write_blob(to_parent, core->blob)) {
        _exit(2);
    }
    std::vector<uint8_t> parent;
    if (!read_blob(from_parent, &parent) ||
        !efa_core_peer_get(core, parent.data(), parent.size(), &err)) {
        _exit(3);
    }
    for (;;) {
        efa_core_progress(core);
        usleep(200);
    }
}

using Op = CoreTestOp;

// The parent's side: its core, the child in its table, and a message that
// reached the child (so that the connection stands before any probe).
class ProbedChild : public ::testing::Test {
  protected:
    void SetUp() override {
        int up[2], down[2];
        ASSERT_EQ(pipe(up), 0);
        ASSERT_EQ(pipe(down), 0);
        child_ = fork();
        ASSERT_GE(child_, 0);
        if (child_ == 0) {
            close(up[0]);
            close(down[1]);
            child_main(up[1], down[0]);
        }
        close(up[1]);
        close(down[0]);
        efa_core_params_t p = params(2);
        int err = 0;
        core_ = efa_core_acquire(&p, &err);
        ASSERT_NE(core_, nullptr) << "efa_core_acquire on " << kProvider << ": " << err;
        std::vector<uint8_t> blob;
        ASSERT_TRUE(read_blob(up[0], &blob)) << "the child did not open its core";
        ASSERT_TRUE(write_blob(down[1], core_->blob));
        close(up[0]);
        close(down[1]);
        peer_ = efa_core_peer_get(core_, blob.data(), blob.size(), &err);
        ASSERT_NE(peer_, nullptr) << err;
        Op hello;
        ASSERT_EQ(efa_ctx_tsend(efa_core_ctx(core_, 0), buf_, sizeof(buf_), nullptr, peer_->addr[0],
                                1, 0, &hello.op),
                  0);
        core_test_wait(core_, hello, 10);
        ASSERT_TRUE(hello.done) << "the first message to the child never completed";
        ASSERT_EQ(hello.err, 0);
    }
    void TearDown() override {
        if (child_ > 0) {
            kill(child_, SIGKILL);
            waitpid(child_, nullptr, 0);
        }
        if (peer_) {
            efa_core_peer_put(core_, peer_);
        }
        if (core_) {
            efa_core_release(core_);
        }
    }
    pid_t child_ = -1;
    efa_core_t *core_ = nullptr;
    efa_peer_t *peer_ = nullptr;
    char buf_[8] = {};
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
