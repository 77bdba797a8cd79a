// The peer deadline through the whole core on the stand-in providers: a
// peer that never answers (a bound UDP socket that reads nothing, as a host
// cut off the network) and one whose host refuses connections (a bound TCP
// socket that does not listen).  Without the deadline every one of these
// operations waits for ever (OffMeansTheSendStillWaits).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "core.hpp"
#include "core_test_op.hpp"
#include "ctx_post.hpp"
#include "core_test_params.hpp"
#include "peer_blob.hpp"

namespace {

efa_core_params_t params(const char *provider, int peer_timeout) {
    efa_core_params_t p = core_test_params(provider);
    p.peer_timeout = peer_timeout;
    return p;
}

// A socket of 'type' bound to the core's own IP address on a fresh port,
// never read from or listened on: the address of a peer that cannot answer.
// (Open and bound, so that no other process takes the port meanwhile.)
class DeadEnd {
  public:
    DeadEnd(const std::vector<uint8_t> &own_name, int type) : name_(own_name) {
        sockaddr_storage ss{};
        std::memcpy(&ss, name_.data(), std::min(name_.size(), sizeof(ss)));
        const socklen_t len = ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
        reinterpret_cast<sockaddr_in *>(&ss)->sin_port = 0; // same offset in sockaddr_in6
        fd_ = socket(ss.ss_family, type, 0);
        EXPECT_GE(fd_, 0);
        EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr *>(&ss), len), 0);
        socklen_t got = len;
        EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr *>(&ss), &got), 0);
        std::memcpy(name_.data() + 2, &reinterpret_cast<sockaddr_in *>(&ss)->sin_port, 2);
    }
    ~DeadEnd() { close(fd_); }
    DeadEnd(const DeadEnd &) = delete;
    DeadEnd &operator=(const DeadEnd &) = delete;
    const std::vector<uint8_t> &name() const { return name_; }

  private:
    std::vector<uint8_t> name_;
    int fd_ = -1;
};

using Op = CoreTestOp;

struct DeadPeerCore {
    efa_core_t *core = nullptr;
    efa_peer_t *peer = nullptr;
    std::unique_ptr<DeadEnd> dead;
    DeadPeerCore(const char *provider, int timeout, int sock_type) {
        efa_core_params_t p = params(provider, timeout);
        int err = 0;
        core = efa_core_acquire(&p, &err);
        EXPECT_NE(core, nullptr) << "efa_core_acquire on " << provider << ": " << err;
        if (!core) {
            return;
        }
        dead = std::make_unique<DeadEnd>(core->nic->names(), sock_type);
        auto blob =
            efa::make_peer_blob(1, static_cast<uint16_t>(core->nic->addr_len()), dead->name());
        peer = efa_core_peer_get(core, blob.data(), blob.size(), &err);
        EXPECT_NE(peer, nullptr) << err;
    }
    ~DeadPeerCore() {
        if (peer) {
            efa_core_peer_put(core, peer);
        }
        if (core) {
            efa_core_release(core);
        }
    }
};

char g_buf[64];

// 'op' (to a silent peer, deadline 2 s) must fail with -FI_ETIMEDOUT
// after the deadline and well before 5 s.
void expect_deadline_failure(efa_core_t *core, const Op &op, const char *what) {
    const double took = core_test_wait(core, op, 10);
    ASSERT_TRUE(op.done) << what << " to a silent peer still waits after 10 s";
    EXPECT_EQ(op.err, -FI_ETIMEDOUT);
    EXPECT_GE(took, 1.5);
    EXPECT_LE(took, 5.0);
}

} // namespace

TEST(CoreDeadline, ASendToASilentPeerFailsAfterTheDeadlineAndLaterPostsAtOnce) {
    DeadPeerCore s("udp;ofi_rxd", 2, SOCK_DGRAM);
    ASSERT_NE(s.peer, nullptr);
    efa_ctx_t *ctx = efa_core_ctx(s.core, 0);
    Op send;
    ASSERT_EQ(efa_ctx_tsend(ctx, g_buf, sizeof(g_buf), nullptr, s.peer->addr[0], 1, 0, &send.op),
              0);
    expect_deadline_failure(s.core, send, "the send");
    ASSERT_TRUE(send.done);
    Op again;
    EXPECT_EQ(efa_ctx_tsend(ctx, g_buf, sizeof(g_buf), nullptr, s.peer->addr[0], 1, 0, &again.op),
              -FI_EHOSTUNREACH);
    EXPECT_EQ(efa_ctx_tinject(ctx, g_buf, 8, s.peer->addr[0], 1, 0), -FI_EHOSTUNREACH);
    EXPECT_FALSE(again.done);
}

