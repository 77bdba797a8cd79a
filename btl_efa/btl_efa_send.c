/*
 * btl_efa's send path: per-peer credits, the endpoints' queues and their
 * drain (with coalescing, btl_efa_batch.c), the on-node ring or the
 * provider for each fragment, and the end of every send (its completion
 * and the upper layer's callback).
 */
#include "btl_efa_lost.h"
#include "btl_efa_batch.h"
#include "btl_efa_ring.h"
#include "btl_efa_spread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "opal/util/output.h"

/* Sends of an answer (RESP) after the first that failed. */
#define EFA_BTL_RESP_RETRIES 3

/* A send is over (sent, or failed for good).  The upper layer hears of
 * its descriptors only while it is there: a completion can come after
 * del_procs, or (the provider may report a send complete well after the
 * peer received it) during finalize, when the pml that set des_cbfunc has
 * been closed and its code unloaded. */
void mca_btl_efa_frag_finish(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag, int status) {
    if (frag->inner) {
        /* A batch: each message packed in it ends as the batch did. */
        efa_btl_frag_t *inner = frag->inner;
        frag->inner = frag->inner_last = NULL;
        while (inner) {
            efa_btl_frag_t *next = inner->next;
            mca_btl_efa_frag_finish(btl, inner, status);
            inner = next;
        }
        mca_btl_efa_frag_return(btl, frag);
        return;
    }
    if (frag->user) {
        /* Read before the callback: a descriptor the upper layer owns may
         * be freed in it, and reused by another thread at once. */
        const bool ours =
            (frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) || btl->finalizing;
        if (frag->base.des_cbfunc && mca_btl_efa_upper_alive(btl, frag->endpoint)) {
            frag->base.des_cbfunc(&btl->super, frag->endpoint, &frag->base, status);
        }
        /* Once finalize began nobody is left to free a descriptor it kept. */
        if (ours) {
            mca_btl_efa_frag_return(btl, frag);
        }
        return;
    }
    if (OPAL_SUCCESS != status && frag->req_id) {
        btl->emul.chunk_send_failed(btl, frag->buf, status); /* the initiator's */
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

void mca_btl_efa_frag_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    efa_btl_frag_t *frag = (efa_btl_frag_t *)op;
    frag->posted = false;
    OPAL_THREAD_ADD_FETCH32(&mca_btl_efa_module.send.posted, -1);
    int err = cqe->err;
    if (OPAL_UNLIKELY(frag->buf[0] & EFA_BTL_MSG_SEQ) &&
        mca_btl_efa_spread_completed(&mca_btl_efa_module, frag, &err)) {
        return; /* sent again over another NIC: it completes from there */
    }
    int status = err ? mca_btl_efa_status_of(err) : OPAL_SUCCESS;
    if (err) {
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: send failed: %s",
                            fi_strerror(-err));
    }
    if (OPAL_UNLIKELY(cqe->orphaned) && err) {
        /* The core failed it while the provider still holds it, which may
         * read the buffer until it hands the send back or the endpoint
         * closes: the buffer must not go back to the pool (and out again
         * with another message to whoever). */
        OPAL_THREAD_LOCK(&mca_btl_efa_module.lock);
        mca_btl_efa_frag_orphan_locked(&mca_btl_efa_module, frag);
        OPAL_THREAD_UNLOCK(&mca_btl_efa_module.lock);
    }
    if (OPAL_UNLIKELY(err) && !efa_path_error(err) && -FI_ECANCELED != err && !cqe->orphaned &&
        NULL != frag->endpoint) {
        /* The peer lives and the job may go on (an answer sent again, a
         * chunk failed, ob1's callback): the credit the send took and
         * those it carried, which the peer never got, come back.  (Not
         * for one the provider still holds: it may still arrive, and its
         * buffer is the provider's.) */
        efa_btl_hdr_t *hdr = (efa_btl_hdr_t *)frag->buf;
        OPAL_THREAD_LOCK(&mca_btl_efa_module.lock);
        efa_flow_unsent(&mca_btl_efa_module.send.flow, &frag->endpoint->flow, hdr->credits,
                        EFA_BTL_MSG_CREDIT != (hdr->type & ~EFA_BTL_MSG_SEQ));
        hdr->credits = 0;
        OPAL_THREAD_UNLOCK(&mca_btl_efa_module.lock);
    }
    if (efa_path_error(err)) {
        /* Whatever the fragment (an upper layer's descriptor with a
         * callback too: ob1 only learns from it that one send failed). */
        mca_btl_efa_peer_failed_later(&mca_btl_efa_module, frag->endpoint, err);
    } else if (OPAL_UNLIKELY(err) && -FI_ECANCELED != err && NULL != frag->endpoint &&
               (!frag->user || frag->inner) && 0 == frag->req_id &&
               EFA_BTL_MSG_RESP != ((efa_btl_hdr_t *)frag->buf)->type) {
        /* Nobody would hear of it: a copy ob1 handed over and forgot
         * (sendi's small messages, its acknowledgements, FIN), a batch of
         * them, or the credits it returned.  Its receiver would wait for
         * ever. */
        mca_btl_efa_fatal(&mca_btl_efa_module, frag->endpoint->proc,
                          "btl_efa: a message could not be sent, and nobody would hear of it");
    }
    mca_btl_efa_frag_finish(&mca_btl_efa_module, frag, status);
    /* The provider's queue has room again. */
    (void)mca_btl_efa_drain_pending(&mca_btl_efa_module);
}

