/*
 * OPAL glue of the shared core: parameters, diagnostics and modex (the
 * memory hooks: common_efa_mem_hooks.c; progress: common_efa_progress.c).  Everything here runs
 * once per process or at setup; the data path lives in the C++ core.
 */
#include "common_efa.h"
#include "common_efa_compat.h"
#include "common_efa_cpusets.h"
#include "common_efa_progress.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "opal/constants.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/util/error.h"
#include "opal/util/output.h"
#include "opal/util/show_help.h"

int mca_common_efa_output = -1;

/* The shared parameters' storage: the core's own fields where the core
 * takes them as they are, the rest beside. */
static struct {
    efa_core_params_t core;
    char *provider_shm;        /* auto, on, off, provider: core.provider_shm from it */
    char *hmem;                /* auto, on, off: core.hmem and core.want_hmem from it */
    char *hmem_vmm;            /* auto, on, off: core.hmem_vmm from it */
    char *provider_cuda_calls; /* auto, on, off: core.provider_cuda_calls from it */
    char *onnode_dir;
    int onnode_slots;
    size_t onnode_slot_size;
} params;

static const char *const provider_shm_choices[] = {"auto", "on", "off", "provider", NULL};
static const char *const hmem_choices[] = {"auto", "on", "off", NULL};

#define C(field) &params.core.field
/* Their ranges are checked by the core (efa_params.cpp: the values it
 * hands libfabric), provider_shm here (at probe). */
