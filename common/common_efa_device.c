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

#include <rdma/fi_errno.h>

#include "opal/mca/accelerator/accelerator.h"
#include "opal/mca/accelerator/base/base.h"

/* Managed (unified) memory is the CPU's too: not device memory here. */
static int ompi_check(const void *buf, size_t len) {
    (void)len;
    int dev = MCA_ACCELERATOR_NO_DEVICE_ID;
    uint64_t flags = 0;
    return opal_accelerator.check_addr(buf, &dev, &flags) > 0 &&
                   0 == (flags & MCA_ACCELERATOR_FLAGS_UNIFIED_MEMORY)
               ? 1
               : 0;
}

static int ompi_copy(void *dst, const void *src, size_t len) {
    return OPAL_SUCCESS == opal_accelerator.mem_copy(MCA_ACCELERATOR_NO_DEVICE_ID,
                                                     MCA_ACCELERATOR_NO_DEVICE_ID, dst, src, len,
                                                     MCA_ACCELERATOR_TRANSFER_UNSPEC)
               ? 0
               : -FI_EIO;
}

static void ompi_release(void *buf) {
    (void)opal_accelerator.mem_release(MCA_ACCELERATOR_NO_DEVICE_ID, buf);
}

/* IPC: Open MPI 5.0's accelerator framework has none; CUDA's own where
 * the component is cuda (common_efa_cuda_ipc.c). */
static efa_device_ops_t ompi_ops = {
    .check = ompi_check, .copy = ompi_copy, .release = ompi_release};

const efa_device_ops_t *mca_common_efa_device_ompi(void) {
    const char *name = opal_accelerator_base_selected_component.base_version.mca_component_name;
    if (0 == strcmp(name, "null")) {
        return NULL; /* no accelerator here: nothing is device memory */
    }
    ompi_ops.name = name;
    if (0 == strcmp(name, "cuda") && NULL == ompi_ops.ipc_export) {
        (void)mca_common_efa_cuda_ipc(&ompi_ops); /* (said by mtl_efa's device report) */
    }
    return &ompi_ops;
}
#else
const efa_device_ops_t *mca_common_efa_device_ompi(void) {
    return NULL;
}
#endif
