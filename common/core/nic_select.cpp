#include "nic_select.hpp"

#include "nic_share.hpp"

#include <algorithm>
#include <charconv>
#include <compare>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <tuple>

namespace efa {
namespace {

// Owns an hwloc bitmap so that every early return releases it.
class Bitmap {
  public:
    Bitmap() : bits_(hwloc_bitmap_alloc()) {}
    Bitmap(const Bitmap &) = delete;
    Bitmap &operator=(const Bitmap &) = delete;
    ~Bitmap() { hwloc_bitmap_free(bits_); }

    bool valid() const { return bits_ != nullptr; }
    hwloc_bitmap_t get() const { return bits_; }

    // "0-3,16-19": the same notation hwloc-bind and lstopo use, so verbose
    // output can be compared with what the user asked for.
    std::string list() const {
        char *text = nullptr;
        if (!bits_ || hwloc_bitmap_list_asprintf(&text, bits_) < 0 || !text) {
            return "?";
        }
        std::string result(text);
        std::free(text);
        return result;
    }

  private:
    hwloc_bitmap_t bits_;
};

struct PciAddress {
    unsigned domain = 0, bus = 0, dev = 0, func = 0;
    auto operator<=>(const PciAddress &) const = default;
};

std::optional<unsigned> parse_hex(std::string_view text, unsigned max) {
    unsigned value = 0;
    const char *end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value, 16);
    if (text.empty() || ec != std::errc() || ptr != end || value > max) {
        return std::nullopt;
    }
    return value;
}

// Strict "dddd:bb:dd.f" or "bb:dd.f" parser. hwloc's own string helper uses
// sscanf, which accepts trailing garbage and silently truncates out-of-range
// fields; a malformed id must not alias a real device.
std::optional<PciAddress> parse_pci_bus_id(std::string_view text) {
    const size_t dot = text.rfind('.');
    const size_t last_colon = text.rfind(':');
    if (dot == std::string_view::npos || last_colon == std::string_view::npos || dot < last_colon) {
        return std::nullopt;
    }
    const size_t first_colon = text.find(':');
    std::optional<unsigned> domain = 0;
    std::string_view bus_text = text.substr(0, last_colon);
    if (first_colon != last_colon) {
        // hwloc stores 16-bit PCI domains unless built with 32-bit support.
        domain = parse_hex(text.substr(0, first_colon), 0xffff);
        bus_text = text.substr(first_colon + 1, last_colon - first_colon - 1);
    }
    auto bus = parse_hex(bus_text, 0xff);
    auto dev = parse_hex(text.substr(last_colon + 1, dot - last_colon - 1), 0x1f);
    auto func = parse_hex(text.substr(dot + 1), 0x7);
    if (!domain || !bus || !dev || !func) {
        return std::nullopt;
    }
    return PciAddress{*domain, *bus, *dev, *func};
}

hwloc_obj_t find_by_bus_id(hwloc_topology_t topo, std::string_view bus_id) {
    auto address = parse_pci_bus_id(bus_id);
    if (!address) {
        return nullptr;
    }
    return hwloc_get_pcidev_by_busid(topo, address->domain, address->bus, address->dev,
                                     address->func);
}

// libfabric names EFA domains after the verbs device plus an endpoint-type
// suffix ("rdmap16s27-rdm"), and hwloc reports the verbs device as an OS
// device ("rdmap16s27"). This lets a candidate without a bus id still be placed.
hwloc_obj_t find_by_os_device_name(hwloc_topology_t topo, std::string_view name) {
    for (hwloc_obj_t osdev = hwloc_get_next_osdev(topo, nullptr); osdev;
         osdev = hwloc_get_next_osdev(topo, osdev)) {
        if (!osdev->name) {
            continue;
        }
        std::string_view osname(osdev->name);
        if (osname.empty() || !name.starts_with(osname)) {
            continue;
        }
        if (name.size() == osname.size() || name[osname.size()] == '-') {
            // Prefer the PCI device: it carries the address used for ordering.
            hwloc_obj_t parent = osdev->parent;
            return parent && parent->type == HWLOC_OBJ_PCI_DEVICE ? parent : osdev;
        }
    }
    return nullptr;
}

hwloc_obj_t locate(hwloc_topology_t topo, const NicCandidate &candidate) {
    if (hwloc_obj_t obj = find_by_bus_id(topo, candidate.pci_bus_id)) {
        return obj;
    }
    return find_by_os_device_name(topo, candidate.name);
}

// The caller's binding restricted to the PUs this topology knows about. Bits
// for unknown PUs (offline CPUs, a "fill everything" bitmap) say nothing about
// locality, so they are dropped before deciding whether the process is bound
// (binding_is_partial: bound to all a cgroup allows it on one package is bound).
class EffectiveBinding {
  public:
    EffectiveBinding(hwloc_topology_t topo, hwloc_const_cpuset_t binding) {
        hwloc_const_cpuset_t machine = hwloc_topology_get_topology_cpuset(topo);
        if (!binding || !machine || !cpus_.valid()) {
            return;
        }
        hwloc_bitmap_and(cpus_.get(), binding, machine);
        bound_ = binding_is_partial(topo, cpus_.get());
    }