static const mca_common_efa_param_t table[] = {
    {"provider_include", MCA_BASE_VAR_TYPE_STRING, C(provider_include), .level = OPAL_INFO_LVL_3,
     .help = "Comma-separated libfabric providers the EFA components may use (a name admits its "
             "layered forms: \"tcp\" admits \"tcp;ofi_rxm\"). Empty means \"efa\". Cannot be "
             "combined with provider_exclude."},
    {"provider_exclude", MCA_BASE_VAR_TYPE_STRING, C(provider_exclude), .level = OPAL_INFO_LVL_3,
     .help = "Comma-separated libfabric providers the EFA components must not use; when set, "
             "every other provider is admitted. Cannot be combined with provider_include."},
    {"nic_include", MCA_BASE_VAR_TYPE_STRING, C(nic_include), .level = OPAL_INFO_LVL_3,
     .help = "Comma-separated NICs (libfabric domain names such as \"rdmap16s27-rdm\", or the "
             "device name before the \"-\") the EFA components may use; empty: every NIC of the "
             "provider. Each process then takes its share of these by locality. A name this host "
             "does not offer is an error. Cannot be combined with nic_exclude."},
    {"nic_exclude", MCA_BASE_VAR_TYPE_STRING, C(nic_exclude), .level = OPAL_INFO_LVL_3,
     .help = "Comma-separated NICs the EFA components must not use (names as for nic_include). "
             "Cannot be combined with nic_include."},
    {"nics_per_proc", MCA_BASE_VAR_TYPE_INT, C(nics_per_proc), .def = 0, .level = OPAL_INFO_LVL_3,
     .help = "Most NICs in each process's set (0: its whole share, the NICs nearest to its "
             "binding divided among the processes that share them; N: at most N of those, the "
             "process's own first). 0 to 64."},
    {"gpu", MCA_BASE_VAR_TYPE_STRING, C(gpu), .def_str = "auto", .level = OPAL_INFO_LVL_3,
     .help = "The GPU (or other accelerator) whose PCIe switch's NICs make the process's NIC "
             "set: \"auto\" the GPU CUDA_VISIBLE_DEVICES names by index or UUID, else, where the "
             "node runs one process per GPU, that of the local rank's number (entry <local rank> "
             "of a CUDA_VISIBLE_DEVICES list, or accelerator <local rank>), where every process "
             "of the node is bound near its own; \"none\": the CPU "
             "binding decides; an accelerator's index in PCI order; or its PCI address "
             "(\"0000:53:00.0\"). A GPU with no NIC near it leaves the choice to the binding."},
    {"stripe_min", MCA_BASE_VAR_TYPE_INT, C(stripe_min), .def = 262144, .level = OPAL_INFO_LVL_4,
     .help = "Bytes from which a one-sided transfer (btl_efa's put and get: osc/rdma, and ob1's "
             "large messages) is striped over every NIC of the process's set that reaches the "
             "peer, in equal parts (0: never striped; 4096 to 1073741824). With one NIC it does "
             "nothing."},
    {"rail_failover", MCA_BASE_VAR_TYPE_BOOL, C(rail_failover), .def = 1, .level = OPAL_INFO_LVL_4,
     .help = "When one NIC of a process's set stops reaching a peer (operations fail, or none "
             "completes for common_efa_peer_timeout) while another still does, take it out for "
             "the peer and send again over the peer's home rail (the lowest reaching it both "
             "ways); the first NIC too unless mtl_efa's provider matching pins it. false: any "
             "rail's failure makes the peer unreachable."},
    {"rail_retry", MCA_BASE_VAR_TYPE_INT, C(rail_retry), .def = 10, .level = OPAL_INFO_LVL_4,
     .help = "Seconds after a NIC was taken out for a peer "
             "(common_efa_rail_failover) before it is asked again whether it reaches the peer: "
             "a ping over that NIC alone, which the peer answers over it. Answered, the NIC "
             "carries its share again; not, the wait doubles, to 8 times this. 0: a NIC taken "
             "out stays out (0 to 3600)."},
    {"num_contexts", MCA_BASE_VAR_TYPE_INT, C(num_contexts), .def = 1, .level = OPAL_INFO_LVL_4,
     .help = "Endpoints (queue pairs) per NIC. A communicator uses context (cid mod num_contexts) "
             "on both sides; more contexts let MPI_THREAD_MULTIPLE programs drive separate "
             "queues. EFA NICs have few queue pairs: keep this small (1 to 16)."},
    {"tx_size", MCA_BASE_VAR_TYPE_INT, C(tx_size), .level = OPAL_INFO_LVL_5,
     .help = "Depth of the provider's transmit queue per endpoint (0: provider default). A full "
             "queue delays operations, it never drops them."},
    {"rx_size", MCA_BASE_VAR_TYPE_INT, C(rx_size), .level = OPAL_INFO_LVL_5,
     .help = "Depth of the provider's receive queue per endpoint (0: provider default)."},
    {"mr_cache_size", MCA_BASE_VAR_TYPE_INT, C(mr_cache_size), .def = 1024,
     .level = OPAL_INFO_LVL_5,
     .help = "Unused memory registrations kept cached for reuse (0: deregister as soon as "
             "unused). Entries are dropped when their memory is freed."},
    {"progress_batch", MCA_BASE_VAR_TYPE_INT, C(progress_batch), .def = 16,
     .level = OPAL_INFO_LVL_6,
     .help = "Completions read from each completion queue per progress call (1 to 64; more "
             "favours throughput, fewer bounds latency)."},
    {"force_mr_local", MCA_BASE_VAR_TYPE_BOOL, C(force_mr_local), .test_only = true,
     .help = "Testing only: register every buffer and pass local descriptors as if the provider "
             "required FI_MR_LOCAL."},
    {"force_no_cq_data", MCA_BASE_VAR_TYPE_BOOL, C(force_no_cq_data), .test_only = true,
     .help = "Testing only: carry the source rank in the tag instead of remote CQ data (the "
             "layout used by providers without CQ data). Lowers the largest tag to 2^23-1."},
    {"verbose", MCA_BASE_VAR_TYPE_INT, C(verbose), .level = OPAL_INFO_LVL_5,
     .help = "Verbosity of the EFA components (0: quiet, 1: what was chosen, 10: why, 100: "
             "everything)"},
    {"provider_shm", MCA_BASE_VAR_TYPE_STRING, &params.provider_shm, .def_str = "auto",
     .choices = provider_shm_choices, .allowed = "auto, on, off or provider", .topic = "bad-param",
     .unset_is_default = true, .level = OPAL_INFO_LVL_4,
     .help = "The efa provider's own shared-memory path (FI_OPT_SHARED_MEMORY_PERMITTED): "
             "\"auto\" turns it off where the components' on-node paths carry node-local "
             "traffic (the provider would otherwise open a second shared-memory region and "
             "endpoint per process) and on where an on-node path is \"none\"; \"on\", \"off\", "
             "or \"provider\" (left untouched). Needs libfabric 1.21 or newer."},
    {"provider_cuda_calls", MCA_BASE_VAR_TYPE_STRING, &params.provider_cuda_calls,
     .def_str = "auto", .choices = hmem_choices, .allowed = "auto, on or off", .topic = "bad-param",
     .unset_is_default = true, .level = OPAL_INFO_LVL_4,
     .help = "Whether the efa provider may call CUDA itself (FI_OPT_CUDA_API_PERMITTED, "
             "libfabric 1.18 or newer): \"off\": it reaches device memory by the NIC alone "
             "(GPUDirect RDMA, as under NCCL), so it never sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS "
             "(libfabric 1.19.1 and newer) and carries CUDA VMM and pool memory "
             "(common_efa_hmem_vmm auto then hands them over on libfabric's efa fabric too, "
             "from 1.20), and its own shared-memory path is off where device buffers go to "
             "it (FI_HMEM); small messages into device memory then "
             "need the device's RDMA read or gdrcopy. Refused without CUDA or GPUDirect RDMA "
             "(or, from libfabric 2.0, with FI_HMEM_DISABLE_P2P set), and said. \"on\": it may; "
             "\"auto\": the "
             "provider's default (it may)."},
    {"rnr_retry", MCA_BASE_VAR_TYPE_INT, C(rnr_retry), .def = -1, .level = OPAL_INFO_LVL_5,
     .help = "Times the EFA device retries a send the receiver had no buffer for, before the "
             "send fails (FI_OPT_EFA_RNR_RETRY, 0 to 7; 7: for ever; -1: the provider's "
             "default)"},
    {"force_efa_options", MCA_BASE_VAR_TYPE_BOOL, C(force_efa_options), .test_only = true,
     .help = "Testing only: apply the efa provider's endpoint options (provider_shm, rnr_retry, "
             "device RDMA queries) on any provider, as on efa (that path on the stand-ins)"},
    {"force_emulated", MCA_BASE_VAR_TYPE_STRING, C(force_emulated), .test_only = true,
     .help = "Testing only: treat these one-sided operations as emulated by the provider "
             "whatever it reports (comma-separated: read, write, atomics), so btl_efa's auto "
             "modes take their own target-executed path for them (the choice made on EFA "
             "devices without RDMA)"},
    {"peer_timeout", MCA_BASE_VAR_TYPE_INT, C(peer_timeout), .def = 600, .level = OPAL_INFO_LVL_4,
     .help = "Seconds a peer may leave operations to it (sends, one-sided operations, a probe "
             "sent while a receive waits on it alone) without any completion before it is "
             "declared unreachable: its operations then fail (MPI_ERR_OTHER class, timeout), "
             "later ones fail at once, and a message names it. Bounds a host lost to the data "
             "network while the runtime still reaches it. A live peer must enter MPI at least "
             "that often while others wait on it. 0: never (wait for ever). 0 to 86400."},
    {"net_poll_interval", MCA_BASE_VAR_TYPE_INT, C(net_poll_interval_us), .def = 20,
     .level = OPAL_INFO_LVL_5,
     .help = "Microseconds the network provider may go unpolled once it has gone quiet: nothing "
             "of this process in flight on it (no send, receive or one-sided operation posted, "
             "no peer reached only through it by btl_efa), no completion in the last "
             "millisecond. Progress calls in between skip the provider, so on-node messages do "
             "not pay for its poll (0.3 to 0.5 us on tcp;ofi_rxm and udp;ofi_rxd, and it stalls "
             "what arrives meanwhile). Each poll that finds nothing doubles the wait, up to "
             "common_efa_net_poll_interval_max. 0: poll it on every progress call. 0 to "
             "1000000."},
    {"net_poll_interval_max", MCA_BASE_VAR_TYPE_INT, C(net_poll_interval_max_us), .def = 1000,
     .level = OPAL_INFO_LVL_5,
     .help = "The longest, in microseconds, that a provider which stays quiet goes unpolled "
             "(common_efa_net_poll_interval doubles up to it). What peers on this node send "
             "through the provider does not wait for it: they ring this process's doorbell. At "
             "or below common_efa_net_poll_interval: a fixed interval. 0 to 1000000."},
    {"force_direct_mode", MCA_BASE_VAR_TYPE_BOOL, C(force_direct_mode), .level = OPAL_INFO_LVL_9,
     .help = "Use the provider as libfabric's efa-direct fabric must be used: untagged messages "
             "and RMA only (no FI_TAGGED: mtl_efa matches messages itself), no message order "
             "asked for, FI_MR_LOCAL, no message over direct_mode_mtu bytes, and arrivals "
             "swapped in pairs so that nothing relies on the provider's order. Admits the "
             "efa-direct fabric, which is skipped otherwise; on the stand-ins it tests that "
             "path."},
    {"direct_mode_mtu", MCA_BASE_VAR_TYPE_INT, C(direct_mode_mtu), .def = 8192,
     .level = OPAL_INFO_LVL_9,
     .help = "The largest message, in bytes, under force_direct_mode (efa-direct's limit is "
             "the device's MTU, 8928 bytes on EFA). 1024 to 65536; 0: the default, 8192."},
    {"debug_swap_messages", MCA_BASE_VAR_TYPE_BOOL, C(debug_swap_messages), .test_only = true,
     .help = "Testing only: hand the provider's untagged arrivals on in swapped pairs (one held "
             "until the next arrives, or for 64 progress calls), to test that the components "
             "keep MPI's order themselves (on in force_direct_mode)"},
    {"debug_fake_device", MCA_BASE_VAR_TYPE_BOOL, C(debug_fake_device), .test_only = true,
     .help = "Testing only: memory of the fake device (efa_fake_device_alloc, which the CPU "
             "cannot touch) is device memory, copied through the host by the components as a "
             "GPU's would be"},
    {"debug_fake_device_no_ipc", MCA_BASE_VAR_TYPE_BOOL, C(debug_fake_device_no_ipc),
     .test_only = true,
     .help = "Testing only, with debug_fake_device: the fake refuses to import another "
             "process's memory, as a device refuses IPC (another container, a driver without "
             "it), so that device messages on one node go through the host"},
    {"debug_fake_device_hmem", MCA_BASE_VAR_TYPE_BOOL, C(debug_fake_device_hmem), .test_only = true,
     .help = "Testing only, with debug_fake_device: the fake's memory is readable by the CPU "
             "and described to the provider as FI_HMEM_SYSTEM memory, and FI_HMEM is asked "
             "for, so that a provider with FI_HMEM (shm) carries device buffers as it would a "
             "GPU's"},
    {"debug_fake_device_vmm", MCA_BASE_VAR_TYPE_BOOL, C(debug_fake_device_vmm), .test_only = true,
     .help = "Testing only, with debug_fake_device_hmem: the fake's memory is described as "
             "memory without synchronous memory operations, as CUDA VMM memory is "
             "(common_efa_hmem_vmm decides where it goes)"},
    {"debug_fake_device_piece", MCA_BASE_VAR_TYPE_INT, C(debug_fake_device_piece),
     .test_only = true,
     .help = "Testing only, with debug_fake_device: the fake's allocations above this many "
             "bytes are pieces of it (whole pages) side by side, each an allocation with its "
             "own id, as CUDA VMM memory grown a piece at a time; 0: off (0, 4096 to 2^30)"},
    {"debug_fake_device_refuse_post", MCA_BASE_VAR_TYPE_INT, C(debug_fake_device_refuse_post),
     .test_only = true,
     .help = "Testing only, with debug_fake_device_hmem: posts of the fake's registered memory "
             "are refused (-FI_EINVAL) as a provider may refuse device memory it registered: 1 "
             "at the post, 2 when progress posts them from the backlog (0 to 2)"},
    {"hmem", MCA_BASE_VAR_TYPE_STRING, &params.hmem, .def_str = "auto", .choices = hmem_choices,
     .allowed = "auto, on or off", .topic = "bad-param", .unset_is_default = true,
     .level = OPAL_INFO_LVL_4,
     .help = "Open MPI 5: ask the provider for FI_HMEM, so that device (GPU) buffers go to it "
             "as they are, "
             "registered with their interface and device (the efa provider on GPU instances: "
             "GPUDirect RDMA): mtl_efa's to and from peers the provider carries, btl_efa's "
             "puts and gets on device windows. \"auto\": where Open MPI has an accelerator and "
             "mtl_efa hands device buffers on itself (mtl_efa_device_buffers own); \"on\": "
             "wherever Open MPI has an accelerator (a provider that cannot grant FI_HMEM with "
             "FI_ATOMIC then leaves btl_efa's atomics emulated); \"off\": never. Without "
             "FI_HMEM device buffers are copied through the host."},
    {"hmem_vmm", MCA_BASE_VAR_TYPE_STRING, &params.hmem_vmm, .def_str = "auto",
     .choices = hmem_choices, .allowed = "auto, on or off", .topic = "bad-param",
     .unset_is_default = true, .level = OPAL_INFO_LVL_4,
     .help = "Device (GPU) allocations whose synchronous copies the driver cannot be told to "
             "finish before they return (CUDA VMM memory, as PyTorch's expandable segments, and "
             "stream-ordered pool memory, cudaMallocAsync): \"auto\": handed to a provider with "
             "FI_HMEM like other device memory, but on libfabric's efa fabric, whose posts of "
             "such memory fail (it sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on every CUDA buffer): "
             "copied through the host there, unless its endpoint took "
             "common_efa_provider_cuda_calls off (libfabric 1.20 or newer); \"on\": handed over "
             "there too; \"off\": always "
             "copied through the host. Handed over, the program must have finished its copies "
             "into them (e.g. by a stream synchronization) before the MPI call, or the NIC may "
             "read old bytes."},
    {"dmabuf", MCA_BASE_VAR_TYPE_BOOL, C(dmabuf), .def = 1, .level = OPAL_INFO_LVL_4,
     .help = "Register device (GPU) allocations that go to a provider with FI_HMEM through a "
             "dmabuf first (FI_MR_DMABUF: the pages exported by the GPU's driver, no peer-memory "
             "kernel module needed), and with their device address where the driver or the "
             "provider refuses one (said once at verbose 1); needs libfabric 1.20 or later. "
             "false: device addresses only."},
    /* One geometry and place for the node's one inbox (efa_node.h), which
     * both components' on-node channels share: the old per-component names
     * (mtl_efa_onnode_slots, btl_efa_onnode_slots, ...) are its synonyms. */
    {"onnode_dir", MCA_BASE_VAR_TYPE_STRING, &params.onnode_dir, .level = OPAL_INFO_LVL_9,
     .help = "Directory of the on-node inbox files, one per process shared by mtl_efa's and "
             "btl_efa's on-node channels (default: /dev/shm if writable, else the job's "
             "session directory)"},
    {"onnode_slots", MCA_BASE_VAR_TYPE_INT, &params.onnode_slots, .def = 64,
     .level = OPAL_INFO_LVL_9,
     .help = "Slots of each on-node ring (a power of two, 2 to 65536): frames one sender may "
             "have waiting for one receiver before further ones queue"},
    {"onnode_slot_size", MCA_BASE_VAR_TYPE_SIZE_T, &params.onnode_slot_size, .def = 8192,
     .level = OPAL_INFO_LVL_9,
     .help = "Bytes of one on-node ring slot (a multiple of 64, 256 to 1 MiB; 8 of them are "
             "the slot's header): mtl_efa sends messages up to the slot less 40 bytes of "
             "headers eagerly, larger ones by rendezvous; btl_efa sends larger messages by the "
             "provider"},
};
#undef C
#define NUM_PARAMS (sizeof(table) / sizeof(table[0]))

