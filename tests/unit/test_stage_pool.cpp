// The host buffers that carry device bytes through the host
// (common/core/stage_pool.cpp, efa_stage.h): a large one given back is
// handed out again with its pages (so its registration stays valid), small
// ones are malloc's, the idle bytes never pass the cap, and a buffer the
// pool did not hand out is freed, not kept.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <atomic>
#include <vector>

#include "efa_device.h"
#include "efa_stage.h"
#include "stage_pool.hpp"

namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;

TEST(StagePool, ALargeBufferGivenBackIsHandedOutAgain) {
    efa::StagePool pool;
    void *a = pool.get(4 * kMiB);
    ASSERT_NE(nullptr, a);
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(a) % 4096) << "registrations want whole pages";
    memset(a, 0x5a, 4 * kMiB);
    pool.put(a);
    EXPECT_EQ(4 * kMiB, pool.idle_bytes());
    // Any length of the same power-of-two class takes it.
    void *b = pool.get(3 * kMiB + 1);
    EXPECT_EQ(a, b);
    EXPECT_EQ(0x5a, static_cast<unsigned char *>(b)[4 * kMiB - 1]) << "the same pages, kept";
    EXPECT_EQ(2u, pool.pooled());
    EXPECT_EQ(1u, pool.reused());
    EXPECT_EQ(0u, pool.idle_bytes());
    pool.put(b);
}

TEST(StagePool, BuffersInUseAreNeverHandedOutTwice) {
    efa::StagePool pool;
    void *a = pool.get(1 * kMiB);
    void *b = pool.get(1 * kMiB);
    ASSERT_NE(nullptr, a);
    ASSERT_NE(nullptr, b);
    EXPECT_NE(a, b);
    pool.put(a);
    void *c = pool.get(1 * kMiB);
    EXPECT_EQ(a, c);
    void *d = pool.get(1 * kMiB);
    EXPECT_NE(b, d);
    EXPECT_NE(c, d);
    for (void *p : {b, c, d}) {
        pool.put(p);
    }
}

TEST(StagePool, SmallBuffersAreMallocsAndNotKept) {
    efa::StagePool pool;
    void *a = pool.get(64 * kKiB - 1);
    ASSERT_NE(nullptr, a);
    memset(a, 1, 64 * kKiB - 1);
    EXPECT_FALSE(pool.owns(a));
    pool.put(a); // free()d (the sanitizer tests see a leak or a bad free)
    EXPECT_EQ(0u, pool.idle_bytes());
    EXPECT_EQ(0u, pool.pooled());
    void *z = pool.get(0);
    EXPECT_NE(nullptr, z);
    pool.put(z);
}

TEST(StagePool, ABufferItDidNotHandOutIsFreedNotKept) {
    efa::StagePool pool;
    pool.put(pool.get(1 * kMiB)); // the pool in use
    void *m = malloc(1 * kMiB);   // Open MPI's packed copy of a host datatype
    ASSERT_NE(nullptr, m);
    pool.put(m);
    EXPECT_EQ(1 * kMiB, pool.idle_bytes()) << "a malloc'd buffer was kept as the pool's";
    EXPECT_FALSE(pool.owns(m));
    pool.put(nullptr); // nothing
}

TEST(StagePool, IdleBytesStayUnderTheCap) {
    efa::StagePool pool(8 * kMiB);
    std::vector<void *> held;
    for (int i = 0; i < 5; ++i) {
        held.push_back(pool.get(2 * kMiB));
        ASSERT_NE(nullptr, held.back());
    }
    for (void *p : held) {
        pool.put(p);
    }
    EXPECT_EQ(8 * kMiB, pool.idle_bytes());
    // The fifth was unmapped: not the pool's any more.
    int owned = 0;
    for (void *p : held) {
        owned += pool.owns(p) ? 1 : 0;
    }
    EXPECT_EQ(4, owned);
    pool.trim();
    EXPECT_EQ(0u, pool.idle_bytes());
    for (void *p : held) {
        EXPECT_FALSE(pool.owns(p));
    }
}

TEST(StagePool, ABufferAboveTheLastSizeServesOneMessage) {
    efa::StagePool pool;
    const size_t big = (size_t{1} << efa::StagePool::kMaxShift) + 1;
    void *a = pool.get(big);
    ASSERT_NE(nullptr, a);
    static_cast<char *>(a)[big - 1] = 1;
    EXPECT_TRUE(pool.owns(a));
    pool.put(a);
    EXPECT_FALSE(pool.owns(a)) << "kept, where it would hold its pages for no later message";
    EXPECT_EQ(0u, pool.idle_bytes());
}

