// The on-node stack (common/node.hpp): one inbox, channels by ring range.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "efa_node.h"
#include "efa_engine.h"
#include "efa_ring_inline.h"
#include <rdma/fi_errno.h>
#include "node.hpp"
#include "path_counts.hpp"
#include "shm_ring.hpp"

namespace {

using Got = std::vector<std::pair<uint32_t, int>>; // (ring in the range, frame's value)

int poll_channel(efa_node_t *n, unsigned c, Got &got) {
    return efa::node::of(n).poll(
        c,
        [&](uint32_t r, void *f, size_t len) {
            EXPECT_EQ(len, sizeof(int));
            int v;
            __builtin_memcpy(&v, f, sizeof(v));
            got.emplace_back(r, v);
        },
        100);
}

efa_node_params_t params(const std::string &tag, uint32_t vpid, uint32_t local_rank) {
    efa_node_params_t p{};
    p.dir = "/tmp";
    p.job_tag = tag.c_str();
    p.my_vpid = vpid;
    p.local_rank = local_rank;
    p.nlocal = 3;
    p.slots = 8;
    p.slot_size = 256;
    return p;
}

// Frames sent on each channel's rings come out of that channel's poll only,
// in the order each sender posted them, told by the sender's local rank.
TEST(Node, ChannelsAreDemultiplexedByRingRange) {
    const std::string tag = "test." + std::to_string(getpid());
    const efa_node_params_t p = params(tag, 7, 0);
    bool created = false;
    int err = 0;
    efa_node_t *n = efa_node_acquire(&p, &created, &err);
    ASSERT_NE(n, nullptr) << err;
    EXPECT_TRUE(created);
    ASSERT_EQ(efa_node_open_channel(n, EFA_NODE_CHANNEL_ENGINE, true), 0);
    ASSERT_EQ(efa_node_open_channel(n, EFA_NODE_CHANNEL_BTL, false), 0);
    efa_node_card_t card;
    efa_node_my_card(n, &card);
    EXPECT_EQ(card.channels, 3u);
    EXPECT_EQ(card.local_rank, 0u);
    EXPECT_NE(card.cookie, 0u);

    // Senders of local ranks 1 and 2 (as their own nodes would attach:
    // ring channel * nlocal + local rank of the inbox of vpid 7).
    int e = 0;
    const std::string path = efa_node_path(n);
    auto eng1 = efa::shm::Outbox::attach(path, 0 * 3 + 1, card.cookie, e);
    auto btl1 = efa::shm::Outbox::attach(path, 1 * 3 + 1, card.cookie, e);
    auto btl2 = efa::shm::Outbox::attach(path, 1 * 3 + 2, card.cookie, e);
    ASSERT_TRUE(eng1 && btl1 && btl2) << e;
    for (int i = 0; i < 4; ++i) {
        int a = 100 + i, b = 200 + i, c = 300 + i;
        ASSERT_EQ(eng1->send(&a, sizeof(a)), 0);
        ASSERT_EQ(btl1->send(&b, sizeof(b)), 0);
        ASSERT_EQ(btl2->send(&c, sizeof(c)), 0);
    }
    Got engine, btl;
    EXPECT_EQ(poll_channel(n, EFA_NODE_CHANNEL_ENGINE, engine), 4);
    EXPECT_EQ(engine, (Got{{1, 100}, {1, 101}, {1, 102}, {1, 103}}));
    EXPECT_EQ(poll_channel(n, EFA_NODE_CHANNEL_ENGINE, engine), 0); // nothing of the BTL's
    EXPECT_EQ(poll_channel(n, EFA_NODE_CHANNEL_BTL, btl), 8);
    EXPECT_EQ(
        btl, (Got{{1, 200}, {1, 201}, {1, 202}, {1, 203}, {2, 300}, {2, 301}, {2, 302}, {2, 303}}));

    // One channel not reading (the engine holding a message) does not stop
    // the other.
    int x = 400, y = 500;
    ASSERT_EQ(eng1->send(&x, sizeof(x)), 0);
    ASSERT_EQ(btl2->send(&y, sizeof(y)), 0);
    btl.clear();
    EXPECT_EQ(poll_channel(n, EFA_NODE_CHANNEL_BTL, btl), 1);
    EXPECT_EQ(btl, (Got{{2, 500}}));
    EXPECT_EQ(efa::node::of(n).poll(
                  EFA_NODE_CHANNEL_ENGINE, [](uint32_t, void *, size_t) {}, 10),
              1);

    // A second user shares the file; the last release unlinks it.
    efa_node_t *again = efa_node_acquire(&p, &created, &err);
    EXPECT_EQ(again, n);
    EXPECT_FALSE(created);
    efa_node_release(again);
    EXPECT_EQ(access(path.c_str(), F_OK), 0);
    efa_node_release(n);
    EXPECT_NE(access(path.c_str(), F_OK), 0);
}

// A peer attaches only to the channels the card says the owner serves, at
// its own local rank's ring of that channel.
TEST(Node, AttachFollowsTheCard) {
    const std::string tag = "attach." + std::to_string(getpid());
    const efa_node_params_t p = params(tag, 4, 2);
    int err = 0;
    auto owner = efa::node::Node::create(p, err);
    ASSERT_NE(owner, nullptr) << err;
    ASSERT_EQ(owner->open_channel(EFA_NODE_CHANNEL_BTL, false), 0);
    const efa_node_card_t card = owner->card();
    EXPECT_EQ(card.channels, 1u << EFA_NODE_CHANNEL_BTL);

    const efa_node_params_t q = params(tag, 5, 1); // a peer of local rank 1
    auto peer = efa::node::Node::create(q, err);
    ASSERT_NE(peer, nullptr) << err;
    EXPECT_EQ(peer->attach(4, card, EFA_NODE_CHANNEL_ENGINE, err), nullptr);
    EXPECT_EQ(err, -ENOENT);
    auto out = peer->attach(4, card, EFA_NODE_CHANNEL_BTL, err);
    ASSERT_NE(out, nullptr) << err;
    int v = 42;
    ASSERT_EQ(out->send(&v, sizeof(v)), 0);
    std::vector<uint32_t> rings;
    EXPECT_EQ(
        owner->poll(
            EFA_NODE_CHANNEL_BTL, [&](uint32_t r, void *, size_t) { rings.push_back(r); }, 10),
        1);
    EXPECT_EQ(rings, std::vector<uint32_t>{1});
    EXPECT_EQ(owner->poll(
                  EFA_NODE_CHANNEL_ENGINE, [](uint32_t, void *, size_t) {}, 10),
              0);
}

// The range poll of shm::Inbox itself: rings outside the range are left.
TEST(Node, InboxRangePollLeavesOtherRings) {
    efa::shm::Geometry g;
    g.nrings = 4;
    g.nslots = 4;
    g.slot_size = 128;
    int err = 0;
    const std::string path = "/tmp/efa_node_test_range." + std::to_string(getpid());
    auto in = efa::shm::Inbox::create(path, g, err);
    ASSERT_NE(in, nullptr) << err;
    auto a = efa::shm::Outbox::attach(path, 0, in->cookie(), err);
    auto d = efa::shm::Outbox::attach(path, 3, in->cookie(), err);
    ASSERT_TRUE(a && d);
    char x = 'x';
    ASSERT_EQ(a->send(&x, 1), 0);
    ASSERT_EQ(d->send(&x, 1), 0);
    std::vector<uint32_t> rings;
    auto note = [&](uint32_t r, void *, size_t) { rings.push_back(r); };
    EXPECT_EQ(in->poll_range(2, 2, note, 10), 1);
    EXPECT_EQ(rings, std::vector<uint32_t>{1}); // ring 3, the second of the range
    EXPECT_EQ(in->waiting(0), 1u);
    EXPECT_EQ(in->poll_range(0, 2, note, 10), 1);
    EXPECT_EQ(rings, (std::vector<uint32_t>{1, 0}));
    EXPECT_EQ(in->reserve_rings(3, 2), -ERANGE);
    EXPECT_EQ(in->reserve_rings(2, 2), 0);
}

// mtl_efa's engine on channel 0 of two processes' nodes while btl_efa's
// frames use channel 1 of the same inboxes: each gets only its own.
struct EngineOnNode {
    efa_node_t *node[2] = {nullptr, nullptr};
    efa_engine_t *eng[2] = {nullptr, nullptr};

