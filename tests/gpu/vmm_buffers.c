/*
 * Device buffers of every kind CUDA hands out, sent and received with MPI
 * between 2 processes, every byte checked (the GPU check, issue 31):
 *   plain     cuMemAlloc
 *   vmm       cuMemCreate + cuMemMap (PyTorch's expandable segments, NCCL):
 *             one physical allocation
 *   vmm-span  a buffer across two physical allocations mapped side by side
 *             (each message half in each)
 *   pool      cuMemAllocAsync (stream-ordered pool memory)
 *   vmm-pieces  a buffer across 10 physical allocations of the device's
 *             smallest granularity side by side (a large tensor in
 *             expandable segments: more pieces than an IPC name lists by
 *             id); its messages span all ten
 *   vmm-remapped  the first physical allocation unmapped, released, and a
 *             new one mapped at the same address (what PyTorch's
 *             expandable segments do as they shrink and grow): a
 *             registration of the old pages must not be used for the new
 * VMM and pool memory refuse CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: the
 * components tell them apart (common_efa_hmem_vmm) where Open MPI's
 * buffer-id call fails.  Each message goes both ways at each size; the
 * sender fills its buffer from the host with cuMemcpyHtoD and a context
 * synchronization right before MPI_Send, the receiver copies its buffer
 * back and compares.
 *
 *   mpirun -np 2 ... vmm_buffers [-s MAX_BYTES] [-i ITERATIONS] [-k KIND]
 * (-k: that kind only, so that a run's counts are its.)
 * Prints "ok vmm_buffers ..." from rank 0; a wrong byte aborts the job
 * with its kind, size and offset.  Built by tests/gpu/prepare-carry.sh
 * (the kit's mpicc, CUDA's headers, the driver's stub library).
 */
#include <cuda.h>
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank;

#define CU(call)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (CUDA_SUCCESS != rc_) {                                                                 \
            const char *s_ = NULL;                                                                 \
            cuGetErrorName(rc_, &s_);                                                              \
            fprintf(stderr, "FAIL vmm_buffers rank %d: %s: %s\n", rank, #call, s_ ? s_ : "?");     \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                          \
        }                                                                                          \
    } while (0)

/* The byte at offset i of the message of 'size' bytes from 'from', round
 * 'iter' of kind 'kind': differs between kinds, sizes, senders and rounds. */
static uint8_t pattern(int kind, size_t size, int from, int iter, size_t i) {
    return (uint8_t)(i * 131u + size * 7u + (unsigned)kind * 29u + (unsigned)from * 53u +
                     (unsigned)iter * 17u + 1u);
}

/* The properties of every VMM allocation here: pinned device memory,
 * GPUDirect RDMA capable where the device allows, and exportable as a
 * file descriptor where the device allows (as PyTorch and NCCL ask: what
 * other processes of the node map it by). */
static CUmemAllocationProp vmm_prop(CUdevice dev) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (int)dev;
    int rdma = 0;
    (void)cuDeviceGetAttribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                               dev);
    prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
    int posix_fd = 0;
    (void)cuDeviceGetAttribute(
        &posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev);
    if (posix_fd) {
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    }
    return prop;
}

/* A new physical allocation of 'len' bytes mapped at va, readable and
 * writable by dev. */
static void vmm_map(CUdevice dev, CUdeviceptr va, size_t len) {
    CUmemAllocationProp prop = vmm_prop(dev);
    CUmemGenericAllocationHandle h;
    CU(cuMemCreate(&h, len, &prop, 0));
    CU(cuMemMap(va, len, 0, h, 0));
    CU(cuMemRelease(h)); /* (the mapping holds it) */
    CUmemAccessDesc access;
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, len, &access, 1));
}

