// Unit tests for efa::MrCache, using a fake backend that tracks every live registration so
// the tests can check exactly when the cache registers and deregisters.
#include "mr_cache.hpp"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace {

using efa::MrCache;
using efa::MrEntry;
using efa::MrRegistration;

constexpr uint64_t kRead = 1;
constexpr uint64_t kWrite = 2;
constexpr uint64_t kRemote = 4;      // a remote right (remote read, say)
constexpr uint64_t kRemoteWrite = 8; // another one

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

class FakeBackend : public efa::MrBackend {
  public:
    struct Call {
        uintptr_t base;
        size_t len;
        uint64_t access;
    };

    int reg(void *base, size_t len, uint64_t access, MrRegistration *out) override {
        if (on_reg) {
            // Outside our mutex: the hook may call back into the cache (invalidate()).
            on_reg(base, len);
        }
        std::lock_guard<std::mutex> g(mu_);
        ++reg_calls;
        calls.push_back({reinterpret_cast<uintptr_t>(base), len, access});
        if (fail_all || (fail_above != 0 && len > fail_above)) {
            return -EFAULT;
        }
        if (touch_pages) {
            // A real NIC registration pins the pages; touching them makes registering memory
            // that is not mapped crash the test instead of passing silently.
            for (size_t off = 0; off < len; off += kPage) {
                (void)*static_cast<volatile char *>(static_cast<char *>(base) + off);
            }
        }
        auto *rec = new Call{reinterpret_cast<uintptr_t>(base), len, access};
        live_.insert(rec);
        out->handle = rec;
        out->desc = rec;
        out->key = ++next_key_;
        return 0;
    }

    void dereg(const MrRegistration &r) override {
        if (in_release_hook) {
            // A real deregistration frees memory: inside free()'s hook that waits for ever
            // on malloc's own lock (seen with libfabric 2.6's tcp;ofi_rxm).
            ADD_FAILURE() << "dereg from inside the memory-release hook";
        }
        std::lock_guard<std::mutex> g(mu_);
        ++dereg_calls;
        auto it = live_.find(r.handle);
        if (it == live_.end()) {
            ADD_FAILURE() << "dereg of unknown or already deregistered handle";
            return;
        }
        live_.erase(it);
        delete static_cast<Call *>(r.handle);
    }

    bool is_live(const MrEntry *e) const { return is_live(e->reg.handle); }
    bool is_live(void *handle) const {
        std::lock_guard<std::mutex> g(mu_);
        return live_.count(handle) != 0;
    }
    size_t outstanding() const {
        std::lock_guard<std::mutex> g(mu_);
        return live_.size();
    }
    uint64_t regs() const { return reg_calls.load(); }
    uint64_t deregs() const { return dereg_calls.load(); }

    std::atomic<uint64_t> reg_calls{0};
    std::atomic<uint64_t> dereg_calls{0};
    std::vector<Call> calls;
    bool fail_all = false;
    size_t fail_above = 0; // fail registrations longer than this (0 = never)
    bool touch_pages = false;
    std::function<void(void *, size_t)> on_reg;
    bool in_release_hook = false; // set by tests around invalidate(), as free() would be

  private:
    mutable std::mutex mu_;
    std::set<void *> live_;
    uint64_t next_key_ = 0;
};

// Page-aligned anonymous mapping, so tests control page boundaries exactly.
class Pages {
  public:
    explicit Pages(size_t npages) : len_(npages * kPage) {
        void *p = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            throw std::bad_alloc();
        }
        base_ = static_cast<char *>(p);
    }
    ~Pages() { munmap(base_, len_); }
    Pages(const Pages &) = delete;
    Pages &operator=(const Pages &) = delete;

    char *page(size_t i) const { return base_ + i * kPage; }
    size_t size() const { return len_; }

  private:
    char *base_;
    size_t len_;
};

bool covers(const MrEntry *e, const void *addr, size_t len) {
    const auto a = reinterpret_cast<uintptr_t>(addr);
    return e->base <= a && a + len <= e->base + e->len;
}

