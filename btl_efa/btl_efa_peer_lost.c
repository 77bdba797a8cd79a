/*
 * A peer the core declared lost, told to the upper layer once, from
 * progress, with the sends waiting for its credits failed
 * (mca_btl_efa_tell_lost_due, btl_efa_lost.h).
 */
#include "btl_efa_lost.h"

#include <stdio.h>

#include <rdma/fi_errno.h>

/* Take ep's queue (module lock held): the fragments, in order. */
static efa_btl_frag_t *take_queue_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    efa_btl_frag_t *head = NULL, **tail = &head, *frag;
    while (NULL != (frag = efa_flow_pop(&btl->send.flow, &ep->flow))) {
        frag->next = NULL;
        *tail = frag;
        tail = &frag->next;
    }
    /* No credit message either: it could never go. */
    efa_flow_credit_settled(&ep->flow);
    return head;
}

/* The core declared the process behind ep lost (err: the failure that
 * said so first): once per peer, the upper layer's handler, then the sends
 * waiting for its credits failed.  No lock held (the handler may call back
 * into the BTL); from progress only. */
static void peer_lost(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, int err) {
    OPAL_THREAD_LOCK(&btl->lock);
    const bool first = !ep->lost;
    ep->lost = true;
    /* (its pid may be another process's soon: no single copy by it) */
    __atomic_store_n(&ep->cma, EFA_BTL_CMA_OFF, __ATOMIC_RELEASE);
    efa_btl_frag_t *queued = first ? take_queue_locked(btl, ep) : NULL;
    const bool tell = first && !ep->detached;
    OPAL_THREAD_UNLOCK(&btl->lock);
    if (!first) {
        return;
    }
    /* ob1 parks the control messages it cannot send (acknowledgements,
     * FIN) and retries them for ever, and a rendezvous waits for an answer
     * that never comes: its error handler is what ends the job (or, under
     * ULFM, marks the process failed), as btl_tcp calls it for a failed
     * connection. */
    if (tell) {
        /* Named here too: ob1 prints it as it ends the job, which may come
         * before the core's message naming the peer is out. */
        char why[160];
        snprintf(why, sizeof(why), "btl_efa: peer %s unreachable (%s; common_efa_peer_timeout)",
                 OPAL_NAME_PRINT(ep->name), fi_strerror(-err));
        mca_btl_efa_fatal(btl, ep->proc, why);
    }
    /* Sends waiting for credits the peer will never return: they would
     * wait for ever, or go after a partition healed and call back for
     * requests the upper layer finished meanwhile. */
    while (queued) {
        efa_btl_frag_t *frag = queued;
        queued = frag->next;
        mca_btl_efa_frag_finish(btl, frag, OPAL_ERR_UNREACH);
    }
}

void mca_btl_efa_tell_lost_due(mca_btl_efa_module_t *btl) {
    for (;;) {
        OPAL_THREAD_LOCK(&btl->lock);
        mca_btl_efa_endpoint_t *ep = btl->send.lost_due;
        if (NULL == ep) {
            OPAL_THREAD_UNLOCK(&btl->lock);
            return;
        }
        btl->send.lost_due = ep->next_lost;
        ep->next_lost = NULL;
        const int queued = ep->lost_err;
        ep->lost_err = 0; /* (a later failure queues it again) */
        OPAL_THREAD_UNLOCK(&btl->lock);
        /* A one-sided operation's path error says a NIC failed for the
         * peer, or the peer: only the core's verdict, given after the
         * failed operation's completion, tells them apart (a NIC alone out
         * is no loss of the peer, and ob1 redoes the operation by
         * sending); with the peer deadline off the core declares nothing,
         * and the failure stands for the peer's loss.  A message failed for
         * good (sends, the watch) is the peer's loss. */
        const bool ask = queued > 0;
        if (ask && NULL != ep->peer && 0 == efa_core_peer_state(btl->core, ep->peer)) {
            continue;
        }
        peer_lost(btl, ep, ask ? -queued : queued);
    }
}
