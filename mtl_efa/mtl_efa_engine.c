/*
 * mtl_efa's glue to the matching engine (common/include/efa_engine.h):
 * MPI matching of its own, eager and rendezvous, over shared-memory rings
 * to this node's processes and single-copy reads of large messages; under
 * own matching (mtl_efa_own.c) also over the engine's net link to peers on
 * other nodes.
 *
 * Which communicators take it: mtl_efa_paths.c.  This file sets the engine
 * up on the node's one inbox (common_efa_node.c), drives it from the glue's
 * one progress hook, and turns its completions into MTL requests.
 */
#include "mtl_efa.h"
#include "mtl_efa_device.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "ompi/group/group.h"
#include "ompi/mca/mtl/base/mtl_base_datatype.h"
#include "ompi/message/message.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "efa_shm_ring.h"

/* The channel as mtl_efa's texts name it (common_efa_channel.c). */
static mca_common_efa_channel_t channel = {
    .component = "mtl_efa",
    .user = "The EFA MTL",
    .who = "mtl_efa",
    .corrupt_means = "bad length, sender, request id or pid",
};

/* The inbox's dropped frames are looked for now and then, as btl_efa does
 * (only a corrupted sender makes them; a look in every call cost 15
 * instructions of each on-node message).  The count is read and written
 * by every progressing thread with relaxed loads and stores: only how
 * often the look happens depends on it. */
static unsigned progress_calls;

static int progress_cb(void) {
    const int n = efa_engine_progress(ompi_mtl_efa.engine);
    const unsigned call = __atomic_load_n(&progress_calls, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&progress_calls, call, __ATOMIC_RELAXED);
    if (OPAL_UNLIKELY(0 == (call & 1023))) {
        mca_common_efa_channel_check_dropped(&channel, efa_engine_dropped(ompi_mtl_efa.engine));
    }
    return n;
}

/* The card (inbox cookie, local rank, pid and single-copy cookie) process
 * vpid of this job published: the engine asks once per peer, before it
 * writes into that peer's file. */
static int peer_card(void *arg, uint32_t vpid, efa_engine_card_t *card) {
    (void)arg;
    if (!ompi_mtl_efa_vpid_local(vpid)) {
        return -FI_ENOENT; /* another node: no card to look for */
    }
    opal_process_name_t name = {.jobid = OPAL_PROC_MY_NAME.jobid, .vpid = vpid};
    efa_node_card_t node_card;
    if (!mca_common_efa_node_card(&name, &node_card) ||
        !(node_card.channels & (1u << EFA_NODE_CHANNEL_ENGINE))) {
        return -FI_ENOENT; /* no inbox, or its engine does not serve the rings */
    }
    memset(card, 0, sizeof(*card));
    card->cookie = node_card.cookie;
    card->local_rank = node_card.local_rank;
    card->pid = node_card.pid;
    card->cma_cookie_addr = node_card.cma_cookie_addr;
    card->cma_cookie = node_card.cma_cookie;
    card->inbox_fd = node_card.inbox_fd;
    return 0;
}

/* The engine over, and the process's reference to the node dropped. */
static void destroy_engine(void) {
    efa_engine_destroy(ompi_mtl_efa.engine);
    ompi_mtl_efa.engine = NULL;
    channel.inbox = NULL;
    if (NULL != ompi_mtl_efa.node) {
        mca_common_efa_node_put(ompi_mtl_efa.node);
        ompi_mtl_efa.node = NULL;
    }
}

