/*
 * btl_efa's small put and get to another process of this node: a request
 * written into the peer's ring (the emulated protocol, btl_efa_emul.h)
 * that the initiator can take back.
 *
 * Single copy by CMA costs a system call, about 1.4 us whatever the size;
 * a request through the ring is answered in a few hundred ns by a target
 * that is in MPI.  But a target that computes answers only when it next
 * enters MPI, where CMA needs nothing of it.  So each request carries a
 * claim word (efa_btl_rma_t.claim, or efa_btl_ring_req_t.claim for one of
 * up to 8 bytes, which is one cache line; in the ring slot both processes
 * map):
 * the target moves it from OPEN to TAKEN before it executes the request,
 * the initiator from OPEN to CANCELLED when the request has waited
 * btl_efa_onnode_rma_wait, and then does the operation itself by single
 * copy.  One compare-and-swap each: exactly one of them does it.  After a
 * take-back the next EFA_BTL_RING_RMA_SKIP operations to that peer go by
 * single copy at once, so a peer that stays busy costs one wait per run of
 * them, not one per operation.
 *
 * Only where single copy to the peer works (it is the way back) and only
 * while the initiator can still name the slot: the sender reuses a slot
 * only after the target has read it, which it does only after it took or
 * dropped the request, so a request whose slot came round again was taken.
 *
 * Records of the requests in flight (module lock): one per request, free
 * again when it is answered (req_done), taken back, or seen taken.
 */
#include "btl_efa_emul.h"
#include "btl_efa_rdma.h"
#include "btl_efa_ring.h"

#include "efa_cma.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "opal/util/output.h"

/* Operations to a peer by single copy after one was taken back from it. */
#define EFA_BTL_RING_RMA_SKIP 256

void mca_btl_efa_ring_rma_setup(mca_btl_efa_module_t *btl) {
    /* (a get asks for no more than the answer's fragment holds) */
    btl->ring_rma.max = mca_btl_efa_component.onnode_rma_max < btl->emul.chunk
                            ? mca_btl_efa_component.onnode_rma_max
                            : btl->emul.chunk;
    btl->ring_rma.wait = 1e-6 * (double)mca_btl_efa_component.onnode_rma_wait;
    btl->ring_rma.active = 0;
    btl->ring_rma.sent = btl->ring_rma.taken_back = 0;
    for (int i = 0; i < EFA_BTL_RING_RMA_RECS; ++i) {
        btl->ring_rma.recs[i].id = 0;
        btl->ring_rma.recs[i].next_free = i + 1 < EFA_BTL_RING_RMA_RECS ? i + 1 : -1;
    }
    btl->ring_rma.free_head = 0;
}

void mca_btl_efa_ring_rma_fini(mca_btl_efa_module_t *btl) {
    /* (progress is gone: requests still in flight are abandoned with the
     * emulated ones, their records with them) */
    for (int i = 0; i < EFA_BTL_RING_RMA_RECS; ++i) {
        btl->ring_rma.recs[i].id = 0;
    }
    btl->ring_rma.active = 0;
    if (0 != btl->ring_rma.sent) {
        /* the test harness looks for this line */
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: put/get through on-node rings: %lld request(s), %lld taken "
                            "back from a busy peer and done by single copy",
                            (long long)btl->ring_rma.sent, (long long)btl->ring_rma.taken_back);
    }
}

/* Module lock held. */
static void rec_free(mca_btl_efa_module_t *btl, int i) {
    btl->ring_rma.recs[i].id = 0;
    btl->ring_rma.recs[i].next_free = btl->ring_rma.free_head;
    btl->ring_rma.free_head = i;
    OPAL_THREAD_ADD_FETCH32(&btl->ring_rma.active, -1);
}

/* Can the request of record r still be named in its slot?  The sender
 * writes a slot again only after the target has read it; the module lock
 * is held, so no write is under way. */
static bool slot_intact(const struct efa_btl_ring_rma_rec *r) {
    const efa_shm_outbox_t *out = r->endpoint->outbox;
    return NULL != out &&
           efa_shm_outbox_committed(out) - r->pos < (uint64_t)efa_shm_outbox_slots(out);
}

/* The operation of a record is over (answered, or failed): the record is
 * free again, unless a check freed it already (then the id differs).  One
 * that failed (expired) unanswered is taken back as well, so that the
 * target cannot execute it after its caller was told it failed. */
