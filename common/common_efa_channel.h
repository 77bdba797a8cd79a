/*
 * A component's channel of the node's one inbox (common_efa_node.c): what
 * mtl_efa and btl_efa do alike around it (common_efa_channel.c), in each
 * component's words.  Reached through common_efa.h.
 */
#ifndef MCA_COMMON_EFA_CHANNEL_H
#define MCA_COMMON_EFA_CHANNEL_H

#include "opal_config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "opal/prefetch.h"

BEGIN_C_DECLS

typedef enum {
    MCA_COMMON_EFA_CHANNEL_AUTO, /* the rings where they can be set up */
    MCA_COMMON_EFA_CHANNEL_SHM,  /* the rings, or the component declines */
    MCA_COMMON_EFA_CHANNEL_NONE  /* the provider only */
} mca_common_efa_channel_mode_t;

typedef struct {
    /* Set by the component. */
    const char *component;     /* parameter prefix: "mtl_efa" */
    const char *user;          /* the component in help texts: "The EFA MTL" */
    const char *who;           /* its line in the report (mca_common_efa_say_choice) */
    const char *corrupt_means; /* what its frame checks refuse, for the dropped report */
    const char *inbox;         /* its inbox's file, once open, for that report */
    /* Set by mca_common_efa_channel_parse. */
    char prefix[16];    /* of its lines: "mtl:efa" */
    char help_file[32]; /* its no-channel, inbox-refused topics: "help-mtl-efa.txt" */
    mca_common_efa_channel_mode_t mode;
    int slots; /* the rings' geometry, once checked */
    size_t slot_size;
    uint64_t dropped_seen; /* corrupted frames dropped, as last looked at */
} mca_common_efa_channel_t;

/* <component>_onnode_channel's value (auto, shm, none; NULL: auto) into
 * ch->mode.  Another value is shown (help-common-efa.txt, bad-channel):
 * OPAL_ERR_BAD_PARAM, the component declines. */
OPAL_DECLSPEC int mca_common_efa_channel_parse(mca_common_efa_channel_t *ch, const char *value);
/* The rings' geometry (common_efa_onnode_slots, _slot_size) into ch and,
 * unless the channel is off, checked: a power of two slots (at least 2) of
 * a multiple of 64 bytes from 256 to 1 MiB.  Otherwise shown (bad-ring):
 * OPAL_ERR_BAD_PARAM. */
OPAL_DECLSPEC int mca_common_efa_channel_geometry(mca_common_efa_channel_t *ch);
/* Is an inbox failure (negative errno) one the user should hear of even
 * under "auto"? */
OPAL_DECLSPEC bool mca_common_efa_channel_worth_telling(int err);
/* The channel could not be set up (err: negative errno; path: the file, or
 * NULL for this process's inbox).  Under "shm" its no-channel topic and
 * OPAL_ERR_NOT_AVAILABLE; otherwise its inbox-refused topic when worth
 * telling, "unavailable ... provider only" in the report, OPAL_SUCCESS. */
OPAL_DECLSPEC int mca_common_efa_channel_unavailable(const mca_common_efa_channel_t *ch,
                                                     const char *path, int err);
/* The inbox's count of corrupted frames dropped: the first that appear are
 * said once, whatever the verbosity, since only another process writing
 * into the inbox makes them.  The check is inline: both components'
 * progress calls it every 1024th time. */
OPAL_DECLSPEC void mca_common_efa_channel_say_dropped(mca_common_efa_channel_t *ch,
                                                      uint64_t dropped);
static inline void mca_common_efa_channel_check_dropped(mca_common_efa_channel_t *ch,
                                                        uint64_t dropped) {
    if (OPAL_UNLIKELY(dropped != ch->dropped_seen)) {
        mca_common_efa_channel_say_dropped(ch, dropped);
    }
}
/* At finalize, before the inbox goes: the same check, then the total
 * dropped, if any; ch->inbox is forgotten. */
OPAL_DECLSPEC void mca_common_efa_channel_fini_dropped(mca_common_efa_channel_t *ch,
                                                       uint64_t dropped);

END_C_DECLS
#endif