int ompi_mtl_efa_engine_init(bool thread_multiple) {
    const mtl_efa_params_t *mp = &ompi_mtl_efa_params;
    ompi_mtl_efa.engine = NULL;
    ompi_mtl_efa.node = NULL;
    ompi_mtl_efa.comm_paths = NULL;
    ompi_mtl_efa.peer_onnode = NULL;
    if (OPAL_SUCCESS != mca_common_efa_channel_parse(&channel, mp->channel) ||
        OMPI_SUCCESS != ompi_mtl_efa_params_check()) {
        return OMPI_ERR_BAD_PARAM;
    }
    const bool rings = MCA_COMMON_EFA_CHANNEL_NONE != channel.mode;
    if (OPAL_SUCCESS != mca_common_efa_channel_geometry(&channel)) {
        return OMPI_ERR_BAD_PARAM;
    }
    const char *dir = mca_common_efa_onnode_dir();
    efa_engine_params_t p = {
        .channel = EFA_NODE_CHANNEL_ENGINE,
        .my_vpid = OPAL_PROC_MY_NAME.vpid,
        .local_rank = (uint32_t)mca_common_efa_local_rank(),
        .nlocal = (uint32_t)mca_common_efa_local_size(),
        .slots = (uint32_t)channel.slots,
        .slot_size = (uint32_t)channel.slot_size,
        .nprocs = mtl_efa_job_size(),
        .single_copy = 0 == strcmp(ompi_mtl_efa_choice(mp->single_copy), "auto"),
        .thread_safe = thread_multiple,
        .net_device_piece = mp->device_piece, /* (streams through the rings too) */
        .peer_card = peer_card,
    };
    const bool own = ompi_mtl_efa_own_setup(&p);
    ompi_mtl_efa_own_node_watch(&p);
    if (!rings) {
        mca_common_efa_say_choice("mtl:efa", "mtl_efa", "on-node channel off (none)");
    } else if (mca_common_efa_local_rank() < 0 || NULL == dir) {
        mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                                  "on-node channel off (no local rank or no directory)");
    }
    p.no_rings = !rings || mca_common_efa_local_rank() < 0 || NULL == dir;
    if (!p.no_rings) { /* (single copy, the watch on a peer's exit, an attach by descriptor) */
        mca_common_efa_open_to_node("mtl:efa", "mtl_efa");
    }
    if (p.no_rings && !own) {
        return OMPI_SUCCESS;
    }
    int err = 0;
    channel.dropped_seen = 0;
