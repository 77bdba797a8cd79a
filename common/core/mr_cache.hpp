// Memory-registration cache shared by the EFA components.
//
// Registering memory with the NIC is expensive (pinning, IOMMU/NIC table updates), so
// registrations are kept after their last user releases them and reused for later transfers
// from the same buffer. The cache knows nothing about libfabric: MrBackend performs the real
// registration, which keeps this file testable with a fake backend.
//
// Lifetime rules, in short:
//  * acquire() returns a refcounted entry; every acquire() is paired with one release().
//  * An entry is either "cached" (findable by later acquires) or "stale" (only its current
//    holders can use it; deregistered when the last of them releases it).
//  * invalidate() (called from the memory-release hook when memory is freed or unmapped)
//    makes every overlapping entry stale at once, so a reused address is registered anew.
//  * Unreferenced cached entries are kept in LRU order, at most max_cached_entries of them.
//  * Rights named in MrCacheConfig::exact_access (the remote ones) are never widened: an entry
//    serves, and merges with, only requests asking exactly those bits, because every holder
//    of a registration's key gets all of its rights. Other rights may be merged upwards.
//  * Without reuse (MrCacheConfig::reuse false) nothing is ever looked up: every acquire
//    registers its own range and its release deregisters it. For processes where freed memory
//    goes unreported, so that no registration can outlive the memory it was made for.
//
// Locking and re-entrancy: one std::mutex protects everything but the queue of invalidated
// ranges. invalidate() runs inside Open MPI's memory-release hook, i.e. inside free(),
// munmap() or sbrk(), often with malloc's arena lock held and at times inside one of our own
// critical sections; so it only queues its range in a fixed array under a spin flag (no
// allocation, no free, no deregistration, no wait for the mutex). Whoever takes the lock next
// applies the queue before looking anything up, and again before unlocking. Deregistration
// and deletion of dead entries happen after the lock is dropped, so backend dereg() and free()
// never run under it. The backend must not call acquire(), release(), stats() or
// cached_entries() of the cache that is calling it; invalidate() is fine.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace efa {

// Whatever the backend returns for one registration (libfabric: fid_mr*, desc, key).
// The most NICs a process opens (peer_blob.hpp's kMaxRails, efa_rma.h's
// EFA_MAX_RAILS).
constexpr int kMrMaxRails = 4;
// The most device allocations side by side one registration covers (CUDA
// VMM memory: device_span.hpp; PyTorch's expandable segments grow by 20
// MiB, so 5 GiB of them; efa_cuda_vmm_ipc.h's EFA_CUDA_VMM_MAX_PIECES on
// one node).
constexpr int kMrMaxPieces = 256;

struct MrRegistration {
    void *handle = nullptr; // backend object (fid_mr*)
    // Device memory (FiMrBackend for devices): the allocation's id when it
    // was registered (efa_device_hmem_t.buffer_id), and which cache holds it.
    uint64_t buffer_id = 0;
    bool device = false;
    bool no_sync_memops = false; // (efa_device_hmem_t.no_sync_memops)
    // Device memory: the allocations it covers from its base, side by side
    // (one, or CUDA VMM pieces), each's length and id when registered.
    struct Piece {
        size_t len;
        uint64_t id;
    };
    std::vector<Piece> pieces;
    uintptr_t pieces_base = 0; // the first's start (a merged range may start inside it)
    void *desc = nullptr;      // local descriptor (fi_mr_desc)
    uint64_t key = 0;          // remote key (fi_mr_key)
    // The same range on the process's other NICs, where it opened several
    // (striped one-sided transfers): rails 1 .. rails-1.  A rail whose
    // registration failed ends the run: rails counts the first ones only.
    int rails = 1;
    // That failure was for room (ENOMEM, EAGAIN, ENOSPC): the cache lets
    // its idle entries go and registers the range once more before it
    // keeps one with fewer rails.
    bool rails_short_of_room = false;
    struct Rail {
        void *handle = nullptr;
        void *desc = nullptr;
        uint64_t key = 0;
    } rail[kMrMaxRails - 1];
};

