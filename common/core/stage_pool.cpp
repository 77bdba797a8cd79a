// Host buffers for device bytes staged through the host (efa_stage.h).
#include "stage_pool.hpp"

#include <atomic>
#include <cstdlib>

#include <sys/mman.h>

#include "efa_device.h"
#include "efa_stage.h"

namespace efa {

namespace {

// The class of len (a power of two from kMinShift), or -1 above the last.
int class_of(size_t len) {
    int shift = StagePool::kMinShift;
    while (shift <= StagePool::kMaxShift && (size_t{1} << shift) < len) {
        ++shift;
    }
    return shift <= StagePool::kMaxShift ? shift - StagePool::kMinShift : -1;
}

size_t class_len(int c) {
    return size_t{1} << (c + StagePool::kMinShift);
}

void *map(size_t len) {
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

} // namespace

// A buffer of the pool goes: unpinned first where the device pinned it.
// One the device would not unpin (no context in this thread, the backend
// gone) stays mapped for good: unmapped, its address could be mapped
// again while the driver still holds the old pages for it.
// (its bytes leave the pinned budget either way: one kept mapped never
// comes back to the idle list, and counted it would stop pinning for the
// process once a cap's worth of them had been dropped so)
void StagePool::unmap(void *p, size_t len, bool pinned) {
    const bool still = pinned && 0 != efa_device_host_unregister(p);
    if (pinned) {
        std::lock_guard<std::mutex> guard(lock_);
        pinned_bytes_ -= len;
        if (still) {
            still_pinned_.push_back(p);
            return;
        }
    }
    munmap(p, len);
}

// A dropped buffer of the pool: unpinned as unmap does (one the device
// would not unpin is kept whole), then emptied but left mapped.  (No
// lock held over madvise: Open MPI's memory hooks see it, and invalidate
// the registrations over it, which only queues.)
void StagePool::retire(void *p, size_t len, bool pinned) {
    const bool still = pinned && 0 != efa_device_host_unregister(p);
    {
        std::lock_guard<std::mutex> guard(lock_);
        if (pinned) {
            pinned_bytes_ -= len;
        }
        if (still) {
            still_pinned_.push_back(p);
            return;
        }
        retired_.push_back({p, len});
    }
    (void)madvise(p, len, MADV_DONTNEED); // (where refused, its pages simply stay)
}

uint64_t StagePool::retired_dropped() const {
    std::lock_guard<std::mutex> guard(lock_);
    return retired_.size();
}

uint64_t StagePool::kept_pinned() const {
    std::lock_guard<std::mutex> guard(lock_);
    return still_pinned_.size();
}

StagePool::~StagePool() {
    trim();
    // (the process's pool is never destroyed: one that is, a test's, has
    // no provider left behind it)
    for (void *p : dropped_) {
        free(p);
    }
    for (const Retired &r : retired_) {
        munmap(r.p, r.len);
    }
}

void *StagePool::get(size_t len) {
    if (len < (size_t{1} << kMinShift)) {
        return malloc(len ? len : 1);
    }
    const int c = class_of(len);
    const size_t mapped = c >= 0 ? class_len(c) : (len + 4095) & ~size_t{4095};
    {
        std::lock_guard<std::mutex> guard(lock_);
        if (c >= 0 && !idle_[c].empty()) {
            void *p = idle_[c].back();
            idle_[c].pop_back();
            idle_bytes_ -= mapped;
            owned_[p].idle = false;
            ++pooled_;
            ++reused_;
            return p;
        }
    }
    void *p = map(mapped);
    if (!p) {
        return nullptr;
    }
    // A buffer of a class is kept: pinned for the device's copies once,
    // they then go by its DMA.  Pinned buffers stay within the idle cap,
    // all of them, in use or idle, so that each can be kept when it comes
    // back (put): one beyond it, mapped while many large messages are in
    // flight, would be pinned and unpinned for a single message, which
    // costs about what pinning saves.  The same for one above the last
    // class, mapped for one message.
    bool reserved = false;
    if (c >= 0) {
        std::lock_guard<std::mutex> guard(lock_);
        reserved = pinned_bytes_ + mapped <= idle_cap_;
        pinned_bytes_ += reserved ? mapped : 0; // (held while the device pins)
    }
    const bool pinned = reserved && 0 == efa_device_host_register(p, mapped);
    std::lock_guard<std::mutex> guard(lock_);
    pinned_bytes_ -= reserved && !pinned ? mapped : 0;
    owned_.emplace(p, Owned{mapped, false, pinned});
    ++pooled_;
    pins_ += pinned;
    return p;
}

void StagePool::put(void *p) {
    // (every buffer of the pool is page aligned; malloc's large ones are
    // not: most of malloc's go back without the lock)
    if (!p || 0 != (reinterpret_cast<uintptr_t>(p) & 4095)) {
        free(p);
        return;
    }
    size_t len = 0;
    bool pinned = false;
    bool malloced = false;
    std::vector<Evicted> evicted;
    {
        std::lock_guard<std::mutex> guard(lock_);
        const auto it = owned_.find(p);
        if (it == owned_.end()) {
            malloced = true; // freed below, outside the lock
        } else if (it->second.idle) {
            ++twice_; // kept already: a second copy in the idle list would be handed out twice
            return;
        } else {
            len = it->second.len;
            pinned = it->second.pinned;
            const int c = class_of(len);
            if (c >= 0 && class_len(c) == len && pinned && idle_bytes_ + len > idle_cap_) {
                evict_unpinned(idle_bytes_ + len - idle_cap_, evicted);
            }
            if (c >= 0 && class_len(c) == len && idle_bytes_ + len <= idle_cap_) {
                it->second.idle = true;
                idle_[c].push_back(p);
                idle_bytes_ += len;
                len = 0;
            } else {
                owned_.erase(it);
            }
        }
    }
    for (const Evicted &e : evicted) {
        unmap(e.p, e.len, false);
    }
    if (malloced) {
        free(p);
    } else if (0 != len) {
        unmap(p, len, pinned); // above the last class, or more idle than the cap
    }
}

// Idle buffers the device did not pin, of at least `need` bytes in all,
// out of the idle lists (the largest first) into `out`, to be unmapped
// outside the lock: room for a pinned one that comes back.  There is
// always enough: pinned buffers, in use or idle, stay within the cap.
void StagePool::evict_unpinned(size_t need, std::vector<Evicted> &out) {
    // The smallest one that makes room alone, where there is one: a 64 KiB
    // buffer coming back takes the place of a 64 KiB one, not of 64 MiB.
    for (int c = 0; c < kClasses; ++c) {
        if (class_len(c) < need) {
            continue;
        }
        std::vector<void *> &list = idle_[c];
        for (size_t i = list.size(); i-- > 0;) {
            const auto it = owned_.find(list[i]);
            if (it == owned_.end() || it->second.pinned) {
                continue;
            }
            out.push_back({list[i], class_len(c)});
            idle_bytes_ -= class_len(c);
            owned_.erase(it);
            list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
            return;
        }
    }
    size_t freed = 0; // (else several, the largest first)
    for (int c = kClasses - 1; c >= 0 && freed < need; --c) {
        std::vector<void *> &list = idle_[c];
        for (size_t i = list.size(); i-- > 0 && freed < need;) {
            const auto it = owned_.find(list[i]);
            if (it == owned_.end() || it->second.pinned) {
                continue;
            }
            out.push_back({list[i], class_len(c)});
            freed += class_len(c);
            idle_bytes_ -= class_len(c);
            owned_.erase(it);
            list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
        }
    }
}

void StagePool::drop(void *p) {
    size_t len = 0;
    bool pinned = false;
    if (p && 0 == (reinterpret_cast<uintptr_t>(p) & 4095)) {
        std::lock_guard<std::mutex> guard(lock_);
        const auto it = owned_.find(p);
        if (it != owned_.end()) {
            if (it->second.idle) {
                ++twice_;
                return;
            }
            len = it->second.len;
            pinned = it->second.pinned;
            owned_.erase(it);
        }
    }
    if (0 != len) {
        retire(p, len, pinned);
    } else if (p) {
        std::lock_guard<std::mutex> guard(lock_);
        dropped_.push_back(p); // (few: operations that failed)
    }
}

uint64_t StagePool::held_dropped() const {
    std::lock_guard<std::mutex> guard(lock_);
    return dropped_.size();
}

void StagePool::trim() {
    struct Out {
        void *p;
        size_t len;
        bool pinned;
    };
    std::vector<Out> out;
    {
        std::lock_guard<std::mutex> guard(lock_);
        for (int c = 0; c < kClasses; ++c) {
            for (void *p : idle_[c]) {
                const auto it = owned_.find(p);
                out.push_back({p, class_len(c), it != owned_.end() && it->second.pinned});
                owned_.erase(p);
            }
            idle_[c].clear();
        }
        idle_bytes_ = 0;
    }
    for (const Out &o : out) {
        unmap(o.p, o.len, o.pinned);
    }
}

uint64_t StagePool::pooled() const {
    std::lock_guard<std::mutex> guard(lock_);
    return pooled_;
}

uint64_t StagePool::given_back_twice() const {
    std::lock_guard<std::mutex> guard(lock_);
    return twice_;
}

uint64_t StagePool::pins() const {
    std::lock_guard<std::mutex> guard(lock_);
    return pins_;
}

uint64_t StagePool::reused() const {
    std::lock_guard<std::mutex> guard(lock_);
    return reused_;
}

size_t StagePool::idle_bytes() const {
    std::lock_guard<std::mutex> guard(lock_);
    return idle_bytes_;
}

bool StagePool::owns(const void *p) const {
    std::lock_guard<std::mutex> guard(lock_);
    return owned_.count(p) != 0;
}

} // namespace efa

namespace {
// Never destroyed: a buffer may come back from a component's last
// completion after static destructors ran.
efa::StagePool &pool() {
    static auto *p = new efa::StagePool();
    return *p;
}
// A pooled buffer was ever handed out: until then every buffer given back
// is malloc's (Open MPI's packed copies of host datatypes), freed at once.
std::atomic<bool> g_pooled{false};
} // namespace

extern "C" {

void *efa_stage_get(size_t len) {
    if (len >= (size_t{1} << efa::StagePool::kMinShift) &&
        !g_pooled.load(std::memory_order_relaxed)) {
        g_pooled.store(true, std::memory_order_relaxed);
    }
    return pool().get(len);
}

void efa_stage_free(void *p) {
    // (a buffer of the pool was handed out, so the flag is set, in the
    // thread that gives it back or before the hand-over that brought it)
    if (__builtin_expect(!g_pooled.load(std::memory_order_relaxed), 1)) {
        free(p);
        return;
    }
    pool().put(p);
}

void efa_stage_drop(void *p) {
    pool().drop(p); // (a failed operation's: no fast path needed)
}

void efa_stage_trim(void) {
    if (g_pooled.load(std::memory_order_relaxed)) {
        pool().trim();
    }
}

void efa_stage_get_counts(efa_stage_counts_t *out) {
    out->pooled = pool().pooled();
    out->reused = pool().reused();
    out->idle_bytes = pool().idle_bytes();
    out->pinned = pool().pins();
}

} // extern "C"