class MrCacheTest : public ::testing::Test {
  protected:
    MrEntry *acquire(MrCache &c, const void *addr, size_t len, uint64_t access) {
        int err = 1;
        MrEntry *e = c.acquire(addr, len, access, &err);
        EXPECT_NE(e, nullptr) << "err=" << err;
        EXPECT_EQ(err, 0);
        if (e != nullptr) {
            EXPECT_TRUE(covers(e, addr, len == 0 ? 1 : len));
            EXPECT_EQ(e->access & access, access);
            EXPECT_TRUE(backend.is_live(e));
        }
        return e;
    }

    FakeBackend backend;
    Pages mem{16};
};

TEST_F(MrCacheTest, HitOnSameBuffer) {
    MrCache cache(backend, 8);
    MrEntry *a = acquire(cache, mem.page(0) + 100, 1000, kRead);
    cache.release(a);
    MrEntry *b = acquire(cache, mem.page(0) + 100, 1000, kRead);
    EXPECT_EQ(a, b);
    EXPECT_EQ(backend.regs(), 1u);
    cache.release(b);
    EXPECT_EQ(cache.stats().hits, 1u);
    EXPECT_EQ(cache.stats().misses, 1u);
    EXPECT_EQ(backend.deregs(), 0u) << "idle entry should stay registered";
}

TEST_F(MrCacheTest, ConcurrentHoldersShareOneEntry) {
    MrCache cache(backend, 8);
    MrEntry *a = acquire(cache, mem.page(1), kPage, kRead);
    MrEntry *b = acquire(cache, mem.page(1), kPage, kRead);
    EXPECT_EQ(a, b);
    cache.release(a);
    EXPECT_TRUE(backend.is_live(b));
    cache.release(b);
    EXPECT_EQ(backend.regs(), 1u);
}

TEST_F(MrCacheTest, HitOnSubRangeAndWeakerAccess) {
    MrCache cache(backend, 8);
    MrEntry *big = acquire(cache, mem.page(2), 4 * kPage, kRead | kWrite);
    MrEntry *sub = acquire(cache, mem.page(3) + 17, 100, kRead);
    EXPECT_EQ(big, sub);
    EXPECT_EQ(backend.regs(), 1u);
    cache.release(sub);
    cache.release(big);
}

TEST_F(MrCacheTest, RegistrationIsPageAligned) {
    MrCache cache(backend, 8);
    // Straddles a page boundary: both pages must be registered.
    MrEntry *e = acquire(cache, mem.page(4) + kPage - 10, 20, kRead);
    EXPECT_EQ(e->base, reinterpret_cast<uintptr_t>(mem.page(4)));
    EXPECT_EQ(e->len, 2 * kPage);
    ASSERT_EQ(backend.calls.size(), 1u);
    EXPECT_EQ(backend.calls[0].base % kPage, 0u);
    EXPECT_EQ(backend.calls[0].len, 2 * kPage);
    cache.release(e);
}

TEST_F(MrCacheTest, ZeroLengthRegistersContainingPage) {
    MrCache cache(backend, 8);
    MrEntry *e = acquire(cache, mem.page(5) + 5, 0, kRead);
    EXPECT_EQ(e->base, reinterpret_cast<uintptr_t>(mem.page(5)));
    EXPECT_EQ(e->len, kPage);
    cache.release(e);
    // Exactly at a page boundary, too.
    MrEntry *f = acquire(cache, mem.page(6), 0, kRead);
    EXPECT_EQ(f->base, reinterpret_cast<uintptr_t>(mem.page(6)));
    cache.release(f);
    // A null err pointer is accepted.
    MrEntry *g = cache.acquire(mem.page(6), 0, kRead, nullptr);
    EXPECT_EQ(g, f);
    cache.release(g);
}

TEST_F(MrCacheTest, AddressWrapIsRejected) {
    MrCache cache(backend, 8);
    int err = 0;
    EXPECT_EQ(cache.acquire(reinterpret_cast<void *>(UINTPTR_MAX - 10), 100, kRead, &err), nullptr);
    EXPECT_EQ(err, -EINVAL);
    EXPECT_EQ(backend.regs(), 0u);
    cache.release(nullptr); // harmless
}