class MrBackend {
  public:
    virtual ~MrBackend() = default;
    // Returns 0 or a negative errno-style code; fills *out on success.
    virtual int reg(void *base, size_t len, uint64_t access, MrRegistration *out) = 0;
    virtual void dereg(const MrRegistration &r) = 0;
};

class MrCache;

// How a cache serves acquires (see the file comment).
struct MrCacheConfig {
    // Unreferenced entries kept for reuse (LRU); 0: an entry is deregistered when its last
    // holder releases it.
    size_t max_cached_entries = 0;
    // Access bits an entry must carry exactly as asked, never more (libfabric: the remote
    // rights). Entries differing in these bits may overlap; each lives in its own lookup.
    uint64_t exact_access = 0;
    // false: no entry is ever shared or kept (free() and munmap() go unreported).
    bool reuse = true;
    // Registrations are rounded out to multiples of this (a power of two; 0: the page size).
    // 1 for device memory, whose allocations are registered exactly: a page rounded out may
    // reach into another allocation, or past the device's memory.
    size_t align = 0;
};

namespace detail {
class MrEntryList;
}

// What callers hold. The address is stable and the public fields are immutable while acquired.
struct MrEntry {
    uintptr_t base = 0;  // page-aligned start of the registration
    size_t len = 0;      // page-aligned length
    uint64_t access = 0; // access flags registered (may exceed those asked, but for exact ones)
    MrRegistration reg;

  private:
    friend class MrCache;
    friend class detail::MrEntryList;

    uint32_t refcount = 0;
    bool cached = false; // present in the lookup map
    // Intrusive hook: an entry sits in at most one list at a time (LRU when cached and idle,
    // stale-held list when stale and referenced, or a to-be-destroyed list), so lists never
    // need to allocate, which matters inside the re-entrancy-sensitive critical sections.
    MrEntry *prev = nullptr;
    MrEntry *next = nullptr;
};

namespace detail {

// Minimal intrusive doubly-linked list over MrEntry::prev/next. Front = most recent.
class MrEntryList {
  public:
    MrEntryList() = default;
    MrEntryList(const MrEntryList &) = delete;
    MrEntryList &operator=(const MrEntryList &) = delete;

    void push_front(MrEntry *e);
    void remove(MrEntry *e);
    MrEntry *pop_back(); // nullptr when empty
    void splice_front(MrEntryList &other);
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

  private:
    MrEntry *head_ = nullptr;
    MrEntry *tail_ = nullptr;
    size_t size_ = 0;
};

} // namespace detail

class MrCache {
  public:
    // max_cached_entries bounds the unreferenced entries kept for reuse (LRU); 0 disables
    // caching: an entry is deregistered when its last holder releases it.
    MrCache(MrBackend &backend, size_t max_cached_entries);
    MrCache(MrBackend &backend, const MrCacheConfig &config);
    // Deregisters everything. Entries still held at this point are deregistered too (their
    // holders' pointers dangle afterwards, so release everything first). The memory-release
    // hook must be detached from this cache before destruction.
    ~MrCache();

    MrCache(const MrCache &) = delete;
    MrCache &operator=(const MrCache &) = delete;

    // Find or create a registration covering [addr, addr+len) with at least 'access' rights
    // (exactly those in the config's exact_access bits).
    // Registrations are page-aligned. len == 0 is treated as one byte, so the page holding
    // addr is registered and the caller gets a usable descriptor. Returns nullptr and sets
    // *err (negative; err may be nullptr) on failure. Pair every success with release().
    // Where the backend runs out of room (ENOMEM, EAGAIN: the memlock limit, the NIC's
    // registrations), every idle entry is deregistered and the registration tried once more.
    // (*cached, where given: whether the entry returned is findable by later acquires, as
    // findable() would say, read under the same lock)
    MrEntry *acquire(const void *addr, size_t len, uint64_t access, int *err,
                     bool *cached = nullptr);
    void release(MrEntry *e);

    // The memory [addr, addr+len) was freed or unmapped: every entry overlapping it by a byte
    // leaves the lookup, idle ones are deregistered, held ones on their last release. Only
    // queued here (safe inside free(), munmap() and our own critical sections: see the file
    // comment); applied by the next acquire(), release(), apply_invalidations(), stats() or
    // cached_entries(). len == 0 does nothing, and so does every call in a child of fork().
    void invalidate(const void *addr, size_t len);

