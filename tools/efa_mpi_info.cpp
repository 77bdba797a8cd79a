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

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "efa_params.hpp"
#include "info_choices.hpp"
#include "info_help.hpp"
#include "info_topology.hpp"
#include "nic_select.hpp"
#include "provider_select.hpp"

namespace {

struct Options {
    std::string provider;         // as common_efa_provider_include; empty: efa
    std::string provider_exclude; // as common_efa_provider_exclude
    std::string nic_include;      // as common_efa_nic_include
    std::string nic_exclude;
    int local_size = 1;
    int nics_per_proc = 0;    // as common_efa_nics_per_proc; 0: the whole share
    std::string gpu = "auto"; // as common_efa_gpu
    int stripe_min = 262144;  // as common_efa_stripe_min (the glue's default)
    std::string topology;     // hwloc XML; empty: this machine
    bool one_node = false;    // a job within this node: FI_REMOTE_COMM not needed
    bool direct_mode = false; // as common_efa_force_direct_mode
    // The environment's common_efa_hmem_vmm and _provider_cuda_calls
    // (EFA_SWITCH_*): where CUDA VMM memory goes depends on both.
    int hmem_vmm = EFA_SWITCH_AUTO;
    int provider_cuda_calls = EFA_SWITCH_AUTO;
    bool force_efa_options = false; // as common_efa_force_efa_options (the stand-ins)
    bool dmabuf = true;             // as common_efa_dmabuf (default on)
    bool json = false;
};

// The components' release this command was built with (configure's AC_INIT).
#ifndef EFA_RELEASE_MAJOR
#error "EFA_RELEASE_MAJOR is not defined: configure passes it (EFA_RELEASE_CPPFLAGS)"
#endif
#define EFA_STR2(x) #x
#define EFA_STR(x) EFA_STR2(x)
constexpr const char *kRelease =
    EFA_STR(EFA_RELEASE_MAJOR) "." EFA_STR(EFA_RELEASE_MINOR) "." EFA_STR(EFA_RELEASE_PATCH);

[[noreturn]] void usage(int code) {
    std::fprintf(
        code ? stderr : stdout,
        "usage: efa-mpi-info [--provider LIST | --provider-exclude LIST] [--direct-mode]\n"
        "                    [--nic-include LIST | --nic-exclude LIST]\n"
        "                    [--local-size N] [--nics-per-proc N] [--gpu GPU]\n"
        "                    [--topology FILE.xml]\n"
        "                    [--one-node] [--json]\n"
        "       efa-mpi-info --version\n"
        "  --provider, --provider-exclude, --direct-mode, --nic-include, --nic-exclude\n"
        "                 as common_efa_provider_include / _exclude, _force_direct_mode,\n"
        "                 _nic_include / _exclude (default: their OMPI_MCA_ variables, by\n"
        "                 their common_efa_, mtl_efa_ or btl_efa_ names; else efa)\n"
        "  --local-size   processes per node for the NIC sets (1 to 1024, default 1),\n"
        "                 each bound to an equal share of the cores\n"
        "  --nics-per-proc  as common_efa_nics_per_proc: at most N NICs in each set\n"
        "                 (0 to 64; default its OMPI_MCA_ variable, else 0: the whole share)\n"
        "  --gpu          as common_efa_gpu: auto (process r of N takes accelerator r\n"
        "                 where N is their number), none, an index or a PCI address;\n"
        "                 a process with a GPU takes the NICs of its PCIe switch\n"
        "  --topology     the NIC sets on this hwloc XML and its EFA devices instead\n"
        "                 (the NIC lists then apply to its devices, not this machine's)\n"
        "  --one-node     for a job within this node (default: one spanning nodes, which\n"
        "                 needs FI_REMOTE_COMM: shm does not qualify)\n"
        "  --json         one JSON object instead of text\n"
        "Also read from the environment as the components read them: common_efa_\n"
        "stripe_min, hmem_vmm, provider_cuda_calls and force_efa_options.\n"
        "Exit status: 0, the components would run here; 3, they would not (the\n"
        "reasons are printed); 1, the topology cannot be read; 2, bad arguments.\n");
    std::exit(code);
}

// A parameter of the environment as the components read it: its
// common_efa_ name, or the mtl_efa_ or btl_efa_ synonym.
std::string env_param(const char *name) {
    for (const char *prefix : {"OMPI_MCA_common_efa_", "OMPI_MCA_mtl_efa_", "OMPI_MCA_btl_efa_"}) {
        const char *v = std::getenv((std::string(prefix) + name).c_str());
        if (v && *v) {
            return v;
        }
    }
    return "";
}

bool env_true(const char *name) {
    const std::string v = env_param(name);
    return v == "1" || v == "true" || v == "yes" || v == "on";
}

Options parse(int argc, char **argv) {
    Options o;
    o.provider = env_param("provider_include");
    o.provider_exclude = env_param("provider_exclude");
    o.nic_include = env_param("nic_include");
    o.nic_exclude = env_param("nic_exclude");
    o.direct_mode = env_true("force_direct_mode");
    auto number = [](const std::string &opt, const std::string &v, long lo, long hi) {
        char *end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || n < lo || n > hi) {
            std::fprintf(stderr, "efa-mpi-info: %s must be %ld to %ld, not '%s'\n", opt.c_str(), lo,
                         hi, v.c_str());
            usage(2);
        }
        return static_cast<int>(n);
    };
    // auto, on or off, as the glue's table allows; anything else is an error
    auto switch_value = [](const char *name, const std::string &v) {
        if (v.empty() || v == "auto") {
            return int(EFA_SWITCH_AUTO);
        }
        if (v == "on") {
            return int(EFA_SWITCH_ON);
        }
        if (v == "off") {
            return int(EFA_SWITCH_OFF);
        }
        std::fprintf(stderr, "efa-mpi-info: common_efa_%s must be auto, on or off, not '%s'\n",
                     name, v.c_str());
        usage(2);
    };
    o.hmem_vmm = switch_value("hmem_vmm", env_param("hmem_vmm"));
    o.provider_cuda_calls = switch_value("provider_cuda_calls", env_param("provider_cuda_calls"));
    o.force_efa_options = env_true("force_efa_options");
    if (const std::string v = env_param("dmabuf"); !v.empty()) {
        o.dmabuf = env_true("dmabuf");
    }
    bool nics_given = false, gpu_given = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "efa-mpi-info: %s needs a value\n", a.c_str());
                usage(2);
            }
            return argv[++i];
        };
        if (a == "--provider") {
            o.provider = value();
        } else if (a == "--provider-exclude") {
            o.provider_exclude = value();
        } else if (a == "--direct-mode") {
            o.direct_mode = true;
        } else if (a == "--nic-include") {
            o.nic_include = value();
        } else if (a == "--nic-exclude") {
            o.nic_exclude = value();
        } else if (a == "--local-size") {
            o.local_size = number(a, value(), 1, 1024);
        } else if (a == "--nics-per-proc") {
            o.nics_per_proc = number(a, value(), 0, efa::ParamLimits::kMaxNicsPerProc);
            nics_given = true;
        } else if (a == "--gpu") {
            o.gpu = value();
            gpu_given = true;
        } else if (a == "--topology") {
            o.topology = value();
        } else if (a == "--json") {
            o.json = true;
        } else if (a == "--one-node") {
            o.one_node = true;
        } else if (a == "--version") {
            std::printf("efa-mpi-info (ompi-efa) %s\n", kRelease);
            std::exit(0);
        } else if (a == "--help" || a == "-h") {
            usage(0);
        } else {
            std::fprintf(stderr, "efa-mpi-info: unknown argument '%s'\n", a.c_str());
            usage(2);
        }
    }
    // The environment's value only where the option did not say (and only
    // then is a bad one an error).
    if (const std::string v = env_param("gpu"); !gpu_given && !v.empty()) {
        o.gpu = v;
    }
    if (const std::string v = env_param("nics_per_proc"); !nics_given && !v.empty()) {
        o.nics_per_proc = number("nics_per_proc", v, 0, efa::ParamLimits::kMaxNicsPerProc);
    }
    if (const std::string v = env_param("stripe_min"); !v.empty()) {
        o.stripe_min = number("stripe_min", v, 0, efa::ParamLimits::kMaxStripe);
    }
    return o;
}

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
    std::vector<std::string> nics;
    std::string reason;
};
struct Report {
    std::string libfabric, api;
    std::vector<Provider> providers;
    std::string asked, chosen_provider, chosen_fabric;
    std::vector<std::string> why_not; // the core's messages when nothing was chosen
    std::vector<Nic> nics;
    std::string sets_on; // "this machine" or the XML file
    std::vector<Share> shares;
    efa::info::Choices choices;             // with the chosen provider, opened
    std::vector<std::string> open_messages; // what the core said when it did not open
};

