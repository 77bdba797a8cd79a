/*
 * btl_efa component: parameters, selection and module creation.
 */
#include "btl_efa_defaults.h"
#include "btl_efa_mode.h"
#include "btl_efa_rdma.h"
#include "btl_efa_ring.h"
#include "common_efa_release.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"

static int efa_component_register(void);
static int efa_component_open(void);
static int efa_component_close(void);
static mca_btl_base_module_t **efa_component_init(int *num_btls, bool enable_progress_threads,
                                                  bool enable_mpi_threads);

mca_btl_efa_component_t mca_btl_efa_component = {
    .super =
        {
            .btl_version =
                {
                    MCA_BTL_EFA_BASE_VERSION,
                    .mca_component_name = "efa",
                    MCA_COMMON_EFA_RELEASE_VERSION,
                    .mca_open_component = efa_component_open,
                    .mca_close_component = efa_component_close,
                    .mca_register_component_params = efa_component_register,
                },
            .btl_data = {.param_field = MCA_BASE_METADATA_PARAM_CHECKPOINT},
            .btl_init = efa_component_init,
            /* None for the BML to register: the common progress callback
             * runs mca_btl_efa_component_progress after the core's progress (one
             * hook for the whole stack; mca_common_efa_progress_add). */
            .btl_progress = NULL,
        },
};

/* Does the job span nodes?  Then a node-local provider (shm) cannot serve it. */
static bool job_spans_nodes(void) {
    return mca_btl_efa_job_size() > (uint32_t)mca_common_efa_local_size();
}

static const char *const modes[] = {"auto", "native", "emulated", NULL};
static const char *const copies[] = {"auto", "cma", "none", NULL};

#define STR_(x) #x
#define STR(x) STR_(x)
#define C(field) &mca_btl_efa_component.field
#define NUMBER .topic = "bad-value"
/* btl_efa's own parameters, read once, at registration; checked in this
 * order at init (efa_component_init).  onnode_dir, onnode_slots and
 * onnode_slot_size are synonyms of the common parameters
 * (common_efa_onnode_*): one inbox per process. */
