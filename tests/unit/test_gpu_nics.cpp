// efa::choose_gpu and efa::select_gpu_nic_set (common/core/gpu_nics.cpp):
// which GPU a process uses, and the NICs of that GPU's PCIe switch, on the
// recorded layouts (tests/topologies).  The expected NICs come from the
// layouts as make_topologies.py documents them: p4d, 2 A100s and 1 NIC on
// each switch's bus; p5.48xlarge, an H100 and 4 NICs under each switch;
// p5en, an H200 and 2 NICs; trn1, 2 Trainium chips and 1 NIC.
#include "nic_select_topology.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "gpu_nics.hpp"

namespace {

using namespace nic_select_test;
using efa::choose_gpu;
using efa::GpuChoice;
using efa::node_accelerators;
using efa::select_gpu_nic_set;

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
};

// The switch (or, on p4d, the bus) an accelerator's PCI address is under,
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

INSTANTIATE_TEST_SUITE_P(Layouts, EveryGpuLayout, ::testing::Range(0, 4));

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

// CUDA_VISIBLE_DEVICES naming one GPU decides, whatever the local rank;
// a list or a UUID does not.
TEST(GpuNics, CudaVisibleDevicesNamesTheGpu) {
    const Topology topo = Topology::from_file("p5.48xlarge.xml");
    ASSERT_NE(topo.get(), nullptr);
    const auto accs = node_accelerators(topo.get());
    GpuChoice g = choose_gpu(topo.get(), "auto", "5", 0, 2, nullptr);
    EXPECT_EQ(g.bus_id, accs[5].bus_id);
    EXPECT_NE(g.reason.find("CUDA_VISIBLE_DEVICES=5"), std::string::npos) << g.reason;
    g = choose_gpu(topo.get(), "auto", "0,1", 0, 2, nullptr);
    EXPECT_TRUE(g.bus_id.empty()) << "a list of GPUs chose " << g.bus_id;
    g = choose_gpu(topo.get(), "auto", "GPU-8e4f1b2a", 0, 2, nullptr);
    EXPECT_TRUE(g.bus_id.empty()) << "a UUID chose " << g.bus_id;
    EXPECT_TRUE(g.error.empty());
    // With one process per GPU the list falls back to the local rank.
    g = choose_gpu(topo.get(), "auto", "0,1,2,3,4,5,6,7", 6, 8, nullptr);
    EXPECT_EQ(g.bus_id, accs[6].bus_id);
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

// p4d: the two GPUs of a switch share its one NIC.
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

} // namespace