TEST(StagePool, ThreadsTakeAndGiveBackEachTheirOwn) {
    efa::StagePool pool;
    std::vector<std::thread> threads;
    std::atomic<int> wrong{0};
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&pool, &wrong, t] {
            for (int i = 0; i < 200; ++i) {
                auto *p = static_cast<unsigned char *>(pool.get(128 * kKiB));
                memset(p, t, 128 * kKiB);
                if (p[0] != t || p[128 * kKiB - 1] != t) {
                    ++wrong;
                }
                pool.put(p);
            }
        });
    }
    for (auto &th : threads) {
        th.join();
    }
    EXPECT_EQ(0, wrong.load()) << "one buffer handed to two threads at once";
    EXPECT_EQ(800u, pool.pooled());
    EXPECT_LE(pool.idle_bytes(), 4 * 128 * kKiB);
}

// A buffer given back twice is kept once: two later gets never share it.
TEST(StagePool, ABufferGivenBackTwiceIsKeptOnce) {
    efa::StagePool pool;
    void *a = pool.get(1 * kMiB);
    ASSERT_NE(nullptr, a);
    pool.put(a);
    pool.put(a);
    EXPECT_EQ(1u, pool.given_back_twice());
    EXPECT_EQ(1 * kMiB, pool.idle_bytes());
    void *b = pool.get(1 * kMiB);
    void *c = pool.get(1 * kMiB);
    EXPECT_EQ(a, b);
    EXPECT_NE(b, c) << "one buffer handed out twice";
    pool.put(b);
    pool.put(c);
}

// A buffer whose operation failed is never handed out again: a late
// write the provider still holds must not land in a later message.
// The pool's own stays mapped, emptied: a late write by the provider's
// CPU copy lands there (no fault), and no later mapping takes its place.
TEST(StagePool, ADroppedBufferIsNotKept) {
    efa::StagePool pool;
    void *a = pool.get(1 * kMiB);
    ASSERT_NE(nullptr, a);
    memset(a, 0x5a, 1 * kMiB);
    pool.drop(a);
    EXPECT_FALSE(pool.owns(a));
    EXPECT_EQ(0u, pool.idle_bytes());
    EXPECT_EQ(1u, pool.retired_dropped());
    auto *late = static_cast<volatile uint8_t *>(a);
    EXPECT_EQ(0u, late[0] + late[kMiB - 1]) << "its pages were not given back";
    late[4096] = 1; // (unmapped: SIGSEGV)
    void *again = pool.get(1 * kMiB);
    EXPECT_NE(a, again) << "a dropped buffer handed out again";
    pool.put(again);
    pool.drop(malloc(100)); // malloc's: held, never freed nor handed out
    pool.drop(nullptr);
    EXPECT_EQ(1u, pool.held_dropped());
    void *small = pool.get(100);
    pool.drop(small);
    EXPECT_EQ(2u, pool.held_dropped());
    void *next = malloc(100);
    EXPECT_NE(small, next) << "a dropped buffer's memory went back to the heap";
    free(next);
}

TEST(EfaStage, TheProcessPoolFreesMallocsAndKeepsItsOwn) {
    void *m = malloc(100);
    efa_stage_free(m); // before or after the pool's first use: free()d
    efa_stage_counts_t before;
    efa_stage_get_counts(&before);
    void *a = efa_stage_get(256 * kKiB);
    ASSERT_NE(nullptr, a);
    efa_stage_free(a);
    void *b = efa_stage_get(256 * kKiB);
    EXPECT_EQ(a, b);
    efa_stage_counts_t after;
    efa_stage_get_counts(&after);
    EXPECT_EQ(before.pooled + 2, after.pooled);
    EXPECT_EQ(before.reused + 1, after.reused);
    efa_stage_free(b);
    efa_stage_free(malloc(1 * kMiB));
    efa_stage_trim();
    efa_stage_get_counts(&after);
    EXPECT_EQ(0u, after.idle_bytes);
}