TEST_F(MrCacheTest, InvalidateHeldEntryDefersDereg) {
    MrCache cache(backend, 8);
    MrEntry *held = acquire(cache, mem.page(0), kPage, kRead);
    cache.invalidate(mem.page(0), kPage);
    EXPECT_EQ(cache.cached_entries(), 0u);
    EXPECT_EQ(backend.deregs(), 0u) << "held entry must stay registered";
    EXPECT_TRUE(backend.is_live(held));

    MrEntry *fresh = acquire(cache, mem.page(0), kPage, kRead);
    EXPECT_NE(fresh, held);
    EXPECT_EQ(backend.regs(), 2u);
    EXPECT_EQ(cache.stats().misses, 2u);
    EXPECT_EQ(cache.stats().invalidations, 1u);

    cache.release(held);
    EXPECT_EQ(backend.deregs(), 1u);
    EXPECT_TRUE(backend.is_live(fresh));
    cache.release(fresh);
    EXPECT_EQ(backend.deregs(), 1u) << "the fresh entry is cached";
}

TEST_F(MrCacheTest, FreeReallocSimulation) {
    MrCache cache(backend, 8);
    char *buf = mem.page(7) + 64;
    MrEntry *a = acquire(cache, buf, 512, kRead);
    cache.release(a);
    cache.invalidate(buf, 512);  // what the free() hook does
    cache.apply_invalidations(); // what the core's progress does next
    EXPECT_EQ(backend.deregs(), 1u) << "idle entry is deregistered on invalidate";
    EXPECT_EQ(cache.cached_entries(), 0u);
    // "malloc" hands back the same address.
    MrEntry *b = acquire(cache, buf, 512, kRead);
    EXPECT_EQ(backend.regs(), 2u);
    EXPECT_EQ(cache.stats().hits, 0u);
    cache.release(b);
}

// The hook fires inside free()/munmap(), often with malloc's lock held: invalidate() must
// not deregister (nor allocate or free) there. The registration goes at the next cache
// operation or progress call instead, and a reused address is still registered anew.
TEST_F(MrCacheTest, InvalidateDefersDeregistrationOutOfTheHook) {
    MrCache cache(backend, 8);
    MrEntry *a = acquire(cache, mem.page(0), 2 * kPage, kRead);
    cache.release(a);
    backend.in_release_hook = true;
    cache.invalidate(mem.page(0), kPage);
    backend.in_release_hook = false;
    EXPECT_EQ(backend.deregs(), 0u) << "nothing deregistered inside the hook";
    MrEntry *b = acquire(cache, mem.page(0), kPage, kRead);
    EXPECT_EQ(backend.deregs(), 1u) << "the stale entry goes before the lookup";
    EXPECT_EQ(backend.regs(), 2u) << "the freed range is registered anew";
    cache.release(b);
    backend.in_release_hook = true;
    cache.invalidate(mem.page(0), kPage);
    backend.in_release_hook = false;
    cache.apply_invalidations();
    EXPECT_EQ(backend.outstanding(), 0u) << "progress deregisters what was freed";
}

TEST_F(MrCacheTest, MmapMunmapMmapSameAddress) {
    backend.touch_pages = true;
    MrCache cache(backend, 8);
    const size_t len = 4 * kPage;
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    std::memset(p, 0xab, len);

    MrEntry *a = acquire(cache, p, len, kRead | kWrite);
    cache.release(a);
    ASSERT_EQ(munmap(p, len), 0);
    cache.invalidate(p, len); // the munmap hook

    void *q = mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ(q, p);
    EXPECT_EQ(static_cast<unsigned char *>(q)[0], 0u) << "new mapping, new pages";
    MrEntry *b = acquire(cache, q, len, kRead | kWrite);
    EXPECT_EQ(backend.regs(), 2u) << "must re-register the new mapping";
    EXPECT_EQ(backend.deregs(), 1u);
    cache.release(b);
    munmap(q, len);
    cache.invalidate(q, len);
    cache.apply_invalidations();
    EXPECT_EQ(backend.outstanding(), 0u);
}

