// efa::select_nic placing bound processes: on p4d (2 NICs per package) and
// p5.48xlarge (16 per package), ranks get a NIC of their own package and
// spread evenly over those, whatever the order of the candidates; and on a
// hand-made machine, the nearest locality wins. (Unusual inputs:
// test_nic_select_inputs.cpp.)
#include "nic_select_topology.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace nic_select_test;

// --- p4d: 2 NICs per package ---------------------------------------------

TEST_F(P4d, CoreOnPackage0GetsAPackage0Nic) {
    for (int core = 0; core < topo.cores_per_package(); ++core) {
        const auto &nic = pick(nics, topo, topo.core(0, core)->cpuset, 0, 1);
        EXPECT_EQ(package_of(nic), 0u) << nic.name << " for core " << core;
    }
}

TEST_F(P4d, SingleHardwareThreadBindingStaysOnItsPackage) {
    // PU P#24 is the second thread of package 1's first core.
    Cpuset thread;
    hwloc_bitmap_set(thread.get(), 24);
    const auto decision = select_nic(nics, topo.get(), thread.get(), 0, 1);
    EXPECT_EQ(package_of(nics[decision.index]), 1u) << decision.reason;
    EXPECT_TRUE(contains(decision.reason, "Package L#1")) << decision.reason;
}

// Eight ranks on consecutive cores of one package (--map-by core).
void expect_consecutive_cores_spread(const Topology &topo, const std::vector<NicCandidate> &nics,
                                     unsigned package, int first_rank) {
    std::map<std::string, int> uses;
    for (int i = 0; i < 8; ++i) {
        const auto &nic = pick(nics, topo, topo.core(package, i)->cpuset, first_rank + i, 16);
        EXPECT_EQ(package_of(nic), package) << nic.name;
        ++uses[nic.name];
    }
    ASSERT_EQ(uses.size(), 2u);
    for (const auto &[name, count] : uses) {
        EXPECT_EQ(count, 4) << name;
    }
}

TEST_F(P4d, EightRanksOnPackage0SpreadFourPerNic) {
    expect_consecutive_cores_spread(topo, nics, 0, 0);
}

TEST_F(P4d, EightRanksOnPackage1SpreadFourPerNic) {
    expect_consecutive_cores_spread(topo, nics, 1, 8);
}

TEST_F(P4d, RanksAlternatingPackagesSpreadFourPerNic) {
    // --map-by package: rank r on package r % 2, core r / 2. Every rank on
    // package 0 has an even local rank, which must not pin them all to one NIC.
    std::map<std::string, int> uses;
    for (int rank = 0; rank < 16; ++rank) {
        const unsigned package = rank % 2;
        const auto &nic = pick(nics, topo, topo.core(package, rank / 2)->cpuset, rank, 16);
        EXPECT_EQ(package_of(nic), package) << nic.name << " for rank " << rank;
        ++uses[nic.name];
    }
    ASSERT_EQ(uses.size(), 4u);
    for (const auto &[name, count] : uses) {
        EXPECT_EQ(count, 4) << name;
    }
}

TEST_F(P4d, RanksSharingAPackageBindingSpreadByLocalRank) {
    // --bind-to package: identical bindings, so only the local rank differs.
    std::map<std::string, int> uses;
    for (int rank = 0; rank < 8; ++rank) {
        const auto decision = select_nic(nics, topo.get(), topo.package(1)->cpuset, rank, 8);
        EXPECT_EQ(package_of(nics[decision.index]), 1u);
        EXPECT_TRUE(contains(decision.reason, "local rank")) << decision.reason;
        ++uses[nics[decision.index].name];
    }
    ASSERT_EQ(uses.size(), 2u);
    for (const auto &[name, count] : uses) {
        EXPECT_EQ(count, 4) << name;
    }
}

// --- candidate order ------------------------------------------------------

void expect_order_independent(const Topology &topo, std::vector<NicCandidate> nics,
                              int cores_per_package) {
    const int ranks = 2 * cores_per_package;
    auto choices = [&](const std::vector<NicCandidate> &list) {
        std::vector<std::string> names;
        for (int rank = 0; rank < ranks; ++rank) {
            // Mix binding styles: cores alternating packages, and whole packages.
            const unsigned package = rank % 2;
            names.push_back(
                pick(list, topo, topo.core(package, rank / 2)->cpuset, rank, ranks).name);
            names.push_back(pick(list, topo, topo.package(package)->cpuset, rank, ranks).name);
        }
        return names;
    };
    const auto reference = choices(nics);
    std::mt19937 rng(12345);
    for (int round = 0; round < 5; ++round) {
        std::shuffle(nics.begin(), nics.end(), rng);
        EXPECT_EQ(choices(nics), reference) << "shuffle round " << round;
    }
    std::reverse(nics.begin(), nics.end());
    EXPECT_EQ(choices(nics), reference) << "reversed";
}

