/*
 * btl_efa's on-node channel: messages to a peer of the same job on the same
 * node go through a shared-memory ring (common/shm_ring.hpp) instead of the
 * provider, when they fit a slot.
 *
 * The rings are channel EFA_NODE_CHANNEL_BTL of the process's one inbox
 * (common/efa_node.h), which mtl_efa's engine shares on its own channel:
 * one file per process, one card in the modex (cookie, local rank, and a
 * bit per channel served), one progress hook (the common one).  A sender
 * attaches its own ring of that channel in a peer's inbox on the first
 * send to that peer, only if the peer's card has the channel's bit and the
 * file at that name holds its cookie (and is a file of this user, closed
 * to others: a file planted by someone else is never written into);
 * otherwise the peer is served by the provider.  The component's progress
 * (run by the common progress callback) polls the channel and hands each
 * frame to the same dispatch as a provider message (recv.c's
 * mca_btl_efa_ring_poll, which runs the inbox's poll loop itself).
 * Frames carry the same bytes as provider messages, so every message type
 * (fragments, one-sided requests and responses, credits) can take either
 * path.
 *
 * Sending (btl_efa_send.c, post_locked) happens under the module lock, so
 * one thread at a time writes a ring even under MPI_THREAD_MULTIPLE; the
 * inbox admits one poller at a time by itself.
 */
#include "btl_efa_ring.h"
#include "btl_efa_lost.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "efa_cma.h"

#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

/* The channel as btl_efa's texts name it (common_efa_channel.c). */
static mca_common_efa_channel_t channel = {
    .component = "btl_efa",
    .user = "btl_efa",
    .who = "btl_efa on-node",
    .corrupt_means = "a length longer than its slot",
};

/* btl_efa_onnode_channel: "auto" uses the channel when it can be set up,
 * "shm" insists (the BTL declines otherwise), "none" leaves everything to
 * the provider.  *wanted says whether the channel is on. */
int mca_btl_efa_ring_setup(mca_btl_efa_module_t *btl, bool *wanted) {
    btl->ring.node = NULL;
    btl->send.ring_done = NULL;
    btl->send.num_ring_done = 0;
    btl->ring.sent = btl->ring.received = btl->ring.full = 0;
    *wanted = false;
    if (OPAL_SUCCESS !=
        mca_common_efa_channel_parse(&channel, mca_btl_efa_component.onnode_channel)) {
        return OPAL_ERR_BAD_PARAM;
    }
    if (MCA_COMMON_EFA_CHANNEL_NONE == channel.mode) {
        mca_common_efa_say_choice("btl:efa", "btl_efa on-node", "on-node channel off (none)");
        return OPAL_SUCCESS;
    }
    if (OPAL_SUCCESS != mca_common_efa_channel_geometry(&channel)) {
        return OPAL_ERR_BAD_PARAM;
    }
    if (mca_common_efa_local_size() < 2 || mca_common_efa_local_rank() < 0) {
        mca_common_efa_say_choice("btl:efa", "btl_efa on-node",
                                  "on-node channel not needed (no other process of the job "
                                  "on this node)");
        return OPAL_SUCCESS;
    }
    /* Wanted from here on even if this process's inbox cannot be made:
     * the one-sided choices that depend on it (atomics executed by the
     * target) must be the same in every process of the job, and they stay
     * correct when some messages take the provider. */
    *wanted = true;
    channel.dropped_seen = 0;
    char path[OPAL_PATH_MAX];
    mca_common_efa_node_file(path, sizeof(path));
    int err = -FI_ENOENT;
    const int fail_rank = mca_btl_efa_component.test.fail_inbox_rank;
    if (fail_rank >= 0 && (uint32_t)fail_rank == OPAL_PROC_MY_NAME.vpid) {
        /* Testing: as if the file could not be made (btl_efa_debug_fail_inbox_rank):
         * this process's BTL channel stays closed (its card has no BTL bit),
         * whatever mtl_efa's engine does with the node. */
        snprintf(path, sizeof(path), "(btl_efa_debug_fail_inbox_rank)");
        err = -FI_EIO;
    } else {
        btl->ring.node = mca_common_efa_node_acquire(&err);
    }
    if (NULL != btl->ring.node) {
        /* Senders attach only to the file holding the card's cookie, and
         * only to a channel the card says this process serves. */
        err = efa_node_open_channel(btl->ring.node, EFA_NODE_CHANNEL_BTL, false);
        if (0 == err && OPAL_SUCCESS != mca_common_efa_node_publish(btl->ring.node)) {
            efa_node_close_channel(btl->ring.node, EFA_NODE_CHANNEL_BTL);
            err = -FI_EOTHER;
        }
        if (0 != err) {
            efa_node_release(btl->ring.node);
            btl->ring.node = NULL;
        }
    }
    if (NULL == btl->ring.node) {
        return mca_common_efa_channel_unavailable(&channel, path, err);
    }
    /* (The node handed its file to the runtime's cleanup when it made it.) */
    btl->ring.max_frame = efa_node_max_frame(btl->ring.node);
    btl->ring.consumer =
        efa_node_consumer(btl->ring.node, EFA_NODE_CHANNEL_BTL, &btl->ring.first, &btl->ring.count);
    channel.inbox = efa_node_path(btl->ring.node);
    mca_common_efa_say_choice("btl:efa", "btl_efa on-node",
                              "on-node channel: inbox %s, %d rings of %d slots of %zu bytes", path,
                              mca_common_efa_local_size(), channel.slots, channel.slot_size);
    /* The watch on a peer's exit and an attach through the owner's
     * descriptor read the peer's memory as single copy does. */
    mca_common_efa_open_to_node("btl:efa", "btl_efa on-node");
    return OPAL_SUCCESS;
}

