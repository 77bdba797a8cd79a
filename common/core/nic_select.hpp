// NIC selection for processes sharing a node with several EFA devices.
//
// Kept as a pure function over an hwloc topology so that it can be unit-tested
// against recorded topologies (tests/topologies/*.xml) without EFA hardware.
#pragma once

#include <hwloc.h>

#include <cstddef>
#include <string>
#include <vector>

namespace efa {

struct NicCandidate {
    std::string name;       // libfabric domain name, e.g. "rdmap16s27-rdm"
    std::string pci_bus_id; // "dddd:bb:dd.f" (domain:bus:dev.func), may be empty when unknown
};

struct NicDecision {
    size_t index = 0;   // index into candidates
    std::string reason; // one human-readable line: why this NIC (for verbose output)
};

// Picks the NIC this process should use.
//
// Pure: no globals, no I/O besides reading the given topology; every process on
// a node computes its choice independently, so the result only depends on the
// arguments.
//
// topo:      loaded hwloc topology WITH I/O objects (HWLOC_TYPE_FILTER_KEEP_IMPORTANT
//            or _ALL for PCI). May be nullptr (then no NIC can be located).
// binding:   cpuset the process is bound to; unbound where binding_is_partial
//            (below) says not. PUs unknown to the topology are ignored.
// local_rank/local_size: this process's rank among the job's processes on this node.
//
// Algorithm:
//  1. Empty candidates: index 0.
//  2. Unbound, or no candidate located in the topology: round-robin,
//     index = local_rank % candidates.size() (in the caller's order).
//  3. Otherwise each candidate is located by PCI bus id (falling back to an
//     OS device whose name is the candidate name up to a '-' suffix, e.g.
//     "rdmap16s27" for "rdmap16s27-rdm"); its locality is the first non-I/O
//     ancestor. Nearness, best first: locality overlaps the binding (smaller
//     locality = nearer), then located elsewhere, then not located at all.
//  4. The equally-nearest NICs are sorted by PCI address (so candidate order does
//     not matter) and the rank takes set[k % set.size()], where the spread index k
//     is the binding's slot inside the set's locality when bindings are fine
//     enough to tell ranks apart (e.g. core 5 of the package -> k = 5), else
//     local_rank. See nic_select.cpp for why.
NicDecision select_nic(const std::vector<NicCandidate> &candidates, hwloc_topology_t topo,
                       hwloc_const_cpuset_t binding, int local_rank, int local_size);

// Does 'binding' keep the process on a part of the machine, so that its
// PUs tell where it runs?  Not when it is nullptr, holds none of the PUs it
// may use (the topology's cpuset: hwloc leaves out those a cgroup
// withholds), or holds them all while they reach every object that hwloc
// places PUs in.  So a process that a cgroup confines to one package and
// that is bound to all of it is bound there (the other package, in the
// topology for its devices or its memory, has none of its PUs); one kept
// off a few PUs only (reserved for the system) is not.  The complete
// cpuset alone would not tell: it also holds offline PUs.
inline bool binding_is_partial(hwloc_topology_t topo, hwloc_const_cpuset_t binding) {
    hwloc_const_cpuset_t allowed = topo ? hwloc_topology_get_topology_cpuset(topo) : nullptr;
    if (!binding || !allowed || !hwloc_bitmap_intersects(binding, allowed)) {
        return false;
    }
    if (!hwloc_bitmap_isincluded(allowed, binding)) {
        return true;
    }
    const int depth = hwloc_topology_get_depth(topo);
    for (int d = 1; d < depth; ++d) {
        for (hwloc_obj_t o = hwloc_get_next_obj_by_depth(topo, d, nullptr); o;
             o = hwloc_get_next_obj_by_depth(topo, d, o)) {
            if (o->complete_cpuset && !hwloc_bitmap_iszero(o->complete_cpuset) &&
                !hwloc_bitmap_intersects(o->cpuset, allowed)) {
                return true;
            }
        }
    }
    return false;
}

// The NICs a process may use (common_efa_nic_include / _exclude): device
// names, comma-separated; a name matches a candidate named exactly so or
// named so up to a '-' suffix ("rdmap16s27" matches "rdmap16s27-rdm").
struct NicFilter {
    std::string include; // empty: every candidate
    std::string exclude; // empty: none
};

struct NicFilterResult {
    std::vector<size_t> admitted;       // indices into candidates, in their order
    std::vector<std::string> unmatched; // names of the lists that match no candidate
    bool conflicting = false;           // both lists name NICs
    bool empty_item = false;            // a list with names has an empty item ("a,,b")
};

NicFilterResult filter_nics(const std::vector<NicCandidate> &candidates, const NicFilter &filter);

struct NicSetDecision {
    std::vector<size_t> indices; // into candidates; the first is the process's primary NIC
    std::string reason;          // one line, for verbose output
};

// The set of NICs this process uses: its share of the NICs nearest to its
// binding, so that every NIC of a node is used and processes share a NIC
// only when there are more processes than NICs.
//
// The nearest NICs (select_nic's steps 2-4) are a pool of K in hardware
// order, shared by the n processes of the node whose bindings fall in the
// pool's locality.  n and each process's spread index k come from
// node_bindings where it tells them: the cpusets of the node's processes
// by local rank, as the runtime gave them before the modex (lists such as
// "0-3,8-11"; pool_sharers in nic_share.hpp): n is the number of processes
// whose binding gives them this pool, k this process's ordinal among them
// in local-rank order.  Launchers map round-robin by package and bind to
// it by default for more than two processes: then the local rank puts
// every process of package 0 on an even index, and a binding slot cannot
// tell processes bound alike apart; the ordinals spread them evenly.
// Otherwise (node_bindings empty, not one per process, or one of them
// missing, unparsable or unbound: said in the reason), n = ceil(local_size
// * |pool locality| / |machine|), between 1 and local_size (local_size
// when unbound: the pool is then every candidate, in the caller's order),
// and k is select_nic's spread index over min(n, K) groups.  With n >= K
// each process gets one NIC, pool[k % K].  With n < K the pool is cut in n
// contiguous blocks (NICs adjacent in hardware order share a PCIe switch)
// and the process takes block k % n, starting at the block's member
// (k / n) % size: its primary NIC.  max_nics > 0 keeps at most that many
// of the block.  An unknown local_size (<= 0) spreads by local rank alone.
//
// Examples (one process per GPU, bound to its cores): p5.48xlarge, 32 NICs
// and 8 processes: 4 NICs each; p4d, 4 NICs and 8 processes: 1 each; one
// process alone, bound: every NIC of its package.
NicSetDecision select_nic_set(const std::vector<NicCandidate> &candidates, hwloc_topology_t topo,
                              hwloc_const_cpuset_t binding, int local_rank, int local_size,
                              int max_nics, const std::vector<std::string> &node_bindings = {});

// How many rails a process of this node opens at most: the admitted NICs
// (at most max_nics when > 0) and the stand-ins' other subnets (extras), at
// most max_rails; 1 with striping off.  Unlike the size of the process's
// set it does not depend on how many processes share the node, so every
// process of a node, and of a job on nodes of one kind, computes the same
// (mtl_efa_matching auto is chosen from it and must be the same job-wide).
int node_rails(size_t admitted, size_t extras, int max_nics, bool striping, int max_rails);

} // namespace efa