/* ---- sending: credits and the endpoints' queues (efa_msg_flow.h) ---- */

/* post_locked's answer when the peer's ring is full: only this endpoint
 * waits (the provider's queue may still have room for others). */
#define EFA_BTL_RING_FULL 1

/* Copy a fragment into the peer's ring.  The copy is the send: the
 * fragment is finished at once, a descriptor of the upper layer from
 * progress (its callback never comes from inside a send call).  The module
 * lock is held. */
static void forge_ring_copy(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                            const efa_btl_frag_t *frag);

static int ring_post_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                            efa_btl_frag_t *frag) {
    uint8_t *slot = efa_ring_reserve(ep->ring_out, frag->send_len);
    if (NULL != slot) {
        if (OPAL_LIKELY(frag->base.des_segment_count < 2)) {
            memcpy(slot, frag->buf, frag->send_len);
        } else {
            /* In place: the headers from the fragment and the data from the
             * caller's buffer, gathered into the slot. */
            const size_t data_len = frag->segments[1].seg_len;
            const size_t head_len = frag->send_len - data_len;
            memcpy(slot, frag->buf, head_len);
            memcpy(slot + head_len, frag->segments[1].seg_addr.pval, data_len);
        }
        efa_ring_commit(ep->ring_out, frag->send_len);
        if (OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on) &&
            mca_btl_efa_component.test.forge_src > 0) {
            forge_ring_copy(btl, ep, frag);
        }
    } else {
        ++btl->ring.full;
        return EFA_BTL_RING_FULL;
    }
    ++btl->ring.sent;
    /* Finished here (below), whether or not it was to be injected: the
     * caller must not recycle or finish it again. */
    frag->inject = false;
    if (frag->user) {
        frag->next = btl->send.ring_done;
        btl->send.ring_done = frag;
        OPAL_THREAD_ADD_FETCH32(&btl->send.num_ring_done, 1);
    } else {
        mca_btl_efa_frag_return_locked(btl, frag);
    }
    return 0;
}

/* Finish the fragments sent through rings (see ring_post_locked). */
static void finish_ring_done(mca_btl_efa_module_t *btl) {
    OPAL_THREAD_LOCK(&btl->lock);
    efa_btl_frag_t *done = btl->send.ring_done;
    btl->send.ring_done = NULL;
    __atomic_store_n(&btl->send.num_ring_done, 0, __ATOMIC_RELAXED);
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
        mca_btl_efa_frag_finish(btl, frag, OPAL_SUCCESS);
    }
}

/* The test setting debug_forge_src: the Nth injected fragment again, its
 * header naming the destination itself as the sender (no credits), as a
 * process forging another's messages would send it.  The receiver's
 * sender check (btl_efa_recv.c) must drop it. */
