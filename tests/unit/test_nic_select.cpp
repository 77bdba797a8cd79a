// Unit tests for efa::select_nic over generated hwloc XML topologies
// (tests/topologies/make_topologies.py documents their layout).
//
// Expected answers are derived from that documented layout (PCI bus numbers
// below 0x80 sit on package 0, the others on package 1), not from hwloc
// queries, so the tests do not merely restate the implementation.
#include "nic_select.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#ifndef TOPOLOGY_DIR
#error "TOPOLOGY_DIR must point at tests/topologies"
#endif

namespace {

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

std::string bus_id(unsigned bus, unsigned dev) {
    char text[16];
    std::snprintf(text, sizeof text, "0000:%02x:%02x.0", bus, dev);
    return text;
}

// The four EFA devices of p4d.xml: rdmap<bus>s27 at <bus>:1b.0.
std::vector<NicCandidate> p4d_candidates() {
    std::vector<NicCandidate> nics;
    for (unsigned bus : {0x10u, 0x20u, 0x90u, 0xa0u}) {
        nics.push_back({"rdmap" + std::to_string(bus) + "s27-rdm", bus_id(bus, 0x1b)});
    }
    return nics;
}

// The 32 EFA devices of p5.48xlarge.xml: per switch at upstream bus B, NICs
// sit alone on buses B+3 .. B+6.
std::vector<NicCandidate> p5_candidates() {
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

// Ground truth from the generator's layout, independent of hwloc.
unsigned package_of(const NicCandidate &nic) {
    const unsigned bus = std::stoul(nic.pci_bus_id.substr(5, 2), nullptr, 16);
    return bus >= 0x80 ? 1 : 0;
}

const NicCandidate &pick(const std::vector<NicCandidate> &nics, const Topology &topo,
                         hwloc_const_cpuset_t binding, int rank, int size) {
    const auto decision = select_nic(nics, topo.get(), binding, rank, size);
    EXPECT_LT(decision.index, nics.size());
    EXPECT_FALSE(decision.reason.empty());
    EXPECT_EQ(decision.reason.find('\n'), std::string::npos) << decision.reason;
    return nics.at(decision.index);
}

bool contains(const std::string &text, const std::string &word) {
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