// A receive from one peer has nothing to fail: the probe decides.
TEST(CoreDeadline, AReceiveFromASilentPeerFailsThroughTheProbe) {
    DeadPeerCore s("udp;ofi_rxd", 2, SOCK_DGRAM);
    ASSERT_NE(s.peer, nullptr);
    efa_ctx_t *ctx = efa_core_ctx(s.core, 0);
    Op recv;
    ASSERT_EQ(efa_ctx_trecv(ctx, g_buf, sizeof(g_buf), nullptr, s.peer->addr[0], 5, 0, &recv.op),
              0);
    expect_deadline_failure(s.core, recv, "the receive");
}

TEST(CoreDeadline, OffMeansTheSendStillWaits) {
    DeadPeerCore s("udp;ofi_rxd", 0, SOCK_DGRAM);
    ASSERT_NE(s.peer, nullptr);
    efa_ctx_t *ctx = efa_core_ctx(s.core, 0);
    static Op op; // the provider may still hold it after the core closes
    Op *send = &op;
    ASSERT_EQ(efa_ctx_tsend(ctx, g_buf, sizeof(g_buf), nullptr, s.peer->addr[0], 1, 0, &send->op),
              0);
    core_test_wait(s.core, *send, 3);
    EXPECT_FALSE(send->done);
    send->op.complete = efa_op_complete_nothing;
}

// tcp;ofi_rxm keeps retrying a connection the peer's host refuses (a
// bound port that does not listen): the deadline ends that too.
TEST(CoreDeadline, ASendToARefusingHostFailsWithinTheDeadline) {
    DeadPeerCore s("tcp;ofi_rxm", 2, SOCK_STREAM);
    ASSERT_NE(s.peer, nullptr);
    efa_ctx_t *ctx = efa_core_ctx(s.core, 0);
    Op send;
    ASSERT_EQ(efa_ctx_tsend(ctx, g_buf, sizeof(g_buf), nullptr, s.peer->addr[0], 1, 0, &send.op),
              0);
    const double took = core_test_wait(s.core, send, 10);
    ASSERT_TRUE(send.done) << "the send to a refusing host still waits after 10 s";
    EXPECT_NE(send.err, 0);
    EXPECT_LE(took, 5.0);
    Op again;
    EXPECT_EQ(efa_ctx_tsend(ctx, g_buf, sizeof(g_buf), nullptr, s.peer->addr[0], 1, 0, &again.op),
              -FI_EHOSTUNREACH)
        << "first error: " << fi_strerror(-send.err);
}

// A watch (pml ob1's waits, which post nothing to the peer): the peer is
// probed like one waited on by a receive, and the watch is told it is lost.
TEST(CoreDeadline, AWatchedSilentPeerIsDeclaredLostThroughTheProbe) {
    DeadPeerCore s("udp;ofi_rxd", 2, SOCK_DGRAM);
    ASSERT_NE(s.peer, nullptr);
    Op watch;
    ASSERT_EQ(efa_core_peer_watch(s.core, s.peer, &watch.op), 0);
    EXPECT_NE(watch.op.tracker, nullptr);
    EXPECT_EQ(efa_core_peer_state(s.core, s.peer), 0) << "a peer not lost yet reads as lost";
    expect_deadline_failure(s.core, watch, "the watch");
    EXPECT_EQ(efa_core_peer_state(s.core, s.peer), 1) << "the peer's loss not read as one";
    efa_core_peer_unwatch(s.core, &watch.op); // after the loss: nothing left to end
    Op again;
    EXPECT_EQ(efa_core_peer_watch(s.core, s.peer, &again.op), -FI_EHOSTUNREACH);
    EXPECT_FALSE(again.done);
}

TEST(CoreDeadline, AnEndedWatchIsNeverCalled) {
    DeadPeerCore s("udp;ofi_rxd", 2, SOCK_DGRAM);
    ASSERT_NE(s.peer, nullptr);
    Op watch;
    ASSERT_EQ(efa_core_peer_watch(s.core, s.peer, &watch.op), 0);
    efa_core_peer_unwatch(s.core, &watch.op);
    EXPECT_EQ(watch.op.tracker, nullptr);
    core_test_wait(s.core, watch, 4);
    EXPECT_FALSE(watch.done) << "a watch ended before the deadline was still called";
}

