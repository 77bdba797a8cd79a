/*
 * btl_efa's one-sided mode, agreed by every process of the job.
 *
 * Each process works out at init what it could do alone (native put, get
 * and atomics, from its provider, device and parameters: choose_one_sided
 * in btl_efa_component.c) and publishes that in a modex card of its own.
 * Those inputs can differ between processes: nodes with different devices
 * or providers' answers, parameters set for some processes only (an MPMD
 * launch, a per-rank environment), the on-node channel off in one of them.
 * Atomics must not mix provider and CPU atomics on one location, and
 * osc/rdma decides from MCA_BTL_ATOMIC_SUPPORTS_GLOB whether a process's own
 * window state takes CPU atomics, so a per-process choice is not enough.
 *
 * At the first add_procs (before any registration or operation: both wait
 * for it) the process reads the card of every process of its job and takes
 * the job-wide minimum, the same on every process since every one reads the
 * same cards.  A native path only some processes can take is thus emulated
 * everywhere; the emulated path works between any two processes.  Peers of
 * another job (MPI_Comm_spawn, connect/accept) agreed among themselves:
 * put and get to one of them take the emulated path, which any target
 * executes, and atomics with it are refused (with a message) unless both
 * jobs surely execute them with CPU atomics, since they would mix with its
 * job's own.
 *
 * The card also says whether the process numbers its messages through the
 * provider (EFA_BTL_CAN_NUMBER: several NICs, rail failover).  Where every
 * process of the job does, each numbers them to every peer of the job, and
 * a receive failed on a first NIC can be taken as that NIC's flush
 * (btl_efa_spread_recv.c).
 */
#include "btl_efa_mode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"
#include "opal/util/proc.h"

#define MODE_MODEX_KEY "btl_efa_one_sided"
#define MODE_CARD_MAGIC 0x45464131u /* "EFA1": a card of this layout */

typedef struct efa_btl_mode_card {
    uint32_t magic;
    uint8_t can;    /* EFA_BTL_CAN_* */
    uint8_t why[3]; /* EFA_BTL_WHY_* of put, get, atomics where not native */
} efa_btl_mode_card_t;

static const char *why_text(uint8_t why) {
    switch (why) {
    case EFA_BTL_WHY_PARAM:
        return "its btl_efa_rma_mode or btl_efa_atomic_mode says emulated";
    case EFA_BTL_WHY_PROVIDER:
        return "its provider cannot";
    case EFA_BTL_WHY_EMULATED:
        return "its provider would emulate it (no device support)";
    case EFA_BTL_WHY_RING:
        return "its on-node channel carries them (every peer on its node)";
    default:
        return "it published no reason";
    }
}

static efa_btl_mode_card_t own_card(const mca_btl_efa_module_t *btl) {
    efa_btl_mode_card_t card;
    memset(&card, 0, sizeof(card));
    card.magic = MODE_CARD_MAGIC;
    card.can = (uint8_t)((btl->mode.native_put ? EFA_BTL_CAN_PUT : 0) |
                         (btl->mode.native_get ? EFA_BTL_CAN_GET : 0) |
                         (btl->mode.native_atomics ? EFA_BTL_CAN_ATOMICS : 0) |
                         (btl->mode.numbers ? EFA_BTL_CAN_NUMBER : 0));
    memcpy(card.why, btl->mode.why, sizeof(card.why));
    return card;
}

int mca_btl_efa_mode_publish(mca_btl_efa_module_t *btl) {
    efa_btl_mode_card_t card = own_card(btl);
    int rc;
    btl->mode.agreed = false;
    btl->mode.own = card.can;
    OPAL_MODEX_SEND_STRING(rc, EFA_PMIX_GLOBAL, MODE_MODEX_KEY, &card, sizeof(card));
    if (OPAL_SUCCESS != rc) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: cannot publish the one-sided mode card: %s",
                            opal_strerror(mca_common_efa_modex_rc(rc)));
    }
    return mca_common_efa_modex_rc(rc);
}

/* A process's card; false when it published none (its btl_efa is not in
 * use, so it takes no part in btl_efa's one-sided operations). */
static bool read_card(const opal_process_name_t *name, efa_btl_mode_card_t *card) {
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc;
    OPAL_MODEX_RECV_STRING(rc, MODE_MODEX_KEY, name, &bytes, &len);
    bool ok = OPAL_SUCCESS == rc && NULL != bytes && sizeof(*card) == len;
    if (ok) {
        memcpy(card, bytes, sizeof(*card));
        ok = MODE_CARD_MAGIC == card->magic;
    }
    free(bytes);
    return ok;
}

static const char *path_name(bool native) {
    return native ? "native" : "emulated";
}

/* Apply the agreed mode to the module: the paths and the flags the upper
 * layers read (GLOB, the RDMA pipeline). */
static void apply(mca_btl_efa_module_t *btl, uint8_t can) {
    btl->mode.native_put = 0 != (can & EFA_BTL_CAN_PUT);
    btl->mode.native_get = 0 != (can & EFA_BTL_CAN_GET);
    btl->mode.native_atomics = 0 != (can & EFA_BTL_CAN_ATOMICS);
    /* Provider atomics need not be atomic with respect to the CPU's:
     * osc/rdma must not use CPU atomics on its own state then. */
    if (btl->mode.native_atomics) {
        btl->super.btl_atomic_flags &= ~MCA_BTL_ATOMIC_SUPPORTS_GLOB;
    } else {
        btl->super.btl_atomic_flags |= MCA_BTL_ATOMIC_SUPPORTS_GLOB;
    }
    if (!btl->mode.native_get && btl->mode.pipeline_raised) {
        /* Raised for native reads only (choose_one_sided). */
        btl->super.btl_min_rdma_pipeline_size = btl->mode.pipeline_default;
        btl->mode.pipeline_raised = false;
    }
}

