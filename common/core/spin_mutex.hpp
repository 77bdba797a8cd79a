// A lock for critical sections of a few loads and stores that never block:
// one locked exchange to take it and a store to give it back, where a
// std::mutex costs two calls into the C library (about 80 instructions,
// which the on-node one-sided paths pay per operation).  BasicLockable, so
// std::lock_guard takes it.  Not for sections that wait for another thread
// or take long: a waiter spins.
#pragma once

#include <atomic>

namespace efa {

class SpinMutex {
  public:
    void lock() {
        while (locked_.exchange(true, std::memory_order_acquire)) {
            while (locked_.load(std::memory_order_relaxed)) {
                relax();
            }
        }
    }
    void unlock() { locked_.store(false, std::memory_order_release); }

  private:
    static void relax() {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
    }
    std::atomic<bool> locked_{false};
};

} // namespace efa