void mca_btl_efa_ring_add_proc(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                               const opal_proc_t *proc) {
    if (NULL == btl->ring.node || ep->is_self || proc->proc_name.jobid != OPAL_PROC_MY_NAME.jobid ||
        !OPAL_PROC_ON_LOCAL_NODE(proc->proc_flags)) {
        return;
    }
    /* Under the lock, as ring_attach reads both: the endpoint may be in
     * use by other threads already (made by a message of the peer). */
    OPAL_THREAD_LOCK(&btl->lock);
    if (EFA_BTL_RING_NONE == ep->ring_state) {
        ep->vpid = proc->proc_name.vpid;
        opal_atomic_wmb();
        ep->ring_state = EFA_BTL_RING_UNTRIED;
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
}

bool mca_btl_efa_ring_peer_serves(const mca_btl_efa_endpoint_t *ep, efa_node_card_t *card) {
    return mca_common_efa_node_card(&ep->name, card) && 0 != card->cookie &&
           (card->channels & (1u << EFA_NODE_CHANNEL_BTL));
}

bool mca_btl_efa_ring_attach(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    /* Said once per process, outside the lock: the first send to each
     * peer would otherwise stop every thread for the message's pause
     * (a /dev/shm too full for any ring: a second or more per peer). */
    static bool told = false;
    char path[OPAL_PATH_MAX];
    int tell = 0;
    OPAL_THREAD_LOCK(&btl->lock);
    if (EFA_BTL_RING_UNTRIED == ep->ring_state) {
        int err = -FI_ENOENT;
        efa_node_card_t card;
        const bool has_card = mca_btl_efa_ring_peer_serves(ep, &card);
        if (!has_card) {
            /* The peer serves no BTL channel: whatever is at its name is not its. */
            snprintf(path, sizeof(path), "(the peer published no inbox)");
        } else {
            efa_node_peer_file(btl->ring.node, ep->vpid, path, sizeof(path));
            ep->outbox =
                efa_node_attach(btl->ring.node, ep->vpid, &card, EFA_NODE_CHANNEL_BTL, &err);
        }
        if (NULL != ep->outbox) {
            ep->ring_out = efa_shm_outbox_producer(ep->outbox);
            /* Its slots may be smaller than this process's (its own
             * common_efa_onnode_slot_size): what does not fit them goes
             * by the provider (with its doorbell rung), not waits for
             * room there for ever. */
            const size_t theirs = efa_shm_outbox_max_frame(ep->outbox);
            ep->ring_max_frame =
                (uint32_t)(theirs < btl->ring.max_frame ? theirs : btl->ring.max_frame);
            if (theirs < btl->ring.max_frame) {
                opal_output_verbose(1, mca_common_efa_output,
                                    "btl:efa: the inbox %s takes frames of %zu bytes at most, "
                                    "this process's %zu (common_efa_onnode_slot_size differs): "
                                    "longer messages to it go by the provider",
                                    path, theirs, (size_t)btl->ring.max_frame);
            }
            /* Its exit, for the watch (btl_efa_watch.c), unless the sweep
             * took it already (the peer sent here first). */
            mca_btl_efa_ring_note_in(btl, ep, &card);
            mca_btl_efa_ring_watch_exit(btl, ep, &card);
            opal_atomic_wmb();
            ep->ring_state = EFA_BTL_RING_ATTACHED;
            opal_output_verbose(10, mca_common_efa_output, "btl:efa: attached to %s", path);
        } else {
            ep->ring_state = EFA_BTL_RING_FAILED;
            if (has_card && mca_common_efa_channel_worth_telling(err) && !told) {
                told = true;
                tell = err;
            }
            opal_output_verbose(1, mca_common_efa_output,
                                "btl:efa: cannot attach to the on-node inbox %s (%s): that peer "
                                "is served by the provider",
                                path, efa_shm_strerror(err));
        }
    }
    bool ok = EFA_BTL_RING_ATTACHED == ep->ring_state;
    OPAL_THREAD_UNLOCK(&btl->lock);
    if (0 != tell) {
        mca_common_efa_show_help("help-btl-efa.txt", "outbox-refused", -ENOSPC == tell,
                                 opal_process_info.nodename, path, efa_shm_strerror(tell));
    }
    return ok;
}

void mca_btl_efa_ring_note_in(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                              const efa_node_card_t *card) {
    if (0 == ep->ring_in) {
        ep->ring_in = NULL != card && card->local_rank < btl->ring.count
                          ? (int32_t)(btl->ring.first + card->local_rank) + 1
                          : -1;
    }
}

void mca_btl_efa_ring_watch_exit(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                 const efa_node_card_t *card) {
    if (0 == ep->exit_watch && !ep->exit_tried && btl->watch.period > 0 &&
        mca_btl_efa_fatal_heard()) {
        ep->exit_tried = true;
        ep->exit_watch = 1 + efa_cma_exit_watch(card->pid, card->cma_cookie_addr, card->cma_cookie);
    }
}

void mca_btl_efa_ring_detach(mca_btl_efa_endpoint_t *ep) {
    /* The watch on its exit, outbox or not (the sweep takes it for a
     * peer that only sent here). */
    efa_cma_exit_unwatch(ep->exit_watch - 1);
    ep->exit_watch = 0;
    ep->exit_tried = false;
    ep->ring_in = 0;
    if (NULL != ep->outbox) {
        ep->ring_out = NULL;
        efa_shm_outbox_detach(ep->outbox);
        ep->outbox = NULL;
    }
    ep->ring_state = EFA_BTL_RING_NONE;
}

void mca_btl_efa_ring_check_dropped(mca_btl_efa_module_t *btl) {
    if (NULL != btl->ring.node) { /* the inbox's count, any channel */
        mca_common_efa_channel_check_dropped(&channel, efa_node_dropped(btl->ring.node));
    }
}

void mca_btl_efa_ring_fini(mca_btl_efa_module_t *btl) {
    if (NULL == btl->ring.node) {
        return;
    }
    mca_common_efa_channel_fini_dropped(&channel, efa_node_dropped(btl->ring.node));
    opal_output_verbose(1, mca_common_efa_output,
                        "btl:efa: on-node channel: %llu frames sent, %llu received, %llu sends "
                        "found a ring full, %llu corrupted frames dropped",
                        (unsigned long long)btl->ring.sent, (unsigned long long)btl->ring.received,
                        (unsigned long long)btl->ring.full,
                        (unsigned long long)efa_node_dropped(btl->ring.node));
    if (NULL != btl->core) {
        efa_core_set_doorbell(btl->core, NULL); /* (the core may stay, for the MTL) */
    }
    /* The file stays while mtl_efa's engine still uses the node. */
    efa_node_close_channel(btl->ring.node, EFA_NODE_CHANNEL_BTL);
    mca_common_efa_node_put(btl->ring.node);
    btl->ring.node = NULL;
}

/* See btl_efa_ring.h.  The endpoint's ring is looked up on its first
 * frame. */
bool mca_btl_efa_ring_sender_ok(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                int32_t ring_in) {
    static bool said = false;
    if (EFA_BTL_RING_NONE != ep->ring_state && 0 == ep->ring_in) {
        efa_node_card_t card;
        mca_btl_efa_ring_note_in(btl, ep, mca_btl_efa_ring_peer_serves(ep, &card) ? &card : NULL);
    }
    if (EFA_BTL_RING_NONE != ep->ring_state && ep->ring_in == ring_in) {
        return true;
    }
    if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED)) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: a frame in the on-node ring of local rank %d named "
                            "another process as its sender: dropped, and any more such",
                            (int)(ring_in - 1 - (int32_t)btl->ring.first));
    }
    return false;
}

bool mca_btl_efa_answer_from_target(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *target,
                                    const mca_btl_efa_answer_from_t *from) {
    static bool said = false;
    if (NULL != from->ep ? from->ep == target
                         : target->ring_in == from->ring_in ||
                               mca_btl_efa_ring_sender_ok(btl, target, from->ring_in)) {
        return true;
    }
    if (NULL != from->ep && !__atomic_exchange_n(&said, true, __ATOMIC_RELAXED)) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: an answer to a one-sided operation came from another "
                            "process than its target: dropped, and any more such");
    }
    return false;
}