    static int card_of(void *arg, uint32_t vpid, efa_engine_card_t *card) {
        auto *t = static_cast<EngineOnNode *>(arg);
        if (vpid > 1 || !t->node[vpid]) {
            return -FI_ENOENT;
        }
        efa_node_card_t c;
        efa_node_my_card(t->node[vpid], &c);
        if (!(c.channels & (1u << EFA_NODE_CHANNEL_ENGINE))) {
            return -FI_ENOENT;
        }
        *card =
            efa_engine_card_t{c.cookie, c.local_rank, c.pid, c.cma_cookie_addr, c.cma_cookie, 0, 0};
        return 0;
    }
    ~EngineOnNode() {
        for (int i = 0; i < 2; ++i) {
            if (eng[i]) {
                efa_engine_destroy(eng[i]);
            }
            if (node[i]) {
                efa_node_release(node[i]);
            }
        }
    }
};

struct Done {
    efa_engine_req_t on{};
    int completions = 0;
};

TEST(Node, EngineServesItsChannelOnly) {
    const std::string tag = "engine." + std::to_string(getpid());
    EngineOnNode t;
    for (uint32_t v = 0; v < 2; ++v) {
        efa_node_params_t np = params(tag, v, v);
        np.nlocal = 2;
        np.slot_size = 1024;
        int err = 0;
        auto n = efa::node::Node::create(np, err);
        ASSERT_NE(n, nullptr) << err;
        t.node[v] = efa::node::adopt(std::move(n));
        ASSERT_EQ(efa_node_open_channel(t.node[v], EFA_NODE_CHANNEL_BTL, false), 0);
        efa_engine_params_t p{};
        p.node = t.node[v];
        p.channel = EFA_NODE_CHANNEL_ENGINE;
        p.my_vpid = v;
        p.local_rank = v;
        p.nlocal = 2;
        p.nprocs = 2;
        p.slots = 8;
        p.slot_size = 1024;
        p.peer_card = EngineOnNode::card_of;
        p.peer_card_arg = &t;
        t.eng[v] = efa_engine_create(&p, &err);
        ASSERT_NE(t.eng[v], nullptr) << err;
        EXPECT_STREQ(efa_engine_inbox_path(t.eng[v]), efa_node_path(t.node[v]));
    }
    // A btl_efa frame from process 0 to process 1 (channel 1), then an
    // engine message the same way (channel 0).
    efa_node_card_t card1;
    efa_node_my_card(t.node[1], &card1);
    EXPECT_EQ(card1.channels, 3u);
    int err = 0;
    efa_shm_outbox_t *btl = efa_node_attach(t.node[0], 1, &card1, EFA_NODE_CHANNEL_BTL, &err);
    ASSERT_NE(btl, nullptr) << err;
    const int frame = 77;
    ASSERT_EQ(efa_shm_outbox_send(btl, &frame, sizeof(frame)), 0);

    int got = 0;
    Done r, s;
    r.on.complete = [](efa_engine_req_t *q) { ++reinterpret_cast<Done *>(q)->completions; };
    s.on.complete = r.on.complete;
    r.on.buf = &got;
    r.on.buflen = sizeof(got);
    ASSERT_EQ(efa_engine_recv(t.eng[1], 5, 0, 9, &r.on), 0);
    const int msg = 1234;
    ASSERT_EQ(efa_engine_send(t.eng[0], 1, 5, 0, 9, &msg, sizeof(msg), false, &s.on), 1);
    for (int i = 0; i < 1000 && 0 == r.completions; ++i) {
        efa_engine_progress(t.eng[1]);
    }
    EXPECT_EQ(r.completions, 1);
    EXPECT_EQ(got, 1234);
    // The engine left the BTL's frame alone: channel 1's poll has it, from
    // local rank 0.
    Got btl_frames;
    EXPECT_EQ(poll_channel(t.node[1], EFA_NODE_CHANNEL_BTL, btl_frames), 1);
    EXPECT_EQ(btl_frames, (Got{{0, 77}}));
    efa_shm_outbox_detach(btl);
}

// A node with btl_efa's channel open: its consumer, and this process's
// own ring of the channel (local rank 0) to write frames into.
struct BtlChannel {
    efa_node_t *n = nullptr;
    efa_ring_consumer_t *c = nullptr;
    uint32_t first = 0, count = 0; // the channel's rings
    efa_shm_outbox_t *out = nullptr;
    efa_ring_producer_t *p = nullptr;
};

void open_btl_channel(const efa_node_params_t &np, BtlChannel &ch) {
    int err = 0;
    auto created = efa::node::Node::create(np, err);
    ASSERT_NE(created, nullptr) << err;
    ch.n = efa::node::adopt(std::move(created));
    ASSERT_EQ(efa_node_open_channel(ch.n, EFA_NODE_CHANNEL_BTL, false), 0);
    efa_node_card_t card;
    efa_node_my_card(ch.n, &card);
    ch.c = efa_node_consumer(ch.n, EFA_NODE_CHANNEL_BTL, &ch.first, &ch.count);
    ASSERT_NE(ch.c, nullptr);
    ch.out = efa_node_attach(ch.n, 0, &card, EFA_NODE_CHANNEL_BTL, &err);
    ASSERT_NE(ch.out, nullptr) << err;
    ch.p = efa_shm_outbox_producer(ch.out);
    ASSERT_NE(ch.p, nullptr);
}

// The C seam btl_efa polls and sends through (efa_ring_inline.h): the
// channel's block of the inbox (efa_node_consumer), a sender's slots
// written in place (efa_shm_outbox_producer), frames handed to a C
// handler told the sender's local rank, the budget kept, a handler that
// says stop obeyed, a full ring and an oversized frame refused, and every
// frame counted in the path counts.
TEST(Node, CSeamCarriesFramesAsBtlEfaUsesIt) {
    const std::string tag = "cseam." + std::to_string(getpid());
    efa_node_params_t np = params(tag, 0, 0);
    np.nlocal = 2;
    BtlChannel ch;
    ASSERT_NO_FATAL_FAILURE(open_btl_channel(np, ch));
    efa_node_t *n = ch.n;
    efa_ring_consumer_t *c = ch.c;
    const uint32_t first = ch.first, count = ch.count;
    EXPECT_EQ(first, 2u); // channel 1 of 2 local ranks: rings 2 and 3
    EXPECT_EQ(count, 2u);
    efa_shm_outbox_t *out = ch.out; // local rank 0: ring 2
    efa_ring_producer_t *p = ch.p;
    const uint64_t frames_before = efa::counts::get(efa::counts::kRingFrames);
    const uint64_t bytes_before = efa::counts::get(efa::counts::kRingBytes);
    EXPECT_EQ(efa_ring_reserve(p, efa_node_max_frame(n) + 1), nullptr); // too long for a slot
    int sent = 0;
    for (;; ++sent) {
        void *slot = efa_ring_reserve(p, sizeof(int));
        if (nullptr == slot) {
            break; // full
        }
        const int v = 500 + sent;
        __builtin_memcpy(slot, &v, sizeof(v));
        efa_ring_commit(p, sizeof(int));
    }
    EXPECT_EQ(sent, static_cast<int>(np.slots));
    EXPECT_EQ(efa::counts::get(efa::counts::kRingFrames) - frames_before, np.slots);
    EXPECT_EQ(efa::counts::get(efa::counts::kRingBytes) - bytes_before, np.slots * sizeof(int));
    EXPECT_EQ(efa_shm_outbox_committed(out), static_cast<uint64_t>(sent));

    struct Seen {
        Got got;
        int stop_after = -1; // frames after which the handler says stop
    } seen;
    const efa_ring_frame_fn take = [](void *arg, uint32_t ring, void *frame, size_t len) -> bool {
        auto *s = static_cast<Seen *>(arg);
        EXPECT_EQ(len, sizeof(int));
        int v;
        __builtin_memcpy(&v, frame, sizeof(v));
        s->got.emplace_back(ring, v);
        return static_cast<int>(s->got.size()) != s->stop_after;
    };
    EXPECT_EQ(efa_ring_consume(c, first, count, take, &seen, 3), 3); // the budget
    seen.stop_after = 4;
    EXPECT_EQ(efa_ring_consume(c, first, count, take, &seen, 100), 1); // the handler's stop
    seen.stop_after = -1;
    EXPECT_EQ(efa_ring_consume(c, 0, first, take, &seen, 100), 0); // the engine's block
    EXPECT_EQ(efa_ring_consume(c, first, count, take, &seen, 100), sent - 4);
    ASSERT_EQ(seen.got.size(), static_cast<size_t>(sent));
    for (int i = 0; i < sent; ++i) {
        EXPECT_EQ(seen.got[i], (std::pair<uint32_t, int>{0, 500 + i})) << i;
    }
    // Taken: the slots are free again.
    EXPECT_NE(efa_ring_reserve(p, sizeof(int)), nullptr);
    EXPECT_EQ(efa_ring_consume(c, first, count, take, &seen, 100), 0); // reserved, not committed
    efa_shm_outbox_detach(out);
    efa_node_release(n);
}

// Frames of one to many cache lines arrive whole whether the producer
// demotes their lines (cldemote, a no-op on CPUs without it) or not, and
// whatever the consumer prefetches; the producer demotes only where CPUID
// says the CPU has cldemote.  (A hint changes no state a test can see:
// the demoting pass checks that the loop runs without harm, not which
// lines it names.)
TEST(Node, FramesOfSeveralLinesArriveWholeWithAndWithoutDemote) {
    const std::string tag = "lines." + std::to_string(getpid());
    efa_node_params_t np = params(tag, 0, 0);
    np.nlocal = 1;
    np.slots = 16;       // every length below at once
    np.slot_size = 8192; // the default slot
    BtlChannel ch;
    ASSERT_NO_FATAL_FAILURE(open_btl_channel(np, ch));
    efa_node_t *n = ch.n;
    efa_ring_consumer_t *c = ch.c;
    const uint32_t first = ch.first, count = ch.count;
    efa_shm_outbox_t *out = ch.out;
    efa_ring_producer_t *p = ch.p;
    EXPECT_EQ(p->demote != 0, efa_ring_cpu_demotes());

    const size_t max = efa_node_max_frame(n);
    const std::vector<size_t> lens = {1, 56, 57, 120, 200, 256, 1000, 4096, max};
    struct Frames {
        std::vector<std::vector<uint8_t>> got;
    } frames;
    const efa_ring_frame_fn take = [](void *arg, uint32_t, void *frame, size_t len) -> bool {
        auto *f = static_cast<Frames *>(arg);
        const auto *b = static_cast<const uint8_t *>(frame);
        f->got.emplace_back(b, b + len);
        return true;
    };
    for (const uint8_t demote : {0, 1}) {
        p->demote = demote;
        frames.got.clear();
        for (size_t i = 0; i < lens.size(); ++i) {
            auto *slot = static_cast<uint8_t *>(efa_ring_reserve(p, lens[i]));
            ASSERT_NE(slot, nullptr) << lens[i];
            for (size_t k = 0; k < lens[i]; ++k) {
                slot[k] = static_cast<uint8_t>(k * 7 + i + demote);
            }
            efa_ring_commit(p, lens[i]);
        }
        EXPECT_EQ(efa_ring_consume(c, first, count, take, &frames, 100),
                  static_cast<int>(lens.size()));
        ASSERT_EQ(frames.got.size(), lens.size());
        for (size_t i = 0; i < lens.size(); ++i) {
            ASSERT_EQ(frames.got[i].size(), lens[i]) << "demote " << int(demote);
            for (size_t k = 0; k < lens[i]; ++k) {
                ASSERT_EQ(frames.got[i][k], static_cast<uint8_t>(k * 7 + i + demote))
                    << "frame " << i << " byte " << k << " demote " << int(demote);
            }
        }
    }
    efa_shm_outbox_detach(out);
    efa_node_release(n);
}

} // namespace
