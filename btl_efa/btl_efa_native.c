/*
 * btl_efa one-sided operations by the provider's own RMA and atomics.
 *
 * Put is fi_write, get fi_read, atomics fi_atomic / fi_fetch_atomic /
 * fi_compare_atomic (btl_efa_native_atomic.c), all against the libfabric MR the peer's handle names
 * (key and, for offset-addressed providers, the MR's start).  The core
 * posts them through the context's transmit backlog, so a full provider
 * queue defers them in order and never fails them.  Writes and
 * non-fetching atomics ask for delivery completion: the callback fires once
 * the target's memory is updated, which is what osc/rdma's flush and ob1's
 * FIN after a put rely on.
 *
 * Each operation is a small rop from slabs whose scratch words hold atomic
 * operands and results (registered where the provider wants descriptors:
 * a result lands there and is copied on completion).  User buffers get
 * their descriptor from the MR cache: callers never register local memory
 * (btl_*_local_registration_threshold stays at SIZE_MAX).
 */
#include "btl_efa_lost.h"
#include "btl_efa_native.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "opal/util/output.h"

#include "btl_efa_emul.h"
#include "btl_efa_spread.h"
#include "efa_path_error.h"

#define ROPS_PER_SLAB 64
#define SCRATCH_WORDS 4 /* per rop; a multiple of 8 bytes keeps every word aligned */

static void rop_complete(efa_op_t *op, const efa_cqe_t *cqe);
static int piece_again(mca_btl_efa_module_t *btl, efa_btl_rop_t *rop);
/* May a piece that failed on its rail (err: 0 at a post) go again over
 * another?  Once; from the first rail for a numbered peer only where the
 * first is out for it or err says the path failed (the core hears of that
 * after the piece's owner): any other failure there is the operation's. */
static bool may_move(const mca_btl_efa_module_t *btl, const efa_btl_rop_t *rop, int err) {
    const mca_btl_efa_endpoint_t *ep = rop->endpoint;
    const efa_btl_rop_t *owner = rop->parent ? rop->parent : rop;
    if (!btl->native.failover || rop->moved || 0 == owner->keyed) {
        return false;
    }
    return rop->rail > 0 ||
           (ep->numbered &&
            ((ep->rail_mask && 0 == (ep->rail_mask & 1u)) || efa_path_error(err) ||
             FI_ADDR_NOTAVAIL == efa_peer_rail_addr(ep->peer, 0, 0, btl->native.nctx)));
}

/* Once per rop, as the pool makes its slab. */
static void rop_init(void *arg, void *elem, void *buf, void *desc) {
    (void)arg;
    efa_btl_rop_t *rop = elem;
    rop->op.complete = rop_complete;
    rop->scratch = buf;
    rop->scratch_desc = desc;
}

/* The pool, made at the first operation; the module lock is held. */
static efa_btl_rop_t *rop_get_locked(mca_btl_efa_module_t *btl) {
    if (NULL == btl->native.rops) {
        const efa_pool_desc_t desc = {
            .elem_size = sizeof(efa_btl_rop_t),
            .link_off = offsetof(efa_btl_rop_t, next),
            .buf_size = SCRATCH_WORDS * sizeof(uint64_t),
            .buf_align = 64,
            .per_slab = ROPS_PER_SLAB,
            .core = btl->core,
            /* Operands are sent from it (FI_WRITE), results land in it (FI_READ). */
            .mr_access = btl->native.mr_local ? (FI_READ | FI_WRITE | FI_SEND | FI_RECV) : 0,
            .init = rop_init,
        };
        int err = 0;
        btl->native.rops = efa_pool_create(&desc, &err);
        if (NULL == btl->native.rops) {
            return NULL;
        }
    }
    return efa_pool_get(btl->native.rops);
}

