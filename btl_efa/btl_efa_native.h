/*
 * btl_efa's operations by the provider's RMA and atomics (btl_efa_native.c,
 * btl_efa_native_atomic.c): the rop each one is, from the module's pool.
 */
#ifndef MCA_BTL_EFA_NATIVE_H
#define MCA_BTL_EFA_NATIVE_H

#include "btl_efa_rdma.h"

BEGIN_C_DECLS

/* A one-sided operation handed to the provider (native path).  A transfer
 * larger than the provider's limit is cut into pieces, each its own rop
 * pointing at a parent rop that is never posted and reports once every
 * piece has completed. */
typedef struct efa_btl_rop {
    efa_op_t op;                /* first: the core hands it back */
    struct efa_btl_rop *next;   /* free list */
    struct efa_btl_rop *parent; /* pieces: the rop that reports */
    volatile int64_t pending;   /* parent: pieces not completed, plus one while posting */
    int status;                 /* parent: first error */
    mca_btl_efa_endpoint_t *endpoint;
    efa_btl_rdma_cb_t cb;
    efa_mr_t *local_mr;   /* local MR taken from the cache for a descriptor */
    uint32_t result_size; /* fetching atomics: bytes to copy back to local_address */
    uint64_t *scratch;    /* registered: [0] operand, [1] compare, [2] result */
    void *scratch_desc;
    /* The provider holds it (posted, completion still to come): its slab
     * must outlive finalize (mca_btl_efa_native_fini).  A piece: what to
     * post again over another rail if its rail fails (piece_again). */
    volatile bool posted;
    int8_t rail, type;
    void *local;
    size_t len;
    uint64_t raddr;
    /* parent: the target's key on each rail (bit r of keyed: known; 0
     * for atomics, which never go again); a piece moved once */
    uint8_t keyed;
    bool moved;
    /* parent: a piece of it was kept posted (rop_release), and uses its
     * local_mr's descriptor: that registration is then never released */
    bool piece_kept;
    uint64_t rkey[EFA_MAX_RAILS];
    /* parent of a device buffer here (local_mr its registration): the
     * peer's address and its handle's key for the emulated path, so that
     * a piece whose post the provider refuses goes as requests
     * (piece_by_requests); post_err: a failed post's error */
    uint64_t remote_address, emul_key;
    int post_err;
} efa_btl_rop_t;

/* A rop from the pool (made at the first operation), bookkeeping fields reset; NULL
 * without memory.  Back to the pool with its local registration released. */
efa_btl_rop_t *mca_btl_efa_rop_get(mca_btl_efa_module_t *btl);
void mca_btl_efa_rop_return(mca_btl_efa_module_t *btl, efa_btl_rop_t *rop);

END_C_DECLS
#endif
