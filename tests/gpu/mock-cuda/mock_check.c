/* The mock driver does what the GPU check's rehearsal relies on
 * (mock_cuda.h): device memory the CPU cannot touch, copies through the
 * driver, a legacy IPC handle another process opens and its own process
 * cannot, VMM pieces that are allocations of their own (range, id, no
 * legacy handle, SYNC_MEMOPS refused, one buffer to copies when side by
 * side) exported as file descriptors, and
 * host pointers unknown to cuPointerGetAttributes without an error, and
 * allocations, copies and host memory pinned (once) only by a thread with
 * a current context; no context named by VMM and pool memory, a primary
 * context active only once retained, and a pop that restores the context
 * pushed over.
 * Prints "ok mock_check" and exits 0, or names the first failure. */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(cond, what)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL mock_check: %s\n", what);                                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { N = 1 << 20 };

/* Runs fn(arg) in a child; its wait status. */
static int in_child(int (*fn)(void *), void *arg) {
    const pid_t pid = fork();
    if (0 == pid) {
        _exit(fn(arg));
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static int touch(void *p) {
    return ((volatile char *)p)[0]; /* (must not return) */
}

static int open_handle(void *h) {
    CUdeviceptr d = 0;
    static char back[N];
    if (CUDA_SUCCESS != cuIpcOpenMemHandle(&d, *(CUipcMemHandle *)h, 0) ||
        CUDA_SUCCESS != cuMemcpyDtoH(back, d, N) || back[N - 1] != (char)0x5a) {
        return 3;
    }
    return CUDA_SUCCESS == cuIpcCloseMemHandle(d) ? 0 : 4;
}

static int import_fd(void *fdp) {
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    char byte = 0;
    const size_t len = 2u << 20;
    if (CUDA_SUCCESS != cuMemImportFromShareableHandle(&h, (void *)(uintptr_t) * (int *)fdp,
                                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
        CUDA_SUCCESS != cuMemAddressReserve(&va, len, 0, 0, 0) ||
        CUDA_SUCCESS != cuMemMap(va, len, 0, h, 0) ||
        CUDA_SUCCESS != cuMemcpyDtoH(&byte, va + 7, 1)) {
        return 5;
    }
    return 0x17 == byte ? 0 : 6;
}

/* cuCtxPopCurrent makes current again the context the popped one was
 * pushed over (none, or the same one). */
static void push_pop(CUcontext primary) {
    CUcontext popped = NULL, now = (CUcontext)1;
    CHECK(CUDA_SUCCESS == cuCtxSetCurrent(NULL) && CUDA_SUCCESS == cuCtxPushCurrent(primary) &&
              CUDA_SUCCESS == cuCtxPopCurrent(&popped) && popped == primary &&
              CUDA_SUCCESS == cuCtxGetCurrent(&now) && NULL == now,
          "a pop over no context left one current");
    CHECK(CUDA_SUCCESS == cuCtxSetCurrent(primary) && CUDA_SUCCESS == cuCtxPushCurrent(primary) &&
              CUDA_SUCCESS == cuCtxPopCurrent(&popped) && CUDA_SUCCESS == cuCtxGetCurrent(&now) &&
              primary == now,
          "a pop did not restore the context pushed over");
}

/* VMM and pool memory name no context (the driver's NULL), cudaMalloc's
 * does; all name their device. */
static void memory_contexts(CUdeviceptr plain, CUdeviceptr vmm) {
    CUcontext ctx = NULL;
    int ordinal = -1;
    CHECK(CUDA_SUCCESS == cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, plain) &&
              NULL != ctx,
          "cuMemAlloc memory names no context");
    CHECK(CUDA_SUCCESS == cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, vmm) &&
              NULL == ctx,
          "VMM memory names a context");
    CHECK(CUDA_SUCCESS ==
                  cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, vmm) &&
              0 == ordinal,
          "VMM memory's device ordinal");
    CUdeviceptr pool = 0;
    ctx = (CUcontext)1;
    CHECK(CUDA_SUCCESS == cuMemAllocAsync(&pool, 4096, NULL) &&
              CUDA_SUCCESS == cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, pool) &&
              NULL == ctx && CUDA_SUCCESS == cuMemFreeAsync(pool, NULL),
          "pool memory names a context");
}

