#include "provider_select.hpp"

#include <algorithm>
#include <cstring>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "efa_params.hpp"

namespace efa {

void Reporter::help(const char *topic, const std::string &a1, const std::string &a2,
                    const std::string &a3) const {
    if (explain && show_help) {
        show_help(topic, a1.c_str(), a2.c_str(), a3.c_str());
    } else {
        say(1, std::string(topic) + ": " + a1 + " " + a2 + " " + a3);
    }
}

void Reporter::say(int level, const std::string &msg) const {
    if (verbose && level <= verbosity) {
        verbose(level, msg.c_str());
    }
}

namespace {

std::string join(const std::vector<std::string> &v) {
    std::string out;
    for (const auto &s : v) {
        out += (out.empty() ? "" : ", ") + s;
    }
    return out.empty() ? "(none)" : out;
}

} // namespace

InfoPtr make_hints(const efa_core_params_t &p, uint64_t caps, bool mr_local, bool hmem) {
    InfoPtr hints(fi_allocinfo());
    if (!hints) {
        return hints;
    }
    hints->caps = caps;
    if (p.need_remote_comm) {
        hints->caps |= FI_LOCAL_COMM | FI_REMOTE_COMM;
    }
    // We always hand libfabric a fi_context2 per operation.
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    // The direct mode never writes with remote CQ data, so it can take
    // efa-direct's FI_RX_CQ_DATA mode, without which efa-direct offers no
    // FI_RMA on a device that lacks unsolicited write receives.
    if (p.force_direct_mode) {
        hints->mode |= FI_RX_CQ_DATA;
    }
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->threading = p.thread_multiple ? FI_THREAD_SAFE : FI_THREAD_DOMAIN;
    hints->domain_attr->av_type = FI_AV_TABLE; // the only kind efa has
    // Every mode bit the core can honour: virtual or offset addresses and
    // provider or core keys are carried in the registration handles, and
    // FI_MR_ENDPOINT registrations are bound and enabled (FiMrBackend).
    hints->domain_attr->mr_mode =
        FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    if (mr_local) {
        hints->domain_attr->mr_mode |= FI_MR_LOCAL;
    }
    // Device buffers the provider moves itself: registered with their
    // interface (FiMrBackend), which FI_MR_HMEM says it may require.
    if (hmem) {
        hints->caps |= FI_HMEM;
        hints->domain_attr->mr_mode |= FI_MR_HMEM;
    }
    // MPI's non-overtaking rule needs send-after-send order when the
    // provider matches tags; the direct mode (efa-direct has no ordering)
    // asks for none (no order bits; libfabric 2.x deprecates the name
    // FI_ORDER_NONE for that 0) and relies on the engine's sequence numbers.
    const uint64_t order = p.force_direct_mode ? 0 : FI_ORDER_SAS;
    hints->tx_attr->msg_order = order;
    hints->rx_attr->msg_order = order;
    if (p.tx_size > 0) {
        hints->tx_attr->size = static_cast<size_t>(p.tx_size);
    }
    if (p.rx_size > 0) {
        hints->rx_attr->size = static_cast<size_t>(p.rx_size);
    }
    return hints;
}

uint32_t api_version() {
    return negotiate_api_version(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), fi_version());
}

uint32_t negotiate_api_version(uint32_t header, uint32_t library) {
    uint32_t v = std::min(header, library);
    return v < kMinApiVersion ? kMinApiVersion : v;
}

std::string version_string(uint32_t v) {
    return std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v));
}

bool prefer_fabric(const fi_info *info, bool direct_mode, std::string *why) {
    const char *prov = info->fabric_attr->prov_name;
    const char *fabric = info->fabric_attr->name;
    if (!direct_mode && prov && fabric && std::strcmp(prov, "efa") == 0 &&
        std::strcmp(fabric, "efa-direct") == 0) {
        *why = "fabric efa-direct skipped: the components use the efa fabric (tag matching, "
               "ordering and segmentation in the provider); force_direct_mode admits it";
        return false;
    }
    return true;
}

