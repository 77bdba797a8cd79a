// The pool of efa_stage.h: host buffers for device bytes staged through
// the host, kept so that their pages stay faulted in and registered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace efa {

class StagePool {
  public:
    static constexpr int kMinShift = 16; // 64 KiB: below, malloc
    static constexpr int kMaxShift = 26; // 64 MiB: above, mapped for one message
    static constexpr size_t kIdleCap = size_t{128} << 20;

    explicit StagePool(size_t idle_cap = kIdleCap) : idle_cap_(idle_cap) {}
    ~StagePool();
    StagePool(const StagePool &) = delete;
    StagePool &operator=(const StagePool &) = delete;

    void *get(size_t len);
    void put(void *p); // get's, or malloc's
    // p's memory is not used again: a provider may still hold it (an
    // operation that failed or was given up on), whose late bytes must
    // not land in a later message.  get's gives its pages back to the
    // system (MADV_DONTNEED) but keeps its addresses mapped for good:
    // unmapped, a late write by the provider's CPU copy would fault, or
    // land in whatever the next mmap put there.  malloc's is held for good
    // (freed, its bytes would go back to the heap, where a late write
    // would corrupt whatever was allocated there next).
    void drop(void *p);
    uint64_t held_dropped() const;    // malloc's buffers drop held
    uint64_t retired_dropped() const; // get's buffers drop kept mapped, emptied
    void trim();
    uint64_t pooled() const;
    uint64_t reused() const;
    uint64_t pins() const; // buffers the device pinned for its copies (efa_device_host_register)
    uint64_t kept_pinned() const; // buffers the device would not unpin: kept mapped for good
    size_t idle_bytes() const;
    bool owns(const void *p) const;
    uint64_t given_back_twice() const; // puts of a buffer already idle (ignored)

  private:
    static constexpr int kClasses = kMaxShift - kMinShift + 1;
    mutable std::mutex lock_;
    const size_t idle_cap_;
    size_t idle_bytes_ = 0;
    std::vector<void *> idle_[kClasses];
    struct Owned {
        size_t len;
        bool idle;
        bool pinned; // by the device, unpinned before it is unmapped
    };
    std::unordered_map<const void *, Owned> owned_; // mapped by this pool
    std::vector<void *> dropped_;                   // malloc's, dropped: never freed
    std::vector<void *> still_pinned_;              // not unpinned: never unmapped
    struct Retired {
        void *p;
        size_t len;
    };
    std::vector<Retired> retired_; // get's, dropped: emptied, never unmapped (but by ~StagePool)
    void retire(void *p, size_t len, bool pinned);
    struct Evicted {
        void *p;
        size_t len;
    };
    void evict_unpinned(size_t need, std::vector<Evicted> &out);
    // Bytes of the buffers pinned and owned, in use or idle: at most idle_cap_.
    size_t pinned_bytes_ = 0;
    void unmap(void *p, size_t len, bool pinned);
    uint64_t pooled_ = 0, reused_ = 0, twice_ = 0, pins_ = 0;
};

} // namespace efa
