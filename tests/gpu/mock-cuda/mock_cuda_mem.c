/* The mock driver's memory: the table of device ranges, plain and pool
 * allocations, copies, pointer attributes, legacy IPC and dmabuf. */
#define _GNU_SOURCE
#include "mock_cuda.h"

#include <cuda.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mock_range *g_ranges;
static uint64_t g_next_id = 1;
static int g_ctx_anchor; /* the one context's address */

uint64_t mock_new_id(void) {
    return __atomic_fetch_add(&g_next_id, 1, __ATOMIC_RELAXED);
}

/* Under g_lock. */
static struct mock_range *find_locked(uintptr_t p) {
    for (struct mock_range *r = g_ranges; r; r = r->next) {
        if (p >= r->base && p < r->base + r->len) {
            return r;
        }
    }
    return NULL;
}

int mock_find(uintptr_t p, struct mock_range *out) {
    pthread_mutex_lock(&g_lock);
    struct mock_range *r = find_locked(p);
    if (r) {
        *out = *r;
    }
    pthread_mutex_unlock(&g_lock);
    return r != NULL;
}

void mock_add_range(const struct mock_range *proto) {
    struct mock_range *r = malloc(sizeof(*r));
    *r = *proto;
    pthread_mutex_lock(&g_lock);
    r->next = g_ranges;
    g_ranges = r;
    pthread_mutex_unlock(&g_lock);
}

/* Takes the range starting at p out of the table (0: none). */
int mock_take_range(uintptr_t p, struct mock_range *out) {
    pthread_mutex_lock(&g_lock);
    for (struct mock_range **at = &g_ranges; *at; at = &(*at)->next) {
        if ((*at)->base == p) {
            struct mock_range *r = *at;
            *at = r->next;
            *out = *r;
            free(r);
            pthread_mutex_unlock(&g_lock);
            return 1;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return 0;
}

/* Maps fd's first len bytes twice: no access at the device address (at,
 * where given: MAP_FIXED), read-write at the shadow. */
int mock_map_both(int fd, size_t len, off_t off, void *at, uintptr_t *dev, char **shadow) {
    const int dev_prot = getenv("MOCK_CUDA_CPU_VISIBLE") ? PROT_READ | PROT_WRITE : PROT_NONE;
    void *d = mmap(at, len, dev_prot, MAP_SHARED | (at ? MAP_FIXED : 0), fd, off);
    if (MAP_FAILED == d) {
        return -1;
    }
    void *s = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
    if (MAP_FAILED == s) {
        if (!at) {
            munmap(d, len);
        }
        return -1;
    }
    *dev = (uintptr_t)d;
    *shadow = s;
    return 0;
}

uintptr_t mock_alloc(size_t len, enum mock_kind kind) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t mapped = (len + page - 1) / page * page;
    const int fd = memfd_create("mock-cuda", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)mapped) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return 0;
    }
    struct mock_range r = {0};
    if (mock_map_both(fd, mapped, 0, NULL, &r.base, &r.shadow) != 0) {
        close(fd);
        return 0;
    }
    r.len = len;
    r.fd = fd;
    r.kind = kind;
    r.buffer_id = mock_new_id();
    r.block_id = r.buffer_id;
    mock_add_range(&r);
    return r.base;
}

static size_t mapped_len(size_t len) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (len + page - 1) / page * page;
}

int mock_free(uintptr_t p) {
    struct mock_range r;
    if (!mock_take_range(p, &r) || (r.kind != MOCK_PLAIN && r.kind != MOCK_POOL)) {
        return -1;
    }
    munmap((void *)r.base, mapped_len(r.len));
    munmap(r.shadow, mapped_len(r.len));
    close(r.fd);
    return 0;
}

/* How many bytes from p lie in one place (a range's remainder; host
 * memory: all n), where the CPU reaches them, and whether they are the
 * device's. */
static size_t span_at(uintptr_t p, size_t n, char **cpu, int *device) {
    struct mock_range r;
    *device = mock_find(p, &r);
    if (!*device) {
        *cpu = (char *)p;
        return n;
    }
    *cpu = r.shadow + (p - r.base);
    return n < r.base + r.len - p ? n : r.base + r.len - p;
}

/* Copies go range by range: a buffer over VMM pieces mapped side by side
 * is one buffer to the driver; one that runs past its device ranges into
 * memory the driver does not know is refused (-1), as the driver does. */
int mock_copy(uintptr_t dst, uintptr_t src, size_t n) {
    int was_d = 0, was_s = 0;
    for (int first = 1; n > 0; first = 0) {
        char *d, *s;
        int dev_d, dev_s;
        size_t k = span_at(dst, n, &d, &dev_d);
        const size_t ks = span_at(src, n, &s, &dev_s);
        if (!first && ((was_d && !dev_d) || (was_s && !dev_s))) {
            return -1;
        }
        k = k < ks ? k : ks;
        memmove(d, s, k);
        dst += k, src += k, n -= k;
        was_d = dev_d, was_s = dev_s;
    }
    return 0;
}