start:
    if (!p.no_rings) {
        /* The process's one inbox, shared with btl_efa: the engine serves
         * its channel (EFA_NODE_CHANNEL_ENGINE) of it. */
        p.node = ompi_mtl_efa.node = mca_common_efa_node_acquire(&err);
        if (NULL != p.node) {
            ompi_mtl_efa.engine = efa_engine_create(&p, &err);
            if (NULL == ompi_mtl_efa.engine) {
                efa_node_release(ompi_mtl_efa.node);
                ompi_mtl_efa.node = p.node = NULL;
            }
        }
    } else {
        ompi_mtl_efa.engine = efa_engine_create(&p, &err);
    }
    if (NULL == ompi_mtl_efa.engine && !p.no_rings) {
        if (OPAL_SUCCESS != mca_common_efa_channel_unavailable(&channel, NULL, err)) {
            return OMPI_ERR_NOT_AVAILABLE;
        }
        if (own) { /* the engine still carries everything, by the provider */
            p.no_rings = true;
            ompi_mtl_efa.engine = efa_engine_create(&p, &err);
        }
    }
    if (NULL == ompi_mtl_efa.engine) {
        if (own && !efa_core_get_info(ompi_mtl_efa.core)->has_tagged) {
            /* No tags: without the engine the MTL cannot carry anything. */
            mca_common_efa_show_help("help-mtl-efa.txt", "no-engine-no-tags", true,
                                     opal_process_info.nodename, fi_strerror(-err));
            return OMPI_ERR_NOT_AVAILABLE;
        }
        if (own && 0 == strcmp(ompi_mtl_efa_choice(ompi_mtl_efa_params.matching), "own")) {
            mca_common_efa_show_help("help-mtl-efa.txt", "no-own-matching", true,
                                     opal_process_info.nodename, fi_strerror(-err));
        } else if (own) { /* auto: the provider's matching is the other good choice */
            mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                                      "matching: provider (own matching needs the engine: %s)",
                                      fi_strerror(-err));
        }
        ompi_mtl_efa.own_matching = false;
        return OMPI_SUCCESS;
    }
    channel.inbox = efa_engine_inbox_path(ompi_mtl_efa.engine);
    /* Driven by the common progress callback, after the core. */
    if (OPAL_SUCCESS != mca_common_efa_progress_add(progress_cb)) {
        destroy_engine();
        ompi_mtl_efa.own_matching = false;
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    if (own) {
        ompi_mtl_efa_own_report(ompi_mtl_efa.engine);
    }
    if (p.no_rings) {
        return OMPI_SUCCESS;
    }
    const char *path = efa_engine_inbox_path(ompi_mtl_efa.engine);
    /* Only processes whose node card has the engine's bit take part: the
     * others do not read that channel, and every member must agree on a
     * communicator's path.  The card's cookie lets a sender check that the
     * file at the inbox's name is the one this process created (the node
     * handed the file to the runtime's cleanup when it made it). */
    int rc = mca_common_efa_node_publish(ompi_mtl_efa.node);
    if (OPAL_SUCCESS != rc) {
        mca_common_efa_progress_remove(progress_cb);
        destroy_engine();
        mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                                  "on-node channel off: cannot publish the modex entry");
        if (own) { /* as when the inbox fails: the engine carries everything, by the provider */
            p.no_rings = true;
            p.node = NULL;
            goto start;
        }
        return OMPI_SUCCESS;
    }
    /* What each process of the job published, looked up once each (filled
     * in lazily; allocated here, before threads can race on it). */
    ompi_mtl_efa.peer_onnode = calloc(mtl_efa_job_size(), 1);
    if (NULL == ompi_mtl_efa.peer_onnode) {
        mca_common_efa_progress_remove(progress_cb);
        destroy_engine();
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                              "on-node channel: inbox %s, %d rings of %d slots of %zu bytes, "
                              "single copy %s",
                              path, mca_common_efa_local_size(), channel.slots, channel.slot_size,
                              p.single_copy ? "allowed" : "off");
    return OMPI_SUCCESS;
}

