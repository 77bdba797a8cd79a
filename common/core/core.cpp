// Opening and closing the core, the modex blob and the peer table.
#include "core.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>

#include <sys/mman.h>

#include <hwloc.h>
#include <rdma/fi_errno.h>

#include "efa_core_msg.h"
#include "efa_rma.h"
#include "efa_params.hpp"
#include "gpu_nics.hpp"
#include "nic_select.hpp"
#include "path_counts.hpp"
#include "peer_blob.hpp"
#include "release_gate.hpp"

namespace efa {

static_assert(kMaxRails == EFA_MAX_RAILS && kMrMaxRails == EFA_MAX_RAILS &&
                  sizeof(efa_peer_t::rail_nic) == EFA_MAX_RAILS,
              "one limit of rails");

namespace {

std::mutex g_core_lock;
efa_core *g_core = nullptr;
efa::ReleaseGate<efa::MrCache> g_release_gate; // the memory hook's way to g_core's cache
efa_core_counters_t g_retired{};               // the counts of released cores (under g_core_lock)
efa_core_show_help_fn g_show_help = nullptr;
efa_core_verbose_fn g_verbose = nullptr;

Reporter make_reporter(const efa_core_params_t &p, bool explain) {
    Reporter r;
    r.show_help = g_show_help;
    r.verbose = g_verbose;
    r.verbosity = p.verbose;
    r.explain = explain;
    return r;
}

std::string pci_bus_id(const fi_info *info) {
    if (!info->nic || !info->nic->bus_attr || info->nic->bus_attr->bus_type != FI_BUS_PCI) {
        return "";
    }
    const fi_pci_attr &pci = info->nic->bus_attr->attr.pci;
    char buf[32];
    snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", pci.domain_id, pci.bus_id, pci.device_id,
             pci.function_id);
    return buf;
}

// The NICs this process may use (nic_include / nic_exclude), as candidates
// and their indices in sel.nics; false, said, when the lists are wrong.
bool admitted_nics(const Selection &sel, const efa_core_params_t &p, const Reporter &rep,
                   std::vector<NicCandidate> *cands, std::vector<size_t> *where,
                   std::vector<const fi_info *> *extras) {
    std::vector<NicCandidate> all;
    std::string known;
    std::vector<const fi_info *> infos(sel.nics.begin(), sel.nics.end());
    infos.insert(infos.end(), sel.extra_nics.begin(), sel.extra_nics.end());
    for (const fi_info *i : infos) {
        all.push_back({i->domain_attr->name, pci_bus_id(i)});
        known += (known.empty() ? "" : ", ") + all.back().name;
    }
    const NicFilter filter{p.nic_include ? p.nic_include : "", p.nic_exclude ? p.nic_exclude : ""};
    const NicFilterResult r = filter_nics(all, filter);
    if (r.conflicting) {
        rep.help("conflicting-nic-lists", filter.include, filter.exclude);
        return false;
    }
    if (r.empty_item) {
        rep.help("empty-nic-list-item", filter.include, filter.exclude);
        return false;
    }
    if (!r.unmatched.empty()) {
        // A mistyped exclude would keep the NIC it meant to leave out.
        rep.help("unknown-nic", r.unmatched.front(), known);
        return false;
    }
    if (r.admitted.empty()) {
        rep.help("no-nic-left", filter.exclude, known);
        return false;
    }
    for (size_t i : r.admitted) {
        if (i < sel.nics.size()) {
            cands->push_back(all[i]);
            where->push_back(i);
        } else {
            extras->push_back(infos[i]);
        }
    }
    if (cands->empty()) { // every admitted NIC on another subnet than the first
        rep.help("nic-not-on-first-fabric",
                 filter.include.empty() ? filter.exclude : filter.include,
                 sel.nics[0]->fabric_attr->name, known);
        return false;
    }
    return true;
}

// The process's NIC set (select_nic_set, by hwloc locality), as indices in
// sel.nics; the first is the NIC the process opens.  Empty: the NIC lists
// are wrong (said).  *admitted: how many NICs of the first NIC's fabric the
// lists admit (the node's, whatever the process's share).
std::vector<size_t> choose_nics(const Selection &sel, const efa_core_params_t &p,
                                const Reporter &rep, std::string *why,
                                std::vector<const fi_info *> *extras, size_t *admitted) {
    std::vector<NicCandidate> cands;
    std::vector<size_t> where;
    if (!admitted_nics(sel, p, rep, &cands, &where, extras)) {
        return {};
    }
    *admitted = cands.size();
    if (cands.size() == 1) {
        // (nothing is chosen by GPU, but a GPU the setting names must
        // exist all the same: this node must not take what one refuses)
        const std::string gpu_error = named_gpu_error(p.gpu);
        if (!gpu_error.empty()) {
            rep.help("unknown-gpu", gpu_error);
            return {};
        }
        *why = sel.nics.size() == 1 ? "the only NIC offered" : "the only NIC admitted";
        return where;
    }
    hwloc_topology_t topo = nullptr;
    const bool inited = hwloc_topology_init(&topo) == 0;
    NicSetDecision d;
    if (inited && hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) == 0 &&
        hwloc_topology_load(topo) == 0) {
        hwloc_bitmap_t binding = hwloc_bitmap_alloc();
        // (no memory for the bitmap: as unbound, said)
        bool bound = binding && hwloc_get_cpubind(topo, binding, HWLOC_CPUBIND_PROCESS) == 0;
        // A process that uses one GPU takes the NICs of its switch
        // (gpu_nics.hpp); otherwise, or where none is near it, its binding
        // decides.
        std::vector<std::string> node_bindings;
        for (int i = 0; p.node_cpusets && i < p.num_node_cpusets; ++i) {
            node_bindings.emplace_back(p.node_cpusets[i] ? p.node_cpusets[i] : "");
        }
        const GpuChoice gpu =
            choose_gpu(topo, p.gpu ? p.gpu : "auto", getenv("CUDA_VISIBLE_DEVICES"), p.local_rank,
                       p.local_size, bound ? binding : nullptr, node_bindings);
        if (!gpu.error.empty()) {
            rep.help("unknown-gpu", gpu.error);
            hwloc_bitmap_free(binding);
            hwloc_topology_destroy(topo);
            return {};
        }
        if (!gpu.bus_id.empty()) {
            d = select_gpu_nic_set(cands, topo, gpu, p.local_rank, p.nics_per_proc);
        }
        if (d.indices.empty()) {
            // (why the GPU decides nothing: none known, none near it, or
            // every NIC as near it)
            const std::string no_gpu = gpu.bus_id.empty() ? gpu.reason : d.reason;
            d = select_nic_set(cands, topo, bound ? binding : nullptr, p.local_rank, p.local_size,
                               p.nics_per_proc, node_bindings);
            d.reason += "; " + no_gpu;
        }
        if (!binding) {
            d.reason += "; no memory for the binding's bitmap: taken as unbound";
        }
        hwloc_bitmap_free(binding);
    } else {
        d = select_nic_set(cands, nullptr, nullptr, p.local_rank, p.local_size, p.nics_per_proc);
        d.reason = std::string(inited ? "hwloc could not load the topology: "
                                      : "hwloc could not start a topology: ") +
                   d.reason;
    }
    if (inited) {
        hwloc_topology_destroy(topo);
    }
    std::vector<size_t> chosen;
    for (size_t i : d.indices) {
        chosen.push_back(where[i]);
    }
    *why = d.reason;
    if (chosen.size() > static_cast<size_t>(kMaxRails)) {
        *why += "; the first " + std::to_string(kMaxRails) + " opened as rails";
    }
    return chosen;
}