TEST_F(MrCacheTest, InvalidateOverlapIsByteExact) {
    MrCache cache(backend, 8);
    MrEntry *a = acquire(cache, mem.page(0), kPage, kRead);
    MrEntry *b = acquire(cache, mem.page(2), 2 * kPage, kRead);
    cache.release(a);
    cache.release(b);
    // Disjoint ranges (including the adjacent byte before b) leave entries alone.
    cache.invalidate(mem.page(1), kPage);
    cache.invalidate(mem.page(4), 10 * kPage);
    cache.invalidate(mem.page(1), 0);
    EXPECT_EQ(cache.cached_entries(), 2u);
    // One byte in the middle of b's second page is enough.
    cache.invalidate(mem.page(3) + 100, 1);
    EXPECT_EQ(cache.cached_entries(), 1u);
    EXPECT_EQ(backend.deregs(), 1u);
    // A range spanning several entries removes all of them.
    MrEntry *c = acquire(cache, mem.page(2), kPage, kRead);
    cache.release(c);
    cache.invalidate(mem.page(0), 3 * kPage);
    EXPECT_EQ(cache.cached_entries(), 0u);
    EXPECT_EQ(cache.stats().invalidations, 3u);
}

TEST_F(MrCacheTest, LruEvictsLeastRecentlyUsed) {
    MrCache cache(backend, 2);
    for (size_t i = 0; i < 5; ++i) {
        cache.release(acquire(cache, mem.page(2 * i), kPage, kRead));
    }
    EXPECT_EQ(cache.cached_entries(), 2u);
    EXPECT_EQ(cache.stats().evictions, 3u);
    EXPECT_EQ(backend.deregs(), 3u);
    EXPECT_EQ(backend.outstanding(), 2u);
    // Pages 6 and 8 survived; 0 did not.
    cache.release(acquire(cache, mem.page(8), kPage, kRead));
    cache.release(acquire(cache, mem.page(6), kPage, kRead));
    EXPECT_EQ(backend.regs(), 5u);
    cache.release(acquire(cache, mem.page(0), kPage, kRead));
    EXPECT_EQ(backend.regs(), 6u);
    // Page 8 was least recently used, so it went; page 6 is still there.
    cache.release(acquire(cache, mem.page(6), kPage, kRead));
    EXPECT_EQ(backend.regs(), 6u);
    cache.release(acquire(cache, mem.page(8), kPage, kRead));
    EXPECT_EQ(backend.regs(), 7u);
}

TEST_F(MrCacheTest, HeldEntriesDoNotCountTowardsLruLimit) {
    MrCache cache(backend, 1);
    std::vector<MrEntry *> held;
    for (size_t i = 0; i < 4; ++i) {
        held.push_back(acquire(cache, mem.page(2 * i), kPage, kRead));
    }
    EXPECT_EQ(cache.cached_entries(), 4u);
    EXPECT_EQ(backend.deregs(), 0u);
    for (MrEntry *e : held) {
        cache.release(e);
    }
    EXPECT_EQ(cache.cached_entries(), 1u);
    EXPECT_EQ(cache.stats().evictions, 3u);
}

TEST_F(MrCacheTest, MaxZeroDisablesCaching) {
    MrCache cache(backend, 0);
    MrEntry *a = acquire(cache, mem.page(0), kPage, kRead);
    MrEntry *b = acquire(cache, mem.page(0), kPage, kRead);
    EXPECT_EQ(a, b) << "concurrent holders still share the entry";
    cache.release(a);
    EXPECT_EQ(backend.deregs(), 0u);
    cache.release(b);
    EXPECT_EQ(backend.deregs(), 1u) << "dereg on last release";
    EXPECT_EQ(cache.cached_entries(), 0u);
    cache.release(acquire(cache, mem.page(0), kPage, kRead));
    EXPECT_EQ(backend.regs(), 2u);
    EXPECT_EQ(backend.outstanding(), 0u);
}

TEST_F(MrCacheTest, BackendFailurePropagates) {
    MrCache cache(backend, 8);
    backend.fail_all = true;
    int err = 0;
    EXPECT_EQ(cache.acquire(mem.page(0), kPage, kRead, &err), nullptr);
    EXPECT_EQ(err, -EFAULT);
    EXPECT_EQ(cache.cached_entries(), 0u);
    EXPECT_EQ(backend.regs(), 1u);
    EXPECT_EQ(cache.stats().misses, 1u);
    // No negative entry is cached: once the backend recovers, the same range works.
    backend.fail_all = false;
    MrEntry *e = acquire(cache, mem.page(0), kPage, kRead);
    EXPECT_EQ(backend.regs(), 2u);
    cache.release(e);
}

