// Matching of the matching engine (match.hpp): MPI's order, the
// wildcards, negative tags, cancel and probe.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "match.hpp"

namespace {

using efa::engine::Envelope;
using efa::engine::Matcher;
using efa::engine::Message;

efa_engine_req_t recv_for(uint32_t cid, int32_t src, int32_t tag) {
    efa_engine_req_t r{};
    r.cid = cid;
    r.src = src;
    r.tag = tag;
    return r;
}

Message *message(uint32_t cid, int32_t src, int32_t tag, uint64_t id) {
    auto *m = static_cast<Message *>(calloc(1, sizeof(Message)));
    m->env = Envelope{cid, src, tag};
    m->id = id;
    return m;
}

TEST(EngineMatch, Rules) {
    using efa::engine::matches;
    const Envelope m{5, 3, 7};
    EXPECT_TRUE(matches(5, 3, 7, m));
    EXPECT_TRUE(matches(5, EFA_ENGINE_ANY, 7, m));
    EXPECT_TRUE(matches(5, 3, EFA_ENGINE_ANY, m));
    EXPECT_TRUE(matches(5, EFA_ENGINE_ANY, EFA_ENGINE_ANY, m));
    EXPECT_FALSE(matches(6, 3, 7, m)); // another communicator
    EXPECT_FALSE(matches(5, 2, 7, m));
    EXPECT_FALSE(matches(5, 3, 8, m));
    const Envelope internal{5, 3, -12}; // Open MPI's collectives
    EXPECT_FALSE(matches(5, 3, EFA_ENGINE_ANY, internal));
    EXPECT_TRUE(matches(5, 3, -12, internal));
}

TEST(EngineMatch, ArrivalsTakeTheFirstPostedReceive) {
    Matcher mt;
    auto any = recv_for(1, EFA_ENGINE_ANY, EFA_ENGINE_ANY);
    auto exact = recv_for(1, 2, 9);
    EXPECT_EQ(nullptr, mt.post(&any));
    EXPECT_EQ(nullptr, mt.post(&exact));
    EXPECT_EQ(2u, mt.posted());
    // Both match (1, 2, 9): the one posted first takes it.
    EXPECT_EQ(&any, mt.arrive(Envelope{1, 2, 9}));
    EXPECT_EQ(&exact, mt.arrive(Envelope{1, 2, 9}));
    EXPECT_EQ(nullptr, mt.arrive(Envelope{1, 2, 9}));
    EXPECT_EQ(0u, mt.posted());
}

TEST(EngineMatch, ReceivesTakeTheFirstArrivedMessage) {
    Matcher mt;
    mt.add_unexpected(message(1, 0, 4, 100));
    mt.add_unexpected(message(1, 1, 4, 101));
    mt.add_unexpected(message(1, 0, 4, 102));
    auto from0 = recv_for(1, 0, 4);
    Message *m = mt.post(&from0);
    ASSERT_NE(nullptr, m);
    EXPECT_EQ(100u, m->id);
    free(m);
    auto any = recv_for(1, EFA_ENGINE_ANY, 4);
    m = mt.post(&any);
    ASSERT_NE(nullptr, m);
    EXPECT_EQ(101u, m->id); // arrival order across sources
    free(m);
    auto other_comm = recv_for(2, EFA_ENGINE_ANY, EFA_ENGINE_ANY);
    EXPECT_EQ(nullptr, mt.post(&other_comm)); // waits: nothing of comm 2
    EXPECT_EQ(1u, mt.unexpected());
    EXPECT_TRUE(mt.cancel(&other_comm));
    mt.drain_unexpected([](Message *x) { free(x); });
}

TEST(EngineMatch, WildcardTagSkipsNegativeTags) {
    Matcher mt;
    mt.add_unexpected(message(1, 0, -5, 1));
    mt.add_unexpected(message(1, 0, 3, 2));
    auto any = recv_for(1, 0, EFA_ENGINE_ANY);
    Message *m = mt.post(&any);
    ASSERT_NE(nullptr, m);
    EXPECT_EQ(2u, m->id);
    free(m);
    EXPECT_EQ(1u, mt.unexpected());
    mt.drain_unexpected([](Message *x) { free(x); });
}

TEST(EngineMatch, CancelOnlyWhileWaiting) {
    Matcher mt;
    auto r = recv_for(1, 0, 0);
    EXPECT_EQ(nullptr, mt.post(&r));
    EXPECT_TRUE(mt.cancel(&r));
    EXPECT_FALSE(mt.cancel(&r)); // gone already
    EXPECT_EQ(nullptr, mt.arrive(Envelope{1, 0, 0}));
    auto r2 = recv_for(1, 0, 0);
    EXPECT_EQ(nullptr, mt.post(&r2));
    EXPECT_EQ(&r2, mt.arrive(Envelope{1, 0, 0}));
    EXPECT_FALSE(mt.cancel(&r2)); // matched
}

TEST(EngineMatch, ProbeLooksOrTakes) {
    Matcher mt;
    mt.add_unexpected(message(1, 3, 8, 7));
    Message *seen = mt.probe(1, EFA_ENGINE_ANY, 8, false);
    ASSERT_NE(nullptr, seen);
    EXPECT_EQ(1u, mt.unexpected());
    EXPECT_EQ(nullptr, mt.probe(1, 2, 8, false));
    Message *taken = mt.probe(1, 3, EFA_ENGINE_ANY, true);
    EXPECT_EQ(seen, taken);
    EXPECT_EQ(0u, mt.unexpected());
    auto r = recv_for(1, 3, 8);
    EXPECT_EQ(nullptr, mt.post(&r)); // the claimed message is no one else's
    EXPECT_TRUE(mt.cancel(&r));
    free(taken);
}

// A withdrawal takes only the message of the ring and number named: each
// sender numbers its own messages, so another ring's message of the same
// number stays; number 0 (no message's: a standard-mode eager frame names
// neither sender nor request, and used to keep id 0 whoever sent it) never
// withdraws anything.
TEST(EngineMatch, WithdrawOnlyTheNamedRingsMessage) {
    Matcher mt;
    Message *other = message(1, 4, 8, 0); // ring 0's first message
    other->via = 0;
    other->seq = 1;
    Message *named = message(1, 2, 8, 0); // ring 2's first message
    named->via = 2;
    named->seq = 1;
    mt.add_unexpected(other);
    mt.add_unexpected(named);
    EXPECT_EQ(nullptr, mt.withdraw(0, 0)) << "number 0 withdrew a message";
    EXPECT_EQ(nullptr, mt.withdraw(2, 0));
    EXPECT_EQ(nullptr, mt.withdraw(3, 1)) << "another ring's cancel withdrew it";
    EXPECT_EQ(nullptr, mt.withdraw(2, 2)) << "another number withdrew it";
    EXPECT_EQ(2u, mt.unexpected());
    EXPECT_EQ(named, mt.withdraw(2, 1));
    EXPECT_EQ(nullptr, mt.withdraw(2, 1)); // gone already
    EXPECT_EQ(1u, mt.unexpected());
    EXPECT_EQ(other, mt.probe(1, 4, 8, true));
    free(named);
    free(other);
}

} // namespace
