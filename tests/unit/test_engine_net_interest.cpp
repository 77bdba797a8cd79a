// When the matching engine makes the core poll the provider on every
// progress call (the core's net interest): only while something it waits
// for can come from another node.  A receive that only processes of this
// node can match (efa_engine_recv_local) must not hold it, or every
// on-node round trip pays the provider's progress engine on each call.
#include <gtest/gtest.h>

#include <vector>

#include "core.hpp"
#include "net_link_fixture.hpp"

namespace engine_test {
namespace {

class EngineNetInterest : public EngineNet {
  protected:
    int interest() const { return core->net_interest.load(); }
    int post(std::vector<uint8_t> &buf, int32_t t, bool local, Req &r) {
        r.on.complete = on_complete;
        r.on.buf = buf.data();
        r.on.buflen = buf.size();
        return local ? efa_engine_recv_local(e, 5, 0, t, &r.on)
                     : efa_engine_recv(e, 5, EFA_ENGINE_ANY, t, &r.on);
    }
};

TEST_F(EngineNetInterest, LocalReceiveLeavesTheProviderToThePacedPoll) {
    open(8, 0);
    std::vector<uint8_t> buf(64);
    Req local;
    ASSERT_EQ(0, post(buf, 7, true, local));
    progress();
    EXPECT_EQ(0, interest())
        << "a receive only this node can match made the core poll the provider";
    ASSERT_TRUE(efa_engine_cancel(e, &local.on));
}

TEST_F(EngineNetInterest, ReceiveFromAnywhereHoldsItUntilMatched) {
    open(8, 0);
    std::vector<uint8_t> rbuf(64), lbuf(64), sbuf(16, 0x5a);
    Req local, net, sent;
    ASSERT_EQ(0, post(lbuf, 7, true, local));
    ASSERT_EQ(0, post(rbuf, 9, false, net));
    progress();
    EXPECT_EQ(1, interest()) << "a receive a peer on another node may match must poll it";
    note(send(sbuf, 9, false, sent), sent);
    ASSERT_TRUE([&] {
        for (int i = 0; i < 2000000 && !(net.completions && sent.completions); ++i) {
            progress();
        }
        return net.completions && sent.completions;
    }());
    EXPECT_EQ(0, net.on.err);
    EXPECT_EQ(16u, net.on.msg_len);
    progress();
    // Only the local receive waits now: the interest goes with the match.
    EXPECT_EQ(0, interest()) << "the interest outlived the last receive from anywhere";
    ASSERT_TRUE(efa_engine_cancel(e, &local.on));
}

TEST_F(EngineNetInterest, CancelledReceiveFromAnywhereGivesItBack) {
    open(8, 0);
    std::vector<uint8_t> buf(64);
    Req net;
    ASSERT_EQ(0, post(buf, 9, false, net));
    progress();
    EXPECT_EQ(1, interest());
    ASSERT_TRUE(efa_engine_cancel(e, &net.on));
    progress();
    EXPECT_EQ(0, interest()) << "a cancelled receive still counted as waiting on the provider";
}

} // namespace
} // namespace engine_test