static int var_index[NUM_PARAMS];
static bool registered = false;
static bool modex_sent = false;
static bool reporting_set = false;

/* Is this on-node path (mtl_efa's or btl_efa's onnode_channel) "none"? */
static bool onnode_channel_off(const char *project, const char *framework) {
    return mca_common_efa_string_var_is(project, framework, "onnode_channel", "none");
}

/* Does mtl_efa hand device buffers on itself (mtl_efa_device_buffers own)?
 * Only then does FI_HMEM carry any (btl_efa takes none to the provider):
 * else it would cost native atomics (shm, efa before API 1.18) for nothing. */
static bool mtl_hands_device_buffers(void) {
    return mca_common_efa_string_var_is("ompi", "mtl", "device_buffers", "own");
}

/* An auto, on or off parameter (other values were refused at
 * registration; unset or "" is auto). */
static int switch_of(const char *v) {
    return NULL == v               ? EFA_SWITCH_AUTO
           : 0 == strcmp(v, "on")  ? EFA_SWITCH_ON
           : 0 == strcmp(v, "off") ? EFA_SWITCH_OFF
                                   : EFA_SWITCH_AUTO;
}

/* provider_shm as the core takes it: auto decides from the on-node paths
 * (the job's processes see the same parameters: they decide alike). */