// The stand-ins mishandle truncation (see efa_ctx): each context gets an overflow area,
// large, as untouched pages cost nothing (efa reports truncation rightly and gets none).
constexpr size_t kOverflowBytes = 4u << 20;

void open_overflow_areas(efa_core *core) {
    const fi_info *ni = core->nic->info();
    if (std::string(ni->fabric_attr->prov_name).rfind("efa", 0) == 0 ||
        ni->rx_attr->iov_limit < 2) {
        return;
    }
    for (int i = 0; i < core->nic->num_contexts(); ++i) {
        void *base = mmap(nullptr, kOverflowBytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED) {
            return; // not fatal: truncation is then the provider's to handle
        }
        MrRegistration reg;
        if (core->selection.mr_local &&
            core->mr_backend->reg(base, kOverflowBytes, FI_RECV, &reg) != 0) {
            munmap(base, kOverflowBytes);
            return;
        }
        core->overflow_areas.push_back({base, kOverflowBytes, reg});
        efa_ctx *ctx = core->nic->ctx(i);
        ctx->overflow_buf = base;
        ctx->overflow_len = kOverflowBytes;
        ctx->overflow_desc = reg.desc;
    }
}

void close_overflow_areas(efa_core *core) {
    for (auto &a : core->overflow_areas) {
        core->mr_backend->dereg(a.reg);
        munmap(a.base, a.len);
    }
    core->overflow_areas.clear();
}