void ompi_mtl_efa_engine_fini(void) {
    if (NULL == ompi_mtl_efa.engine) {
        return;
    }
    mca_common_efa_progress_remove(progress_cb);
    efa_engine_stats_t s;
    efa_engine_get_stats(ompi_mtl_efa.engine, &s);
    opal_output_verbose(1, mca_common_efa_output,
                        "mtl:efa: on-node channel: %llu frames sent, %llu received; %llu eager, "
                        "%llu rendezvous (%llu single copy, %llu streamed); %llu queued, %llu "
                        "unexpected",
                        (unsigned long long)s.frames_sent, (unsigned long long)s.frames_received,
                        (unsigned long long)s.eager, (unsigned long long)s.rendezvous,
                        (unsigned long long)s.single_copy, (unsigned long long)s.streamed,
                        (unsigned long long)s.queued, (unsigned long long)s.unexpected);
    ompi_mtl_efa_device_say_stats(&s);
    if (ompi_mtl_efa.own_matching) {
        opal_output_verbose(1, mca_common_efa_output,
                            "mtl:efa: own matching: %llu provider messages sent (%llu packing "
                            "several, %llu injected), %llu received (%llu came early and "
                            "waited, at most %llu bytes held for one sender); peers spread "
                            "over %llu endpoint(s); %llu grant(s) sent alone, %llu time(s) a "
                            "peer's grant was used up; %llu rendezvous read by RMA (%llu reads "
                            "failed and streamed instead)",
                            (unsigned long long)s.net_sent, (unsigned long long)s.net_batched,
                            (unsigned long long)s.net_injected, (unsigned long long)s.net_received,
                            (unsigned long long)s.net_reordered,
                            (unsigned long long)s.net_held_bytes_max,
                            (unsigned long long)s.net_endpoints, (unsigned long long)s.net_grants,
                            (unsigned long long)s.net_no_credit, (unsigned long long)s.net_read,
                            (unsigned long long)s.net_read_failed);
        if (0 != s.net_rail_peers + s.net_failed_over + s.net_duplicates + s.net_rail_recv_failed +
                     s.net_turn_peers + s.net_answers) {
            opal_output_verbose(
                1, mca_common_efa_output,
                "mtl:efa: own matching over several NICs: %llu peer(s) on a NIC "
                "beside the first, %llu provider message(s) sent there, %llu "
                "sent again over another NIC after theirs failed; %llu "
                "copies of messages that had come dropped; %llu receive(s) "
                "failed on a NIC and taken as its flush (%llu on the first), %llu ask(s) of "
                "peers for one more numbered message since, %llu ask(s) answered; %llu peer(s) "
                "whose "
                "streamed data and reads take the "
                "NICs in turn, %llu message(s) sent over a NIC beside the first in turn; "
                "%llu NIC(s) taken again once back, %llu message(s) sent over them since",
                (unsigned long long)s.net_rail_peers, (unsigned long long)s.net_rail_sent,
                (unsigned long long)s.net_failed_over, (unsigned long long)s.net_duplicates,
                (unsigned long long)s.net_rail_recv_failed,
                (unsigned long long)s.net_first_recv_failed, (unsigned long long)s.net_asks,
                (unsigned long long)s.net_answers, (unsigned long long)s.net_turn_peers,
                (unsigned long long)s.net_turns, (unsigned long long)s.net_taken_back,
                (unsigned long long)s.net_sent_back);
        }
    }
    mca_common_efa_channel_fini_dropped(&channel, s.dropped);
    destroy_engine();
    /* No sender is left: the current table and every older one go. */
    for (mtl_efa_path_table_t *t = ompi_mtl_efa.comm_paths, *next; NULL != t; t = next) {
        next = t->older;
        free(t);
    }
    ompi_mtl_efa.comm_paths = NULL;
    free(ompi_mtl_efa.peer_onnode);
    ompi_mtl_efa.peer_onnode = NULL;
}

/* ---- sends -------------------------------------------------------------- */

static void send_done(efa_engine_req_t *r) {
    mca_mtl_efa_request_t *req = MTL_EFA_REQ_OF(r, on);
    if (req->free_buffer) {
        /* (a failed send's buffer may still be the provider's; a
         * withdrawn one's is not: nothing reads it) */
        const bool held = 0 != r->err && -FI_ECANCELED != r->err;
        (OPAL_UNLIKELY(held) ? efa_stage_drop : efa_stage_free)(req->buffer);
    }
    if (req->super.ompi_req) {
        ompi_status_public_t *status = &req->super.ompi_req->req_status;
        if (-FI_ECANCELED == r->err) { /* MPI_Cancel withdrew it: never received */
            status->_cancelled = true;
            status->MPI_ERROR = OMPI_SUCCESS;
        } else {
            status->MPI_ERROR =
                r->err ? ompi_mtl_efa_status_error(ompi_mtl_efa_error(r->err)) : OMPI_SUCCESS;
        }
    }
    __atomic_store_n(&req->on_sent, true, __ATOMIC_RELEASE);
    req->super.completion_callback(&req->super);
}