efa_btl_rop_t *mca_btl_efa_rop_get(mca_btl_efa_module_t *btl) {
    OPAL_THREAD_LOCK(&btl->lock);
    efa_btl_rop_t *rop = rop_get_locked(btl);
    OPAL_THREAD_UNLOCK(&btl->lock);
    if (rop) {
        rop->parent = NULL;
        rop->pending = 0;
        rop->status = OPAL_SUCCESS;
        rop->local_mr = NULL;
        rop->result_size = 0;
        rop->cb.cbfunc = NULL;
        rop->rail = 0;
        rop->keyed = 0;
        rop->moved = false;
        rop->piece_kept = false;
    }
    return rop;
}

void mca_btl_efa_rop_return(mca_btl_efa_module_t *btl, efa_btl_rop_t *rop) {
    if (rop->local_mr) {
        efa_core_mr_release(btl->core, rop->local_mr);
        rop->local_mr = NULL;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    efa_pool_put(btl->native.rops, rop);
    OPAL_THREAD_UNLOCK(&btl->lock);
}

/* Back to the pool, unless kept: the provider may still hold it though
 * the core failed it (a lost peer: efa_cqe_t.orphaned), and a late
 * fetching atomic write its scratch words or a put or get use its
 * registration.  Kept posted, its slab with it (rop_busy at finalize). */
static void rop_release(mca_btl_efa_module_t *btl, efa_btl_rop_t *rop, bool keep) {
    if (keep) {
        rop->posted = true;
        rop->op.complete = efa_op_complete_nothing;
    } else {
        mca_btl_efa_rop_return(btl, rop);
    }
}

/* The operation is over: tell the caller, then recycle (keep: the
 * provider may still hold it, rop_release). */
static void rop_finish(mca_btl_efa_module_t *btl, efa_btl_rop_t *rop, int status, bool keep) {
    mca_btl_efa_endpoint_t *ep = rop->endpoint;
    OPAL_THREAD_ADD_FETCH32(&ep->outstanding, -1);
    OPAL_THREAD_ADD_FETCH32(&btl->outstanding, -1);
    /* Said here, as the emulated path's req_done says it: Open MPI 4.1's
     * osc/rdma drops a failed operation's status (the program would see
     * wrong bytes and no error). */
    static int said = 0;
    if (OPAL_UNLIKELY(OPAL_SUCCESS != status) && !rop->cb.internal &&
        __atomic_fetch_add(&said, 1, __ATOMIC_RELAXED) < 10) {
        opal_output(0, "btl:efa: a one-sided operation to %s failed: %s", OPAL_NAME_PRINT(ep->name),
                    opal_strerror(status));
    }
    /* Nor is the upper layer called once it has gone (a flush that gave up
     * let osc free its window: see frag_finish); btl_efa's own callback is
     * (a piece's parent must hear of every piece). */
    if (rop->cb.internal || mca_btl_efa_upper_alive(btl, ep)) {
        mca_btl_efa_rdma_cb_call(btl, ep, &rop->cb, status);
    }
    rop_release(btl, rop, keep);
}

/* A parent loses one of its 'pending' references; the last one reports. */
static void parent_put(mca_btl_efa_module_t *btl, efa_btl_rop_t *parent, int status,
                       int64_t count) {
    if (OPAL_SUCCESS != status) {
        /* The first error wins; later ones change nothing. */
        OPAL_THREAD_LOCK(&btl->lock);
        if (OPAL_SUCCESS == parent->status) {
            parent->status = status;
        }
        OPAL_THREAD_UNLOCK(&btl->lock);
    }
    /* Acquire and release: the last piece reads the status an earlier one
     * set (OPAL's atomics are relaxed on some machines). */
    if (0 == __atomic_sub_fetch(&parent->pending, count, __ATOMIC_ACQ_REL)) {
        /* A piece the provider may still hold posts from the parent's
         * registration (a lost peer's): it is left registered, as a kept
         * rop's own is. */
        if (__atomic_load_n(&parent->piece_kept, __ATOMIC_RELAXED)) {
            parent->local_mr = NULL;
        }
        rop_finish(btl, parent, parent->status, false); /* (a parent is never posted) */
    }
}

/* ---- a device buffer whose post the provider refuses ---- */

/* Did the provider refuse the post of rop's local device buffer (err: the
 * post's error)?  Said once (efa_core_mr_device_post_refused); such
 * memory is then no longer registered, so later operations go as
 * requests from the start (btl_efa_rdma.c). */
static bool device_post_refused(mca_btl_efa_module_t *btl, const efa_btl_rop_t *rop, int err) {
    const efa_btl_rop_t *owner = rop->parent ? rop->parent : rop;
    return NULL != owner->local_mr &&
           EFA_DEVICE_POST_NOT_REFUSED !=
               efa_core_mr_device_post_refused(
                   btl->core, owner->local_mr,
                   EFA_BTL_MSG_PUT == rop->type ? "btl_efa fi_write" : "btl_efa fi_read", err);
}

/* A piece done as requests: its parent hears it as of any piece. */
static void piece_requests_done(struct mca_btl_base_module_t *module,
                                struct mca_btl_base_endpoint_t *endpoint, void *local_address,
                                struct mca_btl_base_registration_handle_t *local_handle,
                                void *context, void *cbdata, int status) {
    (void)module, (void)endpoint, (void)local_address, (void)local_handle, (void)cbdata;
    parent_put(&mca_btl_efa_module, (efa_btl_rop_t *)context, status, 1);
}

/* A piece (or a whole operation of one) whose post the provider refused
 * (device_post_refused): the same bytes as requests the target executes,
 * this process's device copy reading or filling its buffer.  Put and get
 * move the same bytes again where part of a piece landed.  OPAL_SUCCESS:
 * it completes from there (the caller gives the rop back; a whole
 * operation's callback is then the requests'). */
static int piece_by_requests(mca_btl_efa_module_t *btl, efa_btl_rop_t *rop) {
    const efa_btl_rop_t *owner = rop->parent ? rop->parent : rop;
    struct mca_btl_base_registration_handle_t handle;
    memset(&handle, 0, sizeof(handle));
    handle.rma.key = owner->emul_key; /* (all the emulated path reads of it) */
    efa_btl_rdma_args_t a;
    memset(&a, 0, sizeof(a));
    a.type = rop->type;
    a.remote_address = owner->remote_address +
                       (size_t)((uint8_t *)rop->local - (uint8_t *)owner->cb.local_address);
    a.remote_handle = &handle;
    a.size = rop->len;
    a.cb = owner->cb; /* (local_device set) */
    a.cb.local_address = rop->local;
    if (rop->parent) {
        a.cb.cbfunc = piece_requests_done;
        a.cb.internal = true;
        a.cb.cbcontext = rop->parent;
        a.cb.local_handle = NULL;
        a.cb.cbdata = NULL;
    }
    const int rc = mca_btl_efa_emul_rdma(btl, rop->endpoint, &a);
    if (OPAL_SUCCESS == rc) {
        (void)__atomic_fetch_add(&btl->native.device_refused, 1, __ATOMIC_RELAXED);
    }
    return rc;
}

/* A post refused from the backlog (its completion): as requests, where
 * the provider refused the device buffer.  True: it goes on from there. */
static bool refused_from_backlog(mca_btl_efa_module_t *btl, efa_btl_rop_t *rop, int err) {
    if (!device_post_refused(btl, rop, err) || OPAL_SUCCESS != piece_by_requests(btl, rop)) {
        return false;
    }
    if (NULL == rop->parent) { /* (its callback is the requests' now) */
        OPAL_THREAD_ADD_FETCH32(&rop->endpoint->outstanding, -1);
        OPAL_THREAD_ADD_FETCH32(&btl->outstanding, -1);
        /* Counted as by the provider's RDMA when its post was taken
         * (btl_efa_rdma.c); the whole operation is requests now.  (An
         * operation in pieces stays counted there: its other pieces may
         * have gone by RDMA.) */
        (void)__atomic_fetch_sub(&btl->native.device_native, 1, __ATOMIC_RELAXED);
        (void)__atomic_fetch_add(&btl->native.device_requests, 1, __ATOMIC_RELAXED);
    }
    mca_btl_efa_rop_return(btl, rop);
    efa_core_device_refusal_taken(); /* (no failed post to say) */
    return true;
}

static void rop_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    mca_btl_efa_module_t *btl = &mca_btl_efa_module;
    efa_btl_rop_t *rop = (efa_btl_rop_t *)op;
    rop->posted = false;
    if (OPAL_UNLIKELY(cqe->err) && cqe->unposted && refused_from_backlog(btl, rop, cqe->err)) {
        return;
    }
    const int rail = rop->rail;
    static uint32_t completed_first = 0; /* (for the test hook) */
    int err = cqe->err;
    if (OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on) && 0 == err && 0 == rail &&
        (rop->parent ? rop->parent : rop)->keyed &&
        ++completed_first == (uint32_t)mca_btl_efa_component.test.fail_first_rma) {
        err = -FI_EHOSTUNREACH; /* as the provider says of a peer lost on the NIC */
    }
    const bool retry = OPAL_UNLIKELY(err && -FI_ECANCELED != err) && may_move(btl, rop, err);
    int again = OPAL_ERROR;
    if (retry && OPAL_SUCCESS == (again = piece_again(btl, rop))) {
        return; /* posted again on another rail: it completes from there */
    }
    int status = OPAL_SUCCESS;
    if (err) {
        status = mca_btl_efa_status_of(err);
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: one-sided operation failed on rail %d: %s%s%s", rail,
                            fi_strerror(-err),
                            retry ? "; sent again over another rail, that failed too: " : "",
                            retry ? opal_strerror(again) : "");
    } else if (rop->result_size && rop->cb.local_address) {
        memcpy(rop->cb.local_address, &rop->scratch[2], rop->result_size);
    }
    /* (read before the rop is recycled or kept) */
    const bool keep = OPAL_UNLIKELY(cqe->orphaned) && 0 != err;
    mca_btl_efa_endpoint_t *ep = rop->endpoint;
    if (rop->parent) {
        efa_btl_rop_t *parent = rop->parent;
        if (keep) {
            /* (before the put: the last piece's put reads it) */
            __atomic_store_n(&parent->piece_kept, true, __ATOMIC_RELAXED);
        }
        rop_release(btl, rop, keep);
        parent_put(btl, parent, status, 1);
    } else {
        rop_finish(btl, rop, status, keep);
    }
    /* The core declared the peer lost: ob1, waiting on it with a
     * rendezvous by RDMA (its FIN after a put or get), hears of it as of a
     * send's failure.  (Where only osc/rdma uses the BTL nobody listens:
     * its flush returns, and the status it dropped was said above.) */
    if (efa_path_error(err)) {
        mca_btl_efa_peer_failed_later_asking(btl, ep, err);
    }
}

