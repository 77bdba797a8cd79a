#include "info_topology.hpp"

#include <cstdio>

#include "gpu_nics.hpp"

namespace efa::info {

// The EFA devices of a recorded topology: its OpenFabrics OS devices on an
// Amazon PCI device, by that device's address.
std::vector<efa::NicCandidate> recorded_nics(hwloc_topology_t topo) {
    std::vector<efa::NicCandidate> out;
    for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o;
         o = hwloc_get_next_osdev(topo, o)) {
        if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || !o->name) {
            continue;
        }
        // EFA devices only: Amazon's (other RDMA devices are OpenFabrics too).
        if (!o->parent || o->parent->type != HWLOC_OBJ_PCI_DEVICE ||
            o->parent->attr->pcidev.vendor_id != 0x1d0f) {
            continue;
        }
        const auto &p = o->parent->attr->pcidev;
        char pci[32];
        std::snprintf(pci, sizeof(pci), "%04x:%02x:%02x.%x", p.domain, p.bus, p.dev, p.func);
        // (named as libfabric's efa provider names its RDM domain, the
        // name the components' NIC lists see)
        out.push_back({std::string(o->name) + "-rdm", pci});
    }
    return out;
}

// Process r of n bound to an equal share of the cores, in hwloc's logical
// order (the first half of the processes on the first packages).
void bind_share(hwloc_topology_t topo, int r, int n, hwloc_bitmap_t out) {
    // (a topology without cores: its processing units)
    const hwloc_obj_type_t unit =
        hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    const int cores = hwloc_get_nbobjs_by_type(topo, unit);
    hwloc_bitmap_zero(out);
    if (cores <= 0) {
        return;
    }
    const int first = static_cast<int>(static_cast<long>(r) * cores / n);
    int last = static_cast<int>(static_cast<long>(r + 1) * cores / n);
    if (last <= first) {
        last = first + 1;
    }
    for (int c = first; c < last && c < cores; ++c) {
        hwloc_bitmap_or(out, out, hwloc_get_obj_by_type(topo, unit, c)->cpuset);
    }
}

void bind_core(hwloc_topology_t topo, int r, hwloc_bitmap_t out) {
    const hwloc_obj_type_t unit =
        hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    const int cores = hwloc_get_nbobjs_by_type(topo, unit);
    hwloc_bitmap_zero(out);
    if (cores > 0) {
        hwloc_bitmap_copy(out, hwloc_get_obj_by_type(topo, unit, r % cores)->cpuset);
    }
}

void bind_package(hwloc_topology_t topo, int r, hwloc_bitmap_t out) {
    const int packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    if (packages <= 0) {
        hwloc_bitmap_copy(out, hwloc_topology_get_topology_cpuset(topo));
        return;
    }
    hwloc_bitmap_copy(out, hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, r % packages)->cpuset);
}

hwloc_topology_t load_topology(const std::string &xml) {
    hwloc_topology_t topo = nullptr;
    if (hwloc_topology_init(&topo) != 0) {
        return nullptr;
    }
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if ((!xml.empty() && hwloc_topology_set_xml(topo, xml.c_str()) != 0) ||
        hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return nullptr;
    }
    return topo;
}

efa::NicSetDecision process_nic_set(const std::vector<efa::NicCandidate> &cands,
                                    hwloc_topology_t topo, const std::string &gpu_setting,
                                    const char *visible, hwloc_const_bitmap_t binding, int r,
                                    int local_size, int nics_per_proc,
                                    const std::vector<std::string> &node_bindings,
                                    std::string *error) {
    const efa::GpuChoice gpu =
        efa::choose_gpu(topo, gpu_setting, visible, r, local_size, binding, node_bindings);
    efa::NicSetDecision d;
    if (!gpu.error.empty()) {
        *error = gpu.error;
        return d;
    }
    if (!gpu.bus_id.empty()) {
        d = efa::select_gpu_nic_set(cands, topo, gpu, r, nics_per_proc);
    }
    if (d.indices.empty()) {
        // (as the core says it: why the GPU decides nothing)
        const std::string no_gpu = gpu.bus_id.empty() ? gpu.reason : d.reason;
        d = efa::select_nic_set(cands, topo, binding, r, local_size, nics_per_proc, node_bindings);
        d.reason += "; " + no_gpu;
    }
    return d;
}

} // namespace efa::info