void mca_btl_efa_mode_agree(mca_btl_efa_module_t *btl) {
    if (btl->mode.agreed) {
        return;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    if (btl->mode.agreed) {
        OPAL_THREAD_UNLOCK(&btl->lock);
        return;
    }
    /* Every process of the job, in vpid order: each one reads the same
     * cards and reaches the same result.  One modex lookup per process,
     * once per job (local lookups after the full modex exchange). */
    const uint32_t size = mca_btl_efa_job_size();
    uint8_t can = btl->mode.own;
    uint32_t published = 0;
    /* The first process that lacks each native path, and why. */
    int64_t first[3] = {-1, -1, -1};
    uint8_t why[3] = {0, 0, 0};
    for (uint32_t vpid = 0; vpid < size; ++vpid) {
        opal_process_name_t name = OPAL_PROC_MY_NAME;
        name.vpid = vpid;
        efa_btl_mode_card_t card;
        if (vpid == OPAL_PROC_MY_NAME.vpid) {
            card = own_card(btl);
            card.can = btl->mode.own;
        } else if (!read_card(&name, &card)) {
            continue;
        }
        ++published;
        for (int k = 0; k < 3; ++k) {
            if (!(card.can & (1u << k)) && first[k] < 0) {
                first[k] = vpid;
                why[k] = card.why[k];
            }
        }
        can &= card.can;
    }
    const uint8_t lowered = (uint8_t)(btl->mode.own & ~can);
    apply(btl, can);
    btl->mode.job_numbers = 0 != (can & EFA_BTL_CAN_NUMBER);
    opal_atomic_wmb();
    btl->mode.agreed = true;
    OPAL_THREAD_UNLOCK(&btl->lock);

    char reasons[3][200];
    static const char *what[3] = {"put", "get", "atomics"};
    for (int k = 0; k < 3; ++k) {
        reasons[k][0] = '\0';
        if (first[k] >= 0) {
            snprintf(reasons[k], sizeof(reasons[k]), " (process %lld: %s)", (long long)first[k],
                     why_text(why[k]));
        }
    }
    mca_common_efa_say_choice(
        "btl:efa", "btl_efa job",
        "one-sided mode of the job (job-wide minimum of %u process(es)): put %s%s, get %s%s, "
        "atomics %s%s%s",
        published, path_name(btl->mode.native_put), reasons[0], path_name(btl->mode.native_get),
        reasons[1], path_name(btl->mode.native_atomics), reasons[2],
        !btl->mode.numbers      ? ""
        : btl->mode.job_numbers ? "; messages numbered to every peer (every process of the job "
                                  "has several NICs and rail failover)"
                                : "; messages numbered only to peers several NICs reach (not "
                                  "every process of the job has several NICs and rail failover: "
                                  "a receive failed on the first NIC ends the job)");
    /* "native" asked for by parameter and not granted by the job: said
     * plainly; the job runs on the emulated path, which every process has. */
    for (int k = 0; k < 3; ++k) {
        const bool asked = 2 == k ? btl->mode.atomics_insisted : btl->mode.rma_insisted;
        if ((lowered & (1u << k)) && asked) {
            char detail[256];
            snprintf(detail, sizeof(detail), "process %lld of the job cannot: %s",
                     (long long)first[k], why_text(why[k]));
            mca_common_efa_show_help("help-btl-efa.txt", "native-lowered", true,
                                     opal_process_info.nodename, what[k], detail);
        }
    }
}

void mca_btl_efa_mode_add_peer(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                               const opal_proc_t *proc) {
    ep->foreign_mode = false;
    ep->foreign_atomics = false;
    if (ep->is_self || proc->proc_name.jobid == OPAL_PROC_MY_NAME.jobid) {
        return; /* agreed with the rest of the job */
    }
    /* Another job agreed its own mode, and only what its processes could
     * do alone is published (its agreement may be lower).  Put and get go
     * emulated to it (its memory may have no provider registration).
     * Atomics are safe only where both sides surely execute them with CPU
     * atomics: this job emulates them and the peer could not do otherwise. */
    efa_btl_mode_card_t card;
    const bool known = read_card(&proc->proc_name, &card);
    ep->foreign_mode = true;
    OPAL_THREAD_LOCK(&btl->lock);
    ++btl->spread.foreign; /* (its job's numbering is its own) */
    OPAL_THREAD_UNLOCK(&btl->lock);
    const bool theirs = !known || (card.can & EFA_BTL_CAN_ATOMICS);
    ep->foreign_atomics = theirs || btl->mode.native_atomics;
    if (ep->foreign_atomics) {
        /* Not a failure (osc/rdma then takes its get-and-put path for them),
         * and said for every peer of the other job: verbose only. */
        opal_output_verbose(
            1, mca_common_efa_output,
            "btl:efa: %s: atomics with process %s of another job are refused: this job "
            "executes them %s, that one %s, and provider and CPU atomics must not mix "
            "on one location",
            opal_process_info.nodename, OPAL_NAME_PRINT(proc->proc_name),
            btl->mode.native_atomics ? "by the provider" : "by the target's CPU",
            theirs ? "may use the provider" : "by the target's CPU");
    }
}