TEST(CoreDeadline, AWatchWithTheDeadlineOffIsNothing) {
    DeadPeerCore s("udp;ofi_rxd", 0, SOCK_DGRAM);
    ASSERT_NE(s.peer, nullptr);
    Op watch;
    EXPECT_EQ(efa_core_peer_watch(s.core, s.peer, &watch.op), 0);
    EXPECT_EQ(watch.op.tracker, nullptr);
    efa_core_peer_unwatch(s.core, &watch.op);
    EXPECT_FALSE(watch.done);
    EXPECT_EQ(efa_core_peer_state(s.core, s.peer), -1) << "with the deadline off nothing is known";
}

namespace {
void count_tick(void *arg) {
    ++*static_cast<int *>(arg);
}

// Drives progress for 'secs' (the deadline check ticks about once a second).
void progress_for(efa_core_t *core, double secs) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(secs);
    while (std::chrono::steady_clock::now() < end) {
        efa_core_progress(core);
    }
}
} // namespace

// btl_efa and mtl_efa share one core, each with its sweep: both are
// called, and a removed one no more (only one was kept before: the second
// owner's sweep replaced the first's).
TEST(CoreDeadline, EveryOwnersTickIsCalledUntilRemoved) {
    DeadPeerCore s("udp;ofi_rxd", 2, SOCK_DGRAM);
    ASSERT_NE(s.core, nullptr);
    int first = 0, second = 0;
    ASSERT_EQ(efa_core_add_deadline_tick(s.core, count_tick, &first), 0);
    ASSERT_EQ(efa_core_add_deadline_tick(s.core, count_tick, &second), 0);
    progress_for(s.core, 2.5);
    EXPECT_GE(first, 1);
    EXPECT_GE(second, 1);
    efa_core_remove_deadline_tick(s.core, count_tick, &first);
    first = second = 0;
    progress_for(s.core, 2.5);
    EXPECT_EQ(first, 0);
    EXPECT_GE(second, 1);
    efa_core_remove_deadline_tick(s.core, count_tick, &second);
}

// A provider that hands the same context back twice (as a stand-in it
// completed before) must not complete that operation's owner again, nor
// anything that owns the stand-in later: the second completion is counted
// and ignored, and the stand-in is in the free list once, so the next two
// tracked operations get two.
TEST(CoreDeadline, ASecondCompletionOfAStandInIsIgnored) {
    DeadPeerCore s("udp;ofi_rxd", 30, SOCK_DGRAM);
    ASSERT_NE(s.peer, nullptr);
    efa_ctx_t *ctx = efa_core_ctx(s.core, 0);
    int completions = 0;
    struct Counted {
        efa_op_t op{};
        int *n;
    } first{{}, &completions};
    first.op.complete = [](efa_op_t *o, const efa_cqe_t *) {
        ++*reinterpret_cast<Counted *>(o)->n;
    };
    int err = 0;
    // Tracked as the post would, not posted: nothing else hands it back.
    efa_op_t *standin = efa::deadline_track(ctx, s.peer->addr[0], &first.op,
                                            efa::PeerDeadline::Kind::Recv, FI_RECV, &err);
    ASSERT_NE(standin, nullptr) << err;
    ASSERT_NE(standin, &first.op) << "the deadline is on: a stand-in goes to the provider";
    const efa_cqe_t cqe{0, FI_RECV | FI_TAGGED, 5, 0, 1, 0, FI_ADDR_NOTAVAIL, false, false};
    standin->complete(standin, &cqe);
    EXPECT_EQ(completions, 1);
    EXPECT_EQ(s.core->stale_completions.load(), 0u);
    standin->complete(standin, &cqe); // the provider's second time
    EXPECT_EQ(completions, 1) << "the owner heard of its operation twice";
    EXPECT_EQ(s.core->stale_completions.load(), 1u);

    Op a, b;
    efa_op_t *ta = efa::deadline_track(ctx, s.peer->addr[0], &a.op, efa::PeerDeadline::Kind::Send,
                                       FI_SEND, &err);
    efa_op_t *tb = efa::deadline_track(ctx, s.peer->addr[0], &b.op, efa::PeerDeadline::Kind::Send,
                                       FI_SEND, &err);
    ASSERT_NE(ta, nullptr);
    ASSERT_NE(tb, nullptr);
    EXPECT_NE(ta, tb) << "one stand-in given to two operations";
    efa::deadline_untrack(ctx, ta, &a.op);
    efa::deadline_untrack(ctx, tb, &b.op);
    EXPECT_FALSE(a.done);
    EXPECT_FALSE(b.done);
}

