// What the efa::select_nic unit tests (test_nic_select_inputs.cpp,
// test_nic_select_placement.cpp) share: generated hwloc XML topologies
// (tests/topologies/make_topologies.py documents their layout), the EFA
// devices each one holds, and fixtures that load p4d.xml and p5.48xlarge.xml.
//
// Expected answers are derived from that documented layout (PCI bus numbers
// below 0x80 sit on package 0, the others on package 1), not from hwloc
// queries, so the tests do not merely restate the implementation.
#pragma once

#include "nic_select.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#ifndef TOPOLOGY_DIR
#error "TOPOLOGY_DIR must point at tests/topologies"
#endif

namespace nic_select_test {

using efa::NicCandidate;
using efa::select_nic;

// Owns a topology loaded from an XML file or buffer.
class Topology {
  public:
    static Topology from_file(const std::string &name,
                              hwloc_type_filter_e io_filter = HWLOC_TYPE_FILTER_KEEP_IMPORTANT) {
        const std::string path = std::string(TOPOLOGY_DIR) + "/" + name;
        return Topology([&](hwloc_topology_t t) { return hwloc_topology_set_xml(t, path.c_str()); },
                        io_filter);
    }
    static Topology from_buffer(const std::string &xml) {
        return Topology(
            [&](hwloc_topology_t t) {
                return hwloc_topology_set_xmlbuffer(t, xml.c_str(),
                                                    static_cast<int>(xml.size()) + 1);
            },
            HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    }

    Topology(const Topology &) = delete;
    Topology &operator=(const Topology &) = delete;
    Topology(Topology &&other) noexcept : topo_(other.topo_) { other.topo_ = nullptr; }
    ~Topology() {
        if (topo_) {
            hwloc_topology_destroy(topo_);
        }
    }

    hwloc_topology_t get() const { return topo_; }

    hwloc_obj_t package(unsigned index) const {
        return hwloc_get_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, index);
    }
    // The index-th core (logical order) of a package.
    hwloc_obj_t core(unsigned package_index, unsigned core_index) const {
        return hwloc_get_obj_inside_cpuset_by_type(topo_, package(package_index)->cpuset,
                                                   HWLOC_OBJ_CORE, core_index);
    }
    int cores_per_package() const {
        return hwloc_get_nbobjs_inside_cpuset_by_type(topo_, package(0)->cpuset, HWLOC_OBJ_CORE);
    }

  private:
    template <typename Source> Topology(Source set_source, hwloc_type_filter_e io_filter) {
        if (hwloc_topology_init(&topo_) != 0) {
            topo_ = nullptr;
            return;
        }
        bool ok = set_source(topo_) == 0 &&
                  hwloc_topology_set_io_types_filter(topo_, io_filter) == 0 &&
                  hwloc_topology_load(topo_) == 0;
        if (!ok) {
            hwloc_topology_destroy(topo_);
            topo_ = nullptr;
        }
    }

    hwloc_topology_t topo_ = nullptr;
};

// Owns a cpuset built by a test.
class Cpuset {
  public:
    Cpuset() : bits_(hwloc_bitmap_alloc()) {}
    explicit Cpuset(hwloc_const_cpuset_t from) : bits_(hwloc_bitmap_dup(from)) {}
    Cpuset(const Cpuset &) = delete;
    Cpuset &operator=(const Cpuset &) = delete;
    ~Cpuset() { hwloc_bitmap_free(bits_); }
    hwloc_cpuset_t get() const { return bits_; }

