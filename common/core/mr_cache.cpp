#include "mr_cache.hpp"

#include <pthread.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <new>
#include <vector>

namespace efa {

namespace detail {

void MrEntryList::push_front(MrEntry *e) {
    e->prev = nullptr;
    e->next = head_;
    if (head_ != nullptr) {
        head_->prev = e;
    } else {
        tail_ = e;
    }
    head_ = e;
    ++size_;
}

void MrEntryList::remove(MrEntry *e) {
    if (e->prev != nullptr) {
        e->prev->next = e->next;
    } else {
        head_ = e->next;
    }
    if (e->next != nullptr) {
        e->next->prev = e->prev;
    } else {
        tail_ = e->prev;
    }
    e->prev = e->next = nullptr;
    --size_;
}

MrEntry *MrEntryList::pop_back() {
    MrEntry *e = tail_;
    if (e != nullptr) {
        remove(e);
    }
    return e;
}

void MrEntryList::splice_front(MrEntryList &other) {
    while (MrEntry *e = other.pop_back()) {
        push_front(e);
    }
}

} // namespace detail

namespace {

uintptr_t system_page_size() {
    const long ps = sysconf(_SC_PAGESIZE);
    // Alignment math below relies on a power of two; fall back to the common size otherwise.
    if (ps <= 0 || (ps & (ps - 1)) != 0) {
        return 4096;
    }
    return static_cast<uintptr_t>(ps);
}

} // namespace

// Scoped ownership of the cache lock. Besides locking, it (1) applies the invalidations
// queued since the lock was last held, before the holder looks anything up, (2) applies those
// queued while it was held before unlocking, and (3) deregisters and deletes entries that died
// in the critical section only after unlocking, so backend dereg() and free() never run with
// the lock held.
class MrCache::Lock {
  public:
    explicit Lock(MrCache &cache) : cache_(cache) {
        cache_.mutex_.lock();
        cache_.drain_pending(dead);
    }
    ~Lock() {
        cache_.drain_pending(dead);
        cache_.mutex_.unlock();
        cache_.destroy(dead);
    }
    Lock(const Lock &) = delete;
    Lock &operator=(const Lock &) = delete;

    detail::MrEntryList dead; // entries to deregister once unlocked

