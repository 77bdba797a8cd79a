/*
 * A stand-in for NVIDIA's driver (libcuda.so.1) and runtime
 * (libcudart.so.13) on a machine without a GPU, so that the GPU check
 * (tests/gpu/run-gpu-check.sh -m) runs its whole course here: the kit's
 * Open MPI 5 (accelerator/cuda, smcuda), libfabric 2.x's CUDA HMEM, OSU
 * with -d cuda and the components' own driver calls all reach it.
 *
 * Device memory is a memfd mapped twice: at the device address with no
 * access at all (any CPU load or store of it, and any system call that
 * reads it, fails as on a GPU) and at a shadow address the copies use.
 * Allocations: cuMemAlloc (legacy IPC by /proc/PID/fd), VMM (cuMemCreate,
 * cuMemMap, export and import as file descriptors), pool memory
 * (cuMemAllocAsync, no IPC); each with its buffer id, and VMM and pool
 * memory refuse SYNC_MEMOPS as the driver does.  Every call is
 * synchronous.  What it cannot do (kernels) fails with an error that
 * names itself.  Not a model of performance.
 */
#ifndef MOCK_CUDA_H
#define MOCK_CUDA_H

#include <stddef.h>
#include <stdint.h>

enum mock_kind { MOCK_PLAIN = 1, MOCK_VMM, MOCK_POOL, MOCK_IMPORTED };

/* One mapped range the device owns (an allocation, a VMM mapping of one
 * physical allocation, or an imported one). */
struct mock_range {
    uintptr_t base;
    size_t len;
    char *shadow; /* the CPU's view of the same bytes */
    int fd;       /* the memfd (plain, pool); -1 for a VMM mapping */
    enum mock_kind kind;
    uint64_t buffer_id;
    uint64_t block_id; /* the physical allocation's (VMM) */
    int sync_memops;
    int exportable; /* VMM: made with POSIX file descriptors allowed */
    void *phys;     /* VMM: its struct mock_phys */
    struct mock_range *next;
};

/* The range holding p, copied out (0: none). */
int mock_find(uintptr_t p, struct mock_range *out);
/* A device allocation of len bytes (plain or pool), its device address. */
uintptr_t mock_alloc(size_t len, enum mock_kind kind);
int mock_free(uintptr_t p);
/* Copies through the views, range by range; -1 where the bytes run from
 * device memory into memory the driver does not know. */
int mock_copy(uintptr_t dst, uintptr_t src, size_t n);
int mock_set(uintptr_t dst, int value, size_t n);
/* Makes the primary context current (the runtime's implicit one, which
 * the runtime retains once). */
void mock_ctx_use(void);
/* Has this thread a current context (calls that need one fail without)? */
int mock_ctx_current(void);
/* Says once on stderr that a call is not carried (kernels). */
void mock_unsupported(const char *what);

#endif
