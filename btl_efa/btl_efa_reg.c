/*
 * btl_efa's memory registrations: the self-contained handles handed out
 * for one-sided operations (common/efa_rma.h), the provider's memory
 * registration where the native path needs one, and the process's table of
 * its registrations (common's efa_emul_table), which the emulated target
 * checks every request against.
 */
#include "btl_efa_mode.h"
#include "efa_tsan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "opal/datatype/opal_convertor.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#if OPAL_MAJOR_VERSION < 5
#include <dlfcn.h>

/* Open MPI 4.1 gives this BTL no device backend, so nothing here could
 * reach device memory but with the CPU or the kernel.  4.1's osc/rdma
 * leaves MPI_Win_create over GPU memory to osc/pt2pt, but attaches GPU
 * memory to a dynamic window (MPI_Win_attach) through this BTL: refused
 * here, with a message, rather than crash its owner when a put, a get or
 * an atomic on it is executed there.  Which memory is a GPU's, 4.1 built
 * with CUDA says (opal_cuda_check_one_buf, false until its CUDA support is
 * on; managed memory, which the CPU reaches, is flagged unified and taken
 * as host memory, as the convertor takes it); looked up when first needed,
 * so that a build without it loads and checks nothing. */
typedef bool (*check_41_fn)(char *, opal_convertor_t *);

/* opal_cuda_check_one_buf of the libopen-pal this process runs (the one
 * holding opal_convertor_pack): a program that loads Open MPI without
 * RTLD_GLOBAL (a language's runtime) leaves it out of the global scope. */
static check_41_fn find_check_41(void) {
    Dl_info info;
    void *lib = 0 != dladdr((void *)&opal_convertor_pack, &info) && NULL != info.dli_fname
                    ? dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)
                    : NULL;
    check_41_fn f = (check_41_fn)(NULL != lib ? dlsym(lib, "opal_cuda_check_one_buf")
                                              : dlsym(RTLD_DEFAULT, "opal_cuda_check_one_buf"));
    if (NULL != lib) {
        dlclose(lib); /* (RTLD_NOLOAD: only the reference just taken) */
    }
    return f;
}

static bool device_refused_41(void *addr, size_t size) {
    static check_41_fn check;
    static bool looked = false;
    if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&check, find_check_41(), __ATOMIC_RELAXED);
        __atomic_store_n(&looked, true, __ATOMIC_RELEASE);
    }
    const check_41_fn f = __atomic_load_n(&check, __ATOMIC_RELAXED);
    opal_convertor_t conv; /* (only its flags are written: the unified-memory mark) */
    memset(&conv, 0, sizeof(conv));
    if (NULL == f || 0 == size || !f((char *)addr, &conv) ||
        0 != (conv.flags & CONVERTOR_CUDA_UNIFIED)) {
        return false;
    }
    static bool said = false;
    if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED)) {
        char what[64];
        snprintf(what, sizeof(what), "%zu bytes at %p", size, addr);
        mca_common_efa_show_help("help-btl-efa.txt", "device-memory-41", false,
                                 opal_process_info.nodename, what);
    }
    return true;
}
#define MCA_BTL_EFA_DEVICE_REFUSED(addr, size) device_refused_41(addr, size)
#else
#define MCA_BTL_EFA_DEVICE_REFUSED(addr, size) false
#endif

/* The libfabric access a registration needs for the BTL flags it was
 * asked with.  Every registration may be the local source of a write (and
 * of the two-sided sends the BTL never does from it); only asked-for rights
 * beyond that are added, so read-only memory (a constant send buffer) can
 * still be registered for RDMA read. */
static uint64_t fi_access_of(uint32_t flags) {
    uint64_t access = FI_WRITE | FI_SEND;
    if (flags & MCA_BTL_REG_FLAG_LOCAL_WRITE) {
        access |= FI_READ | FI_RECV;
    }
    if (flags & MCA_BTL_REG_FLAG_REMOTE_READ) {
        access |= FI_REMOTE_READ;
    }
    if (flags & MCA_BTL_REG_FLAG_REMOTE_WRITE) {
        access |= FI_REMOTE_WRITE;
    }
    if (flags & MCA_BTL_REG_FLAG_REMOTE_ATOMIC) {
        access |= FI_REMOTE_READ | FI_REMOTE_WRITE;
    }
    return access;
}

/* Device (GPU) memory offered for one-sided operations (a window, ob1's
 * RDMA): marked, so that no path touches it with the CPU or the kernel.
 * Where the provider granted FI_HMEM it is registered with its device and
 * puts and gets reach it by the provider's RDMA; otherwise it has no MR
 * and every put and get on it goes to this process as a request,
 * executed with the device's copy (the core's emulated target).  Atomics
 * on it are refused.  Said once per process. */
static void note_device_memory(const void *addr, size_t size, bool by_provider) {
    static bool said = false;
    if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED)) {
        /* the test harness looks for this line */
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: device memory registered (%zu bytes at %p, %s): its puts and "
                            "gets are %s, atomics on it are refused",
                            size, addr, efa_device_name(),
                            by_provider ? "the provider's RDMA (FI_HMEM)"
                                        : "executed by this process with the device's copy");
    }
}

