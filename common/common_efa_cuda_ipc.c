/*
 * CUDA's IPC for the Open MPI 5 device backend (common_efa_device.c):
 * Open MPI 5.0's accelerator framework copies and checks device memory
 * but has no IPC calls, so where its selected component is cuda the
 * backend takes three from the CUDA driver itself (cuIpcGetMemHandle,
 * cuIpcOpenMemHandle, cuIpcCloseMemHandle; cuMemGetAddressRange for the
 * allocation that holds a buffer).  Memory those handles refuse (VMM)
 * goes by its file descriptor where the driver has the VMM calls
 * (efa_cuda_vmm_ipc.h; without them such memory streams).  The driver is opened with dlopen when
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

#include "efa_cuda_vmm_ipc.h"

/* The driver API's types (cuda.h). */
typedef int cu_result_t; /* CUresult: 0 is CUDA_SUCCESS */
typedef unsigned long long cu_deviceptr_t;
typedef struct {
    char reserved[64]; /* CU_IPC_HANDLE_SIZE */
} cu_ipc_mem_handle_t;
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
#define CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE 10 /* (a 4-byte boolean) */

_Static_assert(sizeof(cu_ipc_mem_handle_t) <= EFA_DEVICE_IPC_HANDLE_SIZE,
               "a CUDA IPC handle fits the seam's");

static struct {
    cu_result_t (*get_handle)(cu_ipc_mem_handle_t *, cu_deviceptr_t);
    cu_result_t (*open_handle)(cu_deviceptr_t *, cu_ipc_mem_handle_t, unsigned int);
    cu_result_t (*close_handle)(cu_deviceptr_t);
    cu_result_t (*address_range)(cu_deviceptr_t *, size_t *, cu_deviceptr_t);
} cu;

static efa_cuda_vmm_calls_t vmm; /* all set, or vmm_on false */
static bool vmm_on;

static int cuda_ipc_export(const void *buf, size_t len, efa_device_ipc_t *out) {
    cu_deviceptr_t base = 0;
    size_t size = 0;
    const cu_deviceptr_t p = (cu_deviceptr_t)(uintptr_t)buf;
    cu_ipc_mem_handle_t h;
    /* Memory the driver says has no legacy handle (VMM, pool memory) is
     * not offered to cuIpcGetMemHandle: a handle of it, were one given,
     * could not be opened by the peer. */
    unsigned int legacy = 1;
    mca_common_efa_cuda_context_here(buf, NULL);
    if (vmm_on &&
        0 != vmm.pointer_attribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p)) {
        legacy = 1; /* (a driver without the attribute: the handle call decides) */
    }
    if (0 == legacy || 0 != cu.address_range(&base, &size, p) || p < base || p - base >= size ||
        len > size - (p - base) || 0 != cu.get_handle(&h, base)) {
        /* (VMM memory: by its descriptor; pool memory: none) */
        return vmm_on ? efa_cuda_vmm_export(&vmm, buf, len, out) : -FI_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->handle, &h, sizeof(h));
    out->alloc_len = size;
    out->offset = p - base;
    return 0;
}

static int cuda_ipc_import(uint32_t pid, const efa_device_ipc_t *in, void **base) {
    (void)pid; /* (the handle names the allocation) */
    mca_common_efa_cuda_context_here(NULL, NULL);
    cu_ipc_mem_handle_t h;
    cu_deviceptr_t p = 0;
    cu_deviceptr_t start = 0;
    size_t size = 0;
    if (efa_cuda_vmm_is_export(in)) {
        return vmm_on ? efa_cuda_vmm_import(&vmm, pid, in, base) : -FI_EINVAL;
    }
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
    mca_common_efa_cuda_context_here(base, NULL);
    if (!vmm_on || !efa_cuda_vmm_close(&vmm, base)) {
        (void)cu.close_handle((cu_deviceptr_t)(uintptr_t)base);
    }
}

/* The VMM calls, all or none (vmm_on). */
static void cuda_vmm_calls(void *lib) {
#define EFA_CU_SYM(field, name) vmm.field = (__typeof__(vmm.field))dlsym(lib, name)
    EFA_CU_SYM(pointer_attribute, "cuPointerGetAttribute");
    EFA_CU_SYM(address_range, "cuMemGetAddressRange_v2");
    EFA_CU_SYM(retain, "cuMemRetainAllocationHandle");
    EFA_CU_SYM(export_handle, "cuMemExportToShareableHandle");
    EFA_CU_SYM(import_handle, "cuMemImportFromShareableHandle");
    EFA_CU_SYM(release, "cuMemRelease");
    EFA_CU_SYM(reserve, "cuMemAddressReserve");
    EFA_CU_SYM(map, "cuMemMap");
    EFA_CU_SYM(set_access, "cuMemSetAccess");
    EFA_CU_SYM(unmap, "cuMemUnmap");
    EFA_CU_SYM(address_free, "cuMemAddressFree");
    EFA_CU_SYM(context_device, "cuCtxGetDevice");
#undef EFA_CU_SYM
    vmm_on = NULL != vmm.pointer_attribute && NULL != vmm.address_range && NULL != vmm.retain &&
             NULL != vmm.export_handle && NULL != vmm.import_handle && NULL != vmm.release &&
             NULL != vmm.reserve && NULL != vmm.map && NULL != vmm.set_access &&
             NULL != vmm.unmap && NULL != vmm.address_free && NULL != vmm.context_device;
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
    cuda_vmm_calls(lib);
    ops->ipc_export = cuda_ipc_export;
    ops->ipc_import = cuda_ipc_import;
    ops->ipc_close = cuda_ipc_close;
    ops->ipc_release = vmm_on ? efa_cuda_vmm_release : NULL;
    return true;
}
#endif