TEST_F(P4d, CandidateOrderDoesNotMatter) {
    expect_order_independent(topo, nics, 8);
}

TEST_F(P5, CandidateOrderDoesNotMatter) {
    expect_order_independent(topo, nics, 16);
}

// --- p5: 16 NICs per package ---------------------------------------------

TEST_F(P5, RankOnPackage1GetsAPackage1Nic) {
    for (int core = 0; core < topo.cores_per_package(); ++core) {
        const auto &nic = pick(nics, topo, topo.core(1, core)->cpuset, core, 32);
        EXPECT_EQ(package_of(nic), 1u) << nic.name << " for core " << core;
    }
}

TEST_F(P5, SixteenRanksOnOnePackageUseEachNicOnce) {
    for (unsigned package = 0; package < 2; ++package) {
        std::set<std::string> used;
        for (int i = 0; i < 16; ++i) {
            const auto &nic = pick(nics, topo, topo.core(package, i)->cpuset, i, 16);
            EXPECT_EQ(package_of(nic), package) << nic.name;
            used.insert(nic.name);
        }
        EXPECT_EQ(used.size(), 16u) << "package " << package;
    }
}

TEST_F(P5, ThirtyTwoRanksAlternatingPackagesUseEachNicOnce) {
    std::set<std::string> used;
    for (int rank = 0; rank < 32; ++rank) {
        const unsigned package = rank % 2;
        const auto &nic = pick(nics, topo, topo.core(package, rank / 2)->cpuset, rank, 32);
        EXPECT_EQ(package_of(nic), package) << nic.name;
        used.insert(nic.name);
    }
    EXPECT_EQ(used.size(), 32u);
}

TEST_F(P5, NumaNodeBindingGetsThatNodesNics) {
    // PCIe switches hang below the package that holds NUMA node 1, so binding
    // to the node's CPUs selects among its 16 NICs; ranks sharing that binding
    // use each NIC once.
    hwloc_obj_t node = hwloc_get_obj_by_type(topo.get(), HWLOC_OBJ_NUMANODE, 1);
    ASSERT_NE(node, nullptr);
    std::set<std::string> used;
    for (int rank = 0; rank < 16; ++rank) {
        const auto &nic = pick(nics, topo, node->cpuset, rank, 16);
        EXPECT_EQ(package_of(nic), 1u) << nic.name;
        used.insert(nic.name);
    }
    EXPECT_EQ(used.size(), 16u);
}

TEST_F(P5, HardwareThreadBindingsSpreadAcrossNics) {
    // --bind-to hwthread: 32 ranks on the 32 threads of package 0, two per NIC.
    std::map<std::string, int> uses;
    for (int rank = 0; rank < 32; ++rank) {
        hwloc_obj_t pu = hwloc_get_obj_inside_cpuset_by_type(topo.get(), topo.package(0)->cpuset,
                                                             HWLOC_OBJ_PU, rank);
        ASSERT_NE(pu, nullptr);
        const auto &nic = pick(nics, topo, pu->cpuset, rank, 32);
        EXPECT_EQ(package_of(nic), 0u);
        ++uses[nic.name];
    }
    ASSERT_EQ(uses.size(), 16u);
    for (const auto &[name, count] : uses) {
        EXPECT_EQ(count, 2) << name;
    }
}

TEST_F(P5, FirstThreadOfEachCoreUsesEveryNic) {
    // One rank per core bound to that core's first hardware thread (e.g.
    // --map-by core --bind-to hwthread): 16 ranks on package 0's 16 cores
    // use each of its 16 NICs once, not every other one twice.
    std::set<std::string> used;
    for (int rank = 0; rank < 16; ++rank) {
        hwloc_obj_t first = hwloc_get_obj_inside_cpuset_by_type(
            topo.get(), topo.core(0, static_cast<unsigned>(rank))->cpuset, HWLOC_OBJ_PU, 0);
        ASSERT_NE(first, nullptr);
        const auto &nic = pick(nics, topo, first->cpuset, rank, 16);
        EXPECT_EQ(package_of(nic), 0u) << nic.name;
        used.insert(nic.name);
    }
    EXPECT_EQ(used.size(), 16u);
}

