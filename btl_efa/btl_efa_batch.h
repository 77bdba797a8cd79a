/*
 * btl_efa's coalescing (btl_efa_batch.c): what the send path calls, the
 * module lock held where the name says so.
 */
#ifndef MCA_BTL_EFA_BATCH_H
#define MCA_BTL_EFA_BATCH_H

#include "btl_efa.h"

BEGIN_C_DECLS

/* A batch of the active messages at the head of ep's queue (2 or more,
 * within btl_efa_coalesce_bytes and _max), ready to post; NULL when they
 * are fewer or do not fit.  They stay queued until it is about to be
 * posted. */
efa_btl_frag_t *mca_btl_efa_batch_build_locked(mca_btl_efa_module_t *btl,
                                               mca_btl_efa_endpoint_t *ep);
/* The batch is about to be posted: its messages leave the queue now, since
 * once it is posted its completion (in another thread, at once) finishes
 * them, and the batch is no longer the poster's to read. */
void mca_btl_efa_batch_take_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                   efa_btl_frag_t *batch);
/* A batch of 'count' messages was posted (counted). */
void mca_btl_efa_batch_posted_locked(mca_btl_efa_module_t *btl, int count);
/* The batch could not be posted: its messages go back to the head of
 * ep's queue, in order, and it is recycled. */
void mca_btl_efa_batch_discard_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                      efa_btl_frag_t *batch);
void mca_btl_efa_batch_report(const mca_btl_efa_module_t *btl);

END_C_DECLS
#endif
