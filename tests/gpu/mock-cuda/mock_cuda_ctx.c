/* The mock driver's one device, its primary context, streams and events
 * (all synchronous), and its error strings. */
#define _GNU_SOURCE
#include "mock_cuda.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CUcontext mock_ctx(void);

/* The primary context's retains (the runtime's one included): active,
 * for cuDevicePrimaryCtxGetState, while any is held, as on the driver. */
static int g_primary;
static int g_runtime_holds;          /* the runtime's retain taken */
static __thread CUcontext t_current; /* this thread's current context */
/* The contexts cuCtxPushCurrent pushed over (cuCtxPopCurrent restores). */
enum { MOCK_CTX_STACK = 8 };
static __thread CUcontext t_stack[MOCK_CTX_STACK];
static __thread int t_depth;

void mock_ctx_use(void) {
    if (!__atomic_exchange_n(&g_runtime_holds, 1, __ATOMIC_RELAXED)) {
        __atomic_fetch_add(&g_primary, 1, __ATOMIC_RELAXED);
    }
    t_current = mock_ctx();
}

int mock_ctx_current(void) {
    return NULL != t_current;
}

void mock_unsupported(const char *what) {
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) {
        fprintf(stderr, "mock-cuda: %s is not carried by the mock driver (no GPU here)\n", what);
    }
}

CUresult cuInit(unsigned int flags) {
    (void)flags;
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v) {
    *v = CUDA_VERSION;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n) {
    *n = 1;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (ordinal != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *d = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    (void)d;
    snprintf(name, (size_t)len, "Mock CUDA device");
    return CUDA_SUCCESS;
}

/* What an H100 answers where it matters; every capability asked of it
 * is there (VMM, POSIX descriptors, dmabuf, GPUDirect RDMA). */
CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    if (d != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        *v = 0x1e;
        break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
        *v = 0;
        break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
        *v = 0;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *v = 9;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *v = 0;
        break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *v = 132;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *v = 1024;
        break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
        *v = 32;
        break;
    default:
        *v = 1;
        break;
    }
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice d) {
    (void)d;
    snprintf(id, (size_t)len, "0000:00:1e.0");
    return CUDA_SUCCESS;
}

CUresult cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b) {
    *can = a == b;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    if (d != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    __atomic_fetch_add(&g_primary, 1, __ATOMIC_RELAXED);
    *c = mock_ctx();
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice d) {
    if (d != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    int n = __atomic_load_n(&g_primary, __ATOMIC_RELAXED);
    while (n > 0 && !__atomic_compare_exchange_n(&g_primary, &n, n - 1, 0, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED)) {
    }
    return CUDA_SUCCESS; /* (a release past the retains: not counted below 0) */
}

CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active) {
    if (d != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *flags = 0;
    *active = __atomic_load_n(&g_primary, __ATOMIC_RELAXED) > 0;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *c) {
    *c = t_current;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext c) {
    t_current = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext c) {
    if (NULL == c || t_depth == MOCK_CTX_STACK) {
        return NULL == c ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
    }
    t_stack[t_depth++] = t_current;
    t_current = c;
    return CUDA_SUCCESS;
}

/* The current context off the thread's stack, the one it was pushed over
 * current again (as the driver does: Open MPI pushes and pops around its
 * queries and expects the caller's context back). */
CUresult cuCtxPopCurrent(CUcontext *c) {
    if (NULL == t_current) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (c) {
        *c = t_current;
    }
    t_current = t_depth > 0 ? t_stack[--t_depth] : NULL;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *d) {
    if (!t_current) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *d = 0;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
    return CUDA_SUCCESS;
}

struct mock_handle {
    int kind;
};

CUresult cuStreamCreate(CUstream *s, unsigned int flags) {
    (void)flags;
    if (!t_current) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *s = (CUstream)calloc(1, sizeof(struct mock_handle));
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream s) {
    free(s);
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s) {
    (void)s;
    return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *e, unsigned int flags) {
    (void)flags;
    if (!t_current) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *e = (CUevent)calloc(1, sizeof(struct mock_handle));
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream s) {
    (void)e, (void)s;
    return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent e) {
    (void)e;
    return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent e) {
    (void)e;
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent e) {
    free(e);
    return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult rc, const char **s) {
    static __thread char name[32];
    snprintf(name, sizeof(name), "CUDA_ERROR_%d", (int)rc);
    *s = CUDA_SUCCESS == rc ? "CUDA_SUCCESS" : name;
    return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult rc, const char **s) {
    return cuGetErrorName(rc, s);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult *status) {
    (void)version, (void)flags;
    *pfn = dlsym(RTLD_DEFAULT, symbol);
    if (status) {
        *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