// Where the device backend pins host memory (the fake stands in for
// cuMemHostRegister), a buffer of a class is pinned once, when it is
// mapped, stays pinned while it is kept and handed out again, and is
// unpinned before it is unmapped (over the cap, dropped, trimmed); one
// above the last class, mapped for one message, and malloc's small ones
// are never pinned.
TEST(StagePoolPinned, ABufferKeptIsPinnedOnceAndUnpinnedBeforeItGoes) {
    efa_device_install(efa_fake_device_ops());
    const size_t held0 = efa_fake_device_pinned();
    const uint64_t pins0 = efa_fake_device_pins(), bad0 = efa_fake_device_bad_unpins();
    {
        efa::StagePool pool(2 * kMiB); // room for one idle 2 MiB buffer
        void *a = pool.get(2 * kMiB);
        ASSERT_NE(nullptr, a);
        EXPECT_EQ(held0 + 1, efa_fake_device_pinned());
        pool.put(a);
        void *again = pool.get(2 * kMiB);
        EXPECT_EQ(a, again);
        EXPECT_EQ(pins0 + 1, efa_fake_device_pins()) << "kept, not pinned again";
        void *b = pool.get(2 * kMiB); // a second one: beyond the cap, so not pinned
        EXPECT_EQ(held0 + 1, efa_fake_device_pinned());
        EXPECT_EQ(1u, pool.pins());
        pool.put(again);
        pool.put(b); // unmapped (the cap)
        EXPECT_EQ(held0 + 1, efa_fake_device_pinned());
        void *c = pool.get(2 * kMiB);
        pool.drop(c); // dropped: unpinned (and emptied)
        EXPECT_EQ(held0, efa_fake_device_pinned());
        void *one = pool.get(128 * kMiB); // above the last class
        void *small = pool.get(4 * kKiB);
        EXPECT_EQ(pins0 + 1, efa_fake_device_pins()) << "neither pinned";
        pool.put(one);
        pool.put(small);
        void *d = pool.get(1 * kMiB);
        pool.put(d);
        EXPECT_EQ(held0 + 1, efa_fake_device_pinned());
        pool.trim(); // the idle one goes, unpinned
        EXPECT_EQ(held0, efa_fake_device_pinned());
    }
    EXPECT_EQ(bad0, efa_fake_device_bad_unpins()) << "nothing unpinned that was not pinned";
    efa_device_install(nullptr);
}

// A buffer the device would not unpin (CUDA: no context in the thread
// that gives it back, the backend gone) stays mapped for good: unmapped,
// its address could be mapped again while the driver holds the old pages.
// The fake device with pin and unpin of the test's (the ops are kept for
// the test: the installed backend points to them).
void install_pins(int (*pin)(void *, size_t), int (*unpin)(void *)) {
    static efa_device_ops_t ops;
    ops = *efa_fake_device_ops();
    ops.host_register = pin;
    ops.host_unregister = unpin;
    efa_device_install(&ops);
}
int pin_granted(void *, size_t) {
    return 0;
}
int unpin_refused(void *) {
    return -11; // (-FI_EAGAIN)
}
TEST(StagePoolPinned, ABufferTheDeviceWouldNotUnpinStaysMapped) {
    install_pins(pin_granted, unpin_refused);
    {
        efa::StagePool pool(1 * kMiB);
        void *a = pool.get(1 * kMiB);
        ASSERT_NE(nullptr, a);
        EXPECT_EQ(1u, pool.pins());
        pool.put(a);
        pool.trim(); // goes, but is not unpinned
        EXPECT_EQ(1u, pool.kept_pinned());
        static_cast<volatile char *>(a)[kMiB - 1] = 7; // still mapped: no fault
        EXPECT_FALSE(pool.owns(a)) << "never handed out again";
    }
    efa_device_install(nullptr);
}

// Many large messages in flight at once: buffers beyond what the idle cap
// keeps are mapped for one message each, and pinned never (pinning and
// unpinning one per message would cost about what the pin saves).
TEST(StagePoolPinned, BuffersBeyondTheCapAreNotPinnedForOneMessage) {
    efa_device_install(efa_fake_device_ops());
    const uint64_t pins0 = efa_fake_device_pins();
    {
        efa::StagePool pool(4 * kMiB); // two 2 MiB buffers kept
        for (int round = 0; round < 3; ++round) {
            void *b[4];
            for (void *&p : b) {
                p = pool.get(2 * kMiB);
                ASSERT_NE(nullptr, p);
            }
            for (void *p : b) {
                pool.put(p);
            }
            EXPECT_EQ(2u, pool.pins()) << "round " << round;
            EXPECT_EQ(4 * kMiB, pool.idle_bytes());
        }
    }
    EXPECT_EQ(pins0 + 2, efa_fake_device_pins());
    efa_device_install(nullptr);
}

