// efa-mpi-info: what this node offers the EFA components and what they
// would choose on it, without mpirun: libfabric's version and providers,
// the provider and NICs the components would take (with the reasons when
// none), each NIC's place in the machine, and the NIC set each of N local
// processes would get.  --topology answers the last for a recorded hwloc
// XML (another instance type) instead of this machine.
//
// The choices are the core's own functions (select_provider, filter_nics,
// select_nic_set), so what this prints is what the components do.
#include <hwloc.h>
#include <rdma/fabric.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "efa_rma.h"
#include "info_choices.hpp"
#include "info_help.hpp"
#include "info_options.hpp"
#include "info_topology.hpp"
#include "locked_memory.hpp"
#include "nic_select.hpp"
#include "provider_filter.hpp"
#include "provider_select.hpp"

namespace {

using efa::info::kRelease;
using efa::info::Options;
using efa::info::Setting;

// What was found, in the order it is printed.
struct Provider {
    std::string name;
    std::set<std::string> fabrics, domains;
};
struct Nic {
    std::string name, pci, near; // near: the hwloc object it hangs under
};
struct Share {
    int rank;
    std::string binding;
    std::vector<std::string> nics;   // the set the core chooses
    std::vector<std::string> opened; // what it opens of it: its rails
    std::string reason;
};
struct Report {
    std::string libfabric, api;
    std::string topology; // --topology's file: this machine's sections are for reference
    std::vector<Setting> settings;
    std::vector<std::pair<std::string, bool>> param_files;
    std::vector<Provider> providers;
    std::string providers_error; // why fi_getinfo listed none
    std::string asked, chosen_provider, chosen_fabric;
    std::vector<std::string> why_not; // the core's messages when nothing was chosen
    std::vector<Nic> nics;
    std::string sets_on; // "this machine" or the XML file
    std::string map_by;  // "slot" or "package" (--map-by)
    std::vector<Share> shares;
    efa::info::Choices choices;             // with the chosen provider, opened
    std::vector<std::string> open_messages; // what the core said when it did not open
};

// *error: fi_getinfo's failure (FI_PROVIDER naming nothing there, no
// provider at all), said rather than an empty list.
std::vector<Provider> list_providers(std::string *error) {
    std::map<std::string, Provider> by_name;
    std::vector<std::string> order;
    fi_info *all = nullptr;
    const int ret = fi_getinfo(efa::api_version(), nullptr, nullptr, 0, nullptr, &all);
    if (ret != 0) {
        *error = std::string("fi_getinfo failed: ") + fi_strerror(-ret) + " (" +
                 std::to_string(ret) + ")";
    } else {
        for (fi_info *i = all; i; i = i->next) {
            const std::string n = i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?";
            if (!by_name.count(n)) {
                order.push_back(n);
                by_name[n].name = n;
            }
            if (i->fabric_attr->name) {
                by_name[n].fabrics.insert(i->fabric_attr->name);
            }
            if (i->domain_attr && i->domain_attr->name) {
                by_name[n].domains.insert(i->domain_attr->name);
            }
        }
        fi_freeinfo(all);
    }
    std::vector<Provider> out;
    for (const auto &n : order) {
        out.push_back(by_name[n]);
    }
    return out;
}

std::vector<std::string> *g_messages = nullptr;
void keep_help(const char *topic, const char *a1, const char *a2, const char *a3) {
    std::string m = efa::info::help_text(topic, a1, a2, a3);
    if (m.empty()) {
        m = std::string("  ") + topic;
        for (const char *a : {a1, a2, a3}) {
            if (a && *a) {
                m += std::string(" | ") + a;
            }
        }
    }
    g_messages->push_back(m);
}
void keep_verbose(int, const char *msg) {
    g_messages->push_back(std::string("  ") + msg);
}

std::string pci_of(const fi_info *info) {
    if (!info->nic || !info->nic->bus_attr || info->nic->bus_attr->bus_type != FI_BUS_PCI) {
        return "";
    }
    const fi_pci_attr &p = info->nic->bus_attr->attr.pci;
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", p.domain_id, p.bus_id, p.device_id,
                  p.function_id);
    return buf;
}

