/* The mock runtime (libcudart.so.13): the calls OSU's CUDA benchmarks and
 * libfabric's CUDA HMEM make, on the mock driver's memory. */
#define _GNU_SOURCE
#include "mock_cuda.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static cudaError_t ok_or(int ok, cudaError_t err) {
    return ok ? cudaSuccess : err;
}

cudaError_t cudaSetDevice(int d) {
    mock_ctx_use();
    return ok_or(0 == d, cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int *d) {
    *d = 0;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n) {
    *n = 1;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    return cudaSuccess;
}

cudaError_t cudaDeviceReset(void) {
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
    return cudaSuccess;
}

cudaError_t cudaPeekAtLastError(void) {
    return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e) {
    return cudaSuccess == e ? "no error" : "mock-cuda error";
}

const char *cudaGetErrorName(cudaError_t e) {
    return cudaSuccess == e ? "cudaSuccess" : "cudaErrorMock";
}

cudaError_t cudaMalloc(void **p, size_t n) {
    mock_ctx_use();
    if (!p || 0 == n) {
        return cudaErrorInvalidValue;
    }
    *p = (void *)mock_alloc(n, MOCK_PLAIN);
    return ok_or(*p != NULL, cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void *p) {
    return ok_or(!p || 0 == mock_free((uintptr_t)p), cudaErrorInvalidValue);
}

/* Managed memory: host memory here (the CPU reaches it on a GPU too). */
cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int flags) {
    (void)flags;
    return ok_or(0 == posix_memalign(p, 4096, n ? n : 1), cudaErrorMemoryAllocation);
}

cudaError_t cudaMemPrefetchAsync(const void *p, size_t n, struct cudaMemLocation loc,
                                 unsigned int flags, cudaStream_t s) {
    (void)p, (void)n, (void)loc, (void)flags, (void)s;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags) {
    (void)flags;
    return ok_or(0 == posix_memalign(p, 4096, n ? n : 1), cudaErrorMemoryAllocation);
}

cudaError_t cudaMallocHost(void **p, size_t n) {
    return cudaHostAlloc(p, n, 0);
}

cudaError_t cudaFreeHost(void *p) {
    free(p);
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void *p, size_t n, unsigned int flags) {
    (void)p, (void)n, (void)flags;
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *p) {
    (void)p;
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k) {
    (void)k;
    return ok_or(0 == mock_copy((uintptr_t)d, (uintptr_t)s, n), cudaErrorInvalidValue);
}

cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t st) {
    (void)st;
    return cudaMemcpy(d, s, n, k);
}

cudaError_t cudaMemset(void *d, int v, size_t n) {
    return ok_or(0 == mock_set((uintptr_t)d, v, n), cudaErrorInvalidValue);
}

cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st) {
    (void)st;
    return cudaMemset(d, v, n);
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p) {
    return ok_or(CUDA_SUCCESS == cuIpcGetMemHandle((CUipcMemHandle *)h, (CUdeviceptr)p),
                 cudaErrorInvalidValue);
}

cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned int flags) {
    CUipcMemHandle ch;
    memcpy(&ch, &h, sizeof(ch));
    CUdeviceptr d = 0;
    const CUresult rc = cuIpcOpenMemHandle(&d, ch, flags);
    *p = (void *)d;
    return ok_or(CUDA_SUCCESS == rc, CUDA_ERROR_INVALID_CONTEXT == rc
                                         ? cudaErrorDeviceUninitialized
                                         : cudaErrorInvalidResourceHandle);
}

cudaError_t cudaIpcCloseMemHandle(void *p) {
    return ok_or(CUDA_SUCCESS == cuIpcCloseMemHandle((CUdeviceptr)p), cudaErrorInvalidValue);
}

struct mock_event {
    struct timespec at;
};

cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = (cudaEvent_t)calloc(1, sizeof(struct mock_event));
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    (void)flags;
    return cudaEventCreate(e);
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    (void)s;
    clock_gettime(CLOCK_MONOTONIC, &((struct mock_event *)e)->at);
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    (void)e;
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
    (void)e;
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    const struct timespec *x = &((struct mock_event *)a)->at, *y = &((struct mock_event *)b)->at;
    *ms = (float)((y->tv_sec - x->tv_sec) * 1e3 + (y->tv_nsec - x->tv_nsec) / 1e6);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
    free(e);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) {
    *s = (cudaStream_t)calloc(1, 16);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    (void)flags;
    return cudaStreamCreate(s);
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    free(s);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    (void)s;
    return cudaSuccess;
}

/* What nvcc's host code calls to register and launch kernels: registered
 * as nothing; a launch fails, named once. */
static void *g_fatbin_anchor;

void **__cudaRegisterFatBinary(void *fatbin) {
    (void)fatbin;
    return &g_fatbin_anchor;
}

void __cudaRegisterFatBinaryEnd(void **h) {
    (void)h;
}

void __cudaUnregisterFatBinary(void **h) {
    (void)h;
}

void __cudaRegisterFunction(void **h, const char *host_fun, char *device_fun,
                            const char *device_name, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bdim, dim3 *gdim, int *wsize) {
    (void)h, (void)host_fun, (void)device_fun, (void)device_name, (void)thread_limit;
    (void)tid, (void)bid, (void)bdim, (void)gdim, (void)wsize;
}

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, void *stream) {
    (void)grid, (void)block, (void)shared, (void)stream;
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shared, void *stream) {
    (void)grid, (void)block, (void)shared, (void)stream;
    return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(const void *fn, dim3 grid, dim3 block, void **args, size_t shared,
                               cudaStream_t s) {
    (void)fn, (void)grid, (void)block, (void)args, (void)shared, (void)s;
    mock_unsupported("a kernel launch");
    return cudaErrorNotSupported;
}

cudaError_t cudaLaunchKernel(const void *fn, dim3 grid, dim3 block, void **args, size_t shared,
                             cudaStream_t s) {
    return __cudaLaunchKernel(fn, grid, block, args, shared, s);
}

cudaError_t __cudaGetKernel(void **kernel, const void *fn) {
    (void)fn;
    *kernel = NULL;
    mock_unsupported("a kernel");
    return cudaErrorNotSupported;
}