static const mca_common_efa_param_t table[] = {
    /* (credits travel as 16 bits) */
    {"send_window", MCA_BASE_VAR_TYPE_INT, C(send_window), .lo = 0, .hi = 65535,
     .allowed = "0 (auto) to 65535 messages", NUMBER, .level = OPAL_INFO_LVL_5,
     .help = "Messages in flight to one peer before waiting for the peer to return credits (0: "
             "as many as a context keeps receive buffers posted, at least 8; at most 65535)"},
    /* Each chunk holds a registered fragment until answered: a window of
     * millions would hold a whole large put's worth of them. */
    {"rma_window", MCA_BASE_VAR_TYPE_INT, C(rma_window), .def = 4, .lo = 1, .hi = 1024,
     .allowed = "1 to 1024 chunks", NUMBER, .level = OPAL_INFO_LVL_5,
     .help = "Chunks of one put or get in flight; each answered chunk lets the next one go (1 "
             "to 1024)"},
    {"rma_timeout", MCA_BASE_VAR_TYPE_INT, C(rma_timeout), .def = 600, .lo = 1, .hi = 86400,
     .allowed = "1 to 86400 seconds", NUMBER, .level = OPAL_INFO_LVL_5,
     .help = "Seconds a one-sided operation executed by the target may go without an answer "
             "before it fails (OPAL_ERR_TIMEOUT, with a message) and flush stops waiting for "
             "it: the answer was lost or the target stopped progressing (1-86400; unset: the "
             "peer deadline, common_efa_peer_timeout, or 86400 where that is 0)"},
    {"peer_watch", MCA_BASE_VAR_TYPE_BOOL, C(peer_watch), .def = true, .level = OPAL_INFO_LVL_5,
     .help = "Watch the peers this process exchanged messages with through the provider lately "
             "(within two common_efa_peer_timeout), so that pml ob1 waiting on one that "
             "dropped off the network ends the job within about two timeouts, naming it, "
             "instead of waiting for ever; a watched peer must then enter MPI at least once per "
             "timeout (docs/RELIABILITY.md)"},
    {"rma_max_transfer", MCA_BASE_VAR_TYPE_SIZE_T, C(rma_max_transfer),
     .lo = EFA_BTL_MIN_RMA_TRANSFER, .hi = 1LL << 40, .zero_ok = true,
     /* A limit of a few bytes would turn one put into millions of
      * operations; below a page nothing is worth testing either. */
     .allowed = "0 (the provider's limit) or " STR(EFA_BTL_MIN_RMA_TRANSFER) " to 2^40 bytes",
     NUMBER, .level = OPAL_INFO_LVL_9,
     .help = "Largest single RDMA read or write handed to the provider; a larger native put or "
             "get is cut into pieces of this size (0: the provider's own limit; otherwise at "
             "least 4096, smaller values than the provider's are for testing)"},
    /* (-1 reads as SIZE_MAX: in place never, without a word) */
    {"inplace_min", MCA_BASE_VAR_TYPE_SIZE_T, C(inplace_min), .lo = 0, .hi = 1LL << 30,
     .allowed = "0 (auto) to 2^30 bytes", NUMBER, .level = OPAL_INFO_LVL_5,
     .help = "Contiguous sends of at least this many bytes go from the caller's buffer without "
             "a copy, as the second buffer of the message, while btl_efa_flags has "
             "\"inplace\"; smaller ones are copied behind the headers (0: those whose message, "
             "headers included, exceeds the provider's inject size, below which the provider "
             "copies it anyway)"},
    /* A batch must hold two small messages at least. */
    {"coalesce_bytes", MCA_BASE_VAR_TYPE_SIZE_T, C(coalesce_bytes), .def = 4096, .lo = 64,
     .hi = 1048576, .zero_ok = true, .allowed = "0 (off) or 64 to 1048576 bytes", NUMBER,
     .level = OPAL_INFO_LVL_5,
     .help = "Active messages that wait for one peer (its credits or the provider's queue used "
             "up) are packed into one provider message of at most this many bytes (capped at "
             "the provider's message size); a message that can go at once always goes alone "
             "(0: off, else 64 to 1048576)"},
    {"coalesce_max", MCA_BASE_VAR_TYPE_INT, C(coalesce_max), .def = 32, .lo = 2, .hi = 1024,
     .allowed = "2 to 1024 messages", NUMBER, .level = OPAL_INFO_LVL_5,
     .help = "Messages packed into one provider message at most (2 to 1024)"},
    {"rma_mode", MCA_BASE_VAR_TYPE_STRING, C(rma_mode), .def_str = "auto", .choices = modes,
     .unset_is_default = true, .allowed = "auto, native, emulated", .topic = "bad-mode",
     .level = OPAL_INFO_LVL_4,
     .help = "How put and get travel: \"native\" as the provider's RDMA write and read (needs "
             "FI_RMA; pml ob1 then fetches large messages by RDMA read), \"emulated\" as "
             "requests the target process executes after checking them byte for byte against "
             "its registrations (any provider), \"auto\" native where the provider grants "
             "FI_RMA"},
    {"atomic_mode", MCA_BASE_VAR_TYPE_STRING, C(atomic_mode), .def_str = "auto", .choices = modes,
     .unset_is_default = true, .allowed = "auto, native, emulated", .topic = "bad-mode",
     .level = OPAL_INFO_LVL_4,
     .help = "How atomics travel: \"native\" as the provider's fi_atomic operations (needs "
             "FI_ATOMIC and every advertised operation on 32- and 64-bit integers, so that no "
             "location mixes provider and CPU atomics), \"emulated\" as requests the target "
             "executes with CPU atomics, \"auto\" native where the provider supports all of "
             "them"},
    /* Checked by mca_common_efa_channel_parse at setup, as mtl_efa's. */
    {"onnode_channel", MCA_BASE_VAR_TYPE_STRING, C(onnode_channel), .def_str = "auto",
     .level = OPAL_INFO_LVL_4,
     .help = "How messages to processes of the job on the same node travel: \"shm\" through "
             "shared-memory rings of btl_efa's own (fragments and one-sided requests that fit a "
             "slot; larger ones by the provider; the BTL declines if the rings cannot be set "
             "up), \"none\" by the provider, \"auto\" (default) as shm where the rings can be "
             "set up. With the rings and every peer on this node, atomic_mode=auto executes "
             "atomics at the target (over the rings) rather than by the provider"},
    {"single_copy", MCA_BASE_VAR_TYPE_STRING, C(single_copy), .def_str = "auto", .choices = copies,
     .unset_is_default = true, .allowed = "auto, cma, none", .topic = "bad-single-copy",
     .level = OPAL_INFO_LVL_4,
     .help = "Put and get to another process of the same node: \"cma\" copies directly into "
             "or out of the peer's registered memory with Linux cross-memory attach "
             "(process_vm_writev/readv; complete at the target when the call returns), \"none\" "
             "always takes the provider's path (or the emulated one), \"auto\" uses CMA where "
             "the kernel allows it and the provider's path otherwise.  A peer the kernel "
             "refuses (ptrace_scope 2, containers, another user) falls back to the provider's "
             "path, reported at verbosity 1 (auto) or as an error message (cma).  Atomics and "
             "peers on other nodes always take the provider's path.  Not used with "
             "btl_efa_rma_mode emulated.  Under Yama's ptrace_scope 1, single copy or the "
             "on-node channel lets the processes of this user read and write this process "
             "(PR_SET_PTRACER_ANY, as Open MPI's vader does)"},
    {"onnode_rma_max", MCA_BASE_VAR_TYPE_SIZE_T, C(onnode_rma_max), .def = 4096, .lo = 0,
     .hi = 1048576, .zero_ok = true, .allowed = "0 (off) to 1048576 bytes", NUMBER,
     .level = OPAL_INFO_LVL_5,
     .help = "Put and get to another process of the same node of at most this many bytes (and "
             "fitting a ring slot) travel as a request in the peer's on-node ring, executed by "
             "the peer, which answers in well under a microsecond while it is in MPI; one the "
             "peer has not started after btl_efa_onnode_rma_wait is taken back and done by "
             "single copy (CMA), as are larger ones (0: always single copy)"},
    {"onnode_rma_wait", MCA_BASE_VAR_TYPE_INT, C(onnode_rma_wait), .def = 20, .lo = 1,
     .hi = 1000000, .allowed = "1 to 1000000 microseconds", NUMBER, .level = OPAL_INFO_LVL_5,
     .help = "Microseconds a put or get request in a peer's ring (btl_efa_onnode_rma_max) may "
             "wait for the peer to start it before the initiator takes it back and does it by "
             "single copy; the next 256 to that peer then go by single copy at once"},
    {"debug_corrupt_offset", MCA_BASE_VAR_TYPE_INT, C(test.corrupt_offset), .test_only = true,
     .help = "Testing only: add this many bytes to the remote address of every put and atomic, "
             "so that the target's registration check can be seen refusing them (0: off)"},
    {"debug_lose_answers", MCA_BASE_VAR_TYPE_INT, C(test.lose_answers), .lo = 0, .hi = 4,
     .allowed = "0 (off) to 4", NUMBER, .test_only = true,
     .help = "Testing only: the target loses its answers to one-sided requests: 1 drops them, "
             "2 sends them naming a request the initiator never issued, 3 sends each twice, 4 "
             "also answers the 4 request ids below each it gets (0: off)"},
    {"debug_lose_recv", MCA_BASE_VAR_TYPE_INT, C(test.lose_recv), .lo = 0, .hi = 1000000000,
     .allowed = "0 (off) to 1000000000", NUMBER, .test_only = true,
     .help = "Testing only: the Nth message this process receives through the provider "
             "arrives as a failed receive, as a provider that lost it would report it (0: off; "
             "0 to 1000000000)"},
    {"debug_forge_src", MCA_BASE_VAR_TYPE_INT, C(test.forge_src), .lo = 0, .hi = 1000000000,
     .allowed = "0 (off) to 1000000000", NUMBER, .test_only = true,
     .help = "Testing only: the Nth fragment this process injects through the provider goes "
             "out a second time with a header naming its destination as the sender, as a "
             "forged message would; the receiver's sender check drops it (0: off; 0 to "
             "1000000000)"},
    {"debug_fail_module_init", MCA_BASE_VAR_TYPE_INT, C(test.fail_module_init), .lo = 0, .hi = 1,
     .allowed = "0 (off) or 1", NUMBER, .test_only = true,
     .help = "Testing only: btl_efa's module init fails once its deadline ticks are added, as "
             "a registration refused there would; the MTL keeps the core and must run on "
             "(0: off; 0 or 1)"},
    {"debug_forge_unknown", MCA_BASE_VAR_TYPE_INT, C(test.forge_unknown), .lo = 0, .hi = 2,
     .allowed = "0 (off), 1 or 2", NUMBER, .test_only = true,
     .help = "Testing only, with btl_efa_debug_forge_src: the forged copy names a process of "
             "no job rather than its destination: 1, a rank beyond the job's; 2, a rank of "
             "another job id, which the runtime does not know; the receiver drops it (0: off; "
             "0 to 2)"},
    {"debug_fail_inbox_rank", MCA_BASE_VAR_TYPE_INT, C(test.fail_inbox_rank), .def = -1, .lo = -1,
     .hi = 1000000000, .allowed = "-1 (off) to 1000000000", NUMBER, .test_only = true,
     .help = "Testing only: the process of this rank (vpid) in the job fails to create its "
             "on-node inbox, as on a full /dev/shm, so that the job's one-sided mode can be "
             "seen agreeing anyway (-1: off)"},
    {"debug_first_rail", MCA_BASE_VAR_TYPE_INT, C(test.first_rail), .lo = 0, .hi = 3,
     .allowed = "0 to 3", NUMBER, .test_only = true,
     .help = "Testing only, with several NICs: the NIC (0: the first of the set) whose turn it "
             "is for the first peer on another node; peers take the NICs in turn from there, so "
             "that a job with one peer puts its messages on another NIC than the first.  "
             "Default 0"},
    {"debug_fail_rail_send", MCA_BASE_VAR_TYPE_INT, C(test.fail_rail_send), .lo = 0,
     .hi = 1000000000, .allowed = "0 to 1000000000", NUMBER, .test_only = true,
     .help = "Testing only, with several NICs: the Nth message sent over a NIC beside the first "
             "that completes is taken as one whose NIC failed, although it arrived, so that it "
             "goes again over another NIC and the receiver must drop the copy.  0 (default): "
             "none; 0 to 1000000000"},
    {"debug_fail_first_send", MCA_BASE_VAR_TYPE_INT, C(test.fail_first_send), .lo = 0,
     .hi = 1000000000, .allowed = "0 to 1000000000", NUMBER, .test_only = true,
     .help = "Testing only, with several NICs: the Nth numbered message sent over the first NIC "
             "(to a peer reached over several) that completes is taken as one whose NIC failed, "
             "although it arrived, so that the peer's messages leave the first NIC, that one "
             "goes again over another and the receiver must drop the copy.  0 (default): none; "
             "0 to 1000000000"},
    {"debug_flush_first", MCA_BASE_VAR_TYPE_INT, C(test.flush_first), .lo = 0, .hi = 1000000000,
     .allowed = "0 to 1000000000", NUMBER, .test_only = true,
     .help = "Testing only: before the Nth message to arrive through the provider on the first "
             "NIC, a receive there fails (FI_EIO) carrying nothing, as a NIC flushing its queue "
             "does: survived where every process of the job numbers its messages (several NICs), "
             "the job's end elsewhere.  0 (default): none; 0 to 1000000000"},
    {"debug_flush_lost", MCA_BASE_VAR_TYPE_BOOL, C(test.flush_lost), .test_only = true,
     .help = "Testing only, with btl_efa_debug_flush_first: the failed receive held that "
             "arrival, which is lost, so that the watch must find it missing (after a flush "
             "each peer is asked for one more numbered message, so a lost last message leaves "
             "a gap too).  Default false"},
    {"debug_fail_first_rma", MCA_BASE_VAR_TYPE_INT, C(test.fail_first_rma), .lo = 0,
     .hi = 1000000000, .allowed = "0 to 1000000000", NUMBER, .test_only = true,
     .help = "Testing only, with several NICs: the Nth piece of a put or get by the provider "
             "completed over the first NIC is taken as one whose peer the provider found "
             "unreachable there, although it completed, so that it goes again over another NIC "
             "(a numbered peer's).  0 (default): none; 0 to 1000000000"},
    {"debug_takeback_refuse", MCA_BASE_VAR_TYPE_INT, C(test.takeback_refuse), .lo = 0, .hi = 1,
     .allowed = "0 (off) or 1", NUMBER, .test_only = true,
     .help = "Testing only: the single copy of a put or get taken back from a peer's ring "
             "fails as if the kernel refused it (EPERM), so that the fallback (single copy off "
             "for that peer, the request executed by the target) can be seen (0: off)"},
    {"debug_cma_refuse", MCA_BASE_VAR_TYPE_INT, C(test.cma_refuse), .lo = 0, .hi = 1,
     .allowed = "0 (off) or 1", NUMBER, .test_only = true,
     .help = "Testing only: act as if the kernel refused cross-memory attach to every peer "
             "(EPERM), so that the fallback to the provider's path can be seen (0: off)"},
};
#undef C
#undef NUMBER
#undef STR
#undef STR_
#define NUM_PARAMS (sizeof(table) / sizeof(table[0]))

