/*
 * btl_efa module: endpoints, fragments and the two-sided path.
 */
#include "btl_efa.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_errno.h>

#include "opal/class/opal_bitmap.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

#define FRAGS_PER_SLAB 16

/* Sends of an answer (RESP) after the first that failed. */
#define EFA_BTL_RESP_RETRIES 3

typedef struct efa_btl_slab {
    efa_btl_frag_t *frags;
    uint8_t *bufs;
    efa_mr_t *mr;
} efa_btl_slab_t;

static uint64_t name_key(const opal_process_name_t *name) {
    uint64_t key;
    memcpy(&key, name, sizeof(key));
    return key;
}

/* ---- fragments ---- */

static void frag_complete(efa_op_t *op, const efa_cqe_t *cqe);

static int grow(mca_btl_efa_module_t *btl) {
    efa_btl_slab_t *slab = calloc(1, sizeof(*slab));
    void **slabs = realloc(btl->slabs, sizeof(void *) * (size_t)(btl->num_slabs + 1));
    if (NULL == slab || NULL == slabs) {
        free(slab);
        if (slabs) {
            btl->slabs = slabs;
        }
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    btl->slabs = slabs;
    slab->frags = calloc(FRAGS_PER_SLAB, sizeof(efa_btl_frag_t));
    if (NULL == slab->frags ||
        0 != posix_memalign((void **)&slab->bufs, 4096, FRAGS_PER_SLAB * btl->frag_size)) {
        free(slab->frags);
        free(slab);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (efa_core_get_info(btl->core)->mr_local) {
        int err = 0;
        slab->mr = efa_core_mr_acquire(btl->core, slab->bufs, FRAGS_PER_SLAB * btl->frag_size,
                                       FI_SEND | FI_RECV | FI_READ | FI_WRITE, &err);
        if (NULL == slab->mr) {
            free(slab->bufs);
            free(slab->frags);
            free(slab);
            return mca_common_efa_fi_to_opal(err);
        }
    }
    for (int i = 0; i < FRAGS_PER_SLAB; ++i) {
        efa_btl_frag_t *frag = &slab->frags[i];
        OBJ_CONSTRUCT(&frag->base, mca_btl_base_descriptor_t);
        frag->op.complete = frag_complete;
        frag->buf = slab->bufs + (size_t)i * btl->frag_size;
        frag->desc = slab->mr ? efa_mr_desc(slab->mr) : NULL;
        frag->next = btl->free_frags;
        btl->free_frags = frag;
    }
    btl->slabs[btl->num_slabs++] = slab;
    return OPAL_SUCCESS;
}

/* The module lock is held. */
efa_btl_frag_t *mca_btl_efa_frag_get_locked(mca_btl_efa_module_t *btl) {
    if (NULL == btl->free_frags) {
        (void)grow(btl);
    }
    efa_btl_frag_t *frag = btl->free_frags;
    if (NULL == frag) {
        return NULL;
    }
    btl->free_frags = frag->next;
    frag->next = NULL;
    frag->endpoint = NULL;
    frag->user = false;
    frag->posted = false;
    frag->req_id = 0;
    frag->retries = 0;
    frag->err = 0;
    frag->base.des_segments = frag->segments;
    frag->base.des_segment_count = 1;
    frag->base.des_cbfunc = NULL;
    frag->base.des_cbdata = NULL;
    frag->base.des_context = NULL;
    frag->base.des_flags = 0;
    frag->base.order = MCA_BTL_NO_ORDER;
    frag->segments[0].seg_addr.pval = frag->buf + sizeof(efa_btl_hdr_t);
    frag->segments[0].seg_len = 0;
    frag->data_mr = NULL;
    frag->data_desc = NULL;
    frag->inject = false;
    frag->inner = frag->inner_last = NULL;
    frag->inner_count = 0;
    return frag;
}

efa_btl_frag_t *mca_btl_efa_frag_get(mca_btl_efa_module_t *btl) {
    OPAL_THREAD_LOCK(&btl->lock);
    efa_btl_frag_t *frag = mca_btl_efa_frag_get_locked(btl);
    OPAL_THREAD_UNLOCK(&btl->lock);
    return frag;
}

void mca_btl_efa_frag_return(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag) {
    if (NULL != frag->data_mr) {
        if (NULL != btl->core) {
            efa_core_mr_release(btl->core, frag->data_mr);
        }
        frag->data_mr = NULL;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    frag->next = btl->free_frags;
    btl->free_frags = frag;
    OPAL_THREAD_UNLOCK(&btl->lock);
}

/* A send is over (sent, or failed for good).  The upper layer hears of
 * its descriptors only while it is there: a completion can come after
 * del_procs, or (the provider may report a send complete well after the
 * peer received it) during finalize, when the pml that set des_cbfunc has
 * been closed and its code unloaded. */
static void frag_finish(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag, int status) {
    if (frag->inner) {
        /* A batch: each message packed in it ends as the batch did. */
        efa_btl_frag_t *inner = frag->inner;
        frag->inner = frag->inner_last = NULL;
        while (inner) {
            efa_btl_frag_t *next = inner->next;
            frag_finish(btl, inner, status);
            inner = next;
        }
        mca_btl_efa_frag_return(btl, frag);
        return;
    }
    if (frag->user) {
        if (frag->base.des_cbfunc && mca_btl_efa_upper_alive(btl, frag->endpoint)) {
            frag->base.des_cbfunc(&btl->super, frag->endpoint, &frag->base, status);
        }
        /* Once finalize began nobody is left to free a descriptor it kept. */
        if ((frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) || btl->finalizing) {
            mca_btl_efa_frag_return(btl, frag);
        }
        return;
    }
    if (OPAL_SUCCESS != status && frag->req_id) {
        mca_btl_efa_rdma_fail_chunk(btl, frag->req_id, status);
    } else if (OPAL_SUCCESS != status && EFA_BTL_MSG_RESP == ((efa_btl_hdr_t *)frag->buf)->type &&
               frag->retries < EFA_BTL_RESP_RETRIES && !btl->finalizing) {
        /* An answer is the initiator's only news of its operation: sent
         * again a few times before it is given up (the initiator's
         * btl_efa_rma_timeout then reports the operation failed). */
        ++frag->retries;
        frag->err = 0;
        if (OPAL_SUCCESS == mca_btl_efa_frag_post(btl, frag)) {
            return;
        }
    }
    if (OPAL_SUCCESS != status && EFA_BTL_MSG_RESP == ((efa_btl_hdr_t *)frag->buf)->type) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: an answer to a one-sided request is lost (its send failed "
                            "%d times); the initiator's operation will time out",
                            frag->retries + 1);
    }
    mca_btl_efa_frag_return(btl, frag);
}

/* The upper layer's handler of fatal errors (ob1's aborts the job). */
static mca_btl_base_module_error_cb_fn_t efa_error_cb = NULL;

static int efa_register_error(struct mca_btl_base_module_t *btl,
                              mca_btl_base_module_error_cb_fn_t cbfunc) {
    (void)btl;
    efa_error_cb = cbfunc;
    return OPAL_SUCCESS;
}

static void frag_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    efa_btl_frag_t *frag = (efa_btl_frag_t *)op;
    frag->posted = false;
    OPAL_THREAD_ADD_FETCH32(&mca_btl_efa_module.posted, -1);
    int status = cqe->err ? mca_common_efa_fi_to_opal(cqe->err) : OPAL_SUCCESS;
    if (cqe->err) {
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: send failed: %s",
                            fi_strerror(-cqe->err));
    }
    /* The core declared the peer lost (its deadline, or the provider said
     * unreachable; the message naming it is out).  ob1 drops the failed
     * sends of its control messages (acknowledgements, FIN) and would wait
     * for ever: its error handler ends the job instead. */
    if ((-FI_ETIMEDOUT == cqe->err || -FI_EHOSTUNREACH == cqe->err) && NULL != efa_error_cb &&
        NULL != frag->endpoint && !mca_btl_efa_module.finalizing) {
        efa_error_cb(&mca_btl_efa_module.super, MCA_BTL_ERROR_FLAGS_FATAL, frag->endpoint->proc,
                     "btl_efa: peer unreachable (common_efa_peer_timeout)");
    }
    frag_finish(&mca_btl_efa_module, frag, status);
    /* The provider's queue has room again. */
    (void)mca_btl_efa_drain_pending(&mca_btl_efa_module);
}

