// The NICs of a process's GPU: on GPU nodes (p4d, p5, p5en; trn1 with its
// Trainium chips) each GPU shares a PCIe switch (p4d: a root bus) with one
// or more EFA devices, and a process that moves its GPU's memory gets the most from
// those NICs (GPU to NIC without crossing the CPU's root complex).  So a
// process that uses one GPU takes the NICs under that GPU's switch as its
// set, before its CPU binding is asked (nic_select.hpp).
//
// Pure functions over an hwloc topology (with its PCI objects) and the
// environment passed in, so that the unit tests run them on the recorded
// layouts (tests/topologies).
#pragma once

#include <hwloc.h>

#include <cstddef>
#include <string>
#include <vector>

#include "nic_select.hpp"

namespace efa {

// The accelerators of the node, in PCI order (domain, bus, device,
// function: CUDA's order under CUDA_DEVICE_ORDER=PCI_BUS_ID, and its
// default order among identical GPUs): PCI 3D controllers (class 0x0302),
// processing accelerators (0x1200), and VGA controllers (0x0300) of
// NVIDIA and AMD.
struct Accelerator {
    std::string bus_id; // "dddd:bb:dd.f"
    unsigned vendor = 0;
};
std::vector<Accelerator> node_accelerators(hwloc_topology_t topo);

// Is 'setting' a form common_efa_gpu takes ("auto", "none", empty, an
// index, a PCI address of hex digits, ':' and '.')?  Whether the node has
// that accelerator is choose_gpu's to say.
bool gpu_setting_valid(const std::string &setting);

struct GpuChoice {
    std::string bus_id;   // empty: no GPU decides this process's NICs
    std::string reason;   // one line, for the verbose report
    std::string error;    // a setting that names no GPU of the node (said; nothing chosen)
    bool named = false;   // by common_efa_gpu or CUDA_VISIBLE_DEVICES: others may share it
    bool by_cuda = false; // named by CUDA_VISIBLE_DEVICES (most often one process per GPU)
    bool crowded = false; // more processes on the node than GPUs: some share theirs
};

// Which GPU this process uses, by 'setting' (common_efa_gpu):
//   "none"   no GPU: the CPU binding decides (as without GPUs);
//   N        the node's N-th accelerator in PCI order;
//   a PCI bus id ("0000:53:00.0", or "53:00.0" in domain 0);
//   "auto"   (or empty) CUDA_VISIBLE_DEVICES when it names one device
//            (cuda_visible; nullptr: unset; "" or -1: no GPU): by its
//            index among the NVIDIA GPUs, by its UUID ("GPU-...", or CUDA's
//            unique abbreviation; "MIG-GPU-<uuid>/..." names its GPU) where
//            the topology's OS devices carry NVIDIAUUID; one it cannot tell
//            (an index past the GPUs, a UUID the topology lacks, a MIG
//            device's own UUID) leaves the GPU unknown, said why.  Else,
//            where the node runs one process per GPU, the GPU of the local
//            rank's number: entry local_rank of a CUDA_VISIBLE_DEVICES
//            list with local_size entries (by index or UUID, as above), or
//            without a list accelerator local_rank when local_size is the
//            node's accelerators; else none.  A GPU so guessed only where
//            it is near the binding (the same package; unbound,
//            binding_is_partial: anywhere), and, where node_bindings gives
//            every local rank's binding (nic_share.hpp), only where every
//            process's guess is near its own: else the binding decides
//            for all of them, whose NICs it divides evenly.
GpuChoice choose_gpu(hwloc_topology_t topo, const std::string &setting, const char *cuda_visible,
                     int local_rank, int local_size, hwloc_const_cpuset_t binding,
                     const std::vector<std::string> &node_bindings = {});

// For a process that chooses nothing by GPU (one NIC): the error
// choose_gpu gives the setting when it names a GPU (an index or an
// address) this node lacks, on a topology of its own; empty otherwise.
std::string named_gpu_error(const char *setting);

// The candidates under the GPU's PCIe switch: the nearest bridge above the
// GPU, PCI-to-PCI or host (hwloc's host bridge is one root bus), with a
// candidate below it (p5: the switch's 4 NICs; p4d: the NIC on the GPU's
// root bus), in PCI order; failing that, those whose locality is the GPU's
// (its package, never the whole machine).  Empty: none near it, every NIC
// found (no locality to tell), or the GPU unknown.  *how: where they are,
// or why there are none.
std::vector<size_t> gpu_nics(const std::vector<NicCandidate> &candidates, hwloc_topology_t topo,
                             const std::string &gpu_bus_id, std::string *how);

// A GPU's set for one process: its NICs (gpu_nics), rotated by local_rank
// where the GPU was named (processes that may share it start on different
// NICs), else by the GPU's place among the accelerators below the same
// bridge or package (PCI order): GPU i of n starts at NIC i * K / n of the
// K, so GPUs sharing a switch spread over its NICs.  Cut to max_nics
// (> 0).  Empty where the GPU has no NIC near it; the reason says why.
NicSetDecision select_gpu_nic_set(const std::vector<NicCandidate> &candidates,
                                  hwloc_topology_t topo, const GpuChoice &gpu, int local_rank,
                                  int max_nics);

} // namespace efa
