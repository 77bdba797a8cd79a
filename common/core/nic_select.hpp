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
// binding:   cpuset the process is bound to; nullptr, empty, or covering the whole
//            machine means "unbound". PUs unknown to the topology are ignored.
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

} // namespace efa
