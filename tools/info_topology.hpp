// efa-mpi-info's NIC sets: the EFA devices of a recorded hwloc topology,
// the bindings it gives the processes of a node, and each process's set as
// the core chooses it (core.cpp's choose_nics: its GPU's NICs, else by its
// binding).
#pragma once

#include <hwloc.h>

#include <string>
#include <vector>

#include "nic_select.hpp"

namespace efa::info {

// The EFA devices (Amazon's OpenFabrics devices) of a topology.
std::vector<efa::NicCandidate> recorded_nics(hwloc_topology_t topo);
// Process r of n bound to an equal share of the cores.
void bind_share(hwloc_topology_t topo, int r, int n, hwloc_bitmap_t out);
// Process r bound to core r (mod the cores), as Open MPI binds 1 or 2
// processes by default (a topology without cores: its processing units).
void bind_core(hwloc_topology_t topo, int r, hwloc_bitmap_t out);
// Process r bound to the whole package r mod P, as Open MPI binds by
// default above 2 processes (a topology without packages: every PU).
void bind_package(hwloc_topology_t topo, int r, hwloc_bitmap_t out);
// This machine's topology (xml empty) or a recorded one, with its PCI
// devices; nullptr where it cannot be loaded.
hwloc_topology_t load_topology(const std::string &xml);
// Process r's set: the NICs of its GPU (gpu: as common_efa_gpu; visible:
// CUDA_VISIBLE_DEVICES as the processes would have it, or nullptr), else
// by its binding.  node_bindings: every process's binding as a list, as
// the runtime gives them (select_nic_set).  *error: gpu names no
// accelerator of the topology.
efa::NicSetDecision process_nic_set(const std::vector<efa::NicCandidate> &cands,
                                    hwloc_topology_t topo, const std::string &gpu,
                                    const char *visible, hwloc_const_bitmap_t binding, int r,
                                    int local_size, int nics_per_proc,
                                    const std::vector<std::string> &node_bindings,
                                    std::string *error);

} // namespace efa::info
