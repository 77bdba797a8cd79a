/*
 * btl_efa's endpoints: one per peer process, found (or made) by the peer's
 * name, kept until finalize.  add_procs and del_procs are btl_efa_procs.c's.
 */
#include "btl_efa.h"

#include <stdlib.h>
#include <string.h>

/* Names whose lookup failed lately (no modex entry: none of the job's, or
 * forged by a message): asked again they fail at once, without asking the
 * runtime again and saying it again, its pause included (under the module
 * lock). */
#define FAILED_NAMES 16
static uint64_t failed_names[FAILED_NAMES];
static unsigned failed_next;

static bool failed_before_locked(uint64_t name) {
    for (unsigned i = 0; i < FAILED_NAMES; ++i) {
        if (0 != failed_names[i] && failed_names[i] == name) {
            return true;
        }
    }
    return false;
}

mca_btl_efa_endpoint_t *mca_btl_efa_endpoint_by_name(mca_btl_efa_module_t *btl, uint64_t name,
                                                     opal_proc_t *proc) {
    void *value = NULL;
    OPAL_THREAD_LOCK(&btl->lock);
    if (OPAL_SUCCESS == opal_hash_table_get_value_uint64(&btl->endpoints, name, &value)) {
        mca_btl_efa_endpoint_t *ep = value;
        if (proc && NULL == ep->proc) {
            ep->proc = proc;
        }
        OPAL_THREAD_UNLOCK(&btl->lock);
        return ep;
    }
    /* (add_procs, which names the process, always asks: a lookup that
     * failed for a message, the runtime not ready yet, says nothing of it) */
    if (NULL == proc && failed_before_locked(name)) {
        OPAL_THREAD_UNLOCK(&btl->lock);
        return NULL;
    }
    OPAL_THREAD_UNLOCK(&btl->lock);

    mca_btl_efa_endpoint_t *ep = calloc(1, sizeof(*ep));
    if (NULL == ep) {
        return NULL;
    }
    memcpy(&ep->name, &name, sizeof(name));
    ep->proc = proc;
    ep->is_self = (name == btl->my_name);
    efa_flow_peer_init(&btl->send.flow, &ep->flow);
    int rc;
    ep->peer = mca_common_efa_peer_lookup(btl->core, &ep->name, NULL != proc, &rc);
    if (NULL == ep->peer) {
        free(ep);
        OPAL_THREAD_LOCK(&btl->lock);
        failed_names[failed_next++ % FAILED_NAMES] = name;
        OPAL_THREAD_UNLOCK(&btl->lock);
        return NULL;
    }
    ep->addr = ep->peer->addr[0];

    OPAL_THREAD_LOCK(&btl->lock);
    if (OPAL_SUCCESS == opal_hash_table_get_value_uint64(&btl->endpoints, name, &value)) {
        /* Another thread won the race (a message's lookup, which names no
         * process: add_procs's proc is kept as on the fast path). */
        mca_btl_efa_endpoint_t *won = value;
        if (proc && NULL == won->proc) {
            won->proc = proc;
        }
        OPAL_THREAD_UNLOCK(&btl->lock);
        efa_core_peer_put(btl->core, ep->peer);
        free(ep);
        return value;
    }
    opal_hash_table_set_value_uint64(&btl->endpoints, name, ep);
    OPAL_THREAD_UNLOCK(&btl->lock);
    return ep;
}
