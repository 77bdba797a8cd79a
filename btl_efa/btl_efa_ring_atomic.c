/*
 * btl_efa's emulated atomics to another process of this node: the request
 * written straight into the peer's ring, the answer matched to a fixed
 * table of records.
 *
 * The general emulated path (btl_efa_emul.c) serves put and get of any
 * size, in chunks, over the provider or the ring: a request structure in
 * the table of operations in flight, a fragment, the send queue.  An
 * atomic to a process of this node needs none of it: one request of fixed
 * size, one answer.  So here a record in btl->ring_atomic names the
 * operation, the request goes into the outbox in place, and the answer
 * (efa_btl_rma_t.req, the record's id) finds the record by index and
 * checks the whole id: an answer from another process is never taken for
 * an address, and one for a record reused since is dropped.  That is about
 * a third of the general path's instructions, most of an atomic's latency
 * on one node.
 *
 * The request is one cache line with the slot's header
 * (efa_btl_ring_req_t); the target takes it before any parse
 * (btl_efa_recv.c, btl_efa_emul_target.c): it takes the request's claim
 * word, executes, answers in one line too.  A record that gets
 * no answer within btl_efa_rma_timeout fails its operation; its request is
 * cancelled first if the target has not taken it yet (claim word still
 * OPEN and the slot not reused), so a target that comes back late cannot
 * execute an atomic whose caller was told it failed.  Expiry is checked
 * with the general path's (mca_btl_efa_emul_expire): each check stamps the
 * records it sees for the first time, so no clock is read per operation.
 *
 * Ids: the top bit set (the general path's ids never have it), then a
 * sequence from a random start, then the record's index in the low bits.
 */
#include "btl_efa_emul.h"
#include "btl_efa_rdma.h"
#include "btl_efa_ring.h"

#include <string.h>

#include "opal/util/output.h"

#define RING_ATOMIC_ID_BIT (UINT64_C(1) << 63) /* mca_btl_efa_ring_atomic_id */
#define RING_ATOMIC_INDEX_BITS 6
_Static_assert(EFA_BTL_RING_ATOMIC_RECS <= (1 << RING_ATOMIC_INDEX_BITS), "record index bits");

void mca_btl_efa_ring_atomic_setup(mca_btl_efa_module_t *btl) {
    btl->ring_atomic.active = 0;
    btl->ring_atomic.sent = 0;
    /* (like the general path's ids, from the registration keys' random
     * start: an answer to an earlier run's request is unlikely to match) */
    btl->ring_atomic.seq = btl->reg.next_key;
    for (int i = 0; i < EFA_BTL_RING_ATOMIC_RECS; ++i) {
        btl->ring_atomic.recs[i].id = 0;
        btl->ring_atomic.recs[i].next_free = i + 1 < EFA_BTL_RING_ATOMIC_RECS ? i + 1 : -1;
    }
    btl->ring_atomic.free_head = 0;
}

void mca_btl_efa_ring_atomic_fini(mca_btl_efa_module_t *btl) {
    /* (progress is gone: atomics still in flight are abandoned, as the
     * general path's are) */
    for (int i = 0; i < EFA_BTL_RING_ATOMIC_RECS; ++i) {
        btl->ring_atomic.recs[i].id = 0;
    }
    btl->ring_atomic.active = 0;
    if (0 != btl->ring_atomic.sent) {
        /* the test harness looks for this line */
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: atomics through on-node rings: %lld request(s)",
                            (long long)btl->ring_atomic.sent);
    }
}

/* Module lock held. */
static void rec_free(mca_btl_efa_module_t *btl, int i) {
    btl->ring_atomic.recs[i].id = 0;
    btl->ring_atomic.recs[i].next_free = btl->ring_atomic.free_head;
    btl->ring_atomic.free_head = i;
    --btl->ring_atomic.active;
}

