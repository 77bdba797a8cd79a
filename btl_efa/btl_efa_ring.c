/*
 * btl_efa's on-node channel: messages to a peer of the same job on the same
 * node go through a shared-memory ring (common/shm_ring.hpp) instead of the
 * provider, when they fit a slot.
 *
 * Each process creates its inbox at init: one ring per local rank of the
 * job, in a file named after the job and the process's vpid, and publishes
 * the inbox's random cookie in a node-local modex entry.  A sender attaches
 * its own ring (its local rank) of a peer's inbox on the first send to that
 * peer, only if the peer published a cookie and the file at that name
 * holds it (and is a file of this user, closed to others: a file planted
 * by someone else is never written into); otherwise the peer is served by
 * the provider.  The module's
 * progress polls the inbox and hands each frame to the same dispatch as a
 * provider message (mca_btl_efa_deliver).  Frames carry the same bytes as
 * provider messages, so every message type (fragments, one-sided requests
 * and responses, credits) can take either path.
 *
 * Sending (btl_efa_send.c, post_locked) happens under the module lock, so
 * one thread at a time writes a ring even under MPI_THREAD_MULTIPLE; the
 * inbox admits one poller at a time by itself.
 */
#include "btl_efa.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

/* Frames handed up per progress call. */
#define EFA_BTL_RING_BUDGET 32

#define RING_MODEX_KEY "btl_efa_ring"

/* Corrupted frames the inbox dropped, as last reported. */
static uint64_t dropped_seen;

/* Failures a user should hear of even under "auto": a file of someone
 * else's at an inbox's name, or a full file system. */
static bool worth_telling(int err) {
    return -EEXIST == err || -ELOOP == err || -EACCES == err || -EKEYREJECTED == err ||
           -ENOSPC == err;
}

static const char *inbox_dir(void) {
    const char *dir = mca_btl_efa_component.onnode_dir;
    if (NULL != dir && '\0' != dir[0]) {
        return dir;
    }
    if (0 == access("/dev/shm", W_OK)) {
        return "/dev/shm";
    }
    return opal_process_info.job_session_dir;
}

