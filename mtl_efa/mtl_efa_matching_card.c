/*
 * mtl_efa's matching, the same in every process of the job.
 *
 * A message between nodes is a tagged provider message under the
 * provider's matching and an untagged frame of the engine under own
 * matching; a process of one kind never matches what one of the other
 * sends, so two processes that chose differently would wait for ever.
 * mtl_efa_matching auto chooses from facts that processes on nodes of one
 * kind see alike (efa_core_auto_matching), but nodes of different kinds, a
 * parameter set for some processes only, or an engine that one process
 * could not create can still split a job.  Each process publishes its
 * choice in a modex card; add_procs reads the card of each peer of its job
 * and refuses a peer that chose the other way, with a message that says
 * how to make them agree, instead of a job that hangs.
 */
#include "mtl_efa.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"
#include "opal/util/proc.h"

#define MATCHING_MODEX_KEY "mtl_efa_matching"
#define MATCHING_CARD_MAGIC 0x4546414du /* "EFAM": a card of this layout */

typedef struct mtl_efa_matching_card {
    uint32_t magic;
    uint8_t own;        /* 1: own matching, 0: the provider's */
    uint8_t node_rails; /* efa_core_info_t.node_rails, for the message */
    uint8_t pad[2];
} mtl_efa_matching_card_t;

static const char *matching_name(bool own) {
    return own ? "own" : "provider";
}

int ompi_mtl_efa_matching_publish(void) {
    mtl_efa_matching_card_t card;
    memset(&card, 0, sizeof(card));
    card.magic = MATCHING_CARD_MAGIC;
    card.own = ompi_mtl_efa.own_matching ? 1 : 0;
    const int rails = efa_core_get_info(ompi_mtl_efa.core)->node_rails;
    card.node_rails = (uint8_t)(rails > 255 ? 255 : rails);
    int rc;
    OPAL_MODEX_SEND_STRING(rc, EFA_PMIX_GLOBAL, MATCHING_MODEX_KEY, &card, sizeof(card));
    if (OPAL_SUCCESS != rc) {
        /* Peers then find no card and cannot check: said, not fatal. */
        opal_output_verbose(1, mca_common_efa_output,
                            "mtl:efa: cannot publish the matching card: %s",
                            opal_strerror(mca_common_efa_modex_rc(rc)));
    }
    return OMPI_SUCCESS;
}

int ompi_mtl_efa_matching_check(const struct ompi_proc_t *proc) {
    const opal_process_name_t *name = &proc->super.proc_name;
    if (name->jobid != OPAL_PROC_MY_NAME.jobid) {
        return OMPI_SUCCESS; /* another job's processes: the provider's tags (mtl_efa_paths.c) */
    }
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc;
    OPAL_MODEX_RECV_STRING(rc, MATCHING_MODEX_KEY, name, &bytes, &len);
    mtl_efa_matching_card_t card;
    const bool read = OPAL_SUCCESS == rc && NULL != bytes && sizeof(card) == len;
    if (read) {
        memcpy(&card, bytes, sizeof(card));
    }
    free(bytes);
    if (!read || MATCHING_CARD_MAGIC != card.magic) {
        return OMPI_SUCCESS; /* no card (not published, or an older build): nothing to check */
    }
    const bool peer_own = 0 != card.own;
    if (peer_own == ompi_mtl_efa.own_matching) {
        return OMPI_SUCCESS;
    }
    static bool said = false; /* once per process: every such peer is refused alike */
    if (said) {
        return OMPI_ERR_NOT_SUPPORTED;
    }
    said = true;
    char mine[32], theirs[32], rails_mine[16], rails_theirs[16];
    snprintf(mine, sizeof(mine), "%s", matching_name(ompi_mtl_efa.own_matching));
    snprintf(theirs, sizeof(theirs), "%s", matching_name(peer_own));
    snprintf(rails_mine, sizeof(rails_mine), "%d",
             efa_core_get_info(ompi_mtl_efa.core)->node_rails);
    snprintf(rails_theirs, sizeof(rails_theirs), "%u", (unsigned)card.node_rails);
    mca_common_efa_show_help("help-mtl-efa.txt", "matching-differs", false,
                             opal_process_info.nodename, OPAL_NAME_PRINT(*name), mine, rails_mine,
                             theirs, rails_theirs);
    return OMPI_ERR_NOT_SUPPORTED;
}
