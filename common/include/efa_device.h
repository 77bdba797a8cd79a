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
 * A backend may also share its memory with other processes of the node
 * (IPC): a handle for the allocation that holds a buffer, which a peer
 * imports to reach those bytes with the device's copy (GPU to GPU, never
 * through the host).  The matching engine uses it for large on-node
 * messages from device memory (engine.hpp); where a backend has none, or
 * a peer's import fails, the bytes go through the host.
 *
 * A backend may describe its memory for registration (hmem): where the
 * provider granted FI_HMEM, the core registers device allocations with
 * their interface and device (efa_core_mr_acquire_device) and the
 * provider moves the bytes itself.
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
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a process hands a peer of its node so that the peer can reach one
 * of its device buffers (carried in a frame: a fixed size, no pointers
 * the peer follows). */
#define EFA_DEVICE_IPC_HANDLE_SIZE 64
typedef struct efa_device_ipc {
    uint8_t handle[EFA_DEVICE_IPC_HANDLE_SIZE]; /* the backend's, of one allocation */
    uint64_t alloc_len;                         /* that allocation's length */
    uint64_t offset;                            /* of the buffer in it */
    /* What the exporter holds for this one message until the message is
     * done (ipc_release), not part of the allocation's name: CUDA VMM
     * memory's exported descriptor, which the importer duplicates
     * (efa_fd_from_process); 0: nothing held. */
    uint64_t held;
} efa_device_ipc_t;

/* What a provider with FI_HMEM needs to register a device buffer
 * (fi_mr_regattr): the allocation that holds it, its interface and
 * device, and an id that changes when the allocation is freed and its
 * address handed out again (a registration of the old one is stale). */
typedef struct efa_device_hmem {
    int iface;          /* enum fi_hmem_iface */
    uint64_t device;    /* the interface's device number (CUDA: its ordinal) */
    uint64_t buffer_id; /* of the allocation; 0 where the backend has none */
    uintptr_t base;     /* the allocation */
    size_t len;
    /* The device cannot be told to finish a synchronous copy into it before
     * the copy returns (CUDA: VMM and stream-ordered pool memory refuse
     * CU_POINTER_ATTRIBUTE_SYNC_MEMOPS), so a NIC reading it right after
     * such a copy could read old bytes, and some providers refuse to post
     * it (the core's rule: efa_core_params_t's hmem_vmm). */
    bool no_sync_memops;
} efa_device_hmem_t;

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
    /* IPC (the first three, or none: NULL).  The allocation holding [buf,
     * buf + len): its handle, length and buf's offset in it. */
    int (*ipc_export)(const void *buf, size_t len, efa_device_ipc_t *out);
    /* Map the allocation another process (pid) exported: *base is where
     * this process reaches it with copy, until ipc_close(*base).  near:
     * the memory it will be copied to or from (a thread without a current
     * device context takes near's).  -FI_EALREADY: the device maps an
     * allocation once per process and has it mapped already (CUDA: a kept
     * import of a freed allocation at the same address); other errors:
     * refused. */
    int (*ipc_import)(uint32_t pid, const efa_device_ipc_t *h, const void *near, void **base);
    void (*ipc_close)(void *base);
    /* The exporter lets go of what an export held for one message
     * (efa_device_ipc_t.held, not 0) once the peer is done with it: it
     * answered, or the message went another way or failed.  NULL: the
     * backend's exports never hold anything. */
    void (*ipc_release)(uint64_t held);
    /* The registration attributes of the allocation holding buf (NULL:
     * the backend cannot say; device buffers are then copied through the
     * host whatever the provider offers).  [buf, buf + len) may run past
     * that allocation's end: CUDA VMM memory maps several allocations side
     * by side, and the core then asks for the next one
     * (efa::describe_device_span). */
    int (*hmem)(const void *buf, size_t len, efa_device_hmem_t *out);
    /* A dmabuf file descriptor that exports the allocation 'alloc' (as hmem
     * described it), for registrations that name the memory by its pages
     * (FI_MR_DMABUF) rather than by a device address a kernel module must
     * translate: *fd (the caller closes it) and *offset, where the
     * allocation's first byte lies in it.  NULL: the backend has none. */
    int (*dmabuf)(const efa_device_hmem_t *alloc, int *fd, uint64_t *offset);
    /* Pin host memory for the device's copies (CUDA: cuMemHostRegister),
     * so that a copy between it and device memory goes by the device's DMA
     * at once instead of through the driver's own pinned buffers: the
     * staging pool's buffers, registered once and kept (efa_stage.h).  0
     * or a negative libfabric error (not pinned: the memory is used as it
     * is); NULL: the backend has none.  An unpin that fails (negative)
     * leaves the memory pinned: it must not be unmapped. */
    int (*host_register)(void *buf, size_t len);
    int (*host_unregister)(void *buf);
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
/* The backend shares memory with other processes (efa_device_ops_t's
 * ipc_*); the calls below return -FI_ENOSYS where it does not. */