static void forget(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req) {
    OPAL_THREAD_LOCK(&btl->lock);
    struct efa_btl_ring_rma_rec *r = &btl->ring_rma.recs[req->rec];
    if (req->id == r->id) {
        if (OPAL_SUCCESS != req->status && slot_intact(r)) {
            (void)efa_btl_wire_claim_move(r->claim, EFA_BTL_CLAIM_CANCELLED);
        }
        rec_free(btl, req->rec);
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
}

int mca_btl_efa_ring_rma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                         const efa_btl_rdma_args_t *a) {
    const bool put = EFA_BTL_MSG_PUT == a->type;
    /* (a put or get of a few bytes goes in one line, efa_btl_ring_req_t,
     * and a get's answer then too) */
    const bool one_line = 0 != a->size && a->size <= EFA_BTL_RING_INLINE_MAX;
    const size_t len = one_line
                           ? sizeof(efa_btl_ring_req_t)
                           : sizeof(efa_btl_hdr_t) + sizeof(efa_btl_rma_t) + (put ? a->size : 0);
    /* (a lost peer: the general path fails it at once, OPAL_ERR_UNREACH,
     * where a record in its ring would wait out btl_efa_rma_timeout) */
    if (a->size > btl->ring_rma.max || ep->lost || !mca_btl_efa_via_ring(btl, ep, len)) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    const int32_t skip = __atomic_load_n(&ep->ring_rma_skip, __ATOMIC_RELAXED);
    if (OPAL_UNLIKELY(0 != skip)) {
        /* (a lost count between threads only moves the next try) */
        __atomic_store_n(&ep->ring_rma_skip, skip - 1, __ATOMIC_RELAXED);
        return OPAL_ERR_NOT_AVAILABLE;
    }
    /* The way back must be open: single copy verified for the peer (the
     * first operation to it went that way) and allowed on this range. */
    if (EFA_BTL_CMA_ON != __atomic_load_n(&ep->cma, __ATOMIC_ACQUIRE) ||
        EFA_RMA_CMA_OK !=
            efa_rma_cma_check(&a->remote_handle->rma, ep->cma_pid, a->remote_address, a->size,
                              put ? MCA_BTL_REG_FLAG_REMOTE_WRITE : MCA_BTL_REG_FLAG_REMOTE_READ)) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    efa_btl_rdma_req_t *req = mca_btl_efa_emul_req_one(btl, ep, a);
    if (NULL == req) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    const int i = btl->ring_rma.free_head;
    uint8_t *f = i >= 0 ? efa_ring_reserve(ep->ring_out, len) : NULL;
    if (NULL == f) { /* every record in use, or the ring full: single copy */
        OPAL_THREAD_UNLOCK(&btl->lock);
        mca_btl_efa_emul_req_unsent(btl, req);
        return OPAL_ERR_NOT_AVAILABLE;
    }
    struct efa_btl_ring_rma_rec *r = &btl->ring_rma.recs[i];
    btl->ring_rma.free_head = r->next_free;
    if (one_line) {
        /* Every field written once, in place (the slot is shared memory). */
        efa_btl_ring_req_t *q = (efa_btl_ring_req_t *)f;
        *q = (efa_btl_ring_req_t){.type = put ? EFA_BTL_MSG_RING_PUT : EFA_BTL_MSG_RING_GET,
                                  .flags = (uint8_t)a->size,
                                  .claim = EFA_BTL_CLAIM_OPEN,
                                  .src = btl->my_name,
                                  .req = req->id,
                                  .addr = a->remote_address,
                                  .key = req->rma.key};
        if (put) {
            memcpy(&q->operand, a->cb.local_address, a->size);
        }
        r->claim = &q->claim;
    } else {
        efa_btl_hdr_t hdr;
        memset(&hdr, 0, sizeof(hdr));
        hdr.type = (uint8_t)a->type;
        hdr.src = btl->my_name;
        hdr.len = (uint32_t)(put ? a->size : 0);
        efa_btl_rma_t rma = req->rma;
        rma.req = req->id;
        rma.addr = a->remote_address;
        rma.len = a->size;
        rma.offset = 0;
        rma.claim = EFA_BTL_CLAIM_OPEN;
        memcpy(f, &hdr, sizeof(hdr));
        memcpy(f + sizeof(hdr), &rma, sizeof(rma));
        if (put) {
            memcpy(f + sizeof(hdr) + sizeof(rma), a->cb.local_address, a->size);
        }
        r->claim = (uint32_t *)(f + sizeof(hdr) + offsetof(efa_btl_rma_t, claim));
    }
    r->id = req->id;
    r->endpoint = ep;
    r->first_seen = 0.0;
    req->rec = i;
    req->on_over = forget;
    efa_ring_commit(ep->ring_out, len);
    r->pos = efa_shm_outbox_committed(ep->outbox);
    ++btl->ring.sent;
    OPAL_THREAD_ADD_FETCH32(&btl->ring_rma.active, 1);
    OPAL_THREAD_UNLOCK(&btl->lock);
    OPAL_THREAD_ADD_FETCH64(&btl->ring_rma.sent, 1);
    mca_btl_efa_emul_req_sent(btl, req);
    return OPAL_SUCCESS;
}

