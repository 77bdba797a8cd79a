/*
 * The synchronous sends' acknowledgement receives still at the provider.
 *
 * Such a receive can outlive its send: a cancelled or failed synchronous
 * send stops waiting for it and leaves it posted (or cancels it, which
 * completes later), and it frees itself when it completes.  mtl_efa may be
 * finalized while the core stays open for btl_efa; pml cm then unloads
 * this library while the core still progresses, and such a completion would
 * call into unmapped code.  So every acknowledgement receive is listed from
 * its post to its completion, and finalize points those left at the core's
 * efa_op_complete_nothing, leaving their memory allocated (efa_core.h).
 * Synchronous sends only: nothing of this is on the path of other sends.
 */
#include "mtl_efa.h"

#include <pthread.h>

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static mca_mtl_efa_ack_recv_t *kept_first;

void ompi_mtl_efa_ack_keep(mca_mtl_efa_ack_recv_t *ack) {
    pthread_mutex_lock(&kept_lock);
    ack->kept = true;
    ack->kept_prev = NULL;
    ack->kept_next = kept_first;
    if (NULL != kept_first) {
        kept_first->kept_prev = ack;
    }
    kept_first = ack;
    pthread_mutex_unlock(&kept_lock);
}

void ompi_mtl_efa_ack_unkeep(mca_mtl_efa_ack_recv_t *ack) {
    pthread_mutex_lock(&kept_lock);
    if (!ack->kept) { /* (let go at finalize) */
        pthread_mutex_unlock(&kept_lock);
        return;
    }
    ack->kept = false;
    if (NULL != ack->kept_prev) {
        ack->kept_prev->kept_next = ack->kept_next;
    } else {
        kept_first = ack->kept_next;
    }
    if (NULL != ack->kept_next) {
        ack->kept_next->kept_prev = ack->kept_prev;
    }
    ack->kept_prev = ack->kept_next = NULL;
    pthread_mutex_unlock(&kept_lock);
}

size_t ompi_mtl_efa_acks_fini(void) {
    size_t left = 0;
    pthread_mutex_lock(&kept_lock);
    for (mca_mtl_efa_ack_recv_t *ack = kept_first, *next; NULL != ack; ack = next) {
        next = ack->kept_next;
        ack->op.complete = efa_op_complete_nothing;
        ack->kept = false;
        ack->kept_prev = ack->kept_next = NULL;
        ++left;
    }
    kept_first = NULL;
    pthread_mutex_unlock(&kept_lock);
    return left;
}