static inline int start_send(struct ompi_communicator_t *comm, int dest, int tag,
                             mca_pml_base_send_mode_t mode, mca_mtl_efa_request_t *req,
                             bool device) {
    ompi_proc_t *proc = ompi_comm_peer_lookup(comm, dest);
    req->on.complete = send_done;
    req->is_send = true;
    req->by_engine = true;
    req->on_sent = false;
    const uint32_t vpid = proc->super.proc_name.vpid;
    const bool sync = MCA_PML_BASE_SEND_SYNCHRONOUS == mode;
    int rc;
    if (OPAL_LIKELY(!device)) {
        rc = efa_engine_send(ompi_mtl_efa.engine, vpid, mtl_efa_comm_cid(comm), comm->c_my_rank,
                             tag, req->buffer, req->length, sync, &req->on);
    } else if (NULL == req->mr) { /* to this node, by the device's IPC */
        rc = efa_engine_send_device(ompi_mtl_efa.engine, vpid, mtl_efa_comm_cid(comm),
                                    comm->c_my_rank, tag, req->buffer, req->length, sync, &req->on);
        if (OPAL_UNLIKELY(-FI_EOPNOTSUPP == rc)) {
            /* The engine cannot reach the peer by IPC (no ring out to it):
             * through the host.  (The buffer is the caller's device memory,
             * never a packed copy: ompi_mtl_efa_device_by_ipc.) */
            const int staged =
                ompi_mtl_efa_device_stage_copy(&req->buffer, req->length, &req->free_buffer);
            if (OMPI_SUCCESS != staged) {
                return staged;
            }
            rc = efa_engine_send(ompi_mtl_efa.engine, vpid, mtl_efa_comm_cid(comm), comm->c_my_rank,
                                 tag, req->buffer, req->length, sync, &req->on);
        }
    } else { /* to another node, read from its registration */
        rc = efa_engine_send_device_read(ompi_mtl_efa.engine, vpid, mtl_efa_comm_cid(comm),
                                         comm->c_my_rank, tag, req->buffer, req->length, sync,
                                         req->mr, &req->on);
        if (rc < 0) { /* refused: still this request's */
            efa_core_mr_release(ompi_mtl_efa.core, req->mr);
        }
        req->mr = NULL; /* (accepted: the engine's, released when the send ends) */
    }
    return rc < 0 ? ompi_mtl_efa_error(rc) : rc;
}

int ompi_mtl_efa_engine_isend(struct ompi_communicator_t *comm, int dest, int tag,
                              mca_pml_base_send_mode_t mode, mca_mtl_efa_request_t *req,
                              bool device) {
    int rc = start_send(comm, dest, tag, mode, req, device);
    if (OPAL_UNLIKELY(rc < 0)) {
        if (req->free_buffer) {
            efa_stage_free(req->buffer);
        }
        return rc;
    }
    if (1 == rc) { /* already complete: the buffer is reusable */
        req->on.err = 0;
        send_done(&req->on);
    }
    return OMPI_SUCCESS;
}

int ompi_mtl_efa_engine_send(struct ompi_communicator_t *comm, int dest, int tag,
                             mca_pml_base_send_mode_t mode, void *buffer, size_t length,
                             bool free_buffer, bool device, efa_mr_t *device_mr) {
    mca_mtl_efa_blocking_send_t bs;
    mca_mtl_efa_request_t *req = &bs.req;
    req->mr = device_mr; /* (start_send hands it to the engine, or releases it) */
    req->super.ompi_req = NULL;
    req->super.completion_callback = ompi_mtl_efa_blocking_send_done;
    req->buffer = buffer;
    req->length = length;
    req->free_buffer = false; /* freed here, below (set: start_send staged it) */
    bs.done = false;
    int rc = start_send(comm, dest, tag, mode, req, device);
    bool held = false; /* (a failed send's buffer may still be the provider's, as in send_done) */
    if (0 == rc) {
        while (!__atomic_load_n(&bs.done, __ATOMIC_ACQUIRE)) {
            opal_progress();
        }
        held = 0 != req->on.err && -FI_ECANCELED != req->on.err;
        rc = req->on.err ? ompi_mtl_efa_error(req->on.err) : OMPI_SUCCESS;
    } else if (1 == rc) {
        rc = OMPI_SUCCESS;
    }
    if (free_buffer) {
        (held ? efa_stage_drop : efa_stage_free)(buffer);
    }
    if (req->free_buffer) { /* its host copy (start_send's way through the host) */
        (held ? efa_stage_drop : efa_stage_free)(req->buffer);
    }
    return rc;
}

