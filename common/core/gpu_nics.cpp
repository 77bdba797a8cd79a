#include "gpu_nics.hpp"

#include "nic_share.hpp" // node_binding

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <tuple>

namespace efa {

namespace {

std::string bus_id_of(hwloc_obj_t o) {
    char text[32];
    std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", o->attr->pcidev.domain,
                  o->attr->pcidev.bus, o->attr->pcidev.dev, o->attr->pcidev.func);
    return text;
}

// 3D controllers (data-centre GPUs) and processing accelerators (Trainium,
// Gaudi); VGA controllers only from GPU makers: a server's BMC or the
// hypervisor's display (EC2's) is a VGA controller too, and no GPU.
bool is_accelerator(hwloc_obj_t o) {
    const unsigned cls = o->attr->pcidev.class_id;
    const unsigned vendor = o->attr->pcidev.vendor_id;
    return cls == 0x0302 || cls == 0x1200 ||
           (cls == 0x0300 && (vendor == 0x10de || vendor == 0x1002));
}

// A PCI address as "dddd:bb:dd.f" (any number of domain digits, as
// nvidia-smi's "00000000:53:00.0"), or "bb:dd.f" in domain 0, in the
// canonical form node_accelerators uses; "" where it is none.
std::string canonical_bus_id(const std::string &s) {
    unsigned d = 0, b = 0, v = 0, f = 0;
    char end = 0;
    const bool with_domain = std::count(s.begin(), s.end(), ':') == 2;
    const int n = with_domain ? std::sscanf(s.c_str(), "%x:%x:%x.%x%c", &d, &b, &v, &f, &end)
                              : std::sscanf(s.c_str(), "%x:%x.%x%c", &b, &v, &f, &end);
    if (n != (with_domain ? 4 : 3) || b > 0xff || v > 0x1f || f > 7 || d > 0xffff) {
        return "";
    }
    char text[32];
    std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", d, b, v, f);
    return text;
}

bool all_digits(const std::string &s) {
    return !s.empty() && s.size() <= 4 &&
           std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string trimmed(const std::string &s) {
    const size_t a = s.find_first_not_of(" \t");
    const size_t b = s.find_last_not_of(" \t");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

hwloc_obj_t pci_object(hwloc_topology_t topo, const std::string &bus_id) {
    return bus_id.empty() ? nullptr : hwloc_get_pcidev_by_busidstring(topo, bus_id.c_str());
}

bool below(hwloc_obj_t o, hwloc_obj_t ancestor) {
    for (hwloc_obj_t p = o ? o->parent : nullptr; p; p = p->parent) {
        if (p == ancestor) {
            return true;
        }
    }
    return false;
}

std::string accelerator_list(const std::vector<Accelerator> &accs) {
    std::string list;
    for (size_t i = 0; i < accs.size(); ++i) {
        list += (i ? ", " : "") + std::to_string(i) + ": " + accs[i].bus_id;
    }
    return list.empty() ? "none" : list;
}

// Is the accelerator at 'bus_id' near the binding: the process is not
// bound (binding_is_partial), or its binding overlaps the accelerator's
// locality (its package)?  A GPU guessed for a process bound elsewhere
// would move its host memory's traffic across the packages.
bool near_binding(hwloc_topology_t topo, const std::string &bus_id, hwloc_const_cpuset_t binding,
                  std::string *home) {
    hwloc_obj_t gpu = pci_object(topo, bus_id);
    if (!gpu) {
        return false;
    }
    hwloc_obj_t at = hwloc_get_non_io_ancestor_obj(topo, gpu);
    char *text = nullptr;
    hwloc_bitmap_list_asprintf(&text, at->cpuset);
    *home = text && *text ? text : "none it may use";
    std::free(text);
    if (!binding_is_partial(topo, binding)) {
        return true;
    }
    return hwloc_bitmap_intersects(at->cpuset, binding);
}

bool starts_with_nocase(const std::string &text, const std::string &prefix) {
    return text.size() >= prefix.size() &&
           std::equal(prefix.begin(), prefix.end(), text.begin(), [](char a, char b) {
               return std::tolower(static_cast<unsigned char>(a)) ==
                      std::tolower(static_cast<unsigned char>(b));
           });
}

// The accelerators whose NVIDIA UUID begins with 'uuid' ("GPU-" and as
// much of it as tells one GPU: CUDA takes such abbreviations), by their OS
// devices' NVIDIAUUID (hwloc built with NVML gives one to each NVIDIA GPU).
// *known: whether the topology holds any such UUID.
std::set<std::string> gpus_by_uuid(hwloc_topology_t topo, const std::vector<Accelerator> &accs,
                                   const std::string &uuid, bool *known) {
    std::set<std::string> found;
    for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o;
         o = hwloc_get_next_osdev(topo, o)) {
        const char *value = hwloc_obj_get_info_by_name(o, "NVIDIAUUID");
        hwloc_obj_t pci = o->parent;
        if (!value || !pci || pci->type != HWLOC_OBJ_PCI_DEVICE) {
            continue;
        }
        *known = true;
        const std::string bus_id = bus_id_of(pci);
        if (starts_with_nocase(value, uuid) &&
            std::any_of(accs.begin(), accs.end(),
                        [&](const Accelerator &a) { return a.bus_id == bus_id; })) {
            found.insert(bus_id);
        }
    }
    return found;
}

// CUDA_VISIBLE_DEVICES naming one device ('v': no comma) by its index, its
// UUID or a MIG device of a GPU: that GPU's PCI address, or "" with *why
// saying that the device cannot be told (the process's GPU is then
// unknown, not guessed: it is not the local rank's).
std::string cuda_device(hwloc_topology_t topo, const std::vector<Accelerator> &accs,
                        const std::vector<Accelerator> &nvidia, const std::string &v,
                        std::string *why) {
    const std::string said = "CUDA_VISIBLE_DEVICES=" + v;
    if (all_digits(v)) {
        const size_t n = std::stoul(v);
        if (n < nvidia.size()) {
            *why = said;
            return nvidia[n].bus_id;
        }
        *why = said + " names CUDA device " + v + ", but the node has " +
               std::to_string(nvidia.size()) + " NVIDIA GPU(s): this process's GPU is unknown";
        return "";
    }
    // "MIG-GPU-<uuid>/<gi>/<ci>" names its GPU's UUID; "MIG-<uuid>" only the
    // MIG device's, which hwloc does not map to its GPU.
    std::string uuid = v;
    if (starts_with_nocase(v, "MIG-GPU-")) {
        uuid = v.substr(4, v.find('/') - 4);
    } else if (starts_with_nocase(v, "MIG-")) {
        *why = said + " names a MIG device by its own UUID, which the topology does not map to "
                      "its GPU: this process's GPU is unknown";
        return "";
    }
    if (!starts_with_nocase(uuid, "GPU-")) {
        *why = said + " names no device this process can use: its GPU is unknown";
        return "";
    }
    bool known = false;
    const std::set<std::string> found = gpus_by_uuid(topo, accs, uuid, &known);
    if (found.size() == 1) {
        *why = said + " (by its UUID)";
        return *found.begin();
    }
    std::string but = std::to_string(found.size()) + " GPUs' UUIDs begin so";
    if (!known) {
        but = "the topology has no GPU UUIDs (hwloc without NVML)";
    } else if (found.empty()) {
        but = "no GPU of the node has that UUID";
    }
    *why = said + " names one GPU by its UUID, but " + but + ": this process's GPU is unknown";
    return "";
}

// The NICs near a GPU, and where they were found.
struct NearNics {
    std::vector<size_t> indices; // into the candidates, in PCI order
    hwloc_obj_t pool = nullptr;  // the bridge (or package) they are below
    std::string how;             // "its PCIe switch", ...: where they are
    std::string none;            // why there are none
};

NearNics near_nics(const std::vector<NicCandidate> &candidates, hwloc_topology_t topo,
                   const std::string &gpu_bus_id) {
    NearNics near;
    std::vector<size_t> &out = near.indices;
    hwloc_obj_t gpu = topo ? pci_object(topo, gpu_bus_id) : nullptr;
    if (!gpu) {
        near.none = "not in the topology";
        return near;
    }
    std::vector<hwloc_obj_t> nic(candidates.size());
    for (size_t i = 0; i < candidates.size(); ++i) {
        nic[i] = pci_object(topo, candidates[i].pci_bus_id);
    }
    // The nearest bridge above the GPU with a NIC below it: a PCI-to-PCI
    // bridge (a switch's port, or a root port), else its host bridge.
    // hwloc makes a host bridge of each root bus, the devices directly on
    // it and the bridges that lead below: on p4d the GPU and its NIC sit on
    // one root bus with no bridge between (lspci: 10:1b.0 EFA, 10:1c.0 and
    // 10:1d.0 A100), and the host bridge is their switch.
    for (hwloc_obj_t b = gpu->parent; b && b->type == HWLOC_OBJ_BRIDGE && out.empty();
         b = b->parent) {
        for (size_t i = 0; i < nic.size(); ++i) {
            if (nic[i] && below(nic[i], b)) {
                out.push_back(i);
            }
        }
        if (!out.empty()) {
            near.pool = b;
            near.how = b->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST
                           ? "its PCI host bridge (root bus)"
                           : "its PCIe switch";
        }
    }
    if (out.empty()) { // no bridge shared: the NICs of its package (not the machine's)
        hwloc_obj_t home = hwloc_get_non_io_ancestor_obj(topo, gpu);
        for (size_t i = 0; home->parent && i < nic.size(); ++i) {
            if (nic[i] && hwloc_get_non_io_ancestor_obj(topo, nic[i]) == home) {
                out.push_back(i);
            }
        }
        if (!out.empty()) {
            near.pool = home;
            near.how = "its " + std::string(hwloc_obj_type_string(home->type));
        }
    }
    // Every NIC found is near it: that says nothing of the GPU (a flat
    // layout); the binding decides.
    const size_t located = static_cast<size_t>(
        std::count_if(nic.begin(), nic.end(), [](hwloc_obj_t o) { return o != nullptr; }));
    if (located > 1 && out.size() == located) {
        out.clear();
        near.none = "all " + std::to_string(located) + " NICs found are as near it (" + near.how +
                    "): no locality to tell them apart";
        return near;
    }
    if (out.empty()) {
        near.none = "no NIC near it";
    }
    std::sort(out.begin(), out.end(), [&](size_t a, size_t b) {
        return std::tie(candidates[a].pci_bus_id, a) < std::tie(candidates[b].pci_bus_id, b);
    });
    return near;
}

} // namespace

bool gpu_setting_valid(const std::string &setting_in) {
    const std::string s = trimmed(setting_in);
    if (s.empty() || s == "auto" || s == "none" || all_digits(s)) {
        return true;
    }
    const size_t colons = std::count(s.begin(), s.end(), ':');
    return (colons == 1 || colons == 2) && s.size() <= 16 &&
           std::all_of(s.begin(), s.end(),
                       [](unsigned char c) { return std::isxdigit(c) || c == ':' || c == '.'; });
}

std::vector<Accelerator> node_accelerators(hwloc_topology_t topo) {
    std::vector<Accelerator> out;
    for (hwloc_obj_t o = topo ? hwloc_get_next_pcidev(topo, nullptr) : nullptr; o;
         o = hwloc_get_next_pcidev(topo, o)) {
        if (is_accelerator(o)) {
            out.push_back({bus_id_of(o), o->attr->pcidev.vendor_id});
        }
    }
    std::sort(out.begin(), out.end(),
              [](const Accelerator &a, const Accelerator &b) { return a.bus_id < b.bus_id; });
    return out;
}

std::string named_gpu_error(const char *setting_in) {
    const std::string setting = trimmed(setting_in ? setting_in : "");
    if (setting.empty() || setting == "auto" || setting == "none") {
        return ""; // (nothing named: no topology loaded)
    }
    hwloc_topology_t topo = nullptr;
    if (hwloc_topology_init(&topo) != 0) {
        return ""; // (as with several NICs: no topology, nothing checked)
    }
    std::string error;
    if (hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) == 0 &&
        hwloc_topology_load(topo) == 0) {
        error = choose_gpu(topo, setting, nullptr, 0, 1, nullptr, {}).error;
    }
    hwloc_topology_destroy(topo);
    return error;
}

