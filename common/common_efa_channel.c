/*
 * What mtl_efa and btl_efa do alike around their channels of the node's
 * one inbox (common_efa_node.c): the <component>_onnode_channel value, the
 * ring geometry check, what is said when a channel cannot be set up, and
 * the corrupted frames an inbox dropped.  The texts name the component
 * (its parameters, its help file), so each reads as its own.
 */
#include "common_efa_channel.h"

#include "common_efa.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "opal/constants.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

/* "mtl_efa" -> "mtl:efa", "help-mtl-efa.txt". */
static void name_after(mca_common_efa_channel_t *ch) {
    snprintf(ch->prefix, sizeof(ch->prefix), "%s", ch->component);
    snprintf(ch->help_file, sizeof(ch->help_file), "help-%s.txt", ch->component);
    for (char *c = ch->prefix; *c; ++c) {
        *c = '_' == *c ? ':' : *c;
    }
    for (char *c = ch->help_file; *c; ++c) {
        *c = '_' == *c ? '-' : *c;
    }
}

int mca_common_efa_channel_parse(mca_common_efa_channel_t *ch, const char *value) {
    name_after(ch);
    if (NULL == value || 0 == strcmp(value, "auto")) {
        ch->mode = MCA_COMMON_EFA_CHANNEL_AUTO;
    } else if (0 == strcmp(value, "shm")) {
        ch->mode = MCA_COMMON_EFA_CHANNEL_SHM;
    } else if (0 == strcmp(value, "none")) {
        ch->mode = MCA_COMMON_EFA_CHANNEL_NONE;
    } else {
        mca_common_efa_show_help("help-common-efa.txt", "bad-channel", true, ch->component,
                                 opal_process_info.nodename, ch->component, value, ch->user);
        return OPAL_ERR_BAD_PARAM;
    }
    return OPAL_SUCCESS;
}

int mca_common_efa_channel_geometry(mca_common_efa_channel_t *ch) {
    mca_common_efa_onnode_geometry(&ch->slots, &ch->slot_size);
    const int slots = ch->slots;
    const size_t size = ch->slot_size;
    if (MCA_COMMON_EFA_CHANNEL_NONE != ch->mode &&
        (slots < 2 || slots > EFA_SHM_RING_MAX_SLOTS || (slots & (slots - 1)) || size < 256 ||
         size % 64 || size > 1024 * 1024)) {
        char value[64];
        snprintf(value, sizeof(value), "%d slots of %zu bytes", slots, size);
        mca_common_efa_show_help("help-common-efa.txt", "bad-ring", true, ch->component,
                                 opal_process_info.nodename, value, ch->component, ch->component,
                                 ch->user);
        return OPAL_ERR_BAD_PARAM;
    }
    return OPAL_SUCCESS;
}

/* A file of someone else's at an inbox's name (or another inbox than the
 * one its owner published), or a full file system: the user can fix these,
 * so they are told even under "auto".  Other failures only cost speed and
 * are said at verbose 1. */
bool mca_common_efa_channel_worth_telling(int err) {
    return -EEXIST == err || -ELOOP == err || -EACCES == err || -EKEYREJECTED == err ||
           -ENOSPC == err;
}

int mca_common_efa_channel_unavailable(const mca_common_efa_channel_t *ch, const char *path,
                                       int err) {
    char file[OPAL_PATH_MAX];
    if (NULL == path) {
        mca_common_efa_node_file(file, sizeof(file));
        path = file;
    }
    if (MCA_COMMON_EFA_CHANNEL_SHM == ch->mode) {
        mca_common_efa_show_help(ch->help_file, "no-channel", true, opal_process_info.nodename,
                                 path, efa_shm_strerror(err));
        return OPAL_ERR_NOT_AVAILABLE;
    }
    /* (a directory the user named that cannot take the file: a typo
     * there is theirs to hear of) */
    const bool dir_unusable =
        -ENOENT == err || -ENOTDIR == err || -ENAMETOOLONG == err || -EROFS == err || -EPERM == err;
    if (mca_common_efa_channel_worth_telling(err) ||
        (dir_unusable && mca_common_efa_onnode_dir_named())) {
        mca_common_efa_show_help(ch->help_file, "inbox-refused", -ENOSPC == err,
                                 opal_process_info.nodename, path, efa_shm_strerror(err));
    }
    mca_common_efa_say_choice(ch->prefix, ch->who,
                              "on-node channel unavailable (%s: %s): provider only", path,
                              efa_shm_strerror(err));
    return OPAL_SUCCESS;
}

void mca_common_efa_channel_say_dropped(mca_common_efa_channel_t *ch, uint64_t dropped) {
    const char *inbox = ch->inbox;
    if (0 == ch->dropped_seen) {
        opal_output(0,
                    "%s: %s: dropped %llu corrupted frame(s) found in the on-node inbox%s%s "
                    "(%s): another process wrote into it",
                    ch->prefix, opal_process_info.nodename, (unsigned long long)dropped,
                    NULL == inbox ? "" : " ", NULL == inbox ? "" : inbox, ch->corrupt_means);
    }
    ch->dropped_seen = dropped;
}

void mca_common_efa_channel_fini_dropped(mca_common_efa_channel_t *ch, uint64_t dropped) {
    mca_common_efa_channel_check_dropped(ch, dropped);
    if (0 != dropped) {
        opal_output(0, "%s: %s: %llu corrupted frame(s) dropped by the on-node channel", ch->prefix,
                    opal_process_info.nodename, (unsigned long long)dropped);
    }
    ch->inbox = NULL;
}