TEST_F(MrCacheTest, FailedMergeKeepsExistingEntries) {
    MrCache cache(backend, 8);
    MrEntry *old = acquire(cache, mem.page(0), kPage, kRead);
    cache.release(old);
    backend.fail_all = true;
    int err = 0;
    EXPECT_EQ(cache.acquire(mem.page(0), 2 * kPage, kRead, &err), nullptr);
    EXPECT_EQ(err, -EFAULT);
    backend.fail_all = false;
    EXPECT_EQ(cache.cached_entries(), 1u);
    EXPECT_EQ(backend.deregs(), 0u);
    MrEntry *again = acquire(cache, mem.page(0), kPage, kRead);
    EXPECT_EQ(again, old);
    cache.release(again);
}

TEST_F(MrCacheTest, AccessUpgradeReRegisters) {
    MrCache cache(backend, 8);
    MrEntry *r = acquire(cache, mem.page(0), kPage, kRead);
    MrEntry *rw = acquire(cache, mem.page(0), kPage, kRead | kWrite);
    EXPECT_NE(r, rw);
    EXPECT_EQ(backend.regs(), 2u);
    EXPECT_EQ(backend.calls[1].access, kRead | kWrite);
    EXPECT_TRUE(backend.is_live(r)) << "old entry stays valid for its holder";
    cache.release(r);
    EXPECT_EQ(backend.deregs(), 1u) << "superseded entry goes on last release";
    // Both weaker and equal requests now hit the upgraded entry.
    MrEntry *r2 = acquire(cache, mem.page(0), kPage, kRead);
    EXPECT_EQ(r2, rw);
    cache.release(r2);
    cache.release(rw);
    EXPECT_EQ(backend.regs(), 2u);
    EXPECT_EQ(cache.cached_entries(), 1u);
}

TEST_F(MrCacheTest, GrowingBufferConverges) {
    MrCache cache(backend, 8);
    std::vector<MrEntry *> held;
    for (size_t n = 1; n <= 4; ++n) {
        held.push_back(acquire(cache, mem.page(0), n * kPage, kRead));
    }
    EXPECT_EQ(backend.regs(), 4u);
    EXPECT_EQ(cache.cached_entries(), 1u);
    EXPECT_EQ(held.back()->len, 4 * kPage);
    for (MrEntry *e : held) {
        EXPECT_TRUE(backend.is_live(e));
    }
    for (MrEntry *e : held) {
        cache.release(e);
    }
    EXPECT_EQ(backend.deregs(), 3u);
    // Any range inside the final buffer is a hit now.
    cache.release(acquire(cache, mem.page(1) + 3, 2 * kPage, kRead));
    cache.release(acquire(cache, mem.page(0), 4 * kPage, kRead));
    EXPECT_EQ(backend.regs(), 4u);
}

TEST_F(MrCacheTest, MergeBridgesSeveralEntriesAndAccess) {
    MrCache cache(backend, 8);
    cache.release(acquire(cache, mem.page(1), kPage, kRead | kRemote));
    cache.release(acquire(cache, mem.page(3), 2 * kPage, kRead));
    cache.release(acquire(cache, mem.page(8), kPage, kRead)); // unrelated
    EXPECT_EQ(cache.cached_entries(), 3u);

    // Touches page 1 and page 3: the union is pages 1..4 with the union of the rights.
    MrEntry *m = acquire(cache, mem.page(1) + 10, 2 * kPage, kRead | kWrite);
    EXPECT_EQ(m->base, reinterpret_cast<uintptr_t>(mem.page(1)));
    EXPECT_EQ(m->len, 4 * kPage);
    EXPECT_EQ(m->access, kRead | kWrite | kRemote);
    EXPECT_EQ(cache.cached_entries(), 2u);
    EXPECT_EQ(backend.deregs(), 2u) << "idle superseded entries go at once";
    cache.release(m);

    // Requests the old entries served still hit.
    cache.release(acquire(cache, mem.page(1), kPage, kRemote));
    cache.release(acquire(cache, mem.page(4), kPage, kRead));
    EXPECT_EQ(backend.regs(), 4u);
}

