/*
 * Device (accelerator) memory: the one seam through which the components
 * learn that a buffer is a GPU's and copy it through the host.
 *
 * Memory of a GPU is not the CPU's: the rings, the single copy (CMA), the
 * eager copies and a provider without FI_HMEM all read and write buffers
 * with the CPU, which crashes or corrupts on device memory.  So a
 * component asks here before it hands a user buffer to any of them, and
 * where the answer is yes it moves the bytes with the device's own copy.
 *
 * A backend answers the two questions: the Open MPI accelerator framework
 * (5.0, common_efa_device.c), or the fake device (tests: memory the CPU
 * cannot touch at all, mapped PROT_NONE and reachable only through the
 * fake's copy, so that any path that touches device memory directly
 * crashes the test).  With no backend installed nothing is device memory
 * and a component pays one predicted branch (efa_device_on).
 *
 * Same conventions as efa_core.h: 0 or a negative libfabric error.
 */
#ifndef EFA_DEVICE_H
#define EFA_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct efa_device_ops {
    const char *name; /* for reports: "cuda", "fake", ... */
    /* Is the memory at buf (len bytes) the device's?  1 yes, 0 no. */
    int (*check)(const void *buf, size_t len);
    /* len bytes from src to dst, either or both of them the device's;
     * done when it returns.  0 or a negative libfabric error. */
    int (*copy)(void *dst, const void *src, size_t len);
    /* Give back device memory that Open MPI allocated for a component (a
     * packed copy of a non-contiguous device buffer). */
    void (*release)(void *buf);
} efa_device_ops_t;

/* A backend is installed (read on every message: one predicted branch). */
extern bool efa_device_on;

/* Install ops (kept, not copied), or none with NULL. */
void efa_device_install(const efa_device_ops_t *ops);
/* The installed backend's name, or NULL. */
const char *efa_device_name(void);
/* Is buf device memory (false whenever no backend is installed)? */
bool efa_device_check(const void *buf, size_t len);
/* Copy through the backend (-FI_ENOSYS without one). */
int efa_device_copy(void *dst, const void *src, size_t len);
void efa_device_release(void *buf);

/* The fake device (tests).  Its memory is mapped twice: the address it
 * hands out with no access at all, and a private view that only its copy
 * uses.  Freed memory is no longer the device's. */
const efa_device_ops_t *efa_fake_device_ops(void);
void *efa_fake_device_alloc(size_t len);
void efa_fake_device_free(void *buf);
/* Allocations live now (tests: nothing left behind). */
size_t efa_fake_device_live(void);

#ifdef __cplusplus
}
#endif

#endif
