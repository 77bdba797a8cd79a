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

static int g_primary;                /* retained once */
static __thread CUcontext t_current; /* this thread's current context */

void mock_ctx_use(void) {
    __atomic_store_n(&g_primary, 1, __ATOMIC_RELAXED);
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
    (void)d;
    __atomic_store_n(&g_primary, 1, __ATOMIC_RELAXED);
    *c = mock_ctx();
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice d) {
    (void)d;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active) {
    (void)d;
    *flags = 0;
    *active = __atomic_load_n(&g_primary, __ATOMIC_RELAXED);
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
    t_current = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *c) {
    if (c) {
        *c = t_current;
    }
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