std::string near_of(hwloc_topology_t topo, const efa::NicCandidate &c) {
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    if (!topo || std::sscanf(c.pci_bus_id.c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) {
        return "";
    }
    hwloc_obj_t o = hwloc_get_pcidev_by_busid(topo, dom, bus, dev, fn);
    o = o ? hwloc_get_non_io_ancestor_obj(topo, o) : nullptr;
    return o ? std::string(hwloc_obj_type_string(o->type)) + " L#" +
                   std::to_string(o->logical_index)
             : "";
}

// Each process's set, as the core chooses it (core.cpp's choose_nics): the
// NICs of its GPU's switch (gpu_nics.hpp), else by its binding.  visible:
// CUDA_VISIBLE_DEVICES as processes started from here would have it (this
// machine's only).  false: --gpu names no accelerator of the topology (said).
bool nic_sets(const Options &o, hwloc_topology_t topo, const std::vector<efa::NicCandidate> &cands,
              const char *visible, Report *rep) {
    // (no memory for the bitmap: every process unbound, said)
    hwloc_bitmap_t binding = hwloc_bitmap_alloc();
    auto bind = [&](int r) {
        if (o.map_by_package) {
            efa::info::bind_package(topo, r, binding);
        } else if (o.map_by_core) {
            efa::info::bind_core(topo, r, binding);
        } else {
            efa::info::bind_share(topo, r, o.local_size, binding);
        }
    };
    // Every process's binding, as the runtime gives them all (mpirun does).
    std::vector<std::string> node_bindings;
    for (int r = 0; binding && o.local_size > 1 && r < o.local_size; ++r) {
        char *text = nullptr;
        bind(r);
        hwloc_bitmap_list_asprintf(&text, binding);
        node_bindings.emplace_back(text ? text : "");
        std::free(text);
    }
    for (int r = 0; r < o.local_size; ++r) {
        char *text = nullptr;
        if (binding) {
            bind(r);
            hwloc_bitmap_list_asprintf(&text, binding);
        }
        std::string error;
        efa::NicSetDecision d =
            efa::info::process_nic_set(cands, topo, o.gpu, visible, binding, r, o.local_size,
                                       o.nics_per_proc, node_bindings, &error);
        if (!binding) {
            d.reason += "; no memory for the binding's bitmap: taken as unbound";
        }
        if (!error.empty()) {
            std::fprintf(stderr, "efa-mpi-info: %s\n", error.c_str());
            std::free(text);
            hwloc_bitmap_free(binding);
            return false;
        }
        Share s{r, text ? text : "", {}, {}, d.reason};
        std::free(text);
        for (size_t i : d.indices) {
            s.nics.push_back(cands[i].name);
        }
        // As open_core takes the set: its first kMaxRails NICs as rails,
        // the first alone where striping is off.
        const size_t opens = o.stripe_min == 0 ? 1 : EFA_MAX_RAILS;
        s.opened.assign(s.nics.begin(), s.nics.begin() + std::min(opens, s.nics.size()));
        if (s.opened.size() < s.nics.size()) {
            s.reason += o.stripe_min == 0
                            ? "; striping off (common_efa_stripe_min 0): the first opened alone"
                            : "; the first " + std::to_string(EFA_MAX_RAILS) + " opened as rails";
        }
        rep->shares.push_back(s);
    }
    hwloc_bitmap_free(binding);
    return true;
}

// ---- output ----------------------------------------------------------------

std::string json_str(const std::string &s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c >= 0x80) {
            // (names are ASCII; any other byte is shown as its Latin-1
            // character, so that the output is valid JSON whatever it holds)
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

template <typename T, typename F> std::string json_list(const T &items, F one) {
    std::string out = "[";
    for (const auto &i : items) {
        out += (out.size() > 1 ? ", " : "") + one(i);
    }
    return out + "]";
}

void print_json(const Report &r) {
    auto strs = [](const auto &v) { return json_list(v, json_str); };
    std::printf("{\"components\": %s, \"libfabric\": %s, \"api\": %s,\n",
                json_str(kRelease).c_str(), json_str(r.libfabric).c_str(), json_str(r.api).c_str());
    std::printf(" \"topology\": %s, \"param_files\": %s,\n", json_str(r.topology).c_str(),
                json_list(r.param_files, [](const std::pair<std::string, bool> &f) {
                    return "{\"path\": " + json_str(f.first) +
                           ", \"read\": " + (f.second ? "true" : "false") + "}";
                }).c_str());
    std::printf(" \"settings\": %s,\n",
                json_list(r.settings, [](const Setting &x) {
                    return "{\"name\": " + json_str(x.name) + ", \"value\": " + json_str(x.value) +
                           ", \"source\": " + json_str(x.source) +
                           ", \"overridden_by\": " + json_str(x.overridden_by) + "}";
                }).c_str());
    std::printf(" \"providers_error\": %s,\n", json_str(r.providers_error).c_str());
    std::printf(" \"providers\": %s,\n", json_list(r.providers, [&](const Provider &p) {
                                             return "{\"name\": " + json_str(p.name) +
                                                    ", \"fabrics\": " + strs(p.fabrics) +
                                                    ", \"domains\": " + strs(p.domains) + "}";
                                         }).c_str());
    std::printf(" \"asked\": %s, \"provider\": %s, \"fabric\": %s, \"why_not\": %s,\n",
                json_str(r.asked).c_str(), json_str(r.chosen_provider).c_str(),
                json_str(r.chosen_fabric).c_str(), strs(r.why_not).c_str());
    efa::info::print_json_fields(r.choices, json_str);
    std::printf(" \"not_opened\": %s, \"open_messages\": %s,\n",
                json_str(r.choices.not_opened).c_str(), strs(r.open_messages).c_str());
    std::printf(" \"nics\": %s,\n", json_list(r.nics, [](const Nic &n) {
                                        return "{\"name\": " + json_str(n.name) +
                                               ", \"pci\": " + json_str(n.pci) +
                                               ", \"near\": " + json_str(n.near) + "}";
                                    }).c_str());
    std::printf(" \"sets_on\": %s, \"map_by\": %s, \"sets\": %s}\n", json_str(r.sets_on).c_str(),
                json_str(r.map_by).c_str(),
                json_list(r.shares, [&](const Share &s) {
                    return "{\"local_rank\": " + std::to_string(s.rank) +
                           ", \"binding\": " + json_str(s.binding) + ", \"nics\": " + strs(s.nics) +
                           ", \"opened\": " + strs(s.opened) +
                           ", \"reason\": " + json_str(s.reason) + "}";
                }).c_str());
}

// Where the parameters came from: the files consulted and each value taken.
void print_settings(const Report &r) {
    std::string files;
    for (const auto &[path, read] : r.param_files) {
        files += (files.empty() ? "" : ", ") + path + (read ? "" : " (absent)");
    }
    std::printf("\nMCA parameter files, the first over the next: %s\n",
                files.empty() ? "none" : files.c_str());
    if (r.settings.empty()) {
        std::printf("parameters set: none (the components' defaults)\n");
        return;
    }
    std::printf("parameters set (the environment over the files):\n");
    for (const auto &s : r.settings) {
        std::printf("  %s = %s (from %s)%s%s%s\n", s.name.c_str(), s.value.c_str(),
                    s.source.c_str(),
                    s.overridden_by.empty() ? "" : "; not used: ", s.overridden_by.c_str(),
                    s.overridden_by.empty() ? "" : " given");
    }
}

void print_providers(const Report &r) {
    std::printf("\nproviders offered:\n");
    if (!r.providers_error.empty()) {
        std::printf("  none: %s\n", r.providers_error.c_str());
    }
    for (const auto &p : r.providers) {
        std::string d;
        for (const auto &x : p.domains) {
            d += (d.empty() ? "" : ", ") + x;
        }
        std::printf("  %-14s %zu fabric(s); domains: %s\n", p.name.c_str(), p.fabrics.size(),
                    d.c_str());
    }
}

void print_sets(const Report &r) {
    std::printf("\nNIC sets on %s, %zu process(es) bound to %s:\n", r.sets_on.c_str(),
                r.shares.size(),
                r.map_by == "package" ? "their packages in turn"
                : r.map_by == "core"  ? "a core each"
                                      : "equal shares of the cores");
    if (r.map_by == "slot") {
        // (what the sets answer is the binding: say mpirun's own default)
        std::printf("  (mpirun binds 1 or 2 processes to a core each by default, more to "
                    "their packages: --map-by core or package)\n");
    }
    auto list = [](const std::vector<std::string> &v) {
        std::string n;
        for (const auto &x : v) {
            n += (n.empty() ? "" : ", ") + x;
        }
        return n;
    };
    for (const auto &s : r.shares) {
        std::printf("  local rank %d (PUs %s): %s\n", s.rank, s.binding.c_str(),
                    list(s.opened).c_str());
        if (s.opened.size() < s.nics.size()) {
            std::printf("      its set, %zu NICs (the first opened): %s\n", s.nics.size(),
                        list(s.nics).c_str());
        }
        std::printf("      %s\n", s.reason.c_str());
    }
}

void print_text(const Report &r) {
    std::printf("ompi-efa %s; libfabric %s (API %s asked)\n", kRelease, r.libfabric.c_str(),
                r.api.c_str());
    print_settings(r);
    if (!r.topology.empty()) {
        // (the recorded instance is what was asked about: this machine's
        // provider and NICs, often none on a login node, are not its)
        std::printf("\nthis machine, for reference (the exit status is that of the NIC sets "
                    "on %s, at the end):\n",
                    r.topology.c_str());
    }
    print_providers(r);
    std::printf("\nlocked memory: %s\n", r.choices.locked_memory.c_str());
    std::printf("\ncomponents' provider (asked: %s): ", r.asked.c_str());
    if (r.chosen_provider.empty()) {
        std::printf("none\n");
        for (const auto &w : r.why_not) {
            std::printf("%s\n", w.c_str());
        }
    } else {
        std::printf("%s, fabric %s\n", r.chosen_provider.c_str(), r.chosen_fabric.c_str());
        efa::info::print_text(r.choices, r.open_messages);
    }
    if (!r.nics.empty()) {
        std::printf("\nNICs on this machine:\n");
        for (const auto &n : r.nics) {
            std::printf("  %-20s %-14s %s\n", n.name.c_str(), n.pci.empty() ? "-" : n.pci.c_str(),
                        n.near.empty() ? "(place unknown)" : n.near.c_str());
        }
    }
    if (!r.shares.empty()) {
        print_sets(r);
    }
}

// The NIC lists' mistakes, as the core would say them; nothing kept: they fit.
void check_nic_lists(const efa::NicFilter &lists, const efa::NicFilterResult &f,
                     const std::vector<efa::NicCandidate> &all) {
    std::string known;
    for (const auto &c : all) {
        known += (known.empty() ? "" : ", ") + c.name;
    }
    if (f.conflicting) {
        keep_help("conflicting-nic-lists", lists.include.c_str(), lists.exclude.c_str(), "");
    } else if (f.empty_item) {
        keep_help("empty-nic-list-item", lists.include.c_str(), lists.exclude.c_str(), "");
    } else if (!f.unmatched.empty()) {
        keep_help("unknown-nic", f.unmatched.front().c_str(), known.c_str(), "");
    } else if (f.admitted.empty()) {
        keep_help("no-nic-left", lists.exclude.c_str(), known.c_str(), "");
    }
}

// This machine's provider and NICs as the core selects them, and the
// components' choices with the core opened there; *cands: the NICs the
// lists admit.
void choose_here(const Options &o, const efa_core_params_t &p, hwloc_topology_t here, Report *r,
                 std::vector<efa::NicCandidate> *cands) {
    std::vector<std::string> &messages = *g_messages;
    efa::Reporter rep;
    rep.show_help = keep_help;
    rep.verbose = keep_verbose;
    rep.verbosity = 1;
    rep.explain = true;
    r->choices.locked_memory = efa::locked_memory_text(efa::locked_memory()); // (whatever opens)
    efa::Selection sel;
    if (efa::select_provider(p, rep, &sel) != 0) {
        r->why_not = messages;
        return;
    }
    r->chosen_provider = sel.nics[0]->fabric_attr->prov_name;
    r->chosen_fabric = sel.nics[0]->fabric_attr->name;
    // (with the NICs of other subnets, as the core filters them: a list
    // may name one, which it takes as an extra rail, not as a candidate)
    std::vector<efa::NicCandidate> all;
    for (const fi_info *i : sel.nics) {
        all.push_back({i->domain_attr->name, pci_of(i)});
    }
    for (const fi_info *i : sel.extra_nics) {
        all.push_back({i->domain_attr->name, pci_of(i)});
    }
    messages.clear(); // (what the selection said on the way)
    const efa::NicFilter lists =
        o.topology.empty() ? efa::NicFilter{o.nic_include, o.nic_exclude} : efa::NicFilter{};
    const auto f = efa::filter_nics(all, lists);
    check_nic_lists(lists, f, all);
    if (!messages.empty()) { // the NIC lists are wrong: the components would not run
        r->why_not = messages;
        r->chosen_provider.clear();
        r->chosen_fabric.clear();
        return;
    }
    for (size_t i : f.admitted) {
        if (i >= sel.nics.size()) {
            continue; // (another subnet's: a rail of the first's, not a candidate)
        }
        cands->push_back(all[i]);
        r->nics.push_back({all[i].name, all[i].pci_bus_id, near_of(here, all[i])});
    }
    r->choices = efa::info::component_choices(p, o.one_node, keep_help, keep_verbose);
    if (!r->choices.opened) {
        r->open_messages = messages;
    }
}

// The NIC sets of the recorded topology: 0; 1, it cannot be read, holds no
// EFA device, or the NIC lists do not fit its devices; 2, --gpu names no
// accelerator of it.
int recorded_sets(const Options &o, Report *r) {
    hwloc_topology_t rec = efa::info::load_topology(o.topology);
    if (!rec) {
        std::fprintf(stderr, "efa-mpi-info: cannot load the topology %s\n", o.topology.c_str());
        return 1;
    }
    const auto all = efa::info::recorded_nics(rec);
    r->sets_on = o.topology;
    r->map_by = o.map_by_package ? "package" : o.map_by_core ? "core" : "slot";
    const auto f = efa::filter_nics(all, {o.nic_include, o.nic_exclude});
    std::vector<efa::NicCandidate> recorded;
    for (size_t i : f.admitted) {
        recorded.push_back(all[i]);
    }
    int rc = 0;
    if (all.empty()) {
        std::fprintf(stderr, "efa-mpi-info: %s holds no EFA device\n", o.topology.c_str());
        rc = 1;
    } else if (f.conflicting || f.empty_item || !f.unmatched.empty() || recorded.empty()) {
        std::fprintf(stderr,
                     "efa-mpi-info: the NIC lists do not fit the EFA devices of %s "
                     "(both lists, an empty item, an unknown name%s%s, or none left)\n",
                     o.topology.c_str(), f.unmatched.empty() ? "" : ": ",
                     f.unmatched.empty() ? "" : f.unmatched.front().c_str());
        rc = 1;
    } else if (!nic_sets(o, rec, recorded, nullptr, r)) {
        rc = 2;
    }
    hwloc_topology_destroy(rec);
    return rc;
}

} // namespace

int main(int argc, char **argv) {
    const Options o = efa::info::parse_options(argc, argv);
    Report r;
    r.libfabric = efa::version_string(fi_version());
    r.api = efa::version_string(efa::api_version());
    r.topology = o.topology;
    r.settings = o.settings;
    r.param_files = o.param_files;
    r.providers = list_providers(&r.providers_error);
    efa::ProviderFilter::Status st;
    r.asked = efa::ProviderFilter::parse(o.provider, o.provider_exclude, &st).describe();

    std::vector<std::string> messages;
    g_messages = &messages;
    const efa_core_params_t p = efa::info::core_params(o);
    if (!efa::info::params_fit(o, p)) {
        return 2; // a bad parameter (said): no report
    }
    hwloc_topology_t here = efa::info::load_topology("");
    if (!here) {
        std::fprintf(stderr, "efa-mpi-info: hwloc cannot load this machine's topology: %s\n",
                     o.topology.empty() ? "the NICs' places and the NIC sets are left out"
                                        : "its NICs' places are left out");
    }
    std::vector<efa::NicCandidate> cands;
    choose_here(o, p, here, &r, &cands);

    int rc = 0;
    if (!o.topology.empty()) {
        rc = recorded_sets(o, &r);
    } else if (!cands.empty() && here) {
        r.sets_on = "this machine";
        r.map_by = o.map_by_package ? "package" : o.map_by_core ? "core" : "slot";
        if (!nic_sets(o, here, cands, std::getenv("CUDA_VISIBLE_DEVICES"), &r)) {
            rc = 2;
        }
    }
    if (here) {
        hwloc_topology_destroy(here);
    }
    if (rc == 2) {
        return rc; // a bad question (said on stderr): no report of it
    }
    if (o.json) {
        print_json(r);
    } else {
        print_text(r);
    }
    // --topology asks about the recorded instance: its answer alone.
    // Otherwise 3: the components would not run here (the reasons are
    // printed): no provider, or the core did not open on the one chosen.
    if (!o.topology.empty() || rc != 0) {
        return rc;
    }
    return (r.chosen_provider.empty() || !r.choices.opened) ? 3 : 0;
}
