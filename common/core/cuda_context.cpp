// A current CUDA context for the calling thread (efa_cuda_context.h).
#include "efa_cuda_context.h"

#include <rdma/fi_errno.h>

namespace {
constexpr int kContext = 1;     // CU_POINTER_ATTRIBUTE_CONTEXT (a CUcontext)
constexpr int kMemoryType = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE (an unsigned int)
constexpr int kOrdinal = 9;     // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL (an int)
constexpr unsigned kDevice = 2; // CU_MEMORYTYPE_DEVICE
constexpr int kNone = -1;       // (no device)

// Has this thread been given a context by efa_cuda_context_thread (or had
// one there)?  Then that call asks the driver nothing more.
thread_local bool t_has_context;
// The context last seen (seen) when efa_cuda_context_thread last tried to
// give this thread one, where it could not: tried again once that changes.
thread_local void *t_tried_seen;

template <typename T> T load(const T *at) {
    return __atomic_load_n(at, __ATOMIC_ACQUIRE);
}

// Is the device memory at p's?  (Host memory, pinned host memory too, is
// not: its context is the one it was pinned in, maybe another device's.)
bool on_device(const efa_cuda_context_t *cc, unsigned long long p) {
    unsigned type = 0;
    return 0 != p && 0 == cc->pointer_attribute(&type, kMemoryType, p) && kDevice == type;
}

// The context of the device memory at p, or NULL (host memory; VMM and
// pool memory, which the driver gives none; a pointer it does not know).
void *context_of(const efa_cuda_context_t *cc, const void *p) {
    const auto ptr = reinterpret_cast<unsigned long long>(p);
    void *ctx = nullptr;
    if (!on_device(cc, ptr) || 0 != cc->pointer_attribute(&ctx, kContext, ptr)) {
        return nullptr;
    }
    return ctx;
}

// The ordinal of the device that holds device memory at p, or kNone.
int device_of(const efa_cuda_context_t *cc, const void *p) {
    const auto ptr = reinterpret_cast<unsigned long long>(p);
    int device = kNone;
    if (!on_device(cc, ptr) || 0 != cc->pointer_attribute(&device, kOrdinal, ptr)) {
        return kNone;
    }
    return device;
}

// The device's primary context while it is active (the application's or
// the runtime's: after a reset it is not until used again), else NULL.
// Retained the first time only: the handle is the device's for the life
// of the process, and one retain per use would never be given back.
void *primary_of(efa_cuda_context_t *cc, int device) {
    unsigned flags = 0;
    int active = 0;
    if (device < 0 || device >= EFA_CUDA_CONTEXT_DEVICES || nullptr == cc->primary_state ||
        0 != cc->primary_state(device, &flags, &active) || 0 == active) {
        return nullptr;
    }
    void *ctx = load(&cc->primary[device]);
    if (nullptr != ctx) {
        return ctx;
    }
    if (0 != cc->primary_retain(&ctx, device) || nullptr == ctx) {
        return nullptr;
    }
    void *none = nullptr;
    if (!__atomic_compare_exchange_n(&cc->primary[device], &none, ctx, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        // (another thread retained it first: the same handle, retained
        // twice; one retain more is harmless, the driver keeps it anyway)
        return none;
    }
    return ctx;
}

// Remember ctx, current on this thread, by its device: a store (and a
// driver call) only when it changes.
void remember(efa_cuda_context_t *cc, void *ctx) {
    if (load(&cc->seen) == ctx) {
        return;
    }
    int device = kNone;
    if (nullptr != cc->context_device && 0 != cc->context_device(&device)) {
        device = kNone;
    }
    __atomic_store_n(&cc->seen_device, device + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&cc->seen, ctx, __ATOMIC_RELEASE);
}

// The context a thread without one should take for buffers a and b.
void *context_for(efa_cuda_context_t *cc, const void *a, const void *b) {
    void *ctx = context_of(cc, a);
    if (nullptr == ctx) {
        ctx = context_of(cc, b);
    }
    if (nullptr == ctx) {
        const int device = device_of(cc, a);
        ctx = primary_of(cc, kNone != device ? device : device_of(cc, b));
    }
    if (nullptr == ctx) {
        ctx = primary_of(cc, load(&cc->seen_device) - 1);
    }
    return ctx;
}

int make_current(efa_cuda_context_t *cc, void *ctx) {
    if (nullptr == ctx || 0 != cc->set_current(ctx)) {
        return -FI_EINVAL;
    }
    __atomic_fetch_add(&cc->given, 1UL, __ATOMIC_RELAXED);
    return 0;
}
} // namespace

extern "C" int efa_cuda_context_here(efa_cuda_context_t *cc, const void *a, const void *b) {
    void *ctx = nullptr;
    if (0 != cc->get_current(&ctx)) {
        return -FI_EINVAL; // (the driver is not initialized: nothing to set)
    }
    if (nullptr != ctx) {
        remember(cc, ctx);
        return 0;
    }
    return make_current(cc, context_for(cc, a, b));
}

extern "C" int efa_cuda_context_thread(efa_cuda_context_t *cc) {
    // (the global first: before any context was seen, a job's progress
    // pays no thread-local lookup; then no driver call on a thread given
    // one before, nor a second try on one that could not be (its device's
    // primary context inactive, the process's own contexts made with
    // cuCtxCreate) until another context is seen)
    const int seen = load(&cc->seen_device);
    if (0 == seen) {
        return -FI_EINVAL;
    }
    if (t_has_context) {
        return 0;
    }
    void *const seen_ctx = load(&cc->seen);
    if (t_tried_seen == seen_ctx) {
        return -FI_EINVAL;
    }
    t_tried_seen = seen_ctx;
    void *ctx = nullptr;
    if (0 != cc->get_current(&ctx)) {
        return -FI_EINVAL;
    }
    const int rc = nullptr != ctx ? 0 : make_current(cc, primary_of(cc, seen - 1));
    t_has_context = 0 == rc;
    return rc;
}