static int provider_shm_switch(void) {
    const char *v = params.provider_shm ? params.provider_shm : "auto";
    if (0 == strcmp(v, "on")) {
        return EFA_SWITCH_ON;
    }
    if (0 == strcmp(v, "off")) {
        return EFA_SWITCH_OFF;
    }
    if (0 == strcmp(v, "provider")) {
        return EFA_SWITCH_AUTO;
    }
    if (mca_common_efa_local_size() < 2) {
        return EFA_SWITCH_AUTO; /* nobody on this node to talk to: leave it be */
    }
    return onnode_channel_off("ompi", "mtl") || onnode_channel_off("opal", "btl") ? EFA_SWITCH_ON
                                                                                  : EFA_SWITCH_OFF;
}

/* Registered once, as common_efa_*; each component that loads the core
 * adds its own name of each (mtl_efa_*, btl_efa_*). */
int mca_common_efa_register_params(const mca_base_component_t *component) {
    /* This library is never unloaded, but Open MPI 5 finalizes its MCA
     * variables, output streams and modex with the last session
     * (MPI_Session_finalize) and may initialize them again: what was done
     * once is done again once the variables are gone. */
    if (registered && mca_base_var_find("opal", "common", "efa", table[0].name) < 0) {
        registered = false;
        reporting_set = false;
        modex_sent = false;
    }
    if (!registered) {
        registered = true;
        (void)mca_common_efa_params_register(NULL, table, NUM_PARAMS, var_index);
        mca_common_efa_register_pvars();
    }
    for (size_t i = 0; i < NUM_PARAMS; ++i) {
        if (var_index[i] >= 0) {
            mca_base_var_register_synonym(var_index[i], component->mca_project_name,
                                          component->mca_type_name, component->mca_component_name,
                                          table[i].name, 0);
        }
    }
    return OPAL_SUCCESS;
}

