// A read rendezvous (core_rdv_take.cpp) into a device buffer's own
// registration, on shm with the fake device registered as FI_HMEM (read
// rendezvous opened by the test, as on EFA): read
// straight into it; and where the provider refuses the device buffer
// (common_efa_debug_fake_device_refuse_post: 1 at the post, 2 from the
// backlog) read again into a host buffer and copied on to the device, the
// sender answered with success either way; device memory stops going to
// the provider from then on.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_rdv.hpp"
#include "core_test_op.hpp"
#include "core_test_rdv.hpp"
#include "core_test_params.hpp"
#include "core_with_self.hpp"
#include "efa_core_rdv.h"
#include "efa_device.h"
#include "efa_stage.h"
#include "efa_tag.h"

namespace {

constexpr size_t kLen = 256 * 1024;
constexpr uint64_t kEnvelope = 0x2b; // communicator 0, tag 43

using Offer = RdvTestOffer;
using Taken = RdvTestTaken;

struct Outcome {
    int taken_err = 1, offer_result = 1;
    bool bytes_right = false;
    uint64_t through_host = 0, refusals = 0;
    bool device_registers_after = false;
};

// One message of kLen host bytes offered to this core itself and taken
// into a fake device buffer registered for it; piece_max: the provider's
// largest read, where not 0 (the read then goes in pieces).
Outcome read_into_device(int refuse_post, size_t piece_max = 0) {
    Outcome out;
    efa_core_params_t p = core_test_params("shm");
    p.debug_fake_device = true;
    p.debug_fake_device_hmem = true;
    p.hmem = true;
    p.debug_fake_device_refuse_post = refuse_post;
    CoreWithSelf self;
    if (!self.open(p)) {
        ADD_FAILURE() << "no core on shm";
        return out;
    }
    efa_core_t *core = self.core();
    efa_ctx_t *ctx = efa_core_ctx(core, 0);
    // The stand-ins that open read rendezvous grant no FI_HMEM, and shm,
    // which does, keeps it closed for withdrawal's sake (a peek that finds
    // nothing never completes there), which this test does not use: it is
    // opened here as on EFA, which has both.
    if (!efa_core_can_rdv(core)) {
        core->withdraw_on = true;
        if (efa::control_open(core) || !efa_core_can_rdv(core)) {
            ADD_FAILURE() << "no read rendezvous on shm";
            return out;
        }
    }
    if (piece_max) {
        core->info.max_rma_size = piece_max;
    }
    const efa_tag_codec_t codec = efa_tag_codec_make(&efa_core_get_info(core)->tag_layout);
    const uint64_t tag = efa_tag_codec_with_seq(&codec, kEnvelope, 5) | codec.rdv_bit;
    std::vector<uint8_t> src(kLen), back(kLen, 0);
    for (size_t i = 0; i < kLen; ++i) {
        src[i] = static_cast<uint8_t>(i * 13 + 1);
    }
    int err = 0;
    efa_mr_t *smr = efa_core_mr_acquire(core, src.data(), kLen, FI_REMOTE_READ, &err);
    void *dev = efa_fake_device_alloc(kLen);
    efa_mr_t *dmr = dev ? efa_core_mr_acquire_device(core, dev, kLen, FI_READ, &err) : nullptr;
    if (!smr || !dmr) {
        ADD_FAILURE() << "registration: " << err;
        for (efa_mr_t *mr : {smr, dmr}) {
            if (mr) {
                efa_core_mr_release(core, mr);
            }
        }
        efa_fake_device_free(dev);
        return out;
    }
    Offer offer;
    CoreTestOp tagged, recv;
    EXPECT_EQ(efa_ctx_rdv_offer(ctx, self.self()->addr[0], tag, 0, smr, src.data(), kLen,
                                &tagged.op, &offer.o),
              0);
    EXPECT_EQ(efa_ctx_trecv(ctx, nullptr, 0, nullptr, FI_ADDR_UNSPEC, kEnvelope, codec.seq_mask,
                            &recv.op),
              0);
    core_test_wait(core, recv, 10);
    Taken taken;
    EXPECT_EQ(efa_ctx_rdv_take_mr(ctx, self.self(), tag, dev, kLen, dmr, Taken::cb, &taken), 0);
    for (int i = 0; i < 100000 && !(taken.done && offer.done); ++i) {
        efa_core_progress(core);
    }
    core_test_wait(core, tagged, 5);
    out.taken_err = taken.done ? taken.err : 1;
    out.offer_result = offer.done ? offer.result : 1;
    out.bytes_right =
        0 == efa_device_copy(back.data(), dev, kLen) && 0 == memcmp(back.data(), src.data(), kLen);
    {
        std::lock_guard<std::mutex> guard(core->rdv->lock);
        out.through_host = core->rdv->through_host;
    }
    uint64_t after = 0;
    efa_core_mr_device_refusals(core, &out.refusals, &after);
    efa_core_mr_release(core, dmr);
    efa_core_mr_release(core, smr);
    // (A new allocation, so that no cached registration answers.)
    void *other = efa_fake_device_alloc(4096);
    efa_mr_t *omr = efa_core_mr_acquire_device(core, other, 4096, FI_READ, &err);
    out.device_registers_after = nullptr != omr;
    if (omr) {
        efa_core_mr_release(core, omr);
    }
    efa_fake_device_free(other);
    efa_fake_device_free(dev);
    efa_stage_trim(); // (the host buffer left idle in the process's pool)
    return out;
}

class CoreRdvDevice : public ::testing::Test {
  protected:
    void TearDown() override {
        efa_fake_device_visible(false); // (the core's open made it so, for the process)
    }
};

TEST_F(CoreRdvDevice, ReadStraightIntoTheDeviceRegistration) {
    const Outcome o = read_into_device(0);
    EXPECT_EQ(o.taken_err, 0);
    EXPECT_EQ(o.offer_result, 0) << "the sender was not answered with success";
    EXPECT_TRUE(o.bytes_right);
    EXPECT_EQ(o.through_host, 0u);
    EXPECT_EQ(o.refusals, 0u);
    EXPECT_TRUE(o.device_registers_after);
}

// Refused at the post (1) or from the backlog (2, never posted): the
// memory's doing either way.
TEST_F(CoreRdvDevice, RefusedReadThroughTheHostAndDeviceMemoryKeptFromTheProvider) {
    for (int mode : {1, 2}) {
        SCOPED_TRACE(1 == mode ? "refused at the post" : "refused from the backlog");
        const Outcome o = read_into_device(mode);
        EXPECT_EQ(o.taken_err, 0) << "a refused device buffer failed the message";
        EXPECT_EQ(o.offer_result, 0);
        EXPECT_TRUE(o.bytes_right);
        EXPECT_EQ(o.through_host, 1u);
        EXPECT_EQ(o.refusals, 1u);
        EXPECT_FALSE(o.device_registers_after) << "device memory still goes to the provider";
    }
}

// A read in pieces, each refused from the backlog: one refusal for the
// read (not one per piece), and no piece read again over the first rail.
TEST_F(CoreRdvDevice, ARefusedReadInPiecesIsOneRefusal) {
    const Outcome o = read_into_device(2, kLen / 4);
    EXPECT_EQ(o.taken_err, 0);
    EXPECT_EQ(o.offer_result, 0);
    EXPECT_TRUE(o.bytes_right);
    EXPECT_EQ(o.through_host, 1u);
    EXPECT_EQ(o.refusals, 1u) << "each piece counted as a refusal";
    EXPECT_FALSE(o.device_registers_after);
}

} // namespace
