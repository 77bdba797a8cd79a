// A receive in device memory from another node (the engine's read
// rendezvous, engine_read.cpp, and its DATA frames, engine_device.cpp),
// on the fake device, whose memory the CPU cannot touch: a read goes in
// pieces of net_device_piece, each copied on to the device buffer as it
// lands in the host buffer; a streamed message is copied on a piece at a
// time as its frames complete one.  Either way the receive says so
// (device_landed) once every byte went.  Where it cannot (no pieces asked
// for, a failed copy), the bytes stay in the host buffer for the owner to
// copy, and nothing says landed.  That the copies overlap the transfer
// still under way is a matter of time, which bench/bench_fake_device
// measures (docs/PERFORMANCE.md); here the fixture has one rail (striped
// pieces: the same callback per piece).
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
    // Reads off: every rendezvous message streams as DATA frames.
    void open_streaming() {
        read_min = 0;
        open(16, 4096);
        ASSERT_NE(nullptr, e);
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
    // One message of len bytes that must land on the device: the receive
    // says so, and the device buffer holds every byte.
    void lands_on_device(size_t len) {
        std::vector<uint8_t> dev, host;
        const Req r = one(len, len, &dev, &host);
        EXPECT_EQ(0, r.on.err);
        EXPECT_TRUE(r.on.device_landed);
        EXPECT_EQ(pattern(len, 7), dev) << "the device buffer does not hold the message";
    }
    // 90000 bytes into a receive of 50000: truncated, and the device holds
    // what the buffer holds.
    void lands_truncated() {
        std::vector<uint8_t> dev, host;
        const Req r = one(90000, 50000, &dev, &host);
        EXPECT_EQ(-FI_ETRUNC, r.on.err);
        EXPECT_TRUE(r.on.device_landed);
        const auto msg = pattern(90000, 7);
        EXPECT_EQ(std::vector<uint8_t>(msg.begin(), msg.begin() + 50000), dev);
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
        EXPECT_EQ(0u, stats().device_stream_landed);
    }
};

} // namespace

TEST_F(EngineNetReadDevice, EveryPieceIsCopiedOnAsItLands) {
    device_piece = 30000;
    if (!open_reading()) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    lands_on_device(100001); // 4 pieces, the last of 10001 bytes
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
    lands_truncated();
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

// A read that fails is streamed instead: whatever pieces the read copied
// on, the DATA frames land in the host buffer from the first byte again
// and go on to the device piece by piece, and the stream says landed.
TEST_F(EngineNetReadDevice, AFailedReadIsStreamedOnToTheDevice) {
    device_piece = 20000;
    fail_reads = true;
    if (!open_reading()) {
        GTEST_SKIP() << "the provider has no FI_RMA";
    }
    lands_on_device(100000);
    const auto s = stats();
    EXPECT_EQ(1u, s.streamed);
    EXPECT_EQ(0u, s.device_read_landed);
    EXPECT_EQ(1u, s.device_stream_landed);
    EXPECT_EQ(5u, s.device_stream_pieces);
}

// Streamed (no reads): each piece goes on once the frames complete it, the
// rest with the last frame: 100001 bytes in pieces of 30000 are 4 copies
// (frames are smaller than a piece).
TEST_F(EngineNetReadDevice, AStreamedMessageGoesOnPieceByPiece) {
    device_piece = 30000;
    open_streaming();
    lands_on_device(100001);
    const auto s = stats();
    EXPECT_EQ(1u, s.streamed);
    EXPECT_EQ(0u, s.net_read);
    EXPECT_EQ(1u, s.device_stream_landed);
    EXPECT_EQ(4u, s.device_stream_pieces);
}

// A streamed message longer than the receive: the device holds what the
// buffer holds, and nothing past it is copied.
TEST_F(EngineNetReadDevice, ATruncatedStreamLandsWhatTheBufferHolds) {
    device_piece = 16384;
    open_streaming();
    lands_truncated();
    EXPECT_EQ(1u, stats().device_stream_landed);
}

// A copy that fails mid-stream leaves every byte to the owner.
TEST_F(EngineNetReadDevice, AFailedStreamCopyLeavesTheMessageToTheOwner) {
    device_piece = 20000;
    open_streaming();
    fail_copy(2);
    left_to_owner(100000);
    EXPECT_EQ(1u, stats().streamed);
    EXPECT_EQ(1u, stats().device_stream_pieces); // the first, before the failed one
}

// Without pieces asked for, a streamed message stays whole in the host
// buffer for the owner.
TEST_F(EngineNetReadDevice, AStreamWithoutPiecesIsLeftToTheOwner) {
    open_streaming();
    left_to_owner(70000);
    EXPECT_EQ(1u, stats().streamed);
    EXPECT_EQ(0u, stats().device_stream_pieces);
}
