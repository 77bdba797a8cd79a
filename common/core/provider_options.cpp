#include "provider_options.hpp"

#include <cstring>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "efa_build_config.h"
#ifdef HAVE_RDMA_FI_EXT_H
#include <rdma/fi_ext.h> // libfabric 2.x declares FI_OPT_EFA_* here
#endif
#ifdef HAVE_RDMA_FI_EXT_EFA_H
#include <rdma/fi_ext_efa.h> // and 1.x, where it has them, here
#endif

namespace efa {

namespace {

std::string refused(const char *opt, const std::string &what, int rc) {
    return std::string(opt) + ": " + what + " refused by the provider (" + fi_strerror(-rc) +
           "); its default is kept";
}

[[maybe_unused]] efa_rma_by_t ask_emulated(fid_ep *ep, int opt, const char *name,
                                           std::vector<std::string> *lines) {
    bool emulated = false;
    size_t len = sizeof(emulated);
    int rc = fi_getopt(&ep->fid, FI_OPT_ENDPOINT, opt, &emulated, &len);
    if (rc) {
        lines->push_back(std::string(name) + ": the provider does not say (" + fi_strerror(-rc) +
                         ")");
        return EFA_RMA_BY_UNKNOWN;
    }
    return emulated ? EFA_RMA_BY_EMULATION : EFA_RMA_BY_DEVICE;
}

} // namespace

bool parse_emulated_list(const char *list, EmulatedOverride *out, std::string *bad_item) {
    *out = EmulatedOverride{};
    std::string s = list ? list : "";
    size_t pos = 0;
    while (pos <= s.size() && !s.empty()) {
        size_t comma = s.find(',', pos);
        std::string item =
            s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (item == "read") {
            out->read = true;
        } else if (item == "write") {
            out->write = true;
        } else if (item == "atomics") {
            out->atomics = true;
        } else {
            *bad_item = item;
            return false;
        }
        if (comma == std::string::npos) {
            break;
        }
        pos = comma + 1;
    }
    return true;
}

bool provider_takes_efa_switches(const fi_info *info, const efa_core_params_t &p) {
    const char *prov = info->fabric_attr->prov_name;
    return p.force_efa_options || (prov && std::strcmp(prov, "efa") == 0);
}

void apply_switches_before_enable(fid_ep *ep, const fi_info *info, const efa_core_params_t &p,
                                  ProviderSwitches *out) {
    if (!provider_takes_efa_switches(info, p)) {
        return;
    }
    (void)ep;
    if (p.provider_shm != EFA_SWITCH_AUTO) {
        const char *want = p.provider_shm == EFA_SWITCH_ON ? "on" : "off";
#if HAVE_DECL_FI_OPT_SHARED_MEMORY_PERMITTED
        bool permitted = p.provider_shm == EFA_SWITCH_ON;
        int rc = fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_SHARED_MEMORY_PERMITTED, &permitted,
                           sizeof(permitted));
        if (rc) {
            out->lines.push_back(
                refused("FI_OPT_SHARED_MEMORY_PERMITTED", std::string("shm ") + want, rc));
        } else {
            out->provider_shm = p.provider_shm;
            out->lines.push_back(std::string("provider shm ") + want +
                                 (p.provider_shm == EFA_SWITCH_OFF
                                      ? " (our on-node path carries node-local traffic)"
                                      : " (our on-node path is off)"));
        }
#else
        out->lines.push_back(std::string("provider shm ") + want +
                             " not set: this libfabric has no FI_OPT_SHARED_MEMORY_PERMITTED");
#endif
    }
    if (p.provider_cuda_calls != EFA_SWITCH_AUTO) {
        const char *want = p.provider_cuda_calls == EFA_SWITCH_ON ? "on" : "off";
#if HAVE_DECL_FI_OPT_CUDA_API_PERMITTED
        bool permitted = p.provider_cuda_calls == EFA_SWITCH_ON;
        int rc = fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_CUDA_API_PERMITTED, &permitted,
                           sizeof(permitted));
        if (rc) {
            out->lines.push_back(refused("FI_OPT_CUDA_API_PERMITTED",
                                         std::string("provider CUDA calls ") + want, rc));
        } else {
            out->cuda_calls = p.provider_cuda_calls;
            std::string line = std::string("provider CUDA calls ") + want;
            if (p.provider_cuda_calls == EFA_SWITCH_OFF) {
                line += " (device memory reached by the NIC alone";
                // libfabric closes its shm at fi_enable on such an endpoint
                // that asked for FI_HMEM: shm would need CUDA calls.
                if (info->caps & FI_HMEM) {
                    out->provider_shm = EFA_SWITCH_OFF;
                    line += "; the provider's own shm is off with it";
                }
                line += ")";
            }
            out->lines.push_back(line);
        }
#else
        out->lines.push_back(std::string("provider CUDA calls ") + want +
                             " not set: this libfabric has no FI_OPT_CUDA_API_PERMITTED");
#endif
    }
    if (p.rnr_retry >= 0) {
#if HAVE_DECL_FI_OPT_EFA_RNR_RETRY
        size_t retry = static_cast<size_t>(p.rnr_retry);
        int rc = fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &retry, sizeof(retry));
        out->lines.push_back(rc ? refused("FI_OPT_EFA_RNR_RETRY", std::to_string(p.rnr_retry), rc)
                                : "RNR retry " + std::to_string(p.rnr_retry));
