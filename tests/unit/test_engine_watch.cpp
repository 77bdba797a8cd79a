// The matching engine's watch on its peers on other nodes
// (engine_watch.cpp), between two real processes on tcp;ofi_rxm:
// a forked child with a core and an engine of its own is the peer on
// "another node".  Stopped (SIGSTOP), its sockets still take what is sent,
// as across a partition, so nothing the parent posts ever fails by itself:
// a receive posted for the child alone and a rendezvous send waiting for
// its CTS must fail through the watch (2 s deadline) instead of waiting
// for ever.  A child that keeps calling progress answers the probes, and a
// wait on it is left alone.  Receives on ANY_SOURCE follow ULFM's rule:
// they fail when a member of their communicator is lost (the sweep
// watches those members once such a receive waited a sweep period), and
// stay posted in a communicator the lost peer is not in.  A blocking
// probe posts nothing: its misses are watched alike (EngineWatchProbe).
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
#include "engine_two_ranks.hpp"

namespace {

using engine_test::on_complete;
using engine_test::Req;

constexpr const char *kProvider = "tcp;ofi_rxm";
using engine_two_ranks::kCid;
using engine_two_ranks::kCidAlone;

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

int no_card(void *, uint32_t, efa_engine_card_t *) {
    return -FI_ENOENT;
}

int addr_of(void *arg, uint32_t vpid, fi_addr_t *addr, efa_ctx_t **ctx) {
    (void)vpid;
    auto *r = static_cast<Reach *>(arg);
    *addr = r->other;
    *ctx = efa_core_ctx(r->core, 0);
    return 0;
}

using engine_two_ranks::comm_members;
using engine_two_ranks::source_vpid;

efa_engine_t *open_engine(Reach *reach, uint32_t vpid, const std::string &tag) {
    efa_engine_params_t p{};
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
    p.comm_members = comm_members;
    p.net_eager = 1024;
    int err = 0;
    return efa_engine_create(&p, &err);
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
                efa_engine_t *e = open_engine(&reach, 1, tag + ".child");
                if (!e) {
                    _exit(4);
                }
                for (;;) {
                    efa_core_progress(core);
                    efa_engine_progress(e);
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
            efa_engine_send(engine_, 1, kCid, 0, 1, buf_, sizeof(buf_), false, &hello.on);
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
            efa_engine_destroy(engine_);
            engine_ = nullptr;
        }
    }
    // Progress until r completed or 'limit' seconds passed; the seconds taken.
    double wait(const Req &r, double limit) {
        const auto t0 = std::chrono::steady_clock::now();
        double s = 0;
        while (0 == r.completions && s < limit) {
            efa_core_progress(reach_.core);
            efa_engine_progress(engine_);
            usleep(200);
            s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        return s;
    }
    void recv(Req &r, int32_t src, uint32_t cid = kCid) {
        r.on.complete = on_complete;
        r.on.buf = buf_;
        r.on.buflen = sizeof(buf_);
        ASSERT_EQ(efa_engine_recv(engine_, cid, src, 2, &r.on), 0);
    }
    // Probes (as pml cm's MPI_Probe does: again after every miss) until a
    // probe fails or 'limit' seconds passed: 0 (still nothing) or the
    // error; *took, the seconds taken.
    int probe_until(int32_t src, uint32_t cid, double limit, double *took) {
        const auto t0 = std::chrono::steady_clock::now();
        efa_engine_probe_t found{};
        int rc = 0;
        for (*took = 0; 0 == rc && *took < limit;) {
            rc = efa_engine_probe(engine_, cid, src, 2, false, &found);
            usleep(200);
            *took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        return rc;
    }
    // Cancels r if it still waits (the engine outlives the request).
    void forget(Req &r) {
        if (0 == r.completions) {
            efa_engine_cancel(engine_, &r.on);
        }
    }
    virtual bool say_hello() const { return true; }
    std::string tag_;
    pid_t child_ = -1;
    Reach reach_;
    efa_peer_t *peer_ = nullptr;
    efa_engine_t *engine_ = nullptr;
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
        efa_engine_cancel(engine_, &from_child.on); // (the engine outlives the request)
    } else {
        EXPECT_NE(from_child.on.err, 0);
        EXPECT_LE(took, 8.0);
    }
}

TEST_F(EngineWatchUntalked, AnAnySourceReceiveAmongStoppedPeersNeverTalkedToFails) {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    Req any;
    recv(any, EFA_ENGINE_ANY);
    const double took = wait(any, 15);
    EXPECT_EQ(any.completions, 1) << "an ANY_SOURCE receive whose only other member is stopped "
                                     "and never talked to still waited after 15 s";
    if (0 != any.completions) {
        EXPECT_NE(any.on.err, 0);
        EXPECT_LE(took, 11.0);
    }
    forget(any);
}

// Until the ANY_SOURCE rule this test asserted that the ANY_SOURCE receive
// kept waiting ("it waits on nobody in particular"): in a communicator
// whose every other member is lost it then waited for ever.  Now it fails
// with the receive for the lost peer, with the same error.
TEST_F(EngineWatch, AReceiveFromAStoppedPeerFailsAndSoDoesAnAnySourceReceive) {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    Req from_child, any;
    recv(from_child, 1);
    recv(any, EFA_ENGINE_ANY);
    const double took = wait(from_child, 12);
    EXPECT_EQ(from_child.completions, 1) << "a receive from a stopped peer still waited after 12 s";
    if (0 != from_child.completions) {
        EXPECT_EQ(from_child.on.err, -FI_ETIMEDOUT);
        EXPECT_GE(took, 1.0);
        EXPECT_LE(took, 8.0);
    }
    EXPECT_EQ(any.completions, 1) << "an ANY_SOURCE receive outlived the loss of a member";
    if (0 != any.completions) {
        EXPECT_EQ(any.on.err, -FI_ETIMEDOUT);
    }
    forget(from_child);
    forget(any);
}

// Nothing but the ANY_SOURCE receive waits on the child: the sweep must
// watch the members of its communicator for the loss to be found at all.
TEST_F(EngineWatch, AnAnySourceReceiveAloneFailsWhenAMemberIsLost) {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    Req any;
    recv(any, EFA_ENGINE_ANY);
    const double took = wait(any, 15);
    EXPECT_EQ(any.completions, 1) << "an ANY_SOURCE receive whose only other member is stopped "
                                     "still waited after 15 s";
    if (0 != any.completions) {
        EXPECT_EQ(any.on.err, -FI_ETIMEDOUT);
        EXPECT_LE(took, 10.0); // a sweep late, a sweep period, the probe's deadline
    }
    forget(any);
}

// MPI's semantics elsewhere: an ANY_SOURCE receive of a communicator the
// lost peer is not in stays posted (through many sweeps after the loss),
// while one posted after the loss in a communicator it is in fails too.
TEST_F(EngineWatch, OnlyAnySourceReceivesOfTheLostPeersCommunicatorsFail) {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    Req any, alone, later;
    recv(any, EFA_ENGINE_ANY);
    recv(alone, EFA_ENGINE_ANY, kCidAlone);
    wait(any, 15);
    EXPECT_EQ(any.completions, 1) << "an ANY_SOURCE receive outlived the loss of a member";
    recv(later, EFA_ENGINE_ANY);
    const double took = wait(later, 8);
    EXPECT_EQ(later.completions, 1) << "an ANY_SOURCE receive posted after a member was lost "
                                       "still waited after 8 s";
    if (0 != later.completions) {
        EXPECT_NE(later.on.err, 0);
        EXPECT_LE(took, 4.0); // seen by one sweep, failed by the next
    }
    EXPECT_EQ(alone.completions, 0) << "an ANY_SOURCE receive of a communicator without the lost "
                                       "peer failed: "
                                    << fi_strerror(-alone.on.err);
    if (0 == alone.completions) {
        EXPECT_TRUE(efa_engine_cancel(engine_, &alone.on));
        EXPECT_EQ(alone.completions, 1);
        EXPECT_EQ(alone.on.err, -FI_ECANCELED);
    }
    forget(any);
    forget(later);
}

TEST_F(EngineWatch, ARendezvousToAStoppedPeerFails) {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    std::vector<uint8_t> big(200000, 7); // over net_eager: an RTS that waits for its CTS
    Req send;
    send.on.complete = on_complete;
    ASSERT_EQ(efa_engine_send(engine_, 1, kCid, 0, 3, big.data(), big.size(), false, &send.on), 0);
    wait(send, 12);
    EXPECT_EQ(send.completions, 1) << "a rendezvous to a stopped peer still waited after 12 s";
    if (0 == send.completions) {
        efa_engine_cancel_send(engine_, &send.on); // (the engine outlives the request)
        stop_engine();
    } else {
        EXPECT_NE(send.on.err, 0);
    }
}

TEST_F(EngineWatch, AWaitOnAnAnsweringPeerIsLeftAlone) {
    Req from_child, any;
    // Under MPI a request's memory is not zeroed: a receive's net_mr (a
    // send's field) must never be read, whatever flags the sweep sets on
    // it (a flag bit shared by the sweep and the sender's registration
    // released a stale pointer when a swept receive completed).
    from_child.on.net_mr = any.on.net_mr = reinterpret_cast<void *>(uintptr_t{0x8});
    recv(from_child, 1);
    recv(any, EFA_ENGINE_ANY); // watched from the second sweep on
    wait(from_child, 5);       // two and a half deadlines: probed, and answered
    EXPECT_EQ(from_child.completions, 0)
        << "a receive from a live peer failed: " << fi_strerror(-from_child.on.err);
    EXPECT_EQ(any.completions, 0) << "an ANY_SOURCE receive among live peers failed: "
                                  << fi_strerror(-any.on.err);
    for (Req *r : {&from_child, &any}) {
        if (0 == r->completions) {
            EXPECT_TRUE(efa_engine_cancel(engine_, &r->on));
            EXPECT_EQ(r->completions, 1);
        }
    }
}

// MPI_Probe under pml cm probes until a message is there: on a stopped
// peer it waited for ever before the engine watched the misses (the netns
// scenario partition-probe hung on cm-own-rxm).
TEST_F(EngineWatch, AProbeOfAStoppedPeerFails) {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    double took = 0;
    const int rc = probe_until(1, kCid, 15, &took);
    EXPECT_EQ(rc, -FI_ETIMEDOUT) << "a probe of a stopped peer still found nothing after " << took
                                 << " s";
    EXPECT_LE(took, 10.0); // a sweep late, a sweep period, the probe's deadline
}

TEST_F(EngineWatch, AnAnySourceProbeFailsWhenAMemberIsLostAndNotElsewhere) {
    ASSERT_EQ(kill(child_, SIGSTOP), 0);
    double took = 0;
    const int rc = probe_until(EFA_ENGINE_ANY, kCid, 15, &took);
    EXPECT_EQ(rc, -FI_ETIMEDOUT) << "an ANY_SOURCE probe whose only other member is stopped "
                                    "still found nothing after "
                                 << took << " s";
    EXPECT_LE(took, 10.0);
    EXPECT_EQ(probe_until(EFA_ENGINE_ANY, kCidAlone, 3, &took), 0)
        << "an ANY_SOURCE probe of a communicator without the lost peer failed";
    EXPECT_EQ(probe_until(1, kCid, 1, &took), -FI_ETIMEDOUT)
        << "a probe of the lost peer begun after the loss did not fail at once";
}

TEST_F(EngineWatch, AProbeOfAnAnsweringPeerNeverFails) {
    double took = 0;
    EXPECT_EQ(probe_until(1, kCid, 3, &took), 0) << "a probe of a live peer failed";
    EXPECT_EQ(probe_until(EFA_ENGINE_ANY, kCid, 3, &took), 0)
        << "an ANY_SOURCE probe among live peers failed";
}
