// efa::select_nic given unusual inputs: the topology files themselves,
// degenerate arguments, processes that are not bound (or bound to nothing
// the machine has), candidates missing from the topology, and the spellings
// of a candidate's PCI bus id or device name. (Where bound processes go:
// test_nic_select_placement.cpp.)
#include "nic_select_topology.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace nic_select_test;

// A recorded topology as a process confined by a cgroup sees it: its
// allowed_cpuset (hwloc's topology cpuset) is 'allowed', its
// complete_cpuset still the whole machine.
std::string with_allowed_cpuset(const std::string &file, hwloc_const_cpuset_t allowed) {
    std::ifstream in(std::string(TOPOLOGY_DIR) + "/" + file);
    std::stringstream xml;
    xml << in.rdbuf();
    char *text = nullptr;
    hwloc_bitmap_asprintf(&text, allowed);
    const std::string bits = text ? text : "";
    std::free(text);
    return std::regex_replace(xml.str(), std::regex("allowed_cpuset=\"[^\"]*\""),
                              "allowed_cpuset=\"" + bits + "\"",
                              std::regex_constants::format_first_only);
}

// --- topology files -------------------------------------------------------

TEST(Topologies, FilesHaveTheDocumentedShape) {
    for (const char *name : {"p4d.xml", "p5.48xlarge.xml"}) {
        SCOPED_TRACE(name);
        Topology topo = Topology::from_file(name);
        ASSERT_NE(topo.get(), nullptr);
        EXPECT_EQ(hwloc_get_nbobjs_by_type(topo.get(), HWLOC_OBJ_PACKAGE), 2);
        EXPECT_EQ(hwloc_get_nbobjs_by_type(topo.get(), HWLOC_OBJ_NUMANODE), 2);
        const bool p4d = std::string(name) == "p4d.xml";
        const auto nics = p4d ? p4d_candidates() : p5_candidates();
        int efa = 0, gpus = 0;
        for (hwloc_obj_t dev = hwloc_get_next_pcidev(topo.get(), nullptr); dev;
             dev = hwloc_get_next_pcidev(topo.get(), dev)) {
            efa += dev->attr->pcidev.vendor_id == 0x1d0f;
            gpus += dev->attr->pcidev.vendor_id == 0x10de;
        }
        EXPECT_EQ(efa, static_cast<int>(nics.size()));
        EXPECT_EQ(gpus, 8);
        for (const auto &nic : nics) {
            SCOPED_TRACE(nic.pci_bus_id);
            hwloc_obj_t dev = hwloc_get_pcidev_by_busidstring(topo.get(), nic.pci_bus_id.c_str());
            ASSERT_NE(dev, nullptr);
            EXPECT_EQ(dev->attr->pcidev.vendor_id, 0x1d0f);
            hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topo.get(), dev);
            ASSERT_EQ(local->type, HWLOC_OBJ_PACKAGE);
            EXPECT_EQ(local->logical_index, package_of(nic));
        }
    }
}

// --- degenerate inputs ----------------------------------------------------

TEST(SelectNic, EmptyCandidatesReturnIndexZeroWithReason) {
    Topology topo = Topology::from_file("p4d.xml");
    Cpuset core;
    hwloc_bitmap_set(core.get(), 3);
    for (hwloc_topology_t t : {topo.get(), static_cast<hwloc_topology_t>(nullptr)}) {
        for (hwloc_const_cpuset_t binding : {static_cast<hwloc_const_cpuset_t>(nullptr),
                                             static_cast<hwloc_const_cpuset_t>(core.get())}) {
            const auto decision = select_nic({}, t, binding, 5, 8);
            EXPECT_EQ(decision.index, 0u);
            EXPECT_FALSE(decision.reason.empty());
        }
    }
}

TEST(SelectNic, NullTopologyRoundRobins) {
    const auto nics = p4d_candidates();
    Cpuset core;
    hwloc_bitmap_set(core.get(), 0);
    for (int rank = 0; rank < 8; ++rank) {
        EXPECT_EQ(select_nic(nics, nullptr, core.get(), rank, 8).index, rank % nics.size());
    }
}