/* ---- put and get ---- */
static int post_piece(efa_btl_rop_t *rop, int type, const efa_btl_rail_t *rail, void *local,
                      size_t len, uint64_t raddr) {
    /* Marked before the provider has it: another thread's progress may
     * complete it before the post returns. */
    rop->posted = true;
    int rc = EFA_BTL_MSG_PUT == type ? efa_ctx_write(rail->ctx, local, len, rail->desc, rail->addr,
                                                     raddr, rail->rkey, &rop->op)
                                     : efa_ctx_read(rail->ctx, local, len, rail->desc, rail->addr,
                                                    raddr, rail->rkey, &rop->op);
    if (0 != rc) {
        rop->posted = false;
        rop->post_err = rc;
    }
    return 0 == rc ? OPAL_SUCCESS : mca_btl_efa_status_of(rc);
}

/* Failover: a piece whose rail failed (at the post, or in its completion,
 * after which the core takes that rail out for the peer, efa_core.h's
 * rails_down) goes again, once, over the lowest other rail that reaches
 * the peer and holds the target's key: the first, which carries the
 * peer's messages, unless that is the one that failed (a numbered peer's:
 * btl_efa_spread.c) or is out for the peer.  Put and get move the same
 * bytes again: a piece that partly landed is overwritten with the same
 * data. */
