// A current CUDA context for a thread about to call the driver
// (efa_cuda_context_here): the driver's three calls stand in here, with a
// current context per thread as the driver keeps it, and device memory
// that has a context (cudaMalloc's) or none (VMM and pool memory).
#include <gtest/gtest.h>

#include <thread>

#include <rdma/fi_errno.h>

#include "efa_cuda_context.h"

namespace {

int g_ctx_a, g_ctx_b;         // two contexts (their addresses)
char g_dev_a[8], g_vmm[8];    // memory of context a; VMM memory (no context)
char g_pinned_b[8];           // host memory pinned in context b
thread_local void *t_current; // the driver's current context of a thread
thread_local int t_sets;      // cuCtxSetCurrent calls on this thread
int g_get_rc;                 // what cuCtxGetCurrent answers

int get_current(void **ctx) {
    if (0 != g_get_rc) {
        return g_get_rc;
    }
    *ctx = t_current;
    return 0;
}

int set_current(void *ctx) {
    ++t_sets;
    t_current = ctx;
    return 0;
}

int pointer_attribute(void *data, int attribute, unsigned long long ptr) {
    const bool pinned = ptr == reinterpret_cast<unsigned long long>(g_pinned_b);
    const bool device = ptr == reinterpret_cast<unsigned long long>(g_dev_a) ||
                        ptr == reinterpret_cast<unsigned long long>(g_vmm);
    if (2 == attribute) { // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
        if (!pinned && !device) {
            return 1;
        }
        *static_cast<unsigned *>(data) = pinned ? 1 : 2; // (HOST, DEVICE)
        return 0;
    }
    if (1 != attribute) { // CU_POINTER_ATTRIBUTE_CONTEXT
        return 1;
    }
    if (pinned) {
        *static_cast<void **>(data) = &g_ctx_b;
        return 0;
    }
    if (ptr == reinterpret_cast<unsigned long long>(g_dev_a)) {
        *static_cast<void **>(data) = &g_ctx_a;
        return 0;
    }
    if (ptr == reinterpret_cast<unsigned long long>(g_vmm)) {
        *static_cast<void **>(data) = nullptr; // (the driver's answer for VMM memory)
        return 0;
    }
    return 1; // CUDA_ERROR_INVALID_VALUE: not the driver's memory
}

efa_cuda_context_t fresh() {
    g_get_rc = 0;
    efa_cuda_context_t cc{};
    cc.get_current = get_current;
    cc.set_current = set_current;
    cc.pointer_attribute = pointer_attribute;
    return cc;
}

// Runs f on a new thread, which has no current context, as the driver
// starts every thread.
template <typename F> void on_new_thread(F f) {
    std::thread t(f);
    t.join();
}

} // namespace

TEST(CudaContext, AThreadWithAContextKeepsItAndItIsRemembered) {
    efa_cuda_context_t cc = fresh();
    on_new_thread([&] {
        t_current = &g_ctx_b;
        EXPECT_EQ(0, efa_cuda_context_here(&cc, g_dev_a, nullptr));
        EXPECT_EQ(&g_ctx_b, t_current) << "a thread's own context is never replaced";
        EXPECT_EQ(0, t_sets);
    });
    EXPECT_EQ(&g_ctx_b, cc.seen);
    EXPECT_EQ(0UL, cc.given);
}

TEST(CudaContext, AThreadWithoutOneTakesTheDeviceBuffersContext) {
    efa_cuda_context_t cc = fresh();
    cc.seen = &g_ctx_b;
    on_new_thread([&] {
        char host[8] = {};
        EXPECT_EQ(0, efa_cuda_context_here(&cc, host, g_dev_a)); // (a copy to the host)
        EXPECT_EQ(&g_ctx_a, t_current) << "the buffer's own context before the one last seen";
        EXPECT_EQ(1, t_sets);
        EXPECT_EQ(0, efa_cuda_context_here(&cc, nullptr, nullptr));
        EXPECT_EQ(1, t_sets) << "set once: the thread has one now";
    });
    EXPECT_EQ(1UL, cc.given);
}

TEST(CudaContext, PinnedHostMemorysContextIsNotTheDeviceBuffers) {
    efa_cuda_context_t cc = fresh();
    on_new_thread([&] { // (a copy from the device into a pinned staging buffer)
        EXPECT_EQ(0, efa_cuda_context_here(&cc, g_pinned_b, g_dev_a));
        EXPECT_EQ(&g_ctx_a, t_current) << "the staging buffer's pinning context was taken";
    });
}

TEST(CudaContext, MemoryWithoutAContextGetsTheOneLastSeen) {
    efa_cuda_context_t cc = fresh();
    on_new_thread([&] { // (the application's CUDA thread passes first)
        t_current = &g_ctx_b;
        EXPECT_EQ(0, efa_cuda_context_here(&cc, nullptr, nullptr));
    });
    on_new_thread([&] { // (then a thread of its that never touched CUDA imports)
        EXPECT_EQ(0, efa_cuda_context_here(&cc, g_vmm, nullptr));
        EXPECT_EQ(&g_ctx_b, t_current);
    });
    EXPECT_EQ(1UL, cc.given);
}

TEST(CudaContext, NothingSeenAndNothingToAskLeavesTheThreadWithout) {
    efa_cuda_context_t cc = fresh();
    on_new_thread([&] {
        char host[8] = {};
        EXPECT_EQ(-FI_EINVAL, efa_cuda_context_here(&cc, host, g_vmm));
        EXPECT_EQ(nullptr, t_current);
        EXPECT_EQ(0, t_sets);
    });
    EXPECT_EQ(0UL, cc.given);
}

TEST(CudaContext, ADriverNotYetInitializedIsLeftAlone) {
    efa_cuda_context_t cc = fresh();
    cc.seen = &g_ctx_b;
    g_get_rc = 3; // CUDA_ERROR_NOT_INITIALIZED
    on_new_thread([&] {
        EXPECT_EQ(-FI_EINVAL, efa_cuda_context_here(&cc, g_dev_a, nullptr));
        EXPECT_EQ(0, t_sets) << "no context is set where the driver cannot say the thread's";
    });
    g_get_rc = 0;
}
