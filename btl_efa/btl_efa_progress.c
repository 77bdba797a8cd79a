/*
 * btl_efa's progress: what the common progress callback runs after the
 * core's (mca_common_efa_progress_add, from add_procs): frames of the
 * on-node rings, finished operations, now and then one-sided requests left
 * unanswered and the inbox's count of corrupted frames, the sends
 * waiting for credits or queue room, and peers found lost where the upper
 * layer could not be told at once.
 *
 * It runs on every opal_progress call, so each step that mostly has
 * nothing to do is a test here, inline, and a call only when there is
 * work: an on-node round trip pays this function twice.
 */
#include "btl_efa_lost.h"
#include "btl_efa_emul.h"
#include "btl_efa_ring.h"

int mca_btl_efa_component_progress(void) {
    mca_btl_efa_module_t *btl = &mca_btl_efa_module;
    if (NULL == btl->core) {
        return 0;
    }
    int n = NULL != btl->ring.node ? mca_btl_efa_ring_poll(btl) : 0;
    if (NULL != btl->send.done_head) { /* peeked without the lock: run_done takes it */
        mca_btl_efa_run_done(btl);
    }
    /* Unanswered requests and dropped frames are looked for now and then
     * (a clock read per call would cost more than the rest of an idle
     * progress call).  The count is read and written by every progressing
     * thread: relaxed atomics, a load and a store (not a locked add: only
     * how often the look happens depends on it, and a lost count does not
     * matter). */
    const unsigned call = __atomic_load_n(&btl->progress_calls, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&btl->progress_calls, call, __ATOMIC_RELAXED);
    /* Requests in peers' rings that may be waiting for a busy target. */
    if (OPAL_UNLIKELY(0 != __atomic_load_n(&btl->ring_rma.active, __ATOMIC_RELAXED)) &&
        0 == (call & 63)) {
        mca_btl_efa_ring_rma_check(btl);
    }
    if (OPAL_UNLIKELY(0 == (call & 1023))) {
        if (__atomic_load_n(&btl->outstanding, __ATOMIC_RELAXED) > 0) {
            n += mca_btl_efa_emul_expire(btl);
        }
        mca_btl_efa_ring_check_dropped(btl);
    }
    if (mca_btl_efa_send_work(btl)) {
        n += mca_btl_efa_drain_pending(btl);
    }
    /* Peers found lost inside a send call or the watch's sweep (peeked
     * without the lock: mca_btl_efa_tell_lost_due takes it). */
    if (OPAL_UNLIKELY(NULL != btl->send.lost_due)) {
        mca_btl_efa_tell_lost_due(btl);
    }
    return n;
}