// The peer is declared lost between a receive's tracking and its post (in
// another thread): the loss's cancel found nothing to cancel, so the post
// cancels it itself, and its owner hears of the loss at once, not after
// a further peer_timeout (30 s here) with the buffer still posted.
TEST(CoreDeadline, AReceivePostedAsItsPeerIsLostIsCancelled) {
    DeadPeerCore s("udp;ofi_rxd", 30, SOCK_DGRAM);
    ASSERT_NE(s.peer, nullptr);
    efa_ctx_t *ctx = efa_core_ctx(s.core, 0);
    Op op;
    const fi_addr_t from = s.peer->addr[0];
    // The loss comes between the tracking and the post, inside the post
    // as another thread's would.
    bool told_first = true;
    auto post = [&](efa_op_t *pop) {
        efa_core_peer_lost(s.core, from, -FI_EHOSTUNREACH, "the test took it out");
        told_first = op.done;
        fid_ep *ep = ctx->ep;
        void *context = &pop->fi_ctx;
        return efa::post::submit_recv(ctx, "fi_trecv", pop, [=] {
            return fi_trecv(ep, g_buf, sizeof(g_buf), nullptr, from, 7, 0, context);
        });
    };
    ASSERT_EQ(efa::post::tracked_post(ctx, from, &op.op, efa::PeerDeadline::Kind::Recv,
                                      FI_RECV | FI_TAGGED, post),
              0);
    EXPECT_FALSE(told_first) << "told before the provider handed its receive back";
    core_test_wait(s.core, op, 5);
    ASSERT_TRUE(op.done) << "the receive stayed posted after its peer's loss";
    EXPECT_EQ(op.err, -FI_EHOSTUNREACH);
}

// A cancel that comes late (in another thread, its receive completed
// meanwhile, its stand-in handed back and taken by the next receive) must
// not cancel that next receive: the stand-in is looked at under the
// deadline's lock, and stands for its owner no more.
TEST(CoreDeadline, ALateCancelNeverReachesTheStandInsNextOperation) {
    DeadPeerCore s("udp;ofi_rxd", 30, SOCK_DGRAM);
    ASSERT_NE(s.peer, nullptr);
    efa_ctx_t *ctx = efa_core_ctx(s.core, 0);
    Op first, second;
    ASSERT_EQ(efa_ctx_trecv(ctx, g_buf, sizeof(g_buf), nullptr, s.peer->addr[0], 5, 0, &first.op),
              0);
    efa_op_t *standin = first.op.tracker;
    ASSERT_NE(standin, nullptr) << "the deadline is on: a stand-in goes to the provider";
    ASSERT_EQ(efa_ctx_cancel(ctx, &first.op), 0);
    core_test_wait(s.core, first, 5);
    ASSERT_TRUE(first.done);
    EXPECT_EQ(first.err, -FI_ECANCELED);
    EXPECT_EQ(first.op.tracker, nullptr);
    ASSERT_EQ(efa_ctx_trecv(ctx, g_buf, sizeof(g_buf), nullptr, s.peer->addr[0], 6, 0, &second.op),
              0);
    ASSERT_EQ(second.op.tracker, standin) << "(the next receive did not take the stand-in back)";
    first.op.tracker = standin; // as read by a thread before the completion cleared it
    EXPECT_EQ(efa_ctx_cancel(ctx, &first.op), -FI_ENOENT);
    first.op.tracker = nullptr;
    for (int i = 0; i < 50 && !second.done; ++i) {
        efa_core_progress(s.core);
        usleep(1000);
    }
    EXPECT_FALSE(second.done) << "the first receive's late cancel cancelled the second";
    ASSERT_EQ(efa_ctx_cancel(ctx, &second.op), 0);
    core_test_wait(s.core, second, 5);
    EXPECT_TRUE(second.done);
    EXPECT_EQ(second.err, -FI_ECANCELED);
}

// A peer declared lost and then released leaves none of its addresses
// dead, every context's (the address vector hands them to the next
// process it takes: MPI_Comm_accept after a client died); declared lost,
// every context's was.
TEST(CoreDeadline, AReleasedLostPeerLeavesNoContextsAddressDead) {
    efa_core_params_t p = params("tcp;ofi_rxm", 60);
    p.num_contexts = 2;
    int err = 0;
    efa_core_t *core = efa_core_acquire(&p, &err);
    ASSERT_NE(core, nullptr) << err;
    ASSERT_EQ(efa_core_get_info(core)->num_contexts, 2);
    const void *blob = nullptr;
    size_t len = 0;
    ASSERT_EQ(efa_core_local_blob(core, &blob, &len), 0);
    efa_peer_t *peer = efa_core_peer_get(core, blob, len, &err);
    ASSERT_NE(peer, nullptr) << err;
    const fi_addr_t addrs[2] = {peer->addr[0], peer->addr[1]};
    efa_core_peer_lost(core, addrs[1], -FI_EIO, "the test");
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        for (fi_addr_t a : addrs) {
            EXPECT_TRUE(core->deadline.dead(a)) << "context address " << a << " not lost";
        }
    }
    efa_core_peer_put(core, peer);
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        for (fi_addr_t a : addrs) {
            EXPECT_FALSE(core->deadline.dead(a)) << "context address " << a << " still dead";
        }
    }
    efa_core_release(core);
}