static void forge_copy(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                       const efa_btl_frag_t *frag) {
    static int injected = 0;
    if (++injected != mca_btl_efa_component.test.forge_src) {
        return;
    }
    uint8_t *copy = malloc(frag->send_len);
    if (NULL == copy) {
        return;
    }
    memcpy(copy, frag->buf, frag->send_len);
    efa_btl_hdr_t hdr;
    memcpy(&hdr, copy, sizeof(hdr));
    opal_process_name_t name = ep->name;
    if (1 == mca_btl_efa_component.test.forge_unknown) {
        name.vpid = 0x7ffffff0; /* no process of the job */
    } else if (2 == mca_btl_efa_component.test.forge_unknown) {
        name.jobid ^= 0x4000; /* a process of a job that does not exist */
    }
    hdr.src = mca_btl_efa_name_key(&name);
    hdr.credits = 0;
    memcpy(copy, &hdr, sizeof(hdr));
    if (-FI_EAGAIN == efa_ctx_try_inject(btl->ctx, copy, frag->send_len, frag->dest)) {
        --injected; /* the queue is full: the next one (no progress under the lock) */
    }
    free(copy);
}

/* The same through the rings: the Nth fragment written to a ring again,
 * in this process's own ring, naming the destination as its sender.  The
 * receiver's ring check (btl_efa_recv.c) must drop it. */
static void forge_ring_copy(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                            const efa_btl_frag_t *frag) {
    static int written = 0;
    if (frag->base.des_segment_count > 1 || ++written != mca_btl_efa_component.test.forge_src) {
        return;
    }
    uint8_t *slot = efa_ring_reserve(ep->ring_out, frag->send_len);
    if (NULL == slot) {
        --written; /* full: the next one */
        return;
    }
    memcpy(slot, frag->buf, frag->send_len);
    efa_btl_hdr_t hdr;
    memcpy(&hdr, slot, sizeof(hdr));
    hdr.src = mca_btl_efa_name_key(&ep->name);
    hdr.credits = 0;
    memcpy(slot, &hdr, sizeof(hdr));
    efa_ring_commit(ep->ring_out, frag->send_len);
    (void)btl;
}

/* A fragment over the first NIC: injected, or sent with a completion. */
static inline int post_first_nic(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                 efa_btl_frag_t *frag) {
    int rc;
    if (frag->inject) {
        /* The provider copies it before returning and reports nothing:
         * the caller recycles the fragment at once. */
        rc = efa_ctx_try_inject(btl->ctx, frag->buf, frag->send_len, frag->dest);
        if (OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on) &&
            mca_btl_efa_component.test.forge_src > 0 && 0 == rc) {
            forge_copy(btl, ep, frag);
        }
        return rc;
    }
    /* Counted before the provider has it: another thread's progress may
     * complete it before fi_send returns. */
    frag->posted = true;
    OPAL_THREAD_ADD_FETCH32(&btl->send.posted, 1);
    if (OPAL_LIKELY(frag->base.des_segment_count < 2)) {
        rc = efa_ctx_try_send(btl->ctx, frag->buf, frag->send_len, frag->desc, frag->dest,
                              &frag->op);
    } else {
        /* In place: headers from the fragment, data from the caller. */
        const size_t data_len = frag->segments[1].seg_len;
        struct iovec iov[2] = {{.iov_base = frag->buf, .iov_len = frag->send_len - data_len},
                               {.iov_base = frag->segments[1].seg_addr.pval, .iov_len = data_len}};
        void *desc[2] = {frag->desc, frag->data_desc};
        rc = efa_ctx_try_sendv(btl->ctx, iov, desc, 2, frag->dest, &frag->op);
    }
    if (0 != rc) {
        frag->posted = false;
        OPAL_THREAD_ADD_FETCH32(&btl->send.posted, -1);
    }
    return rc;
}

/* One attempt to send a fragment, through the peer's ring when it fits a
 * slot, else by the provider (over the peer's NIC of the set), returning
 * the credits owed to its destination with it.  The module lock is held. */
