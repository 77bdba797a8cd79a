/*
 * CUDA's IPC for the Open MPI 5 device backend (common_efa_device.c):
 * Open MPI 5.0's accelerator framework copies and checks device memory
 * but has no IPC calls, so where its selected component is cuda the
 * backend takes three from the CUDA driver itself (cuIpcGetMemHandle,
 * cuIpcOpenMemHandle, cuIpcCloseMemHandle; cuMemGetAddressRange for the
 * allocation that holds a buffer).  The driver is opened with dlopen when
 * the backend is made (the library Open MPI's cuda component loaded
 * already), so that nothing here links against CUDA or needs its headers:
 * the few types are declared below as the driver API defines them.
 * Where the driver or a symbol is missing the backend has no IPC and
 * device messages on one node go through the host.
 */
#include "common_efa.h"

#if OPAL_MAJOR_VERSION >= 5
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include <rdma/fi_errno.h>

/* The driver API's types (cuda.h). */
typedef int cu_result_t; /* CUresult: 0 is CUDA_SUCCESS */
typedef unsigned long long cu_deviceptr_t;
typedef struct {
    char reserved[64]; /* CU_IPC_HANDLE_SIZE */
} cu_ipc_mem_handle_t;
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1

_Static_assert(sizeof(cu_ipc_mem_handle_t) <= EFA_DEVICE_IPC_HANDLE_SIZE,
               "a CUDA IPC handle fits the seam's");

static struct {
    cu_result_t (*get_handle)(cu_ipc_mem_handle_t *, cu_deviceptr_t);
    cu_result_t (*open_handle)(cu_deviceptr_t *, cu_ipc_mem_handle_t, unsigned int);
    cu_result_t (*close_handle)(cu_deviceptr_t);
    cu_result_t (*address_range)(cu_deviceptr_t *, size_t *, cu_deviceptr_t);
} cu;

static int cuda_ipc_export(const void *buf, size_t len, efa_device_ipc_t *out) {
    cu_deviceptr_t base = 0;
    size_t size = 0;
    const cu_deviceptr_t p = (cu_deviceptr_t)(uintptr_t)buf;
    cu_ipc_mem_handle_t h;
    if (0 != cu.address_range(&base, &size, p) || p - base > size || len > size - (p - base) ||
        0 != cu.get_handle(&h, base)) {
        return -FI_EINVAL; /* (VMM or pool memory: no handle of this kind) */
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->handle, &h, sizeof(h));
    out->alloc_len = size;
    out->offset = p - base;
    return 0;
}

static int cuda_ipc_import(uint32_t pid, const efa_device_ipc_t *in, void **base) {
    (void)pid; /* (the handle names the allocation) */
    cu_ipc_mem_handle_t h;
    cu_deviceptr_t p = 0;
    cu_deviceptr_t start = 0;
    size_t size = 0;
    memcpy(&h, in->handle, sizeof(h));
    if (0 == in->alloc_len || 0 != cu.open_handle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) {
        return -FI_EACCES; /* (also: mapped in this process already, by it or another library) */
    }
    /* The engine keeps its copies to alloc_len, which the sender said:
     * the allocation mapped must be that long. */
    if (0 != cu.address_range(&start, &size, p) || start != p || size < in->alloc_len) {
        (void)cu.close_handle(p);
        return -FI_EINVAL;
    }
    *base = (void *)(uintptr_t)p;
    return 0;
}

static void cuda_ipc_close(void *base) {
    (void)cu.close_handle((cu_deviceptr_t)(uintptr_t)base);
}

bool mca_common_efa_cuda_ipc(efa_device_ops_t *ops) {
    /* RTLD_NOLOAD: only the driver Open MPI's cuda component has loaded. */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (NULL == lib) {
        return false;
    }
    cu.get_handle =
        (cu_result_t(*)(cu_ipc_mem_handle_t *, cu_deviceptr_t))dlsym(lib, "cuIpcGetMemHandle");
    cu.open_handle = (cu_result_t(*)(cu_deviceptr_t *, cu_ipc_mem_handle_t, unsigned int))dlsym(
        lib, "cuIpcOpenMemHandle_v2");
    cu.close_handle = (cu_result_t(*)(cu_deviceptr_t))dlsym(lib, "cuIpcCloseMemHandle");
    cu.address_range = (cu_result_t(*)(cu_deviceptr_t *, size_t *, cu_deviceptr_t))dlsym(
        lib, "cuMemGetAddressRange_v2");
    /* (the handle stays open: the driver stays loaded while Open MPI runs) */
    if (NULL == cu.get_handle || NULL == cu.open_handle || NULL == cu.close_handle ||
        NULL == cu.address_range) {
        dlclose(lib);
        return false;
    }
    ops->ipc_export = cuda_ipc_export;
    ops->ipc_import = cuda_ipc_import;
    ops->ipc_close = cuda_ipc_close;
    return true;
}
#endif
