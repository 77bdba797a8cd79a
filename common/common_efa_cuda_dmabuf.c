/*
 * CUDA's dmabuf export for the Open MPI 5 device backend
 * (common_efa_device.c): a device allocation handed to the provider is
 * registered through a dmabuf file descriptor of its pages
 * (FI_MR_DMABUF; on EFA ibv_reg_dmabuf_mr), which needs no peer-memory
 * kernel module.  Open MPI 5.0's accelerator framework has no such call,
 * so where its component is cuda the backend takes it from the CUDA
 * driver Open MPI loaded (dlopen with RTLD_NOLOAD, nothing linked, the
 * driver API's few types declared below).  Where the driver, a symbol or
 * the device's support is missing, the backend has no dmabuf and the
 * core registers by device address.
 */
#include "common_efa.h"

#if OPAL_MAJOR_VERSION >= 5
#include <dlfcn.h>
#include <stdint.h>
#include <unistd.h>

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

/* The driver API's types and constants (cuda.h). */
typedef int cu_result_t; /* CUresult: 0 is CUDA_SUCCESS */
typedef unsigned long long cu_deviceptr_t;
typedef int cu_device_t;
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 0x1
#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124

static struct {
    cu_result_t (*get_handle)(void *, cu_deviceptr_t, size_t, int, unsigned long long);
    cu_result_t (*device_get)(cu_device_t *, int);
    cu_result_t (*attribute)(int *, int, cu_device_t);
} cu;

/* The device (by ordinal) exports dmabufs: asked of the driver once per
 * ordinal (0 unknown, 1 yes, 2 no), for the first 64. */
static int supported[64];

static bool device_exports(uint64_t ordinal) {
    if (ordinal >= sizeof(supported) / sizeof(supported[0])) {
        return true; /* (not remembered: the export itself answers) */
    }
    int *known = &supported[ordinal];
    int answer = __atomic_load_n(known, __ATOMIC_RELAXED);
    if (0 == answer) { /* (two threads may both ask: the same answer) */
        cu_device_t dev = 0;
        int yes = 0;
        answer = 0 == cu.device_get(&dev, (int)ordinal) &&
                         0 == cu.attribute(&yes, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) && yes
                     ? 1
                     : 2;
        __atomic_store_n(known, answer, __ATOMIC_RELAXED);
    }
    return 1 == answer;
}

/* The driver exports whole host pages: the range is widened to them, and
 * the allocation starts 'offset' bytes into it. */
static int cuda_dmabuf(const efa_device_hmem_t *alloc, int *fd, uint64_t *offset) {
    if (FI_HMEM_CUDA != alloc->iface || 0 == alloc->len || !device_exports(alloc->device)) {
        return -FI_EOPNOTSUPP;
    }
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t start = alloc->base & ~(page - 1);
    const uintptr_t end = (alloc->base + alloc->len + page - 1) & ~(page - 1);
    int out = -1;
    mca_common_efa_cuda_context_here((const void *)alloc->base, NULL);
    if (0 != cu.get_handle(&out, (cu_deviceptr_t)start, end - start,
                           CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) ||
        out < 0) {
        return -FI_EINVAL;
    }
    *fd = out;
    *offset = alloc->base - start;
    return 0;
}

bool mca_common_efa_cuda_dmabuf(efa_device_ops_t *ops) {
    /* RTLD_NOLOAD: only the driver Open MPI's cuda component has loaded. */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (NULL == lib) {
        return false;
    }
    cu.get_handle = (cu_result_t(*)(void *, cu_deviceptr_t, size_t, int, unsigned long long))dlsym(
        lib, "cuMemGetHandleForAddressRange");
    cu.device_get = (cu_result_t(*)(cu_device_t *, int))dlsym(lib, "cuDeviceGet");
    cu.attribute = (cu_result_t(*)(int *, int, cu_device_t))dlsym(lib, "cuDeviceGetAttribute");
    /* (the handle stays open: the driver stays loaded while Open MPI runs) */
    if (NULL == cu.get_handle || NULL == cu.device_get || NULL == cu.attribute) {
        dlclose(lib);
        return false;
    }
    ops->dmabuf = cuda_dmabuf;
    return true;
}
#endif
