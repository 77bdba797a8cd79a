/*
 * Open MPI's accelerator framework (5.0) as a backend of the core's
 * device seam (common/include/efa_device.h): a component that copies
 * device buffers itself installs it.  Open MPI 4.1 has no such framework:
 * there is no backend (its CUDA support stages device buffers in the PML's
 * convertor before a component sees them).
 */
#include "common_efa.h"

#if OPAL_MAJOR_VERSION >= 5
#include <string.h>

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "opal/mca/accelerator/accelerator.h"
#include "opal/mca/accelerator/base/base.h"

#include "efa_cuda_pointer.h"

/* The CUDA driver's pointer attribute calls, where the component is cuda
 * and the driver has them (NULL otherwise: Open MPI's get_buffer_id). */
static efa_cuda_pointer_calls_t cuda_pointer;

/* Managed (unified) memory is the CPU's too: not device memory here.  An
 * error (CUDA: device memory for which no context could be made current,
 * or a driver call that failed) counts as device memory: its copies then
 * fail with an error, where the CPU's touch of device memory would crash. */
static int ompi_check(const void *buf, size_t len) {
    (void)len;
    int dev = MCA_ACCELERATOR_NO_DEVICE_ID;
    uint64_t flags = 0;
    const int rc = opal_accelerator.check_addr(buf, &dev, &flags);
    return rc < 0 || (rc > 0 && 0 == (flags & MCA_ACCELERATOR_FLAGS_UNIFIED_MEMORY)) ? 1 : 0;
}

static int ompi_copy(void *dst, const void *src, size_t len) {
    mca_common_efa_cuda_context_here(dst, src); /* (progress may run it on any thread) */
    return OPAL_SUCCESS == opal_accelerator.mem_copy(MCA_ACCELERATOR_NO_DEVICE_ID,
                                                     MCA_ACCELERATOR_NO_DEVICE_ID, dst, src, len,
                                                     MCA_ACCELERATOR_TRANSFER_UNSPEC)
               ? 0
               : -FI_EIO;
}

static void ompi_release(void *buf) {
    mca_common_efa_cuda_context_here(buf, NULL);
    (void)opal_accelerator.mem_release(MCA_ACCELERATOR_NO_DEVICE_ID, buf);
}

/* libfabric's interface for the accelerator component's devices, or
 * FI_HMEM_SYSTEM where libfabric has none (no registrations then). */
static enum fi_hmem_iface ompi_iface(void) {
    const char *name = opal_accelerator_base_selected_component.base_version.mca_component_name;
    return 0 == strcmp(name, "cuda")   ? FI_HMEM_CUDA
           : 0 == strcmp(name, "rocm") ? FI_HMEM_ROCR
           : 0 == strcmp(name, "ze")   ? FI_HMEM_ZE
                                       : FI_HMEM_SYSTEM;
}

/* The allocation holding buf, its device and id (the id is what Open
 * MPI's own registration cache uses to see a device free), and whether
 * its synchronous copies could be made to synchronize (CUDA: the driver's
 * calls, efa_cuda_pointer.h; otherwise Open MPI's get_buffer_id, which
 * fails for memory that refuses). */
static int ompi_hmem(const void *buf, size_t len, efa_device_hmem_t *out) {
    (void)len;
    int dev = MCA_ACCELERATOR_NO_DEVICE_ID;
    uint64_t flags = 0;
    void *base = NULL;
    size_t size = 0;
    opal_accelerator_buffer_id_t id = 0;
    const enum fi_hmem_iface iface = ompi_iface();
    /* (managed memory is host memory here, as in ompi_check) */
    if (FI_HMEM_SYSTEM == iface || opal_accelerator.check_addr(buf, &dev, &flags) <= 0 ||
        0 != (flags & MCA_ACCELERATOR_FLAGS_UNIFIED_MEMORY)) {
        return -FI_EINVAL;
    }
    /* (Open MPI 5.0 releases whose check gives no device: the driver says
     * the buffer's; the thread's current device only where it cannot) */
    if (dev < 0 && NULL != __atomic_load_n(&cuda_pointer.get, __ATOMIC_ACQUIRE)) {
        (void)efa_cuda_device_ordinal(&cuda_pointer, buf, &dev);
    }
    if (dev < 0 && OPAL_SUCCESS != opal_accelerator.get_device(&dev)) {
        return -FI_EINVAL;
    }
    /* (the allocation holding buf; the buffer may run on into the next
     * one, CUDA VMM memory's pieces, which the core asks for in turn) */
    if (OPAL_SUCCESS != opal_accelerator.get_address_range(dev, buf, &base, &size) ||
        (uintptr_t)buf < (uintptr_t)base || (uintptr_t)buf - (uintptr_t)base >= size) {
        return -FI_EINVAL;
    }
    /* (id 0: not registered, a freed allocation could not be told apart) */
    bool no_sync_memops = false;
    uint64_t id64 = 0;
    if (NULL != __atomic_load_n(&cuda_pointer.get, __ATOMIC_ACQUIRE)) {
        if (0 != efa_cuda_buffer_id(&cuda_pointer, buf, &id64, &no_sync_memops)) {
            id64 = 0;
        }
    } else if (OPAL_SUCCESS == opal_accelerator.get_buffer_id(dev, buf, &id)) {
        id64 = (uint64_t)id;
    }
    out->iface = (int)iface;
    out->device = (uint64_t)dev;
    out->buffer_id = id64;
    out->no_sync_memops = no_sync_memops;
    out->base = (uintptr_t)base;
    out->len = size;
    return 0;
}

/* IPC and dmabuf exports: Open MPI 5.0's accelerator framework has
 * neither; CUDA's own where the component is cuda (common_efa_cuda_ipc.c,
 * common_efa_cuda_dmabuf.c). */
static efa_device_ops_t ompi_ops = {
    .check = ompi_check, .copy = ompi_copy, .release = ompi_release, .hmem = ompi_hmem};

const efa_device_ops_t *mca_common_efa_device_ompi(void) {
    const char *name = opal_accelerator_base_selected_component.base_version.mca_component_name;
    if (0 == strcmp(name, "null")) {
        return NULL; /* no accelerator here: nothing is device memory */
    }
    ompi_ops.name = name;
    if (0 == strcmp(name, "cuda")) {
        (void)mca_common_efa_cuda_context_load(); /* (before the calls that need one) */
    }
    if (0 == strcmp(name, "cuda") && NULL == ompi_ops.ipc_export) {
        (void)mca_common_efa_cuda_ipc(&ompi_ops); /* (said by mtl_efa's device report) */
    }
    if (0 == strcmp(name, "cuda") && NULL == ompi_ops.dmabuf) {
        (void)mca_common_efa_cuda_dmabuf(&ompi_ops); /* (the core's report says its use) */
    }
    if (0 == strcmp(name, "cuda") && NULL == ompi_ops.host_register) {
        (void)mca_common_efa_cuda_pin(&ompi_ops); /* (else the staging buffers stay unpinned) */
    }
    if (0 == strcmp(name, "cuda") && NULL == cuda_pointer.get) {
        (void)mca_common_efa_cuda_pointer(&cuda_pointer); /* (else Open MPI's get_buffer_id) */
    }
    return &ompi_ops;
}
#else
const efa_device_ops_t *mca_common_efa_device_ompi(void) {
    return NULL;
}
#endif