int mca_btl_efa_ring_atomic(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                            const efa_btl_rdma_args_t *a) {
    const size_t len = sizeof(efa_btl_ring_req_t);
    /* (a lost peer: the general path fails it at once, OPAL_ERR_UNREACH,
     * where a record in its ring would wait out btl_efa_rma_timeout) */
    if (ep->is_self || ep->lost ||
        !efa_btl_wire_ring_atomic_fits((uint32_t)a->op, (uint32_t)a->aflags) ||
        !mca_btl_efa_via_ring(btl, ep, len)) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    const int i = btl->ring_atomic.free_head;
    /* Behind sends queued for ep (its ring was full) this would overtake
     * them: the general path queues it after them instead. */
    uint8_t *f = i >= 0 && NULL == ep->flow.head ? efa_ring_reserve(ep->ring_out, len) : NULL;
    if (NULL == f) { /* every record in use, sends queued, or the ring full */
        OPAL_THREAD_UNLOCK(&btl->lock);
        return OPAL_ERR_NOT_AVAILABLE;
    }
    struct efa_btl_ring_atomic_rec *r = &btl->ring_atomic.recs[i];
    btl->ring_atomic.free_head = r->next_free;
    const uint64_t id = RING_ATOMIC_ID_BIT |
                        ((++btl->ring_atomic.seq << RING_ATOMIC_INDEX_BITS) & ~RING_ATOMIC_ID_BIT) |
                        (uint64_t)i;
    /* Every field written once, in place (the slot is shared memory). */
    efa_btl_ring_req_t *q = (efa_btl_ring_req_t *)f;
    *q = (efa_btl_ring_req_t){.type = EFA_BTL_MSG_RING_ATOMIC,
                              .flags = (uint8_t)a->aflags,
                              .op = (uint16_t)a->op,
                              .claim = EFA_BTL_CLAIM_OPEN,
                              .src = btl->my_name,
                              .req = id,
                              .addr = a->remote_address,
                              .key = a->remote_handle->rma.key,
                              .operand = a->operand,
                              .operand2 = a->operand2};
    r->id = id;
    r->claim = &q->claim;
    r->endpoint = ep;
    r->cb = a->cb;
    r->size = (int)a->size;
    r->first_seen = 0.0;
    r->taken_late = false;
    /* Counted before the target can see it: its answer, in another
     * thread's progress, counts it off. */
    OPAL_THREAD_ADD_FETCH32(&ep->outstanding, 1);
    OPAL_THREAD_ADD_FETCH32(&btl->outstanding, 1);
    efa_ring_commit(ep->ring_out, len);
    r->pos = efa_shm_outbox_committed(ep->outbox);
    ++btl->ring.sent;
    ++btl->ring_atomic.active;
    ++btl->ring_atomic.sent;
    OPAL_THREAD_UNLOCK(&btl->lock);
    return OPAL_SUCCESS;
}

/* The operation of record r is over with status (its record freed by the
 * caller, whose copy this is). */
static void complete(mca_btl_efa_module_t *btl, const struct efa_btl_ring_atomic_rec *r,
                     int status) {
    mca_btl_efa_endpoint_t *ep = r->endpoint;
    OPAL_THREAD_ADD_FETCH32(&ep->outstanding, -1);
    OPAL_THREAD_ADD_FETCH32(&btl->outstanding, -1);
    /* (nor is the upper layer called once it has gone: see frag_finish) */
    if (mca_btl_efa_upper_alive(btl, ep)) {
        mca_btl_efa_rdma_cb_call(btl, ep, &r->cb, status);
    }
}

bool mca_btl_efa_ring_atomic_answered(mca_btl_efa_module_t *btl, const efa_btl_rma_t *rma,
                                      const mca_btl_efa_answer_from_t *from) {
    if (!mca_btl_efa_ring_atomic_id(rma->req)) {
        return false; /* the general path's */
    }
    mca_btl_efa_ring_atomic_answer(btl, rma->req, rma->status, rma->operand, from);
    return true;
}