TEST_F(MrCacheTest, UnregistrableUnionFallsBackToExactRange) {
    MrCache cache(backend, 8);
    MrEntry *big = acquire(cache, mem.page(0), 4 * kPage, kRead);
    cache.release(big);
    backend.fail_above = 4 * kPage; // the union (5 pages) cannot be registered
    MrEntry *e = acquire(cache, mem.page(3), 2 * kPage, kRead);
    EXPECT_EQ(e->base, reinterpret_cast<uintptr_t>(mem.page(3)));
    EXPECT_EQ(e->len, 2 * kPage);
    EXPECT_EQ(backend.regs(), 3u);
    EXPECT_EQ(cache.cached_entries(), 1u) << "old entry still cached, fallback is not";
    cache.release(e);
    EXPECT_EQ(backend.deregs(), 1u) << "uncached fallback goes on release";
    MrEntry *again = acquire(cache, mem.page(1), kPage, kRead);
    EXPECT_EQ(again, big);
    cache.release(again);
}

TEST_F(MrCacheTest, ReentrantInvalidateFromInsideCriticalSection) {
    MrCache cache(backend, 8);
    MrEntry *victim = acquire(cache, mem.page(5), kPage, kRead);
    void *victim_handle = victim->reg.handle; // victim itself is freed below
    cache.release(victim);
    // Simulates the free() hook firing while the cache lock is held by this thread (e.g. the
    // provider frees memory inside fi_mr_reg). Must neither deadlock nor corrupt the map.
    int calls = 0;
    backend.on_reg = [&](void *, size_t) {
        if (calls++ == 0) {
            cache.invalidate(mem.page(5), kPage);
            // Overflow the fixed re-entrancy queue too: falls back to invalidating everything.
            for (int i = 0; i < 100; ++i) {
                cache.invalidate(mem.page(15), 1);
            }
        }
    };
    MrEntry *e = acquire(cache, mem.page(0), kPage, kRead);
    backend.on_reg = nullptr;
    EXPECT_EQ(backend.deregs(), 1u) << "victim deregistered once the lock was dropped";
    EXPECT_FALSE(backend.is_live(victim_handle));
    // The overflow invalidated the new entry as well, but it stays valid for its holder.
    EXPECT_TRUE(backend.is_live(e));
    EXPECT_EQ(cache.cached_entries(), 0u);
    cache.release(e);
    EXPECT_EQ(backend.outstanding(), 0u);

    // Without overflow only the named range goes.
    MrEntry *keep = acquire(cache, mem.page(8), kPage, kRead);
    cache.release(keep);
    calls = 0;
    backend.on_reg = [&](void *, size_t) {
        if (calls++ == 0) {
            cache.invalidate(mem.page(9), kPage);
        }
    };
    cache.release(acquire(cache, mem.page(0), kPage, kRead));
    backend.on_reg = nullptr;
    EXPECT_EQ(cache.cached_entries(), 2u);
}

TEST_F(MrCacheTest, DestructorDeregistersEverything) {
    {
        MrCache cache(backend, 8);
        cache.release(acquire(cache, mem.page(0), kPage, kRead));
        MrEntry *stale = acquire(cache, mem.page(2), kPage, kRead);
        cache.invalidate(mem.page(2), kPage); // held + stale
        MrEntry *held = acquire(cache, mem.page(4), kPage, kRead);
        EXPECT_EQ(backend.outstanding(), 3u);
        // Destroying with entries still held is a caller bug, but must not leak them.
        (void)stale;
        (void)held;
    }
    EXPECT_EQ(backend.outstanding(), 0u);
    EXPECT_EQ(backend.regs(), backend.deregs());
}

// ---- exact remote rights (MrCacheConfig::exact_access) ----

efa::MrCacheConfig exact_remote(size_t max_cached) {
    efa::MrCacheConfig c;
    c.max_cached_entries = max_cached;
    c.exact_access = kRemote | kRemoteWrite;
    return c;
}

