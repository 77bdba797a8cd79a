/*
 * mtl_efa's peers: the core's peer (its addresses in the shared address
 * vector) of every process pml cm gives, kept in the process's MTL
 * endpoint slot; one looked up on first use when it came after add_procs.
 */
#include "mtl_efa.h"

#include "opal/util/show_help.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

efa_peer_t *ompi_mtl_efa_peer_slow(struct ompi_proc_t *proc) {
    if (OMPI_SUCCESS != ompi_mtl_efa_add_procs(&ompi_mtl_efa.base, 1, &proc)) {
        return NULL;
    }
    /* add_procs published it (whichever thread's reference won). */
    return (efa_peer_t *)__atomic_load_n(&proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL],
                                         __ATOMIC_ACQUIRE);
}

/* A process on another host while the provider reaches this host alone
 * (shm, chosen for a job on one node, and spawn or connect brings
 * processes of other hosts later): its fi_av_insert succeeds, and every
 * send to it then waits for ever, holding back the context's ordered
 * backlog for every peer.  So it is refused before the insert, with the
 * message.  The runtime's locality decides; a peer whose host name is this
 * host's is kept (the runtime marks a process without locality
 * information as remote).  A peer of this node costs one test; add_procs
 * and first use only. */
static int refuse_off_host(struct ompi_proc_t *proc) {
    if (OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags)) {
        return OMPI_SUCCESS;
    }
    /* (asks libfabric once, at the first such peer) */
    const char *prov = efa_core_host_only(ompi_mtl_efa.core);
    if (NULL == prov) {
        return OMPI_SUCCESS;
    }
    char *host = NULL;
    int rc;
    OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, EFA_PMIX_HOSTNAME, &proc->super.proc_name, &host,
                                   EFA_PMIX_STRING);
    if (OPAL_SUCCESS != rc) {
        host = NULL;
    }
    if (NULL != host && NULL != opal_process_info.nodename &&
        0 == strcmp(host, opal_process_info.nodename)) {
        free(host);
        return OMPI_SUCCESS;
    }
    char pname[128];
    snprintf(pname, sizeof(pname), "rank %u (%s)", (unsigned)proc->super.proc_name.vpid,
             OPAL_NAME_PRINT(proc->super.proc_name));
    mca_common_efa_show_help("help-common-efa.txt", "peer-off-host", false,
                             opal_process_info.nodename, prov, pname,
                             NULL != host ? host : "(unknown; another by the runtime)");
    free(host);
    return OMPI_ERR_UNREACH;
}

int ompi_mtl_efa_add_procs(struct mca_mtl_base_module_t *mtl, size_t nprocs,
                           struct ompi_proc_t **procs) {
    static bool ft_said = false;
    (void)mtl;
    mca_common_efa_report(ompi_mtl_efa.core);
    /* (here, not at init: pml cm was chosen; every process says it, as
     * the program that counts on recovery is the one that must hear it) */
    if (MTL_EFA_FT_MPI_ON() && !__atomic_exchange_n(&ft_said, true, __ATOMIC_RELAXED)) {
        opal_show_help("help-mtl-efa.txt", "ft-mpi-under-cm", true, opal_process_info.nodename);
    }
    if (!ompi_mtl_efa.own_matching) {
        /* The provider matches each peer's tagged messages on NIC 0 alone. */
        efa_core_pin_rail0(ompi_mtl_efa.core, "mtl_efa's tagged messages (provider matching)");
    }
    for (size_t i = 0; i < nprocs; ++i) {
        if (NULL != __atomic_load_n(&procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL],
                                    __ATOMIC_ACQUIRE)) {
            continue;
        }
        int rc = refuse_off_host(procs[i]);
        if (OMPI_SUCCESS != rc) {
            return rc;
        }
        if (ompi_mtl_efa.own_matching &&
            procs[i]->super.proc_name.jobid != OPAL_PROC_MY_NAME.jobid) {
            /* A process of another job (spawn, connect) is reached by the
             * provider's matching even under own matching: on NIC 0 alone
             * (ompi_mtl_efa_own_comm). */
            efa_core_pin_rail0(ompi_mtl_efa.core,
                               "mtl_efa's tagged messages to another job's processes");
        }
        rc = ompi_mtl_efa_matching_check(procs[i]);
        if (OMPI_SUCCESS != rc) {
            return rc;
        }
        efa_peer_t *peer =
            mca_common_efa_peer_lookup(ompi_mtl_efa.core, &procs[i]->super.proc_name, true, &rc);
        if (NULL == peer) {
            return rc;
        }
        /* Two threads may add the same process at once (first use from
         * several, MPI_THREAD_MULTIPLE): each holds a reference to the one
         * peer; the first published stays, the other is given back (a
         * plain store would drop one reference for good). */
        void *none = NULL;
        if (!__atomic_compare_exchange_n(&procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL],
                                         &none, peer, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            efa_core_peer_put(ompi_mtl_efa.core, peer);
        }
    }
    return OMPI_SUCCESS;
}

/* Peers whose release waits for the engine's end: its link to other
 * nodes keeps pointers into them (their rails) and still progresses them
 * as it closes (pml cm calls del_procs before finalize). */
static efa_peer_t **kept;
static size_t nkept, kept_room;

/* Room in 'kept' for n more peers.  Where none can be had, the engine's
 * peers are left for the core's close, which frees every peer it still
 * holds: giving them back now would free what the engine still uses. */
static bool kept_room_for(size_t n) {
    if (nkept + n <= kept_room) {
        return true;
    }
    size_t room = kept_room ? kept_room : 64;
    while (room < nkept + n) {
        room *= 2;
    }
    efa_peer_t **grown = realloc(kept, room * sizeof(*kept));
    if (NULL == grown) {
        return false;
    }
    kept = grown;
    kept_room = room;
    return true;
}

static void put_or_keep(efa_peer_t *peer, bool room) {
    if (NULL == ompi_mtl_efa.engine) {
        efa_core_peer_put(ompi_mtl_efa.core, peer);
    } else if (room) {
        kept[nkept++] = peer;
    } /* else the core's close frees it (kept_room_for) */
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
    const bool room = NULL == ompi_mtl_efa.engine || kept_room_for(nprocs);
    for (size_t i = 0; i < nprocs; ++i) {
        efa_peer_t *peer = (efa_peer_t *)procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL];
        if (peer) {
            put_or_keep(peer, room);
            procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL] = NULL;
        }
    }
    return OMPI_SUCCESS;
}