TEST_F(P4d, FirstThreadOfEachOfTwoCoresUsesBothNics) {
    std::set<std::string> used;
    for (int rank = 0; rank < 2; ++rank) {
        hwloc_obj_t first = hwloc_get_obj_inside_cpuset_by_type(
            topo.get(), topo.core(1, static_cast<unsigned>(rank))->cpuset, HWLOC_OBJ_PU, 0);
        ASSERT_NE(first, nullptr);
        used.insert(pick(nics, topo, first->cpuset, rank, 2).name);
    }
    EXPECT_EQ(used.size(), 2u);
}

// --- nearness ordering, on a hand-made machine ---------------------------

// Two packages of two single-thread cores. NIC "root" hangs off the machine
// (no CPU locality beyond the whole box), "pkg0"/"pkg1" off their packages.
const char *const kMixedLocalityXml = R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001" gp_index="1">
    <object type="NUMANode" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2" local_memory="1073741824"/>
    <object type="Package" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3">
      <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6">
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="7"/>
      </object>
      <object type="Bridge" gp_index="8" bridge_type="0-1" depth="0" bridge_pci="0000:[10-10]">
        <object type="PCIDev" gp_index="9" pci_busid="0000:10:00.0" pci_type="0200 [1d0f:efa1] [1d0f:efa1] 00" pci_link_speed="0.000000"/>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="10">
      <object type="Core" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="11">
        <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="12"/>
      </object>
      <object type="Core" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="13">
        <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="14"/>
      </object>
      <object type="Bridge" gp_index="15" bridge_type="0-1" depth="0" bridge_pci="0000:[20-20]">
        <object type="PCIDev" gp_index="16" pci_busid="0000:20:00.0" pci_type="0200 [1d0f:efa1] [1d0f:efa1] 00" pci_link_speed="0.000000"/>
      </object>
    </object>
    <object type="Bridge" gp_index="17" bridge_type="0-1" depth="0" bridge_pci="0000:[30-30]">
      <object type="PCIDev" gp_index="18" pci_busid="0000:30:00.0" pci_type="0200 [1d0f:efa1] [1d0f:efa1] 00" pci_link_speed="0.000000"/>
    </object>
  </object>
</topology>
)";

class MixedLocality : public ::testing::Test {
  protected:
    Topology topo = Topology::from_buffer(kMixedLocalityXml);
    const NicCandidate pkg0{"pkg0", "0000:10:00.0"};
    const NicCandidate pkg1{"pkg1", "0000:20:00.0"};
    const NicCandidate root{"root", "0000:30:00.0"};
    void SetUp() override { ASSERT_NE(topo.get(), nullptr); }

    std::string choose(const std::vector<NicCandidate> &list, unsigned pu, int rank) {
        Cpuset binding;
        hwloc_bitmap_set(binding.get(), pu);
        return pick(list, topo, binding.get(), rank, 4).name;
    }
};

TEST_F(MixedLocality, SmallerOverlappingLocalityWins) {
    // The root NIC overlaps every binding, but the package NIC is deeper.
    for (int rank = 0; rank < 4; ++rank) {
        EXPECT_EQ(choose({root, pkg0, pkg1}, 0, rank), "pkg0");
        EXPECT_EQ(choose({root, pkg0, pkg1}, 1, rank), "pkg0");
        EXPECT_EQ(choose({pkg1, root, pkg0}, 2, rank), "pkg1");
        EXPECT_EQ(choose({pkg1, root, pkg0}, 3, rank), "pkg1");
    }
}

TEST_F(MixedLocality, OverlappingLocalityBeatsOtherPackage) {
    for (int rank = 0; rank < 4; ++rank) {
        EXPECT_EQ(choose({pkg1, root}, 0, rank), "root");
        EXPECT_EQ(choose({root, pkg0}, 3, rank), "root");
    }
}

TEST_F(MixedLocality, FarNicsAreStillUsedWhenNothingIsLocal) {
    const std::vector<NicCandidate> list = {pkg1, {"ghost", "0000:40:00.0"}};
    Cpuset binding;
    hwloc_bitmap_set(binding.get(), 0);
    for (int rank = 0; rank < 4; ++rank) {
        const auto decision = select_nic(list, topo.get(), binding.get(), rank, 4);
        EXPECT_EQ(decision.index, 0u);
        EXPECT_TRUE(contains(decision.reason, "none is local")) << decision.reason;
    }
}

} // namespace
