/*
 * A current CUDA context for the thread that is about to call the driver,
 * for the Open MPI 5 device backend's own driver calls (IPC, dmabuf,
 * pinning) and its copies through Open MPI's accelerator component.
 *
 * The driver's calls act on the calling thread's current context, and a
 * thread has none until it makes one current or calls the runtime API.
 * Progress runs device messages' steps (an import, a copy, an unpin, an
 * unpack) on whichever thread calls MPI next: with MPI_THREAD_MULTIPLE
 * that may be a thread that never touched CUDA (an OpenMP worker, a
 * communication thread), where every such call fails with
 * CUDA_ERROR_INVALID_CONTEXT and the message would fail or go through the
 * host.  Here such a thread is given, in this order:
 *   - the context of the device buffer at hand (CU_POINTER_ATTRIBUTE_CONTEXT
 *     of memory whose type is device; not that of pinned host memory);
 *   - for device memory without one (VMM and pool memory: the driver
 *     answers NULL), the primary context of the buffer's device
 *     (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL), as Open MPI 5's check_addr does;
 *   - the primary context of the device whose context was last seen
 *     current on a thread of this process that passed here.
 * A primary context is taken only while cuDevicePrimaryCtxGetState says it
 * is active (the application or the runtime holds it), so that a device
 * reset (cudaDeviceReset) leaves no dead handle to be made current; a
 * context seen is remembered by its device, never made current itself
 * (a user context may have been destroyed since).  Each primary context is
 * retained once, the first time it is taken, and kept (its handle is the
 * device's for the life of the process).  A thread that has a context
 * keeps it.
 *
 * The driver's calls come in as function pointers (the backend takes them
 * from the loaded driver; the unit tests give their own).  A CUdevice is
 * taken to be its ordinal, as Open MPI's cuda component takes it.
 */
#ifndef EFA_CUDA_CONTEXT_H
#define EFA_CUDA_CONTEXT_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Devices whose primary context may be retained here (ordinals beyond get
 * none: no node has that many). */
#define EFA_CUDA_CONTEXT_DEVICES 64

typedef struct efa_cuda_context {
    /* cuCtxGetCurrent, cuCtxSetCurrent, cuPointerGetAttribute (CUresult:
     * 0 is success; the pointer is a CUdeviceptr) */
    int (*get_current)(void **ctx);
    int (*set_current)(void *ctx);
    int (*pointer_attribute)(void *data, int attribute, unsigned long long ptr);
    /* cuCtxGetDevice, cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxRetain */
    int (*context_device)(int *device);
    int (*primary_state)(int device, unsigned int *flags, int *active);
    int (*primary_retain)(void **ctx, int device);
    /* the context last seen current here, and its device's ordinal + 1
     * (atomic; NULL, 0: none yet): the context only to tell a change */
    void *seen;
    int seen_device;
    /* the primary contexts retained here, by ordinal (atomic) */
    void *primary[EFA_CUDA_CONTEXT_DEVICES];
    /* threads given a context here (atomic; for the backend's report) */
    unsigned long given;
} efa_cuda_context_t;

/* Make a context current on the calling thread where it has none: a's,
 * else b's (either may be NULL or host memory), else the primary context
 * of a's or b's device, else that of the device last seen.  0 where the
 * thread has a context on return, -FI_EINVAL where none could be found
 * (the caller's driver calls then fail as they would). */
int efa_cuda_context_here(efa_cuda_context_t *cc, const void *a, const void *b);

/* The same for a thread about to let another library call the driver on
 * this process's device (libfabric's own device copies as it progresses):
 * the primary context of the device last seen, asked of the driver once
 * per thread that gets a context so (thread_local; nothing is asked
 * before a context was seen).  0 where the thread has a context. */
int efa_cuda_context_thread(efa_cuda_context_t *cc);

#ifdef __cplusplus
}
#endif

#endif
