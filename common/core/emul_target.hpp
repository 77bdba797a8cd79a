// The target half of the emulated one-sided protocol: the table of this
// process's registrations that peers may name, and the execution of their
// requests against it (the C seam: include/efa_emul_target.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "efa_emul_target.h"
#include "spin_mutex.hpp"

namespace efa {

class EmulTarget {
  public:
    static const char *text(efa_emul_verdict_t v);

    void add(const efa_rma_handle_t &h, void *owner);
    // Returns once no request executes against the registration any more.
    void remove(uint64_t key);
    size_t size();

    // Hands every owner still registered to fn (outside the lock: fn may
    // release registrations) and empties the table.
    template <typename Fn> void drain(Fn fn) {
        std::unordered_map<uint64_t, Entry> left;
        {
            std::lock_guard<SpinMutex> g(mu_);
            left.swap(regs_);
            last_ = nullptr;
        }
        for (auto &kv : left) {
            wait_device_copies(kv.second.copies.get());
            fn(kv.second.owner);
        }
    }

    efa_emul_verdict_t execute(uint8_t type, const efa_btl_rma_t &rma, const void *in, void *out,
                               uint64_t *result);

  private:
    struct Entry {
        efa_rma_handle_t h;
        void *owner;
        // Device memory's: the copies running on it, which run after mu_
        // is released (they may wait for the device: not a spin's
        // section); a removal waits for them.  Shared: a copy holds it
        // past the entry's erasure.
        std::shared_ptr<std::atomic<int>> copies;
    };
    // The registration that lets [addr, addr+len) be accessed so, or the
    // verdict why none does; mu_ is held.
    // *found: that registration (when the verdict is EFA_EMUL_DONE).
    efa_emul_verdict_t check(uint64_t key, uint64_t addr, uint64_t len, uint32_t access,
                             const Entry **found) const;

    // Until no device copy runs on the registration (nullptr: host memory).
    static void wait_device_copies(const std::atomic<int> *copies);
    // Held while a request executes, so a deregistration waits for it
    // (an execution is a check and a copy of at most a chunk: a spin).
    SpinMutex mu_;
    std::unordered_map<uint64_t, Entry> regs_;
    // The entry check last found by key (cleared by every change of
    // regs_); mu_ is held.
    mutable const Entry *last_ = nullptr;
};

} // namespace efa

struct efa_emul_table {
    efa::EmulTarget target;
};
