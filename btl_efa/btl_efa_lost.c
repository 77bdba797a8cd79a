/*
 * btl_efa's lost peers (btl_efa_lost.h): the upper layer's error handler,
 * and the peers an operation failed to for a path error, queued for
 * progress (btl_efa_peer_lost.c tells them).
 */
#include "btl_efa_lost.h"

/* The upper layer's handler of fatal errors (ob1's aborts the job, or
 * under ULFM marks the process failed). */
static mca_btl_base_module_error_cb_fn_t efa_error_cb = NULL;

int mca_btl_efa_register_error(struct mca_btl_base_module_t *btl,
                               mca_btl_base_module_error_cb_fn_t cbfunc) {
    (void)btl;
    efa_error_cb = cbfunc;
    return OPAL_SUCCESS;
}

bool mca_btl_efa_fatal_heard(void) {
    return NULL != efa_error_cb;
}

void mca_btl_efa_fatal(mca_btl_efa_module_t *btl, opal_proc_t *proc, char *why) {
    if (NULL != efa_error_cb && !btl->finalizing) {
        efa_error_cb(&btl->super, MCA_BTL_ERROR_FLAGS_FATAL, proc, why);
    }
}

void mca_btl_efa_peer_failed_later_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                          int err) {
    if (NULL == ep || ep->lost || 0 != ep->lost_err || !efa_path_error(err)) {
        return;
    }
    ep->lost_err = err;
    ep->next_lost = btl->send.lost_due;
    btl->send.lost_due = ep;
}

void mca_btl_efa_peer_failed_later(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, int err) {
    if (OPAL_LIKELY(!efa_path_error(err)) || NULL == ep) {
        return;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    mca_btl_efa_peer_failed_later_locked(btl, ep, err);
    OPAL_THREAD_UNLOCK(&btl->lock);
}