int main(void) {
    CHECK(CUDA_SUCCESS == cuInit(0), "cuInit");
    static char host[N], back[N];
    memset(host, 0x5a, N);
    CUdeviceptr d = 0;
    CHECK(CUDA_ERROR_INVALID_CONTEXT == cuMemAlloc(&d, N), "cuMemAlloc without a current context");
    CUcontext primary = NULL;
    unsigned int pflags = 0;
    int active = 1;
    CHECK(CUDA_SUCCESS == cuDevicePrimaryCtxGetState(0, &pflags, &active) && 0 == active,
          "the primary context active before anyone retained it");
    CHECK(CUDA_SUCCESS == cuDevicePrimaryCtxRetain(&primary, 0) &&
              CUDA_SUCCESS == cuCtxSetCurrent(primary),
          "the primary context made current");
    CHECK(CUDA_SUCCESS == cuDevicePrimaryCtxGetState(0, &pflags, &active) && 1 == active,
          "the primary context inactive once retained");
    push_pop(primary);
    CHECK(CUDA_SUCCESS == cuMemAlloc(&d, N), "cuMemAlloc");
    CHECK(CUDA_SUCCESS == cuMemcpyHtoD(d, host, N) && CUDA_SUCCESS == cuMemcpyDtoH(back, d, N) &&
              0 == memcmp(host, back, N),
          "a copy to the device and back");
    CHECK(CUDA_SUCCESS == cuCtxSetCurrent(NULL) &&
              CUDA_ERROR_INVALID_CONTEXT == cuMemcpyDtoH(back, d, N) &&
              CUDA_SUCCESS == cuCtxSetCurrent(primary),
          "a copy without a current context was not refused");
    const int st = in_child(touch, (void *)d);
    CHECK(WIFSIGNALED(st) && SIGSEGV == WTERMSIG(st),
          "the CPU's load of device memory did not fault");

    CUipcMemHandle h;
    CUdeviceptr own = 0;
    CHECK(CUDA_SUCCESS == cuIpcGetMemHandle(&h, d), "cuIpcGetMemHandle of cudaMalloc memory");
    CHECK(CUDA_SUCCESS != cuIpcOpenMemHandle(&own, h, 0), "a process opened its own IPC handle");
    CHECK(0 == in_child(open_handle, &h), "another process could not open the handle and read");

    /* Two VMM pieces side by side. */
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t g = 0;
    CHECK(CUDA_SUCCESS ==
              cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          "granularity");
    CUmemGenericAllocationHandle p0 = 0, p1 = 0;
    CUdeviceptr va = 0;
    CHECK(CUDA_SUCCESS == cuMemCreate(&p0, g, &prop, 0) &&
              CUDA_SUCCESS == cuMemCreate(&p1, g, &prop, 0) &&
              CUDA_SUCCESS == cuMemAddressReserve(&va, 2 * g, 0, 0, 0) &&
              CUDA_SUCCESS == cuMemMap(va, g, 0, p0, 0) &&
              CUDA_SUCCESS == cuMemMap(va + g, g, 0, p1, 0),
          "two VMM pieces mapped side by side");
    memory_contexts(d, va + g);
    CUdeviceptr base = 0;
    size_t size = 0;
    unsigned long long id0 = 0, id1 = 0;
    unsigned int legacy = 1, on = 1;
    CHECK(CUDA_SUCCESS == cuMemGetAddressRange(&base, &size, va + g + 5) && base == va + g &&
              size == g,
          "the range of a VMM pointer is its piece");
    CHECK(CUDA_SUCCESS == cuPointerGetAttribute(&id0, CU_POINTER_ATTRIBUTE_BUFFER_ID, va) &&
              CUDA_SUCCESS == cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, va + g) &&
              id0 && id1 && id0 != id1,
          "each VMM piece has its own buffer id");
    CHECK(CUDA_SUCCESS == cuPointerGetAttribute(
                              &legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, va) &&
              0 == legacy && CUDA_SUCCESS != cuIpcGetMemHandle(&h, va),
          "VMM memory has no legacy IPC handle");
    CHECK(CUDA_SUCCESS != cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, va),
          "SYNC_MEMOPS was set on VMM memory");
    static char across[64];
    memset(host, 0x33, sizeof(across));
    CHECK(CUDA_SUCCESS == cuMemcpyHtoD(va + g - 32, host, sizeof(across)) &&
              CUDA_SUCCESS == cuMemcpyDtoH(across, va + g - 32, sizeof(across)) &&
              0 == memcmp(across, host, sizeof(across)),
          "a copy across two VMM pieces side by side");
    CHECK(CUDA_SUCCESS != cuMemcpyDtoH(across, va + 2 * g - 32, sizeof(across)),
          "a copy past the last mapping was not refused");
    const char byte = 0x17;
    int fd = -1;
    CHECK(CUDA_SUCCESS == cuMemcpyHtoD(va + g + 7, &byte, 1) &&
              CUDA_SUCCESS == cuMemExportToShareableHandle(
                                  &fd, p1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) &&
              fd >= 0,
          "a VMM piece exported as a file descriptor");
    CHECK(0 == in_child(import_fd, &fd), "another process could not import the piece and read it");

    /* A host pointer: no error, memory type 0. */
    unsigned int type = 7;
    CUcontext ctx = (CUcontext)1;
    CUpointer_attribute as[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT};
    void *data[] = {&type, &ctx};
    CHECK(CUDA_SUCCESS == cuPointerGetAttributes(2, as, data, (CUdeviceptr)host) && 0 == type &&
              NULL == ctx,
          "a host pointer's attributes");

    CHECK(CUDA_SUCCESS == cuMemUnmap(va, 2 * g) && CUDA_SUCCESS == cuMemRelease(p0) &&
              CUDA_SUCCESS == cuMemRelease(p1) && CUDA_SUCCESS == cuMemAddressFree(va, 2 * g) &&
              CUDA_SUCCESS == cuMemFree(d),
          "freeing");
    /* Copies and pinning host memory need a current context; pinning once per range. */
    CHECK(CUDA_SUCCESS == cuCtxSetCurrent(NULL), "no context current");
    CHECK(CUDA_SUCCESS != cuMemHostRegister(host, N, 0), "host memory pinned without a context");
    CHECK(
        CUDA_SUCCESS == cuCtxSetCurrent(primary) && CUDA_SUCCESS == cuMemHostRegister(host, N, 0) &&
            CUDA_SUCCESS != cuMemHostRegister(host, N, 0) &&
            CUDA_SUCCESS == cuMemHostUnregister(host) && CUDA_SUCCESS != cuMemHostUnregister(host),
        "pinning host memory once, with a context");
    printf("ok mock_check\n");
    return 0;
}