void mca_btl_efa_ring_rma_check(mca_btl_efa_module_t *btl) {
    struct {
        uint64_t id;
        mca_btl_efa_endpoint_t *ep;
    } back[EFA_BTL_RING_RMA_RECS];
    int nback = 0;
    const double now = mca_btl_efa_now();
    OPAL_THREAD_LOCK(&btl->lock);
    for (int i = 0; i < EFA_BTL_RING_RMA_RECS; ++i) {
        struct efa_btl_ring_rma_rec *r = &btl->ring_rma.recs[i];
        if (0 == r->id) {
            continue;
        }
        mca_btl_efa_endpoint_t *ep = r->endpoint;
        /* The slot came round again: the target read the request, and
         * (nobody having taken it back) started it. */
        if (!slot_intact(r)) {
            rec_free(btl, i);
            continue;
        }
        if (EFA_BTL_CLAIM_OPEN != __atomic_load_n(r->claim, __ATOMIC_ACQUIRE)) {
            rec_free(btl, i); /* started: its answer completes it */
            continue;
        }
        if (0.0 == r->first_seen) {
            r->first_seen = now;
            continue;
        }
        if (now - r->first_seen < btl->ring_rma.wait) {
            continue;
        }
        /* A target whose process is gone (or whose single copy stopped)
         * is not written by pid: the pid may be another process's now.
         * The request is left to its deadline. */
        if (ep->lost || EFA_BTL_CMA_ON != __atomic_load_n(&ep->cma, __ATOMIC_ACQUIRE)) {
            rec_free(btl, i);
            continue;
        }
        if (efa_btl_wire_claim_move(r->claim, EFA_BTL_CLAIM_CANCELLED)) {
            back[nback].id = r->id;
            back[nback].ep = ep;
            ++nback;
        }
        rec_free(btl, i);
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    /* Taken back: done here by single copy, the peer left alone a while. */
    for (int k = 0; k < nback; ++k) {
        mca_btl_efa_endpoint_t *ep = back[k].ep;
        __atomic_store_n(&ep->ring_rma_skip, EFA_BTL_RING_RMA_SKIP, __ATOMIC_RELAXED);
        OPAL_THREAD_ADD_FETCH64(&btl->ring_rma.taken_back, 1);
        efa_btl_rdma_req_t *req = mca_btl_efa_emul_req_claim(btl, back[k].id);
        if (NULL == req) {
            continue; /* expired meanwhile: failed already */
        }
        const bool put = EFA_BTL_MSG_PUT == req->type;
        size_t moved = 0;
        const int err = OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on) &&
                                mca_btl_efa_component.test.takeback_refuse
                            ? EPERM /* testing (btl_efa_debug_takeback_refuse) */
                            : efa_cma_copy(ep->cma_pid, put, req->cb.local_address,
                                           req->remote_address, req->size, &moved);
        if (0 == err) {
            mca_btl_efa_emul_req_answered(btl, req, OPAL_SUCCESS);
        } else if (EFAULT == err) { /* freed under its registration, as for single copy */
            opal_output_verbose(1, mca_common_efa_output,
                                "btl:efa: single-copy %s of %zu bytes at 0x%llx failed after %zu "
                                "bytes: %s",
                                put ? "put" : "get", req->size,
                                (unsigned long long)req->remote_address, moved, strerror(err));
            mca_btl_efa_emul_req_answered(btl, req, OPAL_ERR_BAD_PARAM);
        } else if (mca_btl_efa_cma_passing(err)) {
            mca_btl_efa_emul_req_resend(btl, req); /* (single copy stays) */
        } else {
            /* The kernel took the right away, or the peer is gone: single
             * copy stops for this peer, and the request goes again as one
             * the target executes (bytes already copied are the same
             * bytes again). */
            char why[160];
            snprintf(why, sizeof(why), "%s pid %u failed after %zu of %zu bytes: %s",
                     put ? "process_vm_writev to" : "process_vm_readv from", ep->cma_pid, moved,
                     req->size, strerror(err));
            mca_btl_efa_cma_give_up(btl, ep, why);
            mca_btl_efa_emul_req_resend(btl, req);
        }
    }
}