// A read-only window sharing a page with a writable registration must not
// get (or lend) remote write: whoever holds its key could write otherwise.
TEST_F(MrCacheTest, RemoteRightsAreNeverWidenedOrMerged) {
    MrCache cache(backend, exact_remote(8));
    MrEntry *writable = acquire(cache, mem.page(0), 2 * kPage, kRead | kRemote | kRemoteWrite);
    MrEntry *readonly = acquire(cache, mem.page(1) + 100, 200, kRead | kRemote);
    EXPECT_NE(readonly, writable) << "a superset of remote rights must not serve the request";
    EXPECT_EQ(readonly->access & kRemoteWrite, 0u);
    EXPECT_EQ(backend.calls.back().access, kRead | kRemote) << "registered with exactly its rights";
    EXPECT_EQ(readonly->base, reinterpret_cast<uintptr_t>(mem.page(1)));
    EXPECT_EQ(readonly->len, kPage) << "not merged with the overlapping writable entry";
    EXPECT_TRUE(backend.is_live(writable)) << "and the writable one was not superseded";
    EXPECT_EQ(cache.cached_entries(), 2u);

    // Each serves only its own kind of request.
    MrEntry *w2 = acquire(cache, mem.page(0) + 8, 16, kRemoteWrite | kRemote);
    EXPECT_EQ(w2, writable);
    MrEntry *r2 = acquire(cache, mem.page(1), 16, kRemote);
    EXPECT_EQ(r2, readonly);
    EXPECT_EQ(backend.regs(), 2u);
    // Remote read alone across pages 0 and 1 (page 0 covered only by the writable entry): a
    // new registration.
    MrEntry *r3 = acquire(cache, mem.page(0), kPage + 16, kRemote);
    EXPECT_NE(r3, writable);
    EXPECT_EQ(r3->access & (kRemote | kRemoteWrite), kRemote);
    // It merged with the read-only entry next to it (same remote rights), not the writable one.
    EXPECT_EQ(r3->base, reinterpret_cast<uintptr_t>(mem.page(0)));
    EXPECT_EQ(r3->len, 2 * kPage);
    for (MrEntry *e : {writable, readonly, w2, r2, r3}) {
        cache.release(e);
    }
    EXPECT_EQ(cache.cached_entries(), 2u);
}

TEST_F(MrCacheTest, LocalRightsStillMergeWithinRemoteRights) {
    MrCache cache(backend, exact_remote(8));
    cache.release(acquire(cache, mem.page(0), kPage, kRead));
    MrEntry *m = acquire(cache, mem.page(0), 2 * kPage, kWrite);
    EXPECT_EQ(m->access, kRead | kWrite) << "local rights are merged upwards as before";
    EXPECT_EQ(m->len, 2 * kPage);
    EXPECT_EQ(cache.cached_entries(), 1u);
    cache.release(m);
    // A local-only request is not served by an entry with remote rights either.
    MrEntry *remote = acquire(cache, mem.page(4), kPage, kRead | kRemote);
    MrEntry *local = acquire(cache, mem.page(4), kPage, kRead);
    EXPECT_NE(local, remote);
    cache.release(local);
    cache.release(remote);
}

TEST_F(MrCacheTest, InvalidateAndEvictionReachEveryRightsClass) {
    MrCache cache(backend, exact_remote(2));
    cache.release(acquire(cache, mem.page(0), kPage, kRead));
    cache.release(acquire(cache, mem.page(0), kPage, kRemote));
    cache.release(acquire(cache, mem.page(0), kPage, kRemote | kRemoteWrite));
    EXPECT_EQ(cache.cached_entries(), 2u) << "LRU limit across classes";
    EXPECT_EQ(cache.stats().evictions, 1u);
    cache.invalidate(mem.page(0) + 5, 1);
    EXPECT_EQ(cache.cached_entries(), 0u);
    EXPECT_EQ(backend.outstanding(), 0u);
}

// ---- no reuse (MrCacheConfig::reuse false: no memory hooks) ----

