/*
 * btl_efa coalescing: active messages queued for one peer travel packed
 * into one provider message (EFA_BTL_MSG_BATCH, common/efa_btl_wire.h).
 *
 * Only what already waits is packed: a send that finds the peer's credits
 * and the provider's queue free goes at once, alone (a ping-pong's latency
 * does not change).  Messages queue when the peer's credits are used up or
 * the provider's queue is full, which is where a batch pays: one credit,
 * one provider operation and one completion for many messages.  On EFA a
 * provider message costs far more than the bytes it carries.
 */
#include "btl_efa_batch.h"
#include "btl_efa_spread.h"

#include "opal/util/output.h"

/* Can frag go inside a batch?  Active messages only (the upper layer's
 * descriptors and sendi's copies): one-sided requests and answers keep
 * their own messages (their chunks are failed one by one). */
static bool batchable(const efa_btl_frag_t *frag) {
    const efa_btl_hdr_t *hdr = (const efa_btl_hdr_t *)frag->buf;
    return EFA_BTL_MSG_AM == hdr->type && 0 == frag->err;
}

/* Pack one fragment (its header and contiguous bytes, then the caller's
 * data of an in-place fragment). */
static bool add(uint8_t *payload, size_t cap, size_t *used, efa_btl_frag_t *frag) {
    efa_btl_hdr_t *hdr = (efa_btl_hdr_t *)frag->buf;
    /* A failed earlier attempt may have left credits in its header: inside
     * a batch only the batch's own header returns credits. */
    hdr->credits = 0;
    if (frag->base.des_segment_count < 2) {
        return efa_btl_wire_batch_add(payload, cap, used, frag->buf, frag->send_len, NULL, 0);
    }
    const size_t data_len = frag->segments[1].seg_len;
    return efa_btl_wire_batch_add(payload, cap, used, frag->buf, frag->send_len - data_len,
                                  frag->segments[1].seg_addr.pval, data_len);
}

efa_btl_frag_t *mca_btl_efa_batch_build_locked(mca_btl_efa_module_t *btl,
                                               mca_btl_efa_endpoint_t *ep) {
    efa_btl_frag_t *first = (efa_btl_frag_t *)ep->flow.head;
    if (NULL == first || NULL == first->next || !batchable(first) || !batchable(first->next)) {
        return NULL;
    }
    /* (with several NICs a batch may carry a number: btl_efa_spread.h) */
    const size_t room = btl->frag.size - (btl->spread.rails > 1 ? EFA_BTL_SEQ_BYTES : 0);
    const size_t limit = btl->batch.bytes < room ? btl->batch.bytes : room;
    const size_t cap = limit - sizeof(efa_btl_hdr_t);
    /* The first two must fit, or there is nothing to gain. */
    if (efa_btl_wire_batch_span(first->send_len) + efa_btl_wire_batch_span(first->next->send_len) >
        cap) {
        return NULL;
    }
    efa_btl_frag_t *batch = mca_btl_efa_frag_get_locked(btl);
    if (NULL == batch) {
        return NULL;
    }
    uint8_t *payload = batch->buf + sizeof(efa_btl_hdr_t);
    size_t used = 0;
    int count = 0;
    efa_btl_frag_t *last = NULL;
    for (efa_btl_frag_t *f = first; f && count < btl->batch.max && batchable(f); f = f->next) {
        if (!add(payload, cap, &used, f)) {
            break;
        }
        last = f;
        ++count;
    }
    efa_btl_hdr_t *hdr = (efa_btl_hdr_t *)batch->buf;
    memset(hdr, 0, sizeof(*hdr));
    hdr->type = EFA_BTL_MSG_BATCH;
    hdr->len = (uint32_t)used;
    hdr->src = btl->my_name;
    batch->send_len = sizeof(*hdr) + used;
    batch->dest = ep->addr;
    batch->endpoint = ep;
    /* The packed fragments stay chained in the queue until the batch is
     * about to be posted (mca_btl_efa_batch_take_locked). */
    batch->inner = first;
    batch->inner_last = last;
    batch->inner_count = count;
    return batch;
}

void mca_btl_efa_batch_take_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                   efa_btl_frag_t *batch) {
    efa_flow_dequeue_through(&btl->send.flow, &ep->flow, batch->inner_last);
}

void mca_btl_efa_batch_posted_locked(mca_btl_efa_module_t *btl, int count) {
    ++btl->batch.sent;
    btl->batch.msgs += (uint64_t)count;
}

void mca_btl_efa_batch_discard_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                      efa_btl_frag_t *batch) {
    efa_flow_requeue_front(&btl->send.flow, &ep->flow, batch->inner, batch->inner_last);
    batch->inner = batch->inner_last = NULL;
    batch->inner_count = 0;
    mca_btl_efa_frag_return_locked(btl, batch);
}

void mca_btl_efa_batch_report(const mca_btl_efa_module_t *btl) {
    if (0 == btl->batch.bytes) {
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: coalescing off");
        return;
    }
    opal_output_verbose(1, mca_common_efa_output,
                        "btl:efa: coalescing: %llu batch(es) carried %llu queued message(s)",
                        (unsigned long long)btl->batch.sent, (unsigned long long)btl->batch.msgs);
}