static int piece_again(mca_btl_efa_module_t *btl, efa_btl_rop_t *rop) {
    const efa_btl_rop_t *owner = rop->parent ? rop->parent : rop;
    const mca_btl_efa_endpoint_t *ep = rop->endpoint;
    const int failed = rop->rail;
    int rc = OPAL_ERR_UNREACH;
    rop->moved = true;
    for (int r = 0; r < btl->native.rails && OPAL_SUCCESS != rc; ++r) {
        const fi_addr_t addr = NULL == ep->peer
                                   ? (0 == r ? ep->addr : FI_ADDR_NOTAVAIL)
                                   : efa_peer_rail_addr(ep->peer, r, 0, btl->native.nctx);
        if (r == failed || 0 == (owner->keyed & (1u << r)) || FI_ADDR_NOTAVAIL == addr ||
            (owner->local_mr && r >= efa_mr_rails(owner->local_mr))) {
            continue;
        }
        const efa_btl_rail_t via = {r, btl->native.rail_ctx[r], addr,
                                    owner->local_mr ? efa_mr_rail_desc(owner->local_mr, r) : NULL,
                                    owner->rkey[r]};
        rop->rail = (int8_t)r;
        rc = post_piece(rop, rop->type, &via, rop->local, rop->len, rop->raddr);
    }
    if (OPAL_SUCCESS == rc) {
        OPAL_THREAD_ADD_FETCH64(&btl->native.failed_over, 1);
        efa_core_count_stripe(0, true);
    } else {
        rop->rail = (int8_t)failed;
    }
    return rc;
}