bool is_loopback(const fi_info *info) {
    if (info->src_addr && info->addr_format == FI_SOCKADDR_IN &&
        info->src_addrlen >= sizeof(sockaddr_in)) {
        const auto *sin = static_cast<const sockaddr_in *>(info->src_addr);
        return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
    }
    if (info->src_addr && info->addr_format == FI_SOCKADDR_IN6 &&
        info->src_addrlen >= sizeof(sockaddr_in6)) {
        const auto *sin6 = static_cast<const sockaddr_in6 *>(info->src_addr);
        return IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr);
    }
    return info->domain_attr && info->domain_attr->name &&
           strcmp(info->domain_attr->name, "lo") == 0;
}

bool named_in(const char *list, const char *name) {
    const std::string l = list ? list : "";
    const std::string n = name ? name : "";
    size_t pos = 0;
    while (!n.empty() && pos <= l.size()) {
        const size_t end = std::min(l.find(',', pos), l.size());
        std::string item = l.substr(pos, end - pos);
        item.erase(0, item.find_first_not_of(" \t"));
        item.erase(item.find_last_not_of(" \t") + 1);
        // the domain name, or the device name before its "-" (as the NIC
        // lists take them)
        if (!item.empty() && (item == n || n.rfind(item + "-", 0) == 0)) {
            return true;
        }
        pos = end + 1;
    }
    return false;
}

const char *source_unreliable(const char *prov_name) {
    if (prov_name && std::strstr(prov_name, "ofi_rxd")) {
        return "ofi_rxd reports its own index of the sending peer as the source, not the "
               "address vector entry";
    }
    return nullptr;
}

std::vector<std::string> known_provider_names() {
    std::vector<std::string> names;
    fi_info *all = nullptr;
    if (fi_getinfo(api_version(), nullptr, nullptr, 0, nullptr, &all) == 0) {
        for (fi_info *i = all; i; i = i->next) {
            std::string n = i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "";
            if (!n.empty() && std::find(names.begin(), names.end(), n) == names.end()) {
                names.push_back(n);
            }
        }
        fi_freeinfo(all);
    }
    return names;
}