/* ---- sending: credits and the endpoints' queues ---- */

/* The module lock is held. */
static void waiting_add(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    if (ep->waiting) {
        return;
    }
    ep->waiting = true;
    ep->next_waiting = NULL;
    if (btl->waiting_tail) {
        btl->waiting_tail->next_waiting = ep;
    } else {
        btl->waiting_head = ep;
    }
    btl->waiting_tail = ep;
    OPAL_THREAD_ADD_FETCH32(&btl->num_waiting, 1);
}

/* post_locked's answer when the peer's ring is full: only this endpoint
 * waits (the provider's queue may still have room for others). */
#define EFA_BTL_RING_FULL 1

/* Copy a fragment into the peer's ring.  The copy is the send: the
 * fragment is finished at once, a descriptor of the upper layer from
 * progress (its callback never comes from inside a send call).  The module
 * lock is held. */
static int ring_post_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                            efa_btl_frag_t *frag) {
    int rc;
    if (OPAL_LIKELY(frag->base.des_segment_count < 2)) {
        rc = efa_shm_outbox_send(ep->outbox, frag->buf, frag->send_len);
    } else {
        /* In place: the headers from the fragment and the data from the
         * caller's buffer, gathered into the slot. */
        const size_t data_len = frag->segments[1].seg_len;
        const size_t head_len = frag->send_len - data_len;
        uint8_t *slot = efa_shm_outbox_reserve(ep->outbox, frag->send_len);
        rc = -FI_EAGAIN;
        if (NULL != slot) {
            memcpy(slot, frag->buf, head_len);
            memcpy(slot + head_len, frag->segments[1].seg_addr.pval, data_len);
            efa_shm_outbox_commit(ep->outbox, frag->send_len);
            rc = 0;
        }
    }
    if (0 != rc) {
        ++btl->ring_full;
        return EFA_BTL_RING_FULL;
    }
    ++btl->ring_sent;
    /* Finished here (below), whether or not it was to be injected: the
     * caller must not recycle or finish it again. */
    frag->inject = false;
    if (frag->user) {
        frag->next = btl->ring_done;
        btl->ring_done = frag;
        OPAL_THREAD_ADD_FETCH32(&btl->num_ring_done, 1);
    } else {
        frag->next = btl->free_frags;
        btl->free_frags = frag;
    }
    return 0;
}

/* Finish the fragments sent through rings (see ring_post_locked). */
static void finish_ring_done(mca_btl_efa_module_t *btl) {
    OPAL_THREAD_LOCK(&btl->lock);
    efa_btl_frag_t *done = btl->ring_done;
    btl->ring_done = NULL;
    btl->num_ring_done = 0;
    OPAL_THREAD_UNLOCK(&btl->lock);
    /* The list is last-in first-out: put it back in sending order. */
    efa_btl_frag_t *ordered = NULL;
    while (done) {
        efa_btl_frag_t *next = done->next;
        done->next = ordered;
        ordered = done;
        done = next;
    }
    while (ordered) {
        efa_btl_frag_t *frag = ordered;
        ordered = frag->next;
        frag_finish(btl, frag, OPAL_SUCCESS);
    }
}

/* One attempt to send a fragment, through the peer's ring when it fits a
 * slot, else by the provider, returning the credits owed to its
 * destination with it.  The module lock is held. */
static int post_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                       efa_btl_frag_t *frag) {
    efa_btl_hdr_t *hdr = (efa_btl_hdr_t *)frag->buf;
    int32_t give = ep->owed > UINT16_MAX ? UINT16_MAX : ep->owed;
    hdr->credits = (uint16_t)give;
    if (EFA_BTL_RING_ATTACHED == ep->ring_state && frag->send_len <= btl->ring_max_frame) {
        /* Ring frames take no credit (the ring has its own limit) but
         * carry the credits owed for the provider's messages. */
        int rc = ring_post_locked(btl, ep, frag);
        if (0 == rc) {
            ep->owed -= give;
            if (ep->owed < btl->credit_threshold) {
                ep->credit_due = false;
            }
        }
        return rc;
    }
    int rc;
    if (frag->inject) {
        /* The provider copies it before returning and reports nothing:
         * the caller recycles the fragment at once. */
        rc = efa_ctx_try_inject(btl->ctx, frag->buf, frag->send_len, frag->dest);
    } else {
        /* Counted before the provider has it: another thread's progress may
         * complete it before fi_send returns. */
        frag->posted = true;
        OPAL_THREAD_ADD_FETCH32(&btl->posted, 1);
        if (OPAL_LIKELY(frag->base.des_segment_count < 2)) {
            rc = efa_ctx_try_send(btl->ctx, frag->buf, frag->send_len, frag->desc, frag->dest,
                                  &frag->op);
        } else {
            /* In place: headers from the fragment, data from the caller. */
            const size_t data_len = frag->segments[1].seg_len;
            struct iovec iov[2] = {
                {.iov_base = frag->buf, .iov_len = frag->send_len - data_len},
                {.iov_base = frag->segments[1].seg_addr.pval, .iov_len = data_len}};
            void *desc[2] = {frag->desc, frag->data_desc};
            rc = efa_ctx_try_sendv(btl->ctx, iov, desc, 2, frag->dest, &frag->op);
        }
        if (0 != rc) {
            frag->posted = false;
            OPAL_THREAD_ADD_FETCH32(&btl->posted, -1);
        }
    }
    if (0 == rc) {
        ep->owed -= give;
        if (ep->owed < btl->credit_threshold) {
            ep->credit_due = false;
        }
        if (EFA_BTL_MSG_CREDIT != hdr->type) {
            --ep->credits;
        }
    }
    return rc;
}

