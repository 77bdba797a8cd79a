// efa::ReleaseGate: the memory-release hook reaches the registration cache
// from free() in any thread while the last release of the core destroys
// the cache in another; detach() must wait for a hook call inside it.
#include "mr_cache_fake_backend.hpp"
#include "release_gate.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace {

using namespace mr_cache_test;

// A target whose invalidate() stays until the test lets it go.
struct SlowTarget {
    std::atomic<int> calls{0};
    std::atomic<bool> inside{false}, let_go{false};
    void invalidate(void *, size_t) {
        inside = true;
        while (!let_go) {
            std::this_thread::yield();
        }
        ++calls;
        inside = false;
    }
};

TEST(ReleaseGate, DetachWaitsForAHookCallStillInTheTarget) {
    efa::ReleaseGate<SlowTarget> gate;
    SlowTarget target;
    gate.attach(&target);
    std::thread hook([&] { gate.invalidate(nullptr, 4096); });
    while (!target.inside) {
        std::this_thread::yield();
    }
    std::atomic<bool> detached{false};
    std::thread closer([&] {
        gate.detach();
        detached = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(detached) << "detach() returned while a hook call was in the target";
    target.let_go = true;
    hook.join();
    closer.join();
    EXPECT_TRUE(detached);
    EXPECT_EQ(target.calls, 1);
    // Once detached, a free() reaches nothing.
    gate.invalidate(nullptr, 4096);
    EXPECT_EQ(target.calls, 1);
}

// The real cache, made and destroyed again and again under a thread that
// frees without pause (ThreadSanitizer's build sees any access after the
// destruction; every build sees a crash on freed memory).
TEST_F(MrCacheTest, ACacheDestroyedAfterDetachIsNeverReachedByTheHook) {
    efa::ReleaseGate<MrCache> gate;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> frees{0};
    std::thread freer([&] {
        while (!stop) {
            gate.invalidate(mem.page(0), kPage);
            ++frees;
        }
    });
    while (frees == 0) {
        std::this_thread::yield();
    }
    for (int round = 0; round < 300; ++round) {
        auto cache = std::make_unique<MrCache>(backend, 8);
        gate.attach(cache.get());
        MrEntry *e = acquire(*cache, mem.page(0), kPage, kRead);
        cache->release(e);
        gate.detach();
        cache.reset();
    }
    stop = true;
    freer.join();
    EXPECT_GT(frees.load(), 0u);
    EXPECT_EQ(backend.regs(), backend.deregs()) << "every registration let go";
}

} // namespace