  private:
    MrCache &cache_;
};

MrCache::MrCache(MrBackend &backend, size_t max_cached_entries)
    : MrCache(backend, MrCacheConfig{max_cached_entries, 0, true, 0}) {}

namespace {
// A child of fork() (a Python dataloader worker, a subprocess before its exec) inherits the
// queue's spin flag as it was: held, if another thread of the parent was queuing a range at
// that instant, by a thread the child does not have. The child's next free() would spin in
// invalidate() for ever. Its registrations are the parent's and it never calls MPI, so from
// the fork on it queues nothing. (The handler is in the common library, never unloaded.)
std::atomic<bool> g_fork_child{false};

void note_fork_child() {
    g_fork_child.store(true, std::memory_order_relaxed);
}

// The live caches, for the fork's prepare handler. Never destroyed: a cache
// may outlive the library's static objects (a core kept for exit, a program
// that leaves without MPI_Finalize), and its destructor still unlists it.
std::mutex &g_caches_lock = *new std::mutex;
std::vector<MrCache *> &g_caches = *new std::vector<MrCache *>;

// Before a fork: where the process asked rdma-core for fork safety, every
// registration's pages are MADV_DONTFORK (ibv_fork_init), absent in the
// child; libfabric's efa then flushes its own registration cache, and the
// idle entries of ours go too, so that the child finds the user's heap
// pages around them (kernels before 5.13; from 5.13 pinned pages are
// copied at fork and nothing is asked).
void before_fork() {
    // A child forking again: its caches are its parent's, whose mutexes a
    // parent thread may have held at the first fork (and it never uses
    // them: note_fork_child).
    if (g_fork_child.load(std::memory_order_relaxed) || !efa::fork_safety_requested()) {
        return;
    }
    std::lock_guard<std::mutex> guard(g_caches_lock);
    for (MrCache *c : g_caches) {
        c->drop_idle();
    }
}

void watch_forks() {
    static std::once_flag once;
    std::call_once(once, [] { (void)pthread_atfork(before_fork, nullptr, note_fork_child); });
}
} // namespace

bool fork_safety_requested() {
    // rdma-core (ibv_fork_init) and libfabric's efa take these two as set
    // or not, whatever their value ("0" too).
    if (getenv("RDMAV_FORK_SAFE") || getenv("IBV_FORK_SAFE")) {
        return true;
    }
    // libfabric reads its own as a boolean.
    const char *v = getenv("FI_EFA_FORK_SAFE");
    if (!v) {
        return false;
    }
    for (const char *yes : {"1", "yes", "true", "on"}) {
        if (strcasecmp(v, yes) == 0) {
            return true;
        }
    }
    return false;
}

MrCache::MrCache(MrBackend &backend, const MrCacheConfig &config)
    : backend_(backend), max_cached_(config.max_cached_entries), exact_access_(config.exact_access),
      reuse_(config.reuse), page_size_(config.align ? config.align : system_page_size()) {
    watch_forks();
    std::lock_guard<std::mutex> guard(g_caches_lock);
    g_caches.push_back(this);
}

void MrCache::drop_idle() {
    Lock lock(*this);
    trim_lru(lock.dead, 0);
}

MrCache::~MrCache() {
    {
        std::lock_guard<std::mutex> guard(g_caches_lock);
        g_caches.erase(std::remove(g_caches.begin(), g_caches.end(), this), g_caches.end());
    }
    Lock lock(*this);
    for (auto &[bits, map] : lookups_) {
        for (auto &[base, e] : map) {
            if (e->refcount == 0) {
                lru_.remove(e);
            }
            e->cached = false;
            lock.dead.push_front(e);
        }
        map.clear();
    }
    lock.dead.splice_front(stale_held_);
}

MrCache::Map *MrCache::lookup_for(uint64_t bits) {
    try {
        return &lookups_.try_emplace(bits).first->second;
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
}

MrCache::Map::iterator MrCache::first_overlap(Map &map, uintptr_t begin, uintptr_t end) {
    // Entries do not overlap each other, so only the last one starting at or before 'begin'
    // can reach into the range from the left; everything after it starts inside or beyond.
    auto it = map.upper_bound(begin);
    if (it != map.begin()) {
        auto prev = std::prev(it);
        if (prev->second->base + prev->second->len > begin) {
            return prev;
        }
    }
    if (it != map.end() && it->second->base < end) {
        return it;
    }
    return map.end();
}

MrEntry *MrCache::find_covering(uintptr_t begin, uintptr_t end, uint64_t access) {
    auto found = lookups_.find(exact_bits(access));
    if (found == lookups_.end()) {
        return nullptr;
    }
    Map &map = found->second;
    auto it = map.upper_bound(begin);
    if (it == map.begin()) {
        return nullptr;
    }
    MrEntry *e = std::prev(it)->second;
    if (e->base + e->len >= end && (e->access & access) == access) {
        return e;
    }
    return nullptr;
}

void MrCache::make_stale(MrEntry *e, detail::MrEntryList &dead) {
    e->cached = false;
    if (e->refcount == 0) {
        lru_.remove(e);
        dead.push_front(e);
    } else {
        stale_held_.push_front(e);
    }
}

namespace {
// Registrations short of rails kept as they come after a retry that did
// not help (short_retries_off_).
constexpr int kShortRetriesOff = 64;
} // namespace

MrEntry *MrCache::register_new(uintptr_t begin, uintptr_t end, uint64_t access, int *err,
                               detail::MrEntryList &dead, bool last_try) {
    auto *e = new (std::nothrow) MrEntry;
    if (e == nullptr) {
        *err = -ENOMEM;
        return nullptr;
    }

    // Grow the request to the union with every overlapping entry (range and access) of the
    // same exact rights, so the new entry can replace all of them in their lookup: a buffer
    // that keeps growing, or is used with increasing local rights, converges on a single
    // registration. Without reuse, or without a lookup to put it in, it stays alone.
    uintptr_t ubegin = begin;
    uintptr_t uend = end;
    uint64_t uaccess = access;
    Map *map = reuse_ ? lookup_for(exact_bits(access)) : nullptr;
    Map::iterator first, last;
    if (map != nullptr) {
        first = first_overlap(*map, begin, end);
        for (last = first; last != map->end() && last->second->base < end; ++last) {
            const MrEntry *o = last->second;
            ubegin = std::min(ubegin, o->base);
            uend = std::max(uend, o->base + o->len);
            uaccess |= o->access;
        }
    }

    // The map is not modified until the end of this function: the backend may trigger
    // re-entrant invalidate() calls, but those are only queued, so [first, last) stays valid.
    bool merged = map != nullptr;
    int rc = backend_.reg(reinterpret_cast<void *>(ubegin), uend - ubegin, uaccess, &e->reg);
    if (rc != 0 && (ubegin != begin || uend != end || uaccess != access)) {
        // The union may be unregistrable (e.g. an old neighbour needed rights this memory
        // does not allow, or was unmapped without us hearing about it). Serve this request
        // alone, uncached, rather than failing it.
        merged = false;
        ubegin = begin;
        uend = end;
        uaccess = access;
        rc = backend_.reg(reinterpret_cast<void *>(begin), end - begin, access, &e->reg);
    }
    ++stats_.misses;
    if (rc != 0) {
        delete e;
        *err = rc < 0 ? rc : -rc;
        return nullptr;
    }
    if (e->reg.rails_short_of_room && short_retries_off_ > 0) {
        --short_retries_off_;
    } else if (e->reg.rails_short_of_room && last_try) {
        short_retries_off_ = kShortRetriesOff; // (evicting did not help)
    } else if (e->reg.rails_short_of_room && !lru_.empty()) {
        // A rail had no room while idle entries hold theirs: this one is
        // given back (deregistered as the lock is dropped, with them) and
        // the caller asks again, as for a failure for room.
        dead.push_front(e);
        *err = -ENOMEM;
        return nullptr;
    }

    e->base = ubegin;
    e->len = uend - ubegin;
    e->access = uaccess;
    e->refcount = 1;

    if (merged) {
        // Superseded entries leave the lookup; their holders keep using them until release.
        for (auto it = first; it != last;) {
            MrEntry *o = it->second;
            it = map->erase(it);
            make_stale(o, dead);
        }
        try {
            map->emplace(e->base, e);
            e->cached = true;
        } catch (const std::bad_alloc &) {
            // Still a valid registration; it just is not reusable.
        }
    }
    if (!e->cached) {
        stale_held_.push_front(e);
    }
    return e;
}

MrEntry *MrCache::acquire(const void *addr, size_t len, uint64_t access, int *err, bool *cached) {
    int ignored = 0;
    if (err == nullptr) {
        err = &ignored;
    }
    const uintptr_t start = reinterpret_cast<uintptr_t>(addr);
    const uintptr_t nbytes = len == 0 ? 1 : len;
    // Reject ranges whose page-rounded end would wrap around the address space.
    if (start > UINTPTR_MAX - nbytes || start + nbytes > UINTPTR_MAX - (page_size_ - 1)) {
        *err = -EINVAL;
        return nullptr;
    }
    const uintptr_t begin = start & ~(page_size_ - 1);
    const uintptr_t end = (start + nbytes + page_size_ - 1) & ~(page_size_ - 1);

    for (bool again = false;; again = true) {
        Lock lock(*this);
        MrEntry *found = reuse_ ? find_covering(begin, end, access) : nullptr;
        if (MrEntry *e = found) {
            if (e->refcount++ == 0) {
                lru_.remove(e);
            }
            ++stats_.hits;
            *err = 0;
            if (cached) {
                *cached = true;
            }
            return e;
        }
        MrEntry *e = register_new(begin, end, access, err, lock.dead, again);
        if (e != nullptr) {
            *err = 0;
            if (cached) {
                *cached = e->cached;
            }
            return e;
        }
        // Out of room (ENOMEM, EAGAIN, ENOSPC), on the first NIC or a rail
        // (register_new), while idle entries hold registered memory (nothing
        // else would let them go before the cache is full): all of them
        // go, deregistered as the lock is dropped, and this is tried again.
        if (again || lru_.empty() || (*err != -ENOMEM && *err != -EAGAIN && *err != -ENOSPC)) {
            return nullptr;
        }
        trim_lru(lock.dead, 0);
    }
}

void MrCache::trim_lru(detail::MrEntryList &dead, size_t keep) {
    while (lru_.size() > keep) {
        MrEntry *e = lru_.pop_back();
        lookups_[exact_bits(e->access)].erase(e->base); // cached: its lookup exists
        e->cached = false;
        dead.push_front(e);
        ++stats_.evictions;
    }
}

void MrCache::release(MrEntry *e) {
    if (e == nullptr) {
        return;
    }
    Lock lock(*this);
    assert(e->refcount > 0 && "MrCache::release without matching acquire");
    if (e->refcount == 0) {
        return; // unbalanced release; ignoring it beats wrapping the count in release builds
    }
    if (--e->refcount > 0) {
        return;
    }
    if (!e->cached) {
        stale_held_.remove(e);
        lock.dead.push_front(e);
        return;
    }
    lru_.push_front(e);
    trim_lru(lock.dead, max_cached_);
}

void MrCache::invalidate_locked(uintptr_t begin, uintptr_t end, detail::MrEntryList &dead) {
    for (auto &[bits, map] : lookups_) {
        auto it = first_overlap(map, begin, end);
        while (it != map.end() && it->second->base < end) {
            MrEntry *e = it->second;
            // erase() frees a node, which may re-enter invalidate(); that only queues a range.
            it = map.erase(it);
            make_stale(e, dead);
            ++stats_.invalidations;
        }
    }
}

// Called from Open MPI's memory-release hook, which fires inside free(), munmap() or sbrk():
// often with malloc's own arena lock held, and at times inside one of our own critical
// sections. So it only queues the range, in a fixed array under a spin flag: it never
// allocates, frees, deregisters or waits for the cache mutex. Deregistering here (which frees)
// deadlocked in malloc's lock with libfabric 2.6's tcp;ofi_rxm; the efa provider's
// ibv_dereg_mr frees too. The next holder of the lock applies the queue before it looks
// anything up, so a reused address is never served from a stale entry.
void MrCache::invalidate(const void *addr, size_t len) {
    if (len == 0 || g_fork_child.load(std::memory_order_relaxed)) {
        return;
    }
    const uintptr_t begin = reinterpret_cast<uintptr_t>(addr);
    const uintptr_t end = begin > UINTPTR_MAX - len ? UINTPTR_MAX : begin + len;
    while (pending_flag_.test_and_set(std::memory_order_acquire)) {
    }
    if (npending_ < kMaxPending) {
        pending_[npending_++] = Range{begin, end};
    } else {
        // Full: the range joins the queued one it widens least, the gap
        // between them invalidated too (more than was freed is always
        // correct, and far less than the whole cache, whose held entries
        // would all turn stale: a burst of frees between two calls).
        size_t best = 0;
        uintptr_t least = UINTPTR_MAX;
        for (size_t i = 0; i < npending_; ++i) {
            const Range &q = pending_[i];
            const uintptr_t grows =
                (std::max(q.end, end) - std::min(q.begin, begin)) - (q.end - q.begin);
            if (grows < least) {
                least = grows;
                best = i;
            }
        }
        Range &q = pending_[best];
        q = Range{std::min(q.begin, begin), std::max(q.end, end)};
    }
    has_pending_.store(true, std::memory_order_relaxed);
    pending_flag_.clear(std::memory_order_release);
}

void MrCache::apply_invalidations() {
    if (has_pending_.load(std::memory_order_relaxed)) {
        Lock lock(*this);
    }
}

void MrCache::drain_pending(detail::MrEntryList &dead) {
    // Applying a range can free map nodes and queue further ranges, hence the loop; the flag
    // is not held while a range is applied.
    for (;;) {
        while (pending_flag_.test_and_set(std::memory_order_acquire)) {
        }
        Range r{};
        bool any = true;
        if (npending_ > 0) {
            r = pending_[--npending_];
        } else {
            any = false;
            has_pending_.store(false, std::memory_order_relaxed);
        }
        pending_flag_.clear(std::memory_order_release);
        if (!any) {
            return;
        }
        invalidate_locked(r.begin, r.end, dead);
    }
}

void MrCache::destroy(detail::MrEntryList &dead) {
    while (MrEntry *e = dead.pop_back()) {
        backend_.dereg(e->reg);
        delete e;
    }
}

size_t MrCache::cached_entries() const {
    Lock lock(const_cast<MrCache &>(*this)); // applies queued invalidations first
    size_t n = 0;
    for (const auto &[bits, map] : lookups_) {
        n += map.size();
    }
    return n;
}

bool MrCache::findable(const MrEntry *e) const {
    Lock lock(const_cast<MrCache &>(*this));
    return e->cached;
}

MrCache::Stats MrCache::counts() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return stats_;
}

MrCache::Stats MrCache::stats() const {
    Lock lock(const_cast<MrCache &>(*this)); // applies queued invalidations first
    return stats_;
}

} // namespace efa