    bool bound() const { return bound_; }
    hwloc_const_cpuset_t cpuset() const { return cpus_.get(); }
    std::string list() const { return cpus_.list(); }

  private:
    Bitmap cpus_;
    bool bound_ = false;
};

// Lower compares nearer.
struct Nearness {
    enum Tier { Overlapping = 0, Elsewhere = 1, NotFound = 2 };
    Tier tier = NotFound;
    // Only meaningful for Overlapping: PUs in the NIC's locality. A smaller
    // locality (a package rather than the whole machine) means the NIC hangs
    // deeper in the tree, closer to the CPUs the process runs on.
    int locality_pus = 0;
    auto operator<=>(const Nearness &) const = default;
};

struct Placement {
    size_t index = 0;
    hwloc_obj_t device = nullptr;   // PCI device (or OS device) of the NIC
    hwloc_obj_t locality = nullptr; // first non-I/O ancestor of device
    Nearness nearness;
};

// Where each candidate is in the topology; nearness still unrated.
std::vector<Placement> locate_all(hwloc_topology_t topo,
                                  const std::vector<NicCandidate> &candidates) {
    std::vector<Placement> placements(candidates.size());
    for (size_t i = 0; i < candidates.size(); ++i) {
        Placement &placement = placements[i];
        placement.index = i;
        placement.device = locate(topo, candidates[i]);
        if (placement.device) {
            placement.locality = hwloc_get_non_io_ancestor_obj(topo, placement.device);
        }
    }
    return placements;
}

void rate(Placement *placement, hwloc_const_cpuset_t binding) {
    if (!placement->locality || !placement->locality->cpuset) {
        placement->nearness = {Nearness::NotFound, 0};
    } else if (hwloc_bitmap_intersects(placement->locality->cpuset, binding)) {
        placement->nearness = {Nearness::Overlapping,
                               hwloc_bitmap_weight(placement->locality->cpuset)};
    } else {
        placement->nearness = {Nearness::Elsewhere, 0};
    }
}

// Identifies the NIC hardware independently of the candidate list, so every
// process orders a set of equally-near NICs the same way whatever order
// libfabric reported them in.
auto hardware_order_key(const Placement &placement, const std::vector<NicCandidate> &candidates) {
    PciAddress address;
    const bool is_pci = placement.device && placement.device->type == HWLOC_OBJ_PCI_DEVICE;
    if (is_pci) {
        const auto &pci = placement.device->attr->pcidev;
        address = {pci.domain, pci.bus, pci.dev, pci.func};
    }
    return std::make_tuple(!is_pci, address, std::string_view(candidates[placement.index].name));
}

// Position of the binding inside `locality`, in units of the binding's own
// size: the n-th core of a package for a core binding, the n-th hardware
// thread for a thread binding. Counted in hwloc's logical order, where the
// threads of one core are adjacent even when their OS numbers are not.
//
// A binding smaller than its core (one hardware thread of an SMT core) is
// ambiguous: ranks may sit one per core on each core's first thread, or one
// per thread. Counting threads would give the first case only even slots and
// leave every other NIC idle, so such a binding is numbered core first: the
// cores' first threads take slots 0..cores-1, their second threads the next
// `cores` slots. Both cases then spread evenly once the locality is full, and
// one rank per core spreads evenly at any count.
size_t binding_slot(hwloc_topology_t topo, hwloc_const_cpuset_t binding,
                    hwloc_const_cpuset_t locality, unsigned binding_pus) {
    const int first_pu = hwloc_bitmap_first(binding);
    hwloc_obj_t pu = first_pu >= 0 ? hwloc_get_pu_obj_by_os_index(topo, first_pu) : nullptr;
    hwloc_obj_t core = pu ? hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu) : nullptr;
    const int core_pus = core && core->cpuset ? hwloc_bitmap_weight(core->cpuset) : 0;
    if (core && core_pus > static_cast<int>(binding_pus) &&
        hwloc_bitmap_isincluded(binding, core->cpuset) &&
        hwloc_bitmap_isincluded(core->cpuset, locality)) {
        size_t core_index = 0;
        for (hwloc_obj_t c =
                 hwloc_get_next_obj_inside_cpuset_by_type(topo, locality, HWLOC_OBJ_CORE, nullptr);
             c && c != core;
             c = hwloc_get_next_obj_inside_cpuset_by_type(topo, locality, HWLOC_OBJ_CORE, c)) {
            ++core_index;
        }
        size_t thread_index = 0;
        for (hwloc_obj_t t = hwloc_get_next_obj_inside_cpuset_by_type(topo, core->cpuset,
                                                                      HWLOC_OBJ_PU, nullptr);
             t && t != pu;
             t = hwloc_get_next_obj_inside_cpuset_by_type(topo, core->cpuset, HWLOC_OBJ_PU, t)) {
            ++thread_index;
        }
        const auto cores = static_cast<size_t>(
            hwloc_get_nbobjs_inside_cpuset_by_type(topo, locality, HWLOC_OBJ_CORE));
        return core_index + (thread_index / binding_pus) * cores;
    }
    size_t position = 0;
    for (hwloc_obj_t p =
             hwloc_get_next_obj_inside_cpuset_by_type(topo, locality, HWLOC_OBJ_PU, nullptr);
         p; p = hwloc_get_next_obj_inside_cpuset_by_type(topo, locality, HWLOC_OBJ_PU, p)) {
        if (hwloc_bitmap_isset(binding, p->os_index)) {
            break;
        }
        ++position;
    }
    return position / binding_pus;
}