bool efa_device_ipc_on(void);
int efa_device_ipc_export(const void *buf, size_t len, efa_device_ipc_t *out);
int efa_device_ipc_import(uint32_t pid, const efa_device_ipc_t *h, const void *near, void **base);
void efa_device_ipc_close(void *base);
void efa_device_ipc_release(uint64_t held);
/* For backends and the on-node inboxes: a duplicate of descriptor fd of
 * process pid (pidfd_getfd, Linux 5.6; the permission single copy needs),
 * or a negative libfabric error: -FI_ENOENT (no such process or
 * descriptor), -FI_ENOSYS (the kernel lacks the calls), -FI_EMFILE (out of
 * descriptors), -FI_ENOMEM, else -FI_EACCES (not permitted). */
int efa_fd_from_process(uint32_t pid, int fd);
/* The backend describes its memory for registrations (efa_device_ops_t's
 * hmem); efa_device_hmem returns -FI_ENOSYS where it does not. */
bool efa_device_hmem_on(void);
int efa_device_hmem(const void *buf, size_t len, efa_device_hmem_t *out);
/* The backend exports its allocations as dmabufs (efa_device_ops_t's
 * dmabuf); efa_device_dmabuf returns -FI_ENOSYS where it does not. */
bool efa_device_dmabuf_on(void);
int efa_device_dmabuf(const efa_device_hmem_t *alloc, int *fd, uint64_t *offset);
/* Host memory pinned for the device's copies (efa_device_ops_t's
 * host_register): -FI_ENOSYS without a backend that pins. */
int efa_device_host_register(void *buf, size_t len);
int efa_device_host_unregister(void *buf);

/* The fake device (tests).  Its memory is mapped twice: the address it
 * hands out with no access at all, and a private view that only its copy
 * uses.  Freed memory is no longer the device's. */
const efa_device_ops_t *efa_fake_device_ops(void);
void *efa_fake_device_alloc(size_t len);
/* One allocation at 'at' (page-aligned, in a range the test reserved): the
 * device handing out addresses that freed allocations had. */
void *efa_fake_device_alloc_at(void *at, size_t len);
void efa_fake_device_free(void *buf);
/* Allocations of this process live now, and other processes' imported
 * (tests: nothing left behind). */
size_t efa_fake_device_live(void);
size_t efa_fake_device_imported(void);
/* Imports fail from now on (true) or work again (tests of the fallback
 * where a peer's import is refused).  Imports so far. */
void efa_fake_device_refuse_ipc(bool refuse);
uint64_t efa_fake_device_imports(void);
/* An import is refused while another is open (true), as CUDA refuses to
 * map an allocation where a stale import of a freed one at the same
 * address is still mapped (CUDA_ERROR_ALREADY_MAPPED). */
void efa_fake_device_one_import(bool one);
/* Descriptors the fake's exports of memory described as VMM memory hold
 * now (each export of such memory holds one until ipc_release, as CUDA
 * VMM's do; tests: none left once the messages are done). */
size_t efa_fake_device_held(void);
/* Imports asked for, refused ones included. */
uint64_t efa_fake_device_import_tries(void);
/* Allocations from now on are mapped readable and writable at the address
 * handed out too, and described as FI_HMEM_SYSTEM memory (hmem), so that
 * a provider with FI_HMEM can carry them (tests of the path where the
 * provider moves device buffers; the CPU is no longer kept out).  Such
 * an allocation exports its memfd as its dmabuf. */
void efa_fake_device_visible(bool visible);
/* The fake offers dmabufs (true, the default) or has none (false: tests
 * of the plain registration path). */
void efa_fake_device_dmabuf(bool offer);
/* Visible allocations from now on are described as memory without
 * synchronous memory operations (efa_device_hmem_t's no_sync_memops), as
 * CUDA VMM allocations are (tests of the rule for them). */
void efa_fake_device_no_sync_memops(bool none);
/* Allocations of more than piece bytes from now on are several
 * allocations of piece bytes (rounded up to pages) mapped side by side,
 * each with its own id and memfd, as CUDA VMM memory grown a piece at a
 * time is (PyTorch's expandable segments); freed together from the
 * first's address.  0: one allocation each (the default). */
void efa_fake_device_pieces(size_t piece);
/* The piece at 'at' (the start of one piece of such an allocation) gets
 * new memory with a new id at the same address, as a VMM piece unmapped
 * and mapped again does; the memory hooks see nothing (no munmap).
 * 0, or -1 where no piece starts there. */
int efa_fake_device_remap_piece(void *at);
/* Host memory the fake holds pinned now, the pins made since the process
 * started, and unpins of memory it did not hold pinned (a bug). */
size_t efa_fake_device_pinned(void);
uint64_t efa_fake_device_pins(void);
uint64_t efa_fake_device_bad_unpins(void);

#ifdef __cplusplus
}
#endif

#endif