int select_provider(const efa_core_params_t &params, const Reporter &rep, Selection *out) {
    // Bad numbers first: they are always the user's doing, so always shown.
    Reporter always = rep;
    always.explain = true;
    auto problems = validate_params(params);
    for (const auto &pb : problems) {
        always.help("bad-param", pb.name, pb.value, pb.allowed);
    }
    if (!problems.empty()) {
        return -FI_EINVAL;
    }

    ProviderFilter::Status st;
    ProviderFilter filter =
        ProviderFilter::parse(params.provider_include ? params.provider_include : "",
                              params.provider_exclude ? params.provider_exclude : "", &st);
    if (st == ProviderFilter::Status::kConflict) {
        always.help("conflicting-lists", params.provider_include, params.provider_exclude);
        return -FI_EINVAL;
    }
    if (st == ProviderFilter::Status::kEmptyItem) {
        always.help("empty-list-item", params.provider_include ? params.provider_include : "",
                    params.provider_exclude ? params.provider_exclude : "");
        return -FI_EINVAL;
    }
    bool explicit_include = params.provider_include && *params.provider_include;
    auto known = known_provider_names();
    if (explicit_include) {
        for (const auto &item : filter.unknown_items(known)) {
            always.help("unknown-provider", item, join(known));
            return -FI_EINVAL;
        }
    }
    for (const auto &item : filter.unknown_excluded(known)) {
        always.help("unknown-excluded-provider", item, join(known));
        return -FI_EINVAL;
    }

    // Richest capability set first; atomics or RMA missing (tcp;ofi_rxm has
    // no FI_ATOMIC) is fine: the BTL emulates them with messages.
    // The direct mode asks for what efa-direct offers: untagged messages
    // and RMA, no tags.
    const uint64_t base =
        params.force_direct_mode ? FI_MSG : (FI_TAGGED | FI_MSG | FI_DIRECTED_RECV);
    // efa-direct has no atomics either: the direct mode leaves them to
    // btl_efa's emulation.
    const uint64_t richest = params.force_direct_mode ? base | FI_RMA : base | FI_RMA | FI_ATOMIC;
    const uint64_t tries[] = {richest, base | FI_RMA, base};
    std::string skipped_fabric; // said at verbose 1 when a selection skipped one
    const bool mr_local_first = params.force_mr_local || params.force_direct_mode;
    // FI_SOURCE (receives say which AV entry sent them: claimed senders
    // are checked, efa_core_source_ok) is a secondary capability, which a
    // provider that lacks it refuses outright: asked for with each
    // capability set first, then that set without it.
    // FI_HMEM (the provider moves device buffers itself), where device
    // buffers may come, is asked for with every set first: a GPU job's
    // device buffers uncopied are worth more than native atomics, which
    // btl_efa emulates (shm grants FI_HMEM without FI_ATOMIC).  A provider
    // without FI_HMEM refuses it outright.
    struct Try {
        uint64_t caps;
        bool source;
        bool hmem;
    };
    const bool fake_hmem = params.debug_fake_device && params.debug_fake_device_hmem;
    const bool want_hmem = params.hmem && (params.want_hmem || fake_hmem);
    std::vector<Try> with_source;
    for (bool hmem : {true, false}) {
        for (uint64_t caps : tries) {
            if (hmem && !want_hmem) {
                continue;
            }
            with_source.push_back({caps, true, hmem});
            with_source.push_back({caps, false, hmem});
        }
    }
    for (bool mr_local : {mr_local_first, true}) {
        for (const Try &t : with_source) {
            const uint64_t caps = t.caps;
            InfoPtr hints =
                make_hints(params, t.source ? caps | FI_SOURCE : caps, mr_local, t.hmem);
            if (!hints) {
                return -FI_ENOMEM;
            }
            fi_info *list = nullptr;
            int rc = fi_getinfo(api_version(), nullptr, nullptr, 0, hints.get(), &list);
            if (rc != 0 || !list) {
                continue;
            }
            InfoPtr owned(list);
            std::vector<fi_info *> nics, extra;
            const char *fabric = nullptr;
            fi_info *loopback = nullptr; // the first one skipped
            for (fi_info *i = list; i; i = i->next) {
                const char *prov = i->fabric_attr->prov_name;
                if (!prov || !filter.admits(prov)) {
                    continue;
                }
                std::string why;
                if (!prefer_fabric(i, params.force_direct_mode, &why)) {
                    rep.say(10, why);
                    skipped_fabric = why;
                    continue;
                }
                // NICs of the first one's provider and address format
                // only: the stand-ins offer each interface once per address
                // family (a fabric per subnet), and ranks must agree on one
                // family.
                if (!nics.empty() && (strcmp(nics[0]->fabric_attr->prov_name, prov) != 0 ||
                                      nics[0]->addr_format != i->addr_format)) {
                    continue;
                }
                // A loopback interface reaches this host alone: its address
                // in another host's vector would name that host.  Only a
                // NIC list that names it takes it (tests on one host), or a
                // host that has no other; one the exclude list names goes
                // on below (listed, so that the list finds the name).
                const bool listed = params.nic_include && *params.nic_include;
                const bool named = named_in(params.nic_include, i->domain_attr->name);
                // An excluded NIC chooses no fabric; it stays listed, so
                // that the NIC lists find the name they refuse.
                const bool excluded = named_in(params.nic_exclude, i->domain_attr->name);
                if (is_loopback(i) && !named && !excluded) {
                    if (!loopback) {
                        loopback = i;
                    }
                    continue;
                }
                const auto same_domain = [&](fi_info *n) {
                    return strcmp(n->domain_attr->name, i->domain_attr->name) == 0;
                };
                if (std::any_of(nics.begin(), nics.end(), same_domain) ||
                    std::any_of(extra.begin(), extra.end(), same_domain)) {
                    continue;
                }
                // The set's NICs share one fabric, the first NIC's (of the
                // NIC list where there is one), as every process's first
                // NIC must.  On the stand-ins (a fabric per subnet) a NIC
                // the list names on another subnet is an extra rail
                // (paired by fabric, peer_blob.hpp); without a list there
                // are none.
                if (!fabric && (!listed || named) && !excluded) {
                    fabric = i->fabric_attr->name;
                }
                if (!fabric || strcmp(fabric, i->fabric_attr->name) == 0) {
                    nics.push_back(i);
                } else if ((named || excluded) && (i->addr_format == FI_SOCKADDR_IN ||
                                                   i->addr_format == FI_SOCKADDR_IN6)) {
                    extra.push_back(i);
                }
            }
            if (nics.empty() && loopback) {
                nics.push_back(loopback);
            }
            if (nics.empty()) {
                continue;
            }
            out->list = std::move(owned);
            out->nics = std::move(nics);
            out->extra_nics = std::move(extra);
            out->caps = caps;
            out->source = t.source && (out->nics[0]->caps & FI_SOURCE) != 0 &&
                          !source_unreliable(out->nics[0]->fabric_attr->prov_name);
            out->mr_local = mr_local || (out->nics[0]->domain_attr->mr_mode & FI_MR_LOCAL);
            out->hmem = t.hmem && (out->nics[0]->caps & FI_HMEM) != 0;
            out->api_version = api_version();
            if (!skipped_fabric.empty()) {
                rep.say(1, skipped_fabric);
            }
            rep.say(10, std::string("selected provider ") + out->nics[0]->fabric_attr->prov_name +
                            " fabric " + out->nics[0]->fabric_attr->name + " with " +
                            std::to_string(out->nics.size()) + " NIC(s)");
            return 0;
        }
    }
    std::vector<std::string> admitted;
    for (const auto &k : known) {
        if (filter.admits(k)) {
            admitted.push_back(k);
        }
    }
    if ((params.tx_size > 0 || params.rx_size > 0) && !admitted.empty()) {
        // Queue sizes beyond what the provider takes fail every try, which
        // would read as a provider without what the components need.
        efa_core_params_t plain = params;
        plain.tx_size = plain.rx_size = 0;
        Reporter quiet = rep;
        quiet.explain = false;
        Selection sized;
        if (0 == select_provider(plain, quiet, &sized)) {
            const fi_info *i = sized.nics[0];
            always.help("queue-size-above-provider",
                        "tx_size " + std::to_string(params.tx_size) + ", rx_size " +
                            std::to_string(params.rx_size),
                        i->fabric_attr->prov_name,
                        std::to_string(i->tx_attr->size) + " sends, " +
                            std::to_string(i->rx_attr->size) + " receives");
            return -FI_EINVAL;
        }
    }
    if (!explicit_include && admitted.empty()) {
        // The default case on a machine without EFA: say it plainly.
        rep.help("no-efa-device", join(known));
    } else {
        rep.help("no-provider-matched", filter.describe(), join(admitted),
                 params.need_remote_comm ? "yes" : "no");
    }
    return -FI_ENODATA;
}