void mca_common_efa_get_params(efa_core_params_t *p, bool thread_multiple, bool need_remote_comm) {
    *p = params.core;
    p->need_remote_comm = need_remote_comm;
    p->thread_multiple = thread_multiple;
    p->local_rank = mca_common_efa_local_rank();
    p->local_size = mca_common_efa_local_size();
    p->num_node_cpusets = mca_common_efa_node_cpusets(&p->node_cpusets);
    p->provider_shm = provider_shm_switch();
    p->hmem = NULL == params.hmem || 0 != strcmp(params.hmem, "off");
    p->hmem_vmm = switch_of(params.hmem_vmm);
    p->provider_cuda_calls = switch_of(params.provider_cuda_calls);
    p->mem_release_hooks = mca_common_efa_mem_hooks_on();
}

static void verbose_cb(int level, const char *msg) {
    opal_output_verbose(level, mca_common_efa_output, "common:efa: %s", msg);
}

/* The help files' folders: the one beside this library as installed,
 * <libdir>/../share/ompi-efa, where it holds them, before the one they
 * were installed in: an install moved or copied elsewhere (a relocated
 * package, a build carried to another machine) still finds its own
 * messages, not those of the build it came from. */
static void add_help_dirs(void) {
    char dir[4096], file[4200];
    Dl_info info;
    if (0 != dladdr((void *)&add_help_dirs, &info) && NULL != info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        const int n = NULL == slash ? snprintf(dir, sizeof(dir), "../share/ompi-efa")
                                    : snprintf(dir, sizeof(dir), "%.*s/../share/ompi-efa",
                                               (int)(slash - info.dli_fname), info.dli_fname);
        snprintf(file, sizeof(file), "%s/help-common-efa.txt", dir);
        if (n > 0 && (size_t)n < sizeof(dir) && 0 == access(file, R_OK)) {
            opal_show_help_add_dir(dir);
        }
    }
    opal_show_help_add_dir(EFA_HELP_DIR);
}

