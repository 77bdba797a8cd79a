// efa-mpi-info: the components' choices with the opened core (info_choices.hpp).
#include "info_choices.hpp"

#include <cstdio>
#include <fstream>

#include <sys/statvfs.h>
#include <unistd.h>

#include "efa_cma.h"
#include "locked_memory.hpp"

namespace efa::info {

namespace {

const char *by_name(efa_rma_by_t by) {
    return by == EFA_RMA_BY_DEVICE      ? "device"
           : by == EFA_RMA_BY_EMULATION ? "emulation"
                                        : "not said";
}

// btl_efa's rma_mode auto (btl_efa_component.c, choose_one_sided): the
// provider's RMA only where the device does it, not where the provider
// emulates it (ours costs the target's CPU as much, in one round trip).
std::string rma_path(bool has_rma, efa_rma_by_t by) {
    if (!has_rma) {
        return "emulated (the provider did not grant FI_RMA)";
    }
    if (by == EFA_RMA_BY_EMULATION) {
        return "emulated (the provider would emulate it too)";
    }
    return "native (the provider's RMA)";
}

// Where the on-node inbox files would go: the glue's default directory.
std::string onnode_channel() {
    struct statvfs st {};
    if (statvfs("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0) {
        return "shared-memory rings in /dev/shm (" +
               std::to_string(st.f_bavail * st.f_frsize >> 20) + " MiB free)";
    }
    return "shared-memory rings in the job's session directory (/dev/shm is not writable)";
}

std::string single_copy() {
    if (!efa_cma_built()) {
        return "none: built without process_vm_readv; large on-node messages stream "
               "through the rings";
    }
    std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
    int scope = -1;
    if (f >> scope && scope >= 2) {
        return "none: Yama's ptrace_scope is " + std::to_string(scope) +
               " (/proc/sys/kernel/yama/ptrace_scope); large on-node messages stream "
               "through the rings";
    }
    return std::string("cross-memory attach (process_vm_readv/writev) between processes of "
                       "one user") +
           (scope == 1 ? "; Yama's ptrace_scope 1: each process lets the processes of its "
                         "user read it (PR_SET_PTRACER_ANY, as Open MPI's shared-memory "
                         "transport does)"
                       : "");
}

} // namespace

Choices component_choices(const efa_core_params_t &p, bool one_node,
                          efa_core_show_help_fn show_help, efa_core_verbose_fn verbose) {
    Choices c;
    c.striping_off = 0 == p.stripe_min;
    c.onnode = onnode_channel();
    c.single_copy = single_copy();
    c.locked_memory = locked_memory_text(locked_memory());
    efa_core_set_reporters(show_help, verbose);
    int err = 0;
    efa_core_t *core = efa_core_acquire(&p, &err);
    if (!core) {
        c.not_opened = "efa_core_acquire failed (" + std::to_string(err) + ")";
        return c;
    }
    const efa_core_info_t *in = efa_core_get_info(core);
    c.opened = true;
    c.tagged = in->has_tagged;
    c.rma = in->has_rma;
    c.atomics = in->has_atomic;
    c.mr_local = in->mr_local;
    c.write_by = by_name(in->rma_write_by);
    c.read_by = by_name(in->rma_read_by);
    c.atomics_by = by_name(in->atomics_by);
    c.inject = in->inject_size;
    c.max_msg = in->max_msg_size;
    c.cq_data = in->cq_data_size;
    c.rails = in->num_nics;
    c.stripe_min = in->stripe_min;
    // common_efa_hmem (common_efa_glue.c): asked for where device buffers
    // would go to the provider.
    c.hmem = in->hmem ? "granted: device buffers go to the provider as they are"
             : efa_core_offers_hmem(core)
                 ? std::string(in->provider) +
                       " offers FI_HMEM: on a node with a GPU, device buffers would go to it as "
                       "they are with mtl_efa_device_buffers own (btl_efa's also with "
                       "common_efa_hmem on)"
                 : std::string(in->provider) +
                       " does not offer FI_HMEM: device buffers are copied through the host";
    // common_efa_dmabuf (FiMrBackend): what libfabric lets it do.
    c.dmabuf = !p.dmabuf ? "by device address (common_efa_dmabuf off)"
               : efa_core_dmabuf_in_libfabric()
                   ? "through the allocation's dmabuf first (FI_MR_DMABUF), by device address "
                     "where the device exports none"
                   : "by device address (FI_MR_DMABUF needs libfabric 1.20 or later, built with "
                     "and run)";
    // common_efa_hmem_vmm (efa_core_hmem_vmm_allowed) as the environment
    // sets it, with what the endpoint took of common_efa_provider_cuda_calls.
    const char *vmm_why = "";
    const bool vmm_on = efa_core_hmem_vmm_allowed(p.hmem_vmm, in->fabric, in->provider_cuda_calls,
                                                  in->lib_version, &vmm_why);
    c.vmm =
        std::string(vmm_on ? "to the provider with other device memory (" : "through the host (") +
        vmm_why + ")";

    // mtl_efa_matching auto (mtl_efa_own.c).
    switch (efa_core_auto_matching(in->provider, in->has_tagged, in->node_rails)) {
    case EFA_AUTO_MATCH_NO_TAGS:
        c.matching = "own";
        c.matching_why = "the provider has no tags";
        break;
    case EFA_AUTO_MATCH_MEASURED:
        c.matching = "own";
        c.matching_why =
            "measured at 3x the provider's message rate on " + std::string(in->provider);
        break;
    case EFA_AUTO_MATCH_RAILS:
        c.matching = "own";
        c.matching_why = "the node offers " + std::to_string(in->node_rails) +
                         " rails: own matching spreads messages over them and fails over from a "
                         "lost one; the provider's tagged messages keep the first NIC";
        break;
    case EFA_AUTO_MATCH_PROVIDER:
        c.matching = "provider";
        c.matching_why = "one rail, and own matching is not measured on " +
                         std::string(in->provider) + " yet (mtl_efa_matching own tries it)";
        break;
    }

    // btl_efa_rma_mode and _atomic_mode auto (btl_efa_component.c).
    c.put = rma_path(in->has_rma, in->rma_write_by);
    c.get = rma_path(in->has_rma, in->rma_read_by);
    char why[160] = "";
    if (!efa_core_atomics_usable(core, why, sizeof(why))) {
        c.atomic_ops = std::string("emulated (") + why + ")";
    } else if (in->atomics_by == EFA_RMA_BY_EMULATION) {
        c.atomic_ops = "emulated (the provider emulates atomics: the device has none)";
    } else if (one_node) {
        c.atomic_ops = "emulated (every peer on this node: the on-node channel carries them)";
    } else {
        c.atomic_ops = "native (the provider's atomics)";
    }
    efa_core_release(core);
    return c;
}

void print_text(const Choices &c, const std::vector<std::string> &open_messages) {
    if (!c.opened) {
        std::printf("\nthe core did not open on it: %s\n", c.not_opened.c_str());
        for (const auto &m : open_messages) {
            std::printf("%s\n", m.c_str());
        }
        return;
    }
    auto yn = [](bool b) { return b ? "yes" : "no"; };
    std::printf("\ngranted on the first NIC's endpoint: tags %s, RMA %s (write by %s, read by "
                "%s), atomics %s (by %s), FI_MR_LOCAL %s, inject %zu B, max message %zu B, CQ "
                "data %zu B\n",
                yn(c.tagged), yn(c.rma), c.write_by.c_str(), c.read_by.c_str(), yn(c.atomics),
                c.atomics_by.c_str(), yn(c.mr_local), c.inject, c.max_msg, c.cq_data);
    std::printf("\nwhat the components' defaults choose:\n"
                "  mtl_efa matching:   %s (%s)\n"
                "  btl_efa put:        %s\n"
                "  btl_efa get:        %s\n"
                "  btl_efa atomics:    %s\n"
                "  on-node channel:    %s\n"
                "  single copy:        %s\n"
                "  FI_HMEM:            %s\n"
                "  device registrations: %s\n"
                "  CUDA VMM, pool memory: %s\n",
                c.matching.c_str(), c.matching_why.c_str(), c.put.c_str(), c.get.c_str(),
                c.atomic_ops.c_str(), c.onnode.c_str(), c.single_copy.c_str(), c.hmem.c_str(),
                c.dmabuf.c_str(), c.vmm.c_str());
    if (c.rails > 1) {
        std::printf("  rails:              %d NICs of the first process's set; put, get and "
                    "messages from %zu bytes striped over them; below, peers on other nodes "
                    "take the NICs in turn (provider-matched messages: the first)\n",
                    c.rails, c.stripe_min);
    } else if (c.striping_off) {
        std::printf("  rails:              one NIC (striping off: common_efa_stripe_min 0 keeps "
                    "everything on the first of the set)\n");
    } else {
        std::printf("  rails:              one NIC (the set of the first process has one)\n");
    }
}

void print_json_fields(const Choices &c, std::string (*json_str)(const std::string &)) {
    std::printf(" \"locked_memory\": %s,", json_str(c.locked_memory).c_str());
    std::printf(" \"opened\": %s, \"granted\": {\"tagged\": %s, \"rma\": %s, \"write_by\": %s, "
                "\"read_by\": %s, \"atomics\": %s, \"atomics_by\": %s, \"mr_local\": %s, "
                "\"inject\": %zu, \"max_msg\": %zu},\n",
                c.opened ? "true" : "false", c.tagged ? "true" : "false", c.rma ? "true" : "false",
                json_str(c.write_by).c_str(), json_str(c.read_by).c_str(),
                c.atomics ? "true" : "false", json_str(c.atomics_by).c_str(),
                c.mr_local ? "true" : "false", c.inject, c.max_msg);
    std::printf(" \"choices\": {\"matching\": %s, \"matching_why\": %s, \"put\": %s, "
                "\"get\": %s, \"atomics\": %s, \"onnode\": %s, \"single_copy\": %s, "
                "\"rails\": %d, \"stripe_min\": %zu, \"hmem\": %s, \"dmabuf\": %s, \"vmm\": %s},\n",
                json_str(c.matching).c_str(), json_str(c.matching_why).c_str(),
                json_str(c.put).c_str(), json_str(c.get).c_str(), json_str(c.atomic_ops).c_str(),
                json_str(c.onnode).c_str(), json_str(c.single_copy).c_str(), c.rails, c.stripe_min,
                json_str(c.hmem).c_str(), json_str(c.dmabuf).c_str(), json_str(c.vmm).c_str());
}

} // namespace efa::info