struct Spread {
    size_t index = 0;
    std::string source;
};

// Chooses k for set[k % set_size]. The goal is that the ranks sharing one set
// of nearest NICs use all of them evenly, without any process knowing the
// others' bindings.
//
// local_rank alone works when ranks were handed out consecutively per socket,
// but launchers often map round-robin across sockets (--map-by package): then
// all ranks on socket 0 have even local ranks and would pile onto every other
// NIC. When bindings are fine enough to tell the ranks of one locality apart
// (at least as many binding-sized slots as NICs, e.g. one core each), the
// binding's slot is used instead: distinct cores give consecutive k whatever
// the rank numbering. When bindings are coarse (bound to a whole package or
// NUMA node, so co-located ranks share a binding) only local_rank can
// separate them.
Spread spread_index(hwloc_topology_t topo, hwloc_const_cpuset_t binding,
                    hwloc_const_cpuset_t locality, size_t set_size, size_t local_rank) {
    const int binding_pus = hwloc_bitmap_weight(binding);
    const int locality_pus = hwloc_bitmap_weight(locality);
    if (set_size > 1 && binding_pus > 0 && locality_pus > 0 &&
        hwloc_bitmap_isincluded(binding, locality)) {
        const auto slots = static_cast<size_t>(locality_pus / binding_pus);
        if (slots >= set_size) {
            return {binding_slot(topo, binding, locality, static_cast<unsigned>(binding_pus)),
                    "binding slot"};
        }
    }
    return {local_rank, "local rank"};
}