static void setup_reporting(void) {
    if (reporting_set) {
        return;
    }
    reporting_set = true;
    add_help_dirs();
    mca_common_efa_output = opal_output_open(NULL);
    opal_output_set_verbosity(mca_common_efa_output, params.core.verbose);
    efa_core_set_reporters(mca_common_efa_core_help, verbose_cb);
}

int mca_common_efa_probe(bool explain, bool need_remote_comm) {
    efa_core_params_t p;
    setup_reporting();
    if (efa_core_current()) {
        return OPAL_SUCCESS;
    }
    if (OPAL_SUCCESS != mca_common_efa_params_check(table, NUM_PARAMS, "help-common-efa.txt")) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    mca_common_efa_get_params(&p, false, need_remote_comm);
    /* An explicit provider list also means the user wants to hear why not. */
    explain = explain || (p.provider_include && p.provider_include[0]) ||
              (p.provider_exclude && p.provider_exclude[0]);
    int rc = efa_core_probe(&p, explain);
    return 0 == rc ? OPAL_SUCCESS : OPAL_ERR_NOT_AVAILABLE;
}

/* Open MPI's accelerator is the core's device backend (from the first
 * acquire to the last release). */
static bool device_installed = false;
/* The references the components hold on the core (acquired, not yet
 * released): at the last, the progress callback stops driving the core
 * before the core goes, not after. */
