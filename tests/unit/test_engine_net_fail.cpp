// A post to a peer on another node that fails for good while the engine
// is writing to that peer (Engine::flush -> NetLink::commit -> post): the
// peer fails once the write is done, never from inside it.  Failing it
// from inside emptied the peer's queues while flush() went through them:
// a queued synchronous send ended up in no list and never completed, and
// a queued control frame was popped off an emptied deque.
//
// The peer is a forked child with a core of its own (shm) that never
// answers; the parent's core has the peer deadline on, and the test
// declares the child lost (efa_core_peer_lost), after which every post to
// it fails with -FI_EHOSTUNREACH.  Window 1, no packing, no inject: the
// test knows which message is where.  Only the core's progress runs until
// the scene is set (the engine's own progress would flush), so the
// queued messages are written by the engine's next flush, with the
// window open, and that write's post is the one that fails.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "core_test_op.hpp"
#include "core_test_params.hpp"
#include "efa_engine.h"
#include "forked_core_peer.hpp"
#include "engine_test_req.hpp"

namespace {

using engine_test::on_complete;
using engine_test::Req;

constexpr uint32_t kCid = 5;
constexpr int kLost = -FI_EHOSTUNREACH;

efa_core_params_t params() {
    efa_core_params_t p = core_test_params("shm");
    p.peer_timeout = 60; // on (a lost peer's posts fail), never expiring by itself here
    return p;
}

struct Reach {
    efa_core_t *core = nullptr;
    fi_addr_t other = FI_ADDR_UNSPEC;
};

int no_card(void *, uint32_t, efa_engine_card_t *) {
    return -FI_ENOENT;
}

uint32_t child_vpid(void *, uint32_t, int32_t) {
    return 1; // every source is the child
}

int addr_of(void *arg, uint32_t, fi_addr_t *addr, efa_ctx_t **ctx) {
    auto *r = static_cast<Reach *>(arg);
    *addr = r->other;
    *ctx = efa_core_ctx(r->core, 0);
    return 0;
}

class EngineNetFail : public ::testing::Test {
  protected:
    void SetUp() override {
        auto child_fn = [](int to_parent, int from_parent) {
            forked_core_peer::child(params(), to_parent, from_parent, [](efa_core_t *core) {
                for (;;) { // takes what comes, answers nothing
                    efa_core_progress(core);
                    usleep(200);
                }
            });
        };
        const char *why = nullptr;
        ASSERT_TRUE(
            forked_core_peer::start(params(), child_fn, &child_, &reach_.core, &peer_, &why))
            << why;
        reach_.other = peer_->addr[0];
        // A first message with a completion: shm's first send to a new
        // peer finds the queue "full" (-FI_EAGAIN) until the peer's region
        // is mapped, and the scene below needs each post to go at once.
        CoreTestOp hello;
        ASSERT_EQ(efa_ctx_tsend(efa_core_ctx(reach_.core, 0), buf_, sizeof(buf_), nullptr,
                                reach_.other, 1, 0, &hello.op),
                  0);
        core_test_wait(reach_.core, hello, 10);
        ASSERT_TRUE(hello.done) << "the first message to the child never completed";
        ASSERT_EQ(hello.err, 0);
        tag_ = "unitnetfail." + std::to_string(getpid());
        efa_engine_params_t p{};
        p.inbox_dir = "/tmp";
        p.job_tag = tag_.c_str();
        p.my_vpid = 0;
        p.nlocal = 1;
        p.nprocs = 2;
        p.no_rings = true;
        p.peer_card = no_card;
        p.peer_card_arg = &reach_;
        p.core = reach_.core;
        p.peer_addr = addr_of;
        p.source_vpid = child_vpid;
        p.net_eager = 1024;
        p.net_window = 1;
        p.net_coalesce_bytes = 0;
        p.net_coalesce_max = 1;
        p.net_no_inject = true;
        int err = 0;
        engine_ = efa_engine_create(&p, &err);
        ASSERT_NE(engine_, nullptr) << err;
    }
    void TearDown() override {
        forked_core_peer::stop(child_);
        if (engine_) {
            efa_engine_destroy(engine_);
        }
        if (peer_) {
            efa_core_peer_put(reach_.core, peer_);
        }
        if (reach_.core) {
            efa_core_release(reach_.core);
        }
    }
    // A send to the child: 1 (complete), 0 (waits) or an error.
    int send(Req &r, bool sync) {
        r.on.complete = on_complete;
        const int rc = efa_engine_send(engine_, 1, kCid, 0, 3, buf_, sizeof(buf_), sync, &r.on);
        if (1 == rc) {
            r.completions++;
        }
        return rc;
    }
    // The core's progress alone until nothing is in flight: every message
    // posted so far completed (each completion posts the next written
    // one), and nothing the engine queued was flushed.
    bool settle() {
        efa_ctx_t *ctx = efa_core_ctx(reach_.core, 0);
        for (int i = 0; i < 20000; ++i) {
            efa_core_progress(reach_.core);
            if (0 == ctx->inflight.load()) {
                return true;
            }
            usleep(100);
        }
        return false;
    }
    void lose_child() {
        efa_core_peer_lost(reach_.core, reach_.other, kLost, "the unit test lost it");
    }
    void progress(int n) {
        for (int i = 0; i < n; ++i) {
            efa_core_progress(reach_.core);
            efa_engine_progress(engine_);
        }
    }
    // The engine has nothing left to do with the provider: it gave back
    // the core's net interest (efa_core_net_interest), which it holds
    // while a peer has something queued or a request waits on one.
    bool engine_idle() const { return 0 == reach_.core->net_interest.load(); }

