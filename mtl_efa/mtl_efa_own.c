/*
 * mtl_efa's own matching (mtl_efa_matching = own, or auto on the providers
 * where it was measured to pay and on nodes that offer several rails:
 * efa_core_auto_matching): the matching engine
 * carries every peer of the job, those on this node through its rings and
 * the others through the provider's untagged messages (common/engine/net_link.hpp),
 * and matches every message itself.  The provider's tag matching is then
 * not used for this job's communicators: ANY_SOURCE in a communicator that
 * spans nodes needs no receive posted in two places, and several small
 * messages to one peer can share one provider message.
 *
 * This file supplies what the engine needs from Open MPI: a peer's address
 * and whether a peer is on this node, and says which communicators the
 * engine carries (those whose processes all belong to this job; others,
 * after MPI_Comm_spawn or connect, keep the provider's matching).  Its
 * watch on the processes of this node (ompi_mtl_efa_own_node_watch) is
 * set up whatever the matching.
 */
#include "mtl_efa.h"

#include <stdio.h>
#include <string.h>

#include "efa_cma.h"

#include "ompi/communicator/communicator.h"
#include "ompi/group/group.h"
#include "ompi/runtime/mpiruntime.h"
#include "opal/util/proc.h"

static opal_process_name_t name_of(uint32_t vpid) {
    opal_process_name_t name = {.jobid = OPAL_PROC_MY_NAME.jobid, .vpid = vpid};
    return name;
}

bool ompi_mtl_efa_vpid_local(uint32_t vpid) {
    if (vpid == OPAL_PROC_MY_NAME.vpid) {
        return true;
    }
    opal_proc_t *proc = ompi_proc_for_name(name_of(vpid));
    return NULL != proc && OPAL_PROC_ON_LOCAL_NODE(proc->proc_flags);
}

/* The engine lost a message from another node (the provider failed a
 * receive, or a sender's stream waits for a message that never came):
 * MPI's order and that message's data cannot be restored, and a receive
 * waiting on ANY_SOURCE could wait for it for ever, so the job ends here,
 * saying why, as MPI_ERRORS_ARE_FATAL would. */
static void lost(void *arg, const char *why) {
    (void)arg;
    mca_common_efa_show_help("help-mtl-efa.txt", "message-lost", false, opal_process_info.nodename,
                             why);
    ompi_mpi_abort(&ompi_mpi_comm_world.comm, MPI_ERR_OTHER);
}

/* Process vpid's addresses (NULL with *err when it has none). */
static efa_peer_t *peer_of(uint32_t vpid, int *err) {
    ompi_proc_t *proc = (ompi_proc_t *)ompi_proc_for_name(name_of(vpid));
    if (NULL == proc) {
        *err = -FI_ENOENT;
        return NULL;
    }
    efa_peer_t *peer = (efa_peer_t *)proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL];
    if (NULL == peer && NULL == (peer = ompi_mtl_efa_peer_slow(proc))) {
        *err = -FI_EHOSTUNREACH;
    }
    return peer;
}

/* The engine's question: which rails reach process vpid (striped reads)? */
static const efa_peer_t *peer_rails(void *arg, uint32_t vpid) {
    (void)arg;
    int err = 0;
    return peer_of(vpid, &err);
}

/* The engine's question: how is process vpid reached by the provider? */
static int peer_addr(void *arg, uint32_t vpid, fi_addr_t *addr, efa_ctx_t **ctx) {
    (void)arg;
    int err = 0;
    efa_peer_t *peer = peer_of(vpid, &err);
    if (NULL == peer) {
        return err;
    }
    /* Peers spread over the endpoints (common_efa_num_contexts), so that
     * one thread sending to many peers drives several queue pairs, which
     * is what lifts EFA's message rate past one queue pair's: this
     * process sends to peer v from its context v mod n, into the peer's
     * context (own vpid) mod n, so that the peer's incoming messages are
     * spread too.  Any choice is correct: the receiver keeps untagged
     * buffers posted on every context, and the sequence numbers restore
     * the order whichever endpoints a message crossed. */
    const int n = ompi_mtl_efa.num_contexts;
    *ctx = ompi_mtl_efa.ctxs[vpid % (uint32_t)n];
    const int slots = peer->num_addrs < n ? peer->num_addrs : n;
    *addr = peer->addr[slots > 0 ? OPAL_PROC_MY_NAME.vpid % (uint32_t)slots : 0];
    return 0;
}

/* How many processes a receive of comm may hear from: its remote group's
 * (an intra-communicator's remote group is its own).  Not
 * ompi_comm_remote_size, which says 0 for an intra-communicator. */