int mca_btl_efa_native_rdma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                            const efa_btl_rdma_args_t *a) {
    const int type = a->type;
    const size_t size = a->size;
    void *local_address = a->cb.local_address;
    uint64_t raddr;
    if (0 == size) { /* nothing to move, and a handle of nothing has no MR */
        mca_btl_efa_rdma_cb_call(btl, ep, &a->cb, OPAL_SUCCESS);
        return OPAL_SUCCESS;
    }
    if (!efa_rma_remote_addr(&a->remote_handle->rma, btl->native.mr_virt_addr, a->remote_address,
                             size, &raddr)) {
        return mca_btl_efa_refuse(btl, ep, EFA_BTL_MSG_PUT == type ? "put" : "get", a);
    }
    efa_btl_rop_t *rop = mca_btl_efa_rop_get(btl);
    if (NULL == rop) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    rop->endpoint = ep;
    rop->cb = a->cb; /* local_handle is only handed back to the callback */
    void *desc = NULL;
    if (OPAL_UNLIKELY(a->cb.local_device)) {
        /* A device buffer needs its descriptor whatever FI_MR_LOCAL says
         * (FI_HMEM); refused, the operation goes as requests instead. */
        int err = 0;
        rop->local_mr = efa_core_mr_acquire_device(
            btl->core, local_address, size, EFA_BTL_MSG_GET == type ? FI_READ : FI_WRITE, &err);
        if (NULL == rop->local_mr) {
            mca_btl_efa_rop_return(btl, rop);
            return OPAL_ERR_NOT_AVAILABLE;
        }
        desc = efa_mr_desc(rop->local_mr);
        rop->local = local_address; /* (for piece_by_requests) */
        rop->remote_address = a->remote_address;
        rop->emul_key = a->remote_handle->rma.key;
    } else if (btl->native.mr_local) {
        int err = 0;
        /* get writes into the local buffer (FI_READ), put reads from it */
        rop->local_mr = efa_core_mr_acquire(btl->core, local_address, size,
                                            EFA_BTL_MSG_GET == type ? FI_READ : FI_WRITE, &err);
        if (NULL == rop->local_mr) {
            mca_btl_efa_rop_return(btl, rop);
            return mca_common_efa_fi_to_opal(err);
        }
        desc = efa_mr_desc(rop->local_mr);
    }
    rop->keyed = 1;
    rop->rkey[0] = a->remote_handle->rma.fi_key;
    for (int r = 1; r < btl->native.rails; ++r) {
        rop->keyed |= mca_btl_efa_spread_rail_key(ep, &a->remote_handle->rma, r, &rop->rkey[r])
                          ? (uint8_t)(1u << r)
                          : 0;
    }
    efa_btl_rail_t rails[EFA_MAX_RAILS];
    const int nrails = mca_btl_efa_spread_plan_rdma(btl, ep, a, rop->local_mr, desc, rails);
    size_t pieces = 0;
    for (int r = 0; r < nrails; ++r) {
        size_t off, n;
        efa_rma_stripe_part(size, nrails, r, &off, &n);
        pieces += 0 == n ? 0 : efa_rma_num_pieces(n, btl->native.rma_max);
    }
    OPAL_THREAD_ADD_FETCH32(&ep->outstanding, 1);
    OPAL_THREAD_ADD_FETCH32(&btl->outstanding, 1);
    if (1 == pieces) {
        /* What its failover would post again (piece_again). */
        rop->rail = (int8_t)rails[0].rail;
        rop->type = (int8_t)type;
        rop->local = local_address;
        rop->len = size;
        rop->raddr = raddr;
        int rc = post_piece(rop, type, &rails[0], local_address, size, raddr);
        if (OPAL_SUCCESS != rc && device_post_refused(btl, rop, rop->post_err)) {
            rc = OPAL_ERR_NOT_AVAILABLE; /* as requests (the caller), as from now on */
            (void)__atomic_fetch_add(&btl->native.device_refused, 1, __ATOMIC_RELAXED);
        } else if (OPAL_SUCCESS != rc && may_move(btl, rop, 0)) {
            rc = piece_again(btl, rop); /* that rail refused the peer */
        }
        if (OPAL_SUCCESS != rc) {
            OPAL_THREAD_ADD_FETCH32(&ep->outstanding, -1);
            OPAL_THREAD_ADD_FETCH32(&btl->outstanding, -1);
            mca_btl_efa_rop_return(btl, rop);
        }
        return rc;
    }
    if (nrails > 1) {
        OPAL_THREAD_ADD_FETCH64(&btl->native.striped, 1);
        efa_core_count_stripe(size, false);
    }
    /* Striped, or larger than the provider takes at once: pieces, each its
     * own rop; this one is their parent and holds one extra reference
     * while posting, so it cannot report before every piece has been
     * tried. */
    rop->pending = (int64_t)pieces + 1; /* 64 bits: no piece count is truncated */
    size_t posted = 0;
    int rc = OPAL_SUCCESS;
    for (int r = 0; r < nrails && OPAL_SUCCESS == rc; ++r) {
        size_t part_off, part_len;
        efa_rma_stripe_part(size, nrails, r, &part_off, &part_len);
        const size_t part_pieces =
            0 == part_len ? 0 : efa_rma_num_pieces(part_len, btl->native.rma_max);
        for (size_t i = 0; i < part_pieces; ++i) {
            size_t off, n;
            efa_rma_piece(part_len, btl->native.rma_max, i, &off, &n);
            off += part_off;
            efa_btl_rop_t *piece = mca_btl_efa_rop_get(btl);
            if (NULL == piece) {
                rc = OPAL_ERR_OUT_OF_RESOURCE;
                break;
            }
            piece->endpoint = ep;
            piece->parent = rop;
            piece->rail = (int8_t)rails[r].rail;
            piece->type = (int8_t)type;
            piece->local = (uint8_t *)local_address + off;
            piece->len = n;
            piece->raddr = raddr + off;
            rc = post_piece(piece, type, &rails[r], piece->local, n, piece->raddr);
            if (OPAL_SUCCESS != rc && device_post_refused(btl, piece, piece->post_err)) {
                /* (completes through piece_requests_done; the rop is not needed) */
                if (OPAL_SUCCESS == (rc = piece_by_requests(btl, piece))) {
                    mca_btl_efa_rop_return(btl, piece);
                    ++posted;
                    continue;
                }
            } else if (OPAL_SUCCESS != rc && may_move(btl, piece, 0)) {
                rc = piece_again(btl, piece); /* that rail refused the peer */
            }
            if (OPAL_SUCCESS != rc) {
                mca_btl_efa_rop_return(btl, piece);
                break;
            }
            ++posted;
        }
    }
    if (0 == posted) { /* nothing went out: the caller hears it from the return value */
        OPAL_THREAD_ADD_FETCH32(&ep->outstanding, -1);
        OPAL_THREAD_ADD_FETCH32(&btl->outstanding, -1);
        mca_btl_efa_rop_return(btl, rop);
        return rc;
    }
    /* Pieces not posted will never complete: drop their references (and
     * the poster's) now; the callback reports rc if any piece failed. */
    parent_put(btl, rop, rc, (int64_t)(pieces - posted) + 1);
    return OPAL_SUCCESS;
}