static int cores_held = 0;

efa_core_t *mca_common_efa_acquire(bool thread_multiple, bool need_remote_comm, int *opal_err) {
    efa_core_params_t p;
    int err = 0;
    setup_reporting();
    bool first = (NULL == efa_core_current());
    if (first) {
        mca_common_efa_mem_hooks_start(); /* before get_params asks for them */
    }
    mca_common_efa_get_params(&p, thread_multiple, need_remote_comm);
    /* Device buffers may come to the provider: it is asked for FI_HMEM. */
    p.want_hmem =
        NULL != mca_common_efa_device_ompi() &&
        ((NULL != params.hmem && 0 == strcmp(params.hmem, "on")) || mtl_hands_device_buffers());
    efa_core_t *core = efa_core_acquire(&p, &err);
    if (NULL == core) {
        if (first) {
            mca_common_efa_mem_hooks_stop();
        }
        *opal_err = mca_common_efa_fi_to_opal(err);
        return NULL;
    }
    if (first && NULL == efa_device_name()) {
        /* Open MPI's accelerator, where it has one, tells device memory
         * apart for both components (the core installed the fake
         * instead where the tests asked for it). */
        const efa_device_ops_t *accel = mca_common_efa_device_ompi();
        if (NULL != accel) {
            efa_device_install(accel);
            device_installed = true;
        }
    }
    if (first && !modex_sent) {
        const void *blob;
        size_t len;
        int rc;
        efa_core_local_blob(core, &blob, &len);
        OPAL_MODEX_SEND_STRING(rc, EFA_PMIX_GLOBAL, "common_efa", blob, len);
        if (OPAL_SUCCESS != rc) {
            efa_core_release(core);
            mca_common_efa_mem_hooks_stop();
            if (device_installed) {
                efa_device_install(NULL);
                device_installed = false;
            }
            *opal_err = mca_common_efa_modex_rc(rc);
            return NULL;
        }
        modex_sent = true;
        mca_common_efa_progress_drive(core);
    }
    ++cores_held;
    *opal_err = OPAL_SUCCESS;
    return core;
}

void mca_common_efa_release(efa_core_t *core) {
    if (NULL == core) {
        return;
    }
    efa_core_t *before = efa_core_current();
    if (0 == --cores_held) {
        mca_common_efa_progress_drive(NULL);
    }
    efa_core_release(core);
    if (before && NULL == efa_core_current()) {
        if (device_installed) {
            efa_device_install(NULL);
            device_installed = false;
        }
        mca_common_efa_progress_drive(NULL);
        mca_common_efa_mem_hooks_stop();
        /* The modex key stays published; a later acquire in this process
         * (rare: a component re-opened) reopens endpoints with new names,
         * which is why it republishes. */
        modex_sent = false;
    }
}

void mca_common_efa_say_choice(const char *prefix, const char *who, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    opal_output_verbose(1, mca_common_efa_output, "%s: %s", prefix, line);
    efa_core_t *core = efa_core_current();
    if (NULL != core) {
        efa_core_note(core, who, line);
    }
}

void mca_common_efa_report(efa_core_t *core) {
    if (NULL != core && params.core.verbose >= 1) {
        efa_core_report(core, mca_common_efa_local_rank() <= 0);
    }
}

/* ---- the node's on-node stack (efa_node.h) ---------------------------- */

bool mca_common_efa_onnode_dir_named(void) {
    return NULL != params.onnode_dir && '\0' != params.onnode_dir[0];
}

const char *mca_common_efa_onnode_dir(void) {
    if (mca_common_efa_onnode_dir_named()) {
        return params.onnode_dir;
    }
    if (0 == access("/dev/shm", W_OK)) {
        return "/dev/shm";
    }
    return opal_process_info.job_session_dir;
}

void mca_common_efa_onnode_geometry(int *slots, size_t *slot_size) {
    *slots = params.onnode_slots;
    *slot_size = params.onnode_slot_size;
}
