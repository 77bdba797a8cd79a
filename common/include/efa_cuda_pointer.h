/*
 * A CUDA device allocation's id and synchronous-copy attribute, asked of
 * the driver by the Open MPI 5 device backend (common_efa_device.c)
 * where its accelerator component is cuda.
 *
 * Open MPI's own get_buffer_id reads the id and sets
 * CU_POINTER_ATTRIBUTE_SYNC_MEMOPS (a synchronous copy into the memory
 * finishes before it returns, so a NIC that reads it next reads the new
 * bytes).  The driver refuses that attribute for VMM allocations
 * (cuMemCreate + cuMemMap: PyTorch's expandable segments) and pool memory
 * (cudaMallocAsync); Open MPI then fails the call and prints a help
 * message each time.  Here the refusal is an answer: the id stands, and
 * the allocation is marked as one without synchronous memory operations
 * (efa_device_hmem_t's no_sync_memops), which the core's rule for such
 * memory reads (common_efa_hmem_vmm).
 *
 * The driver's two calls come in as function pointers (the backend takes
 * them from the loaded driver; the unit tests give their own).
 */
#ifndef EFA_CUDA_POINTER_H
#define EFA_CUDA_POINTER_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cuPointerGetAttribute and cuPointerSetAttribute (CUresult: 0 is
 * success; the pointer is a CUdeviceptr). */
typedef struct efa_cuda_pointer_calls {
    int (*get)(void *data, int attribute, unsigned long long ptr);
    int (*set)(const void *value, int attribute, unsigned long long ptr);
} efa_cuda_pointer_calls_t;

/* The id of the allocation holding buf (CU_POINTER_ATTRIBUTE_BUFFER_ID:
 * never reused in the process; for memory without synchronous copies
 * mixed with its physical allocation's, efa_cuda_mix_block_id) and
 * whether the driver refused to make synchronous copies into it
 * synchronize: 0, or -FI_EINVAL where the driver has no id for buf (not
 * CUDA memory). */
int efa_cuda_buffer_id(const efa_cuda_pointer_calls_t *cu, const void *buf, uint64_t *id,
                       bool *no_sync_memops);

/* The key of a VMM or pool allocation's registrations and imports: its
 * BUFFER_ID mixed with the id of the physical allocation mapped there
 * (CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, where the driver answers it).
 * The driver's documents do not say whether a VMM mapping's BUFFER_ID is
 * renewed when another physical allocation is mapped at the same address;
 * the block id is, so the key changes whichever of the two the driver
 * renews, and a registration or import of the old pages is never served
 * for the new ones.  The BUFFER_ID alone where the driver has no block
 * id, or the mix would be 0 (no allocation's key). */
static inline uint64_t efa_cuda_mix_block_id(uint64_t buffer_id, uint64_t block_id) {
    const uint64_t mixed = buffer_id ^ (block_id * 0x9e3779b97f4a7c15ull);
    return 0 == block_id || 0 == mixed ? buffer_id : mixed;
}

/* The ordinal of the device whose memory buf is
 * (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL): 0, or -FI_EINVAL where the driver
 * does not say.  For Open MPI 5.0 releases whose accelerator check gives
 * no device: the calling thread's current device is not the buffer's on
 * a process that uses several GPUs. */
int efa_cuda_device_ordinal(const efa_cuda_pointer_calls_t *cu, const void *buf, int *dev);

/* cuda.h's CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID (CUDA 11.7 and later). */
#define EFA_CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID 20

#ifdef __cplusplus
}
#endif

#endif
