/*
 * btl_efa's send fragments: a pool of them in slabs (registered where the
 * provider wants local descriptors), and the slabs' end at finalize.
 */
#include "btl_efa.h"

#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"

#define FRAGS_PER_SLAB 16

typedef struct efa_btl_slab {
    efa_btl_frag_t *frags;
    uint8_t *bufs;
    efa_mr_t *mr;
} efa_btl_slab_t;

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
        frag->op.complete = btl->frag_complete;
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

int mca_btl_efa_frag_pool_init(mca_btl_efa_module_t *btl,
                               void (*complete)(efa_op_t *op, const efa_cqe_t *cqe)) {
    btl->free_frags = NULL;
    btl->frag_complete = complete;
    return grow(btl);
}

/* A slab with a fragment the provider still holds cannot be freed while
 * the endpoint is open; the fragment's completion, should it come, goes
 * to a function of the core's library (this component's code may be
 * unloaded by then).  The others go now. */
void mca_btl_efa_frag_slabs_fini(mca_btl_efa_module_t *btl) {
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
}

void mca_btl_efa_frag_slabs_fini_released(mca_btl_efa_module_t *btl) {
    const int kept = btl->num_slabs;
    if (kept > 0 && NULL == efa_core_current()) {
        /* The endpoints are closed: nothing will complete any more (the
         * slabs' registrations went with the core). */
        for (int i = 0; i < kept; ++i) {
            efa_btl_slab_t *slab = btl->slabs[i];
            free(slab->bufs);
            free(slab->frags);
            free(slab);
        }
    } else if (kept > 0) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: %d fragment slab(s) left to the provider, which still "
                            "holds sends of them",
                            kept);
    }
    free(btl->slabs);
    btl->slabs = NULL;
    btl->num_slabs = 0;
}