// A pinned buffer that comes back while unpinned ones fill the idle cap
// takes the place of one of them: the buffers kept are the pinned ones.
TEST(StagePoolPinned, APinnedBufferComingBackTakesAnUnpinnedOnesPlace) {
    efa_device_install(efa_fake_device_ops());
    const size_t held0 = efa_fake_device_pinned();
    {
        efa::StagePool pool(4 * kMiB);
        void *p1 = pool.get(2 * kMiB), *p2 = pool.get(2 * kMiB); // pinned: the cap's worth
        void *u1 = pool.get(2 * kMiB), *u2 = pool.get(2 * kMiB); // not pinned
        ASSERT_TRUE(p1 && p2 && u1 && u2);
        EXPECT_EQ(held0 + 2, efa_fake_device_pinned());
        pool.put(u1);
        pool.put(u2); // both kept: the cap is reached
        EXPECT_EQ(4 * kMiB, pool.idle_bytes());
        pool.put(p1);
        pool.put(p2);
        EXPECT_EQ(4 * kMiB, pool.idle_bytes()) << "within the cap";
        EXPECT_FALSE(pool.owns(u1));
        EXPECT_FALSE(pool.owns(u2));
        void *a = pool.get(2 * kMiB), *b = pool.get(2 * kMiB);
        EXPECT_TRUE((a == p1 && b == p2) || (a == p2 && b == p1));
        EXPECT_EQ(2u, pool.pins());
        pool.put(a);
        pool.put(b);
        pool.trim();
        EXPECT_EQ(held0, efa_fake_device_pinned());
    }
    efa_device_install(nullptr);
}

// Buffers the device would not unpin leave the pinned budget: they never
// come back to the idle list, and counted they would stop all pinning.
TEST(StagePoolPinned, BuffersKeptPinnedDoNotStopPinning) {
    install_pins(pin_granted, unpin_refused);
    {
        efa::StagePool pool(2 * kMiB); // one 2 MiB buffer's worth pinned at a time
        for (int i = 0; i < 3; ++i) {
            void *a = pool.get(2 * kMiB);
            ASSERT_NE(nullptr, a);
            pool.drop(a); // (a failed operation's, but the unpin is refused)
        }
        EXPECT_EQ(3u, pool.pins()) << "pinning stopped by buffers kept pinned";
        EXPECT_EQ(3u, pool.kept_pinned());
    }
    efa_device_install(nullptr);
}

// A pin the device refuses gives its share of the budget back.
int pin_refused_once(void *, size_t) {
    static int calls = 0;
    return 0 == calls++ ? -11 : 0;
}
int unpin_granted(void *) {
    return 0;
}
TEST(StagePoolPinned, APinRefusedGivesItsBudgetBack) {
    install_pins(pin_refused_once, unpin_granted);
    {
        efa::StagePool pool(4 * kMiB);
        void *a = pool.get(2 * kMiB); // refused: used unpinned
        void *b = pool.get(2 * kMiB);
        void *c = pool.get(2 * kMiB);
        ASSERT_TRUE(a && b && c);
        EXPECT_EQ(2u, pool.pins()) << "the refused pin's reservation kept";
        pool.put(a);
        pool.put(b);
        pool.put(c);
        pool.trim();
    }
    efa_device_install(nullptr);
}

// A pinned buffer coming back to a full idle list evicts the smallest
// unpinned one that makes room, not the largest.
TEST(StagePoolPinned, APinnedBufferComingBackEvictsNoMoreThanItNeeds) {
    efa_device_install(efa_fake_device_ops());
    {
        efa::StagePool pool(4 * kMiB);
        void *p1 = pool.get(2 * kMiB), *p2 = pool.get(1 * kMiB), *p3 = pool.get(1 * kMiB);
        void *u1 = pool.get(2 * kMiB), *u2 = pool.get(1 * kMiB), *u3 = pool.get(1 * kMiB);
        ASSERT_TRUE(p1 && p2 && p3 && u1 && u2 && u3);
        EXPECT_EQ(3u, pool.pins());
        pool.put(u1);
        pool.put(u2);
        pool.put(u3); // the cap reached by unpinned buffers
        pool.put(p2); // 1 MiB pinned: one 1 MiB unpinned buffer goes
        EXPECT_EQ(4 * kMiB, pool.idle_bytes());
        EXPECT_TRUE(pool.owns(u1)) << "2 MiB evicted to make room for 1 MiB";
        EXPECT_NE(pool.owns(u2), pool.owns(u3)) << "one of the 1 MiB buffers goes, one stays";
        pool.put(p1);
        pool.put(p3);
        pool.trim();
    }
    efa_device_install(nullptr);
}

// Without a backend that pins (none installed, or one without the call),
// the pool works as before and pins nothing.
TEST(StagePoolPinned, WithoutABackendNothingIsPinned) {
    efa_device_install(nullptr);
    efa::StagePool pool;
    void *a = pool.get(1 * kMiB);
    ASSERT_NE(nullptr, a);
    pool.put(a);
    EXPECT_EQ(0u, pool.pins());
    pool.trim();
}

} // namespace
