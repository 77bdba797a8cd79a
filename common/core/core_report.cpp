#include "core_report.hpp"

#include "core.hpp"

namespace efa {

std::string mr_mode_string(uint64_t mode) {
    static const std::pair<uint64_t, const char *> bits[] = {
        {FI_MR_LOCAL, "FI_MR_LOCAL"},         {FI_MR_VIRT_ADDR, "FI_MR_VIRT_ADDR"},
        {FI_MR_ALLOCATED, "FI_MR_ALLOCATED"}, {FI_MR_PROV_KEY, "FI_MR_PROV_KEY"},
        {FI_MR_ENDPOINT, "FI_MR_ENDPOINT"},   {FI_MR_RAW, "FI_MR_RAW"},
        {FI_MR_HMEM, "FI_MR_HMEM"},
    };
    std::string out;
    for (const auto &b : bits) {
        if (mode & b.first) {
            out += (out.empty() ? "" : "|") + std::string(b.second);
        }
    }
    return out.empty() ? "none" : out;
}

const char *rma_by_string(efa_rma_by_t by) {
    switch (by) {
    case EFA_RMA_BY_DEVICE:
        return "by the device";
    case EFA_RMA_BY_EMULATION:
        return "emulated by the provider";
    default:
        return "not reported";
    }
}

void CoreReport::add_core_lines(const efa_core &core) {
    const efa_core_info_t &in = core.info;
    const fi_info *ni = core.nic->info();
    std::lock_guard<std::mutex> guard(lock_);
    node_lines_.clear();
    node_lines_.push_back("libfabric " + version_string(in.lib_version) + " (API " +
                          version_string(in.api_version) + " asked), provider " + in.provider +
                          ", fabric " + in.fabric + ", " + std::to_string(in.num_contexts) +
                          " endpoint(s) per NIC");
    node_lines_.push_back(
        "MR mode " + mr_mode_string(ni->domain_attr->mr_mode) +
        (in.mr_local && !(ni->domain_attr->mr_mode & FI_MR_LOCAL) ? " (FI_MR_LOCAL forced)" : "") +
        "; RDMA read " + rma_by_string(in.rma_read_by) + ", write " +
        rma_by_string(in.rma_write_by) + ", atomics " + rma_by_string(in.atomics_by) +
        "; provider shm " +
        (in.provider_shm == EFA_SWITCH_ON    ? "on"
         : in.provider_shm == EFA_SWITCH_OFF ? "off"
                                             : "left to the provider"));
    if (core.params.force_direct_mode || !in.has_tagged) {
        node_lines_.push_back(
            std::string(core.params.force_direct_mode ? "direct mode forced (force_direct_mode)"
                                                      : "direct mode (the provider has no tags)") +
            ": untagged messages of at most " + std::to_string(in.max_msg_size) +
            " bytes, no tag matching" + (in.ordered ? "" : " and no message order") +
            " asked of the provider");
    }
    if (in.swaps_messages) {
        node_lines_.push_back("untagged messages handed on in swapped pairs on arrival (a test "
                              "setting: nothing may rely on the provider's order)");
    }
    // Said even where nothing registers (no FI_MR_LOCAL, no native RMA):
    // the same job on EFA does, and this is where it would look.
    if (core.mr_cache->reuses()) {
        node_lines_.push_back("registration cache: up to " +
                              std::to_string(core.params.mr_cache_size) +
                              " idle registrations kept, dropped when the memory hooks report "
                              "their memory released");
    } else {
        node_lines_.push_back(
            "registration cache: off, every registration is dropped when its last user releases "
            "it: Open MPI reports no memory hooks (no memory component, as with --mca memory "
            "^patcher, or a static binary), "
            "so memory freed and mapped again could meet its old registration");
    }
    const bool device_may_come = core.params.want_hmem || (core.params.debug_fake_device &&
                                                           core.params.debug_fake_device_hmem);
    if (in.hmem) {
        node_lines_.push_back("device buffers: the provider moves them itself (FI_HMEM): each "
                              "allocation registered whole with its interface and device, kept "
                              "until the device says it was freed");
        node_lines_.push_back(
            core.dev_mr_backend && core.dev_mr_backend->dmabuf()
                ? "device registrations: through the allocation's dmabuf first "
                  "(FI_MR_DMABUF), its device address where the device exports none"
            : !core.params.dmabuf ? "device registrations: by device address (common_efa_dmabuf "
                                    "false)"
                                  : "device registrations: by device address (dmabuf needs "
                                    "libfabric 1.20 or later, built with and run)");
        node_lines_.push_back(
            std::string("device memory without synchronous memory operations "
                        "(CUDA VMM, pool memory): ") +
            (core.dev_vmm_ok ? "handed to the provider too (" : "copied through the host (") +
            core.dev_vmm_why + ")");
    } else if (device_may_come) {
        node_lines_.push_back(core.params.hmem
                                  ? "device buffers: FI_HMEM asked for, not granted by the "
                                    "provider: copied through the host"
                                  : "device buffers: FI_HMEM not asked for (common_efa_hmem "
                                    "off): copied through the host");
    }
    if (core.params.net_poll_interval_us == 0) {
        node_lines_.push_back("provider polled on every progress call (net_poll_interval 0)");
    } else {
        node_lines_.push_back(
            "provider polled on every progress call while operations are in flight on it, a "
            "peer reaches this process through it only, it had completions in the last "
            "millisecond, or a peer of this node rang the doorbell; otherwise every " +
            std::to_string(core.params.net_poll_interval_us) + " us (net_poll_interval), " +
            (core.net_interval_max_ns > core.net_interval_ns
                 ? "doubling while it stays quiet up to " +
                       std::to_string(core.net_interval_max_ns / 1000) +
                       " us (net_poll_interval_max)"
                 : std::string("fixed (net_poll_interval_max not above it)")));
    }
    node_lines_.push_back(
        in.has_source
            ? "sender check: on, the provider reports each message's source (FI_SOURCE); a "
              "message whose named sender is another process is dropped, one from an address "
              "not in the address vector is taken unchecked (said if it happens)"
            : std::string("sender check: off, provider ") + in.provider +
                  (source_unreliable(in.provider)
                       ? std::string(": ") + source_unreliable(in.provider)
                       : std::string(" does not report message sources (FI_SOURCE not granted)")) +
                  ": the sender a message names is believed");
    for (const auto &line : core.switches.lines) {
        node_lines_.push_back("efa switch: " + line);
    }
    rank_line_ = "local rank " + std::to_string(core.params.local_rank) + ": NIC " + in.domain +
                 " (" + in.nic_reason + ")";
    if (!core.rails.empty()) {
        std::string names = in.domain;
        for (const auto &rail : core.rails) {
            names += std::string(", ") + rail->info()->domain_attr->name;
        }
        rank_line_ += "; " + std::to_string(core.rails.size() + 1) + " rails: " + names +
                      (core.params.stripe_min == 0
                           ? std::string(" (striping off: stripe_min 0; everything on the first)")
                           : " (one-sided transfers and messages of at least " +
                                 std::to_string(core.params.stripe_min) +
                                 " bytes striped over them, smaller ones spread over them by "
                                 "peer but provider-matched ones, on the first)");
    } else if (core.rails_off > 0) {
        rank_line_ += "; " + std::to_string(core.rails_off) +
                      " more NIC(s) left unused (striping off: common_efa_stripe_min 0 keeps "
                      "everything on the first)";
    }
}

std::string note_topic(const std::string &text) {
    // A lead is short and plain: "matching", not "(mtl_efa_matching provider".
    constexpr size_t kLeadMax = 48;
    const size_t at = text.find(": ");
    if (at == std::string::npos || at > kLeadMax || text.find('(') < at) {
        return text;
    }
    return text.substr(0, at);
}

void CoreReport::note(const std::string &who, const std::string &text) {
    std::string topic = note_topic(text);
    std::lock_guard<std::mutex> guard(lock_);
    for (auto &n : notes_) {
        if (n.who == who && n.topic == topic) {
            n.text = text;
            return;
        }
    }
    notes_.push_back(Note{who, std::move(topic), text});
}

void CoreReport::say_once(const Reporter &rep, bool node_leader) {
    std::lock_guard<std::mutex> guard(lock_);
    if (said_) {
        return;
    }
    said_ = true;
    if (node_leader) {
        for (const auto &line : node_lines_) {
            rep.say(1, "report: " + line);
        }
        for (const auto &n : notes_) {
            rep.say(1, "report: " + n.who + ": " + n.text);
        }
    }
    rep.say(1, "report: " + rank_line_);
}

} // namespace efa
