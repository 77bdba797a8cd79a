// Device buffers through a provider with FI_HMEM (efa_core_mr_acquire_device):
// shm grants FI_HMEM, and the fake device's memory, made visible, is
// described to it as FI_HMEM_SYSTEM memory.  Each allocation is registered
// whole and exactly, found again for any buffer inside it, and replaced
// when the device says the allocation was freed (its id changed) although
// its address came back; without FI_HMEM nothing is registered.  Where
// libfabric has FI_MR_DMABUF (1.20+) an allocation goes through the dmabuf
// the fake exports (its memfd), else, or where the device exports none, by
// its address.  A device's own memory is registered with
// FI_HMEM_DEVICE_ONLY, host memory without it.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_test_params.hpp"
#include "efa_core.h"
#include "efa_device.h"

namespace {

// A core on 'provider' with the fake device visible and FI_HMEM asked for.
class CoreDeviceMr : public ::testing::Test {
  protected:
    void open(const char *provider, bool hmem = true, bool dmabuf = true, bool vmm = false,
              int hmem_vmm = EFA_SWITCH_AUTO) {
        efa_core_params_t p = core_test_params(provider);
        p.debug_fake_device = true;
        p.debug_fake_device_hmem = true;
        p.debug_fake_device_vmm = vmm;
        p.hmem_vmm = hmem_vmm;
        p.hmem = hmem;
        p.dmabuf = dmabuf;
        int err = 0;
        core_ = efa_core_acquire(&p, &err);
        ASSERT_NE(core_, nullptr) << "efa_core_acquire: " << err;
    }
    void TearDown() override {
        if (core_) {
            efa_core_release(core_);
        }
        efa_fake_device_visible(false);
        efa_fake_device_dmabuf(true);
        efa_fake_device_no_sync_memops(false);
    }
    // One allocation of the fake registered for remote reads and released:
    // the registrations made through a dmabuf so far (UINT64_MAX where the
    // registration failed).
    uint64_t dmabuf_regs_after_one() {
        void *dev = efa_fake_device_alloc(4096);
        int err = 0;
        efa_mr_t *a =
            dev ? efa_core_mr_acquire_device(core_, dev, 4096, FI_SEND | FI_REMOTE_READ, &err)
                : nullptr;
        if (nullptr == a) {
            ADD_FAILURE() << "no registration: " << err;
            efa_fake_device_free(dev);
            return UINT64_MAX;
        }
        efa_core_mr_release(core_, a);
        efa_fake_device_free(dev);
        return efa_core_mr_device_dmabuf(core_);
    }
    efa_core_t *core_ = nullptr;
};

TEST_F(CoreDeviceMr, AnAllocationIsRegisteredWholeAndFoundForEveryBufferInIt) {
    open("shm");
    ASSERT_TRUE(efa_core_get_info(core_)->hmem);
    auto *dev = static_cast<uint8_t *>(efa_fake_device_alloc(3 * 4096));
    ASSERT_NE(dev, nullptr);
    efa_device_hmem_t h{};
    ASSERT_EQ(efa_device_hmem(dev + 100, 10, &h), 0);
    EXPECT_EQ(h.iface, FI_HMEM_SYSTEM);
    EXPECT_EQ(h.base, reinterpret_cast<uintptr_t>(dev));
    EXPECT_EQ(h.len, 3u * 4096);
    int err = 0;
    efa_mr_t *a = efa_core_mr_acquire_device(core_, dev + 100, 10, FI_SEND, &err);
    ASSERT_NE(a, nullptr) << err;
    EXPECT_EQ(efa_mr_base(a), reinterpret_cast<uintptr_t>(dev));
    EXPECT_EQ(efa_mr_len(a), 3u * 4096);
    EXPECT_EQ(efa_mr_rails(a), 1);
    efa_mr_t *b = efa_core_mr_acquire_device(core_, dev + 8000, 4000, FI_RECV | FI_READ, &err);
    ASSERT_NE(b, nullptr) << err;
    EXPECT_EQ(efa_mr_base(b), reinterpret_cast<uintptr_t>(dev));
    efa_core_mr_release(core_, a);
    efa_core_mr_release(core_, b);
    EXPECT_EQ(efa_core_mr_device_stale(core_), 0u);
    efa_fake_device_free(dev);
}

TEST_F(CoreDeviceMr, AFreedAllocationsRegistrationIsReplaced) {
    open("shm");
    int err = 0;
    void *first = efa_fake_device_alloc(8192);
    ASSERT_NE(first, nullptr);
    efa_mr_t *a = efa_core_mr_acquire_device(core_, first, 8192, FI_SEND, &err);
    ASSERT_NE(a, nullptr) << err;
    efa_core_mr_release(core_, a); // kept in the cache
    efa_fake_device_free(first);
    // The kernel hands the same address out again (most recent unmap
    // first); where it does not, the new allocation simply misses.
    void *again = efa_fake_device_alloc(8192);
    ASSERT_NE(again, nullptr);
    efa_mr_t *b = efa_core_mr_acquire_device(core_, again, 100, FI_SEND, &err);
    ASSERT_NE(b, nullptr) << err;
    EXPECT_EQ(efa_mr_base(b), reinterpret_cast<uintptr_t>(again));
    if (again == first) {
        EXPECT_EQ(efa_core_mr_device_stale(core_), 1u);
    }
    // Found from now on without another replacement.
    efa_mr_t *c = efa_core_mr_acquire_device(core_, again, 8192, FI_SEND, &err);
    ASSERT_EQ(c, b);
    efa_core_mr_release(core_, b);
    efa_core_mr_release(core_, c);
    efa_fake_device_free(again);
}

// A new allocation that overlaps a freed one's cached registration without
// lying inside it (the old one sticks out) cannot be merged with it: it is
// registered alone, and the old entry, which would keep the freed memory
// pinned and make every later acquire try the merge again, goes at once.
TEST_F(CoreDeviceMr, AFreedAllocationPartlyUnderANewOneIsDropped) {
    open("shm");
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    // (addresses of the test's own, which the fake hands out as the
    // device would hand out a freed allocation's)
    void *range = mmap(nullptr, 16 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(range, MAP_FAILED);
    auto *at = static_cast<uint8_t *>(range);
    int err = 0;
    void *old_one = efa_fake_device_alloc_at(at + 8 * page, 8 * page);
    ASSERT_EQ(old_one, at + 8 * page);
    efa_mr_t *a = efa_core_mr_acquire_device(core_, old_one, 8 * page, FI_SEND, &err);
    ASSERT_NE(a, nullptr) << err;
    efa_core_mr_release(core_, a); // kept in the cache
    ASSERT_EQ(core_->dev_mr_cache->cached_entries(), 1u);
    efa_fake_device_free(old_one);
    void *new_one = efa_fake_device_alloc_at(at + 4 * page, 8 * page);
    ASSERT_EQ(new_one, at + 4 * page);
    efa_mr_t *b = efa_core_mr_acquire_device(core_, new_one, 8 * page, FI_SEND, &err);
    ASSERT_NE(b, nullptr) << err;
    EXPECT_EQ(efa_mr_base(b), reinterpret_cast<uintptr_t>(new_one));
    efa_core_mr_release(core_, b);
    EXPECT_EQ(core_->dev_mr_cache->cached_entries(), 0u) << "the freed allocation's entry kept";
    // Registered and cached as any other from now on.
    efa_mr_t *c = efa_core_mr_acquire_device(core_, new_one, 8 * page, FI_SEND, &err);
    ASSERT_NE(c, nullptr) << err;
    efa_core_mr_release(core_, c);
    EXPECT_EQ(core_->dev_mr_cache->cached_entries(), 1u);
    efa_fake_device_free(new_one);
    munmap(range, 16 * page);
}

// The core's device cache put over a backend that registers for real and
// then does what a test's scenario asks.
class DeviceMrBackendHook : public efa::MrBackend {
  public:
    explicit DeviceMrBackendHook(efa_core_t *core) : core_(core), real_(*core->dev_mr_backend) {
        efa::MrCacheConfig dc = efa::mr_cache_config(core->params);
        dc.reuse = true;
        dc.align = 1;
        saved_ = std::move(core->dev_mr_cache);
        core->dev_mr_cache = std::make_unique<efa::MrCache>(*this, dc);
    }
    ~DeviceMrBackendHook() override {
        core_->dev_mr_cache = std::move(saved_); // (every registration released by then)
    }
    int reg(void *base, size_t len, uint64_t access, efa::MrRegistration *out) override {
        ++regs;
        const int rc = real_.reg(base, len, access, out);
        if (0 == rc && invalidate_each) {
            // (as another thread that found a stale entry here would)
            core_->dev_mr_cache->invalidate(base, len);
        }
        return rc;
    }
    void dereg(const efa::MrRegistration &r) override { real_.dereg(r); }
    bool invalidate_each = false; // each registration's range invalidated as it is made
    int regs = 0;

  private:
    efa_core_t *core_;
    efa::MrBackend &real_;
    std::unique_ptr<efa::MrCache> saved_;
};

// Another thread's invalidation of the range between the registration
// and the look at it (it found a stale entry there) leaves this thread's
// registration of memory that is current usable: served, not failed.
TEST_F(CoreDeviceMr, AnInvalidationMeanwhileDoesNotFailACurrentRegistration) {
    open("shm");
    void *dev = efa_fake_device_alloc(4096);
    ASSERT_NE(dev, nullptr);
    {
        DeviceMrBackendHook hook(core_);
        hook.invalidate_each = true;
        int err = 0;
        efa_mr_t *a = efa_core_mr_acquire_device(core_, dev, 4096, FI_SEND, &err);
        ASSERT_NE(a, nullptr) << err;
        EXPECT_EQ(efa_mr_base(a), reinterpret_cast<uintptr_t>(dev));
        EXPECT_EQ(hook.regs, 1);
        efa_core_mr_release(core_, a); // (not cached: deregistered now)
        hook.invalidate_each = false;
        efa_mr_t *b = efa_core_mr_acquire_device(core_, dev, 4096, FI_SEND, &err);
        ASSERT_NE(b, nullptr) << err;
        efa_core_mr_release(core_, b);
    }
    efa_fake_device_free(dev);
}

// Both caches register on the same domains (here the first NIC's alone);
// shm picks no keys, and refuses one asked for twice.
TEST_F(CoreDeviceMr, HostAndDeviceRegistrationsTakeDistinctKeys) {
    open("shm");
    static char host[2][8192];
    int err = 0;
    efa_mr_t *h0 = efa_core_mr_acquire(core_, host[0], sizeof(host[0]), FI_REMOTE_READ, &err);
    ASSERT_NE(h0, nullptr) << err;
    void *dev = efa_fake_device_alloc(4096);
    ASSERT_NE(dev, nullptr);
    // (remote access: the rights that put a registration in shm's key map)
    efa_mr_t *d = efa_core_mr_acquire_device(core_, dev, 4096, FI_SEND | FI_REMOTE_READ, &err);
    ASSERT_NE(d, nullptr) << err;
    efa_mr_t *h1 = efa_core_mr_acquire(core_, host[1], sizeof(host[1]), FI_REMOTE_READ, &err);
    ASSERT_NE(h1, nullptr) << err;
    EXPECT_NE(efa_mr_key(d), efa_mr_key(h0));
    EXPECT_NE(efa_mr_key(d), efa_mr_key(h1));
    efa_core_mr_release(core_, h0);
    efa_core_mr_release(core_, d);
    efa_core_mr_release(core_, h1);
    efa_fake_device_free(dev);
}

TEST_F(CoreDeviceMr, AProviderWithoutHmemRegistersNoDeviceMemory) {
    open("tcp");
    EXPECT_FALSE(efa_core_get_info(core_)->hmem);
    void *dev = efa_fake_device_alloc(4096);
    ASSERT_NE(dev, nullptr);
    int err = 0;
    EXPECT_EQ(efa_core_mr_acquire_device(core_, dev, 4096, FI_SEND, &err), nullptr);
    EXPECT_EQ(err, -FI_EOPNOTSUPP);
    efa_fake_device_free(dev);
}

TEST_F(CoreDeviceMr, HmemOffAsksForNone) {
    open("shm", false);
    EXPECT_FALSE(efa_core_get_info(core_)->hmem);
}

TEST_F(CoreDeviceMr, HostMemoryIsNotADeviceAllocation) {
    open("shm");
    static char host[64];
    int err = 0;
    EXPECT_EQ(efa_core_mr_acquire_device(core_, host, sizeof(host), FI_SEND, &err), nullptr);
    EXPECT_NE(err, 0);
}

// The fake's dmabuf of a visible allocation is its memfd: the same pages.
TEST_F(CoreDeviceMr, AVisibleAllocationExportsItsPagesAsADmabuf) {
    open("shm");
    ASSERT_TRUE(efa_device_dmabuf_on());
    auto *dev = static_cast<uint8_t *>(efa_fake_device_alloc(2 * 4096));
    ASSERT_NE(dev, nullptr);
    uint8_t pattern[256];
    for (size_t i = 0; i < sizeof(pattern); ++i) {
        pattern[i] = static_cast<uint8_t>(i * 7 + 3);
    }
    ASSERT_EQ(efa_device_copy(dev + 4096 + 10, pattern, sizeof(pattern)), 0);
    efa_device_hmem_t h{};
    ASSERT_EQ(efa_device_hmem(dev, 1, &h), 0);
    int fd = -1;
    uint64_t offset = 99;
    ASSERT_EQ(efa_device_dmabuf(&h, &fd, &offset), 0);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(offset, 0u);
    void *view = mmap(nullptr, h.len, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_NE(view, MAP_FAILED);
    EXPECT_EQ(memcmp(static_cast<uint8_t *>(view) + 4096 + 10, pattern, sizeof(pattern)), 0);
    munmap(view, h.len);
    close(fd);
    // An allocation the fake does not know exports nothing.
    efa_device_hmem_t other = h;
    other.base += 4096;
    EXPECT_NE(efa_device_dmabuf(&other, &fd, &offset), 0);
    efa_fake_device_dmabuf(false);
    EXPECT_NE(efa_device_dmabuf(&h, &fd, &offset), 0);
    efa_fake_device_free(dev);
}

TEST_F(CoreDeviceMr, ARegistrationGoesThroughTheDmabufWhereLibfabricHasIt) {
    open("shm");
#ifdef FI_MR_DMABUF
    EXPECT_TRUE(efa_core_mr_dmabuf_on(core_));
    EXPECT_EQ(dmabuf_regs_after_one(), 1u);
#else
    // (libfabric below 1.20: no FI_MR_DMABUF, every registration by address)
    EXPECT_FALSE(efa_core_mr_dmabuf_on(core_));
    EXPECT_EQ(dmabuf_regs_after_one(), 0u);
#endif
}

// A device that exports no dmabuf for an allocation leaves it to the
// plain path, and the next allocation tries again.
TEST_F(CoreDeviceMr, AnAllocationWithoutADmabufIsRegisteredByAddress) {
    open("shm");
    const bool on = efa_core_mr_dmabuf_on(core_);
    efa_fake_device_dmabuf(false);
    EXPECT_EQ(dmabuf_regs_after_one(), 0u);
    EXPECT_EQ(efa_core_mr_dmabuf_on(core_), on);
    efa_fake_device_dmabuf(true);
#ifdef FI_MR_DMABUF
    EXPECT_EQ(dmabuf_regs_after_one(), 1u);
#endif
}

// A device's memory is registered as its alone (FI_HMEM_DEVICE_ONLY:
// libfabric's shm then hands it to its peer by the device's IPC); host
// memory (the fake's, described as FI_HMEM_SYSTEM) without the flag.
TEST(DeviceMrFlags, DeviceMemoryIsRegisteredAsTheDevicesAlone) {
#ifdef FI_HMEM_DEVICE_ONLY
    for (int iface : {FI_HMEM_CUDA, FI_HMEM_ROCR, FI_HMEM_ZE}) {
        EXPECT_EQ(efa::device_mr_flags(iface), FI_HMEM_DEVICE_ONLY) << "interface " << iface;
    }
#endif
    EXPECT_EQ(efa::device_mr_flags(FI_HMEM_SYSTEM), 0u);
}

TEST_F(CoreDeviceMr, DmabufOffRegistersByAddress) {
    open("shm", true, false);
    EXPECT_FALSE(efa_core_mr_dmabuf_on(core_));
    EXPECT_EQ(dmabuf_regs_after_one(), 0u);
}

// Memory without synchronous memory operations (CUDA VMM and pool
// memory; here the fake described so): common_efa_hmem_vmm on and auto
// hand it to shm like other device memory; off copies it through the host
// (the registration refused, counted, and nothing registered); memory
// with them is registered whatever the switch says.
TEST_F(CoreDeviceMr, MemoryWithoutSynchronousCopiesFollowsHmemVmm) {
    for (int sw : {EFA_SWITCH_AUTO, EFA_SWITCH_ON, EFA_SWITCH_OFF}) {
        open("shm", true, true, true, sw);
        void *dev = efa_fake_device_alloc(4096);
        ASSERT_NE(dev, nullptr);
        efa_device_hmem_t h{};
        ASSERT_EQ(efa_device_hmem(dev, 4096, &h), 0);
        EXPECT_TRUE(h.no_sync_memops);
        int err = 0;
        efa_mr_t *mr = efa_core_mr_acquire_device(core_, dev, 4096, FI_SEND | FI_REMOTE_READ, &err);
        if (EFA_SWITCH_OFF == sw) {
            EXPECT_EQ(mr, nullptr);
            EXPECT_EQ(err, -FI_EOPNOTSUPP);
            EXPECT_EQ(efa_core_mr_device_vmm_staged(core_), 1u);
            EXPECT_EQ(efa_core_mr_acquire_device(core_, dev, 64, FI_SEND, &err), nullptr);
            EXPECT_EQ(efa_core_mr_device_vmm_staged(core_), 2u); // (each buffer counted)
        } else {
            EXPECT_NE(mr, nullptr) << "switch " << sw << ": " << err;
            EXPECT_EQ(efa_core_mr_device_vmm_staged(core_), 0u);
        }
        if (mr) {
            efa_core_mr_release(core_, mr);
        }
        efa_fake_device_free(dev);
        // Memory the device synchronizes goes to the provider under off too.
        efa_fake_device_no_sync_memops(false);
        void *plain = efa_fake_device_alloc(4096);
        ASSERT_NE(plain, nullptr);
        ASSERT_EQ(efa_device_hmem(plain, 4096, &h), 0);
        EXPECT_FALSE(h.no_sync_memops);
        mr = efa_core_mr_acquire_device(core_, plain, 4096, FI_SEND, &err);
        EXPECT_NE(mr, nullptr) << "switch " << sw << ": " << err;
        if (mr) {
            efa_core_mr_release(core_, mr);
        }
        efa_fake_device_free(plain);
        efa_core_release(core_);
        core_ = nullptr;
    }
}

// "auto" keeps such memory from libfabric's efa fabric alone (its RDM
// endpoint fails the posts); "on" and "off" are what they say anywhere.
// The libfabric version the tests ask about where it does not matter.
constexpr uint32_t kLib = FI_VERSION(2, 6);

TEST(HmemVmmAllowed, AutoKeepsItFromTheEfaFabricAlone) {
    const char *why = nullptr;
    constexpr int kUntouched = EFA_SWITCH_AUTO; // (the provider's CUDA calls)
    EXPECT_FALSE(efa_core_hmem_vmm_allowed(EFA_SWITCH_AUTO, "efa", kUntouched, kLib, &why));
    EXPECT_NE(std::string(why).find("CU_POINTER_ATTRIBUTE_SYNC_MEMOPS"), std::string::npos);
    EXPECT_FALSE(efa_core_hmem_vmm_allowed(EFA_SWITCH_AUTO, "efa", EFA_SWITCH_ON, kLib, &why));
    for (const char *fabric : {"efa-direct", "shm", "tcp", "udp", "TCP-IP"}) {
        EXPECT_TRUE(efa_core_hmem_vmm_allowed(EFA_SWITCH_AUTO, fabric, kUntouched, kLib, &why))
            << fabric;
    }
    EXPECT_TRUE(efa_core_hmem_vmm_allowed(EFA_SWITCH_AUTO, nullptr, kUntouched, kLib, &why));
    EXPECT_TRUE(efa_core_hmem_vmm_allowed(EFA_SWITCH_ON, "efa", kUntouched, kLib, &why));
    EXPECT_STREQ(why, "common_efa_hmem_vmm on");
    EXPECT_FALSE(efa_core_hmem_vmm_allowed(EFA_SWITCH_OFF, "shm", kUntouched, kLib, &why));
    EXPECT_STREQ(why, "common_efa_hmem_vmm off");
    EXPECT_FALSE(efa_core_hmem_vmm_allowed(EFA_SWITCH_OFF, "efa", EFA_SWITCH_OFF, kLib, &why))
        << "off is off whatever the provider does";
}

// An efa endpoint that took FI_OPT_CUDA_API_PERMITTED false calls no CUDA,
// so it sets no attribute whose refusal fails the post of VMM memory.
TEST(HmemVmmAllowed, AutoHandsItToAnEfaFabricWithoutCudaCalls) {
    const char *why = nullptr;
    EXPECT_TRUE(efa_core_hmem_vmm_allowed(EFA_SWITCH_AUTO, "efa", EFA_SWITCH_OFF, kLib, &why));
    EXPECT_NE(std::string(why).find("common_efa_provider_cuda_calls off"), std::string::npos)
        << why;
    EXPECT_TRUE(
        efa_core_hmem_vmm_allowed(EFA_SWITCH_AUTO, "efa", EFA_SWITCH_OFF, FI_VERSION(1, 20), &why));
}

// libfabric 1.18 and 1.19 set CU_POINTER_ATTRIBUTE_SYNC_MEMOPS when they
// register CUDA memory, whatever the endpoint may call: auto keeps VMM
// memory from them even without CUDA calls; on still hands it over.
TEST(HmemVmmAllowed, AutoKeepsItFromEfaBefore120EvenWithoutCudaCalls) {
    const char *why = nullptr;
    for (uint32_t v : {FI_VERSION(1, 18), FI_VERSION(1, 19)}) {
        EXPECT_FALSE(efa_core_hmem_vmm_allowed(EFA_SWITCH_AUTO, "efa", EFA_SWITCH_OFF, v, &why))
            << FI_MAJOR(v) << "." << FI_MINOR(v);
        EXPECT_NE(std::string(why).find("before 1.20"), std::string::npos) << why;
    }
    EXPECT_TRUE(
        efa_core_hmem_vmm_allowed(EFA_SWITCH_ON, "efa", EFA_SWITCH_OFF, FI_VERSION(1, 19), &why));
    EXPECT_TRUE(efa_core_hmem_vmm_allowed(EFA_SWITCH_AUTO, "efa-direct", EFA_SWITCH_OFF,
                                          FI_VERSION(1, 19), &why));
}

} // namespace