// Candidate names come from the provider; keep the reason on one line even if
// one of them is odd.
std::string printable(std::string_view text) {
    std::string result(text);
    std::replace_if(
        result.begin(), result.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }, '?');
    return result;
}

std::string describe_nic(const NicCandidate &candidate) {
    std::string text = printable(candidate.name);
    if (!candidate.pci_bus_id.empty()) {
        text += " [" + printable(candidate.pci_bus_id) + "]";
    }
    return text;
}

std::string describe_object(hwloc_obj_t obj) {
    return std::string(hwloc_obj_type_string(obj->type)) + " L#" +
           std::to_string(obj->logical_index);
}

NicDecision round_robin(const std::vector<NicCandidate> &candidates, size_t local_rank,
                        int local_size, const std::string &why) {
    NicDecision decision;
    decision.index = local_rank % candidates.size();
    decision.reason = why + "; round-robin by local rank " + std::to_string(local_rank);
    if (local_size > 0) {
        decision.reason += " of " + std::to_string(local_size);
    }
    decision.reason += " over " + std::to_string(candidates.size()) +
                       " NICs: " + describe_nic(candidates[decision.index]);
    return decision;
}

// The NICs nearest to the binding, in hardware order, and the union of
// their localities.  Empty set: none is located in the topology (or no
// memory for the bitmap).
struct NearestPool {
    std::vector<Placement> set;
    Bitmap locality;
    Nearness nearest;
    size_t missing = 0; // candidates not found in the topology
};

void nearest_pool(std::vector<Placement> placements, const std::vector<NicCandidate> &candidates,
                  hwloc_const_cpuset_t binding, NearestPool *pool) {
    for (Placement &placement : placements) {
        rate(&placement, binding);
        pool->missing += placement.nearness.tier == Nearness::NotFound;
    }
    pool->nearest = std::min_element(placements.begin(), placements.end(),
                                     [](const Placement &a, const Placement &b) {
                                         return a.nearness < b.nearness;
                                     })
                        ->nearness;
    if (pool->nearest.tier == Nearness::NotFound || !pool->locality.valid()) {
        return;
    }
    for (const Placement &placement : placements) {
        if (placement.nearness == pool->nearest) {
            pool->set.push_back(placement);
            hwloc_bitmap_or(pool->locality.get(), pool->locality.get(), placement.locality->cpuset);
        }
    }
    std::sort(pool->set.begin(), pool->set.end(), [&](const Placement &a, const Placement &b) {
        return hardware_order_key(a, candidates) < hardware_order_key(b, candidates);
    });
}

} // namespace

NicDecision select_nic(const std::vector<NicCandidate> &candidates, hwloc_topology_t topo,
                       hwloc_const_cpuset_t binding, int local_rank, int local_size) {
    if (candidates.empty()) {
        return {0, "no NIC candidates; defaulting to index 0"};
    }
    const size_t rank = local_rank > 0 ? static_cast<size_t>(local_rank) : 0;
    if (!topo) {
        return round_robin(candidates, rank, local_size, "no topology available");
    }

    const EffectiveBinding bound(topo, binding);
    if (!bound.bound()) {
        return round_robin(candidates, rank, local_size,
                           "process is not bound (no binding, or it covers the whole machine)");
    }

    NearestPool pool;
    nearest_pool(locate_all(topo, candidates), candidates, bound.cpuset(), &pool);
    const Nearness nearest = pool.nearest;
    if (nearest.tier == Nearness::NotFound) {
        return round_robin(candidates, rank, local_size,
                           "no candidate NIC found: all " + std::to_string(candidates.size()) +
                               " not found in the topology by PCI bus id or OS device name");
    }
    if (pool.set.empty()) {
        return round_robin(candidates, rank, local_size, "out of memory");
    }
    const std::vector<Placement> &set = pool.set;
    const Spread spread = spread_index(topo, bound.cpuset(), pool.locality.get(), set.size(), rank);
    const Placement &chosen = set[spread.index % set.size()];

    const size_t missing = pool.missing;
    NicDecision decision;
    decision.index = chosen.index;
    decision.reason =
        "bound to PUs " + bound.list() + ": " + describe_nic(candidates[chosen.index]) + " is " +
        std::to_string(spread.index % set.size() + 1) + " of " + std::to_string(set.size());
    if (nearest.tier == Nearness::Overlapping) {
        decision.reason += " nearest NICs (local to " + describe_object(chosen.locality) + ")";
    } else {
        decision.reason += " NICs found in the topology (none is local to the binding)";
    }
    decision.reason += ", spread index " + std::to_string(spread.index) + " from " + spread.source;
    if (missing > 0) {
        decision.reason += "; " + std::to_string(missing) + " NIC(s) not found in the topology";
    }
    return decision;
}

