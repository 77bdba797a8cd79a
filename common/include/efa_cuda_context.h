/*
 * A current CUDA context for the thread that is about to call the driver,
 * for the Open MPI 5 device backend's own driver calls (IPC, dmabuf,
 * pinning) and its copies through Open MPI's accelerator component.
 *
 * The driver's calls act on the calling thread's current context, and a
 * thread has none until it makes one current or calls the runtime API.
 * Progress runs device messages' steps (an import, a copy, an unpin) on
 * whichever thread calls MPI next: with MPI_THREAD_MULTIPLE that may be a
 * thread that never touched CUDA (an OpenMP worker, a communication
 * thread), where every such call fails with CUDA_ERROR_INVALID_CONTEXT
 * and the message would fail or go through the host.  Here such a thread
 * is given, in this order: the context of the device buffer at hand
 * (CU_POINTER_ATTRIBUTE_CONTEXT of memory whose type is device, not of
 * pinned host memory; VMM and pool memory have none), or the
 * context last seen current on a thread of this process that passed
 * here.  A thread that has a context keeps it.
 *
 * The driver's calls come in as function pointers (the backend takes them
 * from the loaded driver; the unit tests give their own).
 */
#ifndef EFA_CUDA_CONTEXT_H
#define EFA_CUDA_CONTEXT_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct efa_cuda_context {
    /* cuCtxGetCurrent, cuCtxSetCurrent, cuPointerGetAttribute (CUresult:
     * 0 is success; the pointer is a CUdeviceptr) */
    int (*get_current)(void **ctx);
    int (*set_current)(void *ctx);
    int (*pointer_attribute)(void *data, int attribute, unsigned long long ptr);
    /* the context last seen current here (atomic; NULL: none yet) */
    void *seen;
    /* threads given a context here (atomic; for the backend's report) */
    unsigned long given;
} efa_cuda_context_t;

/* Make a context current on the calling thread where it has none: a's,
 * else b's (either may be NULL or host memory), else the one last seen.
 * 0 where the thread has a context on return, -FI_EINVAL where none
 * could be found (the caller's driver calls then fail as they would). */
int efa_cuda_context_here(efa_cuda_context_t *cc, const void *a, const void *b);

#ifdef __cplusplus
}
#endif

#endif