    // Applies queued invalidations now (a relaxed load when there are none): the core's
    // progress calls it, so freed memory does not stay registered (pinned) until the next
    // registration.
    void apply_invalidations();

    // Deregisters every idle entry (held ones stay): before a fork where the
    // process asked for fork safety (fork_safety_requested).
    void drop_idle();

    // Entries currently findable by acquire(), held or idle.
    size_t cached_entries() const;
    // Is this held entry findable by later acquires (false: stale, or registered alone because
    // its union with overlapping entries could not be registered)?
    bool findable(const MrEntry *e) const;

    // Whether acquires may be served by earlier registrations (MrCacheConfig::reuse).
    bool reuses() const { return reuse_; }

    struct Stats {
        uint64_t hits;          // acquires served by an existing entry
        uint64_t misses;        // acquires that called the backend (successfully or not)
        uint64_t evictions;     // idle entries dropped: max_cached_entries, or out of room
        uint64_t invalidations; // entries removed from lookup by invalidate()
    };
    Stats stats() const;
    // The same, read without applying queued invalidations (no deregistration
    // in the reader's thread): for readers outside the transfer paths, such
    // as MPI_T.
    Stats counts() const;

  private:
    class Lock;
    struct Range {
        uintptr_t begin;
        uintptr_t end; // exclusive
    };

    using Map = std::map<uintptr_t, MrEntry *>;

    uint64_t exact_bits(uint64_t access) const { return access & exact_access_; }
    // The lookup of entries whose exact bits are 'bits'; nullptr if it cannot be created.
    Map *lookup_for(uint64_t bits);
    static Map::iterator first_overlap(Map &map, uintptr_t begin, uintptr_t end);
    MrEntry *find_covering(uintptr_t begin, uintptr_t end, uint64_t access);
    // last_try: a registration short of rails for room is kept, not given
    // back for another try after the idle entries go.
    MrEntry *register_new(uintptr_t begin, uintptr_t end, uint64_t access, int *err,
                          detail::MrEntryList &dead, bool last_try);
    void make_stale(MrEntry *e, detail::MrEntryList &dead);
    void invalidate_locked(uintptr_t begin, uintptr_t end, detail::MrEntryList &dead);
    void trim_lru(detail::MrEntryList &dead, size_t keep);
    void drain_pending(detail::MrEntryList &dead);
    void destroy(detail::MrEntryList &dead);

    MrBackend &backend_;
    const size_t max_cached_;
    const uint64_t exact_access_;
    const bool reuse_;
    const uintptr_t page_size_;

    mutable std::mutex mutex_;

    // Cached entries by their exact bits, then by base; pairwise non-overlapping within one
    // lookup. Lookups are created on first use and kept (a handful at most).
    std::map<uint64_t, Map> lookups_;
    detail::MrEntryList lru_;        // cached entries with refcount 0, most recent first
    detail::MrEntryList stale_held_; // stale entries that still have holders
    Stats stats_{};
    // A registration short of rails came back short again after the idle
    // entries went (the rail full of held ones): the next this many are
    // kept as they come, not the whole cache emptied for each.
    int short_retries_off_ = 0;

    // Ranges invalidated and not applied yet (guarded by pending_flag_, not the mutex).
    // Fixed size so queuing never allocates; when it is full a range joins the queued one it
    // widens least.
    static constexpr size_t kMaxPending = 32;
    std::atomic_flag pending_flag_ = ATOMIC_FLAG_INIT;
    std::atomic<bool> has_pending_{false}; // a hint for apply_invalidations()
    std::array<Range, kMaxPending> pending_{};
    size_t npending_ = 0;
};

// Whether the process asked for fork safety as rdma-core and libfabric's
// efa read it (RDMAV_FORK_SAFE or IBV_FORK_SAFE set, whatever its value;
// FI_EFA_FORK_SAFE true): then registered pages are absent in a fork's
// child, and every cache drops its idle entries before a fork.
bool fork_safety_requested();

} // namespace efa