namespace {

// The names of a comma-separated list, trimmed.  A list of blanks only is
// empty; an empty item in a list that has names is flagged (a typo).
std::vector<std::string> split_names(const std::string &list, bool *empty_item) {
    std::vector<std::string> names;
    size_t blanks = 0;
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) {
            comma = list.size();
        }
        std::string name = list.substr(start, comma - start);
        const auto first = name.find_first_not_of(" \t");
        const auto last = name.find_last_not_of(" \t");
        if (first != std::string::npos) {
            names.push_back(name.substr(first, last - first + 1));
        } else {
            ++blanks;
        }
        start = comma + 1;
    }
    if (!names.empty() && blanks > 0) {
        *empty_item = true;
    }
    return names;
}

bool name_matches(const std::string &wanted, const std::string &candidate) {
    return candidate == wanted ||
           (candidate.size() > wanted.size() && candidate.compare(0, wanted.size(), wanted) == 0 &&
            candidate[wanted.size()] == '-');
}

std::string describe_set(const std::vector<NicCandidate> &candidates,
                         const std::vector<size_t> &indices) {
    std::string text;
    for (size_t i : indices) {
        text += (text.empty() ? "" : ", ") + describe_nic(candidates[i]);
    }
    return text;
}

} // namespace

NicFilterResult filter_nics(const std::vector<NicCandidate> &candidates, const NicFilter &filter) {
    NicFilterResult result;
    const auto include = split_names(filter.include, &result.empty_item);
    const auto exclude = split_names(filter.exclude, &result.empty_item);
    result.conflicting = !include.empty() && !exclude.empty();
    auto listed = [&](const std::vector<std::string> &names, const NicCandidate &c) {
        return std::any_of(names.begin(), names.end(),
                           [&](const std::string &n) { return name_matches(n, c.name); });
    };
    for (size_t i = 0; i < candidates.size(); ++i) {
        if ((include.empty() || listed(include, candidates[i])) &&
            !listed(exclude, candidates[i])) {
            result.admitted.push_back(i);
        }
    }
    for (const auto *names : {&include, &exclude}) {
        for (const std::string &n : *names) {
            if (std::none_of(candidates.begin(), candidates.end(),
                             [&](const NicCandidate &c) { return name_matches(n, c.name); })) {
                result.unmatched.push_back(printable(n));
            }
        }
    }
    return result;
}