static int efa_component_register(void) {
    mca_btl_base_module_t *m = &mca_btl_efa_module.super;

    mca_btl_efa_component.test_hooks_on = mca_common_efa_params_register(
        &mca_btl_efa_component.super.btl_version, table, NUM_PARAMS, NULL);

    /* Defaults; mca_btl_base_param_register makes each a btl_efa_* parameter.
     * On one node the shared-memory BTL must win: a lower exclusivity than
     * vader's (bml/r2 sends through the most exclusive BTL) and a higher
     * latency (osc/rdma picks the lowest latency among the BTLs that reach
     * every peer), see Open MPI issue 12255. */
    m->btl_exclusivity = MCA_BTL_EXCLUSIVITY_DEFAULT;
    m->btl_latency = 10;
    m->btl_bandwidth = 5000;
    /* 16 KiB: on tcp;ofi_rxm an 8-16 KiB message went about three times
     * faster as one active message than as an RDMA read round trip (bench
     * bw, best of 5); on shm the two were equal. */
    m->btl_eager_limit = 16 * 1024;
    m->btl_rndv_eager_limit = 16 * 1024;
    m->btl_max_send_size = 60 * 1024;
    m->btl_rdma_pipeline_send_length = 256 * 1024;
    m->btl_rdma_pipeline_frag_size = 1024 * 1024;
    m->btl_min_rdma_pipeline_size = 256 * 1024;
    m->btl_flags = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_SEND_INPLACE | MCA_BTL_FLAGS_PUT |
                   MCA_BTL_FLAGS_GET | MCA_BTL_FLAGS_ATOMIC_OPS | MCA_BTL_FLAGS_ATOMIC_FOPS |
                   MCA_BTL_FLAGS_RDMA_FLUSH | MCA_BTL_EFA_VERSION_FLAGS;
    m->btl_atomic_flags =
        MCA_BTL_ATOMIC_SUPPORTS_ADD | MCA_BTL_ATOMIC_SUPPORTS_AND | MCA_BTL_ATOMIC_SUPPORTS_OR |
        MCA_BTL_ATOMIC_SUPPORTS_XOR | MCA_BTL_ATOMIC_SUPPORTS_LAND | MCA_BTL_ATOMIC_SUPPORTS_LOR |
        MCA_BTL_ATOMIC_SUPPORTS_LXOR | MCA_BTL_ATOMIC_SUPPORTS_SWAP | MCA_BTL_ATOMIC_SUPPORTS_MIN |
        MCA_BTL_ATOMIC_SUPPORTS_MAX | MCA_BTL_ATOMIC_SUPPORTS_32BIT |
        MCA_BTL_ATOMIC_SUPPORTS_CSWAP | MCA_BTL_ATOMIC_SUPPORTS_GLOB;
    m->btl_registration_handle_size = sizeof(struct mca_btl_base_registration_handle_t);
    /* Any size: larger operations are split into chunks internally. */
    m->btl_put_limit = SIZE_MAX;
    m->btl_get_limit = SIZE_MAX;
    m->btl_put_alignment = 0;
    m->btl_get_alignment = 0;
    /* Local buffers are copied, never accessed by the NIC: no registration. */
    m->btl_put_local_registration_threshold = SIZE_MAX;
    m->btl_get_local_registration_threshold = SIZE_MAX;

    (void)mca_btl_base_param_register(&mca_btl_efa_component.super.btl_version, m);
    return mca_common_efa_register_params(&mca_btl_efa_component.super.btl_version);
}