/* Can the fragment go now as far as credits are concerned?  Only the
 * provider's messages take them. */
static inline bool has_credit(const mca_btl_efa_module_t *btl, const mca_btl_efa_endpoint_t *ep,
                              const efa_btl_frag_t *frag) {
    return ep->credits > 0 ||
           (EFA_BTL_RING_ATTACHED == ep->ring_state && frag->send_len <= btl->ring_max_frame);
}

/* Post what the endpoint's queue holds while it has credits and the
 * provider (or the peer's ring) takes them, then a credit message if one
 * is due.  Fragments that failed for good are chained on *failed.  Returns
 * false when the provider queue is full.  The module lock is held. */
static bool drain_ep_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                            efa_btl_frag_t **failed) {
    while (ep->queue_head && has_credit(btl, ep, ep->queue_head)) {
        /* Messages that wait for this peer go packed, one credit for all
         * (btl_efa_batch.c); the ring carries its own frames. */
        if (btl->coalesce_bytes && EFA_BTL_RING_ATTACHED != ep->ring_state) {
            efa_btl_frag_t *batch = mca_btl_efa_batch_build_locked(btl, ep);
            if (batch) {
                int rc = post_locked(btl, ep, batch);
                if (0 == rc) {
                    mca_btl_efa_batch_posted_locked(btl, ep, batch);
                    continue;
                }
                mca_btl_efa_batch_discard_locked(btl, batch);
                if (-FI_EAGAIN == rc) {
                    return false;
                }
                /* Any other failure: the messages go one by one below,
                 * each with its own outcome. */
            }
        }
        efa_btl_frag_t *frag = ep->queue_head;
        /* A send through a ring reuses frag->next at once. */
        efa_btl_frag_t *next = frag->next;
        int rc = post_locked(btl, ep, frag);
        if (-FI_EAGAIN == rc) {
            return false;
        }
        if (EFA_BTL_RING_FULL == rc) {
            return true; /* this endpoint waits for the peer to read its ring */
        }
        ep->queue_head = next;
        if (NULL == ep->queue_head) {
            ep->queue_tail = NULL;
        }
        if (0 != rc) {
            frag->err = rc;
            frag->next = *failed;
            *failed = frag;
        }
    }
    if (ep->credit_due && ep->owed > 0) {
        efa_btl_frag_t *frag = mca_btl_efa_frag_get_locked(btl);
        if (NULL == frag) {
            return true; /* retried on the next drain */
        }
        efa_btl_hdr_t *hdr = (efa_btl_hdr_t *)frag->buf;
        memset(hdr, 0, sizeof(*hdr));
        hdr->type = EFA_BTL_MSG_CREDIT;
        hdr->src = btl->my_name;
        frag->send_len = sizeof(*hdr);
        frag->dest = ep->addr;
        frag->endpoint = ep;
        frag->inject = frag->send_len <= btl->inject_max;
        int rc = post_locked(btl, ep, frag);
        if (0 != rc || frag->inject) {
            frag->next = btl->free_frags;
            btl->free_frags = frag;
            if (-FI_EAGAIN == rc) {
                return false;
            }
            if (EFA_BTL_RING_FULL == rc) {
                return true; /* still due: retried on the next drain */
            }
        }
    }
    ep->credit_due = false;
    return true;
}

static void finish_failed(mca_btl_efa_module_t *btl, efa_btl_frag_t *failed) {
    while (failed) {
        efa_btl_frag_t *frag = failed;
        failed = frag->next;
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: deferred send failed: %s",
                            fi_strerror(-frag->err));
        frag_finish(btl, frag, mca_common_efa_fi_to_opal(frag->err));
    }
}

/* Post a ready fragment (header filled, send_len, dest and endpoint set).
 * Without a credit for the peer, or with the provider queue full, it joins
 * the endpoint's queue, which progress drains in order; the completion
 * callback always comes from progress. */
int mca_btl_efa_frag_post(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag) {
    mca_btl_efa_endpoint_t *ep = frag->endpoint;
    (void)mca_btl_efa_via_ring(btl, ep, frag->send_len); /* attaches on first use */
    OPAL_THREAD_LOCK(&btl->lock);
    if (NULL == ep->queue_head && has_credit(btl, ep, frag)) {
        int rc = post_locked(btl, ep, frag);
        if (0 == rc) {
            if (frag->inject && frag->user) {
                /* Its callback is due from progress (mca_btl_efa_run_done). */
                frag->next = NULL;
                if (btl->done_tail) {
                    btl->done_tail->next = frag;
                } else {
                    btl->done_head = frag;
                }
                btl->done_tail = frag;
            } else if (frag->inject) {
                frag->next = btl->free_frags;
                btl->free_frags = frag;
            }
            OPAL_THREAD_UNLOCK(&btl->lock);
            return OPAL_SUCCESS;
        }
        if (-FI_EAGAIN != rc && EFA_BTL_RING_FULL != rc) {
            OPAL_THREAD_UNLOCK(&btl->lock);
            opal_output_verbose(1, mca_common_efa_output, "btl:efa: cannot post a send: %s",
                                fi_strerror(-rc));
            return mca_common_efa_fi_to_opal(rc);
        }
    }
    frag->next = NULL;
    frag->inject = false; /* sent from the queue like any other, with a completion */
    if (ep->queue_tail) {
        ep->queue_tail->next = frag;
    } else {
        ep->queue_head = frag;
    }
    ep->queue_tail = frag;
    waiting_add(btl, ep);
    OPAL_THREAD_UNLOCK(&btl->lock);
    return OPAL_SUCCESS;
}

bool mca_btl_efa_can_send_now(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, size_t len) {
    return NULL == ep->queue_head && (ep->credits > 0 || mca_btl_efa_via_ring(btl, ep, len));
}