  private:
    hwloc_cpuset_t bits_;
};

// A cpuset as the runtime gives a process's binding: a list ("0-3,8-11").
inline std::string list_of(hwloc_const_cpuset_t set) {
    char *text = nullptr;
    hwloc_bitmap_list_asprintf(&text, set);
    std::string result(text ? text : "");
    std::free(text);
    return result;
}

inline std::string bus_id(unsigned bus, unsigned dev) {
    char text[16];
    std::snprintf(text, sizeof text, "0000:%02x:%02x.0", bus, dev);
    return text;
}

// The four EFA devices of p4d.xml: rdmap<bus>s27 at <bus>:1b.0.
inline std::vector<NicCandidate> p4d_candidates() {
    std::vector<NicCandidate> nics;
    for (unsigned bus : {0x10u, 0x20u, 0x90u, 0xa0u}) {
        nics.push_back({"rdmap" + std::to_string(bus) + "s27-rdm", bus_id(bus, 0x1b)});
    }
    return nics;
}

// The 32 EFA devices of p5.48xlarge.xml: per switch at upstream bus B, NICs
// sit alone on buses B+3 .. B+6.
inline std::vector<NicCandidate> p5_candidates() {
    std::vector<NicCandidate> nics;
    for (unsigned package_base : {0x10u, 0x90u}) {
        for (unsigned sw = 0; sw < 4; ++sw) {
            for (unsigned port = 1; port <= 4; ++port) {
                const unsigned bus = package_base + 0x10 * sw + 2 + port;
                nics.push_back({"rdmap" + std::to_string(bus) + "s0-rdm", bus_id(bus, 0)});
            }
        }
    }
    return nics;
}

// The EFA devices of the layouts built by make_topologies.py's switched_io:
// per switch at upstream bus B, `accelerators` accelerator ports, then
// `per_switch` NICs alone on the buses after them.
inline std::vector<NicCandidate> switched_candidates(unsigned accelerators, unsigned per_switch) {
    std::vector<NicCandidate> nics;
    for (unsigned package_base : {0x10u, 0x90u}) {
        for (unsigned sw = 0; sw < 4; ++sw) {
            for (unsigned port = accelerators; port < accelerators + per_switch; ++port) {
                const unsigned bus = package_base + 0x10 * sw + 2 + port;
                nics.push_back({"rdmap" + std::to_string(bus) + "s0-rdm", bus_id(bus, 0)});
            }
        }
    }
    return nics;
}
inline std::vector<NicCandidate> p5en_candidates() {
    return switched_candidates(1, 2);
}
inline std::vector<NicCandidate> trn1_candidates() {
    return switched_candidates(2, 1);
}

// Ground truth from the generator's layout, independent of hwloc.
inline unsigned package_of(const NicCandidate &nic) {
    const unsigned bus = std::stoul(nic.pci_bus_id.substr(5, 2), nullptr, 16);
    return bus >= 0x80 ? 1 : 0;
}

// The PCIe switch a NIC of the p5-like layouts hangs under (its upstream
// bus; p4d: its own bus, one switch per NIC).
inline unsigned switch_of(const NicCandidate &nic) {
    return std::stoul(nic.pci_bus_id.substr(5, 2), nullptr, 16) & 0xf0;
}

inline const NicCandidate &pick(const std::vector<NicCandidate> &nics, const Topology &topo,
                                hwloc_const_cpuset_t binding, int rank, int size) {
    const auto decision = select_nic(nics, topo.get(), binding, rank, size);
    EXPECT_LT(decision.index, nics.size());
    EXPECT_FALSE(decision.reason.empty());
    EXPECT_EQ(decision.reason.find('\n'), std::string::npos) << decision.reason;
    return nics.at(decision.index);
}

inline bool contains(const std::string &text, const std::string &word) {
    return text.find(word) != std::string::npos;
}

class P4d : public ::testing::Test {
  protected:
    Topology topo = Topology::from_file("p4d.xml");
    std::vector<NicCandidate> nics = p4d_candidates();
    void SetUp() override { ASSERT_NE(topo.get(), nullptr) << "cannot load p4d.xml"; }
};

class P5 : public ::testing::Test {
  protected:
    Topology topo = Topology::from_file("p5.48xlarge.xml");
    std::vector<NicCandidate> nics = p5_candidates();
    void SetUp() override { ASSERT_NE(topo.get(), nullptr) << "cannot load p5.48xlarge.xml"; }
};

} // namespace nic_select_test
