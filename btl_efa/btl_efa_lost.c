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

/* Queued once (lost_err: the error, negated where the core is to be
 * asked first); a certain failure replaces one to ask about. */
static void queue_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, int err, bool ask) {
    if (NULL == ep || ep->lost || !efa_path_error(err)) {
        return;
    }
    if (0 != ep->lost_err) {
        if (!ask && ep->lost_err > 0) {
            ep->lost_err = err;
        }
        return;
    }
    ep->lost_err = ask ? -err : err;
    ep->next_lost = btl->send.lost_due;
    btl->send.lost_due = ep;
}

static void queue(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, int err, bool ask) {
    if (OPAL_LIKELY(!efa_path_error(err)) || NULL == ep) {
        return;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    queue_locked(btl, ep, err, ask);
    OPAL_THREAD_UNLOCK(&btl->lock);
}

void mca_btl_efa_peer_failed_later_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                          int err) {
    queue_locked(btl, ep, err, false);
}

void mca_btl_efa_peer_failed_later(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, int err) {
    queue(btl, ep, err, false);
}

void mca_btl_efa_peer_failed_later_asking(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                          int err) {
    queue(btl, ep, err, true);
}
