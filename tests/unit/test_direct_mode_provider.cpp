// What the direct mode asks of and takes from its provider (efa-direct,
// libfabric 2.x): a completion queue without tags (efa-direct refuses a
// tagged one), no message over the device's MTU whatever max_msg_size
// says once RMA is granted, and the FI_RX_CQ_DATA mode, without which
// efa-direct offers no RMA on some devices.
#include <gtest/gtest.h>

#include <cstring>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "core_test_params.hpp"
#include "efa_params.hpp"
#include "nic.hpp"
#include "provider_select.hpp"

namespace {

// An fi_info as a provider would describe itself; 'fabric' is its name.
// The NIC is the test's own (fi_freeinfo would close it as a provider's).
struct Described {
    efa::InfoPtr info;
    fid_nic nic{};
    fi_link_attr link{};
    Described(const char *fabric, uint64_t caps, size_t max_msg, size_t link_mtu)
        : info(fi_allocinfo()) {
        info->caps = caps;
        info->ep_attr->max_msg_size = max_msg;
        info->fabric_attr->name = strdup(fabric);
        info->fabric_attr->prov_name = strdup("efa");
        link.mtu = link_mtu;
        nic.fid.fclass = FI_CLASS_NIC;
        nic.link_attr = &link;
        info->nic = &nic;
    }
    ~Described() { info->nic = nullptr; }
    const fi_info *get() const { return info.get(); }
};

TEST(DirectModeProvider, QueueWithoutTagsWhereTheEndpointHasNone) {
    Described tagged("efa", FI_TAGGED | FI_MSG | FI_RMA, 1 << 20, 8928);
    Described direct("efa-direct", FI_MSG | FI_RMA, 1 << 30, 8928);
    EXPECT_EQ(FI_CQ_FORMAT_TAGGED, efa::cq_format_for(tagged.get()));
    EXPECT_EQ(FI_CQ_FORMAT_DATA, efa::cq_format_for(direct.get()));
}

TEST(DirectModeProvider, NoMessageOverTheDevicesMtu) {
    // efa-direct with RMA: max_msg_size is the RDMA limit, the link MTU
    // the device's.
    Described direct("efa-direct", FI_MSG | FI_RMA, 1 << 30, 8928);
    EXPECT_EQ(8928u, efa::direct_max_msg_size(direct.get(), 65536));
    EXPECT_EQ(4096u, efa::direct_max_msg_size(direct.get(), 4096));
    EXPECT_EQ(static_cast<size_t>(efa::ParamLimits::kDefaultDirectMtu),
              efa::direct_max_msg_size(direct.get(), 0));
    // A stand-in forced into the mode: its link MTU (an interface's) is
    // not a message limit; its max_msg_size is.
    Described standin("127.0.0.0/8", FI_MSG | FI_RMA, 1 << 30, 1500);
    EXPECT_EQ(16384u, efa::direct_max_msg_size(standin.get(), 16384));
    Described small("127.0.0.0/8", FI_MSG, 2048, 0);
    EXPECT_EQ(2048u, efa::direct_max_msg_size(small.get(), 16384));
}

TEST(DirectModeProvider, HintsTakeRxCqDataOnlyInTheDirectMode) {
    efa_core_params_t p = core_test_params("efa");
    auto plain = efa::make_hints(p, FI_TAGGED | FI_MSG, false, false);
    ASSERT_TRUE(plain);
    EXPECT_EQ(0u, plain->mode & FI_RX_CQ_DATA);
    p.force_direct_mode = 1;
    auto direct = efa::make_hints(p, FI_MSG | FI_RMA, true, false);
    ASSERT_TRUE(direct);
    EXPECT_NE(0u, direct->mode & FI_RX_CQ_DATA);
    EXPECT_NE(0u, direct->mode & FI_CONTEXT2);
}

} // namespace