void mca_btl_efa_run_done(mca_btl_efa_module_t *btl) {
    if (NULL == btl->done_head) {
        return;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    efa_btl_frag_t *frag = btl->done_head;
    btl->done_head = btl->done_tail = NULL;
    OPAL_THREAD_UNLOCK(&btl->lock);
    while (frag) {
        efa_btl_frag_t *next = frag->next;
        frag_finish(btl, frag, OPAL_SUCCESS);
        frag = next;
    }
}

int mca_btl_efa_drain_pending(mca_btl_efa_module_t *btl) {
    efa_btl_frag_t *failed = NULL;
    int left;
    (void)efa_core_msg_progress(btl->core);
    if (0 != btl->num_ring_done) {
        finish_ring_done(btl);
    }
    if (0 == btl->num_waiting) {
        return 0;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    mca_btl_efa_endpoint_t *prev = NULL, *ep = btl->waiting_head;
    while (ep) {
        mca_btl_efa_endpoint_t *next = ep->next_waiting;
        bool room = drain_ep_locked(btl, ep, &failed);
        if (NULL == ep->queue_head && !ep->credit_due) {
            if (prev) {
                prev->next_waiting = next;
            } else {
                btl->waiting_head = next;
            }
            if (btl->waiting_tail == ep) {
                btl->waiting_tail = prev;
            }
            ep->waiting = false;
            ep->next_waiting = NULL;
            OPAL_THREAD_ADD_FETCH32(&btl->num_waiting, -1);
        } else {
            prev = ep;
        }
        if (!room) {
            break;
        }
        ep = next;
    }
    left = btl->num_waiting;
    OPAL_THREAD_UNLOCK(&btl->lock);
    finish_failed(btl, failed);
    return left;
}

/* A message from ep arrived: take the credits it returns and count it
 * towards what this process owes back. */
static void note_received(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                          const efa_btl_hdr_t *hdr, bool via_ring) {
    if (via_ring && 0 == hdr->credits) {
        return; /* took no credit, returns none */
    }
    OPAL_THREAD_LOCK(&btl->lock);
    ep->credits += hdr->credits;
    if (!via_ring && EFA_BTL_MSG_CREDIT != hdr->type && ++ep->owed >= btl->credit_threshold) {
        ep->credit_due = true;
        waiting_add(btl, ep);
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
}

/* ---- endpoints ---- */

mca_btl_efa_endpoint_t *mca_btl_efa_endpoint_by_name(mca_btl_efa_module_t *btl, uint64_t name,
                                                     opal_proc_t *proc) {
    void *value = NULL;
    OPAL_THREAD_LOCK(&btl->lock);
    if (OPAL_SUCCESS == opal_hash_table_get_value_uint64(&btl->endpoints, name, &value)) {
        mca_btl_efa_endpoint_t *ep = value;
        if (proc && NULL == ep->proc) {
            ep->proc = proc;
        }
        OPAL_THREAD_UNLOCK(&btl->lock);
        return ep;
    }
    OPAL_THREAD_UNLOCK(&btl->lock);

    mca_btl_efa_endpoint_t *ep = calloc(1, sizeof(*ep));
    if (NULL == ep) {
        return NULL;
    }
    memcpy(&ep->name, &name, sizeof(name));
    ep->proc = proc;
    ep->is_self = (name == btl->my_name);
    ep->credits = btl->window;
    int rc;
    ep->peer = mca_common_efa_peer_lookup(btl->core, &ep->name, &rc);
    if (NULL == ep->peer) {
        free(ep);
        return NULL;
    }
    ep->addr = ep->peer->addr[0];

    OPAL_THREAD_LOCK(&btl->lock);
    if (OPAL_SUCCESS == opal_hash_table_get_value_uint64(&btl->endpoints, name, &value)) {
        /* Another thread won the race. */
        OPAL_THREAD_UNLOCK(&btl->lock);
        efa_core_peer_put(btl->core, ep->peer);
        free(ep);
        return value;
    }
    opal_hash_table_set_value_uint64(&btl->endpoints, name, ep);
    OPAL_THREAD_UNLOCK(&btl->lock);
    return ep;
}

/* A peer that reaches this process through the provider only sends
 * unannounced (active messages into the receive pool): the core must poll
 * the provider on every progress call while it is known, not only at the
 * paced interval (efa_core_progress_paced).  Peers of the on-node channel
 * need no such interest: what they send through the provider (frames
 * larger than a slot) comes in streams that keep the provider polled. */
static void hold_net_interest(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    if (ep->is_self || EFA_BTL_RING_NONE != ep->ring_state) {
        return;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    if (!ep->net_interest) {
        ep->net_interest = true;
        ++btl->net_interest;
        efa_core_net_interest(btl->core, 1);
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
}

static int efa_add_procs(struct mca_btl_base_module_t *base, size_t nprocs,
                         struct opal_proc_t **procs, struct mca_btl_base_endpoint_t **endpoints,
                         struct opal_bitmap_t *reachable) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    /* Before anything is registered or sent one-sided (and before the
     * report, which says it). */
    mca_btl_efa_mode_agree(btl);
    mca_common_efa_report(btl->core);
    for (size_t i = 0; i < nprocs; ++i) {
        mca_btl_efa_endpoint_t *ep =
            mca_btl_efa_endpoint_by_name(btl, name_key(&procs[i]->proc_name), procs[i]);
        endpoints[i] = ep;
        if (ep) {
            mca_btl_efa_mode_add_peer(btl, ep, procs[i]);
            mca_btl_efa_ring_add_proc(btl, ep, procs[i]);
            hold_net_interest(btl, ep);
            ep->detached = false;
            if (reachable) {
                opal_bitmap_set_bit(reachable, (int)i);
            }
        }
    }
    return OPAL_SUCCESS;
}

static int efa_del_procs(struct mca_btl_base_module_t *base, size_t nprocs,
                         struct opal_proc_t **procs, struct mca_btl_base_endpoint_t **peers) {
    /* Endpoints stay until finalize: a peer's one-sided requests may still
     * need the way back, and sends to the peer may still be in flight.  But
     * the upper layer is done with them (ob1 calls this from MPI_Finalize,
     * then closes and unloads itself before the BTLs are finalized): what
     * still completes for them, or arrives from them, is not handed up. */
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    (void)procs;
    OPAL_THREAD_LOCK(&btl->lock);
    for (size_t i = 0; peers && i < nprocs; ++i) {
        if (peers[i]) {
            peers[i]->detached = true;
        }
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    return OPAL_SUCCESS;
}

/* ---- two-sided ---- */

static mca_btl_base_descriptor_t *efa_alloc(struct mca_btl_base_module_t *base,
                                            struct mca_btl_base_endpoint_t *endpoint, uint8_t order,
                                            size_t size, uint32_t flags) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    (void)order;
    if (size > btl->super.btl_max_send_size) {
        return NULL;
    }
    efa_btl_frag_t *frag = mca_btl_efa_frag_get(btl);
    if (NULL == frag) {
        return NULL;
    }
    frag->user = true;
    frag->endpoint = endpoint;
    frag->segments[0].seg_len = size;
    frag->base.des_flags = flags;
    return &frag->base;
}

static efa_btl_frag_t *frag_of(mca_btl_base_descriptor_t *des) {
    return (efa_btl_frag_t *)((char *)des - offsetof(efa_btl_frag_t, base));
}

static int efa_free(struct mca_btl_base_module_t *base, mca_btl_base_descriptor_t *des) {
    mca_btl_efa_frag_return((mca_btl_efa_module_t *)base, frag_of(des));
    return OPAL_SUCCESS;
}

static int pack(opal_convertor_t *conv, void *dst, size_t *size) {
    struct iovec iov = {.iov_base = dst, .iov_len = *size};
    uint32_t iov_count = 1;
    size_t max_data = *size;
    int rc = opal_convertor_pack(conv, &iov, &iov_count, &max_data);
    if (rc < 0) {
        return OPAL_ERROR;
    }
    *size = max_data;
    return OPAL_SUCCESS;
}

/* Reference *size bytes of the convertor's contiguous data in place as the
 * fragment's second segment.  With FI_MR_LOCAL the memory needs a
 * descriptor from the registration cache; false (nothing consumed) when
 * that fails, and the caller copies instead. */
static bool reference_in_place(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag,
                               opal_convertor_t *conv, size_t *size) {
    if (btl->mr_local) {
        void *ptr = NULL;
        int err = 0;
        opal_convertor_get_current_pointer(conv, &ptr);
        frag->data_mr = efa_core_mr_acquire(btl->core, ptr, *size, FI_SEND, &err);
        if (NULL == frag->data_mr) {
            return false;
        }
        frag->data_desc = efa_mr_desc(frag->data_mr);
    }
    /* A contiguous convertor hands out a pointer to the data when given no
     * buffer (and advances as if it had packed). */
    struct iovec iov = {.iov_base = NULL, .iov_len = *size};
    uint32_t iov_count = 1;
    size_t max_data = *size;
    (void)opal_convertor_pack(conv, &iov, &iov_count, &max_data);
    frag->segments[1].seg_addr.pval = iov.iov_base;
    frag->segments[1].seg_len = max_data;
    frag->base.des_segment_count = 2;
    *size = max_data;
    return true;
}

static mca_btl_base_descriptor_t *efa_prepare_src(struct mca_btl_base_module_t *base,
                                                  struct mca_btl_base_endpoint_t *endpoint,
                                                  struct opal_convertor_t *convertor, uint8_t order,
                                                  size_t reserve, size_t *size, uint32_t flags) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    (void)order;
    if (reserve > btl->super.btl_max_send_size) {
        return NULL;
    }
    if (reserve + *size > btl->super.btl_max_send_size) {
        *size = btl->super.btl_max_send_size - reserve;
    }
    efa_btl_frag_t *frag = mca_btl_efa_frag_get(btl);
    if (NULL == frag) {
        return NULL;
    }
    /* Contiguous data of a message above the provider's inject size (or
     * from btl_efa_inplace_min on) is sent from the caller's buffer, which
     * ob1 leaves alone until the callback: no copy on this side, and a
     * provider that moves such messages without a bounce buffer (shm, by
     * CMA) reads it where it is. */
    const size_t msg_len = sizeof(efa_btl_hdr_t) + reserve + *size;
    bool in_place = (btl->inplace_min ? *size >= btl->inplace_min : msg_len > btl->inject_max) &&
                    (btl->super.btl_flags & MCA_BTL_FLAGS_SEND_INPLACE) &&
                    (convertor->flags & CONVERTOR_NO_OP) &&
                    !(convertor->flags & MCA_BTL_EFA_CONVERTOR_DEVICE) &&
                    reference_in_place(btl, frag, convertor, size);
    if (!in_place) {
        uint8_t *data = (uint8_t *)frag->segments[0].seg_addr.pval;
        if (*size > 0 && OPAL_SUCCESS != pack(convertor, data + reserve, size)) {
            mca_btl_efa_frag_return(btl, frag);
            return NULL;
        }
    }
    frag->user = true;
    frag->endpoint = endpoint;
    frag->segments[0].seg_len = in_place ? reserve : reserve + *size;
    frag->base.des_flags = flags;
    return &frag->base;
}

static void fill_am(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag,
                    mca_btl_efa_endpoint_t *endpoint, mca_btl_base_tag_t tag, size_t len) {
    efa_btl_hdr_t *hdr = (efa_btl_hdr_t *)frag->buf;
    hdr->type = EFA_BTL_MSG_AM;
    hdr->tag = tag;
    hdr->credits = 0;
    hdr->len = (uint32_t)len;
    hdr->src = btl->my_name;
    frag->send_len = sizeof(*hdr) + len;
    frag->dest = endpoint->addr;
    frag->endpoint = endpoint;
}

static int efa_send(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *endpoint,
                    struct mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    efa_btl_frag_t *frag = frag_of(des);
    (void)mca_btl_efa_drain_pending(btl);
    size_t len = frag->segments[0].seg_len;
    if (frag->base.des_segment_count > 1) {
        len += frag->segments[1].seg_len;
    }
    fill_am(btl, frag, endpoint, tag, len);
    /* A small copied fragment is injected: no provider completion to reap.
     * The callback always comes from progress, never from inside this call
     * (an injected fragment's from mca_btl_efa_run_done). */
    frag->inject = frag->base.des_segment_count < 2 && frag->send_len <= btl->inject_max;
    return mca_btl_efa_frag_post(btl, frag);
}

/* sendi through the peer's ring: header and payload are written straight
 * into the slot, no fragment involved.  OPAL_ERR_RESOURCE_BUSY when the
 * ring is full or sends to the peer are queued (see sendi_busy). */
static int ring_sendi(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                      opal_convertor_t *convertor, const void *header, size_t header_size,
                      size_t payload_size, mca_btl_base_tag_t tag, size_t total) {
    OPAL_THREAD_LOCK(&btl->lock);
    uint8_t *slot = NULL;
    if (NULL == ep->queue_head) {
        slot = efa_shm_outbox_reserve(ep->outbox, total);
        if (NULL == slot) {
            ++btl->ring_full;
        }
    }
    if (NULL == slot) {
        OPAL_THREAD_UNLOCK(&btl->lock);
        return OPAL_ERR_RESOURCE_BUSY;
    }
    uint8_t *data = slot + sizeof(efa_btl_hdr_t);
    memcpy(data, header, header_size);
    size_t size = payload_size;
    if (payload_size > 0 && OPAL_SUCCESS != pack(convertor, data + header_size, &size)) {
        OPAL_THREAD_UNLOCK(&btl->lock); /* reserved, never committed: nothing sent */
        return OPAL_ERROR;
    }
    efa_btl_hdr_t hdr;
    int32_t give = ep->owed > UINT16_MAX ? UINT16_MAX : ep->owed;
    hdr.type = EFA_BTL_MSG_AM;
    hdr.tag = tag;
    hdr.credits = (uint16_t)give;
    hdr.len = (uint32_t)(header_size + size);
    hdr.src = btl->my_name;
    memcpy(slot, &hdr, sizeof(hdr));
    efa_shm_outbox_commit(ep->outbox, sizeof(hdr) + header_size + size);
    ++btl->ring_sent;
    ep->owed -= give;
    if (ep->owed < btl->credit_threshold) {
        ep->credit_due = false;
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    return OPAL_SUCCESS;
}

/* sendi cannot send now (no credit, sends to the peer queued, the ring
 * full): OPAL_ERR_RESOURCE_BUSY with a descriptor of the message's size, as
 * the BTL interface asks, which the caller fills and hands to btl_send,
 * where it queues in order.  Without one, Open MPI 5's ob1 parks a control
 * message (FIN, ACK) on its own pending list and retries it only when a
 * descriptor of this BTL completes: after a window of rendezvous receives
 * nothing else may complete, and the peer waits for ever. */
static int sendi_busy(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *endpoint,
                      size_t size, uint32_t flags, mca_btl_base_descriptor_t **descriptor) {
    if (descriptor) {
        *descriptor = efa_alloc(base, endpoint, MCA_BTL_NO_ORDER, size, flags);
    }
    return OPAL_ERR_RESOURCE_BUSY;
}

static int efa_sendi(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *endpoint,
                     struct opal_convertor_t *convertor, void *header, size_t header_size,
                     size_t payload_size, uint8_t order, uint32_t flags, mca_btl_base_tag_t tag,
                     mca_btl_base_descriptor_t **descriptor) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    (void)order;
    if (descriptor) {
        *descriptor = NULL;
    }
    const size_t total = sizeof(efa_btl_hdr_t) + header_size + payload_size;
    if (mca_btl_efa_via_ring(btl, endpoint, total)) {
        int rc =
            ring_sendi(btl, endpoint, convertor, header, header_size, payload_size, tag, total);
        if (OPAL_ERR_RESOURCE_BUSY == rc) {
            return sendi_busy(base, endpoint, header_size + payload_size, flags, descriptor);
        }
        return rc;
    }
    if (header_size + payload_size > btl->super.btl_eager_limit ||
        !mca_btl_efa_can_send_now(btl, endpoint, total)) {
        return sendi_busy(base, endpoint, header_size + payload_size, flags, descriptor);
    }
    efa_btl_frag_t *frag = mca_btl_efa_frag_get(btl);
    if (NULL == frag) {
        return OPAL_ERR_RESOURCE_BUSY; /* none to hand out either */
    }
    uint8_t *data = (uint8_t *)frag->segments[0].seg_addr.pval;
    memcpy(data, header, header_size);
    size_t size = payload_size;
    if (payload_size > 0 && OPAL_SUCCESS != pack(convertor, data + header_size, &size)) {
        mca_btl_efa_frag_return(btl, frag);
        return OPAL_ERROR;
    }
    fill_am(btl, frag, endpoint, tag, header_size + size);
    /* Nobody waits for this fragment's completion: a small one is injected
     * and recycled at once, no completion to reap. */
    frag->inject = frag->send_len <= btl->inject_max;
    int rc = mca_btl_efa_frag_post(btl, frag);
    if (OPAL_SUCCESS != rc) {
        mca_btl_efa_frag_return(btl, frag);
        return OPAL_ERR_RESOURCE_BUSY;
    }
    return OPAL_SUCCESS;
}

/* ---- receive ---- */

void mca_btl_efa_on_message(void *arg, efa_ctx_t *ctx, void *buf, size_t len, int err) {
    mca_btl_efa_module_t *btl = arg;
    (void)ctx;
    if (err) {
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: receive failed: %s",
                            fi_strerror(-err));
        return;
    }
    mca_btl_efa_deliver(btl, buf, len, false);
}

/* Hand one active message up (kind: its parse; a truncated or mistagged
 * one is dropped here, with a word at verbose 1). */
static void deliver_am(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                       efa_btl_wire_kind_t kind, const efa_btl_wire_msg_t *msg) {
    if (!mca_btl_efa_upper_alive(btl, ep)) {
        return; /* nobody left to take it (see frag_finish) */
    }
    if (EFA_BTL_WIRE_AM_TRUNCATED == kind) {
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: truncated fragment dropped");
        return;
    }
    if (EFA_BTL_WIRE_AM_BAD_TAG == kind) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: fragment with tag %d (no such tag) dropped", msg->hdr.tag);
        return;
    }
    const mca_btl_active_message_callback_t *reg =
        &mca_btl_base_active_message_trigger[msg->hdr.tag];
    if (NULL == reg->cbfunc) {
        return;
    }
    mca_btl_base_segment_t seg;
    seg.seg_addr.pval = (void *)msg->payload;
    seg.seg_len = msg->payload_len;
    mca_btl_efa_deliver_am(&btl->super, ep, msg->hdr.tag, &seg);
}

void mca_btl_efa_deliver(mca_btl_efa_module_t *btl, const void *buf, size_t len, bool via_ring) {
    /* Lengths and type are checked by efa_btl_wire_parse (common/
     * efa_btl_wire.h, fuzzed), which reads each header once, into a copy:
     * a ring slot is the sender's memory too, and a length checked must be
     * the length used. */
    efa_btl_wire_msg_t msg;
    const efa_btl_wire_kind_t kind = efa_btl_wire_parse(buf, len, MCA_BTL_TAG_MAX, &msg);
    if (EFA_BTL_WIRE_SHORT == kind) {
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: short message dropped");
        return;
    }
    const efa_btl_hdr_t *hdr = &msg.hdr;
    mca_btl_efa_endpoint_t *ep = btl->last_src;
    if (NULL == ep || name_key(&ep->name) != hdr->src) {
        ep = mca_btl_efa_endpoint_by_name(btl, hdr->src, NULL);
        btl->last_src = ep;
    }
    if (NULL != ep) {
        note_received(btl, ep, hdr, via_ring);
    }
    switch (kind) {
    case EFA_BTL_WIRE_AM:
    case EFA_BTL_WIRE_AM_TRUNCATED:
    case EFA_BTL_WIRE_AM_BAD_TAG:
        deliver_am(btl, ep, kind, &msg);
        return;
    case EFA_BTL_WIRE_BATCH: {
        /* Messages packed by the sender's coalescing (btl_efa_batch.c),
         * handed up in the order they were sent. */
        size_t off = 0;
        efa_btl_wire_kind_t entry;
        efa_btl_wire_msg_t one;
        while (efa_btl_wire_batch_next(msg.payload, msg.payload_len, &off, MCA_BTL_TAG_MAX, &entry,
                                       &one)) {
            if (EFA_BTL_WIRE_BATCH_BAD_ENTRY == entry) {
                opal_output_verbose(1, mca_common_efa_output,
                                    "btl:efa: malformed entry in a batch: it and the rest of "
                                    "the batch dropped");
                return;
            }
            deliver_am(btl, ep, entry, &one);
        }
        return;
    }
    case EFA_BTL_WIRE_BATCH_TRUNCATED:
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: truncated batch dropped");
        return;
    case EFA_BTL_WIRE_SHORT_REQUEST:
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: short request dropped");
        return;
    case EFA_BTL_WIRE_TRUNCATED_REQUEST:
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: truncated request dropped");
        return;
    case EFA_BTL_WIRE_REQUEST:
        mca_btl_efa_rdma_on_request(btl, hdr, &msg.rma, msg.payload);
        return;
    case EFA_BTL_WIRE_RESPONSE:
        mca_btl_efa_rdma_on_response(btl, &msg.rma, msg.payload, msg.payload_len);
        return;
    case EFA_BTL_WIRE_UNKNOWN_TYPE:
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: unknown message type %d dropped",
                            hdr->type);
        return;
    default: /* SHORT (above), CREDIT: nothing more to do */
        return;
    }
}

