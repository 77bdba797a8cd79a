/*
 * mtl_efa's MCA parameters of the on-node channel and of matching, and
 * their checks.  Read at init (mtl_efa_engine.c, mtl_efa_own.c).
 */
#include "mtl_efa.h"

#include <stdio.h>
#include <string.h>

#include "opal/util/proc.h"

mtl_efa_params_t ompi_mtl_efa_params = {
    .channel = "auto",
    .single_copy = "auto",
    .matching = "auto",
    .net_eager = 8192,
    .net_window = 16,
    .net_read_min = 65536,
    .coalesce_bytes = 4096,
    .coalesce_max = 64,
};

static void reg(const mca_base_component_t *c, const char *name, const char *desc,
                mca_base_var_type_t type, int level, void *storage) {
    (void)mca_base_component_var_register(c, name, desc, type, NULL, 0, 0, level,
                                          MCA_BASE_VAR_SCOPE_READONLY, storage);
}

bool ompi_mtl_efa_param_set_by_user(const char *name) {
    const mca_base_var_t *var = NULL;
    int idx = mca_base_var_find("ompi", "mtl", "efa", name);
    return idx >= 0 && OPAL_SUCCESS == mca_base_var_get(idx, &var) && NULL != var &&
           MCA_BASE_VAR_SOURCE_DEFAULT != var->mbv_source;
}

void ompi_mtl_efa_params_register(const mca_base_component_t *c) {
    mtl_efa_params_t *p = &ompi_mtl_efa_params;
    reg(c, "onnode_channel",
        "How point-to-point messages of communicators whose processes are all on this node "
        "travel: \"shm\" through mtl_efa's own shared-memory rings with its own matching "
        "(the MTL declines if they cannot be set up), \"none\" by the provider, \"auto\" "
        "(default) as shm where the rings can be set up.  Communicators spanning nodes use "
        "the provider (see mtl_efa_matching)",
        MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_4, &p->channel);
    reg(c, "onnode_single_copy",
        "On-node messages larger than a ring slot: \"auto\" (default) copies them once, "
        "straight out of the sender, with Linux cross-memory attach (process_vm_readv) where "
        "the kernel allows it, else streams them through the rings; \"none\" always streams",
        MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &p->single_copy);
    /* onnode_dir, onnode_slots and onnode_slot_size are synonyms of the
     * common parameters (common_efa_onnode_*): one inbox per process. */
    reg(c, "matching",
        "Who matches MPI messages to and from other nodes: \"provider\": each MPI message is "
        "one tagged provider message, matched by the provider; \"own\": mtl_efa matches every "
        "message itself with the on-node engine's matching, the messages to other nodes travel "
        "as the provider's untagged messages with a sequence number, several small ones packed "
        "into one when they queue up (mtl_efa_coalesce_bytes); \"auto\" (default): own on the "
        "providers where it was measured to pay (tcp;ofi_rxm, udp;ofi_rxd), provider elsewhere "
        "(efa included, until measured there); a provider without tags always gets own",
        MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_4, &p->matching);
    reg(c, "net_eager_max",
        "Own matching: messages to other nodes up to this many bytes go eagerly (copied into "
        "one provider message), larger ones by rendezvous (64 to 60000; default 8192)",
        MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, &p->net_eager);
    reg(c, "net_read_min",
        "Own matching: rendezvous messages to other nodes of at least this many bytes are read "
        "by the receiver straight out of the sender's buffer with the provider's RMA read (one "
        "transfer, by the NIC where it reads natively), where the provider has FI_RMA; smaller "
        "ones, and any whose read fails, stream as the provider's messages.  0: never read "
        "(default 65536)",
        MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, &p->net_read_min);
    reg(c, "net_window",
        "Own matching: provider messages one peer may have in flight before further messages "
        "to it are packed together (1 to 4096; default 16)",
        MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_5, &p->net_window);
    reg(c, "coalesce_bytes",
        "Own matching: messages waiting for the same peer are packed into one provider message "
        "of up to this many bytes (0: never packed; else 64 to 60000; default 4096).  A lone "
        "message never waits",
        MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, &p->coalesce_bytes);
    reg(c, "coalesce_max",
        "Own matching: at most this many messages in one packed provider message (1 to 1024; "
        "default 64)",
        MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_5, &p->coalesce_max);
    reg(c, "debug_swap_net",
        "For tests only, with own matching: the receiver holds back every other provider "
        "message and hands it on after the next one, so that messages arrive out of order "
        "and the sequence numbers must restore it.  Default false",
        MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_9, &p->debug_swap);
    reg(c, "debug_lose_net",
        "For tests only, with own matching: the Nth provider message to arrive here (counting "
        "from 1) is taken as a receive the provider failed, as ofi_rxd does under load, so "
        "that its sender's stream waits for a message that never comes and the sender must "
        "be failed with a message naming it.  0 (default): none; 0 to 1000000000",
        MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_9, &p->debug_lose);
}

int ompi_mtl_efa_check_choice(const char *param, const char *value, const char *const *choices) {
    char allowed[128] = "";
    for (const char *const *c = choices; NULL != *c; ++c) {
        if (NULL != value && 0 == strcmp(value, *c)) {
            return OMPI_SUCCESS;
        }
        snprintf(allowed + strlen(allowed), sizeof(allowed) - strlen(allowed), "%s%s",
                 c == choices ? "" : ", ", *c);
    }
    mca_common_efa_show_help("help-mtl-efa.txt", "bad-choice", true, opal_process_info.nodename,
                             param, NULL == value ? "(null)" : value, allowed);
    return OMPI_ERR_BAD_PARAM;
}

static int refuse_text(const char *param, const char *text, const char *range) {
    mca_common_efa_show_help("help-mtl-efa.txt", "bad-number", true, opal_process_info.nodename,
                             param, text, range);
    return OMPI_ERR_BAD_PARAM;
}

static int refuse(const char *param, size_t value, const char *range) {
    char text[32];
    snprintf(text, sizeof(text), "%zu", value);
    return refuse_text(param, text, range);
}

int ompi_mtl_efa_params_check(void) {
    const mtl_efa_params_t *p = &ompi_mtl_efa_params;
    static const char *const copies[] = {"auto", "none", NULL};
    static const char *const matchings[] = {"auto", "provider", "own", NULL};
    /* (onnode_channel: mca_common_efa_channel_parse, at init) */
    if (OMPI_SUCCESS != ompi_mtl_efa_check_choice("onnode_single_copy", p->single_copy, copies) ||
        OMPI_SUCCESS != ompi_mtl_efa_check_choice("matching", p->matching, matchings)) {
        return OMPI_ERR_BAD_PARAM;
    }
    if (p->net_eager < 64 || p->net_eager > 60000) {
        return refuse("net_eager_max", p->net_eager, "64 to 60000");
    }
    if (p->net_window < 1 || p->net_window > 4096) {
        return refuse("net_window", (size_t)p->net_window, "1 to 4096");
    }
    if (p->coalesce_bytes != 0 && (p->coalesce_bytes < 64 || p->coalesce_bytes > 60000)) {
        return refuse("coalesce_bytes", p->coalesce_bytes, "0, or 64 to 60000");
    }
    if (p->coalesce_max < 1 || p->coalesce_max > 1024) {
        return refuse("coalesce_max", (size_t)p->coalesce_max, "1 to 1024");
    }
    if (p->debug_lose < 0 || p->debug_lose > 1000000000) {
        char text[32];
        snprintf(text, sizeof(text), "%d", p->debug_lose);
        return refuse_text("debug_lose_net", text, "0 to 1000000000");
    }
    return OMPI_SUCCESS;
}
