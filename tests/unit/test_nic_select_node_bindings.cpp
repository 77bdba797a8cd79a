// efa::select_nic_set given the bindings of the node's processes (as the
// runtime registers them before the modex): who shares a pool of NICs and
// each sharer's spread index come from them, so processes bound alike (to a
// package, as Open MPI binds them by default for more than two processes)
// and mapped round-robin over the packages still use every NIC evenly.  And
// where the bindings cannot tell, exactly the decision made without them.
#include "nic_select_topology.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace nic_select_test;
using efa::select_nic_set;

// Ranks 0..count-1 handed out round-robin over the two packages (Open
// MPI's default for more than two processes, --map-by package) or in
// order (--map-by slot: the first half on package 0), each bound to its
// whole package: the runtime's cpuset list of each, by local rank.
std::vector<std::string> package_bindings(const Topology &topo, int count, bool round_robin) {
    std::vector<std::string> bindings;
    for (int r = 0; r < count; ++r) {
        const unsigned package = round_robin ? r % 2 : (r < count / 2 ? 0 : 1);
        bindings.push_back(list_of(topo.package(package)->cpuset));
    }
    return bindings;
}

unsigned package_of_rank(int r, int count, bool round_robin) {
    return round_robin ? r % 2 : (r < count / 2 ? 0 : 1);
}

struct Binding {
    Cpuset bits;
    explicit Binding(const std::string &list) {
        hwloc_bitmap_list_sscanf(bits.get(), list.c_str());
    }
};

// Each process's set, decided with the node's bindings; checks that the
// reason names them as the source of the spread index.
std::vector<std::vector<size_t>> sets_with(const Topology &topo,
                                           const std::vector<NicCandidate> &nics,
                                           const std::vector<std::string> &bindings) {
    std::vector<std::vector<size_t>> sets;
    const int count = static_cast<int>(bindings.size());
    for (int r = 0; r < count; ++r) {
        const Binding own(bindings[r]);
        const auto d = select_nic_set(nics, topo.get(), own.bits.get(), r, count, 0, bindings);
        EXPECT_TRUE(contains(d.reason, "from the node's bindings (")) << d.reason;
        EXPECT_EQ(d.reason.find('\n'), std::string::npos);
        sets.push_back(d.indices);
    }
    return sets;
}

// p4d, 8 processes mapped round-robin by package and bound to their
// package: each of the 4 NICs serves 2 processes of its own package.
// (Without the bindings the local ranks 0, 2, 4, 6 of package 0 all take
// its first NIC: 2 NICs for 4 processes each.)
TEST_F(P4d, NicNodeBindingsRoundRobinByPackageUsesEveryNic) {
    const auto bindings = package_bindings(topo, 8, true);
    const auto sets = sets_with(topo, nics, bindings);
    std::map<size_t, int> uses;
    for (int r = 0; r < 8; ++r) {
        ASSERT_EQ(sets[r].size(), 1u);
        EXPECT_EQ(package_of(nics[sets[r][0]]), package_of_rank(r, 8, true));
        ++uses[sets[r][0]];
    }
    EXPECT_EQ(uses.size(), 4u);
    for (const auto &[nic, n] : uses) {
        EXPECT_EQ(n, 2) << nics[nic].name;
    }
}

// The reason says where the index came from: the 3rd of package 0's 4.
TEST_F(P4d, NicNodeBindingsReasonSaysWhichOfThePool) {
    const auto bindings = package_bindings(topo, 8, true);
    const Binding own(bindings[4]);
    const auto d = select_nic_set(nics, topo.get(), own.bits.get(), 4, 8, 0, bindings);
    EXPECT_TRUE(contains(d.reason, "spread index 2 from the node's bindings (3rd of 4 processes "
                                   "bound in this pool)"))
        << d.reason;
    EXPECT_TRUE(contains(d.reason, "4 process(es) share the 2 nearest NICs")) << d.reason;
}

// Mapped by slot (ranks 0-3 on package 0), bound to packages: still even.
TEST_F(P4d, NicNodeBindingsBySlotStaysEven) {
    const auto bindings = package_bindings(topo, 8, false);
    const auto sets = sets_with(topo, nics, bindings);
    std::map<size_t, int> uses;
    for (int r = 0; r < 8; ++r) {
        ASSERT_EQ(sets[r].size(), 1u);
        EXPECT_EQ(package_of(nics[sets[r][0]]), package_of_rank(r, 8, false));
        ++uses[sets[r][0]];
    }
    EXPECT_EQ(uses.size(), 4u);
    for (const auto &[nic, n] : uses) {
        EXPECT_EQ(n, 2) << nics[nic].name;
    }
}

