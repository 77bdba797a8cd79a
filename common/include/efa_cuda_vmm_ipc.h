/*
 * IPC of CUDA VMM memory (cuMemCreate + cuMemMap: PyTorch's expandable
 * segments, NCCL's buffers) between processes of a node, for the Open MPI
 * 5 device backend (common_efa_cuda_ipc.c), which tries CUDA's legacy IPC
 * handles first: those exist only for cudaMalloc memory.
 *
 * A VMM allocation is shared by a file descriptor: the sender exports the
 * physical allocation behind the buffer (cuMemRetainAllocationHandle,
 * cuMemExportToShareableHandle with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
 * which works where the program asked for that handle type when it made
 * the allocation, as PyTorch and NCCL do) and holds the descriptor until
 * the message is done (efa_device_ipc_t.held); the receiver duplicates it
 * out of the sender (efa_fd_from_process), imports it, maps it into an
 * address range of its own with access for its device, and keeps that
 * mapping under the allocation's name: its buffer id, which the process
 * never reuses, so a descriptor number taken again by another allocation
 * is never mistaken for the first.  A buffer over several allocations
 * mapped side by side (PyTorch's expandable segments map 20 MiB ones so,
 * and a tensor may lie over several) goes piece by piece: its name holds
 * every piece's id, and what is held is a note (a sealed memfd) of each piece's
 * length and exported descriptor, all held with it; the receiver reads the
 * note (never writes or consumes anything of the sender's), takes the
 * pieces' descriptors and maps them side by side in one range of its own.
 * The receiver trusts the descriptor
 * number as it trusts the rest of a frame from its node (the driver's
 * descriptors carry nothing to check it by): the sender holds it open
 * until the receiver has answered, so it is that export's.  The driver's calls come in as function
 * pointers (the backend takes them from the loaded driver; the unit tests
 * give their own); CUresult 0 is success.
 */
#ifndef EFA_CUDA_VMM_IPC_H
#define EFA_CUDA_VMM_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "efa_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CU_STREAM_LEGACY: the default stream, whose work follows that of every
 * blocking stream issued before it. */
#define EFA_CU_STREAM_LEGACY ((void *)0x1)

/* CUmemAccessDesc as cuda.h lays it out (a location's type and id, the
 * access flags; enums are ints). */
typedef struct efa_cu_access_desc {
    int location_type; /* CU_MEM_LOCATION_TYPE_DEVICE: 1 */
    int location_id;   /* the device's ordinal */
    int flags;         /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE: 3 */
} efa_cu_access_desc_t;

typedef unsigned long long efa_cu_ptr_t;    /* CUdeviceptr */
typedef unsigned long long efa_cu_handle_t; /* CUmemGenericAllocationHandle */

typedef struct efa_cuda_vmm_calls {
    /* cuPointerGetAttribute, cuMemGetAddressRange_v2 */
    int (*pointer_attribute)(void *data, int attribute, efa_cu_ptr_t ptr);
    int (*address_range)(efa_cu_ptr_t *base, size_t *size, efa_cu_ptr_t ptr);
    /* cuMemRetainAllocationHandle, cuMemExportToShareableHandle,
     * cuMemImportFromShareableHandle, cuMemRelease */
    int (*retain)(efa_cu_handle_t *handle, void *addr);
    int (*export_handle)(void *shareable, efa_cu_handle_t handle, int type,
                         unsigned long long flags);
    int (*import_handle)(efa_cu_handle_t *handle, void *os_handle, int type);
    int (*release)(efa_cu_handle_t handle);
    /* cuMemAddressReserve, cuMemMap, cuMemSetAccess, cuMemUnmap,
     * cuMemAddressFree, cuCtxGetDevice */
    int (*reserve)(efa_cu_ptr_t *ptr, size_t size, size_t alignment, efa_cu_ptr_t addr,
                   unsigned long long flags);
    int (*map)(efa_cu_ptr_t ptr, size_t size, size_t offset, efa_cu_handle_t handle,
               unsigned long long flags);
    int (*set_access)(efa_cu_ptr_t ptr, size_t size, const efa_cu_access_desc_t *desc,
                      size_t count);
    int (*unmap)(efa_cu_ptr_t ptr, size_t size);
    int (*address_free)(efa_cu_ptr_t ptr, size_t size);
    int (*context_device)(int *device);
    /* cuStreamSynchronize (may be NULL): the sender waits for the default
     * stream before it exports (VMM memory takes no SYNC_MEMOPS) */
    int (*stream_synchronize)(void *stream);
} efa_cuda_vmm_calls_t;

/* The most VMM allocations mapped side by side that one buffer may span and
 * still be exported (each is held open as a descriptor while the message
 * is in flight; 256 of PyTorch's 20 MiB expandable segments: 5 GiB). */
#define EFA_CUDA_VMM_MAX_PIECES 256

/* The VMM allocations that hold all of [buf, buf + len), exported for one
 * message: 0 with *out filled (out->alloc_len: the allocations' length
 * together, out->offset: buf's in the first; out->held: the descriptor,
 * kept open until efa_cuda_vmm_release: the allocation's, or for a buffer
 * over several allocations side by side a note of each one's descriptor,
 * all held), -FI_EINVAL where buf is not such memory, a gap or more than
 * EFA_CUDA_VMM_MAX_PIECES allocations lie under the range, or one cannot
 * be exported as a descriptor, -FI_EAGAIN where the descriptors it would
 * hold pass the budget of exports in flight (a quarter of the soft
 * RLIMIT_NOFILE), or -FI_ENOMEM where the note cannot be made. */
int efa_cuda_vmm_export(const efa_cuda_vmm_calls_t *cu, const void *buf, size_t len,
                        efa_device_ipc_t *out);
/* Map the allocation(s) process pid exported (in->held set), side by side
 * as they were there: 0 and *base,
 * reachable with this process's device copy until efa_cuda_vmm_close, or
 * a negative libfabric error (nothing left mapped or open). */
int efa_cuda_vmm_import(const efa_cuda_vmm_calls_t *cu, uint32_t pid, const efa_device_ipc_t *in,
                        void **base);
/* The same, mapped for the device of near (the memory the bytes are copied
 * to or from) as well as the thread's context's device; near NULL: the
 * context's alone.  -FI_EAGAIN where the thread has no context or no
 * address range is free (not the memory's doing: asked again later). */
int efa_cuda_vmm_import_near(const efa_cuda_vmm_calls_t *cu, uint32_t pid,
                             const efa_device_ipc_t *in, const void *near, void **base);
/* Is base a mapping efa_cuda_vmm_import made?  Then it is unmapped and
 * its range freed (true); false: not one of its. */
bool efa_cuda_vmm_close(const efa_cuda_vmm_calls_t *cu, void *base);
/* An export's descriptor closed (out->held of efa_cuda_vmm_export). */
void efa_cuda_vmm_release(uint64_t held);
/* Is h an export of efa_cuda_vmm_export's (rather than a legacy handle)? */
bool efa_cuda_vmm_is_export(const efa_device_ipc_t *h);

#ifdef __cplusplus
}
#endif

#endif
