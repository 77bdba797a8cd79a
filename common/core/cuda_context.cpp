// A current CUDA context for the calling thread (efa_cuda_context.h).
#include "efa_cuda_context.h"

#include <rdma/fi_errno.h>

namespace {
constexpr int kContext = 1;     // CU_POINTER_ATTRIBUTE_CONTEXT (a CUcontext)
constexpr int kMemoryType = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE (an unsigned int)
constexpr unsigned kDevice = 2; // CU_MEMORYTYPE_DEVICE

void *load(void *const *at) {
    return __atomic_load_n(at, __ATOMIC_ACQUIRE);
}

// The context of the device memory at p, or NULL (host memory, pinned
// host memory too, whose context is the one it was pinned in; VMM and
// pool memory; a pointer the driver does not know).
void *context_of(const efa_cuda_context_t *cc, const void *p) {
    const auto ptr = reinterpret_cast<unsigned long long>(p);
    unsigned type = 0;
    void *ctx = nullptr;
    if (nullptr == p || 0 != cc->pointer_attribute(&type, kMemoryType, ptr) || kDevice != type ||
        0 != cc->pointer_attribute(&ctx, kContext, ptr)) {
        return nullptr;
    }
    return ctx;
}
} // namespace

extern "C" int efa_cuda_context_here(efa_cuda_context_t *cc, const void *a, const void *b) {
    void *ctx = nullptr;
    if (0 != cc->get_current(&ctx)) {
        return -FI_EINVAL; // (the driver is not initialized: nothing to set)
    }
    if (nullptr != ctx) {
        if (load(&cc->seen) != ctx) { // (a store only when it changes)
            __atomic_store_n(&cc->seen, ctx, __ATOMIC_RELEASE);
        }
        return 0;
    }
    ctx = context_of(cc, a);
    if (nullptr == ctx) {
        ctx = context_of(cc, b);
    }
    if (nullptr == ctx) {
        ctx = load(&cc->seen);
    }
    if (nullptr == ctx || 0 != cc->set_current(ctx)) {
        return -FI_EINVAL;
    }
    __atomic_fetch_add(&cc->given, 1UL, __ATOMIC_RELAXED);
    return 0;
}
