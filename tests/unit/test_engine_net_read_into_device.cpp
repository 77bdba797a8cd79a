// A receive in device memory that the provider takes (device_by_provider:
// FI_HMEM granted) is read from another node straight into the device
// buffer's registration (engine_read.cpp): its bytes never pass through
// the host buffer beside it.  Where the device cannot describe the buffer
// for registration, or the flag is off, the read lands in the host buffer
// and is copied on piece by piece as before; a read into the device that
// fails asks for DATA frames, copied on as they come.  On the shm provider
// with the fake device visible as FI_HMEM_SYSTEM memory (the fixture's
// core); one allocation made before it was visible is the kind no
// provider can take.
#include <gtest/gtest.h>

#include <vector>

#include "efa_device.h"
#include "efa_engine.h"
#include "efa_mr.h"
#include "net_link_fixture.hpp"

namespace {

using engine_test::EngineNet;
using engine_test::note;
using engine_test::pattern;
using engine_test::Req;

class EngineNetReadIntoDevice : public EngineNet {
  protected:
    void TearDown() override {
        EngineNet::TearDown();
        efa_fake_device_visible(false);
        EXPECT_EQ(0u, efa_fake_device_live()) << "an allocation left behind";
    }
    // A core with FI_HMEM and RMA, reading from read_min (4096), a device
    // receive's host-bound reads in pieces of 8 KiB.
    bool open_hmem() {
        fake_hmem = true;
        read_min = 4096;
        device_piece = 8192;
        open(16, 4096);
        return nullptr != e && efa_core_get_info(core)->has_rma && efa_core_get_info(core)->hmem;
    }
    efa_engine_stats_t stats() const {
        efa_engine_stats_t s{};
        efa_engine_get_stats(e, &s);
        return s;
    }
    struct Got {
        Req recv;
        std::vector<uint8_t> dev, host;
    };
    // len bytes from host memory into a device receive d of buflen bytes
    // (by_provider as given), its host buffer of 0xee beside it.
    Got one(void *d, size_t len, size_t buflen, bool by_provider) {
        const auto msg = pattern(len, 23);
        Got g;
        g.host.assign(buflen, 0xee);
        std::vector<Req> sends(1), recvs(1);
        recvs[0].on.device_buf = d;
        recvs[0].on.device_by_provider = by_provider;
        recv(g.host, 51, recvs[0]);
        note(send(msg, 51, false, sends[0]), sends[0]);
        EXPECT_TRUE(wait_all(recvs));
        EXPECT_TRUE(wait_all(sends));
        EXPECT_EQ(0, sends[0].on.err);
        g.dev.assign(buflen, 0);
        EXPECT_EQ(0, efa_fake_device_ops()->copy(g.dev.data(), d, buflen));
        g.recv = recvs[0];
        return g;
    }
};

TEST_F(EngineNetReadIntoDevice, AReadGoesStraightIntoTheDeviceBuffer) {
    ASSERT_TRUE(open_hmem()) << "shm without FI_RMA or FI_HMEM here";
    void *d = efa_fake_device_alloc(300000);
    ASSERT_NE(nullptr, d);
    const efa_engine_stats_t before = stats();
    const Got g = one(d, 300000, 300000, true);
    const efa_engine_stats_t s = stats();
    EXPECT_EQ(0, g.recv.on.err);
    EXPECT_TRUE(g.recv.on.device_landed);
    EXPECT_EQ(pattern(300000, 23), g.dev);
    EXPECT_EQ(std::vector<uint8_t>(300000, 0xee), g.host) << "the bytes passed through the host";
    EXPECT_EQ(before.device_read_direct + 1, s.device_read_direct);
    EXPECT_EQ(before.net_read + 1, s.net_read);
    EXPECT_EQ(before.device_read_pieces, s.device_read_pieces) << "copied on piece by piece";
    efa_fake_device_free(d);
}

// 90000 bytes into a device receive of 50000: truncated, the device
// holding what fits.
TEST_F(EngineNetReadIntoDevice, ATruncatedReadFillsTheDeviceBuffer) {
    ASSERT_TRUE(open_hmem()) << "shm without FI_RMA or FI_HMEM here";
    void *d = efa_fake_device_alloc(50000);
    ASSERT_NE(nullptr, d);
    const Got g = one(d, 90000, 50000, true);
    EXPECT_EQ(-FI_ETRUNC, g.recv.on.err);
    EXPECT_TRUE(g.recv.on.device_landed);
    const auto msg = pattern(90000, 23);
    EXPECT_EQ(std::vector<uint8_t>(msg.begin(), msg.begin() + 50000), g.dev);
    EXPECT_EQ(std::vector<uint8_t>(50000, 0xee), g.host) << "the bytes passed through the host";
    efa_fake_device_free(d);
}

// Without the flag the host buffer takes the read, copied on in pieces.
TEST_F(EngineNetReadIntoDevice, WithoutTheFlagTheHostBufferTakesTheRead) {
    ASSERT_TRUE(open_hmem()) << "shm without FI_RMA or FI_HMEM here";
    void *d = efa_fake_device_alloc(50000);
    ASSERT_NE(nullptr, d);
    const efa_engine_stats_t before = stats();
    const Got g = one(d, 50000, 50000, false);
    const efa_engine_stats_t s = stats();
    EXPECT_TRUE(g.recv.on.device_landed);
    EXPECT_EQ(pattern(50000, 23), g.dev);
    EXPECT_EQ(pattern(50000, 23), g.host);
    EXPECT_EQ(before.device_read_direct, s.device_read_direct);
    EXPECT_EQ(before.device_read_landed + 1, s.device_read_landed);
    efa_fake_device_free(d);
}

// Memory the device cannot describe for registration (made before the
// fake was visible: no provider could take it) is read into the host
// buffer instead, never by its device address.
TEST_F(EngineNetReadIntoDevice, AnUnregistrableBufferIsReadIntoTheHostBuffer) {
    void *blind = efa_fake_device_alloc(50000); // (before open_hmem makes the fake visible)
    ASSERT_NE(nullptr, blind);
    ASSERT_TRUE(open_hmem()) << "shm without FI_RMA or FI_HMEM here";
    const efa_engine_stats_t before = stats();
    const Got g = one(blind, 50000, 50000, true);
    const efa_engine_stats_t s = stats();
    EXPECT_EQ(0, g.recv.on.err);
    EXPECT_EQ(pattern(50000, 23), g.dev);
    EXPECT_EQ(before.device_read_direct, s.device_read_direct);
    EXPECT_EQ(before.device_read_landed + 1, s.device_read_landed);
    efa_fake_device_free(blind);
}

// The read into the device fails: the receiver asks for DATA frames, which
// land in the host buffer and go on to the device piece by piece.
TEST_F(EngineNetReadIntoDevice, AFailedReadIntoTheDeviceIsStreamed) {
    fail_reads = true;
    ASSERT_TRUE(open_hmem()) << "shm without FI_RMA or FI_HMEM here";
    void *d = efa_fake_device_alloc(50000);
    ASSERT_NE(nullptr, d);
    const efa_engine_stats_t before = stats();
    const Got g = one(d, 50000, 50000, true);
    const efa_engine_stats_t s = stats();
    EXPECT_EQ(0, g.recv.on.err);
    EXPECT_TRUE(g.recv.on.device_landed);
    EXPECT_EQ(pattern(50000, 23), g.dev);
    EXPECT_EQ(before.device_read_direct, s.device_read_direct);
    EXPECT_EQ(before.net_read_failed + 1, s.net_read_failed);
    EXPECT_EQ(before.device_stream_landed + 1, s.device_stream_landed);
    efa_fake_device_free(d);
}

} // namespace
