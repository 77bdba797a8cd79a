// efa::select_nic_set and efa::filter_nics: each process's share of the
// NICs nearest to it, on the p4d, p5.48xlarge, p5en.48xlarge and
// trn1.32xlarge layouts (tests/topologies) with 1 to 16 processes a node,
// and the nic_include / nic_exclude lists.
//
// The expected shares come from the layouts as make_topologies.py documents
// them (which package and PCIe switch each NIC is on), not from hwloc.
#include "nic_select_topology.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace nic_select_test;
using efa::filter_nics;
using efa::NicFilter;
using efa::select_nic_set;

struct Layout {
    const char *file;
    std::vector<NicCandidate> (*candidates)();
};

const Layout kLayouts[] = {
    {"p4d.xml", p4d_candidates},
    {"p5.48xlarge.xml", p5_candidates},
    {"p5en.48xlarge.xml", p5en_candidates},
    {"trn1.32xlarge.xml", trn1_candidates},
};

// Processes as a launcher places one per accelerator: the first half of
// the node's processes on package 0, the rest on package 1, each bound to
// an equal run of consecutive cores of its package (one process alone:
// bound to all of package 0).
struct Placed {
    unsigned package;
    Cpuset cores;
};

std::vector<Placed> place_processes(const Topology &topo, int count) {
    std::vector<Placed> placed(static_cast<size_t>(count));
    const int per_package = count > 1 ? count / 2 : 1;
    const int width = topo.cores_per_package() / per_package;
    for (int r = 0; r < count; ++r) {
        Placed &p = placed[static_cast<size_t>(r)];
        p.package = count > 1 ? static_cast<unsigned>(r / per_package) : 0;
        const int first = (r % per_package) * (width > 0 ? width : 1);
        for (int c = 0; c < std::max(width, 1); ++c) {
            hwloc_obj_t core =
                topo.core(p.package, static_cast<unsigned>((first + c) % topo.cores_per_package()));
            hwloc_bitmap_or(p.cores.get(), p.cores.get(), core->cpuset);
        }
    }
    return placed;
}

class EveryLayout : public ::testing::TestWithParam<std::tuple<int, int>> {};

// Every layout, 1, 2, 4, 8 and 16 processes: each set is on the process's
// own package, as large as its package's NICs divided among its package's
// processes (at least one), the NICs of the used packages are all used,
// and evenly: no NIC in two sets while there are NICs enough, else every
// NIC of a package in the same number of sets.
TEST_P(EveryLayout, SharesAreLocalWholeAndEven) {
    const Layout &layout = kLayouts[std::get<0>(GetParam())];
    const int count = std::get<1>(GetParam());
    const Topology topo = Topology::from_file(layout.file);
    ASSERT_NE(topo.get(), nullptr) << layout.file;
    const auto nics = layout.candidates();
    const size_t per_package_nics = nics.size() / 2;
    const size_t per_package_procs = count > 1 ? static_cast<size_t>(count) / 2 : 1;
    const size_t expected = std::max<size_t>(1, per_package_nics / per_package_procs);

    std::map<size_t, int> uses;
    const auto placed = place_processes(topo, count);
    for (int r = 0; r < count; ++r) {
        const auto d = select_nic_set(nics, topo.get(), placed[r].cores.get(), r, count, 0);
        SCOPED_TRACE(std::string(layout.file) + " rank " + std::to_string(r) + " of " +
                     std::to_string(count) + ": " + d.reason);
        ASSERT_EQ(d.indices.size(), expected);
        EXPECT_EQ(d.reason.find('\n'), std::string::npos);
        for (size_t i : d.indices) {
            ASSERT_LT(i, nics.size());
            EXPECT_EQ(package_of(nics[i]), placed[r].package) << nics[i].name;
            EXPECT_TRUE(contains(d.reason, nics[i].name)) << nics[i].name;
            ++uses[i];
        }
        // One NIC a process: the very NIC select_nic picks.
        if (expected == 1) {
            const auto one = select_nic(nics, topo.get(), placed[r].cores.get(), r, count);
            EXPECT_EQ(d.indices.front(), one.index) << one.reason;
        }
    }
    const size_t packages_used = count > 1 ? 2 : 1;
    EXPECT_EQ(uses.size(), per_package_nics * packages_used);
    std::set<int> counts;
    for (const auto &[nic, n] : uses) {
        counts.insert(n);
    }
    ASSERT_EQ(counts.size(), 1u) << "uneven use of the NICs";
    const size_t users =
        per_package_procs > per_package_nics ? per_package_procs / per_package_nics : 1;
    EXPECT_EQ(static_cast<size_t>(*counts.begin()), users);
}

INSTANTIATE_TEST_SUITE_P(NicSets, EveryLayout,
                         ::testing::Combine(::testing::Range(0, 4),
                                            ::testing::Values(1, 2, 4, 8, 16)));

