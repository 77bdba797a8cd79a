// The peer deadline's rules (common/peer_deadline.hpp) on a fake clock.
#include <gtest/gtest.h>

#include "peer_deadline.hpp"

using efa::PeerDeadline;
using Kind = PeerDeadline::Kind;

namespace {
constexpr uint64_t kPeer = 7, kOther = 9;
} // namespace

TEST(PeerDeadline, DisabledNeverChecks) {
    PeerDeadline::Entry ops[8]; // the tracked operations
    PeerDeadline d(0);
    EXPECT_TRUE(d.posted(kPeer, &ops[0], Kind::Send, 0));
    EXPECT_FALSE(d.due(1000000));
}

TEST(PeerDeadline, SendWithoutNewsExpiresAfterTimeout) {
    PeerDeadline::Entry ops[8]; // the tracked operations
    PeerDeadline d(10000);
    ASSERT_TRUE(d.posted(kPeer, &ops[0], Kind::Send, 5000));
    EXPECT_TRUE(d.check(14999).expired.empty());
    auto v = d.check(15000);
    ASSERT_EQ(v.expired.size(), 1u);
    EXPECT_EQ(v.expired[0], kPeer);
}

TEST(PeerDeadline, CompletionsKeepABusyPeerAlive) {
    PeerDeadline::Entry ops[8]; // the tracked operations
    PeerDeadline d(10000);
    d.posted(kPeer, &ops[0], Kind::Send, 0);
    d.posted(kPeer, &ops[1], Kind::Send, 0);
    EXPECT_TRUE(d.completed(&ops[0], 9000));
    EXPECT_TRUE(d.check(18999).expired.empty()); // ops[1] still out, but news at 9000
    EXPECT_EQ(d.check(19000).expired.size(), 1u);
}

TEST(PeerDeadline, IdleTimeIsNoSilence) {
    PeerDeadline::Entry ops[8]; // the tracked operations
    PeerDeadline d(10000);
    d.posted(kPeer, &ops[0], Kind::Send, 0);
    d.completed(&ops[0], 1);
    d.posted(kPeer, &ops[1], Kind::Send, 50000); // long idle, then busy again
    EXPECT_TRUE(d.check(59999).expired.empty());
    EXPECT_EQ(d.check(60000).expired.size(), 1u);
}

TEST(PeerDeadline, OnlyThePeerWithoutNewsExpires) {
    PeerDeadline::Entry ops[8]; // the tracked operations
    PeerDeadline d(10000);
    d.posted(kPeer, &ops[0], Kind::Send, 0);
    d.posted(kOther, &ops[1], Kind::Send, 0);
    d.completed(&ops[1], 8000);
    d.posted(kOther, &ops[2], Kind::Send, 8000);
    auto v = d.check(12000);
    ASSERT_EQ(v.expired.size(), 1u);
    EXPECT_EQ(v.expired[0], kPeer);
}

TEST(PeerDeadline, AWaitedPeerIsProbedAtHalfTheTimeoutOnce) {
    PeerDeadline::Entry ops[8]; // the tracked operations
    PeerDeadline d(10000);
    d.posted(kPeer, &ops[0], Kind::Recv, 0);
    EXPECT_TRUE(d.check(4999).probe.empty());
    auto v = d.check(5000);
    EXPECT_TRUE(v.expired.empty()); // a receive alone never expires
    ASSERT_EQ(v.probe.size(), 1u);
    EXPECT_EQ(v.probe[0], kPeer);
    EXPECT_TRUE(d.check(6000).probe.empty()); // not again so soon
    // The probe (a send) is out: without an answer the peer expires at the
    // full timeout from its last news.
    d.posted(kPeer, &ops[1], Kind::Send, 5000);
    EXPECT_TRUE(d.check(9999).expired.empty());
    EXPECT_EQ(d.check(10000).expired.size(), 1u);
}

TEST(PeerDeadline, AnsweredProbeKeepsTheWaitGoing) {
    PeerDeadline::Entry ops[8]; // the tracked operations
    PeerDeadline d(10000);
    d.posted(kPeer, &ops[0], Kind::Recv, 0);
    ASSERT_EQ(d.check(5000).probe.size(), 1u);
    d.posted(kPeer, &ops[1], Kind::Send, 5000);
    d.completed(&ops[1], 5100);
    auto v = d.check(10099);
    EXPECT_TRUE(v.expired.empty());
    EXPECT_TRUE(v.probe.empty()); // news at 5100: the next probe half a timeout after it
    EXPECT_EQ(d.check(10100).probe.size(), 1u);
    EXPECT_TRUE(d.check(30000).expired.empty()); // still only waited on
}

