// A provider that refuses a post of device memory it registered
// (efa_core_mr_device_post_refused, device_post_refused.cpp): only errors
// that name the memory count, only for device registrations; memory
// without synchronous memory operations stops going to the provider alone
// where such memory was refused, all device memory otherwise.  And the
// test setting that stands in for such a provider on shm
// (debug_fake_device_refuse_post): refused at the post, or from the
// backlog with a completion that says the operation never reached it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_test_op.hpp"
#include "core_test_params.hpp"
#include "core_with_self.hpp"
#include "efa_core.h"
#include "efa_device.h"
#include "efa_mr.h"

namespace {

efa_core_params_t device_params(bool vmm, int refuse_post = 0) {
    efa_core_params_t p = core_test_params("shm");
    p.debug_fake_device = true;
    p.debug_fake_device_hmem = true;
    p.debug_fake_device_vmm = vmm;
    p.hmem_vmm = EFA_SWITCH_ON; // (such memory registered, as on a provider that takes it)
    p.hmem = true;
    p.debug_fake_device_refuse_post = refuse_post;
    return p;
}

class DevicePostRefused : public ::testing::Test {
  protected:
    void TearDown() override {
        efa_fake_device_visible(false);
        efa_fake_device_no_sync_memops(false);
    }
    static uint64_t refusals(efa_core_t *core, uint64_t *after = nullptr) {
        uint64_t posts = 0, a = 0;
        efa_core_mr_device_refusals(core, &posts, &a);
        if (after) {
            *after = a;
        }
        return posts;
    }
};

TEST_F(DevicePostRefused, OnlyTheMemorysRefusalOfADeviceRegistrationCounts) {
    CoreWithSelf self;
    ASSERT_TRUE(self.open(device_params(false)));
    efa_core_t *core = self.core();
    void *dev = efa_fake_device_alloc(4096);
    ASSERT_NE(dev, nullptr);
    int err = 0;
    efa_mr_t *mr = efa_core_mr_acquire_device(core, dev, 4096, FI_SEND, &err);
    ASSERT_NE(mr, nullptr) << err;
    // A full queue, a lost peer, a cancel: not the memory's doing.
    for (int rc : {-FI_EAGAIN, -FI_ENOMEM, -FI_EHOSTUNREACH, -FI_ECANCELED, -FI_EIO, 0}) {
        EXPECT_EQ(efa_core_mr_device_post_refused(core, mr, "test", rc),
                  EFA_DEVICE_POST_NOT_REFUSED)
            << rc;
    }
    // A host registration refused is not device memory refused.
    static char host[4096];
    efa_mr_t *hmr = efa_core_mr_acquire(core, host, sizeof(host), FI_SEND, &err);
    ASSERT_NE(hmr, nullptr) << err;
    EXPECT_EQ(efa_core_mr_device_post_refused(core, hmr, "test", -FI_EINVAL),
              EFA_DEVICE_POST_NOT_REFUSED);
    EXPECT_EQ(efa_core_mr_device_post_refused(core, nullptr, "test", -FI_EINVAL),
              EFA_DEVICE_POST_NOT_REFUSED);
    efa_core_mr_release(core, hmr);
    EXPECT_EQ(refusals(core), 0u);

    // The provider refuses the memory: from now on no device memory is
    // registered, each buffer counted.
    EXPECT_EQ(efa_core_mr_device_post_refused(core, mr, "test", -FI_EINVAL),
              EFA_DEVICE_POST_REFUSED_ALL);
    efa_core_mr_release(core, mr);
    uint64_t after = 0;
    EXPECT_EQ(refusals(core, &after), 1u);
    EXPECT_EQ(after, 0u);
    EXPECT_EQ(efa_core_mr_acquire_device(core, dev, 4096, FI_SEND, &err), nullptr);
    EXPECT_EQ(err, -FI_EOPNOTSUPP);
    void *other = efa_fake_device_alloc(4096);
    ASSERT_NE(other, nullptr);
    EXPECT_EQ(efa_core_mr_acquire_device(core, other, 64, FI_RECV, &err), nullptr);
    EXPECT_EQ(refusals(core, &after), 1u);
    EXPECT_EQ(after, 2u);
    efa_fake_device_free(other);
    efa_fake_device_free(dev);
}

TEST_F(DevicePostRefused, RefusedMemoryWithoutSynchronousCopiesKeepsOtherDeviceMemoryGoing) {
    CoreWithSelf self;
    ASSERT_TRUE(self.open(device_params(true)));
    efa_core_t *core = self.core();
    void *vmm = efa_fake_device_alloc(4096);
    ASSERT_NE(vmm, nullptr);
    int err = 0;
    efa_mr_t *mr = efa_core_mr_acquire_device(core, vmm, 4096, FI_SEND, &err);
    ASSERT_NE(mr, nullptr) << err;
    EXPECT_EQ(efa_core_mr_device_post_refused(core, mr, "test", -FI_EOPNOTSUPP),
              EFA_DEVICE_POST_REFUSED_VMM);
    efa_core_mr_release(core, mr);
    EXPECT_EQ(efa_core_mr_acquire_device(core, vmm, 4096, FI_SEND, &err), nullptr);
    EXPECT_EQ(efa_core_mr_device_vmm_staged(core), 1u);
    // Memory the device synchronizes still goes to the provider.
    efa_fake_device_no_sync_memops(false);
    void *plain = efa_fake_device_alloc(4096);
    ASSERT_NE(plain, nullptr);
    mr = efa_core_mr_acquire_device(core, plain, 4096, FI_SEND, &err);
    EXPECT_NE(mr, nullptr) << err;
    if (mr) {
        efa_core_mr_release(core, mr);
    }
    uint64_t after = 0;
    EXPECT_EQ(refusals(core, &after), 1u);
    EXPECT_EQ(after, 0u);
    efa_fake_device_free(plain);
    efa_fake_device_free(vmm);
}

// The test setting: a send of the fake's memory with a descriptor fails
// at the post (1) or completes with the error, marked as never posted,
// from the backlog (2); a host buffer's send is not touched.
TEST_F(DevicePostRefused, TheTestSettingRefusesDevicePostsAsAProviderWould) {
    for (int mode : {1, 2}) {
        CoreWithSelf self;
        ASSERT_TRUE(self.open(device_params(false, mode)));
        efa_core_t *core = self.core();
        efa_ctx_t *ctx = efa_core_ctx(core, 0);
        ASSERT_NE(ctx, nullptr);
        const fi_addr_t me = self.self()->addr[0];
        void *dev = efa_fake_device_alloc(4096);
        ASSERT_NE(dev, nullptr);
        int err = 0;
        efa_mr_t *mr = efa_core_mr_acquire_device(core, dev, 4096, FI_SEND, &err);
        ASSERT_NE(mr, nullptr) << err;

        struct Op {
            efa_op_t op{};
            bool done = false;
            efa_cqe_t cqe{};
        } send;
        send.op.complete = [](efa_op_t *o, const efa_cqe_t *c) {
            auto *s = reinterpret_cast<Op *>(o);
            s->cqe = *c;
            s->done = true;
        };
        const int rc = efa_ctx_tsend(ctx, dev, 64, efa_mr_desc(mr), me, 7, 0, &send.op);
        if (1 == mode) {
            EXPECT_EQ(rc, -FI_EINVAL);
        } else {
            EXPECT_EQ(rc, 0);
            for (int i = 0; i < 1000 && !send.done; ++i) {
                efa_core_progress(core);
            }
            ASSERT_TRUE(send.done);
            EXPECT_EQ(send.cqe.err, -FI_EINVAL);
            EXPECT_TRUE(send.cqe.unposted);
        }
        efa_core_mr_release(core, mr);

        // A host buffer goes through, received by this core itself.
        char in[64] = {0}, out[64] = "host";
        CoreTestOp recv, hsend;
        recv.op.rx_class = EFA_RX_USER;
        ASSERT_EQ(efa_ctx_trecv(ctx, in, sizeof(in), nullptr, me, 8, 0, &recv.op), 0);
        ASSERT_EQ(efa_ctx_tsend(ctx, out, sizeof(out), nullptr, me, 8, 0, &hsend.op), 0);
        core_test_wait(core, recv, 5.0);
        core_test_wait(core, hsend, 5.0);
        EXPECT_EQ(recv.err, 0);
        EXPECT_EQ(hsend.err, 0);
        EXPECT_STREQ(in, "host");
        efa_fake_device_free(dev);
    }
}

} // namespace

// What tells the backlog that an owner went another way
// (efa_core_device_refusal_taken) is its thread's alone: another
// thread's refusal taken meanwhile hides no failure here.
TEST(DeviceRefusalTaken, IsPerThreadAndForgottenOnceRead) {
    EXPECT_FALSE(efa::post::take_refusal_taken());
    std::thread other([] { efa_core_device_refusal_taken(); });
    other.join();
    EXPECT_FALSE(efa::post::take_refusal_taken()) << "another thread's refusal seen here";
    efa_core_device_refusal_taken();
    EXPECT_TRUE(efa::post::take_refusal_taken());
    EXPECT_FALSE(efa::post::take_refusal_taken()) << "not forgotten once read";
}
