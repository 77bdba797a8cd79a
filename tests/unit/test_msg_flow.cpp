// The message flow control (efa_msg_flow.h, core/msg_flow.cpp): credits
// that run out and come back, piggybacked or in a credit message, and the
// queues of the peers that wait, drained in order.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "efa_msg_flow.h"

namespace {

struct Item {
    int id = 0;
    Item *next = nullptr;
};

class MsgFlow : public ::testing::Test {
  protected:
    void SetUp() override {
        efa_flow_init(&flow_, 4, offsetof(Item, next));
        for (auto &p : peers_) {
            efa_flow_peer_init(&flow_, &p);
        }
        for (int i = 0; i < 8; ++i) {
            items_[i].id = i;
        }
    }
    std::vector<int> queued(efa_flow_peer_t *p) {
        std::vector<int> ids;
        for (void *it = p->head; it; it = efa_flow_next(&flow_, it)) {
            ids.push_back(static_cast<Item *>(it)->id);
        }
        return ids;
    }

    efa_flow_t flow_{};
    efa_flow_peer_t peers_[3]{};
    Item items_[8];
};

TEST_F(MsgFlow, APeerStartsWithAWindowAndHalfOfItIsTheThreshold) {
    EXPECT_EQ(peers_[0].credits, 4);
    EXPECT_EQ(flow_.threshold, 2);
    efa_flow_t tiny{};
    efa_flow_init(&tiny, 0, 0);
    EXPECT_EQ(tiny.window, 1) << "a window of 0 would never let a message go";
    EXPECT_EQ(tiny.threshold, 1);
}

TEST_F(MsgFlow, MessagesTakeCreditsAndCreditMessagesTakeNone) {
    efa_flow_peer_t *p = &peers_[0];
    for (int i = 0; i < 4; ++i) {
        efa_flow_sent(&flow_, p, efa_flow_give(p), true);
    }
    EXPECT_EQ(p->credits, 0);
    efa_flow_sent(&flow_, p, efa_flow_give(p), false);
    EXPECT_EQ(p->credits, 0);
    // The peer returns three on one of its messages.
    efa_flow_received(&flow_, p, 3, true);
    EXPECT_EQ(p->credits, 3);
}

TEST_F(MsgFlow, OwedCreditsRideOnTheNextMessage) {
    efa_flow_peer_t *p = &peers_[0];
    efa_flow_received(&flow_, p, 0, true);
    EXPECT_EQ(p->owed, 1);
    EXPECT_FALSE(p->credit_due) << "one owed is below the threshold";
    EXPECT_EQ(flow_.num_waiting, 0);
    const uint16_t give = efa_flow_give(p);
    EXPECT_EQ(give, 1);
    efa_flow_sent(&flow_, p, give, true);
    EXPECT_EQ(p->owed, 0);
}

TEST_F(MsgFlow, AtTheThresholdACreditMessageIsDueAndThePeerWaits) {
    efa_flow_peer_t *p = &peers_[1];
    efa_flow_received(&flow_, p, 0, true);
    efa_flow_received(&flow_, p, 0, false); // a credit message: nothing owed for it
    EXPECT_FALSE(efa_flow_credit_due(p));
    efa_flow_received(&flow_, p, 0, true);
    EXPECT_TRUE(efa_flow_credit_due(p));
    EXPECT_EQ(flow_.num_waiting, 1);
    EXPECT_EQ(flow_.waiting_head, p);
    // The credit message carries them all and takes no credit.
    efa_flow_sent(&flow_, p, efa_flow_give(p), false);
    EXPECT_EQ(p->owed, 0);
    EXPECT_FALSE(efa_flow_credit_due(p));
    EXPECT_EQ(p->credits, 4);
}

// A message that failed while its peer lives (an answer sent again, a
// chunk of a one-sided operation): the credits it carried and the one it
// took come back, and a credit message is due again where they reach the
// threshold; else they were lost for good, and the peer's sends, a window
// at most, would wait for ever.
TEST_F(MsgFlow, AFailedMessagesCreditsComeBack) {
    efa_flow_peer_t *p = &peers_[2];
    efa_flow_received(&flow_, p, 0, true);
    efa_flow_received(&flow_, p, 0, true);
    ASSERT_TRUE(efa_flow_credit_due(p));
    const uint16_t give = efa_flow_give(p);
    efa_flow_sent(&flow_, p, give, true);
    ASSERT_EQ(p->owed, 0);
    ASSERT_EQ(p->credits, 3);
    ASSERT_FALSE(efa_flow_credit_due(p));
    // (the drain finds nothing due: the peer leaves the waiting list)
    efa_flow_drain(
        &flow_, [](void *, efa_flow_peer_t *) { return true; }, nullptr);
    ASSERT_EQ(flow_.num_waiting, 0);
    efa_flow_unsent(&flow_, p, give, true);
    EXPECT_EQ(p->owed, 2) << "the credits the failed message carried are lost";
    EXPECT_EQ(p->credits, 4) << "the credit the failed message took is lost";
    EXPECT_TRUE(efa_flow_credit_due(p)) << "no credit message is due for them again";
    EXPECT_EQ(flow_.waiting_head, p) << "the peer does not wait for its credit message";
    // A failed credit message took none.
    efa_flow_sent(&flow_, p, efa_flow_give(p), false);
    efa_flow_unsent(&flow_, p, 2, false);
    EXPECT_EQ(p->credits, 4);
    EXPECT_EQ(p->owed, 2);
}

TEST_F(MsgFlow, AGiftIsCappedAtSixteenBits) {
    efa_flow_peer_t *p = &peers_[0];
    p->owed = 70000;
    EXPECT_EQ(efa_flow_give(p), UINT16_MAX);
    efa_flow_sent(&flow_, p, efa_flow_give(p), false);
    EXPECT_EQ(p->owed, 70000 - UINT16_MAX) << "the rest stays owed";
}

// A peer returns only what it was sent: a forged count (up to 16 bits on
// every message) never lifts the credits above the window, nor wraps them
// negative, which would stall the sends to that peer for good.
TEST_F(MsgFlow, ReturnedCreditsNeverExceedTheWindow) {
    efa_flow_peer_t *p = &peers_[0];
    efa_flow_sent(&flow_, p, efa_flow_give(p), true);
    EXPECT_EQ(p->credits, 3);
    for (int i = 0; i < 40000; ++i) {
        efa_flow_received(&flow_, p, UINT16_MAX, false);
    }
    EXPECT_EQ(p->credits, 4);
}

TEST_F(MsgFlow, QueuesKeepOrderAndPopAndPushFrontUndoEachOther) {
    efa_flow_peer_t *p = &peers_[0];
    for (int i = 0; i < 3; ++i) {
        efa_flow_enqueue(&flow_, p, &items_[i]);
    }
    EXPECT_EQ(queued(p), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(flow_.num_waiting, 1) << "a peer is on the list once";
    auto *first = static_cast<Item *>(efa_flow_pop(&flow_, p));
    EXPECT_EQ(first->id, 0);
    EXPECT_EQ(first->next, nullptr);
    EXPECT_EQ(queued(p), (std::vector<int>{1, 2}));
    efa_flow_push_front(&flow_, p, first);
    EXPECT_EQ(queued(p), (std::vector<int>{0, 1, 2}));
    // A batch of the first two went.
    efa_flow_dequeue_through(&flow_, p, &items_[1]);
    EXPECT_EQ(queued(p), (std::vector<int>{2}));
    EXPECT_EQ(items_[1].next, nullptr);
    efa_flow_dequeue_through(&flow_, p, &items_[2]);
    EXPECT_EQ(p->head, nullptr);
    EXPECT_EQ(p->tail, nullptr);
    efa_flow_enqueue(&flow_, p, &items_[3]);
    EXPECT_EQ(queued(p), (std::vector<int>{3})) << "the queue works again once emptied";
    EXPECT_EQ(efa_flow_pop(&flow_, p), &items_[3]);
    EXPECT_EQ(efa_flow_pop(&flow_, p), nullptr);
}

// A batch's messages leave the queue before its post (its completion, in
// another thread, walks them at once) and go back in order when the post
// fails: into a queue still holding others, and into an emptied one.
TEST_F(MsgFlow, ABatchTakenBeforeItsPostGoesBackInOrder) {
    efa_flow_peer_t *p = &peers_[0];
    for (int i = 0; i < 4; ++i) {
        efa_flow_enqueue(&flow_, p, &items_[i]);
    }
    efa_flow_dequeue_through(&flow_, p, &items_[1]);
    EXPECT_EQ(items_[1].next, nullptr) << "the batch's chain ends at its last message";
    EXPECT_EQ(queued(p), (std::vector<int>{2, 3}));
    efa_flow_requeue_front(&flow_, p, &items_[0], &items_[1]);
    EXPECT_EQ(queued(p), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(p->tail, &items_[3]);
    efa_flow_dequeue_through(&flow_, p, &items_[3]);
    EXPECT_EQ(p->head, nullptr);
    efa_flow_requeue_front(&flow_, p, &items_[0], &items_[3]);
    EXPECT_EQ(queued(p), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(p->tail, &items_[3]) << "the tail of a queue emptied by the batch";
    efa_flow_enqueue(&flow_, p, &items_[4]);
    EXPECT_EQ(queued(p), (std::vector<int>{0, 1, 2, 3, 4}));
}

// A drain that posts whole queues while the "provider" has room, recording
// which peers it saw.
struct Drain {
    efa_flow_t *flow;
    int room; // posts the provider still takes
    std::vector<efa_flow_peer_t *> seen;
};

bool drain_peer(void *arg, efa_flow_peer_t *p) {
    auto *d = static_cast<Drain *>(arg);
    d->seen.push_back(p);
    while (p->head) {
        if (d->room == 0) {
            return false;
        }
        --d->room;
        efa_flow_pop(d->flow, p);
    }
    if (efa_flow_credit_due(p)) {
        if (d->room == 0) {
            return false;
        }
        --d->room;
        efa_flow_sent(d->flow, p, efa_flow_give(p), false);
    }
    efa_flow_credit_settled(p);
    return true;
}

TEST_F(MsgFlow, TheDrainVisitsPeersInOrderAndStopsWhereTheProviderIsFull) {
    efa_flow_enqueue(&flow_, &peers_[0], &items_[0]);
    efa_flow_enqueue(&flow_, &peers_[0], &items_[1]);
    efa_flow_enqueue(&flow_, &peers_[1], &items_[2]);
    efa_flow_enqueue(&flow_, &peers_[2], &items_[3]);
    Drain d{&flow_, 3, {}};
    EXPECT_EQ(efa_flow_drain(&flow_, drain_peer, &d), 1);
    EXPECT_EQ(d.seen, (std::vector<efa_flow_peer_t *>{&peers_[0], &peers_[1], &peers_[2]}));
    // Peer 2 found no room and is still waiting, alone on the list.
    EXPECT_EQ(flow_.waiting_head, &peers_[2]);
    EXPECT_EQ(flow_.waiting_tail, &peers_[2]);
    EXPECT_TRUE(peers_[2].waiting);
    EXPECT_FALSE(peers_[0].waiting);
    d = Drain{&flow_, 10, {}};
    EXPECT_EQ(efa_flow_drain(&flow_, drain_peer, &d), 0);
    EXPECT_EQ(flow_.waiting_head, nullptr);
    EXPECT_EQ(flow_.waiting_tail, nullptr);
}

TEST_F(MsgFlow, APeerWithACreditMessageDueStaysUntilItWent) {
    efa_flow_received(&flow_, &peers_[0], 0, true);
    efa_flow_received(&flow_, &peers_[0], 0, true);
    ASSERT_EQ(flow_.num_waiting, 1);
    Drain d{&flow_, 0, {}};
    EXPECT_EQ(efa_flow_drain(&flow_, drain_peer, &d), 1);
    EXPECT_TRUE(efa_flow_credit_due(&peers_[0]));
    d = Drain{&flow_, 1, {}};
    EXPECT_EQ(efa_flow_drain(&flow_, drain_peer, &d), 0);
    EXPECT_EQ(peers_[0].owed, 0);
    // Enqueued again after leaving: back on the list, at its end.
    efa_flow_enqueue(&flow_, &peers_[1], &items_[0]);
    efa_flow_enqueue(&flow_, &peers_[0], &items_[1]);
    EXPECT_EQ(flow_.waiting_head, &peers_[1]);
    EXPECT_EQ(flow_.waiting_tail, &peers_[0]);
}

} // namespace
