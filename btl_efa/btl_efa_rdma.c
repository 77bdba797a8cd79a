/*
 * btl_efa's one-sided entry points (put, get, the atomics and flush, as
 * osc/rdma and pml ob1 call them through the module's function table):
 * each operation goes one of three ways, decided here.
 *
 *  - to another process of this node, a small put or get as a request in
 *    its ring that can be taken back (btl_efa_ring_rma.c), else by a
 *    single copy where the kernel allows it (btl_efa_cma.c);
 *  - the provider's RDMA or atomics where the job agreed on them
 *    (btl_efa_native.c, btl_efa_native_atomic.c);
 *  - otherwise as requests the target executes (the emulated protocol,
 *    btl_efa_emul.h), which is also how the process's own memory, a
 *    process of another job, an operation outside the handle it came
 *    with and device (GPU) memory on either side are served.
 *
 * The paths complete operations through the caller's completion callback
 * and never call back into this file.  Registrations: btl_efa_reg.c.
 */
#include "btl_efa_lost.h"
#include "btl_efa_emul.h"
#include "btl_efa_mode.h"
#include "btl_efa_rdma.h"
#include "btl_efa_ring.h"

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

/* ---- native, emulated or single copy, decided once per job ---- */

static void note_one_sided(void) {
    static bool announced = false;
    /* A plain load first: the exchange is a locked instruction, and this
     * runs for every operation. */
    if (!__atomic_load_n(&announced, __ATOMIC_RELAXED) &&
        !__atomic_exchange_n(&announced, true, __ATOMIC_RELAXED)) {
        /* the test harness looks for this line */
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: one-sided operations in use");
    }
}

/* Testing only (btl_efa_debug_corrupt_offset): shift the remote address of
 * puts and atomics, so that the target's check can be seen refusing them.
 * Called only while a test hook is on. */
static uint64_t corrupt(uint64_t remote_address) {
    return remote_address + (uint64_t)(int64_t)mca_btl_efa_component.test.corrupt_offset;
}

/* Said once at verbosity 10: how often it happens is of no interest, that
 * it happens explains the emulated requests of a native configuration. */
static void note_uncovered(int type, uint64_t remote_address, size_t size) {
    static bool said = false;
    if (!said) {
        said = true;
        opal_output_verbose(10, mca_common_efa_output,
                            "btl:efa: a %s of %zu bytes at 0x%llx lies outside the handle it came "
                            "with: the target checks it against its own registrations",
                            mca_btl_efa_emul_type_name(type), size,
                            (unsigned long long)remote_address);
    }
}

/* An atomic on a window in device memory, or with its result to go into
 * device memory: refused (no CPU atomic or store reaches device memory,
 * and a copy, an operation and a copy back would not be atomic).
 * osc/rdma then does it under its own lock of the target with a get and a
 * put, which this BTL carries; said once at verbosity 1. */
static int refuse_device_atomic(const efa_btl_rdma_args_t *a) {
    static bool said = false;
    if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED)) {
        /* the test harness looks for this line */
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: an atomic on device memory (0x%llx, %zu bytes) refused: "
                            "the layer above does it by get and put, or fails it",
                            (unsigned long long)a->remote_address, a->size);
    }
    return OPAL_ERR_NOT_SUPPORTED;
}

/* An atomic whose handle does not cover its range (a dynamic window's
 * neighbouring or torn handle, see rdma()), to a peer whose device memory
 * this process has met, may name device memory the handle does not show.
 * The target would refuse it only through the callback, whose status
 * osc/rdma does not look at for an atomic (a wrong fetched value, said
 * nowhere): refused here, so that osc/rdma does it by get and put, which
 * the target checks against its own table.  (Not for every peer where a
 * device backend is installed: osc/rdma's get and put are not atomic
 * against other processes' atomics on the same word, which the target
 * executes in order.) */
static int refuse_uncovered_atomic(const efa_btl_rdma_args_t *a) {
    static bool said = false;
    if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED)) {
        /* the test harness looks for this line */
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: an atomic at 0x%llx outside the handle it came with refused "
                            "(device memory may be there): the layer above does it by get and put",
                            (unsigned long long)a->remote_address);
    }
    return OPAL_ERR_NOT_SUPPORTED;
}

/* A native operation to a process of this node (no single copy there) is
 * served by its provider's progress where the provider runs it in
 * software: ring its doorbell, so that an idle target's paced poll looks
 * now.  rc passes through. */
static int native_woken(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, int rc) {
    if (OPAL_SUCCESS == rc) {
        mca_btl_efa_ring_wake(btl, ep);
    }
    return rc;
}