/* ---- receives ----------------------------------------------------------- */

static void recv_done(efa_engine_req_t *r) {
    mca_mtl_efa_request_t *req = MTL_EFA_REQ_OF(r, on);
    ompi_status_public_t *status = &req->super.ompi_req->req_status;
    if (req->mr) { /* a dual receive registered its buffer for the provider */
        efa_core_mr_release(ompi_mtl_efa.core, req->mr);
        req->mr = NULL;
    }
    if (-FI_ECANCELED == r->err) {
        status->_cancelled = true;
        status->_ucount = 0;
        ompi_mtl_efa_recv_buffer_done(req, 0, false);
    } else {
        status->MPI_SOURCE = r->msg_src;
        status->MPI_TAG = r->msg_tag;
        status->_ucount = r->msg_len;
        status->MPI_ERROR = OMPI_SUCCESS;
        if (-FI_ETRUNC == r->err) {
            status->MPI_ERROR = MPI_ERR_TRUNCATE;
            status->_ucount = req->length; /* what the buffer held */
        } else if (r->err) {
            status->MPI_ERROR = ompi_mtl_efa_status_error(ompi_mtl_efa_error(r->err));
            if (OMPI_SUCCESS == status->MPI_ERROR) {
                status->MPI_ERROR = MPI_ERR_OTHER;
            }
        }
        if (OPAL_UNLIKELY(0 != r->err && -FI_ETRUNC != r->err)) {
            ompi_mtl_efa_recv_buffer_failed(req);
        } else {
            ompi_mtl_efa_recv_buffer_done(req, status->_ucount, true);
        }
    }
    req->super.completion_callback(&req->super);
}

static inline void prepare(mca_mtl_efa_request_t *req) {
    req->is_send = false;
    req->by_engine = true;
    req->on.complete = recv_done;
    req->on.buf = req->buffer;
    req->on.buflen = req->length;
    req->on.device_buf = req->device_buf; /* (the engine may put the bytes there) */
}

int ompi_mtl_efa_engine_irecv(struct ompi_communicator_t *comm, int src, int tag,
                              mca_mtl_efa_request_t *req) {
    prepare(req);
    /* Under own matching a receive no process on another node can match
     * must not keep the engine polling the provider on every call (without
     * it the engine has no provider peers). */
    const bool local = !ompi_mtl_efa.own_matching || ompi_mtl_efa_comm_all_here(comm) ||
                       (MPI_ANY_SOURCE != src && ompi_mtl_efa_ring_peer(comm, src));
    int rc = (local ? efa_engine_recv_local : efa_engine_recv)(
        ompi_mtl_efa.engine, mtl_efa_comm_cid(comm), MPI_ANY_SOURCE == src ? EFA_ENGINE_ANY : src,
        MPI_ANY_TAG == tag ? EFA_ENGINE_ANY : tag, &req->on);
    if (1 == rc) {
        recv_done(&req->on);
    }
    return rc < 0 ? ompi_mtl_efa_error(rc) : OMPI_SUCCESS;
}

/* The rings matched a message for a dual receive: cancel its provider half
 * (its completion tells the engine what to do with the message). */
static void partner_cancel(efa_engine_req_t *r) {
    mca_mtl_efa_request_t *req = MTL_EFA_REQ_OF(r, on);
    (void)efa_ctx_cancel(req->ctx, &req->op);
}