/* ---- setup ---- */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* How long finalize waits for the provider to give back the fragments it
 * holds.  Only a peer that died or stopped progressing makes it wait that
 * long; normally the last completions arrive within milliseconds. */
#define EFA_BTL_FINALIZE_WAIT 2.0

static int efa_finalize(struct mca_btl_base_module_t *base) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    uint64_t key;
    void *value, *node;
    if (NULL == btl->core) {
        return OPAL_SUCCESS;
    }
    /* The pml and osc are closed, and their code may be unloaded: from now
     * on nothing is handed to them (mca_btl_efa_upper_alive). */
    btl->finalizing = true;
    opal_atomic_wmb();
    /* Let queued sends go, and let the provider complete what it holds:
     * a completion must not arrive once the fragment is freed.  Sends the
     * peer has long received may still be reported late (shm). */
    const double t0 = now_seconds();
    const int posted0 = btl->posted;
    while (btl->num_waiting > 0 || btl->outstanding > 0 || btl->posted > 0 || btl->done_head) {
        if (now_seconds() - t0 > EFA_BTL_FINALIZE_WAIT) {
            break;
        }
        mca_btl_efa_run_done(btl);
        mca_btl_efa_drain_pending(btl);
        (void)mca_btl_efa_ring_poll(btl);
        efa_core_progress(btl->core);
    }
    mca_btl_efa_batch_report(btl);
    /* Peers' frames from now on land in a file nobody reads. */
    mca_btl_efa_ring_fini(btl);
    /* Cancels the receive pool (and drives progress once more). */
    efa_core_msg_set_handler(btl->core, NULL, NULL);
    opal_output_verbose(10, mca_common_efa_output,
                        "btl:efa: finalize: %d send(s) in flight at the start; after %.3f s %d "
                        "endpoint(s) with sends queued, %d one-sided operation(s) and %d "
                        "send(s) unfinished",
                        posted0, now_seconds() - t0, (int)btl->num_waiting, (int)btl->outstanding,
                        (int)btl->posted);
    mca_btl_efa_cma_fini(btl);
    mca_btl_efa_rdma_module_fini(btl);
    mca_btl_efa_native_fini(btl);
    if (OPAL_SUCCESS ==
        opal_hash_table_get_first_key_uint64(&btl->endpoints, &key, &value, &node)) {
        do {
            mca_btl_efa_endpoint_t *ep = value;
            mca_btl_efa_ring_detach(ep);
            efa_core_peer_put(btl->core, ep->peer);
            free(ep);
        } while (OPAL_SUCCESS ==
                 opal_hash_table_get_next_key_uint64(&btl->endpoints, &key, &value, node, &node));
    }
    OBJ_DESTRUCT(&btl->endpoints);
    /* A slab with a fragment the provider still holds cannot be freed while
     * the endpoint is open; the fragment's completion, should it come,
     * goes to a function of the core's library (this component's code may
     * be unloaded by then). */
    int kept = 0;
    for (int i = 0; i < btl->num_slabs; ++i) {
        efa_btl_slab_t *slab = btl->slabs[i];
        bool busy = false;
        for (int j = 0; j < FRAGS_PER_SLAB; ++j) {
            if (slab->frags[j].posted) {
                slab->frags[j].op.complete = efa_op_complete_nothing;
                busy = true;
            }
        }
        if (busy) {
            btl->slabs[kept++] = slab;
            continue;
        }
        if (slab->mr) {
            efa_core_mr_release(btl->core, slab->mr);
        }
        free(slab->bufs);
        free(slab->frags);
        free(slab);
    }
    btl->num_slabs = kept;
    btl->free_frags = NULL;
    /* The core may stay open for the MTL: it polls at its own pace again. */
    efa_core_net_interest(btl->core, -btl->net_interest);
    btl->net_interest = 0;
    mca_common_efa_release(btl->core);
    btl->core = NULL;
    mca_btl_efa_native_fini_released(btl);
    if (kept > 0 && NULL == efa_core_current()) {
        /* The endpoints are closed: nothing will complete any more (the
         * slabs' registrations went with the core). */
        for (int i = 0; i < kept; ++i) {
            efa_btl_slab_t *slab = btl->slabs[i];
            free(slab->bufs);
            free(slab->frags);
            free(slab);
        }
        kept = 0;
    } else if (kept > 0) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: %d fragment slab(s) left to the provider, which still "
                            "holds sends of them",
                            kept);
    }
    free(btl->slabs);
    btl->slabs = NULL;
    btl->num_slabs = 0;
    OBJ_DESTRUCT(&btl->lock);
    return OPAL_SUCCESS;
}