static int rdma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, efa_btl_rdma_args_t *a) {
    if (NULL == a->remote_handle) {
        return OPAL_ERR_BAD_PARAM;
    }
    mca_btl_efa_mode_ready(btl);
    note_one_sided();
    if (OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on) && EFA_BTL_MSG_PUT == a->type) {
        a->remote_address = corrupt(a->remote_address);
    }
    /* The handle may sit in memory its owner rewrites meanwhile (osc/rdma's
     * shared region table): checked and used as one copy, read once. */
    struct mca_btl_base_registration_handle_t snap = *a->remote_handle;
    a->remote_handle = &snap;
    /* A handle that does not cover the range, or a torn one, is not
     * necessarily a wrong operation: osc/rdma can hand out a neighbouring
     * region's handle, or a mixture of two, for attached memory of a
     * dynamic window (see btl_efa_emul.c).  The direct
     * paths trust the handle, so such an operation goes to the target,
     * which executes it if its own table covers the range and refuses it
     * otherwise. */
    const bool covered =
        efa_rma_handle_intact(&snap.rma) && efa_rma_in_range(&snap.rma, a->remote_address, a->size);
    if (!covered) {
        note_uncovered(a->type, a->remote_address, a->size);
    }
    /* Device memory on either side: the rings, the single copy and a
     * provider's host MR would touch it with the CPU or the kernel.  Where
     * the provider granted FI_HMEM, a device window registered with its
     * device (its handle has an MR) and a device buffer here (registered
     * by the native path) go by the provider's RDMA; otherwise a device
     * window is reached only by its owner's copy and a device buffer here
     * only by this process's, as requests the target executes.  (One
     * predicted branch where no device backend is installed.) */
    if (OPAL_UNLIKELY((snap.rma.flags & EFA_RMA_HANDLE_DEVICE) | efa_device_on)) {
        a->cb.local_device = efa_device_on && efa_device_check(a->cb.local_address, a->size);
        if ((snap.rma.flags & EFA_RMA_HANDLE_DEVICE) || a->cb.local_device) {
            if (snap.rma.flags & EFA_RMA_HANDLE_DEVICE) {
                __atomic_store_n(&ep->device_met, true, __ATOMIC_RELAXED);
            }
            const bool window_reached = !(snap.rma.flags & EFA_RMA_HANDLE_DEVICE) ||
                                        (snap.rma.flags & EFA_RMA_HANDLE_HAS_MR);
            if (btl->native.hmem && window_reached && covered && 0 != a->size &&
                (EFA_BTL_MSG_PUT == a->type ? btl->mode.native_put : btl->mode.native_get) &&
                !ep->is_self && !ep->foreign_mode) {
                const int rc = native_woken(btl, ep, mca_btl_efa_native_rdma(btl, ep, a));
                if (OPAL_ERR_NOT_AVAILABLE != rc) {
                    if (OPAL_SUCCESS == rc) {
                        (void)__atomic_fetch_add(&btl->native.device_native, 1, __ATOMIC_RELAXED);
                    }
                    return rc;
                }
            }
            (void)__atomic_fetch_add(&btl->native.device_requests, 1, __ATOMIC_RELAXED);
            return mca_btl_efa_emul_rdma(btl, ep, a);
        }
    }
    /* Another process of this node: a small one as a request in its ring
     * that can be taken back (answered faster than a system call), else
     * one copy by CMA where possible. */
    if (covered && btl->cma.allowed && !ep->is_self && 0 != a->size) {
        int rc = mca_btl_efa_ring_rma(btl, ep, a);
        if (OPAL_ERR_NOT_AVAILABLE != rc) {
            return rc;
        }
        rc = mca_btl_efa_cma_rdma(btl, ep, a);
        if (OPAL_ERR_NOT_AVAILABLE != rc) {
            return rc;
        }
    }
    /* Own memory: a checked copy is all either path would amount to.  A
     * process of another job may have no provider registration. */
    if (covered && (EFA_BTL_MSG_PUT == a->type ? btl->mode.native_put : btl->mode.native_get) &&
        !ep->is_self && !ep->foreign_mode) {
        return native_woken(btl, ep, mca_btl_efa_native_rdma(btl, ep, a));
    }
    return mca_btl_efa_emul_rdma(btl, ep, a);
}

/* Atomics: with native atomics even the process's own memory goes through
 * the provider, so every atomic on a location is executed by the same
 * agent whatever its origin. */