static int peer_count(ompi_communicator_t *comm) {
    return ompi_group_size(comm->c_remote_group);
}

/* The engine's question, about once a second per receive posted for one
 * source: which process is rank 'src' of communicator 'cid'?  (So that it
 * watches a peer on another node that receive waits on.) */
static uint32_t source_vpid(void *arg, uint32_t cid, int32_t src) {
    (void)arg;
    ompi_communicator_t *comm = ompi_comm_lookup(cid);
    if (NULL == comm || src < 0 || src >= peer_count(comm)) {
        return EFA_ENGINE_NO_VPID;
    }
    const ompi_proc_t *proc = ompi_comm_peer_lookup(comm, src);
    if (NULL == proc || proc->super.proc_name.jobid != OPAL_PROC_MY_NAME.jobid) {
        return EFA_ENGINE_NO_VPID;
    }
    return proc->super.proc_name.vpid;
}

/* The engine's question, about once a second per communicator with an
 * MPI_ANY_SOURCE receive posted that long, and when a peer on another node
 * is lost: which processes may such a receive of communicator 'cid' hear
 * from?  Those of its remote group (an intra-communicator's remote group
 * is its own), by name: nothing is allocated for a process never talked
 * to. */
static size_t comm_members(void *arg, uint32_t cid, uint32_t *vpids, size_t max) {
    (void)arg;
    ompi_communicator_t *comm = ompi_comm_lookup(cid);
    if (NULL == comm) {
        return 0;
    }
    const int n = peer_count(comm);
    for (int i = 0; i < n && (size_t)i < max; ++i) {
        const opal_process_name_t name = ompi_group_get_proc_name(comm->c_remote_group, i);
        vpids[i] = name.jobid == OPAL_PROC_MY_NAME.jobid ? name.vpid : EFA_ENGINE_NO_VPID;
    }
    return n > 0 ? (size_t)n : 0;
}

/* The engine's word: process vpid of this node died while this process
 * waited on it (engine_watch.cpp), and what waited has failed.  Declared
 * lost in the core as a silent peer on another node is: the message
 * naming it (peer-unreachable), and the provider's operations with it
 * fail too, the ANY_SOURCE receives it holds included (mtl_efa_any.c). */
static void peer_exited(void *arg, uint32_t vpid) {
    (void)arg;
    int err = 0;
    efa_peer_t *peer = peer_of(vpid, &err);
    if (NULL != peer) {
        efa_core_peer_lost(ompi_mtl_efa.core, peer->addr[0], -FI_EHOSTUNREACH, EFA_CMA_EXITED_WHY);
    }
}

void ompi_mtl_efa_own_node_watch(struct efa_engine_params *p) {
    if (efa_core_peer_timeout(ompi_mtl_efa.core) <= 0) {
        return; /* the deadline is off: nothing is declared lost */
    }
    p->source_vpid = source_vpid;
    p->comm_members = comm_members;
    p->peer_exited = peer_exited;
}

