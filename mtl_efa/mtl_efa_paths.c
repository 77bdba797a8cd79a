/*
 * Which path each communicator of mtl_efa takes: decided once, in add_comm,
 * from facts every member sees alike, so both ends of every message agree.
 * On-node: every process of it (both groups of an intercommunicator) is of
 * this job, on this node, and published that its engine's channel is up
 * (the node card, common_efa_node.c); mixed: other processes of the job
 * share this node; provider otherwise.  The table is read lock-free by
 * senders (mtl_efa.h: ompi_mtl_efa_comm_path).
 */
#include "mtl_efa.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/group/group.h"
#include "opal/util/proc.h"

static bool peer_has_inbox(const ompi_proc_t *proc);

bool ompi_mtl_efa_ring_peer(struct ompi_communicator_t *comm, int rank) {
    ompi_proc_t *proc = ompi_comm_peer_lookup(comm, rank);
    return NULL != proc && proc->super.proc_name.jobid == OPAL_PROC_MY_NAME.jobid &&
           OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags) && peer_has_inbox(proc);
}

/* Did process vpid (of this job) publish an on-node inbox?  Cached. */
static bool peer_has_inbox(const ompi_proc_t *proc) {
    const uint32_t vpid = proc->super.proc_name.vpid;
    const uint32_t nprocs = mtl_efa_job_size();
    if (vpid == OPAL_PROC_MY_NAME.vpid) {
        return true;
    }
    if (vpid >= nprocs) {
        return false;
    }
    if (NULL == ompi_mtl_efa.peer_onnode) {
        return false;
    }
    uint8_t *known = &ompi_mtl_efa.peer_onnode[vpid];
    if (0 == *known) {
        efa_node_card_t card;
        *known = (mca_common_efa_node_card(&proc->super.proc_name, &card) &&
                  (card.channels & (1u << EFA_NODE_CHANNEL_ENGINE)))
                     ? 1
                     : 2;
    }
    return 1 == *known;
}

static bool group_on_node(ompi_group_t *group) {
    const int n = ompi_group_size(group);
    if (n > mca_common_efa_local_size()) {
        return false; /* cannot all be here: no need to look them up */
    }
    for (int i = 0; i < n; ++i) {
        ompi_proc_t *proc = ompi_group_peer_lookup(group, i);
        if (NULL == proc || proc->super.proc_name.jobid != OPAL_PROC_MY_NAME.jobid ||
            !OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags) || !peer_has_inbox(proc)) {
            return false;
        }
    }
    return true;
}

/* Writers (threads creating or freeing communicators) take turns, so that
 * none writes into a table another is copying; readers take no lock
 * (mtl_efa.h: ompi_mtl_efa_comm_path). */
static pthread_mutex_t paths_lock = PTHREAD_MUTEX_INITIALIZER;

static int set_path(uint32_t cid, uint8_t path) {
    pthread_mutex_lock(&paths_lock);
    mtl_efa_path_table_t *t = ompi_mtl_efa.comm_paths;
    const size_t have = NULL == t ? 0 : t->len;
    if (cid >= have) {
        if (MTL_EFA_PATH_PROVIDER == path) {
            pthread_mutex_unlock(&paths_lock); /* what a missing entry means */
            return OMPI_SUCCESS;
        }
        size_t len = have ? have : 64;
        while (len <= cid) {
            len *= 2;
        }
        mtl_efa_path_table_t *grown = calloc(1, sizeof(*grown) + len);
        if (NULL == grown) {
            pthread_mutex_unlock(&paths_lock);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        grown->len = len;
        grown->older = t;
        if (have) {
            memcpy(grown->path, t->path, have);
        }
        /* Release: a reader that sees the new table sees it filled in.
         * Readers still holding the old one keep reading valid memory. */
        __atomic_store_n(&ompi_mtl_efa.comm_paths, grown, __ATOMIC_RELEASE);
        t = grown;
    }
    __atomic_store_n(&t->path[cid], path, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&paths_lock);
    return OMPI_SUCCESS;
}

int ompi_mtl_efa_engine_add_comm(struct ompi_communicator_t *comm) {
    if (NULL == ompi_mtl_efa.engine) {
        return OMPI_SUCCESS;
    }
    const uint32_t cid = mtl_efa_comm_cid(comm);
    /* All here: every message by the rings.  Otherwise, with other processes
     * of the job on this node, mixed: each peer by its own path, decided
     * per message (both ends of a pair on one node see the same facts). */
    /* Own matching: the engine carries every communicator of this job's
     * processes alone (its rings or the provider per peer); one with
     * processes of other jobs keeps the provider's matching whole. */
    uint8_t path;
    const bool all_here = group_on_node(comm->c_local_group) &&
                          (!OMPI_COMM_IS_INTER(comm) || group_on_node(comm->c_remote_group));
    if (ompi_mtl_efa.own_matching) {
        path = ompi_mtl_efa_own_comm(comm) ? MTL_EFA_PATH_ENGINE : MTL_EFA_PATH_PROVIDER;
        if (MTL_EFA_PATH_PROVIDER == path && !efa_core_get_info(ompi_mtl_efa.core)->has_tagged) {
            /* Processes of another job (spawn, connect) are not the
             * engine's, and the provider cannot match for them. */
            mca_common_efa_show_help("help-mtl-efa.txt", "other-job-no-tags", true,
                                     opal_process_info.nodename, cid);
            return OMPI_ERR_NOT_SUPPORTED;
        }
    } else {
        path = all_here                          ? MTL_EFA_PATH_ENGINE
               : mca_common_efa_local_size() > 1 ? MTL_EFA_PATH_MIXED
                                                 : MTL_EFA_PATH_PROVIDER;
    }
    const uint8_t bits =
        path | (MTL_EFA_PATH_ENGINE == path && all_here ? MTL_EFA_PATH_ALL_HERE : 0);
    if (OMPI_SUCCESS != set_path(cid, bits)) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    static const char *const names[] = {"provider", "on-node", "mixed"};
    if (ompi_mtl_efa.own_matching) {
        opal_output_verbose(10, mca_common_efa_output, "mtl:efa: communicator %u takes the %s path",
                            cid,
                            MTL_EFA_PATH_ENGINE == path ? "engine (own matching)" : "provider");
        return OMPI_SUCCESS;
    }
    int by_rings = 0, size = ompi_comm_size(comm);
    if (opal_output_get_verbosity(mca_common_efa_output) < 10) {
        return OMPI_SUCCESS; /* (the count looks every member up) */
    }
    if (MTL_EFA_PATH_MIXED == path && !OMPI_COMM_IS_INTER(comm)) {
        for (int r = 0; r < size; ++r) {
            by_rings += ompi_mtl_efa_ring_peer(comm, r) ? 1 : 0;
        }
    }
    opal_output_verbose(10, mca_common_efa_output,
                        "mtl:efa: communicator %u takes the %s path (%d of %d ranks by the rings)",
                        cid, names[path], MTL_EFA_PATH_ENGINE == path ? size : by_rings, size);
    return OMPI_SUCCESS;
}

void ompi_mtl_efa_engine_del_comm(struct ompi_communicator_t *comm) {
    if (NULL != ompi_mtl_efa.engine) {
        (void)set_path(mtl_efa_comm_cid(comm), MTL_EFA_PATH_PROVIDER); /* never grows: no error */
        efa_engine_comm_freed(ompi_mtl_efa.engine, mtl_efa_comm_cid(comm));
    }
}