void mca_btl_efa_ring_atomic_answer(mca_btl_efa_module_t *btl, uint64_t id, int status,
                                    uint64_t operand, const mca_btl_efa_answer_from_t *from) {
    const int i = (int)(id & ((1u << RING_ATOMIC_INDEX_BITS) - 1));
    struct efa_btl_ring_atomic_rec r;
    bool found = false, foreign = false;
    OPAL_THREAD_LOCK(&btl->lock);
    if (i < EFA_BTL_RING_ATOMIC_RECS && id == btl->ring_atomic.recs[i].id) {
        /* (an id is a guess away: only the target's answer is taken) */
        foreign = !mca_btl_efa_answer_from_target(btl, btl->ring_atomic.recs[i].endpoint, from);
        if (!foreign) {
            r = btl->ring_atomic.recs[i];
            rec_free(btl, i);
            found = true;
        }
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    if (foreign) {
        return;
    }
    if (!found) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: an answer for no request in flight (id 0x%llx) dropped",
                            (unsigned long long)id);
        return;
    }
    if (OPAL_SUCCESS == status && NULL != r.cb.local_address) {
        if (4 == r.size) {
            const uint32_t v = (uint32_t)operand;
            memcpy(r.cb.local_address, &v, 4);
        } else {
            memcpy(r.cb.local_address, &operand, 8);
        }
    }
    complete(btl, &r, status);
}

/* Can the request of record r still be named in its slot?  The sender
 * writes a slot again only after the target has read it; the module lock
 * is held, so no write is under way. */
static bool slot_intact(const struct efa_btl_ring_atomic_rec *r) {
    const efa_shm_outbox_t *out = r->endpoint->outbox;
    return NULL != out &&
           efa_shm_outbox_committed(out) - r->pos < (uint64_t)efa_shm_outbox_slots(out);
}

/* Failed at most per call (the rest at the next check). */
#define EXPIRE_BATCH 16

int mca_btl_efa_ring_atomic_expire(mca_btl_efa_module_t *btl, double now, double limit,
                                   double paused) {
    static int reported = 0;
    struct efa_btl_ring_atomic_rec expired[EXPIRE_BATCH];
    int n = 0;
    OPAL_THREAD_LOCK(&btl->lock);
    if (OPAL_UNLIKELY(paused > 0.0)) {
        /* Time this process spent away from progress is no silence of the
         * target's (as for the general path's requests). */
        for (int i = 0; i < EFA_BTL_RING_ATOMIC_RECS && 0 != btl->ring_atomic.active; ++i) {
            if (0 != btl->ring_atomic.recs[i].id && 0.0 != btl->ring_atomic.recs[i].first_seen) {
                btl->ring_atomic.recs[i].first_seen += paused;
            }
        }
    }
    for (int i = 0;
         i < EFA_BTL_RING_ATOMIC_RECS && 0 != btl->ring_atomic.active && n < EXPIRE_BATCH; ++i) {
        struct efa_btl_ring_atomic_rec *r = &btl->ring_atomic.recs[i];
        if (0 == r->id) {
            continue;
        }
        if (0.0 == r->first_seen) {
            r->first_seen = now;
            continue;
        }
        if (now - r->first_seen < limit) {
            continue;
        }
        /* Not started yet: cancelled, so that the target drops it.  One
         * the target took is carried out and answered at once, unless its
         * answer was lost: it gets one more limit (failed at once, an
         * atomic the target took as the limit passed was reported failed
         * though applied, and the result it answers dropped), then fails
         * (a lost target's at once). */
        if (slot_intact(r) && !r->taken_late &&
            !efa_btl_wire_claim_move(r->claim, EFA_BTL_CLAIM_CANCELLED) &&
            !__atomic_load_n(&r->endpoint->lost, __ATOMIC_RELAXED)) {
            r->taken_late = true;
            r->first_seen = now;
            continue;
        }
        expired[n++] = *r;
        rec_free(btl, i);
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    for (int k = 0; k < n; ++k) {
        if (reported++ < 10) {
            opal_output(0,
                        "btl:efa: a one-sided atomic of %d bytes to %s got no answer for %d s "
                        "(btl_efa_rma_timeout): it fails; the target's answers were lost or it "
                        "stopped progressing",
                        (int)expired[k].size, OPAL_NAME_PRINT(expired[k].endpoint->name),
                        (int)limit);
        }
        complete(btl, &expired[k], OPAL_ERR_TIMEOUT);
    }
    return n;
}
