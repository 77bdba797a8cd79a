// The on-node engine's provider messages at their limits (onnode_net.hpp):
// frames that fill a buffer whose size is not a multiple of the frame
// alignment (an odd common_efa_direct_mode_mtu).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "efa_onnode.h"
#include "onnode_net_fixture.hpp"
#include "onnode_test_req.hpp"

namespace {

using onnode_test::note;
using onnode_test::OnnodeNet;
using onnode_test::pattern;
using onnode_test::Req;

class OnnodeNetOddMtu : public OnnodeNet, public ::testing::WithParamInterface<int> {
  protected:
    // Every size in [from, to), count at a time, synchronous or not: each
    // arrives whole, and no send or receive fails.
    void send_sizes(size_t from, size_t to, bool sync, int32_t t) {
        constexpr size_t kBatch = 48;
        for (size_t first = from; first < to; first += kBatch) {
            const size_t n = std::min(kBatch, to - first);
            std::vector<std::vector<uint8_t>> bufs, got;
            std::vector<Req> sends(n), recvs(n);
            for (size_t i = 0; i < n; ++i) {
                got.emplace_back(first + i + 8);
                recv(got.back(), t, recvs[i]);
            }
            for (size_t i = 0; i < n; ++i) {
                bufs.push_back(pattern(first + i, static_cast<uint8_t>(first + i)));
                note(send(bufs.back(), t, sync, sends[i]), sends[i]);
            }
            ASSERT_TRUE(wait_all(recvs)) << "MTU " << GetParam() << ": sizes " << first << "..";
            ASSERT_TRUE(wait_all(sends)) << "MTU " << GetParam() << ": sizes " << first << "..";
            for (size_t i = 0; i < n; ++i) {
                ASSERT_EQ(0, sends[i].on.err) << "MTU " << GetParam() << ", " << first + i << " B";
                ASSERT_EQ(0, recvs[i].on.err) << "MTU " << GetParam() << ", " << first + i << " B";
                ASSERT_EQ(first + i, recvs[i].on.msg_len);
                got[i].resize(first + i);
                ASSERT_EQ(bufs[i], got[i]) << "MTU " << GetParam() << ", " << first + i << " B";
            }
        }
    }
};

} // namespace

// Every size up to past the eager limit (net_eager 1024 here, less where
// the MTU is smaller), eager and synchronous, and messages streamed in
// DATA frames that fill a whole provider message: at MTU 1025 a 969-byte
// synchronous send took a 1001-byte frame, padded to 1032 bytes in the
// message, which the provider refused, and the peer was failed.
TEST_P(OnnodeNetOddMtu, EverySizeUpToTheEagerLimitAndStreamed) {
    open(16, 4096, false, GetParam());
    send_sizes(0, 1100, true, 31);
    send_sizes(0, 1100, false, 32);
    send_sizes(20000, 20004, false, 33); // streamed
    const auto s = stats();
    EXPECT_GT(s.streamed, 0u);
    EXPECT_EQ(0u, s.dropped);
}

INSTANTIATE_TEST_SUITE_P(Mtus, OnnodeNetOddMtu, ::testing::Values(1025, 1031, 1100, 2047, 4097));
