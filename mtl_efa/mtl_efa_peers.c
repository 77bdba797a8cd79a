/*
 * mtl_efa's peers: the core's peer (its addresses in the shared address
 * vector) of every process pml cm gives, kept in the process's MTL
 * endpoint slot; one looked up on first use when it came after add_procs.
 */
#include "mtl_efa.h"

efa_peer_t *ompi_mtl_efa_peer_slow(struct ompi_proc_t *proc) {
    if (OMPI_SUCCESS != ompi_mtl_efa_add_procs(&ompi_mtl_efa.base, 1, &proc)) {
        return NULL;
    }
    return (efa_peer_t *)proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL];
}

int ompi_mtl_efa_add_procs(struct mca_mtl_base_module_t *mtl, size_t nprocs,
                           struct ompi_proc_t **procs) {
    (void)mtl;
    mca_common_efa_report(ompi_mtl_efa.core);
    if (!ompi_mtl_efa.own_matching) {
        /* The provider matches each peer's tagged messages on NIC 0 alone. */
        efa_core_pin_rail0(ompi_mtl_efa.core, "mtl_efa's tagged messages (provider matching)");
    }
    for (size_t i = 0; i < nprocs; ++i) {
        if (NULL != procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL]) {
            continue;
        }
        if (ompi_mtl_efa.own_matching &&
            procs[i]->super.proc_name.jobid != OPAL_PROC_MY_NAME.jobid) {
            /* A process of another job (spawn, connect) is reached by the
             * provider's matching even under own matching: on NIC 0 alone
             * (ompi_mtl_efa_own_comm). */
            efa_core_pin_rail0(ompi_mtl_efa.core,
                               "mtl_efa's tagged messages to another job's processes");
        }
        int rc = ompi_mtl_efa_matching_check(procs[i]);
        if (OMPI_SUCCESS != rc) {
            return rc;
        }
        efa_peer_t *peer =
            mca_common_efa_peer_lookup(ompi_mtl_efa.core, &procs[i]->super.proc_name, &rc);
        if (NULL == peer) {
            return rc;
        }
        procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL] = peer;
    }
    return OMPI_SUCCESS;
}

/* Peers whose release waits for the engine's end: its link to other
 * nodes keeps pointers into them (their rails) and still progresses them
 * as it closes (pml cm calls del_procs before finalize). */
static efa_peer_t **kept;
static size_t nkept, kept_room;

static void put_or_keep(efa_peer_t *peer) {
    if (NULL != ompi_mtl_efa.engine && nkept == kept_room) {
        const size_t room = kept_room ? 2 * kept_room : 64;
        efa_peer_t **grown = realloc(kept, room * sizeof(*kept));
        if (NULL != grown) {
            kept = grown;
            kept_room = room;
        }
    }
    if (NULL != ompi_mtl_efa.engine && nkept < kept_room) {
        kept[nkept++] = peer;
    } else {
        efa_core_peer_put(ompi_mtl_efa.core, peer);
    }
}

void ompi_mtl_efa_put_kept_peers(void) {
    for (size_t i = 0; i < nkept; ++i) {
        efa_core_peer_put(ompi_mtl_efa.core, kept[i]);
    }
    free(kept);
    kept = NULL;
    nkept = kept_room = 0;
}

int ompi_mtl_efa_del_procs(struct mca_mtl_base_module_t *mtl, size_t nprocs,
                           struct ompi_proc_t **procs) {
    (void)mtl;
    mca_common_efa_report(ompi_mtl_efa.core);
    for (size_t i = 0; i < nprocs; ++i) {
        efa_peer_t *peer = (efa_peer_t *)procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL];
        if (peer) {
            put_or_keep(peer);
            procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL] = NULL;
        }
    }
    return OMPI_SUCCESS;
}