TEST_F(P4d, NegativeLocalRankDoesNotCrash) {
    EXPECT_LT(select_nic(nics, topo.get(), nullptr, -3, 8).index, nics.size());
    EXPECT_LT(select_nic(nics, topo.get(), topo.core(1, 2)->cpuset, -3, 0).index, nics.size());
}

// --- unbound processes ----------------------------------------------------

TEST_F(P4d, UnboundRanksRoundRobinOverAllNics) {
    std::map<std::string, int> uses;
    for (int rank = 0; rank < 8; ++rank) {
        const auto decision = select_nic(nics, topo.get(), nullptr, rank, 8);
        EXPECT_EQ(decision.index, static_cast<size_t>(rank) % nics.size());
        EXPECT_TRUE(contains(decision.reason, "not bound")) << decision.reason;
        EXPECT_TRUE(contains(decision.reason, "round-robin")) << decision.reason;
        ++uses[nics[decision.index].name];
    }
    ASSERT_EQ(uses.size(), 4u);
    for (const auto &[name, count] : uses) {
        EXPECT_EQ(count, 2) << name;
    }
}

TEST_F(P4d, EmptyBindingIsUnbound) {
    Cpuset empty;
    for (int rank = 0; rank < 8; ++rank) {
        const auto decision = select_nic(nics, topo.get(), empty.get(), rank, 8);
        EXPECT_EQ(decision.index, static_cast<size_t>(rank) % nics.size());
        EXPECT_TRUE(contains(decision.reason, "not bound")) << decision.reason;
    }
}

TEST_F(P4d, WholeMachineBindingIsUnbound) {
    Cpuset machine(hwloc_topology_get_topology_cpuset(topo.get()));
    // A "bind to everything" bitmap that also names PUs this machine lacks.
    Cpuset everything;
    hwloc_bitmap_fill(everything.get());
    for (hwloc_const_cpuset_t binding : {static_cast<hwloc_const_cpuset_t>(machine.get()),
                                         static_cast<hwloc_const_cpuset_t>(everything.get())}) {
        for (int rank = 0; rank < 8; ++rank) {
            const auto decision = select_nic(nics, topo.get(), binding, rank, 8);
            EXPECT_EQ(decision.index, static_cast<size_t>(rank) % nics.size());
            EXPECT_TRUE(contains(decision.reason, "not bound")) << decision.reason;
        }
    }
}

TEST_F(P4d, BindingOnlyToUnknownPusIsUnbound) {
    Cpuset elsewhere;
    hwloc_bitmap_set_range(elsewhere.get(), 200, 203);
    EXPECT_EQ(select_nic(nics, topo.get(), elsewhere.get(), 3, 8).index, 3u);
}

TEST_F(P4d, BindingToBothPackagesButNotAllPusIsBound) {
    // Half of each package: bound, and every NIC overlaps equally.
    Cpuset half;
    for (unsigned package = 0; package < 2; ++package) {
        for (unsigned core = 0; core < 4; ++core) {
            hwloc_bitmap_or(half.get(), half.get(), topo.core(package, core)->cpuset);
        }
    }
    const auto decision = select_nic(nics, topo.get(), half.get(), 1, 8);
    EXPECT_TRUE(contains(decision.reason, "bound to PUs")) << decision.reason;
    EXPECT_TRUE(contains(decision.reason, "of 4 nearest")) << decision.reason;
}