    pid_t child_ = -1;
    Reach reach_;
    efa_peer_t *peer_ = nullptr;
    std::string tag_;
    efa_engine_t *engine_ = nullptr;
    char buf_[8] = {};
};

} // namespace

// flush() writes the queued synchronous send c; its post fails.  c must
// fail with the peer (it was left in no list: never completed), and so
// must d, queued behind it.
TEST_F(EngineNetFail, AQueuedSendWhosePostFailsInTheFlushFailsOnce) {
    Req a, b, c, d;
    ASSERT_EQ(send(a, false), 1); // posted: the window is full
    ASSERT_EQ(send(b, false), 1); // written into the open message
    ASSERT_EQ(send(c, true), 0);  // queued: no room
    ASSERT_EQ(send(d, false), 0); // queued behind it
    ASSERT_TRUE(settle()) << "the messages to the child never completed";
    lose_child();
    progress(50);
    EXPECT_EQ(c.completions, 1) << "the send whose post failed inside the flush never completed";
    EXPECT_EQ(c.on.err, kLost);
    EXPECT_EQ(d.completions, 1);
    EXPECT_EQ(d.on.err, kLost);
    Req e;
    EXPECT_EQ(send(e, false), kLost) << "later sends to the failed peer fail at once";
    EXPECT_TRUE(engine_idle()) << "the failed peer still has something queued";
}

// flush() writes a queued control frame (a cancel request) first; its
// post fails.  The deque must not be popped after the failure emptied it:
// that is undefined behaviour, and with libstdc++ the deque then says it
// holds SIZE_MAX frames, so the peer stays busy (until another fail_peer
// happens to clear the deque again).  Every request fails once.
TEST_F(EngineNetFail, AQueuedControlFrameWhosePostFailsInTheFlushLeavesNothingBehind) {
    Req a, b, c;
    ASSERT_EQ(send(a, true), 0);            // posted, waits for its acknowledgement
    ASSERT_EQ(send(b, false), 1);           // written into the open message
    efa_engine_cancel_send(engine_, &a.on); // its cancel request queues: no room
    ASSERT_EQ(send(c, true), 0);            // queued
    ASSERT_TRUE(settle()) << "the messages to the child never completed";
    lose_child();
    progress(50);
    EXPECT_EQ(a.completions, 1);
    EXPECT_EQ(a.on.err, kLost);
    EXPECT_EQ(c.completions, 1);
    EXPECT_EQ(c.on.err, kLost);
    EXPECT_TRUE(engine_idle()) << "the failed peer still has something queued";
}

// The child never grants (it runs no engine): after the first grant's
// messages the next one waits for credit, written and not posted, and the
// sends after it queue.  Once the child is lost the written one must be
// given up, or the link never goes idle and the engine's teardown spends
// its whole bound waiting for a grant.
TEST_F(EngineNetFail, MessagesWaitingForAGrantAreGivenUpWithTheirPeer) {
    std::vector<Req> reqs(400);
    efa_engine_stats_t st{};
    size_t sent = 0;
    for (int i = 0; i < 20000 && 0 == st.net_no_credit; ++i) {
        if (sent < reqs.size()) {
            ASSERT_GE(send(reqs[sent++], false), 0);
        }
        progress(1);
        efa_engine_get_stats(engine_, &st);
    }
    ASSERT_GT(st.net_no_credit, 0u) << "the sender never ran out of the child's first grant";
    // A few more queue behind the one waiting for credit: they wait on
    // the child, so the engine watches it and hears of its loss.
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(send(reqs[sent++], false), 0) << "a send past the grant did not wait";
    }
    lose_child();
    // The engine's watch of the peers its requests wait on hears of it.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (reqs[sent - 1].completions == 0 && std::chrono::steady_clock::now() < until) {
        progress(1);
    }
    for (size_t i = 0; i < sent; ++i) {
        EXPECT_EQ(reqs[i].completions, 1) << "send " << i;
    }
    const auto t0 = std::chrono::steady_clock::now();
    efa_engine_destroy(engine_);
    engine_ = nullptr;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(waited, 1.0) << "the teardown waited for a grant from a lost peer";
}

// A receive from the child, failed with it: its status names the source
// and tag it was posted for, not those of the message the pooled request
// carried before (MPI_ERRORS_RETURN users read them).
TEST_F(EngineNetFail, AReceiveFailedWithItsPeerKeepsItsOwnEnvelope) {
    Req r;
    r.on.complete = on_complete;
    r.on.msg_src = 77; // a former message's
    r.on.msg_tag = 88;
    char into[8];
    r.on.buf = into;
    r.on.buflen = sizeof(into);
    ASSERT_EQ(efa_engine_recv(engine_, kCid, 0, 3, &r.on), 0);
    lose_child();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (0 == r.completions && std::chrono::steady_clock::now() < until) {
        progress(1);
    }
    ASSERT_EQ(r.completions, 1) << "the receive from the lost child never completed";
    EXPECT_EQ(r.on.err, kLost);
    EXPECT_EQ(r.on.msg_src, 0);
    EXPECT_EQ(r.on.msg_tag, 3);
    EXPECT_EQ(r.on.msg_len, 0u);
}
