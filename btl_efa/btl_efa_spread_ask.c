/*
 * After a NIC flushed a receive, btl_efa asks each peer that numbers its
 * messages to it for one more numbered message (btl_efa_spread.h).
 *
 * The watch finds a lost message by the gap it leaves: a number missing
 * while later ones came.  The last message of a burst (a ping whose pong
 * never comes, the last fragment before a wait) leaves none, and ob1
 * would wait for it for ever.  So once a receive failed and was taken as
 * its NIC's flush (recv_failed), the next sweep sends every numbered peer
 * an ask (a CREDIT message tagged EFA_BTL_CREDIT_ASK, any path), and the
 * peer answers with a CREDIT message through the provider, numbered like
 * every other: a number the flush took is then below one that came, a
 * gap the watch ends the job on after two peer deadlines, naming the peer.
 */
#include "btl_efa_spread.h"

#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"

static efa_btl_frag_t *credit_frag(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                   uint8_t tag, size_t len) {
    efa_btl_frag_t *frag = mca_btl_efa_frag_get(btl);
    if (NULL == frag) {
        return NULL;
    }
    memset(frag->buf, 0, len);
    efa_btl_hdr_t *hdr = (efa_btl_hdr_t *)frag->buf;
    hdr->type = EFA_BTL_MSG_CREDIT;
    hdr->tag = tag;
    hdr->src = btl->my_name;
    frag->send_len = len;
    frag->dest = ep->addr;
    frag->endpoint = ep;
    return frag;
}

static void post_or_drop(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag) {
    if (OPAL_SUCCESS != mca_btl_efa_frag_post(btl, frag)) {
        mca_btl_efa_frag_return(btl, frag);
    }
}

void mca_btl_efa_spread_ask_peers(mca_btl_efa_module_t *btl) {
    OPAL_THREAD_LOCK(&btl->lock);
    if (!btl->spread.ask_due) {
        OPAL_THREAD_UNLOCK(&btl->lock);
        return;
    }
    btl->spread.ask_due = false;
    /* The peers to ask, gathered under the lock, asked without it (a post
     * takes it). */
    size_t n = 0, cap = opal_hash_table_get_size(&btl->endpoints);
    mca_btl_efa_endpoint_t **eps = cap ? malloc(cap * sizeof(*eps)) : NULL;
    uint64_t key;
    void *value, *node;
    int rc = opal_hash_table_get_first_key_uint64(&btl->endpoints, &key, &value, &node);
    while (NULL != eps && OPAL_SUCCESS == rc && n < cap) {
        mca_btl_efa_endpoint_t *ep = value;
        if (ep->numbered && !ep->is_self && !ep->detached) {
            eps[n++] = ep;
        }
        rc = opal_hash_table_get_next_key_uint64(&btl->endpoints, &key, &value, node, &node);
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    if (NULL == eps && cap) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: no memory to ask the peers for a numbered message after a "
                            "NIC's flush: a lost last message would not be found");
        return;
    }
    for (size_t i = 0; i < n; ++i) {
        efa_btl_frag_t *frag = credit_frag(btl, eps[i], EFA_BTL_CREDIT_ASK, sizeof(efa_btl_hdr_t));
        if (frag) {
            post_or_drop(btl, frag);
            __atomic_fetch_add(&btl->spread.asked, 1, __ATOMIC_RELAXED);
        }
    }
    free(eps);
}

void mca_btl_efa_spread_tell(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    if (NULL == ep || !ep->numbered || ep->is_self || ep->detached) {
        return; /* (an ask from a peer this process does not number to) */
    }
    /* Numbered only through the provider: where the peer's ring would
     * take it, it is made one byte longer than a slot carries (it is
     * rare: one per ask), else it is a bare header. */
    size_t len = sizeof(efa_btl_hdr_t);
    if (EFA_BTL_RING_NONE != ep->ring_state && EFA_BTL_RING_FAILED != ep->ring_state) {
        len = btl->ring.max_frame + 1;
    }
    if (len + EFA_BTL_SEQ_BYTES > btl->frag.size) {
        return; /* no room for its number: it could say nothing */
    }
    efa_btl_frag_t *frag = credit_frag(btl, ep, EFA_BTL_CREDIT_TELL, len);
    if (frag) {
        post_or_drop(btl, frag);
        __atomic_fetch_add(&btl->spread.told, 1, __ATOMIC_RELAXED);
    }
}
