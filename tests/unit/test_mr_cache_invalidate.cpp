// efa::MrCache letting go of registrations whose memory was freed or unmapped:
// invalidation of held and idle entries, deferred out of the memory-release
// hook and re-entrant from inside the cache, remapped addresses, the cache
// without reuse (no memory hooks), and all of it from several threads.
#include "mr_cache_fake_backend.hpp"

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

using namespace mr_cache_test;

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
            // Overflow the fixed re-entrancy queue too: the ranges past it join queued ones.
            for (int i = 0; i < 100; ++i) {
                cache.invalidate(mem.page(15), 1);
            }
        }
    };
    MrEntry *e = acquire(cache, mem.page(0), kPage, kRead);
    backend.on_reg = nullptr;
    EXPECT_EQ(backend.deregs(), 1u) << "victim deregistered once the lock was dropped";
    EXPECT_FALSE(backend.is_live(victim_handle));
    // The overflow did not reach the new entry (pages 5 and 15 alone were freed).
    EXPECT_TRUE(backend.is_live(e));
    EXPECT_EQ(cache.cached_entries(), 1u);
    cache.release(e);
    cache.invalidate(mem.page(0), kPage);
    EXPECT_EQ(cache.cached_entries(), 0u);
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

// A burst of frees past the queue between two calls (a program's own
// allocator returning memory) invalidates what was freed and what lies
// between the ranges merged, not the whole cache: an entry far from all
// of them stays, and one under a freed range goes.
TEST_F(MrCacheTest, AnOverflowingBurstOfFreesKeepsWhatNoneTouched) {
    MrCache cache(backend, 16);
    cache.release(acquire(cache, mem.page(0), kPage, kRead)); // below every free
    cache.release(acquire(cache, mem.page(8), kPage, kRead)); // under some of them
    ASSERT_EQ(cache.cached_entries(), 2u);
    for (size_t i = 0; i < 100; ++i) { // (16 bytes every 128 from page 6 on: past the queue)
        cache.invalidate(mem.page(6) + i * 128, 16);
    }
    EXPECT_EQ(cache.cached_entries(), 1u) << "an overflow dropped an entry no free touched";
    MrEntry *kept = acquire(cache, mem.page(0), kPage, kRead);
    EXPECT_TRUE(covers(kept, mem.page(0), kPage));
    EXPECT_EQ(cache.stats().hits, 1u);
    cache.release(kept);
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
