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
void StagePool::unmap(void *p, size_t len, bool pinned) {
    if (pinned && 0 != efa_device_host_unregister(p)) {
        std::lock_guard<std::mutex> guard(lock_);
        still_pinned_.push_back(p);
        return;
    }
    munmap(p, len);
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
    // they then go by its DMA (one mapped for a single message is not:
    // pinning it would cost about what it saves).
    const bool pinned = c >= 0 && 0 == efa_device_host_register(p, mapped);
    std::lock_guard<std::mutex> guard(lock_);
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
    {
        std::lock_guard<std::mutex> guard(lock_);
        const auto it = owned_.find(p);
        if (it == owned_.end()) {
            len = 0; // malloc's: freed below, outside the lock
        } else if (it->second.idle) {
            ++twice_; // kept already: a second copy in the idle list would be handed out twice
            return;
        } else {
            len = it->second.len;
            const int c = class_of(len);
            if (c >= 0 && class_len(c) == len && idle_bytes_ + len <= idle_cap_) {
                it->second.idle = true;
                idle_[c].push_back(p);
                idle_bytes_ += len;
                return;
            }
            pinned = it->second.pinned;
            owned_.erase(it);
        }
    }
    if (0 == len) {
        free(p);
    } else {
        unmap(p, len, pinned); // above the last class, or more idle than the cap
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
        unmap(p, len, pinned);
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