struct mca_btl_base_registration_handle_t *
mca_btl_efa_register_mem(struct mca_btl_base_module_t *base,
                         struct mca_btl_base_endpoint_t *endpoint, void *addr, size_t size,
                         uint32_t flags) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    (void)endpoint;
    if (OPAL_UNLIKELY(MCA_BTL_EFA_DEVICE_REFUSED(addr, size))) {
        return NULL;
    }
    /* The single copy, the rings' copies and a provider asked for host
     * memory would all touch device memory with the CPU or the kernel. */
    const bool device = OPAL_UNLIKELY(efa_device_on) && efa_device_check(addr, size);
    mca_btl_efa_mode_ready(btl); /* whether peers will need a provider MR */
    efa_btl_reg_t *reg = calloc(1, sizeof(*reg));
    if (NULL == reg) {
        return NULL;
    }
    /* The emulated path needs no MR (the target copies), the native one
     * does: peers name it by key. */
    const bool native =
        (btl->mode.native_put || btl->mode.native_get || btl->mode.native_atomics) && size > 0;
    if (OPAL_UNLIKELY(device)) {
        reg->handle.rma.flags |= EFA_RMA_HANDLE_DEVICE;
        int err = 0;
        /* (not registered: as requests, executed with the device's copy;
         * atomics on it are refused whatever the mode) */
        reg->mr = (btl->mode.native_put || btl->mode.native_get) && size > 0 && btl->native.hmem
                      ? efa_core_mr_acquire_device(btl->core, addr, size, fi_access_of(flags), &err)
                      : NULL;
        note_device_memory(addr, size, NULL != reg->mr);
    } else if (native) {
        int err = 0;
        reg->mr = efa_core_mr_acquire(btl->core, addr, size, fi_access_of(flags), &err);
        if (NULL == reg->mr) {
            opal_output_verbose(10, mca_common_efa_output,
                                "btl:efa: cannot register %zu bytes at %p: %s", size, addr,
                                fi_strerror(-err));
            free(reg);
            return NULL;
        }
    }
    if (NULL != reg->mr) {
        reg->handle.rma.fi_key = efa_mr_key(reg->mr);
        reg->handle.rma.rails = (uint32_t)efa_mr_rails(reg->mr);
        for (int r = 1; r < efa_mr_rails(reg->mr); ++r) {
            reg->handle.rma.rail_key[r - 1] = efa_mr_rail_key(reg->mr, r);
        }
        reg->handle.rma.mr_base = (uint64_t)efa_mr_base(reg->mr);
        reg->handle.rma.flags |= EFA_RMA_HANDLE_HAS_MR;
    }
    reg->handle.rma.base = (uint64_t)(uintptr_t)addr;
    reg->handle.rma.len = size;
    reg->handle.rma.access = flags;
    /* 0 unless single copy is on; never for device memory */
    reg->handle.rma.owner_pid = device ? 0 : btl->cma.my_pid;
    OPAL_THREAD_LOCK(&btl->lock);
    reg->handle.rma.key = ++btl->reg.next_key;
    OPAL_THREAD_UNLOCK(&btl->lock);
    efa_rma_handle_seal(&reg->handle.rma);
    if (0 != efa_emul_table_add(btl->reg.table, &reg->handle.rma, reg)) {
        if (reg->mr) {
            efa_core_mr_release(btl->core, reg->mr);
        }
        free(reg);
        return NULL;
    }
    /* The handle goes to ob1 or osc, which may hand it to another thread
     * for the deregistration through its own atomics (efa_tsan.h). */
    EFA_TSAN_RELEASE(reg);
    return &reg->handle;
}

int mca_btl_efa_deregister_mem(struct mca_btl_base_module_t *base,
                               struct mca_btl_base_registration_handle_t *handle) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    efa_btl_reg_t *reg = (efa_btl_reg_t *)handle; /* the handle is the first member */
    EFA_TSAN_ACQUIRE(reg);
    efa_emul_table_remove(btl->reg.table, handle->rma.key); /* waits for a request on it */
    if (reg->mr) {
        efa_core_mr_release(btl->core, reg->mr);
    }
    free(reg);
    return OPAL_SUCCESS;
}

int mca_btl_efa_reg_setup(mca_btl_efa_module_t *btl) {
    btl->reg.table = efa_emul_table_create();
    /* Keys start at a random point so a stale key from an earlier run of a
     * component reload is unlikely to name a live registration. */
    btl->reg.next_key = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)btl;
    return NULL == btl->reg.table ? OPAL_ERR_OUT_OF_RESOURCE : OPAL_SUCCESS;
}

/* A registration the layers above left behind at finalize. */
static void release_leftover(void *arg, void *owner) {
    mca_btl_efa_module_t *btl = arg;
    efa_btl_reg_t *reg = owner;
    if (reg->mr) {
        efa_core_mr_release(btl->core, reg->mr);
    }
    free(reg);
}

void mca_btl_efa_reg_fini(mca_btl_efa_module_t *btl) {
    efa_emul_table_destroy(btl->reg.table, release_leftover, btl);
    btl->reg.table = NULL;
}
