// A current CUDA context for a thread about to call the driver
// (efa_cuda_context_here, efa_cuda_context_thread): the driver's calls
// stand in here, with a current context per thread as the driver keeps
// it, two devices with a primary context each (active while someone holds
// it), a user context on each, and device memory that has a context
// (cudaMalloc's) or none (VMM and pool memory).
#include <gtest/gtest.h>

#include <thread>

#include <rdma/fi_errno.h>

#include "efa_cuda_context.h"

namespace {

int g_ctx_a, g_ctx_b;         // user contexts on devices 0 and 1 (their addresses)
int g_primary[2];             // the devices' primary contexts
bool g_active[2];             // is a device's primary context active?
int g_retains[2];             // cuDevicePrimaryCtxRetain calls per device
char g_dev_a[8], g_vmm[8];    // memory of context a; VMM memory of device 1 (no context)
char g_pinned_b[8];           // host memory pinned in context b
thread_local void *t_current; // the driver's current context of a thread
thread_local int t_sets;      // cuCtxSetCurrent calls on this thread
thread_local int t_gets;      // cuCtxGetCurrent calls on this thread
int g_get_rc;                 // what cuCtxGetCurrent answers

int get_current(void **ctx) {
    ++t_gets;
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

int context_device(int *device) {
    if (t_current == &g_ctx_a || t_current == &g_primary[0]) {
        *device = 0;
    } else if (t_current == &g_ctx_b || t_current == &g_primary[1]) {
        *device = 1;
    } else {
        return 201; // CUDA_ERROR_INVALID_CONTEXT
    }
    return 0;
}

int primary_state(int device, unsigned *flags, int *active) {
    if (device < 0 || device > 1) {
        return 101; // CUDA_ERROR_INVALID_DEVICE
    }
    *flags = 0;
    *active = g_active[device] ? 1 : 0;
    return 0;
}

int primary_retain(void **ctx, int device) {
    if (device < 0 || device > 1) {
        return 101;
    }
    ++g_retains[device];
    g_active[device] = true;
    *ctx = &g_primary[device];
    return 0;
}

bool is(unsigned long long ptr, const void *p) {
    return ptr == reinterpret_cast<unsigned long long>(p);
}

int pointer_attribute(void *data, int attribute, unsigned long long ptr) {
    const bool pinned = is(ptr, g_pinned_b);
    const bool device = is(ptr, g_dev_a) || is(ptr, g_vmm);
    if (!pinned && !device) {
        return 1; // CUDA_ERROR_INVALID_VALUE: not the driver's memory
    }
    switch (attribute) {
    case 2:                                              // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
        *static_cast<unsigned *>(data) = pinned ? 1 : 2; // (HOST, DEVICE)
        return 0;
    case 1: // CU_POINTER_ATTRIBUTE_CONTEXT (the driver's NULL for VMM memory)
        *static_cast<void **>(data) = pinned ? &g_ctx_b : is(ptr, g_dev_a) ? &g_ctx_a : nullptr;
        return 0;
    case 9: // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        *static_cast<int *>(data) = pinned || is(ptr, g_vmm) ? 1 : 0;
        return 0;
    default:
        return 1;
    }
}

efa_cuda_context_t fresh() {
    g_get_rc = 0;
    g_active[0] = g_active[1] = false;
    g_retains[0] = g_retains[1] = 0;
    efa_cuda_context_t cc{};
    cc.get_current = get_current;
    cc.set_current = set_current;
    cc.pointer_attribute = pointer_attribute;
    cc.context_device = context_device;
    cc.primary_state = primary_state;
    cc.primary_retain = primary_retain;
    return cc;
}

// Runs f on a new thread, which has no current context, as the driver
// starts every thread.
template <typename F> void on_new_thread(F f) {
    std::thread t(f);
    t.join();
}

// A thread of the application's that uses ctx passes here.
void seen_on_a_thread(efa_cuda_context_t *cc, void *ctx) {
    on_new_thread([&] {
        t_current = ctx;
        EXPECT_EQ(0, efa_cuda_context_here(cc, nullptr, nullptr));
    });
}

} // namespace

TEST(CudaContext, AThreadWithAContextKeepsItAndItsDeviceIsRemembered) {
    efa_cuda_context_t cc = fresh();
    on_new_thread([&] {
        t_current = &g_ctx_b;
        EXPECT_EQ(0, efa_cuda_context_here(&cc, g_dev_a, nullptr));
        EXPECT_EQ(&g_ctx_b, t_current) << "a thread's own context is never replaced";
        EXPECT_EQ(0, t_sets);
    });
    EXPECT_EQ(&g_ctx_b, cc.seen);
    EXPECT_EQ(2, cc.seen_device) << "device 1, as ordinal + 1";
    EXPECT_EQ(0UL, cc.given);
}

TEST(CudaContext, AThreadWithoutOneTakesTheDeviceBuffersContext) {
    efa_cuda_context_t cc = fresh();
    g_active[1] = true;
    seen_on_a_thread(&cc, &g_primary[1]);
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

// A VMM receive posted by a thread on device 0's context and completed by
// one without: the memory's own device's primary context, not the one
// seen (another device's), retained once for all threads.
TEST(CudaContext, MemoryWithoutAContextGetsItsDevicesPrimaryContext) {
    efa_cuda_context_t cc = fresh();
    g_active[0] = g_active[1] = true; // (the runtime holds both)
    seen_on_a_thread(&cc, &g_ctx_a);
    for (int i = 0; i < 2; ++i) {
        on_new_thread([&] {
            EXPECT_EQ(0, efa_cuda_context_here(&cc, g_vmm, nullptr));
            EXPECT_EQ(&g_primary[1], t_current);
        });
    }
    EXPECT_EQ(1, g_retains[1]) << "retained once, kept";
    EXPECT_EQ(0, g_retains[0]);
    EXPECT_EQ(2UL, cc.given);
}

// Also where no thread passed here with a context first (the posting
// thread's context was made by Open MPI's check, not seen here).
TEST(CudaContext, MemoryWithoutAContextNeedsNothingSeen) {
    efa_cuda_context_t cc = fresh();
    g_active[1] = true;
    on_new_thread([&] {
        char host[8] = {};
        EXPECT_EQ(0, efa_cuda_context_here(&cc, host, g_vmm));
        EXPECT_EQ(&g_primary[1], t_current);
    });
}

TEST(CudaContext, AnInactivePrimaryContextIsNotTaken) {
    efa_cuda_context_t cc = fresh();
    on_new_thread([&] {
        EXPECT_EQ(-FI_EINVAL, efa_cuda_context_here(&cc, g_vmm, nullptr));
        EXPECT_EQ(nullptr, t_current);
        EXPECT_EQ(0, t_sets);
    });
    EXPECT_EQ(0, g_retains[1]) << "nothing retained that nobody holds (it would start it)";
}

// Nothing at hand (an import, a pin): the primary context of the device
// whose context was last seen.
TEST(CudaContext, NothingAtHandGetsThePrimaryContextOfTheDeviceLastSeen) {
    efa_cuda_context_t cc = fresh();
    g_active[0] = g_active[1] = true;
    seen_on_a_thread(&cc, &g_ctx_b);
    on_new_thread([&] {
        EXPECT_EQ(0, efa_cuda_context_here(&cc, nullptr, nullptr));
        EXPECT_EQ(&g_primary[1], t_current);
    });
}

// The context seen was the application's own (cuCtxCreate), destroyed
// since, or the device was reset (cudaDeviceReset): a dead handle is
// never made current.
TEST(CudaContext, ADeadContextSeenIsNeverMadeCurrent) {
    efa_cuda_context_t cc = fresh();
    seen_on_a_thread(&cc, &g_ctx_b); // (then destroyed; device 1's primary never active)
    on_new_thread([&] {
        EXPECT_EQ(-FI_EINVAL, efa_cuda_context_here(&cc, nullptr, nullptr));
        EXPECT_EQ(0, t_sets) << "the context seen was made current";
    });
    g_active[1] = true;
    on_new_thread([&] { EXPECT_EQ(0, efa_cuda_context_here(&cc, g_vmm, nullptr)); });
    g_active[1] = false; // (reset: the primary context retained here is gone too)
    on_new_thread([&] {
        EXPECT_EQ(-FI_EINVAL, efa_cuda_context_here(&cc, g_vmm, nullptr));
        EXPECT_EQ(0, t_sets) << "a reset device's primary context was made current";
    });
}

TEST(CudaContext, NothingSeenAndNothingToAskLeavesTheThreadWithout) {
    efa_cuda_context_t cc = fresh();
    on_new_thread([&] {
        char host[8] = {};
        EXPECT_EQ(-FI_EINVAL, efa_cuda_context_here(&cc, host, nullptr));
        EXPECT_EQ(nullptr, t_current);
        EXPECT_EQ(0, t_sets);
    });
    EXPECT_EQ(0UL, cc.given);
}

TEST(CudaContext, ADriverNotYetInitializedIsLeftAlone) {
    efa_cuda_context_t cc = fresh();
    g_active[0] = g_active[1] = true;
    cc.seen_device = 1;
    g_get_rc = 3; // CUDA_ERROR_NOT_INITIALIZED
    on_new_thread([&] {
        EXPECT_EQ(-FI_EINVAL, efa_cuda_context_here(&cc, g_dev_a, nullptr));
        EXPECT_EQ(0, t_sets) << "no context is set where the driver cannot say the thread's";
    });
    g_get_rc = 0;
}

// A progressing thread about to let libfabric copy device memory: the
// primary context of the device last seen, asked once per thread.
TEST(CudaContext, AProgressThreadIsGivenTheDeviceLastSeenOnce) {
    efa_cuda_context_t cc = fresh();
    g_active[1] = true;
    on_new_thread([&] {
        EXPECT_EQ(-FI_EINVAL, efa_cuda_context_thread(&cc));
        EXPECT_EQ(0, t_gets) << "the driver asked before any context was seen";
    });
    seen_on_a_thread(&cc, &g_ctx_b);
    on_new_thread([&] {
        EXPECT_EQ(0, efa_cuda_context_thread(&cc));
        EXPECT_EQ(&g_primary[1], t_current);
        EXPECT_EQ(0, efa_cuda_context_thread(&cc));
        EXPECT_EQ(1, t_gets) << "the driver asked more than once on one thread";
        EXPECT_EQ(1, t_sets);
    });
    on_new_thread([&] { // (a thread with its own context keeps it)
        t_current = &g_ctx_a;
        EXPECT_EQ(0, efa_cuda_context_thread(&cc));
        EXPECT_EQ(&g_ctx_a, t_current);
        EXPECT_EQ(0, t_sets);
    });
}