NicSetDecision select_nic_set(const std::vector<NicCandidate> &candidates, hwloc_topology_t topo,
                              hwloc_const_cpuset_t binding, int local_rank, int local_size,
                              int max_nics, const std::vector<std::string> &node_bindings) {
    NicSetDecision decision;
    if (candidates.empty()) {
        decision.reason = "no NIC candidates";
        return decision;
    }
    const size_t rank = local_rank > 0 ? static_cast<size_t>(local_rank) : 0;
    // Unknown size: as if there were NICs enough for one each, so that the
    // local rank alone spreads the processes, as select_nic does.
    const size_t ranks =
        local_size > 0 ? static_cast<size_t>(local_size) : std::max(rank + 1, candidates.size());
    std::string how;
    auto everywhere = [&](const std::string &why) {
        std::vector<size_t> pool(candidates.size());
        for (size_t i = 0; i < pool.size(); ++i) {
            pool[i] = i;
        }
        decision.indices = share_of(pool, ranks, rank, max_nics, &how);
        decision.reason = why + "; by local rank " + std::to_string(rank) + " of " +
                          std::to_string(ranks) + ", " + how + ": " +
                          describe_set(candidates, decision.indices);
        return decision;
    };
    if (!topo) {
        return everywhere("no topology available");
    }
    const EffectiveBinding bound(topo, binding);
    if (!bound.bound()) {
        return everywhere("process is not bound");
    }
    const std::vector<Placement> located = locate_all(topo, candidates);
    NearestPool nearest_nics;
    nearest_pool(located, candidates, bound.cpuset(), &nearest_nics);
    if (nearest_nics.nearest.tier == Nearness::NotFound) {
        return everywhere("no candidate NIC found in the topology");
    }
    if (nearest_nics.set.empty()) {
        return everywhere("out of memory");
    }
    const std::vector<Placement> &set = nearest_nics.set;
    const Bitmap &locality = nearest_nics.locality;
    std::vector<size_t> pool;
    for (const Placement &placement : set) {
        pool.push_back(placement.index);
    }
    // The processes of the node whose bindings fall in the pool's
    // locality: those the runtime says are bound so, else an estimate that
    // assumes they are spread evenly over the machine.
    PoolSharers told;
    if (!node_bindings.empty()) {
        told = pool_sharers(topo, bound.cpuset(), pool, rank,
                            static_cast<size_t>(std::max(local_size, 0)), node_bindings,
                            [&](hwloc_const_cpuset_t peer) {
                                NearestPool theirs;
                                nearest_pool(located, candidates, peer, &theirs);
                                std::vector<size_t> indices;
                                for (const Placement &placement : theirs.set) {
                                    indices.push_back(placement.index);
                                }
                                return indices;
                            });
    }
    const auto machine_pus =
        static_cast<size_t>(hwloc_bitmap_weight(hwloc_topology_get_topology_cpuset(topo)));
    Bitmap inside;
    if (!inside.valid()) {
        return everywhere("out of memory");
    }
    hwloc_bitmap_and(inside.get(), locality.get(), hwloc_topology_get_topology_cpuset(topo));
    const auto pool_pus = static_cast<size_t>(hwloc_bitmap_weight(inside.get()));
    size_t sharers = machine_pus > 0 ? (ranks * pool_pus + machine_pus - 1) / machine_pus : ranks;
    sharers = std::clamp<size_t>(sharers, 1, ranks);
    const size_t groups = std::min(sharers, pool.size());
    Spread spread = spread_index(topo, bound.cpuset(), locality.get(), groups, rank);
    if (told.known) {
        // Their ordinals are 0..count-1, each once, whatever the mapping
        // and however coarse the bindings: the even spread that the
        // binding slot and the local rank only approximate.
        sharers = told.count;
        spread = {told.ordinal, "the node's bindings (" + told.why + ")"};
    }
    decision.indices = share_of(pool, sharers, spread.index, max_nics, &how);
    decision.reason = "bound to PUs " + bound.list() + ": " + std::to_string(sharers) +
                      " process(es) share the " + std::to_string(pool.size()) +
                      (nearest_nics.nearest.tier == Nearness::Overlapping
                           ? " nearest NICs (local to " + describe_object(set[0].locality) + ")"
                           : " NICs found (none local to the binding)") +
                      "; spread index " + std::to_string(spread.index) + " from " + spread.source +
                      ", " + how + ": " + describe_set(candidates, decision.indices);
    if (!node_bindings.empty() && !told.known) {
        decision.reason += "; the node's bindings not used: " + told.why;
    }
    return decision;
}

int node_rails(size_t admitted, size_t extras, int max_nics, bool striping, int max_rails) {
    if (!striping || admitted == 0) {
        return 1;
    }
    size_t n = admitted;
    if (max_nics > 0) {
        n = std::min(n, static_cast<size_t>(max_nics));
    }
    return static_cast<int>(std::min(n + extras, static_cast<size_t>(max_rails)));
}

} // namespace efa
