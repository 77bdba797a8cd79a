// The on-node engine (efa_onnode.h) between two engines of one process,
// as two processes of one node would use it: eager and rendezvous
// messages (single copy and streamed), synchronous sends, unexpected
// messages, truncation, full rings, cancel, probe and matched receive,
// sends to oneself, and bad parameters.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>
#include <unistd.h>

#include "efa_onnode.h"
#include "onnode_test_req.hpp"
#include "efa_shm_ring.h"
#include "onnode_engine.hpp"

namespace {

using onnode_test::on_complete;
using onnode_test::pattern;
using onnode_test::Req;

class OnnodeEngine : public ::testing::Test {
  protected:
    efa_onnode_t *a = nullptr; // vpid 0, local rank 0
    efa_onnode_t *b = nullptr; // vpid 1, local rank 1
    std::string tag;
    uint32_t nlocal = 2; // a third local rank has no engine: tests write its ring

    // The modex's part: the card of engine a or b.
    static int card_of(void *arg, uint32_t vpid, efa_onnode_card_t *card) {
        auto *t = static_cast<OnnodeEngine *>(arg);
        efa_onnode_t *e = 0 == vpid ? t->a : 1 == vpid ? t->b : nullptr;
        if (nullptr == e) {
            return -FI_ENOENT;
        }
        efa_onnode_my_card(e, card);
        return 0;
    }
    efa_onnode_t *make(uint32_t vpid, uint32_t slots, bool single_copy, int *err) {
        efa_onnode_params_t p{};
        p.inbox_dir = "/tmp";
        p.job_tag = tag.c_str();
        p.my_vpid = vpid;
        p.local_rank = vpid;
        p.nlocal = nlocal;
        p.nprocs = nlocal;
        p.slots = slots;
        p.slot_size = 1024;
        p.single_copy = single_copy;
        p.thread_safe = false;
        p.peer_card = card_of;
        p.peer_card_arg = this;
        return efa_onnode_create(&p, err);
    }
    void open(uint32_t slots = 8, bool single_copy_b = true) {
        tag = "unit." + std::to_string(getpid()) + "." +
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
        int err = 0;
        a = make(0, slots, true, &err);
        ASSERT_NE(nullptr, a) << err;
        b = make(1, slots, single_copy_b, &err);
        ASSERT_NE(nullptr, b) << err;
    }
    void TearDown() override {
        if (a) {
            efa_onnode_destroy(a);
        }
        if (b) {
            efa_onnode_destroy(b);
        }
    }
    // Progress both sides until done() or a bound.
    template <class F> bool until(F &&done) {
        for (int i = 0; i < 100000; ++i) {
            if (done()) {
                return true;
            }
            efa_onnode_progress(a);
            efa_onnode_progress(b);
        }
        return done();
    }
    static int post(efa_onnode_t *e, Req &r, void *buf, size_t len, uint32_t cid, int32_t src,
                    int32_t tag) {
        r.on.complete = on_complete;
        r.on.buf = buf;
        r.on.buflen = len;
        return efa_onnode_recv(e, cid, src, tag, &r.on);
    }
    void rendezvous(size_t len, bool recv_first, uint64_t single_copy, uint64_t streamed);
    static int send(efa_onnode_t *e, Req &r, uint32_t to, const std::vector<uint8_t> &data,
                    int32_t tag, bool sync = false, uint32_t cid = 3, int32_t src = 0) {
        r.on.complete = on_complete;
        return efa_onnode_send(e, to, cid, src, tag, data.data(), data.size(), sync, &r.on);
    }
};

TEST_F(OnnodeEngine, EagerToAPostedReceive) {
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
TEST_F(OnnodeEngine, EagerSizesAroundTheFirstCacheLine) {
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

TEST_F(OnnodeEngine, UnexpectedEagerCompletesInsideTheReceive) {
    open();
    Req s, r;
    const auto data = pattern(64, 3);
    EXPECT_EQ(1, send(a, s, 1, data, 5));
    efa_onnode_progress(b); // arrives with no receive posted
    std::vector<uint8_t> got(64, 0);
    EXPECT_EQ(1, post(b, r, got.data(), got.size(), 3, EFA_ONNODE_ANY, EFA_ONNODE_ANY));
    EXPECT_EQ(0, r.completions); // inline: no callback
    EXPECT_EQ(0, memcmp(got.data(), data.data(), data.size()));
    efa_onnode_stats_t st;
    efa_onnode_get_stats(b, &st);
    EXPECT_EQ(1u, st.unexpected);
}

TEST_F(OnnodeEngine, SynchronousSendWaitsForTheMatch) {
    open();
    Req s, r;
    const auto data = pattern(10, 5);
    EXPECT_EQ(0, send(a, s, 1, data, 1, true));
    for (int i = 0; i < 100; ++i) {
        efa_onnode_progress(a);
        efa_onnode_progress(b);
    }
    EXPECT_EQ(0, s.completions) << "completed before any receive was posted";
    std::vector<uint8_t> got(10);
    EXPECT_EQ(1, post(b, r, got.data(), got.size(), 3, 0, 1));
    ASSERT_TRUE(until([&] { return s.completions == 1; }));
    EXPECT_EQ(0, s.on.err);
}

// A message above a slot, received intact, by the path the counters name.
void OnnodeEngine::rendezvous(size_t len, bool recv_first, uint64_t single_copy,
                              uint64_t streamed) {
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
    efa_onnode_stats_t st;
    efa_onnode_get_stats(b, &st);
    EXPECT_EQ(single_copy, st.single_copy);
    EXPECT_EQ(streamed, st.streamed);
}

TEST_F(OnnodeEngine, RendezvousBySingleCopy) {
    open();
    rendezvous(300000, false, 1, 0); // the RTS waits unexpected
}

TEST_F(OnnodeEngine, RendezvousStreamedWithoutSingleCopy) {
    open(4, /*single_copy_b=*/false);
    rendezvous(50000, true, 0, 1); // ~50 frames through a 4-slot ring
}

TEST_F(OnnodeEngine, TruncationKeepsToTheBuffer) {
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

TEST_F(OnnodeEngine, FullRingsQueueInOrder) {
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
    efa_onnode_stats_t st;
    efa_onnode_get_stats(a, &st);
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

TEST_F(OnnodeEngine, CancelOnlyUnmatchedReceives) {
    open();
    Req r1, r2, s;
    std::vector<uint8_t> buf(16);
    EXPECT_EQ(0, post(b, r1, buf.data(), buf.size(), 3, 0, 1));
    EXPECT_TRUE(efa_onnode_cancel(b, &r1.on));
    EXPECT_EQ(1, r1.completions);
    EXPECT_EQ(-FI_ECANCELED, r1.on.err);
    EXPECT_EQ(0, post(b, r2, buf.data(), buf.size(), 3, 0, 1));
    EXPECT_EQ(1, send(a, s, 1, pattern(16, 0), 1));
    ASSERT_TRUE(until([&] { return r2.completions == 1; }));
    EXPECT_FALSE(efa_onnode_cancel(b, &r2.on));
    EXPECT_EQ(0, r2.on.err);
}

TEST_F(OnnodeEngine, ProbeClaimAndMatchedReceive) {
    open();
    Req s1, s2, r;
    const auto big = pattern(5000, 21);
    EXPECT_EQ(0, send(a, s1, 1, big, 9, false, 3, 4));
    EXPECT_EQ(1, send(a, s2, 1, pattern(8, 1), 9, false, 3, 4));
    efa_onnode_probe_t found{};
    ASSERT_TRUE(until([&] { return 1 == efa_onnode_probe(b, 3, 4, 9, false, &found); }));
    EXPECT_EQ(big.size(), found.len);
    EXPECT_EQ(4, found.src);
    ASSERT_EQ(1, efa_onnode_probe(b, 3, EFA_ONNODE_ANY, EFA_ONNODE_ANY, true, &found));
    ASSERT_NE(nullptr, found.msg);
    // Claimed: the next probe sees the second message.
    efa_onnode_probe_t next{};
    ASSERT_EQ(1, efa_onnode_probe(b, 3, 4, 9, false, &next));
    EXPECT_EQ(8u, next.len);
    std::vector<uint8_t> got(big.size());
    r.on.complete = on_complete;
    r.on.buf = got.data();
    r.on.buflen = got.size();
    int rc = efa_onnode_mrecv(b, found.msg, &r.on);
    ASSERT_GE(rc, 0);
    ASSERT_TRUE(until([&] { return (rc == 1 || r.completions == 1) && s1.completions == 1; }));
    EXPECT_EQ(big, got);
    Req r2;
    std::vector<uint8_t> small(8);
    EXPECT_EQ(1, post(b, r2, small.data(), small.size(), 3, 4, 9));
}

TEST_F(OnnodeEngine, SendToOneself) {
    open();
    Req s, r;
    const auto data = pattern(3000, 2);
    std::vector<uint8_t> got(data.size());
    EXPECT_EQ(0, post(a, r, got.data(), got.size(), 3, 0, 6));
    EXPECT_GE(send(a, s, 0, data, 6), 0);
    ASSERT_TRUE(until([&] { return r.completions == 1; }));
    EXPECT_EQ(data, got);
}

int no_card(void *, uint32_t, efa_onnode_card_t *) {
    return -FI_ENOENT;
}

int card_of_rank_1(void *, uint32_t, efa_onnode_card_t *card) {
    card->cookie = 42;
    card->local_rank = 1;
    return 0;
}

TEST(OnnodeEngineParams, BadParametersAreRefused) {
    efa_onnode_params_t p{};
    p.inbox_dir = "/tmp";
    p.job_tag = "unit.bad";
    p.nlocal = 2;
    p.nprocs = 2;
    p.peer_card = no_card;
    p.local_rank = 2; // outside the node's ranks
    p.slots = 8;
    p.slot_size = 1024;
    int err = 0;
    EXPECT_EQ(nullptr, efa_onnode_create(&p, &err));
    EXPECT_EQ(-FI_EINVAL, err);
    p.local_rank = 0;
    p.nprocs = 1; // fewer processes in the job than on the node
    EXPECT_EQ(nullptr, efa_onnode_create(&p, &err));
    EXPECT_EQ(-FI_EINVAL, err);
    p.nprocs = 2;
    p.peer_card = nullptr; // no way to check a peer's inbox
    EXPECT_EQ(nullptr, efa_onnode_create(&p, &err));
    EXPECT_EQ(-FI_EINVAL, err);
    p.peer_card = no_card;
    p.slots = 6; // not a power of two
    EXPECT_EQ(nullptr, efa_onnode_create(&p, &err));
    EXPECT_NE(0, err);
    p.slots = 8;
    p.inbox_dir = "/nonexistent/dir";
    EXPECT_EQ(nullptr, efa_onnode_create(&p, &err));
    EXPECT_EQ(-ENOENT, err);
}

TEST(OnnodeEngineParams, AttachFailsWithoutThePeersInbox) {
    efa_onnode_params_t p{};
    p.inbox_dir = "/tmp";
    const std::string tag = "unit.noattach." + std::to_string(getpid());
    p.job_tag = tag.c_str();
    p.nlocal = 2;
    p.nprocs = 3;
    p.slots = 8;
    p.slot_size = 1024;
    p.peer_card = card_of_rank_1;
    int err = 0;
    efa_onnode_t *e = efa_onnode_create(&p, &err);
    ASSERT_NE(nullptr, e);
    efa_onnode_req_t r{};
    char c = 0;
    EXPECT_EQ(-ENOENT, efa_onnode_send(e, 1, 0, 0, 0, &c, 1, false, &r));
    EXPECT_EQ(-FI_EINVAL, efa_onnode_send(e, 3, 0, 0, 0, &c, 1, false, &r)); // not of the job
    efa_onnode_destroy(e);
    // A peer that published no card is not written to, whatever its file.
    p.peer_card = no_card;
    e = efa_onnode_create(&p, &err);
    ASSERT_NE(nullptr, e);
    EXPECT_EQ(-FI_ENOENT, efa_onnode_send(e, 1, 0, 0, 0, &c, 1, false, &r));
    efa_onnode_destroy(e);
}

} // namespace

// ---- partnered receives (MPI_ANY_SOURCE posted to the provider too) ----

namespace {

struct PartnerReq {
    Req r;
    int cancels = 0; // partner_cancel calls
};

void on_partner_cancel(efa_onnode_req_t *on) {
    auto *r = reinterpret_cast<Req *>(reinterpret_cast<char *>(on) - offsetof(Req, on));
    reinterpret_cast<PartnerReq *>(r)->cancels++;
}

} // namespace

class OnnodePartner : public OnnodeEngine {
  protected:
    int post_partnered(PartnerReq &p, void *buf, size_t len, int32_t tag) {
        p.r.on.complete = on_complete;
        p.r.on.partner_cancel = on_partner_cancel;
        p.r.on.buf = buf;
        p.r.on.buflen = len;
        const int rc = efa_onnode_recv_partnered(b, 3, EFA_ONNODE_ANY, tag, &p.r.on);
        if (0 == rc) {
            efa_onnode_partner_armed(b, &p.r.on); // the other half is "posted"
        }
        return rc;
    }
    // Two messages of one sender to b, then b polls: a partnered receive
    // holds the first, so the second must stay unread.
    void send_two_and_poll(const std::vector<uint8_t> &first, const std::vector<uint8_t> &second) {
        Req s1, s2;
        EXPECT_EQ(1, send(a, s1, 1, first, 8));
        EXPECT_EQ(1, send(a, s2, 1, second, 8));
        for (int i = 0; i < 10; ++i) {
            efa_onnode_progress(b);
        }
    }
    uint64_t received(efa_onnode_t *e) {
        efa_onnode_stats_t st;
        efa_onnode_get_stats(e, &st);
        return st.frames_received;
    }
};

TEST_F(OnnodePartner, AWaitingMessageIsTakenWithoutThePartner) {
    open();
    Req s;
    const auto data = pattern(20, 4);
    EXPECT_EQ(1, send(a, s, 1, data, 8));
    efa_onnode_progress(b);
    PartnerReq p;
    std::vector<uint8_t> got(20);
    EXPECT_EQ(1, post_partnered(p, got.data(), got.size(), 8)); // nothing to post elsewhere
    EXPECT_EQ(0, p.cancels);
    EXPECT_EQ(data, got);
}

TEST_F(OnnodePartner, TheOtherHalfMatchedFirst) {
    open();
    PartnerReq p;
    std::vector<uint8_t> got(20), got2(20);
    EXPECT_EQ(0, post_partnered(p, got.data(), got.size(), 8));
    EXPECT_EQ(0, efa_onnode_partner_done(b, &p.r.on, true)); // the provider took one
    Req s, r2;
    EXPECT_EQ(1, send(a, s, 1, pattern(20, 1), 8));
    for (int i = 0; i < 10; ++i) {
        efa_onnode_progress(b);
    }
    EXPECT_EQ(0, p.r.completions); // forgotten by the engine
    EXPECT_EQ(0, p.cancels);
    EXPECT_EQ(1, post(b, r2, got2.data(), got2.size(), 3, 0, 8)); // it waited unexpected
}

TEST_F(OnnodePartner, HeldUntilTheCancelThenDelivered) {
    open();
    PartnerReq p;
    std::vector<uint8_t> got(20);
    EXPECT_EQ(0, post_partnered(p, got.data(), got.size(), 8));
    const auto first = pattern(20, 1), second = pattern(20, 2);
    send_two_and_poll(first, second);
    EXPECT_EQ(1, p.cancels);
    EXPECT_EQ(0, p.r.completions);
    EXPECT_EQ(1u, received(b)) << "a frame was read while a message was held";
    EXPECT_EQ(1, efa_onnode_partner_done(b, &p.r.on, false)); // cancelled: the engine's now
    EXPECT_EQ(1, p.r.completions);
    EXPECT_EQ(first, got);
    Req r2;
    std::vector<uint8_t> got2(20);
    ASSERT_TRUE(until([&] { return received(b) == 2; }));
    EXPECT_EQ(1, post(b, r2, got2.data(), got2.size(), 3, 0, 8));
    EXPECT_EQ(second, got2);
}

TEST_F(OnnodePartner, HeldThenHandedToTheNextReceiveInOrder) {
    open();
    PartnerReq p;
    Req r2, r3;
    std::vector<uint8_t> got(20), got2(20), got3(20);
    EXPECT_EQ(0, post_partnered(p, got.data(), got.size(), 8));
    EXPECT_EQ(0, post(b, r2, got2.data(), got2.size(), 3, 0, 8));
    const auto first = pattern(20, 1), second = pattern(20, 2);
    send_two_and_poll(first, second);
    EXPECT_EQ(1, p.cancels);
    EXPECT_EQ(0, r2.completions); // the second message is not read yet
    // The provider took a message for p first: the held one goes to r2.
    EXPECT_EQ(0, efa_onnode_partner_done(b, &p.r.on, true));
    EXPECT_EQ(1, r2.completions);
    EXPECT_EQ(first, got2);
    EXPECT_EQ(0, p.r.completions);
    ASSERT_TRUE(until([&] { return received(b) == 2; }));
    EXPECT_EQ(1, post(b, r3, got3.data(), got3.size(), 3, 0, 8));
    EXPECT_EQ(second, got3);
}

// With threads a message can match the engine's half before the other half
// is posted: it is held, and the cancel is asked for only once armed.
TEST_F(OnnodePartner, NoCancelBeforeTheOtherHalfIsPosted) {
    open();
    PartnerReq p;
    std::vector<uint8_t> got(20);
    p.r.on.complete = on_complete;
    p.r.on.partner_cancel = on_partner_cancel;
    p.r.on.buf = got.data();
    p.r.on.buflen = got.size();
    EXPECT_EQ(0, efa_onnode_recv_partnered(b, 3, EFA_ONNODE_ANY, 8, &p.r.on)); // not armed yet
    Req s;
    const auto data = pattern(20, 3);
    EXPECT_EQ(1, send(a, s, 1, data, 8));
    for (int i = 0; i < 10; ++i) {
        efa_onnode_progress(b);
    }
    EXPECT_EQ(1u, received(b)); // matched and held ...
    EXPECT_EQ(0, p.cancels);    // ... but nothing to cancel yet
    efa_onnode_partner_armed(b, &p.r.on);
    EXPECT_EQ(1, p.cancels);
    EXPECT_EQ(1, efa_onnode_partner_done(b, &p.r.on, false));
    EXPECT_EQ(1, p.r.completions);
    EXPECT_EQ(data, got);
}

TEST_F(OnnodePartner, HeldRendezvousIsReadAfterTheCancel) {
    open();
    PartnerReq p;
    const auto big = pattern(100000, 7);
    std::vector<uint8_t> got(big.size());
    EXPECT_EQ(0, post_partnered(p, got.data(), got.size(), 8));
    Req s;
    EXPECT_EQ(0, send(a, s, 1, big, 8));
    ASSERT_TRUE(until([&] { return p.cancels == 1; }));
    EXPECT_EQ(1, efa_onnode_partner_done(b, &p.r.on, false));
    ASSERT_TRUE(until([&] { return p.r.completions == 1 && s.completions == 1; }));
    EXPECT_EQ(big, got);
}

// ---- frames another process corrupted --------------------------------

namespace {

using efa::onnode::FrameHdr;

// A third local rank (no engine) that writes raw frames into its ring of
// an engine's inbox, as a corrupted or hostile process of the node would.
class OnnodeCorrupt : public OnnodeEngine {
  protected:
    efa_shm_outbox_t *forger = nullptr;

    // The forger writes into b's inbox, or a's.
    void open_with_forger(bool into_b) {
        nlocal = 3;
        open();
        efa_onnode_t *victim = into_b ? b : a;
        efa_onnode_card_t card{};
        efa_onnode_my_card(victim, &card);
        int err = 0;
        forger = efa_shm_outbox_attach(efa_onnode_inbox_path(victim), 2, card.cookie, &err);
        ASSERT_NE(nullptr, forger) << err;
    }
    void TearDown() override {
        if (forger) {
            efa_shm_outbox_detach(forger);
        }
        OnnodeEngine::TearDown();
    }
    void forge(uint8_t type, uint32_t sender, uint64_t id, size_t body = 0, uint8_t flags = 0,
               int32_t tag = 9) {
        std::vector<uint8_t> f(sizeof(FrameHdr) + body, 0x5a);
        FrameHdr h{};
        h.type = type;
        h.flags = flags;
        h.cid = 3;
        h.tag = tag;
        h.sender = sender;
        h.id = id;
        memcpy(f.data(), &h, sizeof(h));
        ASSERT_EQ(0, efa_shm_outbox_send(forger, f.data(), f.size()));
    }
    static uint64_t dropped(efa_onnode_t *e) {
        efa_onnode_stats_t st{};
        efa_onnode_get_stats(e, &st);
        return st.dropped;
    }
};

// Answers naming requests that do not exist, senders outside the job or
// not writing their own ring, unknown types, short frames: each dropped
// and counted, nothing followed (an id used to be dereferenced as a
// pointer, a sender id used to size a table), and the engine goes on.
TEST_F(OnnodeCorrupt, BadFramesAreDroppedAndTheEngineGoesOn) {
    open_with_forger(true);
    std::vector<uint8_t> got(64, 0);
    Req r;
    ASSERT_EQ(0, post(b, r, got.data(), got.size(), 3, EFA_ONNODE_ANY, 9));
    forge(efa::onnode::kAck, 2, 0xdeadbeef00000010ull);                     // no such request
    forge(efa::onnode::kFin, 0, 0);                                         // id 0 and not ring 0
    forge(efa::onnode::kCts, 2, 0x10, sizeof(efa::onnode::CtsBody));        // no such request
    forge(efa::onnode::kData, 2, 0x7fff0001ull, 64);                        // no such request
    forge(efa::onnode::kRts, 0x7fffffffu, 1, sizeof(efa::onnode::RtsBody)); // not of the job
    forge(efa::onnode::kEager, 0, 1, 8, 1); // synchronous, names vpid 0, but in ring 2
    forge(efa::onnode::kRts, 2, 1, 4);      // body shorter than an RTS
    forge(0x77, 2, 1);                      // no such type
    ASSERT_TRUE(until([&] { return dropped(b) == 8; })) << dropped(b); // (8 slots)
    const uint8_t tiny[4] = {1, 2, 3, 4};
    ASSERT_EQ(0, efa_shm_outbox_send(forger, tiny, sizeof(tiny))); // shorter than a header
    ASSERT_TRUE(until([&] { return dropped(b) == 9; })) << dropped(b);
    EXPECT_EQ(0, r.completions) << "a dropped frame matched the receive";
    // The real sender is still heard.
    Req s;
    const auto data = pattern(40, 9);
    EXPECT_GE(send(a, s, 1, data, 9, true), 0);
    ASSERT_TRUE(until([&] { return r.completions == 1 && s.completions == 1; }));
    EXPECT_EQ(0, memcmp(got.data(), data.data(), data.size()));
    EXPECT_EQ(9u, dropped(b));
}

// An answer with the right id but from another ring than the peer's (or
// an id of a request finished since) completes nothing.
TEST_F(OnnodeCorrupt, ForgedAnswerToARealRequestIsDropped) {
    open_with_forger(false);
    Req s;
    const auto data = pattern(40, 4);
    ASSERT_EQ(0, send(a, s, 1, data, 9, true)); // synchronous: waits for b's ACK
    ASSERT_NE(0u, s.on.local_id);
    forge(efa::onnode::kAck, 1, s.on.local_id); // b's name, but ring 2
    ASSERT_TRUE(until([&] { return dropped(a) == 1; }));
    EXPECT_EQ(0, s.completions) << "a forged ACK completed a synchronous send";
    std::vector<uint8_t> got(64, 0);
    Req r;
    ASSERT_GE(post(b, r, got.data(), got.size(), 3, 0, 9), 0); // complete now or later
    ASSERT_TRUE(until([&] { return s.completions == 1; }));
    EXPECT_EQ(0, memcmp(got.data(), data.data(), data.size()));
    const uint64_t stale = s.on.local_id; // answered: no longer in the table
    forge(efa::onnode::kAck, 1, stale);
    ASSERT_TRUE(until([&] { return dropped(a) == 2; }));
    EXPECT_EQ(1, s.completions);
}

} // namespace
