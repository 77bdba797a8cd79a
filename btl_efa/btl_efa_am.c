/*
 * btl_efa's two-sided entry points for the upper layer (ob1): descriptors
 * (alloc, free, prepare_src), send and sendi.  The fragments they make go
 * to the send path (btl_efa_send.c).
 */
#include "btl_efa_ring.h"

#include <string.h>

#include "opal/datatype/opal_convertor.h"

mca_btl_base_descriptor_t *mca_btl_efa_alloc(struct mca_btl_base_module_t *base,
                                             struct mca_btl_base_endpoint_t *endpoint,
                                             uint8_t order, size_t size, uint32_t flags) {
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

int mca_btl_efa_free(struct mca_btl_base_module_t *base, mca_btl_base_descriptor_t *des) {
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

/* sendi's copy of the whole message's data to dst: contiguous host data (a
 * small message's, mostly) is one memcpy from where it lies, without the
 * convertor's pack (60 instructions of a 1-byte send).  The convertor is
 * not advanced: sendi sends all of the data, and its caller is done with
 * the convertor once sendi succeeds. */
static inline int copy_out(opal_convertor_t *conv, void *dst, size_t *size) {
    if (OPAL_LIKELY((conv->flags & CONVERTOR_NO_OP) &&
                    !(conv->flags & MCA_BTL_EFA_CONVERTOR_DEVICE))) {
        void *src = NULL;
        opal_convertor_get_current_pointer(conv, &src);
        memcpy(dst, src, *size);
        return OPAL_SUCCESS;
    }
    return pack(conv, dst, size);
}

/* Reference *size bytes of the convertor's contiguous data in place as the
 * fragment's second segment.  With FI_MR_LOCAL the memory needs a
 * descriptor from the registration cache; false (nothing consumed) when
 * that fails, and the caller copies instead. */
static bool reference_in_place(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag,
                               opal_convertor_t *conv, size_t *size) {
    if (btl->native.mr_local) {
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

mca_btl_base_descriptor_t *mca_btl_efa_prepare_src(struct mca_btl_base_module_t *base,
                                                   struct mca_btl_base_endpoint_t *endpoint,
                                                   struct opal_convertor_t *convertor,
                                                   uint8_t order, size_t reserve, size_t *size,
                                                   uint32_t flags) {
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
    bool in_place =
        (btl->send.inplace_min ? *size >= btl->send.inplace_min : msg_len > btl->send.inject_max) &&
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

int mca_btl_efa_send(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *endpoint,
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
    frag->inject = frag->base.des_segment_count < 2 && frag->send_len <= btl->send.inject_max;
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
    if (NULL == ep->flow.head) {
        slot = efa_ring_reserve(ep->ring_out, total);
        if (NULL == slot) {
            ++btl->ring.full;
        }
    }
    if (NULL == slot) {
        OPAL_THREAD_UNLOCK(&btl->lock);
        return OPAL_ERR_RESOURCE_BUSY;
    }
    uint8_t *data = slot + sizeof(efa_btl_hdr_t);
    memcpy(data, header, header_size);
    size_t size = payload_size;
    if (payload_size > 0 && OPAL_SUCCESS != copy_out(convertor, data + header_size, &size)) {
        OPAL_THREAD_UNLOCK(&btl->lock); /* reserved, never committed: nothing sent */
        return OPAL_ERROR;
    }
    efa_btl_hdr_t hdr;
    const uint16_t give = efa_flow_give(&ep->flow);
    hdr.type = EFA_BTL_MSG_AM;
    hdr.tag = tag;
    hdr.credits = give;
    hdr.len = (uint32_t)(header_size + size);
    hdr.src = btl->my_name;
    memcpy(slot, &hdr, sizeof(hdr));
    efa_ring_commit(ep->ring_out, sizeof(hdr) + header_size + size);
    ++btl->ring.sent;
    efa_flow_sent(&btl->send.flow, &ep->flow, give, false); /* a ring frame takes no credit */
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
        *descriptor = mca_btl_efa_alloc(base, endpoint, MCA_BTL_NO_ORDER, size, flags);
    }
    return OPAL_ERR_RESOURCE_BUSY;
}

int mca_btl_efa_sendi(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *endpoint,
                      struct opal_convertor_t *convertor, void *header, size_t header_size,
                      size_t payload_size, uint8_t order, uint32_t flags, mca_btl_base_tag_t tag,
                      mca_btl_base_descriptor_t **descriptor) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    (void)order;
    if (descriptor) {
        *descriptor = NULL;
    }
    if (OPAL_UNLIKELY(endpoint->lost)) {
        /* (a peer of this node too: its ring would take the frame, and
         * nobody would read it) */
        return OPAL_ERR_UNREACH;
    }
    const size_t total = sizeof(efa_btl_hdr_t) + header_size + payload_size;
    /* Device data goes through a fragment below, packed (the device's
     * copy) before any lock: straight into the slot it would be copied
     * under the module lock, every other thread waiting for the GPU. */
    if ((0 == payload_size || !(convertor->flags & MCA_BTL_EFA_CONVERTOR_DEVICE)) &&
        mca_btl_efa_via_ring(btl, endpoint, total)) {
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
    if (payload_size > 0 && OPAL_SUCCESS != copy_out(convertor, data + header_size, &size)) {
        mca_btl_efa_frag_return(btl, frag);
        return OPAL_ERROR;
    }
    fill_am(btl, frag, endpoint, tag, header_size + size);
    /* Nobody waits for this fragment's completion: a small one is injected
     * and recycled at once, no completion to reap. */
    frag->inject = frag->send_len <= btl->send.inject_max;
    int rc = mca_btl_efa_frag_post(btl, frag);
    if (OPAL_SUCCESS != rc) {
        mca_btl_efa_frag_return(btl, frag);
        if (payload_size > 0) {
            /* ob1 sends again from where the convertor is, and resets it
             * only when given a descriptor: back to the start, or the
             * retry would send the message short. */
            size_t zero = 0;
            opal_convertor_set_position(convertor, &zero);
        }
        /* A lost peer's refusal stays one: busy, ob1 would try again at
         * once and for ever.  Told OPAL_ERR_UNREACH (no descriptor) it
         * parks the message as for a busy BTL (pml_ob1_sendreq.c,
         * pml_ob1.c's send_control_btl) and its error handler, called
         * from the next progress (mca_btl_efa_frag_post), ends the job or
         * fails the process under ULFM. */
        return OPAL_ERR_UNREACH == rc ? rc : OPAL_ERR_RESOURCE_BUSY;
    }
    return OPAL_SUCCESS;
}
