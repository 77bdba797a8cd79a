/*
 * btl_efa's add_procs and del_procs: the endpoints of the peers ob1 gives
 * it, their one-sided mode and on-node channel, and, once one is in use,
 * the BTL's progress joined to the common progress callback.
 */
#include "btl_efa_mode.h"
#include "btl_efa_ring.h"
#include "btl_efa_spread.h"

#include <stdlib.h>
#include <string.h>

#include "opal/class/opal_bitmap.h"
#include "opal/util/output.h"

/* A peer that reaches this process through the provider only sends
 * unannounced (active messages into the receive pool): the core must poll
 * the provider on every progress call while it is known, not only at the
 * paced interval (efa_core_progress_paced).  Peers of the on-node channel
 * need no such interest: after sending through the provider (frames
 * larger than a slot, native one-sided operations) they ring this
 * process's doorbell (mca_btl_efa_ring_wake).  A process of this node
 * whose card lacks the channel (its inbox could not be made) cannot. */
static void hold_net_interest(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    efa_node_card_t card;
    if (ep->is_self ||
        (EFA_BTL_RING_NONE != ep->ring_state && mca_btl_efa_ring_peer_serves(ep, &card))) {
        return;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    if (!ep->net_interest) {
        ep->net_interest = true;
        ++btl->procs.net_interest;
        efa_core_net_interest(btl->core, 1);
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
}

/* A process on another host while the provider reaches this host alone
 * (shm, chosen for a job on one node; spawn or connect brings processes of
 * other hosts later): its fi_av_insert would succeed, and every send to it
 * then wait for ever, holding back the context's ordered backlog for every
 * peer.  Such a process is left unreachable here, so that ob1 takes
 * another BTL for it; said at verbose level (not an error: others carry
 * it).  The runtime's locality decides; a peer whose host name is this
 * host's is kept (the runtime marks a process without locality
 * information as remote).  A peer of this node costs one test. */
static bool off_host(mca_btl_efa_module_t *btl, opal_proc_t *proc) {
    if (OPAL_PROC_ON_LOCAL_NODE(proc->proc_flags)) {
        return false;
    }
    /* (asks libfabric once, at the first such peer) */
    const char *prov = efa_core_host_only(btl->core);
    if (NULL == prov) {
        return false;
    }
    char *host = NULL;
    int rc;
    OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, EFA_PMIX_HOSTNAME, &proc->proc_name, &host, EFA_PMIX_STRING);
    if (OPAL_SUCCESS != rc) {
        host = NULL;
    }
    const bool away = NULL == host || NULL == opal_process_info.nodename ||
                      0 != strcmp(host, opal_process_info.nodename);
    if (away) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: %s on host %s not reachable: provider %s reaches this "
                            "host (%s) alone; another BTL carries it",
                            OPAL_NAME_PRINT(proc->proc_name),
                            NULL != host ? host : "(unknown; another by the runtime)", prov,
                            opal_process_info.nodename);
    }
    free(host);
    return away;
}

int mca_btl_efa_add_procs(struct mca_btl_base_module_t *base, size_t nprocs,
                          struct opal_proc_t **procs, struct mca_btl_base_endpoint_t **endpoints,
                          struct opal_bitmap_t *reachable) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    /* Before anything is registered or sent one-sided (and before the
     * report, which says it). */
    mca_btl_efa_mode_agree(btl);
    mca_common_efa_report(btl->core);
    bool any = false;
    for (size_t i = 0; i < nprocs; ++i) {
        if (off_host(btl, procs[i])) {
            endpoints[i] = NULL;
            continue;
        }
        mca_btl_efa_endpoint_t *ep =
            mca_btl_efa_endpoint_by_name(btl, mca_btl_efa_name_key(&procs[i]->proc_name), procs[i]);
        endpoints[i] = ep;
        if (ep) {
            any = true;
            mca_btl_efa_mode_add_peer(btl, ep, procs[i]);
            mca_btl_efa_ring_add_proc(btl, ep, procs[i]);
            hold_net_interest(btl, ep);
            mca_btl_efa_spread_assign(btl, ep);
            ep->detached = false;
            if (reachable) {
                opal_bitmap_set_bit(reachable, (int)i);
            }
        }
    }
    /* In use from now on: the component's progress joins the common
     * progress callback (where the BML would have registered btl_progress
     * for a BTL in use; btl_progress is NULL so that it does not). */
    if (any && !btl->procs.progress_added) {
        if (OPAL_SUCCESS != mca_common_efa_progress_add(mca_btl_efa_component_progress)) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        btl->procs.progress_added = true;
    }
    return OPAL_SUCCESS;
}

int mca_btl_efa_del_procs(struct mca_btl_base_module_t *base, size_t nprocs,
                          struct opal_proc_t **procs, struct mca_btl_base_endpoint_t **peers) {
    /* Endpoints stay until finalize: a peer's one-sided requests may still
     * need the way back, and sends to the peer may still be in flight.  But
     * the upper layer is done with them (ob1 calls this from MPI_Finalize,
     * then closes and unloads itself before the BTLs are finalized): what
     * still completes for them, or arrives from them, is not handed up. */
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    (void)procs;
    OPAL_THREAD_LOCK(&btl->lock);
    for (size_t i = 0; peers && i < nprocs; ++i) {
        if (peers[i]) {
            peers[i]->detached = true;
        }
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    return OPAL_SUCCESS;
}