int mock_set(uintptr_t dst, int value, size_t n) {
    int was = 0;
    for (int first = 1; n > 0; first = 0) {
        char *d;
        int dev;
        const size_t k = span_at(dst, n, &d, &dev);
        if (!first && was && !dev) {
            return -1;
        }
        memset(d, value, k);
        dst += k, n -= k;
        was = dev;
    }
    return 0;
}

CUcontext mock_ctx(void) {
    return (CUcontext)&g_ctx_anchor;
}

/* The driver's allocations, copies, sets and IPC opens work in the
 * calling thread's current context and fail without one (a progress or
 * completion thread that never made one current). Pointer queries do not
 * need one. */
#define NEED_CONTEXT()                                                                             \
    do {                                                                                           \
        if (!mock_ctx_current()) {                                                                 \
            return CUDA_ERROR_INVALID_CONTEXT;                                                     \
        }                                                                                          \
    } while (0)

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
    NEED_CONTEXT();
    if (!dptr || 0 == bytesize) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *dptr = mock_alloc(bytesize, MOCK_PLAIN);
    return *dptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFree(CUdeviceptr dptr) {
    return 0 == dptr || 0 == mock_free(dptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s) {
    (void)s;
    NEED_CONTEXT();
    if (!dptr || 0 == bytesize) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *dptr = mock_alloc(bytesize, MOCK_POOL);
    return *dptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
    (void)s;
    return cuMemFree(dptr);
}

CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool pool, CUmemLocation *loc) {
    (void)pool;
    (void)loc;
    *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return CUDA_SUCCESS;
}

/* Pinned host ranges, as the driver keeps them: one pin per start, and
 * a thread without a current context can neither pin nor unpin. */
static struct pinned {
    void *p;
    struct pinned *next;
} * g_pinned;

CUresult cuMemHostRegister(void *p, size_t n, unsigned int flags) {
    (void)flags;
    if (!mock_ctx_current()) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (!p || 0 == n) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&g_lock);
    for (struct pinned *q = g_pinned; q; q = q->next) {
        if (q->p == p) {
            pthread_mutex_unlock(&g_lock);
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    struct pinned *q = malloc(sizeof(*q));
    q->p = p;
    q->next = g_pinned;
    g_pinned = q;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void *p) {
    if (!mock_ctx_current()) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    pthread_mutex_lock(&g_lock);
    for (struct pinned **at = &g_pinned; *at; at = &(*at)->next) {
        if ((*at)->p == p) {
            struct pinned *q = *at;
            *at = q->next;
            free(q);
            pthread_mutex_unlock(&g_lock);
            return CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

static CUresult copy_or_fail(uintptr_t d, uintptr_t s, size_t n) {
    if (!mock_ctx_current()) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    return 0 == mock_copy(d, s, n) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
#define COPY_OR_FAIL(d, s, n) copy_or_fail((uintptr_t)(d), (uintptr_t)(s), (n))
CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) {
    return COPY_OR_FAIL(d, s, n);
}
CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
    (void)st;
    return COPY_OR_FAIL(d, s, n);
}
CUresult cuMemcpyHtoD(CUdeviceptr d, const void *s, size_t n) {
    return COPY_OR_FAIL(d, s, n);
}
CUresult cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n) {
    return COPY_OR_FAIL(d, s, n);
}
CUresult cuMemcpyDtoD(CUdeviceptr d, CUdeviceptr s, size_t n) {
    return COPY_OR_FAIL(d, s, n);
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
    (void)st;
    return COPY_OR_FAIL(d, s, n);
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr d, const void *s, size_t n, CUstream st) {
    (void)st;
    return COPY_OR_FAIL(d, s, n);
}
CUresult cuMemcpyDtoHAsync(void *d, CUdeviceptr s, size_t n, CUstream st) {
    (void)st;
    return COPY_OR_FAIL(d, s, n);
}
CUresult cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) {
    NEED_CONTEXT();
    return 0 == mock_set(d, v, n) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream st) {
    (void)st;
    return cuMemsetD8(d, v, n);
}

CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    struct mock_range r;
    if (!mock_find(p, &r)) {
        return CUDA_ERROR_NOT_FOUND;
    }
    if (base) {
        *base = r.base;
    }
    if (size) {
        *size = r.len;
    }
    return CUDA_SUCCESS;
}

