// The memory-release hook's way into the registration cache.
//
// Open MPI's hook fires from free() and munmap() in any thread (an OpenMP
// or a CUDA runtime thread too), with no lock of ours held.  The core and
// its cache go at the last release, in another thread: detach() returns
// only once no hook call can still reach what was attached, so the cache
// may be destroyed after it.  A free() while nothing is attached costs
// one load.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>

namespace efa {

template <class Target> class ReleaseGate {
  public:
    void attach(Target *t) { target_.store(t, std::memory_order_seq_cst); }

    // No hook call uses the target once this returns.  (Never from inside
    // Target::invalidate: it would wait for itself.)
    void detach() {
        target_.store(nullptr, std::memory_order_seq_cst);
        while (users_.load(std::memory_order_seq_cst) != 0) {
            std::this_thread::yield();
        }
    }

    void invalidate(void *addr, size_t len) {
        if (!target_.load(std::memory_order_relaxed)) {
            return;
        }
        // Counted before the second look: a detach() that stored nullptr
        // after it sees the count and waits; one before it is seen here.
        users_.fetch_add(1, std::memory_order_seq_cst);
        if (Target *t = target_.load(std::memory_order_seq_cst)) {
            t->invalidate(addr, len);
        }
        users_.fetch_sub(1, std::memory_order_release);
    }

  private:
    std::atomic<Target *> target_{nullptr};
    std::atomic<uint32_t> users_{0};
};

} // namespace efa