size_t direct_max_msg_size(const fi_info *ni, int direct_mode_mtu) {
    size_t mtu = direct_mode_mtu > 0 ? static_cast<size_t>(direct_mode_mtu)
                                     : static_cast<size_t>(ParamLimits::kDefaultDirectMtu);
    if (ni->ep_attr && ni->ep_attr->max_msg_size) {
        mtu = std::min(mtu, ni->ep_attr->max_msg_size);
    }
    // efa-direct's max_msg_size is its RDMA limit once it grants FI_RMA;
    // its link MTU is the device's.
    if (ni->fabric_attr && ni->fabric_attr->name &&
        std::strcmp(ni->fabric_attr->name, "efa-direct") == 0 && ni->nic && ni->nic->link_attr &&
        ni->nic->link_attr->mtu > 0) {
        mtu = std::min(mtu, ni->nic->link_attr->mtu);
    }
    return mtu;
}

} // namespace efa

// mtl_efa_matching auto.  Own matching was measured to pay on tcp;ofi_rxm
// and udp;ofi_rxd (docs/PERFORMANCE.md, "Own matching in mtl_efa": about
// 3x the provider's message rate at 8 B, window 64, latency no worse at
// 1 B); both match tags in software.  So does efa, where nothing was
// measured on EFA hardware yet: there own matching is chosen where the
// node offers several rails, as its messages spread over them and fail
// over from a lost one, while the provider's tagged messages stay on the
// first NIC (whose loss is then the peer's).  A provider that matches in
// hardware and has one rail keeps its own matching.
extern "C" efa_auto_match_t efa_core_auto_matching(const char *provider, bool has_tagged,
                                                   int node_rails) {
    static const char *const measured[] = {"tcp;ofi_rxm", "udp;ofi_rxd"};
    if (!has_tagged) {
        return EFA_AUTO_MATCH_NO_TAGS;
    }
    for (const char *m : measured) {
        if (provider && std::strcmp(provider, m) == 0) {
            return EFA_AUTO_MATCH_MEASURED;
        }
    }
    return node_rails > 1 ? EFA_AUTO_MATCH_RAILS : EFA_AUTO_MATCH_PROVIDER;
}
