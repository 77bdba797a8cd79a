// The on-node engine's watch on its peers on other nodes
// (onnode_engine_watch.cpp), between two real processes on tcp;ofi_rxm:
// a forked child with a core and an engine of its own is the peer on
// "another node".  Stopped (SIGSTOP), its sockets still take what is sent,
// as across a partition, so nothing the parent posts ever fails by itself:
// a receive posted for the child alone and a rendezvous send waiting for
// its CTS must fail through the watch (2 s deadline) instead of waiting
// for ever.  A child that keeps calling progress answers the probes, and a
// wait on it is left alone.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "core_test_op.hpp"
#include "core_test_params.hpp"
#include "efa_onnode.h"
#include "forked_core_peer.hpp"
#include "onnode_test_req.hpp"

namespace {

using onnode_test::on_complete;
using onnode_test::Req;

constexpr const char *kProvider = "tcp;ofi_rxm";
constexpr uint32_t kCid = 5;

efa_core_params_t params(int peer_timeout) {
    efa_core_params_t p = core_test_params(kProvider);
    p.peer_timeout = peer_timeout;
    return p;
}

// What an engine of either process needs: the other process (vpid 1 - me)
// is reached at 'other' through context 0.
struct Reach {
    efa_core_t *core = nullptr;
    fi_addr_t other = FI_ADDR_UNSPEC;
};

int no_card(void *, uint32_t, efa_onnode_card_t *) {
    return -FI_ENOENT;
}

int addr_of(void *arg, uint32_t vpid, fi_addr_t *addr, efa_ctx_t **ctx) {
    (void)vpid;
    auto *r = static_cast<Reach *>(arg);
    *addr = r->other;
    *ctx = efa_core_ctx(r->core, 0);
    return 0;
}

// Both processes of the test are their communicator's ranks 0 and 1.
uint32_t source_vpid(void *, uint32_t, int32_t src) {
    return static_cast<uint32_t>(src);
}

efa_onnode_t *open_engine(Reach *reach, uint32_t vpid, const std::string &tag) {
    efa_onnode_params_t p{};
    p.inbox_dir = "/tmp";
    p.job_tag = tag.c_str();
    p.my_vpid = vpid;
    p.nlocal = 1;
    p.nprocs = 2;
    p.no_rings = true;
    p.peer_card = no_card;
    p.peer_card_arg = reach;
    p.core = reach->core;
    p.peer_addr = addr_of;
    p.source_vpid = source_vpid;
    p.net_eager = 1024;
    int err = 0;
    return efa_onnode_create(&p, &err);
}

class EngineWatch : public ::testing::Test {
  protected:
    void SetUp() override {
        tag_ = "unitwatch." + std::to_string(getpid());
        const std::string tag = tag_;
        auto child_fn = [tag](int to_parent, int from_parent) {
            forked_core_peer::child(params(0), to_parent, from_parent, [&](efa_core_t *core) {
                Reach reach{core, FI_ADDR_UNSPEC};
                reach.other = core->peer_index.begin()->first->addr[0]; // the parent
                efa_onnode_t *e = open_engine(&reach, 1, tag + ".child");
                if (!e) {
                    _exit(4);
                }
                for (;;) {
                    efa_core_progress(core);
                    efa_onnode_progress(e);
                    usleep(200);
                }
            });
        };
        const char *why = nullptr;
        ASSERT_TRUE(
            forked_core_peer::start(params(2), child_fn, &child_, &reach_.core, &peer_, &why))
            << why << " (" << kProvider << ")";
        reach_.other = peer_->addr[0];
        if (!say_hello()) {
            engine_ = open_engine(&reach_, 0, tag_);
            ASSERT_NE(engine_, nullptr);
            return;
        }
        // A message with a completion first: the connection to the child
        // stands before it is stopped (an inject may complete before that).
        CoreTestOp hello_core;
        ASSERT_EQ(efa_ctx_tsend(efa_core_ctx(reach_.core, 0), buf_, 8, nullptr, reach_.other, 1, 0,
                                &hello_core.op),
                  0);
        core_test_wait(reach_.core, hello_core, 10);
        ASSERT_TRUE(hello_core.done) << "the first message to the child never completed";
        engine_ = open_engine(&reach_, 0, tag_);
        ASSERT_NE(engine_, nullptr);
        // A first message: the child becomes a peer of the engine's.
        Req hello;
        hello.on.complete = on_complete;
        const int rc =
            efa_onnode_send(engine_, 1, kCid, 0, 1, buf_, sizeof(buf_), false, &hello.on);
        ASSERT_GE(rc, 0);
        if (1 == rc) {
            hello.completions++;
        }
        wait(hello, 10);
        ASSERT_EQ(hello.completions, 1) << "the first message to the child never completed";
        ASSERT_EQ(hello.on.err, 0);
    }
    void TearDown() override {
        forked_core_peer::stop(child_);
        stop_engine();
        if (peer_) {
            efa_core_peer_put(reach_.core, peer_);
        }
        if (reach_.core) {
            efa_core_release(reach_.core);
        }
    }
    // Destroyed before the test's requests go (a send still waiting).
    void stop_engine() {
        if (engine_) {
            efa_onnode_destroy(engine_);
            engine_ = nullptr;
        }
    }
    // Progress until r completed or 'limit' seconds passed; the seconds taken.
    double wait(const Req &r, double limit) {
        const auto t0 = std::chrono::steady_clock::now();
        double s = 0;
        while (0 == r.completions && s < limit) {
            efa_core_progress(reach_.core);
            efa_onnode_progress(engine_);
            usleep(200);
            s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        return s;
    }
    void recv(Req &r, int32_t src) {
        r.on.complete = on_complete;
        r.on.buf = buf_;
        r.on.buflen = sizeof(buf_);
        ASSERT_EQ(efa_onnode_recv(engine_, kCid, src, 2, &r.on), 0);
    }
    virtual bool say_hello() const { return true; }
    std::string tag_;
    pid_t child_ = -1;
    Reach reach_;
    efa_peer_t *peer_ = nullptr;
    efa_onnode_t *engine_ = nullptr;
    char buf_[64] = {};
};

// The same child, never sent anything: not a peer of the engine's yet,
// and tcp;ofi_rxm's connection to it never comes up while it is stopped.
class EngineWatchUntalked : public EngineWatch {
  protected:
    bool say_hello() const override { return false; }
};

} // namespace

TEST_F(EngineWatchUntalked, AReceiveFromAStoppedPeerNeverTalkedToFails) {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    Req from_child;
    recv(from_child, 1);
    const double took = wait(from_child, 12);
    EXPECT_EQ(from_child.completions, 1)
        << "a receive from a stopped peer never talked to still waited after 12 s";
    if (0 == from_child.completions) {
        efa_onnode_cancel(engine_, &from_child.on); // (the engine outlives the request)
    } else {
        EXPECT_NE(from_child.on.err, 0);
        EXPECT_LE(took, 8.0);
    }
}

TEST_F(EngineWatch, AReceiveFromAStoppedPeerFailsAndAnAnySourceReceiveWaits) {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    Req from_child, any;
    recv(from_child, 1);
    recv(any, EFA_ONNODE_ANY);
    const double took = wait(from_child, 12);
    EXPECT_EQ(from_child.completions, 1) << "a receive from a stopped peer still waited after 12 s";
    if (0 == from_child.completions) {
        efa_onnode_cancel(engine_, &from_child.on); // (the engine outlives the request)
    } else {
        EXPECT_EQ(from_child.on.err, -FI_ETIMEDOUT);
        EXPECT_GE(took, 1.0);
        EXPECT_LE(took, 8.0);
    }
    // ANY_SOURCE waits on nobody in particular: not failed.
    EXPECT_EQ(any.completions, 0);
    EXPECT_TRUE(efa_onnode_cancel(engine_, &any.on));
    EXPECT_EQ(any.completions, 1);
}

TEST_F(EngineWatch, ARendezvousToAStoppedPeerFails) {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    std::vector<uint8_t> big(200000, 7); // over net_eager: an RTS that waits for its CTS
    Req send;
    send.on.complete = on_complete;
    ASSERT_EQ(efa_onnode_send(engine_, 1, kCid, 0, 3, big.data(), big.size(), false, &send.on), 0);
    wait(send, 12);
    EXPECT_EQ(send.completions, 1) << "a rendezvous to a stopped peer still waited after 12 s";
    if (0 == send.completions) {
        efa_onnode_cancel_send(engine_, &send.on); // (the engine outlives the request)
        stop_engine();
    } else {
        EXPECT_NE(send.on.err, 0);
    }
}

TEST_F(EngineWatch, AWaitOnAnAnsweringPeerIsLeftAlone) {
    Req from_child;
    recv(from_child, 1);
    wait(from_child, 5); // two and a half deadlines: probed, and answered
    EXPECT_EQ(from_child.completions, 0)
        << "a receive from a live peer failed: " << fi_strerror(-from_child.on.err);
    if (0 == from_child.completions) {
        EXPECT_TRUE(efa_onnode_cancel(engine_, &from_child.on));
        EXPECT_EQ(from_child.completions, 1);
    }
}
