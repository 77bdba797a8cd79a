// efa::choose_gpu and efa::select_gpu_nic_set (common/core/gpu_nics.cpp):
// which GPU a process uses, and the NICs of that GPU's PCIe switch, on the
// recorded layouts (tests/topologies).  The expected NICs come from the
// layouts as make_topologies.py documents them: p4d, 2 A100s and 1 NIC on
// each root bus (a host bridge with no bridge below it); p5.48xlarge, an
// H100 and 4 NICs under each switch; p5en, an H200 and 2 NICs; trn1, 2
// Trainium chips and 1 NIC; shared-switch, 2 H100s (with NVML UUIDs) and 8
// NICs.
#include "nic_select_topology.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_nics.hpp"

namespace {

using namespace nic_select_test;
using efa::choose_gpu;
using efa::GpuChoice;
using efa::node_accelerators;
using efa::select_gpu_nic_set;

// shared-switch.xml's EFA devices: per package (switch at bus B = 0x10,
// 0x90) alone on buses B+4 .. B+11, after the 2 GPUs' B+2 and B+3.
std::vector<NicCandidate> shared_switch_candidates() {
    std::vector<NicCandidate> nics;
    for (unsigned base : {0x10u, 0x90u}) {
        for (unsigned bus = base + 4; bus < base + 12; ++bus) {
            nics.push_back({"rdmap" + std::to_string(bus) + "s0-rdm", bus_id(bus, 0)});
        }
    }
    return nics;
}

struct Layout {
    const char *file;
    std::vector<NicCandidate> (*candidates)();
    size_t accelerators;
    size_t nics_per_accelerator_switch; // NICs under the switch of each accelerator
};

const Layout kLayouts[] = {
    {"p4d.xml", p4d_candidates, 8, 1},
    {"p5.48xlarge.xml", p5_candidates, 8, 4},
    {"p5en.48xlarge.xml", p5en_candidates, 8, 2},
    {"trn1.32xlarge.xml", trn1_candidates, 16, 1},
    {"shared-switch.xml", shared_switch_candidates, 4, 8},
};

// The switch (or, on p4d, the root bus) an accelerator's PCI address is under,
// by the generator's numbering: the same key as switch_of for NICs.
unsigned switch_of_bus(const std::string &bus_id, bool p4d) {
    const unsigned bus = std::stoul(bus_id.substr(5, 2), nullptr, 16);
    return p4d ? bus : (bus & 0xf0);
}

class EveryGpuLayout : public ::testing::TestWithParam<int> {};

// One process per accelerator, "auto": process r takes accelerator r, and
// its set is exactly the NICs under that accelerator's switch, the first
// of them differing between processes that share the switch.
TEST_P(EveryGpuLayout, OneProcessPerAcceleratorTakesItsSwitchsNics) {
    const Layout &layout = kLayouts[GetParam()];
    const Topology topo = Topology::from_file(layout.file);
    ASSERT_NE(topo.get(), nullptr) << layout.file;
    const auto nics = layout.candidates();
    const auto accs = node_accelerators(topo.get());
    ASSERT_EQ(accs.size(), layout.accelerators) << layout.file;
    const bool p4d = std::string(layout.file) == "p4d.xml";
    const int procs = static_cast<int>(accs.size());
    std::set<size_t> used;
    for (int r = 0; r < procs; ++r) {
        const GpuChoice gpu = choose_gpu(topo.get(), "auto", nullptr, r, procs, nullptr);
        ASSERT_TRUE(gpu.error.empty()) << gpu.error;
        ASSERT_EQ(gpu.bus_id, accs[static_cast<size_t>(r)].bus_id) << gpu.reason;
        const auto d = select_gpu_nic_set(nics, topo.get(), gpu, r, 0);
        ASSERT_EQ(d.indices.size(), layout.nics_per_accelerator_switch)
            << layout.file << " rank " << r << ": " << d.reason;
        for (size_t i : d.indices) {
            EXPECT_EQ(switch_of(nics[i]), switch_of_bus(gpu.bus_id, p4d))
                << layout.file << " rank " << r << " got " << nics[i].name << " for GPU "
                << gpu.bus_id;
            used.insert(i);
        }
        EXPECT_NE(d.reason.find("GPU " + gpu.bus_id), std::string::npos) << d.reason;
    }
    EXPECT_EQ(used.size(), nics.size()) << layout.file << ": some NIC is no GPU's";
}

INSTANTIATE_TEST_SUITE_P(Layouts, EveryGpuLayout, ::testing::Range(0, 5));

// p5: 8 processes, at most 2 NICs each (common_efa_nics_per_proc 2): two
// of the GPU's switch's four.
TEST(GpuNics, NicsPerProcCutsTheSwitchsSet) {
    const Topology topo = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = p5_candidates();
    const GpuChoice gpu = choose_gpu(topo.get(), "auto", nullptr, 3, 8, nullptr);
    const auto d = select_gpu_nic_set(nics, topo.get(), gpu, 3, 2);
    ASSERT_EQ(d.indices.size(), 2u) << d.reason;
    EXPECT_EQ(switch_of(nics[d.indices[0]]), switch_of_bus(gpu.bus_id, false));
    EXPECT_EQ(switch_of(nics[d.indices[1]]), switch_of_bus(gpu.bus_id, false));
}

// CUDA_VISIBLE_DEVICES naming one GPU decides, whatever the local rank; a
// list does not, nor a UUID that the topology cannot map.
TEST(GpuNics, CudaVisibleDevicesNamesTheGpu) {
    const Topology topo = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto accs = node_accelerators(topo.get());
    GpuChoice g = choose_gpu(topo.get(), "auto", "5", 0, 2, nullptr);
    EXPECT_EQ(g.bus_id, accs[5].bus_id);
    EXPECT_NE(g.reason.find("CUDA_VISIBLE_DEVICES=5"), std::string::npos) << g.reason;
    g = choose_gpu(topo.get(), "auto", "0,1,2", 0, 2, nullptr);
    EXPECT_TRUE(g.bus_id.empty()) << "a list of GPUs not one per process chose " << g.bus_id;
    g = choose_gpu(topo.get(), "auto", "GPU-8e4f1b2a", 0, 2, nullptr);
    EXPECT_TRUE(g.bus_id.empty()) << "a UUID chose " << g.bus_id;
    EXPECT_TRUE(g.error.empty());
    // With one process per GPU listed, the local rank's entry.
    g = choose_gpu(topo.get(), "auto", "0,1,2,3,4,5,6,7", 6, 8, nullptr);
    EXPECT_EQ(g.bus_id, accs[6].bus_id);
}

// A list with one GPU per process, in any order: each process guesses the
// GPU of its local rank's entry (what cudaSetDevice(local rank) opens),
// not the accelerator of that number; an entry that names no GPU leaves
// that process's unknown.
TEST(GpuNics, AListOfOneGpuPerProcessGivesEachItsEntry) {
    const Topology topo = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto accs = node_accelerators(topo.get());
    for (int r = 0; r < 8; ++r) {
        const GpuChoice g = choose_gpu(topo.get(), "auto", "7,6,5,4,3,2,1,0", r, 8, nullptr);
        EXPECT_EQ(g.bus_id, accs[static_cast<size_t>(7 - r)].bus_id) << g.reason;
        EXPECT_FALSE(g.named);
    }
    // Indices naming fewer GPUs than the node has may be numbered from 0
    // by a launcher that confined the job to some of them: not taken.
    GpuChoice g = choose_gpu(topo.get(), "auto", "3, 1", 1, 2, nullptr);
    EXPECT_TRUE(g.bus_id.empty()) << g.reason;
    // UUIDs name theirs wherever they are (shared-switch.xml has NVML's).
    const Topology uuids = Topology::from_file("shared-switch.xml");
    ASSERT_NE(uuids.get(), nullptr);
    const auto four = node_accelerators(uuids.get());
    const std::string base = "GPU-0a1b2c3d-0000-4000-8000-0000000000";
    const std::string two = base + "93, " + base + "12";
    g = choose_gpu(uuids.get(), "auto", two.c_str(), 1, 2, nullptr);
    EXPECT_EQ(g.bus_id, four[0].bus_id) << g.reason;
    EXPECT_NE(g.reason.find("local rank 1 takes its entry"), std::string::npos) << g.reason;
    g = choose_gpu(uuids.get(), "auto", two.c_str(), 0, 2, nullptr);
    EXPECT_EQ(g.bus_id, four[3].bus_id) << g.reason;
    const std::string unknown = base + "93,GPU-ffffffff";
    g = choose_gpu(uuids.get(), "auto", unknown.c_str(), 1, 2, nullptr);
    EXPECT_TRUE(g.bus_id.empty()) << g.reason;
    EXPECT_NE(g.reason.find("which is unknown"), std::string::npos) << g.reason;
}

// p5, 8 processes each bound to its package: Open MPI's default for more
// than 2 (--map-by package: round robin) puts half of them on the package
// away from the GPU of their local rank's number.  Those would go by
// binding and the rest by GPU, doubling up NICs; where the runtime told
// every binding, all go by binding, which spreads them over all 32 NICs.
// Mapped in order (the first 4 on package 0), every guess is near its
// binding: all go by GPU, unless one process's GPU is unknown (an entry of
// CUDA_VISIBLE_DEVICES that names none), which would go by binding.
TEST(GpuNics, AGuessAwayFromAnyBindingOfTheNodeLeavesItToTheBindings) {
    const Topology topo = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = p5_candidates();
    const auto accs = node_accelerators(topo.get());
    for (bool round_robin : {true, false}) {
        std::vector<std::string> bindings;
        for (int r = 0; r < 8; ++r) {
            const unsigned package = round_robin ? r % 2 : r / 4;
            bindings.push_back(list_of(topo.package(package)->cpuset));
        }
        std::set<size_t> used;
        for (int r = 0; r < 8; ++r) {
            Cpuset own;
            hwloc_bitmap_list_sscanf(own.get(), bindings[static_cast<size_t>(r)].c_str());
            const GpuChoice g = choose_gpu(topo.get(), "auto", nullptr, r, 8, own.get(), bindings);
            efa::NicSetDecision d;
            if (round_robin) {
                EXPECT_TRUE(g.bus_id.empty()) << "rank " << r << ": " << g.reason;
                EXPECT_NE(g.reason.find("the binding decides for every process of the node"),
                          std::string::npos)
                    << g.reason;
                d = efa::select_nic_set(nics, topo.get(), own.get(), r, 8, 0, bindings);
            } else {
                EXPECT_EQ(g.bus_id, accs[static_cast<size_t>(r)].bus_id) << g.reason;
                d = select_gpu_nic_set(nics, topo.get(), g, r, 0);
            }
            ASSERT_EQ(d.indices.size(), 4u) << d.reason;
            used.insert(d.indices.begin(), d.indices.end());
        }
        EXPECT_EQ(used.size(), nics.size()) << (round_robin ? "round robin" : "in order")
                                            << ": NICs doubled up while others stay idle";
    }
    std::vector<std::string> in_order;
    for (int r = 0; r < 8; ++r) {
        in_order.push_back(list_of(topo.package(static_cast<unsigned>(r / 4))->cpuset));
    }
    Cpuset own;
    hwloc_bitmap_list_sscanf(own.get(), in_order[0].c_str());
    const GpuChoice g = choose_gpu(topo.get(), "auto", "0,1,2,3,4,5,,7", 0, 8, own.get(), in_order);
    EXPECT_TRUE(g.bus_id.empty()) << g.reason;
    EXPECT_NE(g.reason.find("local rank 6's GPU is unknown"), std::string::npos) << g.reason;
}

// Without one process per accelerator and no CUDA_VISIBLE_DEVICES, no GPU
// decides; "none" never does; a node without accelerators neither.
TEST(GpuNics, NoGpuKnownLeavesItToTheBinding) {
    const Topology topo = Topology::from_file("p4d.xml");
    ASSERT_NE(topo.get(), nullptr);
    EXPECT_TRUE(choose_gpu(topo.get(), "auto", nullptr, 0, 2, nullptr).bus_id.empty());
    EXPECT_TRUE(choose_gpu(topo.get(), "auto", nullptr, 0, 16, nullptr).bus_id.empty());
    EXPECT_TRUE(choose_gpu(topo.get(), "none", "3", 3, 8, nullptr).bus_id.empty());
    EXPECT_TRUE(choose_gpu(topo.get(), "", nullptr, 3, 8, nullptr).error.empty());
    EXPECT_TRUE(choose_gpu(nullptr, "auto", "0", 0, 8, nullptr).bus_id.empty());
}

// A topology without PCI devices (hwloc that cannot see them) is not taken
// for a node without GPUs: the reason says so.
TEST(GpuNics, NoPciSeenIsSaidAsSuch) {
    const Topology blind = Topology::from_file("p5.48xlarge.xml", HWLOC_TYPE_FILTER_KEEP_NONE);
    ASSERT_NE(blind.get(), nullptr);
    const GpuChoice g = choose_gpu(blind.get(), "auto", nullptr, 0, 8, nullptr);
    EXPECT_TRUE(g.bus_id.empty());
    EXPECT_TRUE(g.error.empty()) << g.error;
    EXPECT_NE(g.reason.find("hwloc sees no PCI device"), std::string::npos) << g.reason;
    const Topology seen = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(seen.get(), nullptr);
    EXPECT_EQ(choose_gpu(seen.get(), "auto", nullptr, 0, 3, nullptr).reason.find("hwloc sees"),
              std::string::npos);
}

// An index or a PCI address chooses; one the node does not have, or a word
// that is no setting, is an error that lists the node's accelerators.
TEST(GpuNics, ExplicitSettings) {
    const Topology topo = Topology::from_file("p4d.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto accs = node_accelerators(topo.get());
    ASSERT_EQ(accs.size(), 8u);
    EXPECT_EQ(choose_gpu(topo.get(), "2", nullptr, 0, 1, nullptr).bus_id, accs[2].bus_id);
    EXPECT_EQ(choose_gpu(topo.get(), accs[7].bus_id, nullptr, 0, 1, nullptr).bus_id,
              accs[7].bus_id);
    EXPECT_EQ(choose_gpu(topo.get(), accs[7].bus_id.substr(5), nullptr, 0, 1, nullptr).bus_id,
              accs[7].bus_id)
        << "a bus id without its domain";
    EXPECT_EQ(choose_gpu(topo.get(), "0000" + accs[7].bus_id, nullptr, 0, 1, nullptr).bus_id,
              accs[7].bus_id)
        << "nvidia-smi's form, 8 domain digits";
    EXPECT_EQ(choose_gpu(topo.get(), "0000" + accs[7].bus_id, nullptr, 0, 1, nullptr).bus_id,
              accs[7].bus_id)
        << "nvidia-smi's form, 8 domain digits";
    GpuChoice g = choose_gpu(topo.get(), "8", nullptr, 0, 1, nullptr);
    EXPECT_TRUE(g.bus_id.empty());
    EXPECT_NE(g.error.find(accs[0].bus_id), std::string::npos) << g.error;
    EXPECT_FALSE(choose_gpu(topo.get(), "0000:ff:00.0", nullptr, 0, 1, nullptr).error.empty());
    EXPECT_FALSE(choose_gpu(topo.get(), "cuda", nullptr, 0, 1, nullptr).error.empty());
}

// p4d: the two GPUs of a root bus share its one NIC.
TEST(GpuNics, P4dGpusOfASwitchShareItsNic) {
    const Topology topo = Topology::from_file("p4d.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = p4d_candidates();
    const auto a = select_gpu_nic_set(nics, topo.get(),
                                      choose_gpu(topo.get(), "0", nullptr, 0, 8, nullptr), 0, 0);
    const auto b = select_gpu_nic_set(nics, topo.get(),
                                      choose_gpu(topo.get(), "1", nullptr, 1, 8, nullptr), 1, 0);
    ASSERT_EQ(a.indices.size(), 1u) << a.reason;
    ASSERT_EQ(b.indices.size(), 1u) << b.reason;
    EXPECT_EQ(a.indices[0], b.indices[0]);
    const auto c = select_gpu_nic_set(nics, topo.get(),
                                      choose_gpu(topo.get(), "2", nullptr, 2, 8, nullptr), 2, 0);
    ASSERT_EQ(c.indices.size(), 1u);
    EXPECT_NE(a.indices[0], c.indices[0]);
}

// CUDA_VISIBLE_DEVICES set but naming no GPU ("", -1) is no GPU, not the
// local rank's.
TEST(GpuNics, NoGpuVisibleIsNoGpu) {
    const Topology topo = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(topo.get(), nullptr);
    for (const char *none : {"", "-1", "NoDevFiles"}) {
        const GpuChoice g = choose_gpu(topo.get(), "auto", none, 3, 8, nullptr);
        EXPECT_TRUE(g.bus_id.empty()) << "'" << none << "' chose " << g.bus_id;
    }
}

// A guessed GPU on another package than the process's binding leaves the
// choice to the binding (the process's host memory is near its cores);
// a named one is taken whatever the binding.  p5: GPUs 0-3 on package 0.
TEST(GpuNics, AGuessedGpuAwayFromTheBindingIsNotTaken) {
    const Topology topo = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto accs = node_accelerators(topo.get());
    Cpuset on_package1;
    hwloc_bitmap_or(on_package1.get(), on_package1.get(), topo.core(1, 0)->cpuset);
    // local rank 1 of 8, bound to a core of package 1: GPU 1 is on package 0
    GpuChoice g = choose_gpu(topo.get(), "auto", nullptr, 1, 8, on_package1.get());
    EXPECT_TRUE(g.bus_id.empty()) << g.reason;
    EXPECT_NE(g.reason.find("not near"), std::string::npos) << g.reason;
    g = choose_gpu(topo.get(), "auto", "1", 0, 2, on_package1.get());
    EXPECT_TRUE(g.bus_id.empty()) << "CUDA_VISIBLE_DEVICES=1 far from the binding: " << g.reason;
    // local rank 5, GPU 5 on package 1: taken
    g = choose_gpu(topo.get(), "auto", nullptr, 5, 8, on_package1.get());
    EXPECT_EQ(g.bus_id, accs[5].bus_id) << g.reason;
    // named: taken
    g = choose_gpu(topo.get(), "1", nullptr, 0, 8, on_package1.get());
    EXPECT_EQ(g.bus_id, accs[1].bus_id);
    EXPECT_TRUE(g.named);
}

// Processes that name one GPU start on different NICs of its switch; one
// process per accelerator starts on its switch's first.
TEST(GpuNics, ProcessesNamingOneGpuStartOnDifferentNics) {
    const Topology topo = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = p5_candidates();
    std::set<size_t> firsts;
    for (int r = 0; r < 4; ++r) {
        const auto d = select_gpu_nic_set(
            nics, topo.get(), choose_gpu(topo.get(), "2", nullptr, r, 4, nullptr), r, 0);
        ASSERT_EQ(d.indices.size(), 4u) << d.reason;
        firsts.insert(d.indices[0]);
    }
    EXPECT_EQ(firsts.size(), 4u) << "processes sharing GPU 2 start on the same NIC";
}

// The forms common_efa_gpu takes (validate_params refuses the others).
TEST(GpuNics, SettingForms) {
    for (const char *ok : {"", "auto", "none", "0", "15", "0000:53:00.0", "53:00.0", " auto "}) {
        EXPECT_TRUE(efa::gpu_setting_valid(ok)) << "'" << ok << "'";
    }
    for (const char *bad :
         {"cuda", "gpu0", "-1", "0000:53:00.0:1:2", "53:zz.0", "auto,none", "12345"}) {
        EXPECT_FALSE(efa::gpu_setting_valid(bad)) << "'" << bad << "'";
    }
}

// p4d as lspci shows it: GPUs and NIC on a root bus, no bridge above them
// but the host bridge.  Each GPU takes its bus's NIC alone, named or
// guessed, never the other bus's of its package.
TEST(GpuNics, P4dGpusTakeTheNicOfTheirRootBus) {
    const Topology topo = Topology::from_file("p4d.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = p4d_candidates();
    const auto accs = node_accelerators(topo.get());
    ASSERT_EQ(accs.size(), 8u);
    for (int r = 0; r < 8; ++r) {
        for (const std::string &setting : {std::string("auto"), std::to_string(r)}) {
            const GpuChoice gpu = choose_gpu(topo.get(), setting, nullptr, r, 8, nullptr);
            ASSERT_EQ(gpu.bus_id, accs[static_cast<size_t>(r)].bus_id) << gpu.reason;
            const auto d = select_gpu_nic_set(nics, topo.get(), gpu, r, 0);
            ASSERT_EQ(d.indices.size(), 1u) << d.reason;
            EXPECT_EQ(nics[d.indices[0]].pci_bus_id.substr(0, 8), gpu.bus_id.substr(0, 8))
                << d.reason;
            EXPECT_NE(d.reason.find("host bridge"), std::string::npos) << d.reason;
        }
    }
}

// One process per GPU, two GPUs under a switch of 8 NICs: the second GPU
// starts half way along (NIC 5 of 8), so with 4 NICs each the two use
// all 8, none twice.
TEST(GpuNics, GpusSharingASwitchSpreadOverItsNics) {
    const Topology topo = Topology::from_file("shared-switch.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = shared_switch_candidates();
    std::set<size_t> firsts;
    for (int r = 0; r < 4; r += 2) {
        std::set<size_t> both;
        for (int g = r; g < r + 2; ++g) {
            const GpuChoice gpu = choose_gpu(topo.get(), "auto", nullptr, g, 4, nullptr);
            ASSERT_FALSE(gpu.named) << gpu.reason;
            const auto whole = select_gpu_nic_set(nics, topo.get(), gpu, g, 0);
            ASSERT_EQ(whole.indices.size(), 8u) << whole.reason;
            EXPECT_EQ(whole.indices[0], static_cast<size_t>(r / 2 * 8 + (g - r) * 4))
                << whole.reason;
            firsts.insert(whole.indices[0]);
            const auto four = select_gpu_nic_set(nics, topo.get(), gpu, g, 4);
            ASSERT_EQ(four.indices.size(), 4u) << four.reason;
            both.insert(four.indices.begin(), four.indices.end());
        }
        EXPECT_EQ(both.size(), 8u) << "the two GPUs of switch " << r / 2 << " share NICs";
    }
    EXPECT_EQ(firsts.size(), 4u);
}

// The same with each process's GPU named by CUDA_VISIBLE_DEVICES (Slurm's
// --gpus-per-task): each GPU's process starts at its GPU's place, not at
// its local rank's, so the two GPUs of a switch take its NICs apart.
TEST(GpuNics, GpusNamedByCudaSharingASwitchSpreadOverItsNics) {
    const Topology topo = Topology::from_file("shared-switch.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = shared_switch_candidates();
    for (int r = 0; r < 4; r += 2) {
        std::set<size_t> both;
        std::string reasons;
        for (int g = r; g < r + 2; ++g) {
            const std::string visible = std::to_string(g);
            const GpuChoice gpu = choose_gpu(topo.get(), "auto", visible.c_str(), g, 4, nullptr);
            ASSERT_TRUE(gpu.by_cuda) << gpu.reason;
            const auto four = select_gpu_nic_set(nics, topo.get(), gpu, g, 4);
            ASSERT_EQ(four.indices.size(), 4u) << four.reason;
            both.insert(four.indices.begin(), four.indices.end());
            reasons += four.reason + "\n";
        }
        EXPECT_EQ(both.size(), 8u) << "the two GPUs of switch " << r / 2 << " share NICs:\n"
                                   << reasons;
    }
}

// Two processes per GPU so named (more processes than GPUs): those of one
// GPU start on different NICs of its share of the switch's.
TEST(GpuNics, ProcessesSharingAGpuNamedByCudaStartOnDifferentNicsOfItsShare) {
    const Topology topo = Topology::from_file("shared-switch.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto nics = shared_switch_candidates();
    std::set<size_t> firsts;
    for (int r = 0; r < 8; ++r) {
        const std::string visible = std::to_string(r / 2);
        const GpuChoice gpu = choose_gpu(topo.get(), "auto", visible.c_str(), r, 8, nullptr);
        ASSERT_TRUE(gpu.by_cuda && gpu.crowded) << gpu.reason;
        const auto one = select_gpu_nic_set(nics, topo.get(), gpu, r, 1);
        ASSERT_EQ(one.indices.size(), 1u) << one.reason;
        firsts.insert(one.indices[0]);
    }
    EXPECT_EQ(firsts.size(), 8u) << "two processes of one GPU start on the same NIC";
}

// A GPU under a bridge that holds every NIC found: nothing told, the set
// is dropped, and the reason says so (not "no NIC near it").
TEST(GpuNics, EveryNicNearTheGpuIsSaid) {
    const Topology topo = Topology::from_file("shared-switch.xml");
    ASSERT_NE(topo.get(), nullptr);
    auto nics = shared_switch_candidates();
    nics.resize(8); // package 0's switch's alone
    const GpuChoice gpu = choose_gpu(topo.get(), "0", nullptr, 0, 4, nullptr);
    const auto d = select_gpu_nic_set(nics, topo.get(), gpu, 0, 0);
    EXPECT_TRUE(d.indices.empty());
    EXPECT_NE(d.reason.find("all 8 NICs found are as near it"), std::string::npos) << d.reason;
    nics.resize(1);
    nics.push_back(shared_switch_candidates()[8]); // and one of the other package
    const auto near = select_gpu_nic_set(nics, topo.get(), gpu, 0, 0);
    ASSERT_EQ(near.indices.size(), 1u) << near.reason;
    EXPECT_EQ(near.indices[0], 0u);
}

// CUDA_VISIBLE_DEVICES naming one device that the topology cannot map (an
// index past the node's GPUs, a UUID without NVML's NVIDIAUUID to match)
// leaves the GPU unknown: not the local rank's, though the node runs one
// process per GPU.
TEST(GpuNics, OneCudaDeviceNotMappedLeavesTheGpuUnknown) {
    const Topology topo = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(topo.get(), nullptr);
    GpuChoice g = choose_gpu(topo.get(), "auto", "9", 3, 8, nullptr);
    EXPECT_TRUE(g.bus_id.empty()) << "CUDA_VISIBLE_DEVICES=9 chose " << g.bus_id;
    EXPECT_TRUE(g.error.empty());
    EXPECT_NE(g.reason.find("names CUDA device 9, but the node has 8"), std::string::npos)
        << g.reason;
    for (const char *uuid : {"GPU-8e4f1b2a-0000-4000-8000-000000000012", "MIG-GPU-8e4f1b2a/1/0"}) {
        g = choose_gpu(topo.get(), "auto", uuid, 3, 8, nullptr);
        EXPECT_TRUE(g.bus_id.empty()) << uuid << " chose " << g.bus_id;
        EXPECT_NE(g.reason.find("no GPU UUIDs"), std::string::npos) << g.reason;
    }
    g = choose_gpu(topo.get(), "auto", "MIG-7f3e9c1d-55aa-4b7e-9c2d-0123456789ab", 3, 8, nullptr);
    EXPECT_TRUE(g.bus_id.empty()) << g.bus_id;
    EXPECT_NE(g.reason.find("MIG device"), std::string::npos) << g.reason;
    // A node without NVIDIA GPUs: the variable says nothing of its chips.
    const Topology trn1 = Topology::from_file("trn1.32xlarge.xml");
    ASSERT_NE(trn1.get(), nullptr);
    g = choose_gpu(trn1.get(), "auto", "0", 5, 16, nullptr);
    EXPECT_EQ(g.bus_id, node_accelerators(trn1.get())[5].bus_id) << g.reason;
}

// A UUID (whole, or CUDA's unique abbreviation, any case; a MIG device
// by its GPU's UUID) maps through the NVML OS devices' NVIDIAUUID.
TEST(GpuNics, CudaVisibleDevicesByUuid) {
    const Topology topo = Topology::from_file("shared-switch.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto accs = node_accelerators(topo.get());
    ASSERT_EQ(accs.size(), 4u); // buses 12, 13, 92, 93
    const std::string base = "GPU-0a1b2c3d-0000-4000-8000-0000000000";
    struct Case {
        std::string value;
        std::string bus_id; // empty: unknown
        const char *said;
    };
    const Case cases[] = {
        {base + "13", accs[1].bus_id, "by its UUID"},
        {"gpu-0A1B2C3D-0000-4000-8000-000000000092", accs[2].bus_id, "by its UUID"},
        {"MIG-" + base + "93/1/0", accs[3].bus_id, "by its UUID"},
        {"GPU-0a1b2c3d", "", "4 GPUs' UUIDs begin so"},
        {"GPU-ffffffff", "", "no GPU of the node has that UUID"},
    };
    for (const Case &c : cases) {
        const GpuChoice g = choose_gpu(topo.get(), "auto", c.value.c_str(), 0, 2, nullptr);
        EXPECT_EQ(g.bus_id, c.bus_id) << c.value << ": " << g.reason;
        EXPECT_NE(g.reason.find(c.said), std::string::npos) << c.value << ": " << g.reason;
        EXPECT_EQ(g.named, !c.bus_id.empty()) << c.value;
    }
    // ...9 begins the UUIDs of the GPUs at 92 and 93: it tells neither.
    const GpuChoice two = choose_gpu(topo.get(), "auto", (base + "9").c_str(), 0, 2, nullptr);
    EXPECT_TRUE(two.bus_id.empty()) << two.bus_id;
    EXPECT_NE(two.reason.find("2 GPUs' UUIDs begin so"), std::string::npos) << two.reason;
}

// A process that a cgroup confines to package 0, bound to all of it, is
// bound: a GPU guessed on package 1 is not near it (p5: GPUs 4-7).
TEST(GpuNics, ConfinedToAPackageTheGuessIsCheckedAgainstIt) {
    const Topology whole = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(whole.get(), nullptr);
    std::ifstream in(std::string(TOPOLOGY_DIR) + "/p5.48xlarge.xml");
    std::stringstream xml;
    xml << in.rdbuf();
    char *bits = nullptr;
    hwloc_bitmap_asprintf(&bits, whole.package(0)->cpuset);
    const std::string confined =
        std::regex_replace(xml.str(), std::regex("allowed_cpuset=\"[^\"]*\""),
                           "allowed_cpuset=\"" + std::string(bits ? bits : "") + "\"",
                           std::regex_constants::format_first_only);
    std::free(bits);
    const Topology topo = Topology::from_buffer(confined);
    ASSERT_NE(topo.get(), nullptr);
    hwloc_const_cpuset_t allowed = hwloc_topology_get_topology_cpuset(topo.get());
    ASSERT_TRUE(hwloc_bitmap_isequal(allowed, whole.package(0)->cpuset));
    const auto accs = node_accelerators(topo.get());
    GpuChoice g = choose_gpu(topo.get(), "auto", nullptr, 5, 8, allowed);
    EXPECT_TRUE(g.bus_id.empty()) << g.reason;
    EXPECT_NE(g.reason.find("not near"), std::string::npos) << g.reason;
    g = choose_gpu(topo.get(), "auto", nullptr, 2, 8, allowed);
    EXPECT_EQ(g.bus_id, accs[2].bus_id) << g.reason;
}

} // namespace
