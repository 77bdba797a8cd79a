// A rendezvous read from another node into a receive in device memory
// (engine_read.cpp, on the fake device, whose memory the CPU cannot
// touch): the read goes in pieces of net_device_piece, each copied on to
// the device buffer as it lands in the host buffer, and the receive says
// so (device_landed) once every byte went.  Where it cannot (no pieces
// asked for, a failed copy, a failed read streamed instead), the bytes
// stay in the host buffer for the owner to copy, and nothing says landed.
// That the copies overlap the reads still out is a matter of time, which
// bench/bench_fake_device measures (docs/PERFORMANCE.md); here the fixture
// has one rail (striped pieces: the same callback per piece).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "efa_device.h"
#include "efa_engine.h"
#include "net_link_fixture.hpp"

namespace {

using engine_test::EngineNet;
using engine_test::note;
using engine_test::pattern;
using engine_test::Req;

// The fake's copy, failing the Nth call from install on (0: never).
efa_device_ops_t g_ops;
int g_copies_left = 0;
int failing_copy(void *dst, const void *src, size_t len) {
    if (g_copies_left > 0 && 0 == --g_copies_left) {
        return -FI_EIO;
    }
    return efa_fake_device_ops()->copy(dst, src, len);
}

class EngineNetReadDevice : public EngineNet {
  protected:
    void SetUp() override { efa_device_install(efa_fake_device_ops()); }
    void TearDown() override {
        EngineNet::TearDown();
        efa_device_install(nullptr);
        EXPECT_EQ(0u, efa_fake_device_live()) << "an allocation left behind";
    }
    // The nth copy fails (the fake's copy otherwise).
    void fail_copy(int nth) {
        g_ops = *efa_fake_device_ops();
        g_ops.copy = failing_copy;
        g_copies_left = nth;
        efa_device_install(&g_ops);
    }
    bool open_reading() {
        read_min = 4096;
        open(16, 4096);
        return nullptr != e && efa_core_get_info(core)->has_rma;
    }
    // One message of len bytes from host memory into a receive of buflen
    // bytes in device memory (its host buffer beside it, as mtl_efa posts
    // one), posted first.  Returns the receive; *dev and *host: the bytes
    // each buffer holds after.
    Req one(size_t len, size_t buflen, std::vector<uint8_t> *dev, std::vector<uint8_t> *host) {
        const auto msg = pattern(len, 7);
        void *d = efa_fake_device_alloc(buflen);
        std::vector<uint8_t> got(buflen, 0xee);
        std::vector<Req> sends(1), recvs(1);
        recvs[0].on.device_buf = d;
        recv(got, 31, recvs[0]);
        note(send(msg, 31, false, sends[0]), sends[0]);
        EXPECT_TRUE(wait_all(recvs));
        EXPECT_TRUE(wait_all(sends));
        dev->assign(buflen, 0);
        EXPECT_EQ(0, efa_fake_device_ops()->copy(dev->data(), d, buflen));
        efa_fake_device_free(d);
        *host = got;
        return recvs[0];
    }
    // One message of len bytes that must be left to the owner: delivered
    // whole into the host buffer, the receive not saying landed.
    void left_to_owner(size_t len) {
        std::vector<uint8_t> dev, host;
        const Req r = one(len, len, &dev, &host);
        EXPECT_EQ(0, r.on.err);
        EXPECT_FALSE(r.on.device_landed);
        EXPECT_EQ(pattern(len, 7), host);
        EXPECT_EQ(0u, stats().device_read_landed);
    }
};

} // namespace

TEST_F(EngineNetReadDevice, EveryPieceIsCopiedOnAsItLands) {
    device_piece = 30000;
    if (!open_reading()) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    std::vector<uint8_t> dev, host;
    const Req r = one(100001, 100001, &dev, &host); // 4 pieces, the last of 10001 bytes
    EXPECT_EQ(0, r.on.err);
    EXPECT_TRUE(r.on.device_landed);
    EXPECT_EQ(pattern(100001, 7), dev) << "the device buffer does not hold the message";
    const auto s = stats();
    EXPECT_EQ(1u, s.net_read);
    EXPECT_EQ(1u, s.device_read_landed);
    EXPECT_EQ(4u, s.device_read_pieces);
}

TEST_F(EngineNetReadDevice, ATruncatedReadLandsWhatTheBufferHolds) {
    device_piece = 16384;
    if (!open_reading()) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    std::vector<uint8_t> dev, host;
    const Req r = one(90000, 50000, &dev, &host);
    EXPECT_EQ(-FI_ETRUNC, r.on.err);
    EXPECT_TRUE(r.on.device_landed);
    const auto msg = pattern(90000, 7);
    EXPECT_EQ(std::vector<uint8_t>(msg.begin(), msg.begin() + 50000), dev);
    EXPECT_EQ(4u, stats().device_read_pieces); // 3 x 16384 + 848
}

// Without pieces asked for, the read goes whole into the host buffer and
// the owner copies it (device_landed unset, the device buffer untouched).
TEST_F(EngineNetReadDevice, WithoutPiecesTheOwnerCopies) {
    if (!open_reading()) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    left_to_owner(70000);
    EXPECT_EQ(0u, stats().device_read_pieces);
}

// A copy that fails leaves every byte to the owner: the host buffer holds
// the whole message, and the receive does not say landed.
TEST_F(EngineNetReadDevice, AFailedCopyLeavesTheMessageToTheOwner) {
    device_piece = 20000;
    if (!open_reading()) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    fail_copy(2);
    left_to_owner(100000);
}

// A read that fails is streamed instead: the DATA frames land in the host
// buffer, and whatever pieces went on before do not make it landed.
TEST_F(EngineNetReadDevice, AFailedReadStreamsIntoTheHostBuffer) {
    device_piece = 20000;
    fail_reads = true;
    if (!open_reading()) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    left_to_owner(100000);
    EXPECT_EQ(1u, stats().streamed);
}
