// The whole core opened on a stand-in provider (tcp;ofi_rxm, FI_MR_LOCAL
// forced so that everything registers): what its registration cache does
// with and without memory hooks.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "core.hpp"

namespace {

efa_core_params_t rxm_params(bool mem_release_hooks) {
    efa_core_params_t p{};
    p.provider_include = "tcp;ofi_rxm";
    p.provider_exclude = "";
    p.num_contexts = 1;
    p.mr_cache_size = 16;
    p.progress_batch = 16;
    p.force_mr_local = true;
    p.local_rank = 0;
    p.local_size = 1;
    p.rnr_retry = -1;
    p.force_emulated = "";
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

} // namespace
