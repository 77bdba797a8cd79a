// What the efa::MrCache unit tests (test_mr_cache_lookup.cpp,
// test_mr_cache_invalidate.cpp) share: a fake backend that tracks every live
// registration, so that a test can check exactly when the cache registers and
// deregisters; page-aligned memory; and the fixture that checks each acquire.
#pragma once

#include "mr_cache.hpp"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <mutex>
#include <new>
#include <set>
#include <vector>

namespace mr_cache_test {

using efa::MrCache;
using efa::MrEntry;
using efa::MrRegistration;

inline constexpr uint64_t kRead = 1;
inline constexpr uint64_t kWrite = 2;
inline constexpr uint64_t kRemote = 4;      // a remote right (remote read, say)
inline constexpr uint64_t kRemoteWrite = 8; // another one

inline const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

class FakeBackend : public efa::MrBackend {
  public:
    struct Call {
        uintptr_t base;
        size_t len;
        uint64_t access;
    };

    int reg(void *base, size_t len, uint64_t access, MrRegistration *out) override {
        if (on_reg) {
            // Outside our mutex: the hook may call back into the cache (invalidate()).
            on_reg(base, len);
        }
        std::lock_guard<std::mutex> g(mu_);
        ++reg_calls;
        calls.push_back({reinterpret_cast<uintptr_t>(base), len, access});
        if (fail_all || (fail_above != 0 && len > fail_above)) {
            return -EFAULT;
        }
        if (capacity != 0 && live_.size() >= capacity) {
            return -ENOMEM; // as a memlock limit or the NIC's registrations
        }
        if (touch_pages) {
            // A real NIC registration pins the pages; touching them makes registering memory
            // that is not mapped crash the test instead of passing silently.
            for (size_t off = 0; off < len; off += kPage) {
                (void)*static_cast<volatile char *>(static_cast<char *>(base) + off);
            }
        }
        // A second NIC (rail) with less room: the range is kept on the
        // first alone, and the cache told why.
        out->rails_short_of_room = rail_capacity != 0 && live_.size() >= rail_capacity;
        auto *rec = new Call{reinterpret_cast<uintptr_t>(base), len, access};
        live_.insert(rec);
        out->handle = rec;
        out->desc = rec;
        out->key = ++next_key_;
        return 0;
    }

    void dereg(const MrRegistration &r) override {
        if (in_release_hook) {
            // A real deregistration frees memory: inside free()'s hook that waits for ever
            // on malloc's own lock (seen with libfabric 2.6's tcp;ofi_rxm).
            ADD_FAILURE() << "dereg from inside the memory-release hook";
        }
        std::lock_guard<std::mutex> g(mu_);
        ++dereg_calls;
        auto it = live_.find(r.handle);
        if (it == live_.end()) {
            ADD_FAILURE() << "dereg of unknown or already deregistered handle";
            return;
        }
        live_.erase(it);
        delete static_cast<Call *>(r.handle);
    }

    bool is_live(const MrEntry *e) const { return is_live(e->reg.handle); }
    bool is_live(void *handle) const {
        std::lock_guard<std::mutex> g(mu_);
        return live_.count(handle) != 0;
    }
    size_t outstanding() const {
        std::lock_guard<std::mutex> g(mu_);
        return live_.size();
    }
    uint64_t regs() const { return reg_calls.load(); }
    uint64_t deregs() const { return dereg_calls.load(); }

    std::atomic<uint64_t> reg_calls{0};
    std::atomic<uint64_t> dereg_calls{0};
    std::vector<Call> calls;
    bool fail_all = false;
    size_t fail_above = 0;    // fail registrations longer than this (0 = never)
    size_t capacity = 0;      // -ENOMEM with this many live (0 = no limit)
    size_t rail_capacity = 0; // short of rails for room with this many live (0 = no limit)
    bool touch_pages = false;
    std::function<void(void *, size_t)> on_reg;
    bool in_release_hook = false; // set by tests around invalidate(), as free() would be

  private:
    mutable std::mutex mu_;
    std::set<void *> live_;
    uint64_t next_key_ = 0;
};

// Page-aligned anonymous mapping, so tests control page boundaries exactly.
class Pages {
  public:
    explicit Pages(size_t npages) : len_(npages * kPage) {
        void *p = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            throw std::bad_alloc();
        }
        base_ = static_cast<char *>(p);
    }
    ~Pages() { munmap(base_, len_); }
    Pages(const Pages &) = delete;
    Pages &operator=(const Pages &) = delete;

    char *page(size_t i) const { return base_ + i * kPage; }
    size_t size() const { return len_; }

  private:
    char *base_;
    size_t len_;
};

inline bool covers(const MrEntry *e, const void *addr, size_t len) {
    const auto a = reinterpret_cast<uintptr_t>(addr);
    return e->base <= a && a + len <= e->base + e->len;
}

class MrCacheTest : public ::testing::Test {
  protected:
    MrEntry *acquire(MrCache &c, const void *addr, size_t len, uint64_t access) {
        int err = 1;
        MrEntry *e = c.acquire(addr, len, access, &err);
        EXPECT_NE(e, nullptr) << "err=" << err;
        EXPECT_EQ(err, 0);
        if (e != nullptr) {
            EXPECT_TRUE(covers(e, addr, len == 0 ? 1 : len));
            EXPECT_EQ(e->access & access, access);
            EXPECT_TRUE(backend.is_live(e));
        }
        return e;
    }

    FakeBackend backend;
    Pages mem{16};
};

} // namespace mr_cache_test