std::vector<Provider> list_providers() {
    std::map<std::string, Provider> by_name;
    std::vector<std::string> order;
    fi_info *all = nullptr;
    if (fi_getinfo(efa::api_version(), nullptr, nullptr, 0, nullptr, &all) == 0) {
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
    hwloc_bitmap_t binding = hwloc_bitmap_alloc();
    for (int r = 0; r < o.local_size; ++r) {
        efa::info::bind_share(topo, r, o.local_size, binding);
        char *text = nullptr;
        hwloc_bitmap_list_asprintf(&text, binding);
        std::string error;
        const efa::NicSetDecision d = efa::info::process_nic_set(
            cands, topo, o.gpu, visible, binding, r, o.local_size, o.nics_per_proc, &error);
        if (!error.empty()) {
            std::fprintf(stderr, "efa-mpi-info: %s\n", error.c_str());
            std::free(text);
            hwloc_bitmap_free(binding);
            return false;
        }
        Share s{r, text ? text : "", {}, d.reason};
        std::free(text);
        for (size_t i : d.indices) {
            s.nics.push_back(cands[i].name);
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
    std::printf(" \"providers\": %s,\n", json_list(r.providers, [&](const Provider &p) {
                                             return "{\"name\": " + json_str(p.name) +
                                                    ", \"fabrics\": " + strs(p.fabrics) +
                                                    ", \"domains\": " + strs(p.domains) + "}";
                                         }).c_str());
    std::printf(" \"asked\": %s, \"provider\": %s, \"fabric\": %s, \"why_not\": %s,\n",
                json_str(r.asked).c_str(), json_str(r.chosen_provider).c_str(),
                json_str(r.chosen_fabric).c_str(), strs(r.why_not).c_str());
    efa::info::print_json_fields(r.choices, json_str);
    std::printf(" \"nics\": %s,\n", json_list(r.nics, [](const Nic &n) {
                                        return "{\"name\": " + json_str(n.name) +
                                               ", \"pci\": " + json_str(n.pci) +
                                               ", \"near\": " + json_str(n.near) + "}";
                                    }).c_str());
    std::printf(" \"sets_on\": %s, \"sets\": %s}\n", json_str(r.sets_on).c_str(),
                json_list(r.shares, [&](const Share &s) {
                    return "{\"local_rank\": " + std::to_string(s.rank) +
                           ", \"binding\": " + json_str(s.binding) + ", \"nics\": " + strs(s.nics) +
                           ", \"reason\": " + json_str(s.reason) + "}";
                }).c_str());
}

void print_text(const Report &r) {
    std::printf("ompi-efa %s; libfabric %s (API %s asked)\n\nproviders offered:\n", kRelease,
                r.libfabric.c_str(), r.api.c_str());
    for (const auto &p : r.providers) {
        std::string d;
        for (const auto &x : p.domains) {
            d += (d.empty() ? "" : ", ") + x;
        }
        std::printf("  %-14s %zu fabric(s); domains: %s\n", p.name.c_str(), p.fabrics.size(),
                    d.c_str());
    }
    std::printf("\ncomponents' provider (asked: %s): ", r.asked.c_str());
    if (r.chosen_provider.empty()) {
        std::printf("none\n");
        for (const auto &w : r.why_not) {
            std::printf("%s\n", w.c_str());
        }
    } else {
        std::printf("%s, fabric %s\n", r.chosen_provider.c_str(), r.chosen_fabric.c_str());
    }
    if (!r.chosen_provider.empty()) {
        efa::info::print_text(r.choices, r.open_messages);
    }
    if (!r.nics.empty()) {
        std::printf("\nNICs:\n");
        for (const auto &n : r.nics) {
            std::printf("  %-20s %-14s %s\n", n.name.c_str(), n.pci.empty() ? "-" : n.pci.c_str(),
                        n.near.empty() ? "(place unknown)" : n.near.c_str());
        }
    }
    if (!r.shares.empty()) {
        std::printf("\nNIC sets on %s, %zu process(es) bound to equal shares of the cores:\n",
                    r.sets_on.c_str(), r.shares.size());
        for (const auto &s : r.shares) {
            std::string n;
            for (const auto &x : s.nics) {
                n += (n.empty() ? "" : ", ") + x;
            }
            std::printf("  local rank %d (PUs %s): %s\n      %s\n", s.rank, s.binding.c_str(),
                        n.c_str(), s.reason.c_str());
        }
    }
}

} // namespace

int main(int argc, char **argv) {
    const Options o = parse(argc, argv);
    Report r;
    const uint32_t v = fi_version();
    r.libfabric = efa::version_string(v);
    r.api = efa::version_string(efa::api_version());
    r.providers = list_providers();
    r.asked = o.provider.empty() ? "efa" : o.provider;

    std::vector<std::string> messages;
    g_messages = &messages;
    efa_core_params_t p{};
    p.provider_include = o.provider.c_str();
    p.provider_exclude = o.provider_exclude.c_str();
    // With --topology the NIC lists and the GPU name the recorded devices,
    // not this machine's: the provider and the core here are opened
    // without them.
    p.nic_include = o.topology.empty() ? o.nic_include.c_str() : "";
    p.gpu = o.topology.empty() ? o.gpu.c_str() : "auto";
    p.nic_exclude = o.topology.empty() ? o.nic_exclude.c_str() : "";
    p.num_contexts = 1;
    p.mr_cache_size = 1024;
    p.progress_batch = 16;
    p.rnr_retry = -1;
    p.force_emulated = "";
    p.need_remote_comm = !o.one_node;
    p.force_direct_mode = o.direct_mode;
    p.hmem_vmm = o.hmem_vmm;
    p.provider_cuda_calls = o.provider_cuda_calls;
    p.force_efa_options = o.force_efa_options;
    // The glue's defaults (common_efa_glue.c's table), for the checks.
    p.peer_timeout = 600;
    p.net_poll_interval_us = 20;
    p.net_poll_interval_max_us = 1000;
    p.direct_mode_mtu = 8192;
    p.nics_per_proc = o.nics_per_proc;
    p.stripe_min = o.stripe_min;
    p.dmabuf = o.dmabuf;
    p.local_rank = 0;
    p.local_size = o.local_size;
    efa::Reporter rep;
    rep.show_help = keep_help;
    rep.verbose = keep_verbose;
    rep.verbosity = 1;
    rep.explain = true;
    efa::Selection sel;
    const bool chosen = efa::select_provider(p, rep, &sel) == 0;

    hwloc_topology_t here = efa::info::load_topology("");
    std::vector<efa::NicCandidate> cands;
    if (chosen) {
        r.chosen_provider = sel.nics[0]->fabric_attr->prov_name;
        r.chosen_fabric = sel.nics[0]->fabric_attr->name;
        std::vector<efa::NicCandidate> all;
        for (const fi_info *i : sel.nics) {
            all.push_back({i->domain_attr->name, pci_of(i)});
        }
        messages.clear(); // (what the selection said on the way)
        std::string known;
        for (const auto &c : all) {
            known += (known.empty() ? "" : ", ") + c.name;
        }
        const efa::NicFilter lists =
            o.topology.empty() ? efa::NicFilter{o.nic_include, o.nic_exclude} : efa::NicFilter{};
        const auto f = efa::filter_nics(all, lists);
        if (f.conflicting) {
            keep_help("conflicting-nic-lists", lists.include.c_str(), lists.exclude.c_str(), "");
        } else if (f.empty_item) {
            keep_help("empty-nic-list-item", lists.include.c_str(), lists.exclude.c_str(), "");
        } else if (!f.unmatched.empty()) {
            keep_help("unknown-nic", f.unmatched.front().c_str(), known.c_str(), "");
        } else if (f.admitted.empty()) {
            keep_help("no-nic-left", lists.exclude.c_str(), known.c_str(), "");
        }
        if (!messages.empty()) { // the NIC lists are wrong: the components would not run
            r.why_not = messages;
            r.chosen_provider.clear();
            r.chosen_fabric.clear();
        } else {
            for (size_t i : f.admitted) {
                cands.push_back(all[i]);
                r.nics.push_back({all[i].name, all[i].pci_bus_id, near_of(here, all[i])});
            }
            r.choices = efa::info::component_choices(p, o.one_node, keep_help, keep_verbose);
            if (!r.choices.opened) {
                r.open_messages = messages;
            }
        }
    } else {
        r.why_not = messages;
    }

    int rc = 0;
    if (!o.topology.empty()) {
        hwloc_topology_t rec = efa::info::load_topology(o.topology);
        if (!rec) {
            std::fprintf(stderr, "efa-mpi-info: cannot load the topology %s\n", o.topology.c_str());
            rc = 1;
        } else {
            const auto all = efa::info::recorded_nics(rec);
            r.sets_on = o.topology;
            const auto f = efa::filter_nics(all, {o.nic_include, o.nic_exclude});
            std::vector<efa::NicCandidate> recorded;
            for (size_t i : f.admitted) {
                recorded.push_back(all[i]);
            }
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
            } else if (!nic_sets(o, rec, recorded, nullptr, &r)) {
                rc = 2;
            }
            hwloc_topology_destroy(rec);
        }
    } else if (!cands.empty() && here) {
        r.sets_on = "this machine";
        if (!nic_sets(o, here, cands, std::getenv("CUDA_VISIBLE_DEVICES"), &r)) {
            rc = 2;
        }
    }
    if (here) {
        hwloc_topology_destroy(here);
    }
    if (o.json) {
        print_json(r);
    } else {
        print_text(r);
    }
    // 3: the components would not run here (the reasons are printed): no
    // provider, or the core did not open on the one chosen.
    return rc != 0 ? rc : (r.chosen_provider.empty() || !r.choices.opened) ? 3 : 0;
}
