/* The mock driver's virtual memory management: physical allocations (a
 * memfd each), address reservations, mappings, export and import as file
 * descriptors. */
#define _GNU_SOURCE
#include "mock_cuda.h"

#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t mock_new_id(void);
void mock_add_range(const struct mock_range *proto);
int mock_take_range(uintptr_t p, struct mock_range *out);
int mock_map_both(int fd, size_t len, off_t off, void *at, uintptr_t *dev, char **shadow);

/* The granularity H100s answer for device memory. */
#define MOCK_GRANULARITY (2u << 20)

struct mock_phys {
    int fd;
    size_t len;
    int refs; /* the handle's, and one per mapping */
    int exportable;
    uint64_t id;
};

static pthread_mutex_t g_phys_lock = PTHREAD_MUTEX_INITIALIZER;

static struct mock_phys *phys_of(CUmemGenericAllocationHandle h) {
    return (struct mock_phys *)(uintptr_t)h;
}

static void phys_ref(struct mock_phys *ph, int by) {
    pthread_mutex_lock(&g_phys_lock);
    ph->refs += by;
    const int left = ph->refs;
    pthread_mutex_unlock(&g_phys_lock);
    if (0 == left) {
        close(ph->fd);
        free(ph);
    }
}

static CUmemGenericAllocationHandle new_phys(int fd, size_t len, int exportable) {
    struct mock_phys *ph = calloc(1, sizeof(*ph));
    ph->fd = fd;
    ph->len = len;
    ph->refs = 1;
    ph->exportable = exportable;
    ph->id = mock_new_id();
    return (CUmemGenericAllocationHandle)(uintptr_t)ph;
}

int mock_vmm_fd(uintptr_t p) {
    struct mock_range r;
    return mock_find(p, &r) && r.phys ? ((struct mock_phys *)r.phys)->fd : -1;
}

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option) {
    (void)prop, (void)option;
    *g = MOCK_GRANULARITY;
    return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags) {
    (void)flags;
    if (!h || !prop || 0 == size || size % MOCK_GRANULARITY) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const int fd = memfd_create("mock-cuda-vmm", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *h = new_phys(fd, size,
                  0 != (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
    if (!h) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    phys_ref(phys_of(h), -1);
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                             unsigned long long flags) {
    (void)addr, (void)flags;
    if (!ptr || 0 == size) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (align < MOCK_GRANULARITY) {
        align = MOCK_GRANULARITY;
    }
    char *m =
        mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (MAP_FAILED == m) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const uintptr_t start = ((uintptr_t)m + align - 1) / align * align;
    if (start > (uintptr_t)m) {
        munmap(m, start - (uintptr_t)m);
    }
    const uintptr_t end = (uintptr_t)m + size + align;
    if (end > start + size) {
        munmap((void *)(start + size), end - (start + size));
    }
    *ptr = start;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    return 0 == munmap((void *)ptr, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                  unsigned long long flags) {
    (void)flags;
    struct mock_phys *ph = phys_of(h);
    struct mock_range r = {0};
    if (!ph || offset + size > ph->len || ptr % MOCK_GRANULARITY || mock_find(ptr, &r)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (mock_map_both(ph->fd, size, (off_t)offset, (void *)ptr, &r.base, &r.shadow) != 0) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r.len = size;
    r.fd = -1;
    r.kind = MOCK_VMM;
    r.buffer_id = mock_new_id();
    r.block_id = ph->id;
    r.exportable = ph->exportable;
    r.phys = ph;
    phys_ref(ph, 1);
    mock_add_range(&r);
    return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    struct mock_range r;
    uintptr_t p = ptr;
    while (p < ptr + size) {
        if (!mock_find(p, &r) || r.base != p || !mock_take_range(p, &r)) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        munmap(r.shadow, r.len);
        /* (the range stays reserved) */
        mmap((void *)r.base, r.len, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        phys_ref(r.phys, -1);
        p += r.len;
    }
    return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    (void)size, (void)desc, (void)count;
    struct mock_range r;
    return mock_find(ptr, &r) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *loc, CUdeviceptr ptr) {
    (void)loc;
    struct mock_range r;
    if (!mock_find(ptr, &r)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h,
                                      CUmemAllocationHandleType type, unsigned long long flags) {
    (void)flags;
    struct mock_phys *ph = phys_of(h);
    if (!ph || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !ph->exportable) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const int fd = dup(ph->fd);
    if (fd < 0) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *(int *)out = fd;
    return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os,
                                        CUmemAllocationHandleType type) {
    struct stat st;
    const int fd = (int)(uintptr_t)os;
    if (!h || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fstat(fd, &st) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const int own = dup(fd);
    if (own < 0) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *h = new_phys(own, (size_t)st.st_size, 1);
    return CUDA_SUCCESS;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr) {
    struct mock_range r;
    if (!h || !mock_find((uintptr_t)addr, &r) || !r.phys) {
        return CUDA_ERROR_INVALID_VALUE; /* (not VMM memory) */
    }
    phys_ref(r.phys, 1);
    *h = (CUmemGenericAllocationHandle)(uintptr_t)r.phys;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle h) {
    struct mock_phys *ph = phys_of(h);
    if (!prop || !ph) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    memset(prop, 0, sizeof(*prop));
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes =
        ph->exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = 0;
    return CUDA_SUCCESS;
}