static int atomic(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, efa_btl_rdma_args_t *a) {
    if (NULL == a->remote_handle) {
        return OPAL_ERR_BAD_PARAM;
    }
    mca_btl_efa_mode_ready(btl);
    if (OPAL_UNLIKELY(ep->foreign_atomics)) {
        return OPAL_ERR_NOT_SUPPORTED; /* said at add_procs (btl_efa_mode.c) */
    }
    note_one_sided();
    if (OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on)) {
        a->remote_address = corrupt(a->remote_address);
    }
    a->type = EFA_BTL_MSG_ATOMIC;
    a->size = (a->aflags & MCA_BTL_ATOMIC_FLAG_32BIT) ? 4 : 8;
    /* (the target refuses them too, through the callback, where the
     * handle does not cover the range or names device memory: this
     * refuses at once, which is what makes osc/rdma take its get-and-put
     * path) */
    struct mca_btl_base_registration_handle_t snap;
    const uint32_t hflags = __atomic_load_n(&a->remote_handle->rma.flags, __ATOMIC_RELAXED);
    /* (a peer's device window met: checked here even in a process that
     * has no device of its own) */
    if (OPAL_UNLIKELY((hflags & EFA_RMA_HANDLE_DEVICE) | efa_device_on |
                      __atomic_load_n(&ep->device_met, __ATOMIC_RELAXED))) {
        if (hflags & EFA_RMA_HANDLE_DEVICE) {
            __atomic_store_n(&ep->device_met, true, __ATOMIC_RELAXED);
            return refuse_device_atomic(a);
        }
        if (NULL != a->cb.local_address && efa_device_check(a->cb.local_address, a->size)) {
            return refuse_device_atomic(a);
        }
        if (__atomic_load_n(&ep->device_met, __ATOMIC_RELAXED)) {
            /* (checked and used as one copy, as in rdma()) */
            snap = *a->remote_handle;
            a->remote_handle = &snap;
            if (!efa_rma_handle_intact(&snap.rma) ||
                !efa_rma_in_range(&snap.rma, a->remote_address, a->size)) {
                return refuse_uncovered_atomic(a);
            }
            if (snap.rma.flags & EFA_RMA_HANDLE_DEVICE) { /* (rewritten meanwhile) */
                return refuse_device_atomic(a);
            }
        }
    }
    if (!btl->mode.native_atomics) {
        /* Another process of this node: straight into its ring (which
         * reads the handle's key once, and nothing else of it). */
        const int rc = mca_btl_efa_ring_atomic(btl, ep, a);
        if (OPAL_ERR_NOT_AVAILABLE != rc) {
            return rc;
        }
    }
    snap = *a->remote_handle; /* read once, see rdma() (the same copy where taken above) */
    a->remote_handle = &snap;
    return btl->mode.native_atomics ? native_woken(btl, ep, mca_btl_efa_native_atomic(btl, ep, a))
                                    : mca_btl_efa_emul_rdma(btl, ep, a);
}

/* The completion half of an operation, as the caller gave it. */
static efa_btl_rdma_cb_t cb_of(void *local_address,
                               struct mca_btl_base_registration_handle_t *local_handle,
                               mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                               void *cbdata) {
    efa_btl_rdma_cb_t cb = {local_address, local_handle, cbfunc, cbcontext, cbdata, false, false};
    return cb;
}

/* Put and get differ only in their direction. */
static int put_or_get(int type, struct mca_btl_base_module_t *base,
                      struct mca_btl_base_endpoint_t *ep, void *local_address,
                      uint64_t remote_address,
                      struct mca_btl_base_registration_handle_t *local_handle,
                      struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
                      int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc,
                      void *cbcontext, void *cbdata) {
    (void)flags;
    (void)order;
    efa_btl_rdma_args_t a = {.type = type,
                             .remote_address = remote_address,
                             .remote_handle = remote_handle,
                             .size = size,
                             .cb = cb_of(local_address, local_handle, cbfunc, cbcontext, cbdata)};
    return rdma((mca_btl_efa_module_t *)base, ep, &a);
}

int mca_btl_efa_put(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                    void *local_address, uint64_t remote_address,
                    struct mca_btl_base_registration_handle_t *local_handle,
                    struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
                    int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                    void *cbdata) {
    return put_or_get(EFA_BTL_MSG_PUT, base, ep, local_address, remote_address, local_handle,
                      remote_handle, size, flags, order, cbfunc, cbcontext, cbdata);
}

int mca_btl_efa_get(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                    void *local_address, uint64_t remote_address,
                    struct mca_btl_base_registration_handle_t *local_handle,
                    struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
                    int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                    void *cbdata) {
    return put_or_get(EFA_BTL_MSG_GET, base, ep, local_address, remote_address, local_handle,
                      remote_handle, size, flags, order, cbfunc, cbcontext, cbdata);
}

int mca_btl_efa_afop(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                     void *local_address, uint64_t remote_address,
                     struct mca_btl_base_registration_handle_t *local_handle,
                     struct mca_btl_base_registration_handle_t *remote_handle,
                     mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                     mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
    (void)order;
    efa_btl_rdma_args_t a = {.remote_address = remote_address,
                             .remote_handle = remote_handle,
                             .op = (uint32_t)op,
                             .aflags = (uint32_t)flags,
                             .operand = operand,
                             .cb = cb_of(local_address, local_handle, cbfunc, cbcontext, cbdata)};
    return atomic((mca_btl_efa_module_t *)base, ep, &a);
}