// Without word of free() and munmap(), an address mapped again would meet
// the registration of the memory it replaced (a NIC would move the old
// pages): nothing is ever reused then, held or idle.
TEST_F(MrCacheTest, WithoutReuseEveryAcquireRegistersAndEveryReleaseDeregisters) {
    efa::MrCacheConfig c;
    c.max_cached_entries = 8;
    c.reuse = false;
    MrCache cache(backend, c);
    EXPECT_FALSE(cache.reuses());
    MrEntry *a = acquire(cache, mem.page(0), kPage, kRead);
    MrEntry *b = acquire(cache, mem.page(0), kPage, kRead);
    EXPECT_NE(a, b) << "not even concurrent holders share";
    EXPECT_EQ(backend.regs(), 2u);
    EXPECT_EQ(cache.cached_entries(), 0u);
    cache.release(a);
    cache.release(b);
    EXPECT_EQ(backend.outstanding(), 0u);
    EXPECT_EQ(cache.stats().hits, 0u);
}

TEST_F(MrCacheTest, WithoutReuseARemappedAddressGetsANewRegistration) {
    efa::MrCacheConfig c;
    c.max_cached_entries = 8;
    c.reuse = false;
    MrCache cache(backend, c);
    const size_t len = 4 * kPage;
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    MrEntry *a = acquire(cache, p, len, kRead);
    const uint64_t old_key = a->reg.key;
    cache.release(a);
    ASSERT_EQ(munmap(p, len), 0); // nobody tells the cache
    void *q = mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ(q, p);
    MrEntry *b = acquire(cache, q, len, kRead);
    EXPECT_NE(b->reg.key, old_key);
    EXPECT_EQ(backend.regs(), 2u);
    cache.release(b);
    munmap(q, len);
    EXPECT_EQ(backend.outstanding(), 0u);
}

TEST_F(MrCacheTest, ConcurrentAcquireReleaseInvalidate) {
    constexpr int kThreads = 4;
    // Time-bounded so it stresses for a while natively yet stays bearable under valgrind.
    constexpr int kMinIters = 5000;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    Pages arena(64);
    std::atomic<uint64_t> acquires{0};
    std::atomic<bool> failed{false};
    {
        MrCache cache(backend, 8);
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
                std::mt19937 rng(1234 + t);
                auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
                std::vector<MrEntry *> held;
                for (int i = 0;
                     !failed && (i < kMinIters || std::chrono::steady_clock::now() < deadline);
                     ++i) {
                    const size_t op = pick(10);
                    if (op < 5 && held.size() < 4) {
                        const size_t off = pick(arena.size() - 1);
                        const size_t len = std::min(pick(3 * kPage), arena.size() - off);
                        const uint64_t access = 1 + pick(3);
                        int err = 0;
                        MrEntry *e = cache.acquire(arena.page(0) + off, len, access, &err);
                        if (e == nullptr || !covers(e, arena.page(0) + off, len ? len : 1) ||
                            (e->access & access) != access || !backend.is_live(e)) {
                            failed = true;
                            break;
                        }
                        ++acquires;
                        held.push_back(e);
                    } else if (op < 8 && !held.empty()) {
                        const size_t k = pick(held.size());
                        // Whatever happened meanwhile, a held entry stays registered.
                        if (!backend.is_live(held[k])) {
                            failed = true;
                        }
                        cache.release(held[k]);
                        held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
                    } else {
                        const size_t off = pick(arena.size() - 1);
                        cache.invalidate(arena.page(0) + off, 1 + pick(2 * kPage));
                    }
                }
                for (MrEntry *e : held) {
                    cache.release(e);
                }
            });
        }
        for (auto &th : threads) {
            th.join();
        }
        EXPECT_FALSE(failed.load());
        const auto s = cache.stats();
        EXPECT_EQ(s.hits + s.misses, acquires.load());
        EXPECT_GT(s.hits, 0u);
        EXPECT_GT(s.invalidations, 0u);
        EXPECT_LE(cache.cached_entries(), 8u) << "nothing held: only the LRU remains";
        EXPECT_EQ(backend.outstanding(), cache.cached_entries());
    }
    EXPECT_EQ(backend.outstanding(), 0u);
    EXPECT_EQ(backend.regs(), backend.deregs());
}

} // namespace