int mca_btl_efa_module_init(mca_btl_efa_module_t *btl, efa_core_t *core) {
    btl->core = core;
    btl->ctx = efa_core_ctx(core, 0);
    OBJ_CONSTRUCT(&btl->lock, opal_mutex_t);
    OBJ_CONSTRUCT(&btl->endpoints, opal_hash_table_t);
    opal_hash_table_init(&btl->endpoints, 256);
    btl->my_name = name_key(&OPAL_PROC_MY_NAME);
    btl->frag_size = efa_core_msg_max_size(core);
    btl->rma_chunk = btl->frag_size - sizeof(efa_btl_hdr_t) - sizeof(efa_btl_rma_t);
    btl->free_frags = NULL;
    btl->waiting_head = btl->waiting_tail = NULL;
    btl->num_waiting = 0;
    btl->outstanding = 0;
    btl->posted = 0;
    btl->finalizing = false;
    /* A window as deep as the peer's receive pool, but never so small that
     * the pipeline stalls on every credit round trip. */
    btl->window = mca_btl_efa_component.send_window;
    if (btl->window <= 0) {
        size_t bufs = efa_core_msg_recv_count(core);
        btl->window = bufs < 8 ? 8 : (int32_t)bufs;
    }
    btl->credit_threshold = btl->window / 2 > 0 ? btl->window / 2 : 1;
    btl->rma_window = mca_btl_efa_component.rma_window > 0 ? mca_btl_efa_component.rma_window : 1;
    size_t max_send = btl->frag_size - sizeof(efa_btl_hdr_t);
    if (btl->super.btl_max_send_size > max_send || 0 == btl->super.btl_max_send_size) {
        btl->super.btl_max_send_size = max_send;
    }
    if (btl->super.btl_eager_limit > btl->super.btl_max_send_size) {
        btl->super.btl_eager_limit = btl->super.btl_max_send_size;
    }
    if (btl->super.btl_rndv_eager_limit > btl->super.btl_eager_limit) {
        btl->super.btl_rndv_eager_limit = btl->super.btl_eager_limit;
    }
    mca_btl_efa_rdma_module_setup(btl);
    mca_btl_efa_native_setup(btl);
    btl->inject_max = efa_core_get_info(core)->inject_size;
    /* In-place sends gather two buffers; below the provider's inject size
     * the provider copies the message anyway, so a copy of ours costs
     * little and the request completes at once (sendi). */
    const efa_core_info_t *info = efa_core_get_info(core);
    if (info->tx_iov_limit < 2) {
        btl->super.btl_flags &= ~MCA_BTL_FLAGS_SEND_INPLACE;
    }
    btl->inplace_min = mca_btl_efa_component.inplace_min; /* 0: message above inject_max */
    btl->coalesce_bytes = mca_btl_efa_component.coalesce_bytes;
    btl->coalesce_max = mca_btl_efa_component.coalesce_max;
    btl->batches_sent = btl->batched_msgs = 0;
    btl->last_src = NULL;
    btl->done_head = btl->done_tail = NULL;
    if (OPAL_SUCCESS != grow(btl)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    int rc = efa_core_msg_set_handler(core, mca_btl_efa_on_message, btl);
    if (0 != rc) {
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: cannot post receives: %s",
                            fi_strerror(-rc));
        return mca_common_efa_fi_to_opal(rc);
    }
    return OPAL_SUCCESS;
}

