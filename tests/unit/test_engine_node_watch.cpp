// The matching engine's watch on processes of this node (engine_watch.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>

#include <rdma/fi_errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "efa_engine.h"
#include "engine_test_req.hpp"
#include "engine_two_ranks.hpp"

// Processes of this node (engine_watch.cpp): this process's engine (vpid
// 0) and a forked child's (vpid 1) on the rings, the child never calling
// progress, as a rank busy elsewhere.  Killed (SIGKILL), what waits on it
// fails within the sweeps' bound, with the owner told once; alive, gone
// after closing its inbox, or behind a pid its card does not prove, it is
// never judged; what it wrote before it died is received first.
namespace {

using engine_test::on_complete;
using engine_test::Req;
using engine_two_ranks::kCid;
using engine_two_ranks::kCidAlone;

using engine_two_ranks::comm_members;
using engine_two_ranks::source_vpid;

struct NodeCards {
    efa_engine_card_t card[2]{};
    int exited = 0; // peer_exited calls
    uint32_t exited_vpid = 0;
};

int node_card(void *arg, uint32_t vpid, efa_engine_card_t *card) {
    auto *n = static_cast<NodeCards *>(arg);
    if (vpid > 1 || 0 == n->card[vpid].cookie) {
        return -FI_ENOENT;
    }
    *card = n->card[vpid];
    return 0;
}

void node_exited(void *arg, uint32_t vpid) {
    auto *n = static_cast<NodeCards *>(arg);
    n->exited++;
    n->exited_vpid = vpid;
}

efa_engine_t *node_engine(NodeCards *n, uint32_t vpid, const std::string &tag) {
    efa_engine_params_t p{};
    p.inbox_dir = "/tmp";
    p.job_tag = tag.c_str();
    p.my_vpid = p.local_rank = vpid;
    p.nlocal = p.nprocs = 2;
    p.slots = 8;
    p.slot_size = 1024;
    p.single_copy = true;
    p.peer_card = node_card;
    p.peer_card_arg = n;
    p.source_vpid = source_vpid;
    p.comm_members = comm_members;
    p.peer_exited = node_exited;
    int err = 0;
    return efa_engine_create(&p, &err);
}

void on_cancel(efa_engine_req_t *) {}

class EngineNodeWatch : public ::testing::Test {
  protected:
    void SetUp() override {
        tag_ = "unitnode." + std::to_string(getpid()) + "." +
               ::testing::UnitTest::GetInstance()->current_test_info()->name();
        engine_ = node_engine(&cards_, 0, tag_);
        ASSERT_NE(engine_, nullptr);
        efa_engine_my_card(engine_, &cards_.card[0]);
        int up[2], down[2];
        ASSERT_EQ(pipe(up), 0);
        ASSERT_EQ(pipe(down), 0);
        child_ = fork();
        ASSERT_GE(child_, 0);
        if (0 == child_) {
            close(up[0]);
            close(down[1]);
            child(up[1], down[0]);
        }
        close(up[1]);
        close(down[0]);
        from_child_ = up[0];
        to_child_ = down[1];
        ASSERT_EQ(read(from_child_, &cards_.card[1], sizeof(cards_.card[1])),
                  static_cast<ssize_t>(sizeof(cards_.card[1])));
    }
    // The child: its engine, its card to the parent, then what the parent
    // asks: 'm' a message of tag 1, 'n' three of tag 3, 'c' close its
    // engine (its inbox) and exit.
    [[noreturn]] void child(int up, int down) {
        NodeCards mine = cards_; // (the parent's card)
        efa_engine_t *e = node_engine(&mine, 1, tag_);
        efa_engine_card_t card{};
        if (!e || (efa_engine_my_card(e, &card), write(up, &card, sizeof(card)) < 0)) {
            _exit(3);
        }
        for (char c = 0; 1 == read(down, &c, 1);) {
            if ('c' == c) {
                efa_engine_destroy(e);
                _exit(0);
            }
            for (int i = 0; i < ('m' == c ? 1 : 3); ++i) {
                efa_engine_req_t r{};
                const char bytes[8] = {c, static_cast<char>(i)};
                if (1 != efa_engine_send(e, 0, kCid, 1, 'm' == c ? 1 : 3, bytes, 8, false, &r) ||
                    (i == ('m' == c ? 0 : 2) && write(up, &c, 1) < 0)) {
                    _exit(4);
                }
            }
        }
        _exit(0);
    }
    void TearDown() override {
        kill_child();
        close(from_child_);
        close(to_child_);
        if (engine_) {
            efa_engine_destroy(engine_);
        }
        unlink(("/tmp/efa_mtl_ring." + tag_ + ".1").c_str()); // (a killed child's inbox)
    }
    void ask(char c) {
        ASSERT_EQ(write(to_child_, &c, 1), 1);
        (void)!read(from_child_, &c, 1); // done (or gone, for 'c')
    }
    void kill_child() {
        if (child_ > 0) {
            kill(child_, SIGKILL);
            waitpid(child_, nullptr, 0);
            child_ = -1;
        }
    }
    // Progress until r completed or 'limit' seconds passed; the seconds taken.
    double wait(const Req &r, double limit) {
        const auto t0 = std::chrono::steady_clock::now();
        double s = 0;
        for (; 0 == r.completions && s < limit; usleep(200)) {
            efa_engine_progress(engine_);
            s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        return s;
    }
    int recv(Req &r, int32_t src, int32_t tag, uint32_t cid = kCid) {
        r.on.complete = on_complete;
        r.on.buf = buf_;
        r.on.buflen = sizeof(buf_);
        return efa_engine_recv(engine_, cid, src, tag, &r.on);
    }
    // The child's message of tag 1, received (at once, or by progress).
    void receive_first(Req &r) {
        const int rc = recv(r, 1, 1);
        if (0 == rc) {
            wait(r, 2);
        }
        ASSERT_TRUE(1 == rc || 1 == r.completions) << "the peer's message did not arrive";
    }
    void forget(Req &r) {
        if (0 == r.completions) {
            efa_engine_cancel(engine_, &r.on);
        }
    }
    std::string tag_;
    NodeCards cards_;
    efa_engine_t *engine_ = nullptr;
    pid_t child_ = -1;
    int from_child_ = -1, to_child_ = -1;
    char buf_[64] = {};
};

} // namespace

TEST_F(EngineNodeWatch, WaitsOnAPeerThatDiesFail) {
    Req from_child, any, alone, ssend;
    ASSERT_EQ(recv(from_child, 1, 2), 0);
    ASSERT_EQ(recv(any, EFA_ENGINE_ANY, 2), 0);
    ASSERT_EQ(recv(alone, EFA_ENGINE_ANY, 2, kCidAlone), 0);
    ssend.on.complete = on_complete; // (waits for its ACK)
    ASSERT_EQ(efa_engine_send(engine_, 1, kCid, 0, 2, buf_, 8, true, &ssend.on), 0);
    wait(from_child, 2.3); // two sweeps and more
    EXPECT_EQ(from_child.completions + any.completions + ssend.completions, 0)
        << "a wait on a live peer of this node failed";
    kill_child();
    const double took = wait(from_child, 8) + wait(any, 3) + wait(ssend, 1);
    for (Req *r : {&from_child, &any, &ssend}) {
        EXPECT_EQ(r->completions, 1) << "a wait on a dead peer of this node still waited";
        EXPECT_EQ(r->on.err, -FI_EHOSTUNREACH);
    }
    EXPECT_LE(took, 5.0); // a sweep period and a sweep late (1024 calls apart at least)
    EXPECT_EQ(cards_.exited, 1);
    EXPECT_EQ(cards_.exited_vpid, 1u);
    EXPECT_EQ(alone.completions, 0) << "an ANY_SOURCE receive without the dead peer failed";
    Req later;
    later.on.complete = on_complete;
    EXPECT_EQ(efa_engine_send(engine_, 1, kCid, 0, 2, buf_, 8, false, &later.on), -FI_EHOSTUNREACH);
    for (Req *r : {&from_child, &any, &alone, &ssend}) {
        forget(*r);
    }
}

// Its frames are read before it is judged: here a partnered receive holds
// its first message (no frame is read meanwhile) while the sweeps find
// it dead; its later messages still reach their receives.
TEST_F(EngineNodeWatch, MessagesOfAPeerThatDiedAreReceivedFirst) {
    Req held, first, more[2], last;
    char held_buf[64];
    held.on = efa_engine_req_t{};
    held.on.complete = on_complete;
    held.on.partner_cancel = on_cancel;
    held.on.buf = held_buf;
    held.on.buflen = sizeof(held_buf);
    ASSERT_EQ(efa_engine_recv_partnered(engine_, kCid, EFA_ENGINE_ANY, 1, &held.on), 0);
    efa_engine_partner_armed(engine_, &held.on);
    Req hello; // (the peer made, and its exit watched, while it lives)
    hello.on.complete = on_complete;
    ASSERT_EQ(efa_engine_send(engine_, 1, kCid, 0, 9, buf_, 8, false, &hello.on), 1);
    ask('m');
    ask('n');
    kill_child();
    ASSERT_EQ(recv(first, 1, 3), 0);
    wait(first, 2.3);
    EXPECT_EQ(first.completions, 0) << "failed while the dead peer's messages were unread";
    EXPECT_EQ(efa_engine_partner_done(engine_, &held.on, false), 1);
    wait(first, 2);
    EXPECT_EQ(held.completions, 1);
    EXPECT_EQ(first.completions, 1);
    EXPECT_EQ(first.on.err, 0);
    EXPECT_EQ(buf_[0], 'n');
    for (Req &r : more) {
        EXPECT_EQ(recv(r, 1, 3), 1) << "a message of the dead peer was lost";
    }
    ASSERT_EQ(recv(last, 1, 3), 0);
    EXPECT_LE(wait(last, 8), 5.0);
    EXPECT_EQ(last.on.err, -FI_EHOSTUNREACH);
    for (Req *r : {&first, &last}) {
        forget(*r);
    }
}

// A process that closed its inbox was done with the rings: its exit is
// no loss.
TEST_F(EngineNodeWatch, APeerThatClosedItsInboxIsNotLost) {
    Req hello, from_child;
    hello.on.complete = on_complete;
    ASSERT_EQ(efa_engine_send(engine_, 1, kCid, 0, 9, buf_, 8, false, &hello.on), 1); // attached
    ask('c');
    waitpid(child_, nullptr, 0);
    child_ = -1;
    ASSERT_EQ(recv(from_child, 1, 2), 0);
    wait(from_child, 2.3);
    EXPECT_EQ(from_child.completions, 0) << "a peer that closed its inbox was taken for lost";
    EXPECT_EQ(cards_.exited, 0);
    forget(from_child);
}

// A pid its card's cookie does not vouch for (another pid namespace's, or
// a process that is not the peer) is never judged.
TEST_F(EngineNodeWatch, AnUnprovenPidIsNeverJudged) {
    cards_.card[1].cma_cookie ^= 1;
    Req from_child;
    ASSERT_EQ(recv(from_child, 1, 2), 0);
    wait(from_child, 1.2); // made, and its exit not watched
    kill_child();
    wait(from_child, 2.3);
    EXPECT_EQ(from_child.completions, 0) << "a peer whose pid was not proven was judged";
    EXPECT_EQ(cards_.exited, 0);
    forget(from_child);
}

// A peer this process only receives from (a gather's root, a master
// waiting on its workers): never sent to, so never made by a send; the
// sweep makes it once it finds a receive waiting on it and its ring here
// attached, and its death fails the receive.
TEST_F(EngineNodeWatch, APeerThatOnlySentHereIsWatched) {
    Req first, from_child;
    ask('m'); // (its ring here attached: it sent here)
    receive_first(first);
    ASSERT_EQ(recv(from_child, 1, 2), 0);
    wait(from_child, 2.3);
    EXPECT_EQ(from_child.completions, 0) << "a wait on a live peer of this node failed";
    kill_child();
    EXPECT_LE(wait(from_child, 8), 5.0) << "a wait on a dead peer that only sent here waited";
    EXPECT_EQ(from_child.on.err, -FI_EHOSTUNREACH);
    EXPECT_EQ(cards_.exited, 1);
    forget(from_child);
}

// One that sent here, was made by the sweep while a receive waited on it,
// and then ended in order (it let go of its ring here, and closed its
// inbox) is no loss.
TEST_F(EngineNodeWatch, APeerThatOnlySentHereAndEndedIsNotLost) {
    Req first, from_child;
    ask('m');
    receive_first(first);
    ASSERT_EQ(recv(from_child, 1, 2), 0);
    wait(from_child, 2.3); // made, and its exit watched, while it lives
    ask('c');
    waitpid(child_, nullptr, 0);
    child_ = -1;
    wait(from_child, 2.3);
    EXPECT_EQ(from_child.completions, 0) << "a peer that ended in order was taken for lost";
    EXPECT_EQ(cards_.exited, 0);
    forget(from_child);
}
