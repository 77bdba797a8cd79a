/*
 * A current CUDA context for the Open MPI 5 device backend's calls
 * (efa_cuda_context.h): the driver's calls taken from the driver Open
 * MPI's cuda component loaded (dlopen with RTLD_NOLOAD, nothing linked),
 * and one record of the context last seen for the process and of the
 * primary contexts retained.
 */
#include "common_efa.h"

#if OPAL_MAJOR_VERSION >= 5
#include <dlfcn.h>

#include "efa_cuda_context.h"

static efa_cuda_context_t context;
static bool loaded; /* (atomic: set once the three calls are in) */

bool mca_common_efa_cuda_context_load(void) {
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) {
        return true;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (NULL == lib) {
        return false;
    }
    context.get_current = (int (*)(void **))dlsym(lib, "cuCtxGetCurrent");
    context.set_current = (int (*)(void *))dlsym(lib, "cuCtxSetCurrent");
    context.pointer_attribute =
        (int (*)(void *, int, unsigned long long))dlsym(lib, "cuPointerGetAttribute");
    context.context_device = (int (*)(int *))dlsym(lib, "cuCtxGetDevice");
    context.primary_state =
        (int (*)(int, unsigned int *, int *))dlsym(lib, "cuDevicePrimaryCtxGetState");
    context.primary_retain = (int (*)(void **, int))dlsym(lib, "cuDevicePrimaryCtxRetain");
    /* (the handle stays open: the driver stays loaded while Open MPI runs;
     * every call is in the driver since CUDA 7, so all or none) */
    if (NULL == context.get_current || NULL == context.set_current ||
        NULL == context.pointer_attribute || NULL == context.context_device ||
        NULL == context.primary_state || NULL == context.primary_retain) {
        dlclose(lib);
        return false;
    }
    __atomic_store_n(&loaded, true, __ATOMIC_RELEASE);
    return true;
}

void mca_common_efa_cuda_context_here(const void *a, const void *b) {
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) {
        (void)efa_cuda_context_here(&context, a, b);
    }
}

/* For progress on a thread about to let libfabric copy device memory
 * (FI_HMEM): cheap after the thread's first call (efa_cuda_context.h). */
void mca_common_efa_cuda_context_thread(void) {
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) {
        (void)efa_cuda_context_thread(&context);
    }
}

unsigned long mca_common_efa_cuda_context_given(void) {
    return __atomic_load_n(&context.given, __ATOMIC_RELAXED);
}
#else
bool mca_common_efa_cuda_context_load(void) {
    return false;
}

void mca_common_efa_cuda_context_here(const void *a, const void *b) {
    (void)a;
    (void)b;
}

void mca_common_efa_cuda_context_thread(void) {}

unsigned long mca_common_efa_cuda_context_given(void) {
    return 0;
}
#endif