/* The function table; the limits are set by the component. */
extern int mca_btl_efa_put(struct mca_btl_base_module_t *, struct mca_btl_base_endpoint_t *, void *,
                           uint64_t, struct mca_btl_base_registration_handle_t *,
                           struct mca_btl_base_registration_handle_t *, size_t, int, int,
                           mca_btl_base_rdma_completion_fn_t, void *, void *);
extern int mca_btl_efa_get(struct mca_btl_base_module_t *, struct mca_btl_base_endpoint_t *, void *,
                           uint64_t, struct mca_btl_base_registration_handle_t *,
                           struct mca_btl_base_registration_handle_t *, size_t, int, int,
                           mca_btl_base_rdma_completion_fn_t, void *, void *);
extern int mca_btl_efa_aop(struct mca_btl_base_module_t *, struct mca_btl_base_endpoint_t *,
                           uint64_t, struct mca_btl_base_registration_handle_t *,
                           mca_btl_base_atomic_op_t, uint64_t, int, int,
                           mca_btl_base_rdma_completion_fn_t, void *, void *);
extern int mca_btl_efa_afop(struct mca_btl_base_module_t *, struct mca_btl_base_endpoint_t *,
                            void *, uint64_t, struct mca_btl_base_registration_handle_t *,
                            struct mca_btl_base_registration_handle_t *, mca_btl_base_atomic_op_t,
                            uint64_t, int, int, mca_btl_base_rdma_completion_fn_t, void *, void *);
