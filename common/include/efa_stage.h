/*
 * Host buffers that carry device bytes through the host: a device buffer
 * sent to a provider without FI_HMEM is copied into one and sent from it,
 * a device receive lands in one and is copied to the device.
 *
 * A large buffer allocated per message and freed after it costs every
 * message its page faults and, where the provider registers what it
 * sends (efa: FI_MR_LOCAL; the core's rendezvous reads), a registration:
 * freeing the pages invalidates the cached one.  So buffers of 64 KiB and
 * more come from a pool that keeps them (page aligned, in power-of-two
 * sizes up to 64 MiB, at most 128 MiB idle per process): the next staged
 * message of that size finds its pages faulted in and registered.  Where
 * the device backend pins host memory (CUDA: cuMemHostRegister), each
 * such buffer is pinned once when it is mapped and unpinned before it is
 * unmapped, so the device's copies to and from it go by its DMA.
 * Smaller ones are malloc's, whose own free lists keep them warm.
 *
 * Process-wide, thread safe.  A process that never stages pays one
 * predicted branch in efa_stage_free.
 */
#ifndef EFA_STAGE_H
#define EFA_STAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A host buffer of at least len bytes (NULL when memory is out). */
void *efa_stage_get(size_t len);
/* Give back p: efa_stage_get's, or any malloc'd buffer (free()d). */
void efa_stage_free(void *p);
/* The same for a buffer whose operation failed or was given up on: the
 * provider may still hold it, so its memory is never used again (the
 * pool's emptied but left mapped, so that a late write lands in nothing
 * else; malloc's held for good: freed, a late write would land in
 * whatever the heap handed out next). */
void efa_stage_drop(void *p);
/* Unmap the idle buffers (at a component's close). */
void efa_stage_trim(void);

typedef struct efa_stage_counts {
    uint64_t pooled; /* buffers handed out from the pool's sizes (64 KiB and more) */
    uint64_t reused; /* ... of them, one kept from an earlier message */
    uint64_t idle_bytes;
    uint64_t pinned; /* ... of them, pinned by the device for its copies */
} efa_stage_counts_t;
void efa_stage_get_counts(efa_stage_counts_t *out);

#ifdef __cplusplus
}
#endif

#endif
