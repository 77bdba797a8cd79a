/*
 * CUDA's IPC for the Open MPI 5 device backend (common_efa_device.c):
 * Open MPI 5.0's accelerator framework copies and checks device memory
 * but has no IPC calls, so where its selected component is cuda the
 * backend takes them from the CUDA driver itself (cuIpcGetMemHandle,
 * cuIpcOpenMemHandle, cuIpcCloseMemHandle; cuMemGetAddressRange for the
 * allocation that holds a buffer; what it does with them:
 * efa_cuda_ipc.h).  Memory those handles refuse (VMM) goes by its file
 * descriptor where the driver has the VMM calls (efa_cuda_vmm_ipc.h;
 * without them such memory streams).  The driver is opened with dlopen
 * when the backend is made (the library Open MPI's cuda component loaded
 * already), so that nothing here links against CUDA or needs its headers:
 * those two headers declare the few types as the driver API defines them.
 * Where the driver or a symbol is missing the backend has no IPC and
 * device messages on one node go through the host.
 */
#include "common_efa.h"

#if OPAL_MAJOR_VERSION >= 5
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "efa_cuda_ipc.h"
#include "efa_cuda_vmm_ipc.h"

static efa_cuda_ipc_calls_t cu;  /* all set but the attribute calls, or no IPC */
static efa_cuda_vmm_calls_t vmm; /* all set, or vmm_on false */
static bool vmm_on;

static int cuda_ipc_export(const void *buf, size_t len, efa_device_ipc_t *out) {
    mca_common_efa_cuda_context_here(buf, NULL);
    if (0 == efa_cuda_ipc_export(&cu, buf, len, out)) {
        return 0;
    }
    /* (VMM memory: by its descriptor; pool memory: none) */
    return vmm_on ? efa_cuda_vmm_export(&vmm, buf, len, out) : -FI_EINVAL;
}

/* Mapped for the device of the memory it will be copied to or from
 * (near), not whichever context the thread has current. */
static int cuda_ipc_import(uint32_t pid, const efa_device_ipc_t *in, const void *near,
                           void **base) {
    mca_common_efa_cuda_context_here(near, NULL);
    if (efa_cuda_vmm_is_export(in)) {
        return vmm_on ? efa_cuda_vmm_import_near(&vmm, pid, in, near, base) : -FI_EINVAL;
    }
    return efa_cuda_ipc_import(&cu, in, base);
}

static void cuda_ipc_close(void *base) {
    mca_common_efa_cuda_context_here(base, NULL);
    if (!vmm_on || !efa_cuda_vmm_close(&vmm, base)) {
        (void)cu.close_handle((efa_cu_ptr_t)(uintptr_t)base);
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
    EFA_CU_SYM(stream_synchronize, "cuStreamSynchronize"); /* (may be NULL) */
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
#define EFA_CU_SYM(field, name) cu.field = (__typeof__(cu.field))dlsym(lib, name)
    EFA_CU_SYM(pointer_attribute, "cuPointerGetAttribute");
    EFA_CU_SYM(set_attribute, "cuPointerSetAttribute");
    EFA_CU_SYM(address_range, "cuMemGetAddressRange_v2");
    EFA_CU_SYM(get_handle, "cuIpcGetMemHandle");
    EFA_CU_SYM(open_handle, "cuIpcOpenMemHandle_v2");
    EFA_CU_SYM(close_handle, "cuIpcCloseMemHandle");
    EFA_CU_SYM(stream_synchronize, "cuStreamSynchronize"); /* (may be NULL) */
#undef EFA_CU_SYM
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