// One process per GPU on a p5.48xlarge: 4 NICs each, all four under one
// PCIe switch; on a p5en.48xlarge 2, under one switch.
TEST(NicSet, P5EightProcessesTakeOneSwitchEach) {
    for (const Layout &layout : {kLayouts[1], kLayouts[2]}) {
        const Topology topo = Topology::from_file(layout.file);
        ASSERT_NE(topo.get(), nullptr);
        const auto nics = layout.candidates();
        const auto placed = place_processes(topo, 8);
        std::set<unsigned> switches;
        for (int r = 0; r < 8; ++r) {
            const auto d = select_nic_set(nics, topo.get(), placed[r].cores.get(), r, 8, 0);
            ASSERT_EQ(d.indices.size(), nics.size() / 8) << d.reason;
            std::set<unsigned> mine;
            for (size_t i : d.indices) {
                mine.insert(switch_of(nics[i]));
            }
            EXPECT_EQ(mine.size(), 1u) << layout.file << ": " << d.reason;
            switches.insert(*mine.begin());
        }
        EXPECT_EQ(switches.size(), 8u) << layout.file;
    }
}

// Ranks handed out round-robin over the packages (--map-by package), each
// bound to one core: the shares are still disjoint and local.
TEST(NicSet, RoundRobinOverPackagesStillDisjoint) {
    const Topology topo = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = p5_candidates();
    std::set<size_t> seen;
    for (int r = 0; r < 8; ++r) {
        const unsigned package = static_cast<unsigned>(r % 2);
        const auto d = select_nic_set(
            nics, topo.get(), topo.core(package, static_cast<unsigned>(r / 2))->cpuset, r, 8, 0);
        ASSERT_EQ(d.indices.size(), 4u) << d.reason;
        for (size_t i : d.indices) {
            EXPECT_EQ(package_of(nics[i]), package) << d.reason;
            EXPECT_TRUE(seen.insert(i).second) << nics[i].name << " in two sets";
        }
    }
}

// Processes packed where the even spread assumed fewer (plain mpirun -np 2
// binds to cores 0 and 1, both on package 0): they share the package's
// NICs, each with a primary of its own.
TEST(NicSet, ProcessesPackedOnOnePackageGetDistinctPrimaries) {
    const Topology topo = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = p5_candidates();
    for (int count : {2, 4, 8}) {
        std::set<size_t> primaries;
        for (int r = 0; r < count; ++r) {
            const auto d = select_nic_set(
                nics, topo.get(), topo.core(0, static_cast<unsigned>(r))->cpuset, r, count, 0);
            ASSERT_FALSE(d.indices.empty()) << d.reason;
            for (size_t i : d.indices) {
                EXPECT_EQ(package_of(nics[i]), 0u) << d.reason;
            }
            EXPECT_TRUE(primaries.insert(d.indices.front()).second)
                << count << " processes: " << nics[d.indices.front()].name << " twice; "
                << d.reason;
        }
    }
}