int main(int argc, char **argv) {
    size_t max = 4 << 20;
    int iters = 2;
    const char *only = NULL;
    for (int c; - 1 != (c = getopt(argc, argv, "s:i:k:"));) {
        if ('s' == c) {
            max = strtoull(optarg, NULL, 0);
        } else if ('i' == c) {
            iters = atoi(optarg);
        } else if ('k' == c) {
            only = optarg;
        } else {
            fprintf(stderr, "usage: vmm_buffers [-s MAX_BYTES] [-i ITERATIONS] [-k KIND]\n");
            return 2;
        }
    }
    /* The device before MPI_Init, as CUDA-aware programs do. */
    CUdevice dev;
    CUcontext ctx;
    if (CUDA_SUCCESS != cuInit(0) || CUDA_SUCCESS != cuDeviceGet(&dev, 0) ||
        CUDA_SUCCESS != cuDevicePrimaryCtxRetain(&ctx, dev) ||
        CUDA_SUCCESS != cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "FAIL vmm_buffers: no CUDA device\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (2 != size) {
        if (0 == rank) {
            fprintf(stderr, "FAIL vmm_buffers: needs 2 processes\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t gran = 0;
    CUmemAllocationProp gprop = vmm_prop(dev);
    CU(cuMemGetAllocationGranularity(&gran, &gprop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    const size_t chunk = (max + gran - 1) / gran * gran;

    enum { PLAIN, VMM, VMM_SPAN, POOL, VMM_PIECES, VMM_REMAPPED, KINDS };
    const char *names[KINDS] = {"plain", "vmm", "vmm-span", "pool", "vmm-pieces", "vmm-remapped"};
    enum { PIECES = 10 };
    CUdeviceptr vmm = 0, plain = 0, pool = 0, pieces = 0;
    CUstream stream;
    CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CU(cuMemAlloc(&plain, max));
    /* Two physical allocations side by side. */
    CU(cuMemAddressReserve(&vmm, 2 * chunk, 0, 0, 0));
    vmm_map(dev, vmm, chunk);
    vmm_map(dev, vmm + chunk, chunk);
    CU(cuMemAllocAsync(&pool, max, stream));
    CU(cuStreamSynchronize(stream));
    /* Ten of the smallest side by side. */
    CU(cuMemAddressReserve(&pieces, PIECES * gran, 0, 0, 0));
    for (int i = 0; i < PIECES; ++i) {
        vmm_map(dev, pieces + i * gran, gran);
    }
    /* (the pieces' messages: from the first's second byte to the last's
     * last but one, and half of that, across the middle ones) */
    const size_t pieces_len = PIECES * gran - 2;
    const size_t host_len = max > pieces_len ? max : pieces_len;

    uint8_t *host = malloc(host_len), *back = malloc(host_len);
    if (NULL == host || NULL == back) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int messages = 0, known = NULL == only;
    for (int kind = 0; kind < KINDS; ++kind) {
        known = known || 0 == strcmp(only, names[kind]);
    }
    if (!known) {
        if (0 == rank) {
            fprintf(stderr, "FAIL vmm_buffers: no kind %s\n", only);
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int kind = 0; kind < KINDS; ++kind) {
        if (NULL != only && 0 != strcmp(only, names[kind])) {
            continue;
        }
        if (VMM_REMAPPED == kind) {
            /* (the first allocation's pages go; new ones at its address) */
            CU(cuCtxSynchronize());
            CU(cuMemUnmap(vmm, chunk));
            vmm_map(dev, vmm, chunk);
        }
        const size_t first = VMM_PIECES == kind ? pieces_len / 2 : 1;
        const size_t last = VMM_PIECES == kind ? pieces_len : max;
        for (size_t n = first; n <= last; n = VMM_PIECES == kind ? 2 * n : n < 64 ? 64 : n * 4) {
            const CUdeviceptr buf = PLAIN == kind        ? plain
                                    : POOL == kind       ? pool
                                    : VMM_PIECES == kind ? pieces + (PIECES * gran - n) / 2
                                    : VMM_SPAN == kind
                                        ? vmm + chunk - n / 2 /* half in each allocation */
                                        : vmm;
            for (int it = 0; it < iters; ++it) {
                for (int from = 0; from < 2; ++from) {
                    const int peer = 1 - rank;
                    if (rank == from) {
                        for (size_t i = 0; i < n; ++i) {
                            host[i] = pattern(kind, n, from, it, i);
                        }
                        CU(cuMemcpyHtoD(buf, host, n));
                        /* (VMM and pool memory's synchronous copies may
                         * return before they land: finished first, as
                         * common_efa_hmem_vmm asks of a program) */
                        CU(cuCtxSynchronize());
                        MPI_Send((void *)(uintptr_t)buf, (int)n, MPI_BYTE, peer, kind,
                                 MPI_COMM_WORLD);
                    } else {
                        CU(cuMemsetD8(buf, 0, n));
                        /* (a memset into device memory may return before
                         * it is done: finished before the bytes land) */
                        CU(cuCtxSynchronize());
                        MPI_Status st;
                        MPI_Recv((void *)(uintptr_t)buf, (int)n, MPI_BYTE, peer, kind,
                                 MPI_COMM_WORLD, &st);
                        int got = 0;
                        MPI_Get_count(&st, MPI_BYTE, &got);
                        CU(cuMemcpyDtoH(back, buf, n));
                        for (size_t i = 0; i < n; ++i) {
                            if ((size_t)got != n || back[i] != pattern(kind, n, from, it, i)) {
                                fprintf(stderr,
                                        "FAIL vmm_buffers %s: %zu bytes from rank %d, round %d: "
                                        "%d bytes received, byte %zu is %u, not %u\n",
                                        names[kind], n, from, it, got, i, back[i],
                                        pattern(kind, n, from, it, i));
                                MPI_Abort(MPI_COMM_WORLD, 1);
                            }
                        }
                    }
                    ++messages;
                }
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == rank) {
        printf("ok vmm_buffers %d messages each way of %s memory, up to %zu bytes\n", messages / 2,
               NULL != only ? only : "plain, vmm, vmm-span, pool, vmm-pieces and vmm-remapped",
               max > pieces_len ? max : pieces_len);
    }
    free(host);
    free(back);
    /* Freed after MPI_Finalize: a peer may hold its import of them open
     * until then, and CUDA leaves freeing an exported allocation before
     * its importer closed it undefined. */
    MPI_Finalize();
    const CUresult freed[] = {cuMemFreeAsync(pool, stream),
                              cuStreamSynchronize(stream),
                              cuMemFree(plain),
                              cuMemUnmap(vmm, 2 * chunk),
                              cuMemAddressFree(vmm, 2 * chunk),
                              cuMemUnmap(pieces, PIECES * gran),
                              cuMemAddressFree(pieces, PIECES * gran)};
    for (size_t i = 0; i < sizeof(freed) / sizeof(freed[0]); ++i) {
        if (CUDA_SUCCESS != freed[i]) {
            fprintf(stderr, "FAIL vmm_buffers rank %d: freeing step %zu: error %d\n", rank, i,
                    (int)freed[i]);
            return 2;
        }
    }
    return 0;
}