int open_core(efa_core *core) {
    int err = select_provider(core->params, core->rep, &core->selection);
    if (err) {
        return err;
    }
    std::vector<const fi_info *> extras;
    size_t admitted = 0;
    const std::vector<size_t> nic_set = choose_nics(core->selection, core->params, core->rep,
                                                    &core->nic_reason, &extras, &admitted);
    if (nic_set.empty()) {
        return -FI_EINVAL; // the NIC lists (said)
    }
    core->node_rails = node_rails(admitted, extras.size(), core->params.nics_per_proc,
                                  core->params.stripe_min > 0, kMaxRails);
    // The rails: the set after its first NIC, then the stand-ins' other
    // subnets; none where striping is off (they would carry nothing).
    std::vector<const fi_info *> rail_infos;
    for (size_t k = 1; k < nic_set.size(); ++k) {
        rail_infos.push_back(core->selection.nics[nic_set[k]]);
    }
    rail_infos.insert(rail_infos.end(), extras.begin(), extras.end());
    if (rail_infos.size() + 1 > static_cast<size_t>(kMaxRails)) {
        rail_infos.resize(kMaxRails - 1);
    }
    if (core->params.stripe_min == 0) {
        core->rails_off = static_cast<int>(rail_infos.size()); // (said in the report)
        rail_infos.clear();
    }
    const fi_info *info = core->selection.nics[nic_set.front()];
    core->rep.say(10, "NIC " + std::string(info->domain_attr->name) + ": " + core->nic_reason);
    core->nic = Nic::open(info, core->params, core, core->rep, &err);
    if (!core->nic) {
        return err;
    }
    const fi_info *ni = core->nic->info();
    bool cq_data = ni->domain_attr->cq_data_size >= 4 && !core->params.force_no_cq_data;
    core->layout = cq_data ? EFA_TAG_LAYOUT_WITH_CQ_DATA : EFA_TAG_LAYOUT_WITHOUT_CQ_DATA;
    if (core->params.thread_multiple) { // the path counts then add atomically, for good
        efa::counts::g_shared.store(true, std::memory_order_relaxed);
    }
    for (int i = 0; i < core->nic->num_contexts(); ++i) {
        core->nic->ctx(i)->use_cq_data = cq_data;
        core->nic->ctx(i)->mt = core->params.thread_multiple;
        core->nic->ctx(i)->source = core->selection.source;
    }
    std::vector<fid_ep *> bind_eps;
    if (ni->domain_attr->mr_mode & FI_MR_ENDPOINT) {
        for (int i = 0; i < core->nic->num_contexts(); ++i) {
            bind_eps.push_back(core->nic->ctx(i)->ep);
        }
    }
    std::vector<FiMrBackend::Domain> domains{{core->nic->domain(), std::move(bind_eps)}};
    open_rails(core, rail_infos, &domains);
    core->switches = core->nic->switches();
    for (size_t r = 0; r < core->rails.size(); ++r) {
        merge_switches(&core->switches, core->rails[r]->switches(),
                       "rail " + std::to_string(r + 1) + " (NIC " +
                           core->rails[r]->info()->domain_attr->name + ")");
    }
    std::vector<FiMrBackend::Domain> device_domains = domains;
    core->mr_backend = std::make_unique<FiMrBackend>(std::move(domains), core->selection.mr_local);
    core->mr_backend->say_close_failures_to(&core->rep);
    core->mr_cache = std::make_unique<MrCache>(*core->mr_backend, mr_cache_config(core->params));
    if (core->selection.hmem) {
        // Device allocations, registered whole and exactly (align 1); a
        // freed one is found by its id (efa_core_mr_acquire_device), as
        // the memory hooks do not see a device's free.
        core->dev_mr_backend = std::make_unique<FiMrBackend>(
            std::move(device_domains), core->selection.mr_local, *core->mr_backend);
        core->dev_mr_backend->say_close_failures_to(&core->rep);
        MrCacheConfig dc = mr_cache_config(core->params);
        dc.reuse = true;
        dc.align = 1;
        core->dev_mr_cache = std::make_unique<MrCache>(*core->dev_mr_backend, dc);
        if (core->params.dmabuf && dmabuf_in_api(core->selection.api_version)) {
            core->dev_mr_backend->use_dmabuf(&core->rep);
        }
        core->dev_vmm_ok =
            efa_core_hmem_vmm_allowed(core->params.hmem_vmm, ni->fabric_attr->name,
                                      core->switches.cuda_calls, fi_version(), &core->dev_vmm_why);
    }
    core->progress_batch = core->params.progress_batch;
    core->net_interval_ns = static_cast<uint64_t>(core->params.net_poll_interval_us) * 1000;
    core->net_interval_max_ns = std::max(
        core->net_interval_ns, static_cast<uint64_t>(core->params.net_poll_interval_max_us) * 1000);
    core->net_wait_ns.store(core->net_interval_ns, std::memory_order_relaxed);
    open_overflow_areas(core);

    efa_core_info_t &in = core->info;
    in.provider = ni->fabric_attr->prov_name;
    in.fabric = ni->fabric_attr->name;
    in.domain = ni->domain_attr->name;
    in.nic_reason = core->nic_reason.c_str();
    in.num_nics = 1 + static_cast<int>(core->rails.size());
    in.node_rails = core->node_rails;
    in.stripe_min = core->rails.empty() ? 0 : static_cast<size_t>(core->params.stripe_min);
    in.rail_failover = core->params.rail_failover;
    in.num_contexts = core->nic->num_contexts();
    in.inject_size = ni->tx_attr->inject_size;
    in.tx_iov_limit = ni->tx_attr->iov_limit;
    in.max_msg_size = ni->ep_attr->max_msg_size;
    if (core->params.force_direct_mode) {
        // efa-direct takes no message larger than the device's MTU.
        in.max_msg_size = direct_max_msg_size(ni, core->params.direct_mode_mtu);
    }
    // No inject larger than a message may be (the forced MTU included).
    if (in.max_msg_size && in.inject_size > in.max_msg_size) {
        in.inject_size = in.max_msg_size;
    }
    in.cq_data_size = cq_data ? ni->domain_attr->cq_data_size : 0;
    in.max_rma_size = ni->ep_attr->max_msg_size;
    in.has_rma = (ni->caps & FI_RMA) != 0;
    in.has_atomic = (ni->caps & FI_ATOMIC) != 0;
    in.mr_local = core->selection.mr_local;
    in.has_tagged = (ni->caps & FI_TAGGED) != 0 && !core->params.force_direct_mode;
    in.ordered =
        !core->params.force_direct_mode && (ni->tx_attr->msg_order & FI_ORDER_SAS) == FI_ORDER_SAS;
    in.swaps_messages = core->params.debug_swap_messages || core->params.force_direct_mode;
    in.mr_virt_addr = (ni->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
    in.mr_prov_key = (ni->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
    in.mr_endpoint = (ni->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0;
    in.tag_layout = core->layout;
    in.has_source = core->selection.source;
    in.hmem = core->selection.hmem;
    if ((err = efa_core_msg_open(core))) {
        return err;
    }
    std::vector<uint8_t> names = core->nic->names();
    for (const auto &rail : core->rails) {
        names.insert(names.end(), rail->names().begin(), rail->names().end());
    }
    core->blob =
        make_peer_blob(static_cast<uint16_t>(core->nic->num_contexts()),
                       static_cast<uint16_t>(core->nic->addr_len()), names, core->fabric_ids);
    deadline_open(core);               // after the blob: the probes carry its hash
    if (int rc = control_open(core)) { // the same: withdraw requests and notes carry it
        return rc;
    }
    in.api_version = core->selection.api_version;
    in.lib_version = fi_version();
    const ProviderSwitches &sw = core->switches;
    in.rma_read_by = sw.read;
    in.rma_write_by = sw.write;
    in.atomics_by = sw.atomics;
    in.provider_shm = sw.provider_shm;
    in.provider_cuda_calls = sw.cuda_calls;
    for (const auto &line : sw.lines) {
        core->rep.say(10, "efa switches: " + line);
    }
    // (once a node: every process would say the same of the same device)
    if (cuda_calls_off_without_read(sw) && core->selection.hmem && core->params.local_rank == 0) {
        core->rep.help("provider-cuda-calls-without-read", in.domain);
    }
    core->report.add_core_lines(*core);
    return 0;
}

// What an open core holds, closed in the order the provider needs: also
// what a failed open_core leaves (each step skips what was never opened).
void close_core(efa_core *core) {
    for (auto &kv : core->peers) {
        free(kv.second.peer);
    }
    core->peers.clear();
    core->peer_index.clear();
    core->addr_owner.clear();
    core->peers_by_probe_id.clear();
    efa_core_msg_close(core);
    close_overflow_areas(core);
    close_rail_endpoints(core);
    core->dev_mr_cache.reset(); // deregisters before the domain closes
    core->dev_mr_backend.reset();
    if (g_core == core) {
        g_release_gate.detach(); // a free() in another thread may be in the cache now
    }
    core->mr_cache.reset();
    core->mr_backend.reset();
    core->rails.clear();
    if (core->rail_lost_any[0].load(std::memory_order_relaxed)) {
        // The first NIC lost a peer and the job went on (core_rail0.cpp):
        // left for the exit like such a rail (close_rail_endpoints).
        keep_for_exit(core->nic.release()); // intentionally not closed
    } else {
        core->nic.reset();
    }
    efa_core_msg_free(core); // receive buffers the provider kept: safe once the endpoints are gone
    deadline_close(core);
    control_close(core);
}

} // namespace
} // namespace efa

using namespace efa;

extern "C" {

void efa_core_set_reporters(efa_core_show_help_fn show_help, efa_core_verbose_fn verbose) {
    g_show_help = show_help;
    g_verbose = verbose;
}

int efa_core_probe(const efa_core_params_t *params, bool explain) {
    Selection sel;
    return select_provider(*params, make_reporter(*params, explain), &sel);
}

efa_core_t *efa_core_acquire(const efa_core_params_t *params, int *err) {
    std::lock_guard<std::mutex> guard(g_core_lock);
    if (g_core) {
        ++g_core->refcount;
        return g_core;
    }
    auto core = std::make_unique<efa_core>();
    core->include_str = params->provider_include ? params->provider_include : "";
    core->exclude_str = params->provider_exclude ? params->provider_exclude : "";
    core->params = *params;
    core->params.provider_include = core->include_str.c_str();
    core->params.provider_exclude = core->exclude_str.c_str();
    core->nic_include_str = params->nic_include ? params->nic_include : "";
    core->nic_exclude_str = params->nic_exclude ? params->nic_exclude : "";
    core->params.nic_include = core->nic_include_str.c_str();
    core->params.nic_exclude = core->nic_exclude_str.c_str();
    core->gpu_str = params->gpu ? params->gpu : "auto";
    core->params.gpu = core->gpu_str.c_str();
    core->rep = make_reporter(core->params, true);
    int rc = open_core(core.get());
    if (rc) {
        close_core(core.get()); // the receive buffers it posted, its probes and notes
        *err = rc;
        return nullptr;
    }
    core->refcount = 1;
    if (core->params.debug_fake_device) {
        install_fake_device(core.get());
    }
    g_core = core.release();
    g_release_gate.attach(g_core->mr_cache.get());
    return g_core;
}

void efa_core_release(efa_core_t *core) {
    std::lock_guard<std::mutex> guard(g_core_lock);
    if (!core || --core->refcount > 0) {
        return;
    }
    efa_core_counters_t last;
    efa_core_get_counters(core, &last);
    g_retired.completions += last.completions;
    g_retired.posts_deferred += last.posts_deferred;
    g_retired.mr_hits += last.mr_hits;
    g_retired.mr_misses += last.mr_misses;
    g_retired.mr_evictions += last.mr_evictions;
    g_retired.peers_lost += last.peers_lost;
    g_retired.rails_lost += last.rails_lost;
    uint64_t completions = 0;
    for (int i = 0; i < core->nic->num_contexts(); ++i) {
        efa_ctx *c = core->nic->ctx(i);
        uint64_t n = c->tx_backlog.deferred.load() + c->rx_backlog.deferred.load() +
                     c->rx_internal_backlog.deferred.load();
        if (n) {
            core->rep.say(10, "context " + std::to_string(i) + ": " + std::to_string(n) +
                                  " posts waited for provider queue space");
        }
        completions += c->completions.load(std::memory_order_relaxed);
    }
    core->rep.say(1, std::string("provider ") + core->nic->info()->fabric_attr->prov_name + ": " +
                         std::to_string(completions) + " completions read over " +
                         std::to_string(core->nic->num_contexts()) + " endpoint(s)");
    // Each other rail's share (read by the test harness; an idle rail shows 0).
    for (size_t r = 0; r < core->rails.size(); ++r) {
        uint64_t n = 0;
        for (int i = 0; i < core->rails[r]->num_contexts(); ++i) {
            n += core->rails[r]->ctx(i)->completions.load(std::memory_order_relaxed);
        }
        const auto bytes = efa::counts::rail_rma(static_cast<int>(r) + 1) + 1;
        core->rep.say(1, "rail " + std::to_string(r + 1) + " (" +
                             core->rails[r]->info()->domain_attr->name + "): " + std::to_string(n) +
                             " completions, " +
                             std::to_string(efa::counts::get(static_cast<efa::counts::Id>(bytes))) +
                             " bytes of puts and gets");
    }
    // Losses of a NIC, this process's and its peers' (each dropped every
    // registration: core_rails.cpp; read by tests/netns/failover.sh).
    const uint64_t lost = core->rails_lost.load(std::memory_order_relaxed);
    const uint64_t told = efa::counts::get(efa::counts::kRailOutNotices);
    if (lost || told) {
        core->rep.say(1,
                      "NICs taken out for a peer: " + std::to_string(lost) + " here, " +
                          std::to_string(told) +
                          " by a peer that told this process (every registration dropped at each)");
    }
    close_core(core);
    if (g_core == core) {
        g_core = nullptr;
    }
    if (core->params.debug_fake_device) {
        uninstall_fake_device();
    }
    delete core;
}

void efa_core_note(efa_core_t *core, const char *who, const char *text) {
    core->report.note(who, text);
}

void efa_core_report(efa_core_t *core, bool node_leader) {
    core->report.say_once(core->rep, node_leader);
}

void efa_core_get_current_counters(efa_core_counters_t *out) {
    std::lock_guard<std::mutex> guard(g_core_lock);
    efa_core_get_counters(g_core, out);
    out->completions += g_retired.completions;
    out->posts_deferred += g_retired.posts_deferred;
    out->mr_hits += g_retired.mr_hits;
    out->mr_misses += g_retired.mr_misses;
    out->mr_evictions += g_retired.mr_evictions;
    out->peers_lost += g_retired.peers_lost;
    out->rails_lost += g_retired.rails_lost;
    efa::read_path_counts(out);
}

efa_core_t *efa_core_current(void) {
    return g_core;
}

const efa_core_info_t *efa_core_get_info(const efa_core_t *core) {
    return &core->info;
}

int efa_core_local_blob(efa_core_t *core, const void **blob, size_t *len) {
    *blob = core->blob.data();
    *len = core->blob.size();
    return 0;
}

efa_ctx_t *efa_core_ctx(efa_core_t *core, int index) {
    return core->nic->ctx(index % core->nic->num_contexts());
}

efa_ctx_t *efa_core_rail_ctx(efa_core_t *core, int rail, int index) {
    Nic *nic = rail <= 0 || rail > static_cast<int>(core->rails.size())
                   ? core->nic.get()
                   : core->rails[static_cast<size_t>(rail) - 1].get();
    return nic->ctx(index % nic->num_contexts());
}

int efa_ctx_rail(const efa_ctx_t *ctx) {
    return ctx->rail;
}

int efa_ctx_index(const efa_ctx_t *ctx) {
    return ctx->index;
}

void efa_core_mem_release(void *addr, size_t len) {
    g_release_gate.invalidate(addr, len); // hooks fire from free(): no lock here
}

} // extern "C"