// An unknown local size: one NIC each, by local rank, as select_nic.
TEST(NicSet, UnknownLocalSizeSpreadsByLocalRank) {
    const Topology topo = Topology::from_file("p4d.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = p4d_candidates();
    for (int r = 0; r < 6; ++r) {
        const auto bound = select_nic_set(nics, topo.get(), topo.package(0)->cpuset, r, -1, 0);
        ASSERT_EQ(bound.indices.size(), 1u) << bound.reason;
        EXPECT_EQ(bound.indices.front(),
                  select_nic(nics, topo.get(), topo.package(0)->cpuset, r, -1).index)
            << bound.reason;
        const auto unbound = select_nic_set(nics, nullptr, nullptr, r, 0, 0);
        ASSERT_EQ(unbound.indices.size(), 1u) << unbound.reason;
        EXPECT_EQ(unbound.indices.front(), static_cast<size_t>(r % 4)) << unbound.reason;
    }
}

TEST(NicSet, MaxNicsCutsTheShare) {
    const Topology topo = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = p5_candidates();
    const auto whole = select_nic_set(nics, topo.get(), topo.package(1)->cpuset, 0, 1, 0);
    ASSERT_EQ(whole.indices.size(), 16u) << whole.reason;
    const auto cut = select_nic_set(nics, topo.get(), topo.package(1)->cpuset, 0, 1, 3);
    ASSERT_EQ(cut.indices.size(), 3u) << cut.reason;
    EXPECT_TRUE(std::equal(cut.indices.begin(), cut.indices.end(), whole.indices.begin()));
    EXPECT_TRUE(contains(cut.reason, "cut to 3")) << cut.reason;
}

// Unbound processes share every NIC in the caller's order: contiguous
// blocks while there are NICs enough, round-robin beyond.
TEST(NicSet, UnboundProcessesSplitTheCandidates) {
    const auto nics = p4d_candidates();
    const std::vector<std::vector<size_t>> two = {{0, 1}, {2, 3}};
    for (int r = 0; r < 2; ++r) {
        const auto d = select_nic_set(nics, nullptr, nullptr, r, 2, 0);
        EXPECT_EQ(d.indices, two[static_cast<size_t>(r)]) << d.reason;
        EXPECT_TRUE(contains(d.reason, "no topology")) << d.reason;
    }
    for (int r = 0; r < 8; ++r) {
        const auto d = select_nic_set(nics, nullptr, nullptr, r, 8, 0);
        ASSERT_EQ(d.indices.size(), 1u) << d.reason;
        EXPECT_EQ(d.indices.front(), static_cast<size_t>(r % 4)) << d.reason;
    }
    // Three processes over four NICs: every NIC used, none twice.
    std::set<size_t> seen;
    for (int r = 0; r < 3; ++r) {
        for (size_t i : select_nic_set(nics, nullptr, nullptr, r, 3, 0).indices) {
            EXPECT_TRUE(seen.insert(i).second);
        }
    }
    EXPECT_EQ(seen.size(), 4u);
    EXPECT_TRUE(select_nic_set({}, nullptr, nullptr, 0, 1, 0).indices.empty());
}

// --- nic_include / nic_exclude ---------------------------------------------

TEST(NicFilter, IncludeByDomainOrDeviceName) {
    const auto nics = p4d_candidates(); // rdmap16s27-rdm, rdmap32s27-rdm, ...
    const auto r = filter_nics(nics, NicFilter{" rdmap32s27 ,rdmap160s27-rdm", ""});
    EXPECT_EQ(r.admitted, (std::vector<size_t>{1, 3}));
    EXPECT_TRUE(r.unmatched.empty());
}

TEST(NicFilter, ExcludeKeepsTheRest) {
    const auto nics = p4d_candidates();
    const auto r = filter_nics(nics, NicFilter{"", "rdmap16s27"});
    EXPECT_EQ(r.admitted, (std::vector<size_t>{1, 2, 3}));
    EXPECT_TRUE(r.unmatched.empty());
}

// A name matches at a '-' boundary only, and one that matches nothing is
// reported (a mistyped exclude would otherwise keep its NIC in use).
TEST(NicFilter, PrefixIsNotAMatchAndUnknownNamesAreReported) {
    const auto nics = p4d_candidates();
    const auto r = filter_nics(nics, NicFilter{"", "rdmap16,rdmap32s27-rd"});
    EXPECT_EQ(r.admitted, (std::vector<size_t>{0, 1, 2, 3}));
    EXPECT_EQ(r.unmatched, (std::vector<std::string>{"rdmap16", "rdmap32s27-rd"}));
    const auto none = filter_nics(nics, NicFilter{"efa_9", ""});
    EXPECT_TRUE(none.admitted.empty());
    EXPECT_EQ(none.unmatched, (std::vector<std::string>{"efa_9"}));
}

TEST(NicFilter, EmptyListsAdmitEverything) {
    const auto nics = p5_candidates();
    const auto r = filter_nics(nics, NicFilter{});
    EXPECT_EQ(r.admitted.size(), nics.size());
    EXPECT_FALSE(r.conflicting || r.empty_item);
    const auto blank = filter_nics(nics, NicFilter{" ", "\t"});
    EXPECT_EQ(blank.admitted.size(), nics.size());
    EXPECT_FALSE(blank.conflicting || blank.empty_item);
}

// Both lists naming NICs conflict (blanks do not count); an empty item
// beside names is flagged as the typo it most likely is.
TEST(NicFilter, ConflictAndEmptyItemsAreFlagged) {
    const auto nics = p4d_candidates();
    EXPECT_TRUE(filter_nics(nics, NicFilter{"rdmap16s27", "rdmap32s27"}).conflicting);
    EXPECT_FALSE(filter_nics(nics, NicFilter{" ", "rdmap32s27"}).conflicting);
    EXPECT_TRUE(filter_nics(nics, NicFilter{"rdmap16s27,,rdmap32s27", ""}).empty_item);
    EXPECT_TRUE(filter_nics(nics, NicFilter{"", "rdmap16s27,"}).empty_item);
    EXPECT_FALSE(filter_nics(nics, NicFilter{"rdmap16s27 , rdmap32s27", ""}).empty_item);
}

} // namespace

// The node's rail count, which mtl_efa_matching auto reads: the same for
// every process of a node whatever their number (p4d with 8 processes: 4,
// though each process opens one NIC), cut by nics_per_proc and the rail
// limit, 1 with striping off.
TEST(NodeRails, TheNodesNotTheProcesss) {
    EXPECT_EQ(efa::node_rails(4, 0, 0, true, 4), 4);   // p4d, any number of processes
    EXPECT_EQ(efa::node_rails(32, 0, 0, true, 4), 4);  // p5: the rail limit
    EXPECT_EQ(efa::node_rails(32, 0, 1, true, 4), 1);  // common_efa_nics_per_proc 1
    EXPECT_EQ(efa::node_rails(16, 0, 2, true, 4), 2);  // common_efa_nics_per_proc 2
    EXPECT_EQ(efa::node_rails(1, 0, 0, true, 4), 1);   // one NIC
    EXPECT_EQ(efa::node_rails(1, 1, 0, true, 4), 2);   // a stand-in's second subnet
    EXPECT_EQ(efa::node_rails(1, 1, 1, true, 4), 2);   // ... which nics_per_proc does not cut
    EXPECT_EQ(efa::node_rails(16, 0, 0, false, 4), 1); // common_efa_stripe_min 0
    EXPECT_EQ(efa::node_rails(0, 0, 0, true, 4), 1);
}