TEST(PeerDeadline, DeadPeerHandsBackItsOpsAndRefusesNewOnes) {
    PeerDeadline::Entry ops[8]; // the tracked operations
    PeerDeadline d(10000);
    d.posted(kPeer, &ops[0], Kind::Send, 0);
    d.posted(kPeer, &ops[1], Kind::Recv, 0);
    d.posted(kOther, &ops[2], Kind::Send, 0);
    auto failed = d.declare_dead(kPeer);
    EXPECT_EQ(failed.size(), 2u);
    EXPECT_TRUE(d.dead(kPeer));
    EXPECT_FALSE(d.dead(kOther));
    EXPECT_EQ(d.tracked(), 1u);
    // The provider's late completion of a failed op is not the owner's.
    EXPECT_FALSE(d.completed(&ops[0], 20000));
    EXPECT_FALSE(d.posted(kPeer, &ops[3], Kind::Send, 20000));
    EXPECT_TRUE(d.check(100000).expired.size() == 1u); // kOther only
    EXPECT_TRUE(d.declare_dead(kPeer).empty());        // idempotent
}

TEST(PeerDeadline, ChecksAtMostOncePerIntervalAndOnlyWhenBusy) {
    PeerDeadline::Entry ops[8]; // the tracked operations
    PeerDeadline d(10000, 1000);
    EXPECT_FALSE(d.due(0)); // nothing tracked
    d.posted(kPeer, &ops[0], Kind::Send, 0);
    EXPECT_TRUE(d.due(0));
    EXPECT_FALSE(d.due(999));
    EXPECT_TRUE(d.due(1000));
    d.completed(&ops[0], 1500);
    EXPECT_FALSE(d.due(5000));
}

TEST(PeerDeadline, ReleaseAllHandsBackEveryTrackedOp) {
    PeerDeadline::Entry ops[8]; // the tracked operations
    PeerDeadline d(10000);
    d.posted(kPeer, &ops[0], Kind::Send, 0);
    d.posted(kOther, &ops[1], Kind::Recv, 0);
    EXPECT_EQ(d.release_all().size(), 2u);
    EXPECT_EQ(d.tracked(), 0u);
    EXPECT_FALSE(d.completed(&ops[0], 1)); // no longer tracked
}

// This process computed without progress for longer than the timeout with
// a send out (a rendezvous waiting for its peer): that time is no silence
// of the peer's; only what follows it counts.
TEST(PeerDeadline, TimeAwayFromProgressIsNoSilence) {
    PeerDeadline::Entry ops[2];
    PeerDeadline d(10000);
    ASSERT_TRUE(d.posted(kPeer, &ops[0], Kind::Send, 0));
    ASSERT_TRUE(d.posted(kOther, &ops[1], Kind::Recv, 0));
    d.away(30000, 31000); // back at 31 s after 30 s away
    auto v = d.check(31000);
    EXPECT_TRUE(v.expired.empty()) << "expired for the time this process was away";
    EXPECT_TRUE(v.probe.empty()) << "a waited peer probed for the time away";
    EXPECT_TRUE(d.check(39999).expired.empty());
    v = d.check(40000); // 10 s watched since the post
    ASSERT_EQ(v.expired.size(), 1u);
    EXPECT_EQ(v.expired[0], kPeer);
}

// A peer released from the address vector: its address may name another
// process next, which must not be found dead; one with operations still
// tracked keeps its state.
TEST(PeerDeadline, AForgottenPeersAddressStartsAlive) {
    PeerDeadline::Entry ops[2];
    PeerDeadline d(10000);
    ASSERT_TRUE(d.posted(kPeer, &ops[0], Kind::Send, 0));
    EXPECT_EQ(d.declare_dead(kPeer).size(), 1u);
    EXPECT_TRUE(d.dead(kPeer));
    d.forget_peer(kPeer);
    EXPECT_FALSE(d.dead(kPeer));
    EXPECT_TRUE(d.posted(kPeer, &ops[1], Kind::Send, 100)) << "the next process refused";
    d.forget_peer(kPeer); // tracked: kept
    EXPECT_TRUE(d.completed(&ops[1], 200));
}
