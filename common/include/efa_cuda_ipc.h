/*
 * CUDA's legacy IPC handles (cuIpcGetMemHandle, cuIpcOpenMemHandle) of
 * cudaMalloc memory, for the Open MPI 5 device backend
 * (common_efa_cuda_ipc.c), which tries them before the VMM path
 * (efa_cuda_vmm_ipc.h).  The driver's calls come in as function pointers
 * (the backend takes them from the loaded driver; the unit tests give
 * their own, tests/unit/test_cuda_ipc.cpp); CUresult 0 is success.
 *
 * The sender's handle names the allocation that holds the buffer (from its
 * base: cuMemGetAddressRange), with the buffer's offset in it.  Before it
 * hands the handle over, the sender sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
 * on the allocation, as Open MPI's own CUDA IPC does: without it a
 * cudaMemset, or a cudaMemcpy from pageable host memory, may return
 * before its bytes land, and the peer, which copies on a stream of its
 * own, could read the old ones.
 */
#ifndef EFA_CUDA_IPC_H
#define EFA_CUDA_IPC_H

#include <stddef.h>

#include "efa_cuda_vmm_ipc.h"
#include "efa_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CUipcMemHandle (64 bytes, passed by value). */
typedef struct efa_cu_ipc_handle {
    char reserved[64];
} efa_cu_ipc_handle_t;

typedef struct efa_cuda_ipc_calls {
    /* cuPointerGetAttribute, cuPointerSetAttribute (either may be NULL) */
    int (*pointer_attribute)(void *data, int attribute, efa_cu_ptr_t ptr);
    int (*set_attribute)(const void *value, int attribute, efa_cu_ptr_t ptr);
    /* cuMemGetAddressRange_v2, cuIpcGetMemHandle, cuIpcOpenMemHandle_v2,
     * cuIpcCloseMemHandle */
    int (*address_range)(efa_cu_ptr_t *base, size_t *size, efa_cu_ptr_t ptr);
    int (*get_handle)(efa_cu_ipc_handle_t *handle, efa_cu_ptr_t base);
    int (*open_handle)(efa_cu_ptr_t *ptr, efa_cu_ipc_handle_t handle, unsigned int flags);
    int (*close_handle)(efa_cu_ptr_t ptr);
    /* cuStreamSynchronize (may be NULL): with EFA_CU_STREAM_LEGACY, the
     * wait for copies into an allocation made before SYNC_MEMOPS was set */
    int (*stream_synchronize)(void *stream);
} efa_cuda_ipc_calls_t;

/* cuda.h's CUDA_ERROR_ALREADY_MAPPED: the driver maps an allocation once
 * per process, so a kept import of a freed allocation whose address the
 * new one took must be closed first. */
#define EFA_CUDA_ERROR_ALREADY_MAPPED 208

/* The handle of the allocation holding [buf, buf + len), its length and
 * buf's offset in it: 0, or -FI_EINVAL where the memory has no legacy
 * handle (CUDA VMM and pool memory: the caller tries the VMM path). */
int efa_cuda_ipc_export(const efa_cuda_ipc_calls_t *cu, const void *buf, size_t len,
                        efa_device_ipc_t *out);

/* Map the allocation a peer exported into the current context: 0 and
 * *base (the address of the allocation's first byte here), or
 * -FI_EALREADY (CUDA_ERROR_ALREADY_MAPPED), -FI_EACCES (any other
 * refusal), -FI_EINVAL (a mapping that does not hold what the sender said:
 * closed again). */
int efa_cuda_ipc_import(const efa_cuda_ipc_calls_t *cu, const efa_device_ipc_t *in, void **base);

#ifdef __cplusplus
}
#endif

#endif