namespace {

// The provider's answer to the probes of one core, by the test: each post
// refused with 'refuse', or (0) taken, to be completed with an error by
// complete_taken().  Every tagged send of the core goes through it: only
// probes go to a silent peer that nothing else is sent to.
struct ProbeFault {
    fid_ep *ep;
    fi_ops_tagged *provider;
    fi_ops_tagged faulty;
    ssize_t refuse;
    std::vector<void *> taken;
    int posts = 0;

    static ProbeFault *current;
    static ssize_t sendmsg(fid_ep *, const fi_msg_tagged *msg, uint64_t) {
        ++current->posts;
        if (current->refuse) {
            return current->refuse;
        }
        current->taken.push_back(msg->context);
        return 0;
    }

    ProbeFault(efa_core_t *core, ssize_t refuse_with)
        : ep(efa_core_ctx(core, 0)->ep), provider(ep->tagged), faulty(*ep->tagged),
          refuse(refuse_with) {
        faulty.sendmsg = sendmsg;
        ep->tagged = &faulty;
        current = this;
    }
    ~ProbeFault() {
        complete_taken();
        ep->tagged = provider;
        current = nullptr;
    }
    // The taken probes' completions, each a failure of this side (-FI_EIO).
    void complete_taken() {
        std::vector<void *> now;
        now.swap(taken);
        for (void *c : now) {
            auto *op = static_cast<efa_op_t *>(c); // (fi_ctx is first)
            const efa_cqe_t cqe{-FI_EIO, FI_SEND | FI_TAGGED, 0,     0,    0,
                                0,       FI_ADDR_NOTAVAIL,    false, false};
            op->complete(op, &cqe);
        }
    }
};
ProbeFault *ProbeFault::current = nullptr;

// Progress (completing the probes the fault took) until 'op' completes or
// 10 s pass; the seconds taken.
double wait_with_fault(efa_core_t *core, ProbeFault &fault, const Op &op) {
    const auto t0 = std::chrono::steady_clock::now();
    double s = 0;
    while (!op.done && s < 10) {
        efa_core_progress(core);
        fault.complete_taken();
        usleep(1000);
        s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return s;
}

// A receive from a silent peer whose every probe the fault refuses
// (refuse: at the post; 0: at the completion) must still fail at the
// deadline (2 s), well before 5 s.
void expect_fails_despite_probe_fault(ssize_t refuse, const char *what) {
    DeadPeerCore s("udp;ofi_rxd", 2, SOCK_DGRAM);
    ASSERT_NE(s.peer, nullptr);
    ProbeFault fault(s.core, refuse);
    Op recv;
    ASSERT_EQ(efa_ctx_trecv(efa_core_ctx(s.core, 0), g_buf, sizeof(g_buf), nullptr, s.peer->addr[0],
                            5, 0, &recv.op),
              0);
    const double took = wait_with_fault(s.core, fault, recv);
    ASSERT_TRUE(recv.done) << "a receive from a peer whose probes " << what
                           << " still waits after 10 s (" << fault.posts << " probes)";
    EXPECT_EQ(recv.err, -FI_ETIMEDOUT);
    EXPECT_GE(fault.posts, 1);
    EXPECT_LE(took, 5.0);
}

} // namespace

// A probe the provider refuses (not for now: -FI_EIO) is no news of the
// peer: it stays out, so the peer still expires its deadline (dropped, the
// next one asked for, the receive waited for as long as the posts failed).
TEST(CoreDeadline, AReceiveWhoseProbesCannotBePostedStillFailsAtTheDeadline) {
    expect_fails_despite_probe_fault(-FI_EIO, "cannot be posted");
}

// A probe whose send fails at its completion for a reason of this side is
// no news of the peer either (counted as news, a peer whose probes kept
// failing so was never declared lost).
TEST(CoreDeadline, AReceiveWhoseProbesFailAtTheirCompletionStillFailsAtTheDeadline) {
    expect_fails_despite_probe_fault(0, "fail at their completion");
}