/* ---- setup ---- */

int mca_btl_efa_native_setup(mca_btl_efa_module_t *btl) {
    const efa_core_info_t *info = efa_core_get_info(btl->core);
    btl->native.mr_virt_addr = info->mr_virt_addr;
    btl->native.mr_local = info->mr_local;
    btl->native.hmem = info->hmem && efa_device_hmem_on();
    btl->native.rma_max = info->max_rma_size;
    if (mca_btl_efa_component.rma_max_transfer &&
        (0 == btl->native.rma_max ||
         mca_btl_efa_component.rma_max_transfer < btl->native.rma_max)) {
        btl->native.rma_max = mca_btl_efa_component.rma_max_transfer;
    }
    btl->native.rops = NULL;
    btl->native.rails = info->num_nics < EFA_MAX_RAILS ? info->num_nics : EFA_MAX_RAILS;
    btl->native.nctx = info->num_contexts;
    btl->native.stripe_min = info->stripe_min;
    btl->native.failover = info->rail_failover;
    btl->native.striped = 0;
    btl->native.failed_over = 0;
    btl->native.device_native = btl->native.device_requests = btl->native.device_refused = 0;
    for (int r = 0; r < btl->native.rails; ++r) {
        /* the same context index as btl->ctx (0) on every NIC */
        btl->native.rail_ctx[r] = 0 == r ? btl->ctx : efa_core_rail_ctx(btl->core, r, 0);
    }
    return OPAL_SUCCESS;
}