// A cgroup confines the process to package 0, and it is bound to all of
// it: bound (the topology's cpuset is then package 0, but the machine has
// another package), so it takes package 0's NICs, not every NIC in turn.
TEST(SelectNic, ConfinedToAPackageAndBoundToAllOfItIsBound) {
    const Topology whole = Topology::from_file("p4d.xml");
    ASSERT_NE(whole.get(), nullptr);
    const Topology topo =
        Topology::from_buffer(with_allowed_cpuset("p4d.xml", whole.package(0)->cpuset));
    ASSERT_NE(topo.get(), nullptr);
    hwloc_const_cpuset_t allowed = hwloc_topology_get_topology_cpuset(topo.get());
    ASSERT_TRUE(hwloc_bitmap_isequal(allowed, whole.package(0)->cpuset));
    ASSERT_FALSE(hwloc_bitmap_isequal(allowed, hwloc_topology_get_complete_cpuset(topo.get())));
    const auto nics = p4d_candidates();
    for (int rank = 0; rank < 4; ++rank) {
        const auto one = select_nic(nics, topo.get(), allowed, rank, 4);
        EXPECT_TRUE(contains(one.reason, "bound to PUs")) << one.reason;
        EXPECT_EQ(package_of(nics[one.index]), 0u) << "rank " << rank << ": " << one.reason;
        const auto set = efa::select_nic_set(nics, topo.get(), allowed, rank, 4, 0);
        ASSERT_FALSE(set.indices.empty());
        for (size_t i : set.indices) {
            EXPECT_EQ(package_of(nics[i]), 0u) << "rank " << rank << ": " << set.reason;
        }
    }
}

// Kept off one core only (reserved for the system) and bound to the rest:
// that says nothing of where the process runs, so unbound, as before.
TEST(SelectNic, KeptOffOneCoreAndBoundToTheRestIsUnbound) {
    const Topology whole = Topology::from_file("p4d.xml");
    ASSERT_NE(whole.get(), nullptr);
    Cpuset allowed(hwloc_topology_get_topology_cpuset(whole.get()));
    hwloc_bitmap_andnot(allowed.get(), allowed.get(), whole.core(0, 0)->cpuset);
    const Topology topo = Topology::from_buffer(with_allowed_cpuset("p4d.xml", allowed.get()));
    ASSERT_NE(topo.get(), nullptr);
    hwloc_const_cpuset_t all = hwloc_topology_get_topology_cpuset(topo.get());
    ASSERT_TRUE(hwloc_bitmap_isequal(all, allowed.get()));
    const auto nics = p4d_candidates();
    for (int rank = 0; rank < 8; ++rank) {
        const auto decision = select_nic(nics, topo.get(), all, rank, 8);
        EXPECT_EQ(decision.index, static_cast<size_t>(rank) % nics.size());
        EXPECT_TRUE(contains(decision.reason, "not bound")) << decision.reason;
    }
}

// --- candidates missing from the topology --------------------------------

TEST_F(P4d, CandidatesMissingFromTopologyRoundRobin) {
    const std::vector<NicCandidate> ghosts = {
        {"ghost0-rdm", "0000:77:00.0"}, // well-formed but absent
        {"ghost1-rdm", ""},             // unknown bus id and no matching OS device
        {"ghost2-rdm", "not-a-bus-id"},
    };
    for (int rank = 0; rank < 6; ++rank) {
        const auto decision = select_nic(ghosts, topo.get(), topo.core(0, 1)->cpuset, rank, 6);
        EXPECT_EQ(decision.index, static_cast<size_t>(rank) % ghosts.size());
        EXPECT_TRUE(contains(decision.reason, "round-robin")) << decision.reason;
        EXPECT_TRUE(contains(decision.reason, "not found in the topology")) << decision.reason;
    }
}

TEST(SelectNic, TopologyWithoutIoObjectsRoundRobins) {
    Topology topo = Topology::from_file("p4d.xml", HWLOC_TYPE_FILTER_KEEP_NONE);
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = p4d_candidates();
    const auto decision = select_nic(nics, topo.get(), topo.core(1, 0)->cpuset, 2, 8);
    EXPECT_EQ(decision.index, 2u);
    EXPECT_TRUE(contains(decision.reason, "not found in the topology")) << decision.reason;
}