static int post_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                       efa_btl_frag_t *frag) {
    efa_btl_hdr_t *hdr = (efa_btl_hdr_t *)frag->buf;
    const uint16_t give = efa_flow_give(&ep->flow);
    hdr->credits = give;
    if (EFA_BTL_RING_ATTACHED == ep->ring_state && frag->send_len <= ep->ring_max_frame) {
        /* Ring frames take no credit (the ring has its own limit) but
         * carry the credits owed for the provider's messages. */
        int rc = ring_post_locked(btl, ep, frag);
        if (0 == rc) {
            efa_flow_sent(&btl->send.flow, &ep->flow, give, false);
        }
        return rc;
    }
    /* (Read before the post: over another NIC the type gains a flag.) */
    const bool takes_credit = EFA_BTL_MSG_CREDIT != hdr->type;
    int rc = EFA_BTL_SPREAD_FIRST;
    int rail = ep->rail;
    if (OPAL_UNLIKELY(ep->rail_mask > 1) &&
        frag->send_len - sizeof(efa_btl_hdr_t) > btl->super.btl_eager_limit) {
        rail = mca_btl_efa_spread_turn(ep);
    }
    if (OPAL_UNLIKELY(rail | ep->numbered)) {
        rc = mca_btl_efa_spread_send_locked(btl, ep, frag, rail);
        if (0 == rc && rail != ep->rail) {
            __atomic_fetch_add(&btl->spread.turns, 1, __ATOMIC_RELAXED);
        }
    }
    if (EFA_BTL_SPREAD_FIRST == rc) {
        rc = post_first_nic(btl, ep, frag);
    }
    if (0 == rc) {
        efa_flow_sent(&btl->send.flow, &ep->flow, give, takes_credit);
        ep->exchanged = true;             /* through the provider: the peer is watched */
        mca_btl_efa_ring_wake_locked(ep); /* (a peer of this node: larger than a slot) */
    }
    return rc;
}

/* A CREDIT message (the credits alone, or a peer's ask after a NIC's
 * flush and the answer to it, btl_efa_spread_ask.c) takes no credit: it
 * never waits for one, nor behind messages that do.  An answer waiting
 * for the credits a lost message took would hide that loss for good. */
static inline bool takes_no_credit(const efa_btl_frag_t *frag) {
    return EFA_BTL_MSG_CREDIT == ((const efa_btl_hdr_t *)frag->buf)->type;
}

/* Can the fragment go now as far as credits are concerned?  Only the
 * provider's messages take them. */
static inline bool has_credit(const mca_btl_efa_endpoint_t *ep, const efa_btl_frag_t *frag) {
    return ep->flow.credits > 0 ||
           (EFA_BTL_RING_ATTACHED == ep->ring_state && frag->send_len <= ep->ring_max_frame) ||
           takes_no_credit(frag);
}

/* What the flow's drain hands each waiting endpoint, and what it found
 * that is said once the module lock is let go (ob1's error handler may
 * call back into the BTL). */
typedef struct drain_state {
    mca_btl_efa_module_t *btl;
    efa_btl_frag_t *failed;               /* sends that failed for good, finished after */
    mca_btl_efa_endpoint_t *credits_lost; /* a peer whose credits could not go back */
    int credits_err;                      /* ... the post's error */
} drain_state_t;

/* Post what the endpoint's queue holds while it has credits and the
 * provider (or the peer's ring) takes them, then a credit message if one
 * is due.  Fragments that failed for good are chained on state->failed.
 * Returns false when the provider queue is full.  The module lock is held. */