GpuChoice choose_gpu(hwloc_topology_t topo, const std::string &setting_in, const char *cuda_visible,
                     int local_rank, int local_size, hwloc_const_cpuset_t binding,
                     const std::vector<std::string> &node_bindings) {
    GpuChoice c;
    const std::string setting = trimmed(setting_in);
    if (setting == "none") {
        c.reason = "common_efa_gpu none";
        return c;
    }
    const std::vector<Accelerator> accs = node_accelerators(topo);
    if (all_digits(setting)) {
        const size_t n = std::stoul(setting);
        if (n >= accs.size()) {
            c.error = "common_efa_gpu " + setting + ": the node's accelerators are " +
                      accelerator_list(accs);
            return c;
        }
        c.bus_id = accs[n].bus_id;
        c.reason = "common_efa_gpu " + setting;
        c.named = true;
        return c;
    }
    if (setting.find(':') != std::string::npos) {
        const std::string want = canonical_bus_id(setting);
        for (const Accelerator &a : accs) {
            if (a.bus_id == want) {
                c.bus_id = a.bus_id;
                c.reason = "common_efa_gpu " + setting;
                c.named = true;
                return c;
            }
        }
        c.error = "common_efa_gpu " + setting +
                  ": no accelerator at that PCI address (the node's: " + accelerator_list(accs) +
                  ")";
        return c;
    }
    if (!setting.empty() && setting != "auto") {
        c.error = "common_efa_gpu " + setting +
                  ": expected auto, none, an accelerator's index or its PCI address";
        return c;
    }
    if (accs.empty()) {
        // (an hwloc that cannot see PCI devices, built without its pci
        // component or kept from /sys, shows no GPU where there are some)
        const bool pci_seen = topo && hwloc_get_next_pcidev(topo, nullptr);
        c.reason = pci_seen ? "no GPU on this node"
                            : "no GPU known: hwloc sees no PCI device (no PCI support?)";
        return c;
    }
    // Guessed, not named: CUDA_VISIBLE_DEVICES naming one GPU (by index:
    // CUDA's device 0 is that NVIDIA GPU in PCI order; a container or a
    // cgroup that shows each process its own GPU as 0 misleads it, which
    // the binding check below catches only for processes bound away from
    // GPU 0's package (a UUID, which such launchers can give, does not
    // mislead); by UUID, through the topology's NVIDIA UUIDs), else one
    // process per GPU.  One device that cannot be told (an index past the
    // node's GPUs, a UUID the topology lacks) leaves the GPU unknown;
    // several leave the choice to the program; none visible ("", -1) is
    // no GPU.  On a node without NVIDIA GPUs it says nothing.
    std::string guess, why;
    bool by_cuda = false;
    std::vector<Accelerator> nvidia;
    std::vector<std::string> listed; // CUDA_VISIBLE_DEVICES's entries, where it names several
    if (cuda_visible) {
        const std::string v = trimmed(cuda_visible);
        std::copy_if(accs.begin(), accs.end(), std::back_inserter(nvidia),
                     [](const Accelerator &a) { return a.vendor == 0x10de; });
        if (v.empty() || v[0] == '-' || v == "NoDevFiles") {
            c.reason = "CUDA_VISIBLE_DEVICES=" + v + ": no GPU visible to this process";
            return c;
        }
        if (nvidia.empty()) {
            why = "CUDA_VISIBLE_DEVICES=" + v + " (no NVIDIA GPU on the node); ";
        } else if (v.find(',') == std::string::npos) {
            guess = cuda_device(topo, accs, nvidia, v, &why);
            if (guess.empty()) {
                c.reason = why;
                return c;
            }
            by_cuda = true;
        } else {
            for (size_t at = 0, comma; at <= v.size(); at = comma + 1) {
                comma = std::min(v.find(',', at), v.size());
                listed.push_back(trimmed(v.substr(at, comma - at)));
            }
            why = "CUDA_VISIBLE_DEVICES=" + v + " names several GPUs; ";
        }
    }
    // One process per GPU, each taking the GPU of its local rank's number
    // (cudaSetDevice(local rank)): that entry of CUDA_VISIBLE_DEVICES's
    // list where the list has one per process, else the node's
    // accelerator of that number.  (Guessed for any local rank r, as every
    // process of the node guesses alike.)
    // (A list of indices is taken only where it names as many GPUs as the
    // node has: a launcher that confines a job to some of them numbers
    // those from 0, which the topology cannot tell.)
    const bool indices = std::any_of(listed.begin(), listed.end(), all_digits);
    const bool one_each = local_size > 0 && local_rank >= 0 && local_rank < local_size &&
                          (listed.empty() ? static_cast<size_t>(local_size) == accs.size()
                                          : static_cast<size_t>(local_size) == listed.size() &&
                                                (!indices || listed.size() == nvidia.size()));
    auto guess_for = [&](size_t r, std::string *said) {
        if (listed.empty()) {
            *said = "one process per accelerator: local rank " + std::to_string(r) +
                    " takes accelerator " + std::to_string(r);
            return accs[r].bus_id;
        }
        std::string found = cuda_device(topo, accs, nvidia, listed[r], said);
        *said = "one process per GPU listed: local rank " + std::to_string(r) + " takes " +
                (found.empty() ? "entry " + std::to_string(r) + ", which is unknown"
                               : "its entry, " + *said);
        return found;
    };
    if (guess.empty() && one_each) {
        std::string said;
        guess = guess_for(static_cast<size_t>(local_rank), &said);
        why += said;
        // A guess any process of the node cannot use leaves the choice to
        // the binding for all of them, where the runtime told their
        // bindings: some by GPU and the rest by binding would take the
        // same NICs twice while others stay idle.
        std::string cannot;
        const size_t told = node_bindings.size() == static_cast<size_t>(local_size)
                                ? node_bindings.size()
                                : 0; // (told for every process, or not at all)
        for (size_t r = 0; !guess.empty() && r < told; ++r) {
            std::string w, home;
            const OwnedBitmap bound = node_binding(topo, node_bindings[r], r, &w);
            if (!bound) {
                continue; // (unbound, or not told: any GPU is near it)
            }
            const std::string g = guess_for(r, &w);
            if (g.empty()) {
                cannot = "local rank " + std::to_string(r) + "'s GPU is unknown";
                break;
            }
            if (!near_binding(topo, g, bound.get(), &home)) {
                cannot = "local rank " + std::to_string(r) + "'s GPU " + g +
                         " is not near its binding (its PUs " + home + ")";
                break;
            }
        }
        if (!cannot.empty()) {
            c.reason = "GPU " + guess + " (" + why + "), but " + cannot +
                       ": the binding decides for every process of the node";
            return c;
        }
    }
    if (guess.empty()) {
        c.reason = why + "no GPU of this process known (" + std::to_string(local_size) +
                   " processes, " + std::to_string(accs.size()) +
                   " accelerators on the node; common_efa_gpu names one)";
        return c;
    }
    std::string home;
    if (!near_binding(topo, guess, binding, &home)) {
        c.reason = "GPU " + guess + " (" + why + ") is not near this process's binding (its PUs " +
                   home + "): the binding decides";
        return c;
    }
    c.bus_id = guess;
    c.reason = why;
    c.named = by_cuda; // (processes of one GPU each: no sharing to spread)
    c.by_cuda = by_cuda;
    c.crowded = local_size > 0 && static_cast<size_t>(local_size) > accs.size();
    return c;
}

