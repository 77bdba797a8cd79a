// The matching engine's link asking a peer for one more numbered message
// (common/engine/net_link.cpp, net_link.hpp "Asking"), over a core that
// talks to itself on shm: what an ask puts on the wire (a grant message
// numbered kAskSeq, with no frame), and what an answer is (the next
// numbered message, with no frame, waiting like any for the peer's grant),
// so that the asker's order sees a gap before it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <rdma/fi_errno.h>

#include "core_test_params.hpp"
#include "core_with_self.hpp"
#include "efa_core.h"
#include "efa_core_msg.h"
#include "net_link.hpp"

namespace {

using efa::engine::kAskSeq;
using efa::engine::kNoSeq;
using efa::engine::NetHdr;
using efa::engine::NetLink;
using efa::engine::NetParams;

class NetLinkAsk : public ::testing::Test {
  protected:
    void SetUp() override {
        efa_core_params_t p = core_test_params("shm");
        p.num_contexts = 2;
        ASSERT_TRUE(self_.open(p));
        core_ = self_.core();
        ASSERT_EQ(0, efa_core_msg_set_channel(core_, EFA_MSG_CHANNEL_ENGINE, arrived, this));
        NetParams np;
        np.core = core_;
        int err = 0;
        link_ = NetLink::create(np, &NetLinkAsk::sent, this, err);
        ASSERT_TRUE(link_) << "NetLink::create: " << err;
        // From context 1 to context 0's pool, as to a process on another node.
        peer_ = link_->add_peer(7, self_.self()->addr[0], efa_core_ctx(core_, 1), 0,
                                self_.self()->addr[0], efa_core_ctx(core_, 1));
        ASSERT_NE(peer_, nullptr);
    }
    void TearDown() override {
        for (int i = 0; link_ && i < 100000 && !link_->idle(); ++i) {
            pump();
        }
        link_.reset();
        if (core_) {
            efa_core_msg_set_channel(core_, EFA_MSG_CHANNEL_ENGINE, nullptr, nullptr);
        }
    }
    static void arrived(void *arg, efa_ctx_t *, void *buf, size_t len, int err, fi_addr_t) {
        auto *t = static_cast<NetLinkAsk *>(arg);
        ASSERT_EQ(err, 0);
        ASSERT_GE(len, sizeof(NetHdr));
        NetHdr h;
        memcpy(&h, buf, sizeof(h));
        t->got_.push_back(h);
    }
    static void sent(void *owner, NetLink::Buf *b, NetLink::Peer *, int err) {
        auto *t = static_cast<NetLinkAsk *>(owner);
        EXPECT_EQ(err, 0);
        if (b) {
            t->link_->release(b);
        }
    }
    void pump() {
        link_->progress();
        efa_core_progress(core_);
    }
    // Progress until n messages arrived in all (bounded).
    bool wait_for(size_t n) {
        for (int i = 0; i < 100000 && got_.size() < n; ++i) {
            pump();
        }
        return got_.size() >= n;
    }
    void send_frame() {
        void *f = link_->reserve(peer_, 16);
        ASSERT_NE(f, nullptr);
        memset(f, 0x5a, 16);
        link_->commit(peer_, 16);
    }

    CoreWithSelf self_;
    efa_core_t *core_ = nullptr;
    std::unique_ptr<NetLink> link_;
    NetLink::Peer *peer_ = nullptr;
    std::vector<NetHdr> got_;
};

TEST_F(NetLinkAsk, AnAskIsAGrantMessageNumberedAskSeq) {
    link_->ask(peer_);
    EXPECT_TRUE(peer_->asking) << "the owner would not know to ask again";
    ASSERT_TRUE(wait_for(1)) << "the ask never arrived";
    EXPECT_EQ(got_[0].seq, kAskSeq);
    EXPECT_EQ(got_[0].frames, 0u);
    EXPECT_EQ(got_[0].sender, 0u);
    EXPECT_EQ(link_->stats().asks, 1u);
    EXPECT_EQ(link_->stats().grants, 0u) << "an ask counted as a grant";
    EXPECT_FALSE(peer_->ask_due);
    // A grant due later goes as a plain grant again.
    link_->delivered(peer_, link_->credit());
    link_->send_grants();
    ASSERT_TRUE(wait_for(2));
    EXPECT_EQ(got_[1].seq, kNoSeq) << "a grant after the ask still asked";
}

// The answer is numbered after the messages sent before it, and it is the
// only numbered message without a frame (how the asker knows it).
TEST_F(NetLinkAsk, AnAnswerIsTheNextNumberedMessageWithNoFrame) {
    send_frame();
    ASSERT_TRUE(wait_for(1));
    send_frame();
    ASSERT_TRUE(wait_for(2));
    link_->answer(peer_);
    ASSERT_TRUE(wait_for(3)) << "the answer never arrived";
    EXPECT_EQ(got_[2].seq, 2u) << "the answer is not numbered after the messages before it";
    EXPECT_EQ(got_[2].frames, 0u);
    EXPECT_EQ(link_->stats().answers, 1u);
    EXPECT_EQ(link_->stats().messages, 3u);
    EXPECT_EQ(got_[0].frames, 1u);
    EXPECT_EQ(got_[1].frames, 1u);
}

// Without credit the answer waits, as any numbered message, for the
// peer's grant, and goes with it.
TEST_F(NetLinkAsk, AnAnswerWaitsForThePeersGrant) {
    peer_->limit = 1; // as a peer that granted one message so far
    send_frame();
    ASSERT_TRUE(wait_for(1));
    send_frame(); // waits for the grant, open
    link_->answer(peer_);
    for (int i = 0; i < 1000; ++i) {
        pump();
    }
    EXPECT_EQ(got_.size(), 1u) << "a message went past the peer's grant";
    link_->granted(peer_, 2); // the waiting message goes
    ASSERT_TRUE(wait_for(2));
    EXPECT_EQ(got_[1].seq, 1u);
    EXPECT_EQ(got_[1].frames, 1u);
    for (int i = 0; i < 1000; ++i) {
        pump();
    }
    EXPECT_EQ(got_.size(), 2u) << "the answer went past the peer's grant";
    link_->granted(peer_, 3); // ... and then the answer
    ASSERT_TRUE(wait_for(3)) << "the answer never went once granted";
    EXPECT_EQ(got_[2].seq, 2u);
    EXPECT_EQ(got_[2].frames, 0u);
    EXPECT_EQ(link_->stats().answers, 1u);
}

} // namespace
