/*
 * CUDA's pinning of host memory for the Open MPI 5 device backend
 * (common_efa_device.c): the staging pool's buffers (efa_stage.h) pinned
 * once each, so that the device's copies to and from them go by its DMA.
 * Taken from the CUDA driver Open MPI's cuda component loaded (dlopen with
 * RTLD_NOLOAD, nothing linked), not through Open MPI's host_register:
 * that one needs a current context in the calling thread, which a
 * completion run by a thread of the application's may not have, and its
 * failure message reads an argument it was never given (5.0.10).  Here
 * such a thread is given the context last seen (efa_cuda_context.h); one
 * that still has none pins nothing (the buffer is used unpinned),
 * a refusal stops the pinning for the process, and memory is pinned for
 * every context (CU_MEMHOSTREGISTER_PORTABLE).
 */
#include "common_efa.h"

#if OPAL_MAJOR_VERSION >= 5
#include <dlfcn.h>

#include <rdma/fi_errno.h>

#define CU_MEMHOSTREGISTER_PORTABLE 0x01

static struct {
    int (*reg)(void *, size_t, unsigned int);
    int (*unreg)(void *);
    int (*current)(void **);
} cu;
static bool refused; /* once: no more pins in this process */

static bool context_here(void) {
    mca_common_efa_cuda_context_here(NULL, NULL); /* (one last seen, if it has none) */
    void *ctx = NULL;
    return 0 == cu.current(&ctx) && NULL != ctx;
}

static int cuda_host_register(void *buf, size_t len) {
    if (__atomic_load_n(&refused, __ATOMIC_RELAXED) || !context_here()) {
        return -FI_EAGAIN;
    }
    if (0 != cu.reg(buf, len, CU_MEMHOSTREGISTER_PORTABLE)) {
        __atomic_store_n(&refused, true, __ATOMIC_RELAXED);
        return -FI_EINVAL;
    }
    return 0;
}

static int cuda_host_unregister(void *buf) {
    return context_here() && 0 == cu.unreg(buf) ? 0 : -FI_EAGAIN;
}

bool mca_common_efa_cuda_pin(efa_device_ops_t *ops) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (NULL == lib) {
        return false;
    }
    cu.reg = (int (*)(void *, size_t, unsigned int))dlsym(lib, "cuMemHostRegister_v2");
    cu.unreg = (int (*)(void *))dlsym(lib, "cuMemHostUnregister");
    cu.current = (int (*)(void **))dlsym(lib, "cuCtxGetCurrent");
    /* (the handle stays open: the driver stays loaded while Open MPI runs) */
    if (NULL == cu.reg || NULL == cu.unreg || NULL == cu.current) {
        dlclose(lib);
        return false;
    }
    ops->host_register = cuda_host_register;
    ops->host_unregister = cuda_host_unregister;
    return true;
}
#endif
