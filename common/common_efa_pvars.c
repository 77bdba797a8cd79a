/*
 * MPI_T performance variables of the core, common_efa_*: what it counted
 * since it opened (efa_core_get_counters), for tools that read MPI_T
 * (TAU, Score-P, HPCToolkit, mpiP, Caliper).  Read-only and continuous,
 * bound to no object; a counter keeps what released cores counted, so it
 * never goes down (efa_core_get_current_counters).
 */
#include "common_efa.h"

#include "efa_core.h"

#include <stddef.h>

#include "opal/mca/base/mca_base_pvar.h"

typedef struct {
    const char *name;
    const char *help;
    int var_class;
    size_t offset; /* of the field in efa_core_counters_t */
    int count;     /* values (an array indexed by NIC); 0 reads as 1 */
} efa_pvar_t;

#define FIELD(f) offsetof(efa_core_counters_t, f)
static const efa_pvar_t pvars[] = {
    {"completions", "Completions read from the provider's completion queues",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(completions), 0},
    {"posts_deferred",
     "Posts (sends, receives, one-sided operations) that found a provider queue full "
     "(FI_EAGAIN) and waited in the core's backlog",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(posts_deferred), 0},
    {"posts_waiting", "Posts waiting in the core's backlog for provider queue space now",
     MCA_BASE_PVAR_CLASS_LEVEL, FIELD(posts_waiting), 0},
    {"mr_cache_hits", "Memory registrations served by the registration cache",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(mr_hits), 0},
    {"mr_cache_misses", "Memory registrations made with the provider (cache misses)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(mr_misses), 0},
    {"mr_cache_evictions",
     "Idle memory registrations dropped to keep the cache within common_efa_mr_cache_size",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(mr_evictions), 0},
    {"peers_lost", "Processes declared unreachable (common_efa_peer_timeout, provider errors)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(peers_lost), 0},
    /* By path: the NIC (the provider), the on-node rings, single copy. */
    {"provider_sends", "Messages posted to the provider (the NIC), tagged and untagged",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(provider_sends), 0},
    {"provider_send_bytes", "Bytes of the messages posted to the provider",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(provider_send_bytes), 0},
    {"provider_recvs", "Messages received from the provider (receive completions)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(provider_recvs), 0},
    {"provider_recv_bytes", "Bytes of the messages received from the provider",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(provider_recv_bytes), 0},
    {"provider_rma",
     "One-sided operations (puts, gets, atomics) posted to the provider, own matching's "
     "rendezvous reads included",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(provider_rma), 0},
    {"provider_rma_bytes", "Bytes of the puts and gets posted to the provider",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(provider_rma_bytes), 0},
    {"ring_frames", "Frames sent through the on-node rings to processes of this node",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(ring_frames), 0},
    {"ring_bytes", "Bytes of the frames sent through the on-node rings (their headers included)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(ring_bytes), 0},
    {"single_copies", "Single copies (cross-memory attach) to or from another process of this node",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(single_copies), 0},
    {"single_copy_bytes", "Bytes moved by single copy", MCA_BASE_PVAR_CLASS_COUNTER,
     FIELD(single_copy_bytes), 0},
    {"unexpected_msgs",
     "Messages matched by the components' own engine that arrived before their receive",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(unexpected), 0},
    {"unexpected_peak",
     "Most messages waiting unexpected at once in the components' own engine, since the process "
     "started (a reset does not lower it)",
     MCA_BASE_PVAR_CLASS_HIGHWATERMARK, FIELD(unexpected_peak), 0},
    {"coalesced_frames",
     "Frames to another node packed behind another in one provider message (own matching)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(coalesced), 0},
    {"emul_served", "Emulated one-sided requests of peers executed here (btl_efa)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(emul_served), 0},
    {"emul_refused",
     "Emulated one-sided requests of peers refused here: no registration, outside it, not "
     "permitted, an operation not executed, a malformed request, or one during finalize",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(emul_refused), 0},
    /* Several NICs (rails). */
    {"rail_rma", "One-sided operations posted on the NICs beside a process's first (rails)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(rail_rma), 0},
    {"rail_rma_bytes", "Bytes of the puts and gets posted on the rails beside the first",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(rail_rma_bytes), 0},
    {"striped", "Puts and gets striped over several NICs (common_efa_stripe_min)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(striped), 0},
    {"striped_bytes", "Bytes of the puts and gets striped over several NICs",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(striped_bytes), 0},
    {"rails_lost", "NICs taken out for a peer after they failed it (common_efa_rail_failover)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(rails_lost), 0},
    {"failed_over", "Striped parts sent again over another NIC after theirs failed",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(failed_over), 0},
    {"rails_back",
     "NICs taken out for a peer that answered over it again and were put back "
     "(common_efa_rail_retry)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(rails_back), 0},
    {"rail_out_notices",
     "Peers' notices that they took out a NIC by which they reached this process "
     "(its registrations then dropped)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(rail_out_notices), 0},
    /* Arrays, one value per NIC of the process's set (index 0: its first). */
    {"nic_rma",
     "One-sided operations (atomics included) posted on each NIC of the process's set, by NIC "
     "(4 values; 0 for NICs the process does not have)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(nic_rma), 4},
    {"nic_rma_bytes",
     "Bytes of the puts and gets posted on each NIC of the process's set (4 values)",
     MCA_BASE_PVAR_CLASS_COUNTER, FIELD(nic_rma_bytes), 4},
};
#undef FIELD
#define NUM_PVARS (sizeof(pvars) / sizeof(pvars[0]))

static int pvar_count(const efa_pvar_t *p) {
    return p->count > 0 ? p->count : 1;
}

static int read_pvar(const struct mca_base_pvar_t *pvar, void *value, void *obj) {
    (void)obj;
    const efa_pvar_t *p = (const efa_pvar_t *)pvar->ctx;
    efa_core_counters_t c;
    efa_core_get_current_counters(&c);
    const uint64_t *from = (const uint64_t *)((const char *)&c + p->offset);
    for (int i = 0; i < pvar_count(p); ++i) {
        ((unsigned long long *)value)[i] = from[i];
    }
    return OPAL_SUCCESS;
}

/* A handle's value count: the arrays' length when bound. */
static int notify_pvar(struct mca_base_pvar_t *pvar, mca_base_pvar_event_t event, void *obj,
                       int *count) {
    (void)obj;
    if (MCA_BASE_PVAR_HANDLE_BIND == event) {
        *count = pvar_count((const efa_pvar_t *)pvar->ctx);
    }
    return OPAL_SUCCESS;
}

void mca_common_efa_register_pvars(void) {
    for (size_t i = 0; i < NUM_PVARS; ++i) {
        (void)mca_base_pvar_register("opal", "common", "efa", pvars[i].name, pvars[i].help,
                                     OPAL_INFO_LVL_4, pvars[i].var_class,
                                     MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL,
                                     MCA_BASE_VAR_BIND_NO_OBJECT,
                                     MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
                                     read_pvar, NULL, notify_pvar, (void *)&pvars[i]);
    }
}