static bool drain_ep_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                            drain_state_t *state) {
    efa_btl_frag_t **failed = &state->failed;
    while (ep->flow.head && has_credit(ep, (efa_btl_frag_t *)ep->flow.head)) {
        /* Messages that wait for this peer go packed, one credit for all
         * (btl_efa_batch.c); the ring carries its own frames. */
        if (btl->batch.bytes && EFA_BTL_RING_ATTACHED != ep->ring_state &&
            !takes_no_credit((efa_btl_frag_t *)ep->flow.head)) {
            efa_btl_frag_t *batch = mca_btl_efa_batch_build_locked(btl, ep);
            if (batch) {
                const int count = batch->inner_count;
                mca_btl_efa_batch_take_locked(btl, ep, batch);
                int rc = post_locked(btl, ep, batch);
                if (0 == rc) {
                    mca_btl_efa_batch_posted_locked(btl, count); /* (batch is not read) */
                    continue;
                }
                mca_btl_efa_batch_discard_locked(btl, ep, batch);
                if (-FI_EAGAIN == rc) {
                    return false;
                }
                /* Any other failure: the messages go one by one below,
                 * each with its own outcome. */
            }
        }
        /* Out of the queue before the post: a send through a ring reuses
         * frag->next at once. */
        efa_btl_frag_t *frag = efa_flow_pop(&btl->send.flow, &ep->flow);
        /* A chunk of an emulated operation that expired while it waited
         * for credits (its caller was told it failed): never sent, or the
         * target would carry out what was reported failed. */
        int rc =
            OPAL_UNLIKELY(0 != frag->req_id) && !efa_inflight_live(btl->emul.reqs, frag->req_id)
                ? -FI_ECANCELED
                : post_locked(btl, ep, frag);
        if (-FI_EAGAIN == rc || EFA_BTL_RING_FULL == rc) {
            efa_flow_push_front(&btl->send.flow, &ep->flow, frag);
            /* the provider is full, or this endpoint waits for the peer to
             * read its ring */
            return EFA_BTL_RING_FULL == rc;
        }
        if (0 != rc) {
            frag->err = rc;
            frag->next = *failed;
            *failed = frag;
        }
    }
    if (efa_flow_credit_due(&ep->flow)) {
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
        frag->inject = frag->send_len <= btl->send.inject_max;
        int rc = post_locked(btl, ep, frag);
        if (0 != rc || frag->inject) {
            mca_btl_efa_frag_return_locked(btl, frag);
            if (-FI_EAGAIN == rc) {
                return false;
            }
            if (EFA_BTL_RING_FULL == rc) {
                return true; /* still due: retried on the next drain */
            }
            if (0 != rc && NULL == state->credits_lost) {
                state->credits_lost = ep; /* the peer would wait for them for ever */
                state->credits_err = rc;
            }
        }
    }
    efa_flow_credit_settled(&ep->flow);
    return true;
}

static void finish_failed(mca_btl_efa_module_t *btl, efa_btl_frag_t *failed) {
    while (failed) {
        efa_btl_frag_t *frag = failed;
        failed = frag->next;
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: deferred send failed: %s",
                            fi_strerror(-frag->err));
        if (efa_path_error(frag->err)) {
            /* The peer is lost: as at a completion. */
            mca_btl_efa_peer_failed_later(btl, frag->endpoint, frag->err);
        } else if (NULL != frag->endpoint && (!frag->user || frag->inner) && 0 == frag->req_id &&
                   EFA_BTL_MSG_RESP != ((efa_btl_hdr_t *)frag->buf)->type) {
            /* As at a completion (mca_btl_efa_frag_complete): nobody would
             * hear of it, and its receiver would wait for ever. */
            mca_btl_efa_fatal(btl, frag->endpoint->proc,
                              "btl_efa: a queued message could not be sent, and nobody would "
                              "hear of it");
        }
        mca_btl_efa_frag_finish(btl, frag, mca_btl_efa_status_of(frag->err));
    }
}

/* Post a ready fragment (header filled, send_len, dest and endpoint set).
 * Without a credit for the peer, or with the provider queue full, it joins
 * the endpoint's queue, which progress drains in order; the completion
 * callback always comes from progress. */