int ompi_mtl_efa_engine_irecv_partnered(struct ompi_communicator_t *comm, int tag,
                                        mca_mtl_efa_request_t *req) {
    prepare(req);
    /* Matched at its post, the engine's alone (MPI_Cancel asks it): set
     * before the call, as another thread may complete it before the call
     * returns; a receive posted as a dual one (0) completes through the
     * provider's half, or the engine's at partner_done. */
    req->by_engine = true;
    req->on.partner_cancel = partner_cancel;
    int rc = efa_engine_recv_partnered(ompi_mtl_efa.engine, mtl_efa_comm_cid(comm), EFA_ENGINE_ANY,
                                       MPI_ANY_TAG == tag ? EFA_ENGINE_ANY : tag, &req->on);
    if (1 == rc) {
        recv_done(&req->on);
    } else if (rc <= 0) {
        req->by_engine = false;
    }
    return rc < 0 ? ompi_mtl_efa_error(rc) : rc;
}

int ompi_mtl_efa_engine_iprobe(struct ompi_communicator_t *comm, int src, int tag, bool claim,
                               int *flag, struct ompi_message_t **message,
                               struct ompi_status_public_t *status) {
    efa_engine_probe_t found;
    /* The handle first: a claimed message must never be left without one. */
    ompi_message_t *msg = NULL;
    if (claim && NULL == (msg = ompi_message_alloc())) {
        *flag = 0;
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    const int rc = efa_engine_probe(ompi_mtl_efa.engine, mtl_efa_comm_cid(comm),
                                    MPI_ANY_SOURCE == src ? EFA_ENGINE_ANY : src,
                                    MPI_ANY_TAG == tag ? EFA_ENGINE_ANY : tag, claim, &found);
    *flag = rc > 0;
    if (!*flag) {
        if (msg) {
            ompi_message_return(msg);
        }
        /* A peer the probe waits on was lost: MPI_Probe would wait for ever. */
        return rc < 0 ? ompi_mtl_efa_error(rc) : OMPI_SUCCESS;
    }
    if (claim) {
        *message = msg;
        (*message)->comm = comm;
        (*message)->req_ptr = found.msg;
        (*message)->peer = found.src;
        (*message)->count = found.len;
    }
    if (MPI_STATUS_IGNORE != status) {
        status->MPI_SOURCE = found.src;
        status->MPI_TAG = found.tag;
        status->_ucount = found.len; /* MPI_ERROR stays the caller's (single completion) */
    }
    return OMPI_SUCCESS;
}

int ompi_mtl_efa_engine_imrecv(struct ompi_message_t *message, mca_mtl_efa_request_t *req) {
    prepare(req);
    int rc = efa_engine_mrecv(ompi_mtl_efa.engine, message->req_ptr, &req->on);
    if (1 == rc) {
        recv_done(&req->on);
    }
    return rc < 0 ? ompi_mtl_efa_error(rc) : OMPI_SUCCESS;
}

/* A send not complete yet completes, one way or the other, by its callback,
 * which MPI_Wait waits for.  One complete already (a standard-mode eager
 * send, done once written) may still wait unmatched at the receiver, which
 * is asked to withdraw it: MPI wants it reported cancelled then, and the
 * request, complete, has no callback left to tell, so the answer is waited
 * for here (the receiver answers from its progress, whatever MPI call it
 * is in).  So is the callback of a buffered send that pml cm completed for
 * MPI at its start: MPI_Wait would not wait for it. */
void ompi_mtl_efa_engine_cancel(mca_mtl_efa_request_t *req) {
    if (req->is_send) {
        int rc = efa_engine_cancel_send(ompi_mtl_efa.engine, &req->on);
        while (-FI_EAGAIN == rc) {
            opal_progress();
            rc = efa_engine_cancel_send(ompi_mtl_efa.engine, &req->on);
        }
        if (1 == rc && req->super.ompi_req) {
            req->super.ompi_req->req_status._cancelled = true;
        }
        if (req->super.ompi_req && REQUEST_COMPLETE(req->super.ompi_req)) {
            while (!__atomic_load_n(&req->on_sent, __ATOMIC_ACQUIRE)) {
                opal_progress();
            }
        }
    } else {
        (void)efa_engine_cancel(ompi_mtl_efa.engine, &req->on);
    }
}