TEST_F(P4d, FoundNicBeatsMissingOnes) {
    // Only one real NIC (package 0). Ranks on package 1 still get it: a NIC
    // on the other package is nearer than one we cannot place at all.
    const std::vector<NicCandidate> mixed = {
        {"ghost-a", "0000:77:00.0"}, nics[1], {"ghost-b", "0000:78:00.0"}};
    for (unsigned package = 0; package < 2; ++package) {
        for (int rank = 0; rank < 4; ++rank) {
            const auto decision =
                select_nic(mixed, topo.get(), topo.core(package, rank)->cpuset, rank, 4);
            EXPECT_EQ(decision.index, 1u) << decision.reason;
            EXPECT_TRUE(contains(decision.reason, "2 NIC(s) not found")) << decision.reason;
        }
    }
}

// --- how candidates are matched ------------------------------------------

TEST_F(P4d, BusIdFormsAreAcceptedAndMalformedOnesRejected) {
    // Only the package-1 NIC is given in each list, next to a far package-0
    // NIC; a rank on package 1 must find it whatever the spelling.
    for (const char *spelling : {"0000:90:1b.0", "90:1b.0", "0000:90:1B.0", "0:90:1b.0"}) {
        const std::vector<NicCandidate> list = {{"far", "0000:10:1b.0"}, {"near", spelling}};
        const auto decision = select_nic(list, topo.get(), topo.core(1, 0)->cpuset, 0, 1);
        EXPECT_EQ(decision.index, 1u) << spelling << ": " << decision.reason;
    }
    // Out of range or trailing junk must not alias 0000:90:1b.0.
    for (const char *spelling : {"0000:90:1b.0x", "0000:190:1b.0", "0000:90:1b.9", "0000:90:3b.0",
                                 "10000:90:1b.0", "0000:90:1b", ":90:1b.0", "0000::1b.0"}) {
        const std::vector<NicCandidate> list = {{"far", "0000:10:1b.0"}, {"bogus", spelling}};
        const auto decision = select_nic(list, topo.get(), topo.core(1, 0)->cpuset, 1, 2);
        EXPECT_EQ(decision.index, 0u) << spelling << ": " << decision.reason;
    }
}

TEST_F(P4d, CandidateWithoutBusIdIsFoundByOsDeviceName) {
    std::vector<NicCandidate> unnamed = nics;
    for (auto &nic : unnamed) {
        nic.pci_bus_id.clear();
    }
    for (int rank = 0; rank < 4; ++rank) {
        const auto decision = select_nic(unnamed, topo.get(), topo.core(1, rank)->cpuset, rank, 4);
        EXPECT_EQ(package_of(nics[decision.index]), 1u) << decision.reason;
        EXPECT_TRUE(contains(decision.reason, "nearest")) << decision.reason;
    }
    // A name that merely starts with a device name is not that device.
    const std::vector<NicCandidate> lookalike = {{"rdmap16s27x-rdm", ""}, {"rdmap144s2-rdm", ""}};
    const auto decision = select_nic(lookalike, topo.get(), topo.core(0, 0)->cpuset, 1, 2);
    EXPECT_EQ(decision.index, 1u);
    EXPECT_TRUE(contains(decision.reason, "round-robin")) << decision.reason;
}

TEST(SelectNic, IoFilterKeepAllGivesSameChoices) {
    Topology important = Topology::from_file("p5.48xlarge.xml");
    Topology all = Topology::from_file("p5.48xlarge.xml", HWLOC_TYPE_FILTER_KEEP_ALL);
    ASSERT_NE(important.get(), nullptr);
    ASSERT_NE(all.get(), nullptr);
    const auto nics = p5_candidates();
    for (int rank = 0; rank < 32; ++rank) {
        const unsigned package = rank % 2, core = rank / 2;
        EXPECT_EQ(pick(nics, important, important.core(package, core)->cpuset, rank, 32).name,
                  pick(nics, all, all.core(package, core)->cpuset, rank, 32).name);
    }
}

} // namespace