std::vector<size_t> gpu_nics(const std::vector<NicCandidate> &candidates, hwloc_topology_t topo,
                             const std::string &gpu_bus_id, std::string *how) {
    NearNics near = near_nics(candidates, topo, gpu_bus_id);
    if (how) {
        *how = near.indices.empty() ? near.none : near.how;
    }
    return near.indices;
}

NicSetDecision select_gpu_nic_set(const std::vector<NicCandidate> &candidates,
                                  hwloc_topology_t topo, const GpuChoice &gpu, int local_rank,
                                  int max_nics) {
    NicSetDecision d;
    const NearNics near = near_nics(candidates, topo, gpu.bus_id);
    const std::string said = "GPU " + gpu.bus_id + " (" + gpu.reason + ")";
    if (near.indices.empty()) {
        d.reason = said + ": " + near.none;
        return d;
    }
    std::vector<size_t> pool = near.indices;
    size_t place = 0, sharing = 0;
    for (const Accelerator &a : node_accelerators(topo)) {
        if (below(pci_object(topo, a.bus_id), near.pool)) {
            place = a.bus_id == gpu.bus_id ? sharing : place;
            ++sharing;
        }
    }
    sharing = std::max<size_t>(sharing, 1);
    // Processes that may share a GPU they named start on different NICs,
    // by local rank.  Processes of one GPU each whose GPUs share the pool
    // spread over it: the GPU's place among the pool's GPUs (PCI order).
    // CUDA_VISIBLE_DEVICES naming one GPU most often means one process per
    // GPU: where GPUs share the pool, each starts at its own GPU's place
    // (by local rank two GPUs' processes would share NICs and leave some);
    // where the node has more processes than GPUs, those of one GPU then
    // start on different NICs of its share, by local rank.
    const size_t rank = static_cast<size_t>(local_rank > 0 ? local_rank : 0);
    size_t k = 0;
    std::string start;
    if (gpu.named && !(gpu.by_cuda && sharing > 1)) {
        k = rank % pool.size();
        start = "local rank " + std::to_string(rank);
    } else {
        k = place * pool.size() / sharing;
        start = "GPU " + std::to_string(place + 1) + " of " + std::to_string(sharing) + " there";
        const size_t share = std::max<size_t>(pool.size() / sharing, 1);
        if (gpu.by_cuda && gpu.crowded && share > 1) {
            k = (k + rank % share) % pool.size();
            start += ", local rank " + std::to_string(rank);
        }
    }
    std::rotate(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(k), pool.end());
    const size_t whole = pool.size();
    if (max_nics > 0 && pool.size() > static_cast<size_t>(max_nics)) {
        pool.resize(static_cast<size_t>(max_nics));
    }
    d.indices = pool;
    d.reason = said + ": " + std::to_string(pool.size()) + " of the " + std::to_string(whole) +
               " NIC(s) of " + near.how + ", from its NIC " + std::to_string(k + 1) + " (" + start +
               ")";
    return d;
}

} // namespace efa
