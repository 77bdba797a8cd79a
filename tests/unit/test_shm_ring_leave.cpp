// The on-node channel's leave mark (shm_ring.hpp, "Leaving"): a sender
// that lets go of its ring in order marks it, one that dies never does,
// and the owner tells them apart, through the node's seam too.
#include <gtest/gtest.h>

#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "efa_node.h"
#include "efa_shm_ring.h"
#include "shm_ring.hpp"
#include "shm_ring_test.hpp"

namespace {

using efa::shm::Inbox;
using efa::shm::Outbox;
using shm_ring_test::drain;
using shm_ring_test::geo;
using shm_ring_test::temp_path;

// The leave mark (RingCtl::attached, Inbox::sender): a ring never attached
// reads as none, one attached and still held as attached, one whose outbox
// was destroyed (an orderly leave) as left, with its frames still there
// to read; a re-attach makes it attached again.
TEST(ShmRing, SenderLeavesInOrder) {
    int err = 0;
    const std::string path = temp_path("leave");
    auto in = Inbox::create(path, geo(3, 4, 128), err);
    ASSERT_NE(in, nullptr) << err;
    EXPECT_EQ(in->sender(0), efa::shm::kSenderNone);
    EXPECT_EQ(in->sender(3), efa::shm::kSenderNone); // (no such ring)
    auto held = Outbox::attach(path, 1, in->cookie(), err);
    ASSERT_NE(held, nullptr) << err;
    auto leaving = Outbox::attach(path, 2, in->cookie(), err);
    ASSERT_NE(leaving, nullptr) << err;
    EXPECT_EQ(in->sender(1), efa::shm::kSenderAttached);
    EXPECT_EQ(in->sender(2), efa::shm::kSenderAttached);
    const uint32_t v = 7;
    ASSERT_EQ(leaving->send(&v, sizeof(v)), 0);
    leaving.reset();
    EXPECT_EQ(in->sender(0), efa::shm::kSenderNone);
    EXPECT_EQ(in->sender(1), efa::shm::kSenderAttached);
    EXPECT_EQ(in->sender(2), efa::shm::kSenderLeft);
    // A left ring is still polled: its last frames are read.
    const auto got = drain(*in);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].ring, 2u);
    leaving = Outbox::attach(path, 2, in->cookie(), err);
    ASSERT_NE(leaving, nullptr) << err;
    EXPECT_EQ(in->sender(2), efa::shm::kSenderAttached);
}

// A sender that dies (its process exits without destroying its outbox)
// never marks its ring left; one that detaches before it exits does, and
// the owner reads the mark after seeing the exit.  The C seam, as the
// sender's component uses it.
TEST(ShmRing, DyingSenderNeverLeaves) {
    int err = 0;
    const std::string path = temp_path("dying");
    auto in = Inbox::create(path, geo(3, 4, 128), err);
    ASSERT_NE(in, nullptr) << err;
    for (unsigned ring = 1; ring <= 2; ++ring) {
        const pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (0 == pid) {
            efa_shm_outbox_t *out = efa_shm_outbox_attach(path.c_str(), ring, in->cookie(), &err);
            if (!out || 0 != efa_shm_outbox_send(out, &ring, sizeof(ring))) {
                _exit(2);
            }
            if (2 == ring) {
                efa_shm_outbox_detach(out); // in order
            }
            _exit(0); // (ring 1: as if killed, nothing let go)
        }
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && 0 == WEXITSTATUS(status));
    }
    EXPECT_EQ(in->sender(0), efa::shm::kSenderNone);
    EXPECT_EQ(in->sender(1), efa::shm::kSenderAttached);
    EXPECT_EQ(in->sender(2), efa::shm::kSenderLeft);
    EXPECT_EQ(drain(*in).size(), 2u);
}

// efa_node_ring_sender, the owner's query through the node (btl_efa's
// watch): the sender's ring of a channel is the channel's first plus its
// local rank.
TEST(ShmRing, NodeSeamTellsLeftFromAttached) {
    const std::string tag = "leave." + std::to_string(getpid());
    efa_node_params_t p{};
    p.dir = "/tmp";
    p.job_tag = tag.c_str();
    p.my_vpid = 3;
    p.local_rank = 0;
    p.nlocal = 3;
    p.slots = 8;
    p.slot_size = 256;
    bool created = false;
    int err = 0;
    efa_node_t *owner = efa_node_acquire(&p, &created, &err);
    ASSERT_NE(owner, nullptr) << err;
    ASSERT_EQ(efa_node_open_channel(owner, EFA_NODE_CHANNEL_BTL, false), 0);
    efa_node_card_t card;
    efa_node_my_card(owner, &card);
    uint32_t first = 0, count = 0;
    (void)efa_node_consumer(owner, EFA_NODE_CHANNEL_BTL, &first, &count);
    ASSERT_EQ(count, 3u);
    // The peers of local ranks 1 and 2 (outboxes of their own, as their
    // nodes would attach them: this process's node is the owner's).
    char file[256];
    efa_node_peer_file(owner, 3, file, sizeof(file));
    efa_shm_outbox_t *one = efa_shm_outbox_attach(file, first + 1, card.cookie, &err);
    ASSERT_NE(one, nullptr) << err;
    efa_shm_outbox_t *two = efa_shm_outbox_attach(file, first + 2, card.cookie, &err);
    ASSERT_NE(two, nullptr) << err;
    efa_shm_outbox_detach(two);
    EXPECT_EQ(efa_node_ring_sender(owner, first + 0), EFA_NODE_SENDER_NONE);
    EXPECT_FALSE(efa_node_ring_sender_present(owner, first + 0));
    EXPECT_EQ(efa_node_ring_sender(owner, first + 1), EFA_NODE_SENDER_ATTACHED);
    EXPECT_TRUE(efa_node_ring_sender_present(owner, first + 1));
    EXPECT_EQ(efa_node_ring_sender(owner, first + 2), EFA_NODE_SENDER_LEFT);
    EXPECT_FALSE(efa_node_ring_sender_present(owner, first + 2));
    // The other channel's rings are others'.
    EXPECT_EQ(efa_node_ring_sender(owner, EFA_NODE_CHANNEL_ENGINE * count + 1),
              EFA_NODE_SENDER_NONE);
    efa_shm_outbox_detach(one);
    EXPECT_EQ(efa_node_ring_sender(owner, first + 1), EFA_NODE_SENDER_LEFT);
    efa_node_release(owner);
}

} // namespace