static int efa_component_open(void) {
    return OPAL_SUCCESS;
}

static int efa_component_close(void) {
    return OPAL_SUCCESS;
}

/* How put or get travels, and why, for the report. */
static const char *rma_path(bool native, efa_rma_mode_t mode, efa_rma_by_t by) {
    if (native) {
        return EFA_RMA_BY_DEVICE == by ? "native (device RDMA)" : "native (provider RMA)";
    }
    if (EFA_RMA_MODE_AUTO == mode && EFA_RMA_BY_EMULATION == by) {
        return "executed by the target (the provider would emulate it: no device RDMA)";
    }
    return "executed by the target";
}

/* Decide the one-sided paths for this job from the parameters and what
 * the provider granted.  Every process of a job sees the same provider and
 * parameters, so all make the same choice.  A bad value, or "native" where
 * the provider cannot, is reported and the BTL declines. */
static int choose_one_sided(mca_btl_efa_module_t *btl, efa_core_t *core, bool ring_all) {
    const efa_core_info_t *info = efa_core_get_info(core);
    efa_rma_mode_t rma, atomics;
    efa_single_copy_mode_t single_copy;
    /* The words were checked against the table (efa_component_init). */
    if (!efa_rma_parse_mode(mca_btl_efa_component.rma_mode, &rma) ||
        !efa_rma_parse_mode(mca_btl_efa_component.atomic_mode, &atomics) ||
        !efa_rma_parse_single_copy(mca_btl_efa_component.single_copy, &single_copy)) {
        return OPAL_ERR_BAD_PARAM;
    }
#ifndef EFA_HAVE_CMA
    if (EFA_SINGLE_COPY_CMA == single_copy) {
        mca_common_efa_show_help("help-btl-efa.txt", "cma-unavailable", true,
                                 opal_process_info.nodename,
                                 "btl_efa was built without process_vm_readv/process_vm_writev");
        return OPAL_ERR_NOT_AVAILABLE;
    }
#endif
    if (EFA_SINGLE_COPY_CMA == single_copy && EFA_RMA_MODE_EMULATED == rma) {
        mca_common_efa_show_help("help-btl-efa.txt", "cma-unavailable", true,
                                 opal_process_info.nodename,
                                 "btl_efa_rma_mode is \"emulated\": put and get are to be "
                                 "executed by the target");
        return OPAL_ERR_BAD_PARAM;
    }
    if (EFA_RMA_MODE_EMULATED == rma) {
        single_copy = EFA_SINGLE_COPY_NONE; /* the user asked for the target to execute them */
    }
    btl->cma.mode = single_copy;
    if (EFA_RMA_MODE_NATIVE == rma && !info->has_rma) {
        mca_common_efa_show_help("help-btl-efa.txt", "native-unavailable", true,
                                 opal_process_info.nodename, "rma_mode", info->provider,
                                 "the provider did not grant FI_RMA");
        return OPAL_ERR_NOT_AVAILABLE;
    }
    /* auto: the provider's RMA only where the device does it.  An RMA
     * the efa provider emulates costs the target's CPU as ours does, and
     * ours executes a put or get in one round trip with no registration. */
    const bool auto_rma = EFA_RMA_MODE_AUTO == rma;
    btl->mode.native_put = EFA_RMA_MODE_EMULATED != rma && info->has_rma &&
                           !(auto_rma && EFA_RMA_BY_EMULATION == info->rma_write_by);
    btl->mode.native_get = EFA_RMA_MODE_EMULATED != rma && info->has_rma &&
                           !(auto_rma && EFA_RMA_BY_EMULATION == info->rma_read_by);
    const uint8_t rma_why = EFA_RMA_MODE_EMULATED == rma ? EFA_BTL_WHY_PARAM
                            : !info->has_rma             ? EFA_BTL_WHY_PROVIDER
                                                         : EFA_BTL_WHY_EMULATED;
    btl->mode.why[0] = btl->mode.native_put ? EFA_BTL_WHY_NONE : rma_why;
    btl->mode.why[1] = btl->mode.native_get ? EFA_BTL_WHY_NONE : rma_why;
    btl->mode.rma_insisted = EFA_RMA_MODE_NATIVE == rma;
    btl->mode.atomics_insisted = EFA_RMA_MODE_NATIVE == atomics;
    btl->mode.pipeline_default = btl->super.btl_min_rdma_pipeline_size;
    btl->mode.pipeline_raised = false;
    if (btl->mode.native_get && mca_btl_efa_param_is_default("min_rdma_pipeline_size")) {
        /* pml ob1 uses its RDMA put pipeline for messages above this size
         * and one RDMA read of the receiver below it.  With native reads
         * and the MR cache, the read is one operation where the pipeline
         * takes three messages per fragment, and measured no slower at
         * 256 KiB to 1 MiB on tcp;ofi_rxm and shm: reads for every size. */
        btl->super.btl_min_rdma_pipeline_size = SIZE_MAX;
        btl->mode.pipeline_raised = true;
    }
    char why[160] = "";
    bool usable = efa_core_atomics_usable(core, why, sizeof(why));
    btl->mode.why[2] = usable ? EFA_BTL_WHY_NONE : EFA_BTL_WHY_PROVIDER;
    if (EFA_RMA_MODE_AUTO == atomics && usable && EFA_RMA_BY_EMULATION == info->atomics_by) {
        usable = false;
        btl->mode.why[2] = EFA_BTL_WHY_EMULATED;
        snprintf(why, sizeof(why), "the provider emulates atomics (the device has none)");
    }
    if (EFA_RMA_MODE_NATIVE == atomics && !usable) {
        mca_common_efa_show_help("help-btl-efa.txt", "native-unavailable", true,
                                 opal_process_info.nodename, "atomic_mode", info->provider, why);
        return OPAL_ERR_NOT_AVAILABLE;
    }
    if (EFA_RMA_MODE_AUTO == atomics && usable && ring_all) {
        /* Every peer is on this node and reached through the on-node
         * rings: an atomic executed by the target's CPU after one ring
         * round trip beats the provider's (measured on shm: docs/
         * PERFORMANCE.md).  All or nothing still holds: every process of
         * the job makes the same choice. */
        usable = false;
        btl->mode.why[2] = EFA_BTL_WHY_RING;
        snprintf(why, sizeof(why), "the on-node channel carries them (every peer on this node)");
    }
    btl->mode.native_atomics = EFA_RMA_MODE_EMULATED != atomics && usable;
    if (EFA_RMA_MODE_EMULATED == atomics) {
        btl->mode.why[2] = EFA_BTL_WHY_PARAM;
    }
    if (btl->mode.native_atomics) {
        /* Provider atomics need not be atomic with respect to the CPU's (a
         * NIC may execute them), so osc/rdma must not mix the two; own
         * memory goes through the provider as well (btl_efa_rdma.c). */
        btl->super.btl_atomic_flags &= ~MCA_BTL_ATOMIC_SUPPORTS_GLOB;
    }
    char line[512];
    snprintf(line, sizeof(line), "put %s, get %s%s%s; atomics %s%s%s",
             rma_path(btl->mode.native_put, rma, info->rma_write_by),
             rma_path(btl->mode.native_get, rma, info->rma_read_by),
             EFA_SINGLE_COPY_NONE != single_copy ? "; single copy (CMA) on this node where allowed"
                                                 : "",
             ring_all ? "; on-node channel to every peer" : "",
             btl->mode.native_atomics ? "native (provider atomics)"
                                      : "emulated (executed by the target)",
             (!btl->mode.native_atomics && EFA_RMA_MODE_AUTO == atomics) ? ": " : "",
             (!btl->mode.native_atomics && EFA_RMA_MODE_AUTO == atomics) ? why : "");
    /* What this process could do alone; the job's agreement (the minimum
     * over every process, btl_efa_mode.c) follows at the first add_procs. */
    mca_common_efa_say_choice("btl:efa", "btl_efa", "%s", line);
    btl->mode.numbers = info->num_nics > 1 && info->rail_failover;
    return mca_btl_efa_mode_publish(btl);
}