/* An atomic without a result is a fetching one with nowhere to put it. */
int mca_btl_efa_aop(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                    uint64_t remote_address,
                    struct mca_btl_base_registration_handle_t *remote_handle,
                    mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                    mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
    return mca_btl_efa_afop(base, ep, NULL, remote_address, NULL, remote_handle, op, operand, flags,
                            order, cbfunc, cbcontext, cbdata);
}

int mca_btl_efa_acswap(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                       void *local_address, uint64_t remote_address,
                       struct mca_btl_base_registration_handle_t *local_handle,
                       struct mca_btl_base_registration_handle_t *remote_handle, uint64_t compare,
                       uint64_t value, int flags, int order,
                       mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
    (void)order;
    efa_btl_rdma_args_t a = {.remote_address = remote_address,
                             .remote_handle = remote_handle,
                             .op = EFA_BTL_OP_CSWAP,
                             .aflags = (uint32_t)flags,
                             .operand = compare,
                             .operand2 = value,
                             .cb = cb_of(local_address, local_handle, cbfunc, cbcontext, cbdata)};
    return atomic((mca_btl_efa_module_t *)base, ep, &a);
}

int mca_btl_efa_flush(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    volatile int32_t *count = ep ? &ep->outstanding : &btl->outstanding;
    /* Progress at least once, even with nothing outstanding, unless
     * progress ran since the last flush returned: a process that flushes
     * in a loop (a spin lock on its own window) must still execute the
     * requests its peers wait for, as the target of the emulated path and
     * of software providers' RMA; but after an operation waited for its
     * completion (osc/rdma's fetching atomics), one more progress call is
     * a fifth of an on-node atomic's time. */
    if (*count <= 0 && __atomic_load_n(&btl->progress_calls, __ATOMIC_RELAXED) !=
                           __atomic_load_n(&btl->flush_calls, __ATOMIC_RELAXED)) {
        __atomic_store_n(&btl->flush_calls, __atomic_load_n(&btl->progress_calls, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
        return OPAL_SUCCESS;
    }
    /* Emulated requests fail after btl_efa_rma_timeout without an answer
     * (checked here too).  What the provider holds (native) gets the same
     * time again; then flush says so, and it never returns while the
     * provider may still write a buffer or a window that osc would hand
     * back (osc/rdma ignores what flush returns).  Under ob1 the job ends
     * (its handler of fatal errors); otherwise flush goes on waiting, for
     * the provider or the peer deadline (common_efa_peer_timeout), which
     * fails every operation with a lost peer (with the deadline off, as
     * every wait on a silent peer then, for ever). */
    /* The clock is read only once flush has spun a while: most flushes
     * (single copy, or nothing outstanding) return after one progress. */
    double deadline = 0.0;
    unsigned spins = 0;
    bool said = false;
    do {
        if (mca_btl_efa_send_work(btl)) {
            mca_btl_efa_drain_pending(btl);
        }
        opal_progress();
        if (*count > 0 && 0 == (++spins & 1023)) {
            (void)mca_btl_efa_emul_expire(btl);
            const double now = mca_btl_efa_now();
            if (0.0 == deadline) {
                deadline = now + 2.0 * mca_btl_efa_component.rma_timeout;
            } else if (*count > 0 && now > deadline && !said) {
                said = true;
                opal_output(0,
                            "btl:efa: flush has waited %d s for %d one-sided operation(s) the "
                            "provider has not completed; %s",
                            2 * mca_btl_efa_component.rma_timeout, (int)*count,
                            mca_btl_efa_fatal_heard() ? "ending the job"
                            : 0 != efa_core_peer_timeout(btl->core)
                                ? "waiting on, until they complete or their peer is declared "
                                  "lost (common_efa_peer_timeout)"
                                : "waiting on until they complete: the peer deadline is off "
                                  "(common_efa_peer_timeout 0), nothing else ends them");
                if (mca_btl_efa_fatal_heard()) {
                    mca_btl_efa_fatal(btl, NULL != ep ? ep->proc : NULL,
                                      "btl_efa: one-sided operations never completed");
                    /* (ob1's handler has ended the job, or under ULFM
                     * marked the peer failed: the flush fails) */
                    return OPAL_ERR_TIMEOUT;
                }
            }
        }
    } while (*count > 0);
    __atomic_store_n(&btl->flush_calls, __atomic_load_n(&btl->progress_calls, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    return OPAL_SUCCESS;
}
