/*
 * btl_efa's progress: what the common progress callback runs after the
 * core's (mca_common_efa_progress_add, from add_procs): frames of the
 * on-node rings, finished operations, now and then one-sided requests left
 * unanswered, and the sends waiting for credits or queue room.
 */
#include "btl_efa.h"

int mca_btl_efa_component_progress(void) {
    if (NULL == mca_btl_efa_module.core) {
        return 0;
    }
    int n = mca_btl_efa_ring_poll(&mca_btl_efa_module);
    mca_btl_efa_run_done(&mca_btl_efa_module);
    /* Unanswered requests are looked for now and then (a clock read per
     * call would cost more than the rest of an idle progress call). */
    static unsigned calls;
    /* Both read and counted by every progressing thread: atomics (relaxed,
     * only how often the look happens depends on them). */
    if (__atomic_load_n(&mca_btl_efa_module.outstanding, __ATOMIC_RELAXED) > 0 &&
        0 == (__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED) & 1023)) {
        n += mca_btl_efa_emul_expire(&mca_btl_efa_module);
    }
    return n + mca_btl_efa_drain_pending(&mca_btl_efa_module);
}