/* Finalize may come with operations still posted (a peer that stopped
 * progressing outlasts finalize's wait).  The provider writes their
 * results into the scratch words (and the user's memory) and reports them
 * through the rop: a slab holding one stays allocated and registered, its
 * completions pointed at a function of the core's library (this
 * component may be unloaded by then), as the fragment slabs are. */
static bool rop_busy(void *arg, void *elem) {
    (void)arg;
    efa_btl_rop_t *rop = elem;
    if (rop->posted) {
        rop->op.complete = efa_op_complete_nothing;
    }
    return rop->posted;
}

void mca_btl_efa_native_fini(mca_btl_efa_module_t *btl) {
    if (0 != btl->native.device_native + btl->native.device_requests) {
        /* the test harness looks for this line */
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: puts and gets with device memory: %lld by the provider's "
                            "RDMA (FI_HMEM), %lld as requests executed with the device's copy; "
                            "%lld posts of device memory refused by the provider and done as "
                            "requests",
                            (long long)btl->native.device_native,
                            (long long)btl->native.device_requests,
                            (long long)btl->native.device_refused);
    }
    if (btl->native.rails > 1) {
        /* the test harness looks for this line */
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: %lld put/get striped over up to %d rails (%s %zu bytes)",
                            (long long)btl->native.striped, btl->native.rails,
                            0 == btl->native.stripe_min ? "striping off: stripe_min" : "from",
                            btl->native.stripe_min);
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: %lld striped part(s) sent again over another rail after "
                            "their rail failed",
                            (long long)btl->native.failed_over);
    }
    if (NULL != btl->native.rops) {
        (void)efa_pool_retire(btl->native.rops, rop_busy, NULL);
    }
}

void mca_btl_efa_native_fini_released(mca_btl_efa_module_t *btl) {
    if (NULL == btl->native.rops) {
        return;
    }
    /* With the endpoints closed nothing completes any more, and the
     * registrations went with the core. */
    const size_t kept = efa_pool_destroy(btl->native.rops, NULL == efa_core_current());
    if (kept > 0) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: %zu one-sided operation slab(s) left to the provider, "
                            "which still holds operations of them",
                            kept);
    }
    btl->native.rops = NULL;
}