#else
        out->lines.push_back("RNR retry not set: this libfabric has no FI_OPT_EFA_RNR_RETRY");
#endif
    }
}

void read_switches_after_enable(fid_ep *ep, const fi_info *info, const efa_core_params_t &p,
                                ProviderSwitches *out) {
    (void)ep;
    if (provider_takes_efa_switches(info, p)) {
#if HAVE_DECL_FI_OPT_EFA_EMULATED_READ && HAVE_DECL_FI_OPT_EFA_EMULATED_WRITE &&                   \
    HAVE_DECL_FI_OPT_EFA_EMULATED_ATOMICS
        out->read = ask_emulated(ep, FI_OPT_EFA_EMULATED_READ, "RDMA read", &out->lines);
        out->device_read = out->read;
        out->write = ask_emulated(ep, FI_OPT_EFA_EMULATED_WRITE, "RDMA write", &out->lines);
        out->atomics = ask_emulated(ep, FI_OPT_EFA_EMULATED_ATOMICS, "atomics", &out->lines);
#else
        out->lines.push_back("device RDMA unknown: this libfabric has no FI_OPT_EFA_EMULATED_* "
                             "(libfabric 1.18 or newer tells)");
#endif
    }
    EmulatedOverride force;
    std::string bad;
    if (parse_emulated_list(p.force_emulated, &force, &bad) &&
        (force.read || force.write || force.atomics)) {
        out->read = force.read ? EFA_RMA_BY_EMULATION : out->read;
        out->write = force.write ? EFA_RMA_BY_EMULATION : out->write;
        out->atomics = force.atomics ? EFA_RMA_BY_EMULATION : out->atomics;
        out->lines.push_back(std::string("force_emulated=") + p.force_emulated +
                             ": treated as emulated by the provider");
    }
}

void merge_switches(ProviderSwitches *all, const ProviderSwitches &other,
                    const std::string &where) {
    auto name = [](int sw) {
        return sw == EFA_SWITCH_ON ? "on" : sw == EFA_SWITCH_OFF ? "off" : "untouched";
    };
    if (all->cuda_calls != other.cuda_calls) {
        all->lines.push_back(where + ": provider CUDA calls " + name(other.cuda_calls) +
                             " where the first endpoint has them " + name(all->cuda_calls) +
                             ": device memory is handled as if the provider may call CUDA");
        all->cuda_calls = EFA_SWITCH_AUTO;
    }
    if (all->provider_shm != other.provider_shm) {
        all->lines.push_back(where + ": provider shm " + name(other.provider_shm) +
                             " where the first endpoint has it " + name(all->provider_shm));
        all->provider_shm = EFA_SWITCH_AUTO;
    }
    if (other.device_read == EFA_RMA_BY_EMULATION) {
        all->device_read = EFA_RMA_BY_EMULATION;
    }
}

bool cuda_calls_off_without_read(const ProviderSwitches &sw) {
    // The card's answer, not force_emulated's: a forced read still leaves
    // the provider a device read for its eager copies.
    return sw.cuda_calls == EFA_SWITCH_OFF && sw.device_read == EFA_RMA_BY_EMULATION;
}

} // namespace efa
