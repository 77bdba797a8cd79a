/*
 * btl_efa's send fragments: a pool of them in slabs (registered where the
 * provider wants local descriptors), and the slabs' end at finalize.
 */
#include "btl_efa.h"

#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"

#define FRAGS_PER_SLAB 16

/* Once per fragment, as the pool makes its slab. */
static void frag_init(void *arg, void *elem, void *buf, void *desc) {
    mca_btl_efa_module_t *btl = arg;
    efa_btl_frag_t *frag = elem;
    OBJ_CONSTRUCT(&frag->base, mca_btl_base_descriptor_t);
    frag->op.complete = btl->frag.complete;
    frag->buf = buf;
    frag->desc = desc;
}

/* The module lock is held. */
efa_btl_frag_t *mca_btl_efa_frag_get_locked(mca_btl_efa_module_t *btl) {
    efa_btl_frag_t *frag = efa_pool_get(btl->frag.pool);
    if (NULL == frag) {
        return NULL;
    }
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
    mca_btl_efa_frag_return_locked(btl, frag);
    OPAL_THREAD_UNLOCK(&btl->lock);
}

bool mca_btl_efa_frag_fresh_buffer_locked(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag,
                                          size_t len) {
    efa_btl_frag_t *spare = mca_btl_efa_frag_get_locked(btl);
    if (NULL == spare) {
        return false;
    }
    uint8_t *old = frag->buf;
    memcpy(spare->buf, old, len);
    frag->buf = spare->buf;
    spare->buf = old;
    void *desc = frag->desc;
    frag->desc = spare->desc;
    spare->desc = desc;
    efa_mr_t *mr = frag->mr;
    frag->mr = spare->mr;
    spare->mr = mr;
    uint8_t *seg = frag->segments[0].seg_addr.pval;
    if (seg >= old && seg < old + btl->frag.size) {
        frag->segments[0].seg_addr.pval = frag->buf + (seg - old);
    }
    /* Kept as the provider's, whose slab the pool never frees: every slab
     * stays until the endpoints close (frag_busy). */
    spare->posted = true;
    spare->op.complete = efa_op_complete_nothing;
    ++btl->spread.retired;
    return true;
}

void mca_btl_efa_frag_orphan_locked(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag) {
    /* A peer alive after all (a partition that healed) could otherwise
     * receive another message's bytes from the old buffer.  Without a
     * spare (out of memory) the buffer goes back all the same: the
     * provider very rarely still reads it.  (The whole buffer: a RESP's
     * retry sends it again.) */
    (void)mca_btl_efa_frag_fresh_buffer_locked(btl, frag, btl->frag.size);
    if (NULL != frag->data_mr) {
        /* In place: the provider may read the caller's memory through it
         * still, so the registration is not released (one reference of
         * the cache kept until finalize). */
        frag->data_mr = NULL;
        frag->data_desc = NULL;
    }
}

int mca_btl_efa_frag_pool_init(mca_btl_efa_module_t *btl,
                               void (*complete)(efa_op_t *op, const efa_cqe_t *cqe)) {
    btl->frag.complete = complete;
    const bool mr_local = efa_core_get_info(btl->core)->mr_local;
    const efa_pool_desc_t desc = {
        .elem_size = sizeof(efa_btl_frag_t),
        .link_off = offsetof(efa_btl_frag_t, next),
        .buf_size = btl->frag.size,
        .buf_align = 4096,
        .per_slab = FRAGS_PER_SLAB,
        .core = btl->core,
        .mr_access = mr_local ? (FI_SEND | FI_RECV | FI_READ | FI_WRITE) : 0,
        .init = frag_init,
        .arg = btl,
        .mr_off = offsetof(efa_btl_frag_t, mr),
    };
    int err = 0;
    btl->frag.pool = efa_pool_create(&desc, &err);
    return NULL == btl->frag.pool ? mca_common_efa_fi_to_opal(err) : OPAL_SUCCESS;
}

/* A fragment the provider still holds: its completion, should it come,
 * goes to a function of the core's library (this component's code may be
 * unloaded by then), and its slab stays. */
static bool frag_busy(void *arg, void *elem) {
    const mca_btl_efa_module_t *btl = arg;
    efa_btl_frag_t *frag = elem;
    if (frag->posted) {
        frag->op.complete = efa_op_complete_nothing;
    }
    /* A buffer given up to the provider by a failover (btl_efa_spread.c)
     * may be any slab's: then every slab stays until the endpoints close. */
    return frag->posted || 0 != btl->spread.retired;
}

void mca_btl_efa_frag_slabs_fini(mca_btl_efa_module_t *btl) {
    if (NULL != btl->frag.pool) {
        (void)efa_pool_retire(btl->frag.pool, frag_busy, btl);
    }
}

void mca_btl_efa_frag_slabs_fini_released(mca_btl_efa_module_t *btl) {
    if (NULL == btl->frag.pool) {
        return;
    }
    /* With the endpoints closed nothing will complete any more (the slabs'
     * registrations went with the core). */
    const size_t kept = efa_pool_destroy(btl->frag.pool, NULL == efa_core_current());
    if (kept > 0) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: %zu fragment slab(s) left to the provider, which still "
                            "holds sends of them",
                            kept);
    }
    btl->frag.pool = NULL;
}