bool ompi_mtl_efa_own_setup(struct efa_engine_params *p) {
    const mtl_efa_params_t *mp = &ompi_mtl_efa_params;
    ompi_mtl_efa.own_matching = false;
    const efa_core_info_t *info = efa_core_get_info(ompi_mtl_efa.core);
    if (!info->has_tagged) {
        /* efa-direct, or the forced direct mode: the provider has no tags,
         * so the engine matches every message whatever was asked. */
        if (0 == strcmp(ompi_mtl_efa_choice(mp->matching), "provider") &&
            ompi_mtl_efa_param_set_by_user("matching")) {
            mca_common_efa_show_help("help-mtl-efa.txt", "no-tags-own-matching", false,
                                     opal_process_info.nodename, info->provider, info->fabric);
        }
        mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                                  "matching: own, as the provider has no tags (%s)", info->fabric);
    } else if (0 == strcmp(ompi_mtl_efa_choice(mp->matching), "provider")) {
        mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                                  "matching: provider (mtl_efa_matching provider: each MPI "
                                  "message one tagged provider message)");
        return false;
    } else if (0 == strcmp(ompi_mtl_efa_choice(mp->matching), "auto")) {
        switch (efa_core_auto_matching(info->provider, info->has_tagged, info->node_rails)) {
        case EFA_AUTO_MATCH_PROVIDER:
            mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                                      "matching: provider (auto: one rail, and own matching is "
                                      "not measured on %s yet; mtl_efa_matching own tries it)",
                                      info->provider);
            return false;
        case EFA_AUTO_MATCH_RAILS:
            mca_common_efa_say_choice(
                "mtl:efa", "mtl_efa",
                "matching: own (auto: the node offers %d rails; own matching spreads messages "
                "over them and fails over from a lost one, the provider's tagged messages "
                "keep the first NIC; mtl_efa_matching provider leaves it to the provider)",
                info->node_rails);
            break;
        default:
            mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                                      "matching: own (auto: on %s it sends 3x the provider's "
                                      "message rate; mtl_efa_matching provider leaves it to the "
                                      "provider)",
                                      info->provider);
            break;
        }
    }
    p->core = ompi_mtl_efa.core;
    p->peer_addr = peer_addr;
    p->peer_rails = peer_rails;
    p->lost = lost;
    p->source_vpid = source_vpid;
    p->comm_members = comm_members;
    p->net_eager = mp->net_eager;
    p->net_read_min = mp->net_read_min;
    p->net_device_piece = mp->device_piece;
    p->net_window = (uint32_t)mp->net_window;
    p->net_small_window = (uint32_t)mp->net_small_window;
    p->net_coalesce_bytes = mp->coalesce_bytes;
    p->net_coalesce_max = (uint32_t)mp->coalesce_max;
    p->net_debug_swap = mp->test.swap_net;
    p->net_debug_first_rail = (uint32_t)mp->test.net_first_rail;
    p->net_debug_fail_rail_send =
        mp->test.fail_rail_send > 0 ? (uint32_t)mp->test.fail_rail_send : 0;
    p->net_debug_lose = mp->test.lose_net > 0 ? (uint32_t)mp->test.lose_net : 0;
    p->net_debug_flush_first = mp->test.flush_first > 0 ? (uint32_t)mp->test.flush_first : 0;
    p->net_debug_flush_lost = mp->test.flush_lost;
    if (mp->test.lose_net > 0) {
        char what[128];
        snprintf(what, sizeof(what),
                 "provider message %d to arrive lost (mtl_efa_debug_lose_net, a test setting)",
                 mp->test.lose_net);
        mca_common_efa_say_choice("mtl:efa", "mtl_efa", "%s", what);
    }
    if (mp->test.swap_net) {
        mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                                  "provider messages swapped in pairs on arrival "
                                  "(mtl_efa_debug_swap_net, a test setting)");
    }
    ompi_mtl_efa.own_matching = true;
    return true;
}

/* By name: nothing is allocated for a process never talked to (a lookup
 * would make every member's process object at each communicator's
 * creation, which Open MPI's sparse allocation avoids). */
static bool group_in_job(ompi_group_t *group) {
    const int n = ompi_group_size(group);
    for (int i = 0; i < n; ++i) {
        if (ompi_group_get_proc_name(group, i).jobid != OPAL_PROC_MY_NAME.jobid) {
            return false;
        }
    }
    return true;
}

bool ompi_mtl_efa_own_comm(struct ompi_communicator_t *comm) {
    return ompi_mtl_efa.own_matching && group_in_job(comm->c_local_group) &&
           (!OMPI_COMM_IS_INTER(comm) || group_in_job(comm->c_remote_group));
}

/* What own matching does, said once the engine runs. */
void ompi_mtl_efa_own_report(efa_engine_t *engine) {
    const mtl_efa_params_t *mp = &ompi_mtl_efa_params;
    const bool rma = efa_core_get_info(ompi_mtl_efa.core)->has_rma;
    char read[96];
    if (rma && mp->net_read_min) {
        snprintf(read, sizeof(read), "read by RMA from %zu bytes", mp->net_read_min);
    } else {
        snprintf(read, sizeof(read), "streamed (%s)",
                 rma ? "mtl_efa_net_read_min 0" : "the provider has no FI_RMA");
    }
    size_t eager, packed;
    efa_engine_net_limits(engine, &eager, &packed);
    mca_common_efa_say_choice(
        "mtl:efa", "mtl_efa",
        "matching: own (the provider carries untagged messages to other nodes; eager up to "
        "%zu bytes%s, larger ones %s; %d in flight per peer, %d for messages that can be "
        "packed, packing up to %zu bytes%s or %d messages)",
        eager, eager < mp->net_eager ? " (the provider's message size caps net_eager_max)" : "",
        read, mp->net_window,
        mp->net_small_window < mp->net_window ? mp->net_small_window : mp->net_window, packed,
        packed < mp->coalesce_bytes ? " (capped by the provider's message size)" : "",
        mp->coalesce_max);
}