int mca_btl_efa_frag_post(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag) {
    mca_btl_efa_endpoint_t *ep = frag->endpoint;
    if (EFA_BTL_RING_UNTRIED == ep->ring_state) {
        /* A process of this node, first sent to: its ring carries what
         * fits a slot, its doorbell announces the rest (post_locked). */
        (void)mca_btl_efa_ring_attach(btl, ep);
    }
    OPAL_THREAD_LOCK(&btl->lock);
    if (OPAL_UNLIKELY(ep->lost)) {
        /* The core fails every send to it; in the queue it would wait for
         * credits for ever. */
        OPAL_THREAD_UNLOCK(&btl->lock);
        return OPAL_ERR_UNREACH;
    }
    const bool no_credit = takes_no_credit(frag);
    if ((NULL == ep->flow.head || no_credit) && has_credit(ep, frag)) {
        int rc = post_locked(btl, ep, frag);
        if (0 == rc) {
            if (frag->inject && frag->user) {
                /* Its callback is due from progress (mca_btl_efa_run_done). */
                frag->next = NULL;
                if (btl->send.done_tail) {
                    btl->send.done_tail->next = frag;
                } else {
                    btl->send.done_head = frag;
                }
                btl->send.done_tail = frag;
            } else if (frag->inject) {
                mca_btl_efa_frag_return_locked(btl, frag);
            }
            OPAL_THREAD_UNLOCK(&btl->lock);
            return OPAL_SUCCESS;
        }
        if (-FI_EAGAIN != rc && EFA_BTL_RING_FULL != rc) {
            /* Refused at once, the peer lost (the core fails posts to it):
             * the caller gets the error, and the upper layer's handler is
             * called from progress, never from inside its send call. */
            mca_btl_efa_peer_failed_later_locked(btl, ep, rc);
            OPAL_THREAD_UNLOCK(&btl->lock);
            opal_output_verbose(1, mca_common_efa_output, "btl:efa: cannot post a send: %s",
                                fi_strerror(-rc));
            return mca_btl_efa_status_of(rc);
        }
    }
    frag->inject = false; /* sent from the queue like any other, with a completion */
    if (no_credit && NULL != ep->flow.head) {
        efa_flow_push_front(&btl->send.flow, &ep->flow, frag); /* (the peer waits already) */
    } else {
        efa_flow_enqueue(&btl->send.flow, &ep->flow, frag);
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    return OPAL_SUCCESS;
}

bool mca_btl_efa_can_send_now(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, size_t len) {
    return NULL == ep->flow.head && (ep->flow.credits > 0 || mca_btl_efa_via_ring(btl, ep, len));
}

void mca_btl_efa_run_done(mca_btl_efa_module_t *btl) {
    if (NULL == btl->send.done_head) {
        return;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    efa_btl_frag_t *frag = btl->send.done_head;
    btl->send.done_head = btl->send.done_tail = NULL;
    OPAL_THREAD_UNLOCK(&btl->lock);
    while (frag) {
        efa_btl_frag_t *next = frag->next;
        mca_btl_efa_frag_finish(btl, frag, OPAL_SUCCESS);
        frag = next;
    }
}

static bool drain_peer(void *arg, efa_flow_peer_t *peer) {
    drain_state_t *state = (drain_state_t *)arg;
    mca_btl_efa_endpoint_t *ep =
        (mca_btl_efa_endpoint_t *)((char *)peer - offsetof(mca_btl_efa_endpoint_t, flow));
    return drain_ep_locked(state->btl, ep, state);
}

/* (The receive pool's buffers that could not be posted again are posted
 * by the core's own progress, efa_core_msg_progress, whenever it polls the
 * provider that consumed them: nothing of that here.) */
int mca_btl_efa_drain_pending(mca_btl_efa_module_t *btl) {
    /* A peek without the lock (finish_ring_done takes it): atomic, as the
     * count changes under the lock in other threads. */
    if (0 != __atomic_load_n(&btl->send.num_ring_done, __ATOMIC_RELAXED)) {
        finish_ring_done(btl);
    }
    if (OPAL_UNLIKELY(NULL != btl->spread.resend)) {
        finish_failed(btl, mca_btl_efa_spread_resend(btl));
    }
    if (0 == btl->send.flow.num_waiting) {
        return 0;
    }
    drain_state_t state = {btl, NULL, NULL, 0};
    OPAL_THREAD_LOCK(&btl->lock);
    int left = efa_flow_drain(&btl->send.flow, drain_peer, &state);
    OPAL_THREAD_UNLOCK(&btl->lock);
    finish_failed(btl, state.failed);
    if (OPAL_UNLIKELY(NULL != state.credits_lost) && efa_path_error(state.credits_err)) {
        mca_btl_efa_peer_failed_later(btl, state.credits_lost, state.credits_err);
    } else if (OPAL_UNLIKELY(NULL != state.credits_lost)) {
        mca_btl_efa_fatal(btl, state.credits_lost->proc,
                          "btl_efa: returning credits to a peer failed");
    }
    return left;
}

/* mca_btl_efa_note_received (btl_efa.h) past its inline test: the credits it
 * returns, and what this process owes back. */
void mca_btl_efa_note_received_slow(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                    const efa_btl_hdr_t *hdr, bool via_ring) {
    OPAL_THREAD_LOCK(&btl->lock);
    ep->exchanged |= !via_ring; /* through the provider: the peer is watched */
    efa_flow_received(&btl->send.flow, &ep->flow, hdr->credits,
                      !via_ring && EFA_BTL_MSG_CREDIT != hdr->type);
    OPAL_THREAD_UNLOCK(&btl->lock);
}