// p5.48xlarge, 8 processes bound to their package, mapped round-robin or
// by slot: the 4 processes of a package take the NICs of its 4 PCIe
// switches, one switch each, all 4 NICs of it.
TEST_F(P5, NicNodeBindingsEveryGpuSwitchOfAPackageUsed) {
    for (bool round_robin : {true, false}) {
        SCOPED_TRACE(round_robin ? "round-robin by package" : "by slot");
        const auto sets = sets_with(topo, nics, package_bindings(topo, 8, round_robin));
        std::map<unsigned, std::set<unsigned>> switches; // by package
        for (int r = 0; r < 8; ++r) {
            ASSERT_EQ(sets[r].size(), 4u);
            std::set<unsigned> mine;
            for (size_t i : sets[r]) {
                mine.insert(switch_of(nics[i]));
                EXPECT_EQ(package_of(nics[i]), package_of_rank(r, 8, round_robin));
            }
            EXPECT_EQ(mine.size(), 1u) << "rank " << r;
            switches[package_of_rank(r, 8, round_robin)].insert(*mine.begin());
        }
        EXPECT_EQ(switches[0].size(), 4u);
        EXPECT_EQ(switches[1].size(), 4u);
    }
}

// Fine bindings (one core each) mapped round-robin: 16 processes, 8 a
// package, 2 NICs each, every NIC once.
TEST_F(P5, NicNodeBindingsCoreBindingsRoundRobin) {
    std::vector<std::string> bindings;
    for (int r = 0; r < 16; ++r) {
        bindings.push_back(list_of(topo.core(r % 2, static_cast<unsigned>(r / 2))->cpuset));
    }
    const auto sets = sets_with(topo, nics, bindings);
    std::map<size_t, int> uses;
    for (int r = 0; r < 16; ++r) {
        ASSERT_EQ(sets[r].size(), 2u);
        for (size_t i : sets[r]) {
            EXPECT_EQ(package_of(nics[i]), static_cast<unsigned>(r % 2));
            ++uses[i];
        }
    }
    EXPECT_EQ(uses.size(), nics.size());
}

// Without the node's bindings: the decision made by the call without them,
// word for word, for bindings coarse and fine.
TEST_F(P5, NicNodeBindingsUnknownIsTodaysDecision) {
    const auto bindings = package_bindings(topo, 8, true);
    for (int r = 0; r < 8; ++r) {
        const Binding package(bindings[r]);
        const Cpuset core(topo.core(r % 2, static_cast<unsigned>(r / 2))->cpuset);
        for (hwloc_const_cpuset_t own : {package.bits.get(), core.get()}) {
            const auto without = select_nic_set(nics, topo.get(), own, r, 8, 0);
            const auto empty = select_nic_set(nics, topo.get(), own, r, 8, 0, {});
            EXPECT_EQ(empty.indices, without.indices);
            EXPECT_EQ(empty.reason, without.reason);
        }
    }
}

// A process whose binding the runtime did not give (not bound), gave
// unreadable, or did not give for every process: the decision made without
// the bindings, and the reason says why they were not used.
TEST_F(P4d, NicNodeBindingsMissingOrUnparsableIsTodaysPath) {
    const auto good = package_bindings(topo, 8, true);
    const std::string everything = list_of(hwloc_topology_get_topology_cpuset(topo.get()));
    struct Case {
        size_t rank;
        std::string text;
        std::string said;
    };
    const Case cases[] = {
        {3, "", "local rank 3's binding is missing"},
        {5, "0-3,zz", "local rank 5's binding \"0-3,zz\" is not a cpuset list"},
        {6, "0-", "local rank 6's binding \"0-\" is not a cpuset list"},
        {6, "0-3,,8", "local rank 6's binding \"0-3,,8\" is not a cpuset list"},
        {1, everything,
         "local rank 1's binding " + everything + " does not keep it on a part of the machine"},
    };
    for (const Case &c : cases) {
        auto bindings = good;
        bindings[c.rank] = c.text;
        for (int r = 0; r < 8; ++r) {
            if (static_cast<size_t>(r) == c.rank) {
                continue;
            }
            const Binding own(good[r]);
            const auto without = select_nic_set(nics, topo.get(), own.bits.get(), r, 8, 0);
            const auto with = select_nic_set(nics, topo.get(), own.bits.get(), r, 8, 0, bindings);
            EXPECT_EQ(with.indices, without.indices);
            EXPECT_EQ(with.reason.rfind(without.reason, 0), 0u) << with.reason;
            EXPECT_TRUE(contains(with.reason, "; the node's bindings not used: ")) << with.reason;
            EXPECT_TRUE(contains(with.reason, c.said)) << with.reason;
        }
    }
    // Not one a process: not used either.
    auto short_list = good;
    short_list.pop_back();
    const Binding own(good[0]);
    const auto d = select_nic_set(nics, topo.get(), own.bits.get(), 0, 8, 0, short_list);
    EXPECT_TRUE(contains(d.reason, "the runtime gave 7 bindings for local rank 0 of 8"))
        << d.reason;
}

// A process rebound after its launch is not where the runtime says: its
// own binding decides, as without the list.
TEST_F(P4d, NicNodeBindingsNotItsOwnIsNotUsed) {
    const auto bindings = package_bindings(topo, 8, true);
    const Cpuset core(topo.core(0, 3)->cpuset);
    const auto without = select_nic_set(nics, topo.get(), core.get(), 2, 8, 0);
    const auto with = select_nic_set(nics, topo.get(), core.get(), 2, 8, 0, bindings);
    EXPECT_EQ(with.indices, without.indices);
    EXPECT_TRUE(contains(with.reason, "the runtime's binding of this process, " + bindings[2] +
                                          ", is not the one it has"))
        << with.reason;
}

} // namespace