/* The inbox file of process 'vpid' of this job on this node. */
static int inbox_path(char *buf, size_t len, uint32_t vpid) {
    const char *dir = inbox_dir();
    if (NULL == dir) {
        return -1;
    }
    int n = snprintf(buf, len, "%s/btl_efa_ring.%u.%x.%u", dir, (unsigned)getuid(),
                     (unsigned)OPAL_PROC_MY_NAME.jobid, (unsigned)vpid);
    return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

/* btl_efa_onnode_channel: "auto" uses the channel when it can be set up,
 * "shm" insists (the BTL declines otherwise), "none" leaves everything to
 * the provider.  *wanted says whether the channel is on. */
int mca_btl_efa_ring_setup(mca_btl_efa_module_t *btl, bool *wanted) {
    const char *mode = mca_btl_efa_component.onnode_channel;
    btl->inbox = NULL;
    btl->ring_done = NULL;
    btl->num_ring_done = 0;
    btl->ring_sent = btl->ring_received = btl->ring_full = 0;
    *wanted = false;
    bool insist;
    if (NULL == mode || 0 == strcmp(mode, "auto")) {
        insist = false;
    } else if (0 == strcmp(mode, "shm")) {
        insist = true;
    } else if (0 == strcmp(mode, "none")) {
        mca_common_efa_say_choice("btl:efa", "btl_efa on-node", "on-node channel off (none)");
        return OPAL_SUCCESS;
    } else {
        mca_common_efa_show_help("help-btl-efa.txt", "bad-channel", true,
                                 opal_process_info.nodename, "onnode_channel", mode);
        return OPAL_ERR_BAD_PARAM;
    }
    int slots = mca_btl_efa_component.onnode_slots;
    size_t slot_size = mca_btl_efa_component.onnode_slot_size;
    if (slots < 2 || (slots & (slots - 1)) || slot_size < 256 || slot_size % 64 ||
        slot_size > 1024 * 1024) {
        char value[64];
        snprintf(value, sizeof(value), "%d slots of %zu bytes", slots, slot_size);
        mca_common_efa_show_help("help-btl-efa.txt", "bad-ring", true, opal_process_info.nodename,
                                 value);
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
    dropped_seen = 0;
    char path[OPAL_PATH_MAX] = "(no directory for the inbox)";
    int err = -FI_ENOENT;
    const int fail_rank = mca_btl_efa_component.debug_fail_inbox_rank;
    if (fail_rank >= 0 && (uint32_t)fail_rank == OPAL_PROC_MY_NAME.vpid) {
        /* Testing: as if the file could not be made (btl_efa_debug_fail_inbox_rank). */
        snprintf(path, sizeof(path), "(btl_efa_debug_fail_inbox_rank)");
        err = -FI_EIO;
    } else if (0 == inbox_path(path, sizeof(path), OPAL_PROC_MY_NAME.vpid)) {
        btl->inbox = efa_shm_inbox_create(path, (unsigned)mca_common_efa_local_size(),
                                          (unsigned)slots, slot_size, &err);
    }
    if (NULL != btl->inbox) {
        /* Senders attach only to the file holding this cookie. */
        uint64_t cookie = efa_shm_inbox_cookie(btl->inbox);
        int rc;
        OPAL_MODEX_SEND_STRING(rc, EFA_PMIX_LOCAL, RING_MODEX_KEY, &cookie, sizeof(cookie));
        if (OPAL_SUCCESS != rc) {
            efa_shm_inbox_destroy(btl->inbox);
            btl->inbox = NULL;
            err = -FI_EOTHER;
        }
    }
    if (NULL == btl->inbox) {
        if (insist) {
            mca_common_efa_show_help("help-btl-efa.txt", "no-channel", true,
                                     opal_process_info.nodename, path, efa_shm_strerror(err));
            return OPAL_ERR_NOT_AVAILABLE;
        }
        if (worth_telling(err)) {
            mca_common_efa_show_help("help-btl-efa.txt", "inbox-refused", -ENOSPC == err,
                                     opal_process_info.nodename, path, efa_shm_strerror(err));
        }
        mca_common_efa_say_choice("btl:efa", "btl_efa on-node",
                                  "on-node channel unavailable (%s: %s): provider only", path,
                                  efa_shm_strerror(err));
        return OPAL_SUCCESS;
    }
    /* Removed by the runtime if this process dies without finalizing. */
    mca_common_efa_register_cleanup(path);
    btl->ring_max_frame = slot_size - 8;
    btl->ring_index = (unsigned)mca_common_efa_local_rank();
    mca_common_efa_say_choice("btl:efa", "btl_efa on-node",
                              "on-node channel: inbox %s, %d rings of %d slots of %zu bytes", path,
                              mca_common_efa_local_size(), slots, slot_size);
    return OPAL_SUCCESS;
}

void mca_btl_efa_ring_add_proc(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                               const opal_proc_t *proc) {
    if (NULL == btl->inbox || ep->is_self || EFA_BTL_RING_NONE != ep->ring_state ||
        proc->proc_name.jobid != OPAL_PROC_MY_NAME.jobid ||
        !OPAL_PROC_ON_LOCAL_NODE(proc->proc_flags)) {
        return;
    }
    ep->vpid = proc->proc_name.vpid;
    ep->ring_state = EFA_BTL_RING_UNTRIED;
}

bool mca_btl_efa_ring_attach(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    OPAL_THREAD_LOCK(&btl->lock);
    if (EFA_BTL_RING_UNTRIED == ep->ring_state) {
        char path[OPAL_PATH_MAX] = "(no directory for the inbox)";
        int err = -FI_ENOENT;
        uint8_t *bytes = NULL;
        size_t len = 0;
        int rc;
        OPAL_MODEX_RECV_STRING(rc, RING_MODEX_KEY, &ep->name, &bytes, &len);
        uint64_t cookie = 0;
        if (OPAL_SUCCESS == rc && NULL != bytes && sizeof(cookie) == len) {
            memcpy(&cookie, bytes, sizeof(cookie));
        }
        free(bytes);
        if (0 == cookie) {
            /* The peer has no inbox: whatever is at its name is not its. */
            snprintf(path, sizeof(path), "(the peer published no inbox)");
        } else if (0 == inbox_path(path, sizeof(path), ep->vpid)) {
            ep->outbox = efa_shm_outbox_attach(path, btl->ring_index, cookie, &err);
        }
        if (NULL != ep->outbox) {
            opal_atomic_wmb();
            ep->ring_state = EFA_BTL_RING_ATTACHED;
            opal_output_verbose(10, mca_common_efa_output, "btl:efa: attached to %s", path);
        } else {
            ep->ring_state = EFA_BTL_RING_FAILED;
            if (0 != cookie && worth_telling(err)) {
                mca_common_efa_show_help("help-btl-efa.txt", "outbox-refused", -ENOSPC == err,
                                         opal_process_info.nodename, path, efa_shm_strerror(err));
            }
            opal_output_verbose(1, mca_common_efa_output,
                                "btl:efa: cannot attach to the on-node inbox %s (%s): that peer "
                                "is served by the provider",
                                path, efa_shm_strerror(err));
        }
    }
    bool ok = EFA_BTL_RING_ATTACHED == ep->ring_state;
    OPAL_THREAD_UNLOCK(&btl->lock);
    return ok;
}

void mca_btl_efa_ring_detach(mca_btl_efa_endpoint_t *ep) {
    if (NULL != ep->outbox) {
        efa_shm_outbox_detach(ep->outbox);
        ep->outbox = NULL;
    }
    ep->ring_state = EFA_BTL_RING_NONE;
}

static void on_frame(void *arg, unsigned ring, void *frame, size_t len) {
    mca_btl_efa_module_t *btl = arg;
    (void)ring;
    ++btl->ring_received;
    mca_btl_efa_deliver(btl, frame, len, true);
}

int mca_btl_efa_ring_poll(mca_btl_efa_module_t *btl) {
    if (NULL == btl->inbox) {
        return 0;
    }
    const int n = efa_shm_inbox_poll(btl->inbox, on_frame, btl, EFA_BTL_RING_BUDGET);
    const uint64_t dropped = efa_shm_inbox_dropped(btl->inbox);
    if (OPAL_UNLIKELY(dropped != dropped_seen)) {
        if (0 == dropped_seen) {
            opal_output(0,
                        "btl:efa: %s: dropped %llu corrupted frame(s) found in the on-node "
                        "inbox (a length longer than its slot): another process wrote into it",
                        opal_process_info.nodename, (unsigned long long)dropped);
        }
        dropped_seen = dropped;
    }
    return n;
}

void mca_btl_efa_ring_fini(mca_btl_efa_module_t *btl) {
    if (NULL == btl->inbox) {
        return;
    }
    opal_output_verbose(1, mca_common_efa_output,
                        "btl:efa: on-node channel: %llu frames sent, %llu received, %llu sends "
                        "found a ring full, %llu corrupted frames dropped",
                        (unsigned long long)btl->ring_sent, (unsigned long long)btl->ring_received,
                        (unsigned long long)btl->ring_full,
                        (unsigned long long)efa_shm_inbox_dropped(btl->inbox));
    efa_shm_inbox_destroy(btl->inbox);
    btl->inbox = NULL;
}
