// A send from device memory to another node under own matching
// (efa_engine_send_device_read): its RTS offers the buffer's device
// registration for reading, so the receiver's read takes the bytes from
// device memory and the sender copies nothing; where the read fails, the
// receiver asks for DATA frames and the sender streams them through a host
// piece read with the device's copy.  On the shm provider with the fake
// device visible as FI_HMEM_SYSTEM memory (the fixture's core).
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

class EngineNetDeviceSend : public EngineNet {
  protected:
    void TearDown() override {
        EngineNet::TearDown();
        efa_fake_device_visible(false);
    }
    // A core with FI_HMEM and RMA, reading from read_min (4096).
    bool open_hmem() {
        fake_hmem = true;
        read_min = 4096;
        device_piece = 8192; // (the sender's host pieces where it streams)
        open(16, 4096);
        return nullptr != e && efa_core_get_info(core)->has_rma && efa_core_get_info(core)->hmem;
    }
    efa_engine_stats_t stats() const {
        efa_engine_stats_t s{};
        efa_engine_get_stats(e, &s);
        return s;
    }
    // len bytes from a device buffer, sent with its registration, into a
    // host receive: the bytes received.
    std::vector<uint8_t> one(size_t len) {
        const auto msg = pattern(len, 11);
        void *d = efa_fake_device_alloc(len);
        EXPECT_NE(nullptr, d);
        EXPECT_EQ(0, efa_device_copy(d, msg.data(), len));
        int err = 0;
        efa_mr_t *mr = efa_core_mr_acquire_device(core, d, len, FI_REMOTE_READ, &err);
        EXPECT_NE(nullptr, mr) << err;
        std::vector<uint8_t> got(len, 0xee);
        std::vector<Req> sends(1), recvs(1);
        recv(got, 41, recvs[0]);
        sends[0].on.complete = engine_test::on_complete;
        note(efa_engine_send_device_read(e, 0, 5, 0, 41, d, len, false, mr, &sends[0].on),
             sends[0]);
        EXPECT_TRUE(wait_all(recvs));
        EXPECT_TRUE(wait_all(sends));
        EXPECT_EQ(0, sends[0].on.err);
        EXPECT_EQ(0, recvs[0].on.err);
        efa_fake_device_free(d);
        EXPECT_EQ(got, msg);
        return got;
    }
};

TEST_F(EngineNetDeviceSend, ADeviceSendIsReadFromItsRegistration) {
    ASSERT_TRUE(open_hmem()) << "shm without FI_RMA or FI_HMEM here";
    const efa_engine_stats_t before = stats();
    one(300000);
    one(4096); // (the read size exactly)
    const efa_engine_stats_t s = stats();
    EXPECT_EQ(before.device_send_read + 2, s.device_send_read);
    EXPECT_EQ(before.net_read + 2, s.net_read) << "not read by RMA";
    EXPECT_EQ(before.device_send_staged, s.device_send_staged) << "copied through the host";
}

// The read fails: the receiver asks for DATA frames, and the sender
// streams them from host pieces the device copied, never from the device
// address itself.
TEST_F(EngineNetDeviceSend, AFailedReadIsStreamedFromTheDevice) {
    fail_reads = true;
    ASSERT_TRUE(open_hmem()) << "shm without FI_RMA or FI_HMEM here";
    const efa_engine_stats_t before = stats();
    one(50000);
    const efa_engine_stats_t s = stats();
    EXPECT_EQ(before.device_send_read + 1, s.device_send_read);
    EXPECT_EQ(before.device_send_staged + 1, s.device_send_staged);
    EXPECT_EQ(before.device_send_pieces + 7, s.device_send_pieces) << "50000 bytes in 8 KiB pieces";
}

// Refused where it cannot apply; the registration stays the caller's.
TEST_F(EngineNetDeviceSend, AReadNeedsARegistrationAndAPeerOnAnotherNode) {
    ASSERT_TRUE(open_hmem()) << "shm without FI_RMA or FI_HMEM here";
    void *d = efa_fake_device_alloc(8192);
    Req s;
    s.on.complete = engine_test::on_complete;
    EXPECT_EQ(-FI_EINVAL,
              efa_engine_send_device_read(e, 0, 5, 0, 1, d, 8192, false, nullptr, &s.on));
    // ... and the IPC path is for a peer of this node only.
    EXPECT_EQ(-FI_EOPNOTSUPP, efa_engine_send_device(e, 0, 5, 0, 1, d, 8192, false, &s.on));
    EXPECT_EQ(0, s.completions);
    efa_fake_device_free(d);
}

} // namespace
