// The whole core opened on a stand-in provider (tcp;ofi_rxm, FI_MR_LOCAL
// forced so that everything registers): what its registration cache does
// with and without memory hooks, and that memory the provider may still
// write into outlives the endpoints.
#include <gtest/gtest.h>

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include <rdma/fi_endpoint.h>

#include "core.hpp"
#include "core_test_params.hpp"
#include "efa_core_msg.h"

#if defined(__SANITIZE_ADDRESS__)
#define EFA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EFA_TEST_ASAN 1
#endif
#endif
#ifdef EFA_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace {

efa_core_params_t rxm_params(bool mem_release_hooks) {
    efa_core_params_t p = core_test_params("tcp;ofi_rxm");
    p.force_mr_local = true;
    p.mem_release_hooks = mem_release_hooks;
    return p;
}

// Opens the core or fails the test; released at scope exit.
class OpenCore {
  public:
    explicit OpenCore(const efa_core_params_t &p) {
        int err = 0;
        core_ = efa_core_acquire(&p, &err);
        EXPECT_NE(core_, nullptr) << "efa_core_acquire on tcp;ofi_rxm: " << err;
    }
    ~OpenCore() {
        if (core_) {
            efa_core_release(core_);
        }
    }
    OpenCore(const OpenCore &) = delete;
    OpenCore &operator=(const OpenCore &) = delete;
    efa_core_t *get() const { return core_; }

  private:
    efa_core_t *core_ = nullptr;
};

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// Registers [p, p+len), releases it, maps new memory at the same address
// (telling the core only if 'report'), registers again: was that a hit?
bool remap_hits(efa_core_t *core, bool report) {
    const size_t len = 16 * kPage;
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    int err = 0;
    efa_mr_t *a = efa_core_mr_acquire(core, p, len, FI_SEND, &err);
    EXPECT_NE(a, nullptr) << err;
    efa_core_mr_release(core, a);
    munmap(p, len);
    if (report) {
        efa_core_mem_release(p, len); // what the memory hook does
    }
    void *q = mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    EXPECT_EQ(q, p);
    const uint64_t hits = core->mr_cache->stats().hits;
    efa_mr_t *b = efa_core_mr_acquire(core, q, len, FI_SEND, &err);
    EXPECT_NE(b, nullptr) << err;
    const bool hit = core->mr_cache->stats().hits != hits;
    efa_core_mr_release(core, b);
    efa_core_mem_release(q, len);
    munmap(q, len);
    return hit;
}

// Without memory hooks (--mca memory ^patcher, static binaries) nobody
// reports the munmap: the remapped buffer must still get a registration
// of its own, never the old one.
TEST(CoreLifecycle, WithoutMemoryHooksARemappedBufferIsRegisteredAnew) {
    OpenCore core(rxm_params(false));
    ASSERT_NE(core.get(), nullptr);
    EXPECT_FALSE(core.get()->mr_cache->reuses());
    EXPECT_FALSE(remap_hits(core.get(), false));
}

// With hooks the cache reuses registrations, and relies on the hook's word:
// told, it registers anew; untold, it would hit (why reuse needs hooks).
TEST(CoreLifecycle, WithMemoryHooksTheReportedReleaseDecides) {
    OpenCore core(rxm_params(true));
    ASSERT_NE(core.get(), nullptr);
    EXPECT_TRUE(core.get()->mr_cache->reuses());
    EXPECT_FALSE(remap_hits(core.get(), true));
    EXPECT_TRUE(remap_hits(core.get(), false));
}

TEST(CoreLifecycle, RemoteRightsAreExactInTheCoresCache) {
    efa::MrCacheConfig c = efa::mr_cache_config(rxm_params(true));
    EXPECT_EQ(c.exact_access, static_cast<uint64_t>(FI_REMOTE_READ | FI_REMOTE_WRITE));
    EXPECT_EQ(c.max_cached_entries, 16u);
    EXPECT_TRUE(c.reuse);
    EXPECT_FALSE(efa::mr_cache_config(rxm_params(false)).reuse);
}

// ---- receive buffers the provider does not give back ----
//
// The endpoint's operations are wrapped: cancel does nothing (a provider
// that keeps cancelled receives), recv notes the buffers the core posts,
// and close looks whether they are still mapped at that moment.

fi_ops_ep g_ep_ops;
fi_ops_msg g_msg_ops;
fi_ops g_fid_ops;
ssize_t (*g_real_recv)(fid_ep *, void *, size_t, void *, fi_addr_t, void *);
int (*g_real_close)(fid *);
uintptr_t g_lo = UINTPTR_MAX, g_hi = 0;
int g_posted = 0;
int g_mapped_at_close = -1;

ssize_t cancel_nothing(fid_t, void *) {
    return 0;
}

ssize_t noting_recv(fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src, void *ctx) {
    const auto a = reinterpret_cast<uintptr_t>(buf);
    g_lo = std::min(g_lo, a);
    g_hi = std::max(g_hi, a + len);
    ++g_posted;
    return g_real_recv(ep, buf, len, desc, src, ctx);
}

int checking_close(fid *f) {
    const uintptr_t lo = g_lo & ~(kPage - 1);
    // msync fails with ENOMEM where any page of the range is unmapped.
    g_mapped_at_close = msync(reinterpret_cast<void *>(lo), g_hi - lo, MS_ASYNC) == 0;
#ifdef EFA_TEST_ASAN
    // ASan keeps freed memory mapped (quarantined) but poisons it: ask it
    // whether any byte of the buffers' range is freed.
    if (__asan_region_is_poisoned(reinterpret_cast<void *>(g_lo), g_hi - g_lo)) {
        g_mapped_at_close = 0;
    }
#endif
    return g_real_close(f);
}

void noop_handler(void *, efa_ctx_t *, void *, size_t, int, fi_addr_t) {}

TEST(CoreLifecycle, ReceiveBuffersTheProviderKeepsOutliveTheEndpoints) {
    // The pool's slab (2 MiB) then comes from mmap and its free unmaps it,
    // which makes a premature free visible to msync.  ASan's allocator
    // ignores mallopt (0); checking_close asks ASan instead.
#ifdef EFA_TEST_ASAN
    (void)mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#else
    ASSERT_EQ(mallopt(M_MMAP_THRESHOLD, 128 * 1024), 1);
#endif
    {
        OpenCore core(rxm_params(true));
        ASSERT_NE(core.get(), nullptr);
        fid_ep *ep = efa_core_ctx(core.get(), 0)->ep;
        g_ep_ops = *ep->ops;
        g_ep_ops.cancel = cancel_nothing;
        ep->ops = &g_ep_ops;
        g_msg_ops = *ep->msg;
        g_real_recv = g_msg_ops.recv;
        g_msg_ops.recv = noting_recv;
        ep->msg = &g_msg_ops;
        g_fid_ops = *ep->fid.ops;
        g_real_close = g_fid_ops.close;
        g_fid_ops.close = checking_close;
        ep->fid.ops = &g_fid_ops;

        ASSERT_EQ(efa_core_msg_set_handler(core.get(), noop_handler, nullptr), 0);
        ASSERT_GT(g_posted, 0);
        ASSERT_EQ(static_cast<size_t>(g_posted), efa_core_msg_recv_count(core.get()));
    } // efa_core_release: the buffers cannot be cancelled, then the endpoint closes
    EXPECT_EQ(g_mapped_at_close, 1)
        << "the receive buffers were freed while the endpoint could still write into them";
}

} // namespace
