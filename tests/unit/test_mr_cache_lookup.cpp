// efa::MrCache finding and keeping registrations: hits on the same or a
// covered range, page alignment, the LRU of idle entries, backend failures,
// merging overlapping ranges and access rights, exact remote rights, and
// deregistering everything at the end. (Invalidation: test_mr_cache_invalidate.cpp.)
#include "mr_cache_fake_backend.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <vector>

namespace {

using namespace mr_cache_test;

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
    EXPECT_FALSE(cache.findable(e));
    EXPECT_TRUE(cache.findable(big));
    cache.release(e);
    EXPECT_EQ(backend.deregs(), 1u) << "uncached fallback goes on release";
    MrEntry *again = acquire(cache, mem.page(1), kPage, kRead);
    EXPECT_EQ(again, big);
    cache.release(again);
}

// Device allocations (align 1): registered exactly, never rounded to pages.
TEST_F(MrCacheTest, AlignOneRegistersTheExactRange) {
    efa::MrCacheConfig config;
    config.max_cached_entries = 8;
    config.align = 1;
    MrCache cache(backend, config);
    auto *at = static_cast<char *>(mem.page(2)) + 100;
    MrEntry *e = acquire(cache, at, 300, kRead);
    EXPECT_EQ(e->base, reinterpret_cast<uintptr_t>(at));
    EXPECT_EQ(e->len, 300u);
    MrEntry *inside = acquire(cache, at + 10, 290, kRead);
    EXPECT_EQ(inside, e);
    cache.release(inside);
    cache.release(e);
    EXPECT_EQ(backend.regs(), 1u);
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

} // namespace

// Registered memory runs out (the memlock limit, the NIC's registrations)
// while idle entries keep theirs: they go, and the new registration is
// made, rather than failing while nothing is in use.
TEST_F(MrCacheTest, OutOfRoomLetsTheIdleEntriesGoAndTriesAgain) {
    MrCache cache(backend, 8);
    backend.capacity = 4;
    for (size_t i = 0; i < 4; ++i) { // every page apart: no merging
        cache.release(acquire(cache, mem.page(2 * i), kPage, kRead));
    }
    ASSERT_EQ(backend.outstanding(), 4u);
    MrEntry *e = acquire(cache, mem.page(10), kPage, kRead);
    EXPECT_EQ(backend.outstanding(), 1u) << "the idle ones deregistered";
    EXPECT_EQ(cache.stats().evictions, 4u);
    // Held ones stay: with the room taken by holders the failure is told.
    MrEntry *held[3];
    for (size_t i = 0; i < 3; ++i) {
        held[i] = acquire(cache, mem.page(2 * i), kPage, kRead);
    }
    int err = 0;
    EXPECT_EQ(cache.acquire(mem.page(12), kPage, kRead, &err), nullptr);
    EXPECT_EQ(err, -ENOMEM);
    EXPECT_EQ(backend.outstanding(), 4u);
    for (MrEntry *h : held) {
        cache.release(h);
    }
    cache.release(e);
}

// A rail runs out of room where the first NIC has some: the range would be
// kept on fewer NICs for as long as it is cached.  The idle entries go and
// it is registered again, whole; with nothing idle it is kept short.
TEST_F(MrCacheTest, RailOutOfRoomLetsTheIdleEntriesGoAndTriesAgain) {
    MrCache cache(backend, 8);
    backend.rail_capacity = 2;
    for (size_t i = 0; i < 2; ++i) {
        cache.release(acquire(cache, mem.page(2 * i), kPage, kRead));
    }
    MrEntry *e = acquire(cache, mem.page(10), kPage, kRead);
    EXPECT_FALSE(e->reg.rails_short_of_room) << "kept on fewer rails while idle ones held room";
    EXPECT_EQ(cache.stats().evictions, 2u);
    EXPECT_EQ(backend.outstanding(), 1u) << "the short registration was not given back";
    MrEntry *held = acquire(cache, mem.page(0), kPage, kRead);
    MrEntry *shortened = acquire(cache, mem.page(12), kPage, kRead);
    EXPECT_TRUE(shortened->reg.rails_short_of_room) << "with nothing idle it is kept as it came";
    EXPECT_EQ(backend.outstanding(), 3u);
    cache.release(shortened);
    cache.release(held);
    cache.release(e);
}

// The rail stays full of held registrations: the retry does not help, so
// the next ones are kept short as they come instead of emptying the
// cache for each miss.
TEST_F(MrCacheTest, ARetryThatDidNotHelpIsNotRepeatedForEachMiss) {
    MrCache cache(backend, 8);
    backend.rail_capacity = 2;
    MrEntry *a = acquire(cache, mem.page(0), kPage, kRead);
    MrEntry *b = acquire(cache, mem.page(2), kPage, kRead);
    cache.release(acquire(cache, mem.page(4), kPage, kRead)); // short, nothing idle: kept
    MrEntry *d = acquire(cache, mem.page(6), kPage, kRead);   // the idle one goes: no help
    EXPECT_TRUE(d->reg.rails_short_of_room);
    EXPECT_EQ(cache.stats().evictions, 1u);
    cache.release(d);
    MrEntry *e = acquire(cache, mem.page(8), kPage, kRead);
    EXPECT_TRUE(e->reg.rails_short_of_room);
    EXPECT_EQ(cache.stats().evictions, 1u)
        << "the cache emptied again for a retry that cannot help";
    EXPECT_EQ(backend.outstanding(), 4u);
    for (MrEntry *x : {a, b, e}) {
        cache.release(x);
    }
}