extern int mca_btl_efa_acswap(struct mca_btl_base_module_t *, struct mca_btl_base_endpoint_t *,
                              void *, uint64_t, struct mca_btl_base_registration_handle_t *,
                              struct mca_btl_base_registration_handle_t *, uint64_t, uint64_t, int,
                              int, mca_btl_base_rdma_completion_fn_t, void *, void *);
extern struct mca_btl_base_registration_handle_t *
mca_btl_efa_register_mem(struct mca_btl_base_module_t *, struct mca_btl_base_endpoint_t *, void *,
                         size_t, uint32_t);
extern int mca_btl_efa_deregister_mem(struct mca_btl_base_module_t *,
                                      struct mca_btl_base_registration_handle_t *);
extern int mca_btl_efa_flush(struct mca_btl_base_module_t *, struct mca_btl_base_endpoint_t *);

mca_btl_efa_module_t mca_btl_efa_module = {
    .super =
        {
            .btl_component = &mca_btl_efa_component.super,
            .btl_add_procs = efa_add_procs,
            .btl_del_procs = efa_del_procs,
            .btl_finalize = efa_finalize,
            .btl_alloc = efa_alloc,
            .btl_free = efa_free,
            .btl_prepare_src = efa_prepare_src,
            .btl_send = efa_send,
            .btl_sendi = efa_sendi,
            .btl_put = mca_btl_efa_put,
            .btl_get = mca_btl_efa_get,
            .btl_atomic_op = mca_btl_efa_aop,
            .btl_atomic_fop = mca_btl_efa_afop,
            .btl_atomic_cswap = mca_btl_efa_acswap,
            .btl_register_mem = mca_btl_efa_register_mem,
            .btl_deregister_mem = mca_btl_efa_deregister_mem,
            .btl_flush = mca_btl_efa_flush,
            .btl_register_error = efa_register_error,
        },
};
