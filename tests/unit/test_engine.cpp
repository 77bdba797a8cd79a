// The matching engine (efa_engine.h) between two engines of one process,
// as two processes of one node would use it: eager and rendezvous
// messages (single copy and streamed), synchronous sends, unexpected
// messages, truncation, full rings, cancel, probe and matched receive,
// sends to oneself, and bad parameters.  (A process of this node that
// dies: test_engine_node_watch.cpp; peers on other nodes:
// test_engine_watch.cpp.)
// (Partnered receives: test_engine_partner.cpp; frames a corrupted process
// wrote: test_engine_forged_frames.cpp.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "efa_engine.h"
#include "engine_pair.hpp"
#include "engine_test_req.hpp"
#include "engine_two_ranks.hpp"

namespace {

using engine_test::on_complete;
using engine_test::pattern;
using engine_test::Req;

class EngineTest : public engine_test::EnginePair {
  protected:
    void rendezvous(size_t len, bool recv_first, uint64_t single_copy, uint64_t streamed);
};

TEST_F(EngineTest, EagerToAPostedReceive) {
    open();
    std::vector<uint8_t> got(200, 0);
    Req r, s;
    EXPECT_EQ(0, post(b, r, got.data(), got.size(), 3, 0, 11));
    const auto data = pattern(100, 1);
    EXPECT_EQ(1, send(a, s, 1, data, 11)); // complete at once: no callback
    ASSERT_TRUE(until([&] { return r.completions == 1; }));
    EXPECT_EQ(0, s.completions);
    EXPECT_EQ(0, r.on.err);
    EXPECT_EQ(100u, r.on.msg_len);
    EXPECT_EQ(0, r.on.msg_src);
    EXPECT_EQ(11, r.on.msg_tag);
    EXPECT_EQ(0, memcmp(got.data(), data.data(), data.size()));
}

// The sender writes an eager frame's bytes past the slot's first cache
// line before the first line: every size around that boundary, standard
// (16-byte header) and synchronous (32-byte header), arrives intact.
TEST_F(EngineTest, EagerSizesAroundTheFirstCacheLine) {
    open();
    for (bool sync : {false, true}) {
        for (size_t len = 0; len <= 140; ++len) {
            const auto data = pattern(len, static_cast<uint8_t>(len));
            std::vector<uint8_t> got(len + 8, 0xee);
            Req r, s;
            ASSERT_EQ(0, post(b, r, got.data(), len, 3, 0, 12));
            ASSERT_GE(send(a, s, 1, data, 12, sync), 0);
            ASSERT_TRUE(until([&] { return r.completions == 1; })) << len;
            ASSERT_EQ(len, r.on.msg_len);
            // (memcmp of no bytes still wants pointers: data() of an empty vector is null)
            ASSERT_EQ(0, len ? memcmp(got.data(), data.data(), len) : 0)
                << "size " << len << " sync " << sync;
            ASSERT_EQ(0xee, got[len]) << "written past the buffer at size " << len;
            ASSERT_TRUE(until([&] { return !sync || s.completions == 1; }));
        }
    }
}

TEST_F(EngineTest, UnexpectedEagerCompletesInsideTheReceive) {
    open();
    Req s, r;
    const auto data = pattern(64, 3);
    EXPECT_EQ(1, send(a, s, 1, data, 5));
    efa_engine_progress(b); // arrives with no receive posted
    std::vector<uint8_t> got(64, 0);
    EXPECT_EQ(1, post(b, r, got.data(), got.size(), 3, EFA_ENGINE_ANY, EFA_ENGINE_ANY));
    EXPECT_EQ(0, r.completions); // inline: no callback
    EXPECT_EQ(0, memcmp(got.data(), data.data(), data.size()));
    efa_engine_stats_t st;
    efa_engine_get_stats(b, &st);
    EXPECT_EQ(1u, st.unexpected);
}

// A communicator freed with a message sent on it never received: its id
// may name the next communicator, whose receives must not take that
// message (matching knows only the id).  One of another communicator stays.
TEST_F(EngineTest, AFreedCommunicatorsUnreceivedMessagesNeverMatchItsSuccessor) {
    open();
    Req s1, s2, s3;
    EXPECT_EQ(1, send(a, s1, 1, pattern(16, 1), 5, false, 3));
    EXPECT_EQ(1, send(a, s2, 1, pattern(16, 2), 5, false, 4));
    efa_engine_progress(b); // both unexpected
    efa_engine_comm_freed(b, 3);
    efa_engine_stats_t st;
    efa_engine_get_stats(b, &st);
    EXPECT_EQ(1u, st.unreceived);
    std::vector<uint8_t> got(16, 0);
    Req r;
    EXPECT_EQ(0, post(b, r, got.data(), got.size(), 3, EFA_ENGINE_ANY, EFA_ENGINE_ANY))
        << "the successor's receive took the freed communicator's message";
    const auto fresh = pattern(16, 3);
    EXPECT_EQ(1, send(a, s3, 1, fresh, 6, false, 3));
    ASSERT_TRUE(until([&] { return r.completions == 1; }));
    EXPECT_EQ(6, r.on.msg_tag);
    EXPECT_EQ(0, memcmp(got.data(), fresh.data(), fresh.size()));
    Req other;
    std::vector<uint8_t> kept(16, 0);
    EXPECT_EQ(1, post(b, other, kept.data(), kept.size(), 4, 0, 5))
        << "another communicator's message went with the freed one's";
    const auto second = pattern(16, 2);
    EXPECT_EQ(0, memcmp(kept.data(), second.data(), second.size()));
}

TEST_F(EngineTest, SynchronousSendWaitsForTheMatch) {
    open();
    Req s, r;
    const auto data = pattern(10, 5);
    EXPECT_EQ(0, send(a, s, 1, data, 1, true));
    for (int i = 0; i < 100; ++i) {
        efa_engine_progress(a);
        efa_engine_progress(b);
    }
    EXPECT_EQ(0, s.completions) << "completed before any receive was posted";
    std::vector<uint8_t> got(10);
    EXPECT_EQ(1, post(b, r, got.data(), got.size(), 3, 0, 1));
    ASSERT_TRUE(until([&] { return s.completions == 1; }));
    EXPECT_EQ(0, s.on.err);
}

// A message above a slot, received intact, by the path the counters name.
void EngineTest::rendezvous(size_t len, bool recv_first, uint64_t single_copy, uint64_t streamed) {
    const auto data = pattern(len, 9);
    Req s, r;
    std::vector<uint8_t> got(data.size(), 0);
    if (!recv_first) {
        EXPECT_EQ(0, send(a, s, 1, data, 2));
    }
    EXPECT_EQ(0, post(b, r, got.data(), got.size(), 3, 0, 2));
    if (recv_first) {
        EXPECT_EQ(0, send(a, s, 1, data, 2));
    }
    ASSERT_TRUE(until([&] { return r.completions == 1 && s.completions == 1; }));
    EXPECT_EQ(0, r.on.err);
    EXPECT_EQ(data.size(), r.on.msg_len);
    EXPECT_EQ(data, got);
    efa_engine_stats_t st;
    efa_engine_get_stats(b, &st);
    EXPECT_EQ(single_copy, st.single_copy);
    EXPECT_EQ(streamed, st.streamed);
}

TEST_F(EngineTest, RendezvousBySingleCopy) {
    open();
    rendezvous(300000, false, 1, 0); // the RTS waits unexpected
}

TEST_F(EngineTest, RendezvousStreamedWithoutSingleCopy) {
    open(4, /*single_copy_b=*/false);
    rendezvous(50000, true, 0, 1); // ~50 frames through a 4-slot ring
}

// b's slots are a quarter of a's (each process's own parameter): what a
// sends b is cut to b's slots, a message eager by a's slots goes by
// rendezvous, and b's own to a stays within its slots.
TEST_F(EngineTest, APeerWithSmallerSlotsGetsFramesThatFitThem) {
    slot_size = 4096;
    slot_size_b = 1024;
    open(8, /*single_copy_b=*/false);
    for (size_t len : {size_t(2000), size_t(20000)}) {
        for (bool to_b : {true, false}) {
            const auto data = pattern(len, static_cast<uint8_t>(len));
            std::vector<uint8_t> got(len, 0);
            Req r, s;
            ASSERT_EQ(0, post(to_b ? b : a, r, got.data(), len, 3, to_b ? 0 : 1, 5));
            ASSERT_GE(send(to_b ? a : b, s, to_b ? 1 : 0, data, 5, false, 3, to_b ? 0 : 1), 0);
            ASSERT_TRUE(until([&] { return r.completions == 1; }))
                << len << " bytes to " << (to_b ? "b" : "a") << " never arrived";
            EXPECT_EQ(0, r.on.err);
            EXPECT_EQ(0, memcmp(got.data(), data.data(), len));
            ASSERT_TRUE(until([&] { return len < 1000 || s.completions == 1; }));
        }
    }
}

TEST_F(EngineTest, TruncationKeepsToTheBuffer) {
    open(8, false);
    for (size_t len : {size_t(500), size_t(20000)}) { // eager, then streamed rendezvous
        const auto data = pattern(len, 17);
        std::vector<uint8_t> got(len / 2 + 16, 0xee);
        Req s, r;
        EXPECT_EQ(0, post(b, r, got.data(), len / 2, 3, 0, 4));
        EXPECT_GE(send(a, s, 1, data, 4), 0);
        ASSERT_TRUE(until([&] { return r.completions == 1; })) << len;
        EXPECT_EQ(-FI_ETRUNC, r.on.err);
        EXPECT_EQ(len, r.on.msg_len);
        EXPECT_EQ(0, memcmp(got.data(), data.data(), len / 2));
        for (size_t i = len / 2; i < got.size(); ++i) {
            ASSERT_EQ(0xee, got[i]) << "written past the buffer at " << i;
        }
        ASSERT_TRUE(until([&] { return s.completions == (len > 900 ? 1 : 0); }));
    }
}

TEST_F(EngineTest, FullRingsQueueInOrder) {
    open(2); // two slots: almost every send queues
    const int n = 300;
    std::vector<Req> sends(n), recvs(n);
    std::vector<std::vector<uint8_t>> data(n), got(n);
    int inline_done = 0;
    for (int i = 0; i < n; ++i) {
        data[i] = pattern(static_cast<size_t>(1 + i * 3), static_cast<uint8_t>(i));
        int rc = send(a, sends[i], 1, data[i], 7);
        ASSERT_GE(rc, 0);
        inline_done += rc;
    }
    efa_engine_stats_t st;
    efa_engine_get_stats(a, &st);
    EXPECT_GT(st.queued, 0u);
    for (int i = 0; i < n; ++i) {
        got[i].assign(data[i].size(), 0);
        ASSERT_GE(post(b, recvs[i], got[i].data(), got[i].size(), 3, 0, 7), 0);
    }
    ASSERT_TRUE(until([&] {
        int done = 0;
        for (int i = 0; i < n; ++i) {
            done += sends[i].completions;
        }
        return done + inline_done == n;
    }));
    ASSERT_TRUE(until([&] {
        for (int i = 0; i < n; ++i) {
            if (got[i] != data[i]) {
                return false;
            }
        }
        return true;
    })) << "messages overtook each other or were lost";
}

TEST_F(EngineTest, CancelOnlyUnmatchedReceives) {
    open();
    Req r1, r2, s;
    std::vector<uint8_t> buf(16);
    EXPECT_EQ(0, post(b, r1, buf.data(), buf.size(), 3, 0, 1));
    EXPECT_TRUE(efa_engine_cancel(b, &r1.on));
    EXPECT_EQ(1, r1.completions);
    EXPECT_EQ(-FI_ECANCELED, r1.on.err);
    EXPECT_EQ(0, post(b, r2, buf.data(), buf.size(), 3, 0, 1));
    EXPECT_EQ(1, send(a, s, 1, pattern(16, 0), 1));
    ASSERT_TRUE(until([&] { return r2.completions == 1; }));
    EXPECT_FALSE(efa_engine_cancel(b, &r2.on));
    EXPECT_EQ(0, r2.on.err);
}

TEST_F(EngineTest, ProbeClaimAndMatchedReceive) {
    open();
    Req s1, s2, r;
    const auto big = pattern(5000, 21);
    EXPECT_EQ(0, send(a, s1, 1, big, 9, false, 3, 4));
    EXPECT_EQ(1, send(a, s2, 1, pattern(8, 1), 9, false, 3, 4));
    efa_engine_probe_t found{};
    ASSERT_TRUE(until([&] { return 1 == efa_engine_probe(b, 3, 4, 9, false, &found); }));
    EXPECT_EQ(big.size(), found.len);
    EXPECT_EQ(4, found.src);
    ASSERT_EQ(1, efa_engine_probe(b, 3, EFA_ENGINE_ANY, EFA_ENGINE_ANY, true, &found));
    ASSERT_NE(nullptr, found.msg);
    // Claimed: the next probe sees the second message.
    efa_engine_probe_t next{};
    ASSERT_EQ(1, efa_engine_probe(b, 3, 4, 9, false, &next));
    EXPECT_EQ(8u, next.len);
    std::vector<uint8_t> got(big.size());
    r.on.complete = on_complete;
    r.on.buf = got.data();
    r.on.buflen = got.size();
    int rc = efa_engine_mrecv(b, found.msg, &r.on);
    ASSERT_GE(rc, 0);
    ASSERT_TRUE(until([&] { return (rc == 1 || r.completions == 1) && s1.completions == 1; }));
    EXPECT_EQ(big, got);
    Req r2;
    std::vector<uint8_t> small(8);
    EXPECT_EQ(1, post(b, r2, small.data(), small.size(), 3, 4, 9));
}

TEST_F(EngineTest, SendToOneself) {
    open();
    Req s, r;
    const auto data = pattern(3000, 2);
    std::vector<uint8_t> got(data.size());
    EXPECT_EQ(0, post(a, r, got.data(), got.size(), 3, 0, 6));
    EXPECT_GE(send(a, s, 0, data, 6), 0);
    ASSERT_TRUE(until([&] { return r.completions == 1; }));
    EXPECT_EQ(data, got);
}

int no_card(void *, uint32_t, efa_engine_card_t *) {
    return -FI_ENOENT;
}

int card_of_rank_1(void *, uint32_t, efa_engine_card_t *card) {
    card->cookie = 42;
    card->local_rank = 1;
    return 0;
}

TEST(EngineParams, BadParametersAreRefused) {
    efa_engine_params_t p{};
    p.inbox_dir = "/tmp";
    p.job_tag = "unit.bad";
    p.nlocal = 2;
    p.nprocs = 2;
    p.peer_card = no_card;
    p.local_rank = 2; // outside the node's ranks
    p.slots = 8;
    p.slot_size = 1024;
    int err = 0;
    EXPECT_EQ(nullptr, efa_engine_create(&p, &err));
    EXPECT_EQ(-FI_EINVAL, err);
    p.local_rank = 0;
    p.nprocs = 1; // fewer processes in the job than on the node
    EXPECT_EQ(nullptr, efa_engine_create(&p, &err));
    EXPECT_EQ(-FI_EINVAL, err);
    p.nprocs = 2;
    p.peer_card = nullptr; // no way to check a peer's inbox
    EXPECT_EQ(nullptr, efa_engine_create(&p, &err));
    EXPECT_EQ(-FI_EINVAL, err);
    p.peer_card = no_card;
    p.slots = 6; // not a power of two
    EXPECT_EQ(nullptr, efa_engine_create(&p, &err));
    EXPECT_NE(0, err);
    p.slots = 8;
    p.inbox_dir = "/nonexistent/dir";
    EXPECT_EQ(nullptr, efa_engine_create(&p, &err));
    EXPECT_EQ(-ENOENT, err);
}

TEST(EngineParams, AttachFailsWithoutThePeersInbox) {
    efa_engine_params_t p{};
    p.inbox_dir = "/tmp";
    const std::string tag = "unit.noattach." + std::to_string(getpid());
    p.job_tag = tag.c_str();
    p.nlocal = 2;
    p.nprocs = 3;
    p.slots = 8;
    p.slot_size = 1024;
    p.peer_card = card_of_rank_1;
    int err = 0;
    efa_engine_t *e = efa_engine_create(&p, &err);
    ASSERT_NE(nullptr, e);
    efa_engine_req_t r{};
    char c = 0;
    EXPECT_EQ(-ENOENT, efa_engine_send(e, 1, 0, 0, 0, &c, 1, false, &r));
    EXPECT_EQ(-FI_EINVAL, efa_engine_send(e, 3, 0, 0, 0, &c, 1, false, &r)); // not of the job
    efa_engine_destroy(e);
    // A peer that published no card is not written to, whatever its file.
    p.peer_card = no_card;
    e = efa_engine_create(&p, &err);
    ASSERT_NE(nullptr, e);
    EXPECT_EQ(-FI_ENOENT, efa_engine_send(e, 1, 0, 0, 0, &c, 1, false, &r));
    efa_engine_destroy(e);
}

} // namespace
