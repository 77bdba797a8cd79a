/*
 * mtl_efa's own MCA parameters, one table entry each: registration,
 * defaults and checks.  Read at init (mtl_efa_component.c, mtl_efa_module.c,
 * mtl_efa_engine.c, mtl_efa_own.c).
 */
#include "mtl_efa.h"

mtl_efa_params_t ompi_mtl_efa_params;

static const char *const copies[] = {"auto", "none", NULL};
static const char *const matchings[] = {"auto", "provider", "own", NULL};
static const char *const device_modes[] = {"auto", "open-mpi", "own", NULL};

#define P(field) &ompi_mtl_efa_params.field
#define CHOICE .topic = "bad-choice"
#define NUMBER .topic = "bad-number"
/* Checked in this order (ompi_mtl_efa_params_check).  onnode_dir,
 * onnode_slots and onnode_slot_size are synonyms of the common parameters
 * (common_efa_onnode_*): one inbox per process. */
static const mca_common_efa_param_t table[] = {
    {"priority", MCA_BASE_VAR_TYPE_INT, P(priority), .def = 30, .level = OPAL_INFO_LVL_9,
     .help = "Priority of the EFA MTL (above mtl/ofi's 25, so that pml/cm with this MTL wins on "
             "EFA instances)"},
    /* Checked by mca_common_efa_channel_parse at init, as btl_efa's. */
    {"onnode_channel", MCA_BASE_VAR_TYPE_STRING, P(channel), .def_str = "auto",
     .level = OPAL_INFO_LVL_4,
     .help = "How point-to-point messages of communicators whose processes are all on this node "
             "travel: \"shm\" through mtl_efa's own shared-memory rings with its own matching "
             "(the MTL declines if they cannot be set up), \"none\" by the provider, \"auto\" "
             "(default) as shm where the rings can be set up.  Communicators spanning nodes use "
             "the provider (see mtl_efa_matching)"},
    {"onnode_single_copy", MCA_BASE_VAR_TYPE_STRING, P(single_copy), .def_str = "auto",
     .choices = copies, .allowed = "auto, none", CHOICE, .unset_is_default = true,
     .level = OPAL_INFO_LVL_5,
     .help = "On-node messages larger than a ring slot: \"auto\" (default) copies them once, "
             "straight out of the sender, with Linux cross-memory attach (process_vm_readv) "
             "where the kernel allows it, else streams them through the rings (under Yama's "
             "ptrace_scope 1 each process with rings lets its user's processes read it: "
             "PR_SET_PTRACER_ANY); \"none\" always streams"},
    {"matching", MCA_BASE_VAR_TYPE_STRING, P(matching), .def_str = "auto", .choices = matchings,
     .allowed = "auto, provider, own", CHOICE, .unset_is_default = true, .level = OPAL_INFO_LVL_4,
     .help = "Who matches MPI messages to and from other nodes: \"provider\": each MPI message "
             "is one tagged provider message, matched by the provider; \"own\": mtl_efa "
             "matches every message itself in the matching engine, the messages to "
             "other nodes travel as the provider's untagged messages with a sequence number, "
             "several small ones packed into one when they queue up (mtl_efa_coalesce_bytes); "
             "\"auto\" (default): own on the providers where it was measured to pay "
             "(tcp;ofi_rxm, udp;ofi_rxd) and on nodes with several rails (a multi-NIC efa "
             "instance: own matching spreads messages over the NICs and survives one's "
             "loss), provider elsewhere (a one-NIC efa node, until measured there); a "
             "provider without tags always gets own"},
    {"net_eager_max", MCA_BASE_VAR_TYPE_SIZE_T, P(net_eager), .def = 8192, .lo = 64, .hi = 60000,
     .allowed = "64 to 60000", NUMBER, .level = OPAL_INFO_LVL_5,
     .help = "Own matching: messages to other nodes up to this many bytes go eagerly (copied "
             "into one provider message), larger ones by rendezvous (64 to 60000; default "
             "8192)"},
    /* (-1 reads as SIZE_MAX: never read, without a word) */
    {"net_read_min", MCA_BASE_VAR_TYPE_SIZE_T, P(net_read_min), .def = 65536, .lo = 0,
     .hi = 1LL << 40, .allowed = "0 (never read) to 2^40 bytes", NUMBER, .level = OPAL_INFO_LVL_5,
     .help = "Own matching: rendezvous messages to other nodes of at least this many bytes are "
             "read by the receiver straight out of the sender's buffer with the provider's RMA "
             "read (one transfer, by the NIC where it reads natively), where the provider has "
             "FI_RMA; smaller ones, and any whose read fails, stream as the provider's "
             "messages.  0: never read (default 65536)"},
    {"net_window", MCA_BASE_VAR_TYPE_INT, P(net_window), .def = 16, .lo = 1, .hi = 4096,
     .allowed = "1 to 4096", NUMBER, .level = OPAL_INFO_LVL_5,
     .help = "Own matching: provider messages one peer may have in flight before further "
             "messages to it are packed together (1 to 4096; default 16)"},
    {"net_small_window", MCA_BASE_VAR_TYPE_INT, P(net_small_window), .def = 4, .lo = 1, .hi = 4096,
     .allowed = "1 to 4096", NUMBER, .level = OPAL_INFO_LVL_5,
     .help = "Own matching: provider messages one peer may have in flight before further "
             "messages to it small enough to be packed (mtl_efa_coalesce_bytes) are packed "
             "together; at most mtl_efa_net_window (1 to 4096; default 4)"},
    {"coalesce_bytes", MCA_BASE_VAR_TYPE_SIZE_T, P(coalesce_bytes), .def = 4096, .lo = 64,
     .hi = 60000, .zero_ok = true, .allowed = "0, or 64 to 60000", NUMBER, .level = OPAL_INFO_LVL_5,
     .help = "Own matching: messages waiting for the same peer are packed into one provider "
             "message of up to this many bytes (0: never packed; else 64 to 60000; default "
             "4096).  A lone message never waits"},
    {"coalesce_max", MCA_BASE_VAR_TYPE_INT, P(coalesce_max), .def = 64, .lo = 1, .hi = 1024,
     .allowed = "1 to 1024", NUMBER, .level = OPAL_INFO_LVL_5,
     .help = "Own matching: at most this many messages in one packed provider message (1 to "
             "1024; default 64)"},
    {"debug_no_inject", MCA_BASE_VAR_TYPE_BOOL, P(test.no_inject), .test_only = true,
     .help = "Testing only: act as if the provider's inject size were 0, so that no message, "
             "synchronous-send acknowledgement included, is ever injected (every send is "
             "posted with a context of its own and completes through the completion queue, as "
             "on a provider without inject).  Default false"},
    {"device_buffers", MCA_BASE_VAR_TYPE_STRING, P(device_buffers), .def_str = "auto",
     .choices = device_modes, .allowed = "auto, open-mpi, own", CHOICE, .unset_is_default = true,
     .level = OPAL_INFO_LVL_4,
     .help = "Who copies device (GPU) buffers through host memory before a path of this MTL "
             "sees them: \"open-mpi\": Open MPI's pml/cm with its accelerator (5.0; 4.1 with "
             "CUDA support); \"own\": mtl_efa, with Open MPI's accelerator for the copies "
             "(Open MPI 5.0 with an accelerator component); \"auto\" (default): open-mpi"},
    {"device_ipc", MCA_BASE_VAR_TYPE_BOOL, P(device_ipc), .def = 1, .level = OPAL_INFO_LVL_4,
     .help = "Device (GPU) buffers this MTL copies (mtl_efa_device_buffers own) go to processes "
             "of this node GPU to GPU by the device's IPC handles, where the device has them, "
             "instead of through host memory.  Default true"},
    {"device_piece", MCA_BASE_VAR_TYPE_SIZE_T, P(device_piece), .def = 262144, .lo = 4096,
     .hi = 1073741824, .zero_ok = true, .allowed = "0, or 4096 to 1073741824", NUMBER,
     .level = OPAL_INFO_LVL_5,
     .help = "Device (GPU) buffers this MTL copies (mtl_efa_device_buffers own): under own "
             "matching a message from another node read by RMA into a device buffer is read "
             "in pieces of at most this many bytes, each copied from its host buffer to the "
             "device as soon as it is in, while the later pieces are still read; a message "
             "streamed as DATA frames (through the on-node rings, or from another node under "
             "own matching) is copied on a piece at a time as its frames come in (0: whole, "
             "after the message; else 4096 to 1073741824; default 262144)"},
    {"debug_device_blind", MCA_BASE_VAR_TYPE_BOOL, P(test.device_blind), .test_only = true,
     .help = "Testing only, with common_efa_debug_fake_device: hand device buffers on uncopied, "
             "as if no path needed to know (a control: the job must crash on the fake's memory). "
             "Default false"},
    {"debug_swap_net", MCA_BASE_VAR_TYPE_BOOL, P(test.swap_net), .test_only = true,
     .help = "Testing only, with own matching: the receiver holds back every other provider "
             "message and hands it on after the next one, so that messages arrive out of order "
             "and the sequence numbers must restore it.  Default false"},
    {"debug_flush_first", MCA_BASE_VAR_TYPE_INT, P(test.flush_first), .lo = 0, .hi = 1000000000,
     .allowed = "0 to 1000000000", NUMBER, .test_only = true,
     .help = "Testing only, with own matching: before the Nth provider message to arrive on the "
             "first NIC, a receive there fails (FI_EIO) carrying nothing, as a NIC flushing its "
             "queue does: survived with several NICs, the job's end with one.  0 (default): "
             "none; 0 to 1000000000"},
    {"debug_flush_lost", MCA_BASE_VAR_TYPE_BOOL, P(test.flush_lost), .test_only = true,
     .help = "Testing only, with mtl_efa_debug_flush_first: the failed receive held that "
             "provider message, which is lost (its sender's send completed).  Default false"},
    {"debug_lose_net", MCA_BASE_VAR_TYPE_INT, P(test.lose_net), .lo = 0, .hi = 1000000000,
     .allowed = "0 to 1000000000", NUMBER, .test_only = true,
     .help = "Testing only, with own matching: the Nth provider message to arrive here "
             "(counting from 1) is taken as a receive the provider failed, as ofi_rxd does "
             "under load, so that its sender's stream waits for a message that never comes and "
             "the sender must be failed with a message naming it.  0 (default): none; 0 to "
             "1000000000"},
    {"debug_net_first_rail", MCA_BASE_VAR_TYPE_INT, P(test.net_first_rail), .lo = 0, .hi = 3,
     .allowed = "0 to 3", NUMBER, .test_only = true,
     .help = "Testing only, with own matching and several NICs: the NIC (0: the first of the "
             "set) whose turn it is when this process first speaks to a peer on another node; "
             "peers take the NICs in turn from there, so that a job with one peer puts its "
             "messages on another NIC than the first.  Default 0"},
    {"debug_fail_rail_send", MCA_BASE_VAR_TYPE_INT, P(test.fail_rail_send), .lo = 0,
     .hi = 1000000000, .allowed = "0 to 1000000000", NUMBER, .test_only = true,
     .help = "Testing only, with own matching and several NICs: the Nth provider message sent "
             "over a NIC beside the first that completes is taken as one whose NIC failed, "
             "although it arrived, so that it goes again over the first NIC and the receiver "
             "must drop the copy.  0 (default): none; 0 to 1000000000"},
};
#undef P
#undef CHOICE
#undef NUMBER
#define NUM_PARAMS (sizeof(table) / sizeof(table[0]))

bool ompi_mtl_efa_param_set_by_user(const char *name) {
    const mca_base_var_t *var = NULL;
    int idx = mca_base_var_find("ompi", "mtl", "efa", name);
    return idx >= 0 && OPAL_SUCCESS == mca_base_var_get(idx, &var) && NULL != var &&
           MCA_BASE_VAR_SOURCE_DEFAULT != var->mbv_source;
}

void ompi_mtl_efa_params_register(const mca_base_component_t *c) {
    (void)mca_common_efa_params_register(c, table, NUM_PARAMS, NULL);
}

int ompi_mtl_efa_params_check(void) {
    return mca_common_efa_params_check(table, NUM_PARAMS, "help-mtl-efa.txt");
}
