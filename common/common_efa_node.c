/*
 * OPAL glue of the node's one on-node stack (efa_node.h): its parameters as
 * the job gives them, the one inbox acquired for both components, the one
 * card each process publishes to the others of its node, and the runtime's
 * removal of the file should the process die.
 */
#include "common_efa.h"
#include "common_efa_compat.h"
#include "efa_cma.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/constants.h"
#include "opal/util/error.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#define NODE_MODEX_KEY "common_efa_node"

/* The node's parameters (job_tag: room for the tag they point to). */
static bool node_params(efa_node_params_t *p, char *job_tag, size_t len) {
    const char *dir = mca_common_efa_onnode_dir();
    if (NULL == dir || mca_common_efa_local_rank() < 0 || mca_common_efa_local_size() < 1) {
        return false;
    }
    snprintf(job_tag, len, "%u.%x", (unsigned)getuid(), (unsigned)OPAL_PROC_MY_NAME.jobid);
    memset(p, 0, sizeof(*p));
    p->dir = dir;
    p->job_tag = job_tag;
    p->my_vpid = OPAL_PROC_MY_NAME.vpid;
    p->local_rank = (uint32_t)mca_common_efa_local_rank();
    p->nlocal = (uint32_t)mca_common_efa_local_size();
    int slots;
    size_t slot_size;
    mca_common_efa_onnode_geometry(&slots, &slot_size);
    p->slots = (uint32_t)slots;
    p->slot_size = (uint32_t)slot_size;
    /* Set by MPI_Init from the thread level asked for, before any
     * component opens. */
    p->one_thread = !opal_using_threads();
    return true;
}

void mca_common_efa_node_file(char *buf, size_t len) {
    efa_node_params_t p;
    char job_tag[64];
    if (!node_params(&p, job_tag, sizeof(job_tag))) {
        snprintf(buf, len, "(no directory for the inbox)");
        return;
    }
    efa_node_file(&p, p.my_vpid, buf, len);
}

efa_node_t *mca_common_efa_node_acquire(int *err) {
    efa_node_params_t p;
    char job_tag[64];
    if (!node_params(&p, job_tag, sizeof(job_tag))) {
        *err = -ENOENT;
        return NULL;
    }
    bool created = false;
    efa_node_t *node = efa_node_acquire(&p, &created, err);
    if (NULL != node && created) {
        /* Removed by the runtime if this process dies without finalizing:
         * asked once, for the one file. */
        mca_common_efa_register_cleanup(efa_node_path(node));
    }
    return node;
}

int mca_common_efa_node_publish(efa_node_t *node) {
    /* The one card, put again each time a channel opens (a put of the same
     * key replaces the value until the modex is exchanged): its channel
     * bits then say what this process serves. */
    efa_node_card_t card;
    efa_node_my_card(node, &card);
    int rc;
    OPAL_MODEX_SEND_STRING(rc, EFA_PMIX_LOCAL, NODE_MODEX_KEY, &card, sizeof(card));
    return mca_common_efa_modex_rc(rc);
}

bool mca_common_efa_node_card(const opal_process_name_t *name, efa_node_card_t *card) {
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc;
    OPAL_MODEX_RECV_STRING(rc, NODE_MODEX_KEY, name, &bytes, &len);
    const bool ok = OPAL_SUCCESS == rc && NULL != bytes && sizeof(*card) == len;
    if (ok) {
        memcpy(card, bytes, sizeof(*card));
    }
    free(bytes);
    return ok;
}

void mca_common_efa_node_put(efa_node_t *node) {
    static bool said = false;
    const uint32_t n = efa_node_by_descriptor(node);
    if (n > 0 && !said) {
        said = true;
        opal_output_verbose(1, mca_common_efa_output,
                            "common:efa: on-node: %u attaches found a peer's inbox file removed "
                            "from %s (by something else than the job: systemd-logind's "
                            "RemoveIPC=yes removes a user's files there when its last session "
                            "ends) and reached it through the peer's own descriptor",
                            (unsigned)n, mca_common_efa_onnode_dir());
    }
    efa_node_release(node);
}

void mca_common_efa_register_cleanup(const char *path) {
    int rc = mca_common_efa_pmix_register_cleanup(path);
    if (OPAL_SUCCESS != rc) {
        opal_output_verbose(1, mca_common_efa_output,
                            "common:efa: the runtime did not take %s for removal at an abnormal "
                            "end (%s): should this process die without finalizing, the file "
                            "stays behind",
                            path, opal_strerror(rc));
    }
}

void mca_common_efa_open_to_node(const char *prefix, const char *who) {
    if (mca_common_efa_local_size() < 2 || !efa_cma_built()) {
        return;
    }
    static bool said = false; /* (the first component to ask, at init: one thread) */
    int scope = -1, err = 0;
    const efa_cma_open_t how = efa_cma_open_to_node(&scope, &err);
    if (EFA_CMA_OPEN_NOT_NEEDED == how || said) {
        return; /* nothing to say (siblings may read each other already), or said */
    }
    said = true;
    mca_common_efa_say_choice(prefix, who, "node access: %s%s%s", efa_cma_open_said(how, scope),
                              err ? ": " : "", err ? strerror(err) : "");
}