/* One attribute of the range r holds (host memory: r NULL). */
static CUresult attribute(void *data, CUpointer_attribute a, const struct mock_range *r,
                          uintptr_t p) {
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        /* (VMM and pool memory belong to no context: NULL, as the driver
         * answers; callers take the device's primary context instead) */
        *(CUcontext *)data = r && MOCK_VMM != r->kind && MOCK_POOL != r->kind ? mock_ctx() : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = r ? CU_MEMORYTYPE_DEVICE : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned int *)data = 0;
        return CUDA_SUCCESS;
    default:
        break;
    }
    if (!r) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    switch (a) {
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = p;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(unsigned int *)data = (unsigned int)r->sync_memops;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = r->buffer_id;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(unsigned int *)data = MOCK_PLAIN == r->kind;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = r->base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = r->len;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(unsigned int *)data = 1;
        break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data = r->exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
        break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        *(unsigned int *)data = 1;
        break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(unsigned int *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
        break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(void **)data = MOCK_POOL == r->kind ? (void *)&g_ctx_anchor : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = r->len;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(void **)data = (void *)r->base;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        *(unsigned long long *)data = r->block_id;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr p) {
    struct mock_range r;
    if (!mock_find(p, &r)) {
        return CUDA_ERROR_INVALID_VALUE; /* (a pointer the driver never saw) */
    }
    return attribute(data, a, &r, p);
}

static size_t attribute_size(CUpointer_attribute a) {
    switch (a) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        return 4;
    default:
        return 8;
    }
}

/* Unlike the single call, an unknown pointer is no error: its
 * attributes read as zero (cuda.h). */
CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *as, void **data,
                                CUdeviceptr p) {
    struct mock_range r;
    const int known = mock_find(p, &r);
    for (unsigned int i = 0; i < n; ++i) {
        if (known) {
            CUresult rc = attribute(data[i], as[i], &r, p);
            if (rc != CUDA_SUCCESS) {
                return rc;
            }
        } else if (attribute(data[i], as[i], NULL, p) != CUDA_SUCCESS) {
            memset(data[i], 0, attribute_size(as[i]));
        }
    }
    return CUDA_SUCCESS;
}

CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute a, CUdeviceptr p) {
    pthread_mutex_lock(&g_lock);
    struct mock_range *r = find_locked(p);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (r && CU_POINTER_ATTRIBUTE_SYNC_MEMOPS == a) {
        if (MOCK_VMM == r->kind || MOCK_POOL == r->kind) {
            rc = CUDA_ERROR_NOT_SUPPORTED; /* (the driver's answer for such memory) */
        } else {
            r->sync_memops = *(const unsigned int *)value != 0;
            rc = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* The legacy IPC handle: the owner's pid and memfd, reached through
 * /proc by the importer. */
struct mock_ipc {
    uint32_t magic;
    int32_t pid;
    int32_t fd;
    uint32_t pad;
    uint64_t len;
    uint64_t buffer_id;
};
#define MOCK_IPC_MAGIC 0x6d6f636bu

CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
    struct mock_range r;
    if (!h || !mock_find(p, &r) || r.kind != MOCK_PLAIN) {
        return CUDA_ERROR_INVALID_VALUE; /* (VMM and pool memory have no legacy handle) */
    }
    struct mock_ipc m = {MOCK_IPC_MAGIC, getpid(), r.fd, 0, r.len, r.buffer_id};
    memset(h, 0, sizeof(*h));
    memcpy(h->reserved, &m, sizeof(m));
    return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags) {
    (void)flags;
    NEED_CONTEXT();
    struct mock_ipc m;
    memcpy(&m, h.reserved, sizeof(m));
    if (m.magic != MOCK_IPC_MAGIC) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (m.pid == getpid()) {
        return CUDA_ERROR_INVALID_CONTEXT; /* (a process cannot open its own) */
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", m.pid, m.fd);
    const int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    struct mock_range r = {0};
    if (mock_map_both(fd, mapped_len(m.len), 0, NULL, &r.base, &r.shadow) != 0) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r.len = m.len;
    r.fd = fd;
    r.kind = MOCK_IMPORTED;
    r.buffer_id = mock_new_id();
    r.block_id = r.buffer_id;
    mock_add_range(&r);
    *p = r.base;
    return CUDA_SUCCESS;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
    struct mock_range r;
    if (!mock_find(p, &r) || r.kind != MOCK_IMPORTED || !mock_take_range(p, &r)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    munmap((void *)r.base, mapped_len(r.len));
    munmap(r.shadow, mapped_len(r.len));
    close(r.fd);
    return CUDA_SUCCESS;
}

CUresult cuIpcGetEventHandle(CUipcEventHandle *h, CUevent e) {
    (void)e;
    memset(h, 0, sizeof(*h));
    return CUDA_SUCCESS;
}

CUresult cuIpcOpenEventHandle(CUevent *e, CUipcEventHandle h) {
    (void)h;
    return cuEventCreate(e, 0);
}

/* A dmabuf of a range inside one allocation: a descriptor of its memfd
 * (the mock's VMM pieces are files of their own: a range over several is
 * refused, as a driver without that support would). */
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p, size_t size,
                                       CUmemRangeHandleType type, unsigned long long flags) {
    (void)flags;
    struct mock_range r;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || p % page || size % page) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!mock_find(p, &r) || p + size > r.base + mapped_len(r.len)) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    int fd = r.fd >= 0 ? r.fd : -1;
    if (fd < 0) {
        extern int mock_vmm_fd(uintptr_t p);
        fd = mock_vmm_fd(p);
    }
    const int out = fd >= 0 ? dup(fd) : -1;
    if (out < 0) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    *(int *)handle = out;
    return CUDA_SUCCESS;
}