static mca_btl_base_module_t **efa_component_init(int *num_btls, bool enable_progress_threads,
                                                  bool enable_mpi_threads) {
    int rc;
    (void)enable_progress_threads;
    *num_btls = 0;
    bool asked = mca_common_efa_explicitly_requested("opal", "btl");
    if (OPAL_SUCCESS != mca_common_efa_probe(asked, job_spans_nodes())) {
        return NULL;
    }
    efa_core_t *core = mca_common_efa_acquire(enable_mpi_threads, job_spans_nodes(), &rc);
    if (NULL == core) {
        return NULL;
    }
    mca_btl_base_module_t **btls = malloc(sizeof(*btls));
    if (NULL == btls) {
        mca_common_efa_release(core);
        return NULL;
    }
    mca_btl_efa_choose_rma_timeout(core);
    bool ring = false;
    if (OPAL_SUCCESS != mca_common_efa_params_check(table, NUM_PARAMS, "help-btl-efa.txt") ||
        OPAL_SUCCESS != mca_btl_efa_ring_setup(&mca_btl_efa_module, &ring)) {
        free(btls);
        mca_common_efa_release(core);
        return NULL;
    }
    int rc_one_sided = choose_one_sided(&mca_btl_efa_module, core, ring && !job_spans_nodes());
    const char *eager_why = "default";
    if (OPAL_SUCCESS == rc_one_sided) {
        /* needs the single-copy mode */
        eager_why = mca_btl_efa_choose_send_path(&mca_btl_efa_module, core, job_spans_nodes());
    }
    /* (module init caps it at the largest fragment: the report says so) */
    const size_t eager_asked = mca_btl_efa_module.super.btl_eager_limit;
    if (OPAL_SUCCESS != rc_one_sided ||
        OPAL_SUCCESS != mca_btl_efa_module_init(&mca_btl_efa_module, core) ||
        OPAL_SUCCESS != mca_btl_efa_cma_init(&mca_btl_efa_module, mca_btl_efa_module.cma.mode)) {
        mca_btl_efa_ring_fini(&mca_btl_efa_module);
        mca_btl_efa_module_init_failed(&mca_btl_efa_module);
        free(btls);
        mca_common_efa_release(core);
        mca_btl_efa_module_init_failed_released(&mca_btl_efa_module);
        return NULL;
    }
#ifdef MCA_BTL_FLAGS_ACCELERATOR_RDMA
    /* Open MPI 5's osc/rdma creates a window in device memory only over a
     * BTL that says it puts and gets device memory, and pml/ob1 then reads
     * a contiguous device message by RDMA.  This BTL does both wherever a
     * device backend is installed: by the provider's RDMA where it granted
     * FI_HMEM, as requests the owner executes with the device's copy
     * otherwise (btl_efa_rdma.c, cb.local_device). */
    if (efa_device_on && mca_btl_efa_param_is_default("flags")) {
        mca_btl_efa_module.super.btl_flags |= MCA_BTL_FLAGS_ACCELERATOR_RDMA;
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: device memory: puts and gets (accelerator RDMA: osc/rdma "
                            "windows in device memory, pml/ob1 reads of device messages)");
    }
#endif
    /* Flags the user set that no path here honors: device puts and gets
     * without a device backend (ob1 and osc/rdma would hand this BTL device
     * memory it would take for host memory), and asynchronous device copies
     * (ob1 would let a fragment go before its copy finished: this BTL never
     * waits for one). */
    const uint32_t dropped =
        mca_btl_efa_module.super.btl_flags &
        (MCA_BTL_EFA_FLAGS_DEVICE_ASYNC | (efa_device_on ? 0 : MCA_BTL_EFA_FLAGS_DEVICE_RDMA));
    if (0 != dropped) {
        mca_btl_efa_module.super.btl_flags &= ~dropped;
        opal_output_verbose(
            1, mca_common_efa_output, "btl:efa: btl_efa_flags: 0x%x dropped (%s)", dropped,
            efa_device_on ? "asynchronous device copies" : "device memory: no device backend here");
    }
    if (NULL != mca_btl_efa_module.ring.node) {
        /* Peers of this node ring it after sending here by the provider
         * (fragments larger than a slot, one-sided operations): the paced
         * provider poll then looks at once. */
        efa_core_set_doorbell(core, efa_node_doorbell(mca_btl_efa_module.ring.node));
    }
    const efa_core_info_t *info = efa_core_get_info(core);
    char capped[96];
    if (eager_asked > mca_btl_efa_module.super.btl_eager_limit) {
        snprintf(capped, sizeof(capped), "%s: %zu capped at the max send size", eager_why,
                 eager_asked);
        eager_why = capped;
    }
    opal_output_verbose(1, mca_common_efa_output,
                        "btl:efa: provider %s; eager %zu (%s), max send %zu, rdma pipeline "
                        "above %zu, native transfers up to %zu, emulated rma chunk %zu, "
                        "answers awaited %d s",
                        info->provider, mca_btl_efa_module.super.btl_eager_limit, eager_why,
                        mca_btl_efa_module.super.btl_max_send_size,
                        mca_btl_efa_module.super.btl_min_rdma_pipeline_size,
                        mca_btl_efa_module.native.rma_max, mca_btl_efa_module.emul.chunk,
                        mca_btl_efa_component.rma_timeout);
    btls[0] = &mca_btl_efa_module.super;
    *num_btls = 1;
    return btls;
}
