// The libfabric version and efa-provider pieces: API version negotiation,
// the efa/efa-direct fabric choice, the force_emulated list, the failure
// log's once-per-kind rule, and the efa switches forced onto a stand-in
// endpoint (the stand-ins refuse them: the outcome must say so).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "core_report.hpp"
#include "efa_build_config.h"
#include "efa_params.hpp"
#include "fi_failures.hpp"
#include "nic.hpp"
#include "provider_options.hpp"
#include "provider_select.hpp"

namespace {

TEST(ApiVersion, NewestBothHave) {
    EXPECT_EQ(efa::negotiate_api_version(FI_VERSION(2, 6), FI_VERSION(1, 17)), FI_VERSION(1, 17));
    EXPECT_EQ(efa::negotiate_api_version(FI_VERSION(1, 17), FI_VERSION(2, 6)), FI_VERSION(1, 17));
    EXPECT_EQ(efa::negotiate_api_version(FI_VERSION(2, 6), FI_VERSION(2, 6)), FI_VERSION(2, 6));
}

TEST(ApiVersion, NeverBelowWhatTheCodeNeeds) {
    EXPECT_EQ(efa::negotiate_api_version(FI_VERSION(1, 12), FI_VERSION(2, 0)), efa::kMinApiVersion);
    EXPECT_EQ(efa::negotiate_api_version(FI_VERSION(2, 0), FI_VERSION(1, 9)), efa::kMinApiVersion);
}

TEST(ApiVersion, ThisBuildAsksForTheLoadedLibrarysVersionAtMost) {
    const uint32_t v = efa::api_version();
    EXPECT_LE(v, fi_version());
    EXPECT_LE(v, FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION));
    EXPECT_GE(v, efa::kMinApiVersion);
    EXPECT_EQ(efa::version_string(FI_VERSION(2, 6)), "2.6");
}

// A fi_info naming a provider and a fabric, as fi_getinfo would return.
efa::InfoPtr fake_info(const char *prov, const char *fabric) {
    efa::InfoPtr info(fi_allocinfo());
    info->fabric_attr->prov_name = strdup(prov);
    info->fabric_attr->name = strdup(fabric);
    return info;
}

TEST(FabricChoice, EfaDirectIsSkippedWithAReason) {
    std::string why;
    EXPECT_FALSE(efa::prefer_fabric(fake_info("efa", "efa-direct").get(), false, &why));
    EXPECT_NE(why.find("efa-direct"), std::string::npos);
    why.clear();
    EXPECT_TRUE(efa::prefer_fabric(fake_info("efa", "efa").get(), false, &why));
    EXPECT_TRUE(efa::prefer_fabric(fake_info("tcp;ofi_rxm", "192.0.2.0/24").get(), false, &why));
    EXPECT_TRUE(why.empty());
}

TEST(FabricChoice, DirectModeAdmitsEfaDirect) {
    std::string why;
    EXPECT_TRUE(efa::prefer_fabric(fake_info("efa", "efa-direct").get(), true, &why));
    EXPECT_TRUE(efa::prefer_fabric(fake_info("efa", "efa").get(), true, &why));
    EXPECT_TRUE(why.empty());
}

TEST(ForceEmulated, ParsesTheThreeNames) {
    efa::EmulatedOverride o;
    std::string bad;
    ASSERT_TRUE(efa::parse_emulated_list("read,atomics", &o, &bad));
    EXPECT_TRUE(o.read);
    EXPECT_FALSE(o.write);
    EXPECT_TRUE(o.atomics);
    ASSERT_TRUE(efa::parse_emulated_list("", &o, &bad));
    EXPECT_FALSE(o.read || o.write || o.atomics);
    ASSERT_TRUE(efa::parse_emulated_list(nullptr, &o, &bad));
    EXPECT_FALSE(efa::parse_emulated_list("read,writes", &o, &bad));
    EXPECT_EQ(bad, "writes");
    EXPECT_FALSE(efa::parse_emulated_list("read,,write", &o, &bad));
}

efa_core_params_t defaults() {
    efa_core_params_t p{};
    p.num_contexts = 1;
    p.mr_cache_size = 16;
    p.progress_batch = 16;
    p.rnr_retry = -1;
    return p;
}

bool refused(const efa_core_params_t &p, const std::string &name) {
    for (const auto &pb : efa::validate_params(p)) {
        if (pb.name == name) {
            return true;
        }
    }
    return false;
}

TEST(SwitchParams, RnrRetryAndForceEmulatedAreChecked) {
    auto p = defaults();
    for (int v : {-1, 0, 7}) {
        p.rnr_retry = v;
        EXPECT_FALSE(refused(p, "rnr_retry")) << v;
    }
    for (int v : {-2, 8, 1 << 20}) {
        p.rnr_retry = v;
        EXPECT_TRUE(refused(p, "rnr_retry")) << v;
    }
    p.rnr_retry = -1;
    p.force_emulated = "write";
    EXPECT_FALSE(refused(p, "force_emulated"));
    p.force_emulated = "rdma";
    EXPECT_TRUE(refused(p, "force_emulated"));
}

std::vector<std::string> g_said;
void collect(int, const char *msg) {
    g_said.push_back(msg);
}

TEST(FailureLog, OncePerCallAndError) {
    efa::Reporter rep;
    rep.verbose = collect;
    rep.verbosity = 1;
    g_said.clear();
    efa::FailureLog log;
    EXPECT_TRUE(log.is_new("fi_tsend", -FI_EINVAL));
    EXPECT_TRUE(log.report(rep, "fi_tsend", -FI_EINVAL, "bad address"));
    EXPECT_FALSE(log.is_new("fi_tsend", FI_EINVAL)); // either sign is the same error
    EXPECT_FALSE(log.report(rep, "fi_tsend", -FI_EINVAL));
    EXPECT_TRUE(log.report(rep, "fi_tsend", -FI_EIO));
    EXPECT_TRUE(log.report(rep, "fi_read", -FI_EINVAL));
    ASSERT_EQ(g_said.size(), 3u);
    EXPECT_NE(g_said[0].find("fi_tsend failed: "), std::string::npos);
    EXPECT_NE(g_said[0].find(fi_strerror(FI_EINVAL)), std::string::npos);
    EXPECT_NE(g_said[0].find("provider: bad address"), std::string::npos);
}

TEST(FailureLog, SilentBelowVerbose1ButCountsTheKind) {
    efa::Reporter rep;
    rep.verbose = collect;
    rep.verbosity = 0;
    g_said.clear();
    efa::FailureLog log;
    log.report(rep, "fi_mr_reg", -FI_ENOKEY);
    EXPECT_TRUE(g_said.empty());
    EXPECT_FALSE(log.is_new("fi_mr_reg", -FI_ENOKEY));
}

TEST(Report, MrModeNamesEveryBit) {
    EXPECT_EQ(efa::mr_mode_string(0), "none");
    EXPECT_EQ(efa::mr_mode_string(FI_MR_LOCAL | FI_MR_PROV_KEY), "FI_MR_LOCAL|FI_MR_PROV_KEY");
    EXPECT_STREQ(efa::rma_by_string(EFA_RMA_BY_EMULATION), "emulated by the provider");
}

// A tcp;ofi_rxm endpoint with the efa switches forced on: the stand-in does
// not know them, so each outcome must say "refused" (or that this libfabric
// lacks the option), and nothing may claim the device does RDMA.
class ForcedSwitches : public ::testing::Test {
  protected:
    void SetUp() override {
        efa::InfoPtr hints(fi_allocinfo());
        hints->caps = FI_TAGGED | FI_MSG | FI_RMA;
        hints->ep_attr->type = FI_EP_RDM;
        hints->fabric_attr->prov_name = strdup("tcp;ofi_rxm");
        fi_info *list = nullptr;
        ASSERT_EQ(fi_getinfo(efa::api_version(), nullptr, nullptr, 0, hints.get(), &list), 0)
            << "tcp;ofi_rxm is expected on the test machines";
        info_.reset(list);
        fid_fabric *fabric = nullptr;
        ASSERT_EQ(fi_fabric(info_->fabric_attr, &fabric, nullptr), 0);
        fabric_.reset(fabric);
        fid_domain *domain = nullptr;
        ASSERT_EQ(fi_domain(fabric, info_.get(), &domain, nullptr), 0);
        domain_.reset(domain);
        fid_ep *ep = nullptr;
        ASSERT_EQ(fi_endpoint(domain, info_.get(), &ep, nullptr), 0);
        ep_.reset(ep);
    }
    // As the core does after applying the switches (ofi_rxm also wants an
    // endpoint enabled before it is closed).
    void enable() {
        fi_cq_attr cq_attr = {};
        cq_attr.format = FI_CQ_FORMAT_TAGGED;
        fid_cq *cq = nullptr;
        ASSERT_EQ(fi_cq_open(domain_.get(), &cq_attr, &cq, nullptr), 0);
        cq_.reset(cq);
        fi_av_attr av_attr = {};
        av_attr.type = FI_AV_TABLE;
        fid_av *av = nullptr;
        ASSERT_EQ(fi_av_open(domain_.get(), &av_attr, &av, nullptr), 0);
        av_.reset(av);
        ASSERT_EQ(fi_ep_bind(ep_.get(), &cq->fid, FI_TRANSMIT | FI_RECV), 0);
        ASSERT_EQ(fi_ep_bind(ep_.get(), &av->fid, 0), 0);
        ASSERT_EQ(fi_enable(ep_.get()), 0) << "a refused option must not spoil the endpoint";
    }
    void TearDown() override {
        ep_.reset();
        av_.reset();
        cq_.reset();
    }
    efa::InfoPtr info_;
    efa::FabricPtr fabric_;
    efa::DomainPtr domain_;
    efa::CqPtr cq_;
    efa::AvPtr av_;
    efa::EpPtr ep_;
};

bool any_line_has(const efa::ProviderSwitches &sw, const std::string &a, const std::string &b) {
    for (const auto &l : sw.lines) {
        if (l.find(a) != std::string::npos || l.find(b) != std::string::npos) {
            return true;
        }
    }
    return false;
}

TEST_F(ForcedSwitches, NotAppliedUnlessEfaOrForced) {
    auto p = defaults();
    p.provider_shm = EFA_SWITCH_OFF;
    p.provider_cuda_calls = EFA_SWITCH_OFF;
    p.rnr_retry = 3;
    efa::ProviderSwitches sw;
    EXPECT_FALSE(efa::provider_takes_efa_switches(info_.get(), p));
    efa::apply_switches_before_enable(ep_.get(), info_.get(), p, &sw);
    enable();
    efa::read_switches_after_enable(ep_.get(), info_.get(), p, &sw);
    EXPECT_TRUE(sw.lines.empty());
    EXPECT_EQ(sw.provider_shm, EFA_SWITCH_AUTO);
    EXPECT_EQ(sw.cuda_calls, EFA_SWITCH_AUTO);
    EXPECT_EQ(sw.read, EFA_RMA_BY_UNKNOWN);
}

TEST_F(ForcedSwitches, RefusedOptionsKeepTheDefaultAndSaySo) {
    auto p = defaults();
    p.force_efa_options = true;
    p.provider_shm = EFA_SWITCH_OFF;
    p.provider_cuda_calls = EFA_SWITCH_OFF;
    p.rnr_retry = 3;
    efa::ProviderSwitches sw;
    efa::apply_switches_before_enable(ep_.get(), info_.get(), p, &sw);
    // (no CUDA here: a provider that knows the option refuses it too)
    EXPECT_TRUE(any_line_has(sw, "FI_OPT_CUDA_API_PERMITTED: provider CUDA calls off refused",
                             "no FI_OPT_CUDA_API_PERMITTED"));
    EXPECT_EQ(sw.cuda_calls, EFA_SWITCH_AUTO) << "refused, yet taken as set";
    EXPECT_TRUE(any_line_has(sw, "FI_OPT_SHARED_MEMORY_PERMITTED: shm off refused",
                             "no FI_OPT_SHARED_MEMORY_PERMITTED"));
    EXPECT_EQ(sw.provider_shm, EFA_SWITCH_AUTO); // not set, so unknown
#if HAVE_DECL_FI_OPT_EFA_RNR_RETRY
    EXPECT_TRUE(any_line_has(sw, "FI_OPT_EFA_RNR_RETRY: 3 refused", "<never>"));
#else
    EXPECT_TRUE(any_line_has(sw, "no FI_OPT_EFA_RNR_RETRY", "<never>"));
#endif
    enable();
    efa::read_switches_after_enable(ep_.get(), info_.get(), p, &sw);
    EXPECT_NE(sw.read, EFA_RMA_BY_DEVICE);
    EXPECT_NE(sw.write, EFA_RMA_BY_DEVICE);
    EXPECT_TRUE(any_line_has(sw, "does not say", "no FI_OPT_EFA_EMULATED_"));
}

TEST_F(ForcedSwitches, ForceEmulatedOverridesTheAnswer) {
    auto p = defaults();
    p.force_emulated = "write,atomics";
    efa::ProviderSwitches sw;
    enable();
    efa::read_switches_after_enable(ep_.get(), info_.get(), p, &sw);
    EXPECT_EQ(sw.read, EFA_RMA_BY_UNKNOWN);
    EXPECT_EQ(sw.write, EFA_RMA_BY_EMULATION);
    EXPECT_EQ(sw.atomics, EFA_RMA_BY_EMULATION);
    EXPECT_TRUE(any_line_has(sw, "force_emulated=write,atomics", "<never>"));
}

// An endpoint of the efa provider as the switches see it: it takes every
// option it is given (a device with GPUDirect RDMA) and says RDMA read is
// emulated (a device without it), so the accepted path and what follows
// from it are tested where no such provider is.
struct AcceptingEp {
    fid_ep ep = {};
    fi_ops_ep ops = {};
    int cuda_calls_taken = -1; // the bool last set, -1: never set
    bool emulated = true;      // what getopt says of every one-sided operation
    AcceptingEp() {
        ops.size = sizeof(ops);
        ops.setopt = [](fid_t fid, int, int optname, const void *val, size_t len) -> int {
            auto *self = reinterpret_cast<AcceptingEp *>(fid); // (ep, so fid, comes first)
#if HAVE_DECL_FI_OPT_CUDA_API_PERMITTED
            if (optname == FI_OPT_CUDA_API_PERMITTED && len == sizeof(bool)) {
                self->cuda_calls_taken = *static_cast<const bool *>(val);
            }
#else
            (void)self, (void)optname, (void)val, (void)len;
#endif
            return 0;
        };
        ops.getopt = [](fid_t fid, int, int, void *val, size_t *len) -> int {
            if (*len != sizeof(bool)) {
                return -FI_EINVAL;
            }
            *static_cast<bool *>(val) = reinterpret_cast<AcceptingEp *>(fid)->emulated;
            return 0;
        };
        ep.fid.fclass = FI_CLASS_EP;
        ep.ops = &ops;
    }
};
static_assert(offsetof(AcceptingEp, ep) == 0);

TEST(AcceptedSwitches, CudaCallsOffIsTakenAndTurnsTheProvidersShmOffWithHmem) {
    auto p = defaults();
    p.provider_cuda_calls = EFA_SWITCH_OFF;
    for (uint64_t caps : {uint64_t(FI_TAGGED | FI_HMEM), uint64_t(FI_TAGGED)}) {
        efa::InfoPtr info = fake_info("efa", "efa");
        info->caps = caps;
        AcceptingEp fake;
        efa::ProviderSwitches sw;
        efa::apply_switches_before_enable(&fake.ep, info.get(), p, &sw);
        efa::read_switches_after_enable(&fake.ep, info.get(), p, &sw);
#if HAVE_DECL_FI_OPT_CUDA_API_PERMITTED
        EXPECT_EQ(fake.cuda_calls_taken, 0) << "FI_OPT_CUDA_API_PERMITTED not set false";
        EXPECT_EQ(sw.cuda_calls, EFA_SWITCH_OFF);
        // libfabric closes its shm at fi_enable only on an endpoint with FI_HMEM
        const bool hmem = caps & FI_HMEM;
        EXPECT_EQ(sw.provider_shm, hmem ? EFA_SWITCH_OFF : EFA_SWITCH_AUTO) << caps;
        EXPECT_EQ(any_line_has(sw, "shm is off with it", "<never>"), hmem) << caps;
        EXPECT_TRUE(any_line_has(sw, "provider CUDA calls off (device memory reached by the NIC",
                                 "<never>"));
#if HAVE_DECL_FI_OPT_EFA_EMULATED_READ
        EXPECT_TRUE(efa::cuda_calls_off_without_read(sw)) << "the device said read is emulated";
#endif
#else
        EXPECT_FALSE(efa::cuda_calls_off_without_read(sw));
        EXPECT_EQ(fake.cuda_calls_taken, -1);
        EXPECT_EQ(sw.cuda_calls, EFA_SWITCH_AUTO) << "not set, yet taken as set";
        EXPECT_TRUE(any_line_has(sw, "no FI_OPT_CUDA_API_PERMITTED", "<never>"));
#endif
    }
}

// Only CUDA calls off and a device read the provider emulates warrant the
// warning: an unknown answer or the default says nothing.
TEST(AcceptedSwitches, WithoutReadOnlyWhenCallsOffAndReadEmulated) {
    efa::ProviderSwitches sw;
    sw.cuda_calls = EFA_SWITCH_OFF;
    sw.device_read = EFA_RMA_BY_EMULATION;
    EXPECT_TRUE(efa::cuda_calls_off_without_read(sw));
    sw.device_read = EFA_RMA_BY_DEVICE;
    EXPECT_FALSE(efa::cuda_calls_off_without_read(sw));
    sw.device_read = EFA_RMA_BY_UNKNOWN;
    EXPECT_FALSE(efa::cuda_calls_off_without_read(sw));
    sw.device_read = EFA_RMA_BY_EMULATION;
    for (int calls : {EFA_SWITCH_AUTO, EFA_SWITCH_ON}) {
        sw.cuda_calls = calls;
        EXPECT_FALSE(efa::cuda_calls_off_without_read(sw)) << calls;
    }
}

// force_emulated=read changes how btl_efa reaches a peer, not the card: a
// device that reads still copies the provider's eager messages, so no
// warning; and a forced list never hides the card's own emulated read.
TEST(AcceptedSwitches, ForcedEmulatedReadLeavesTheDevicesAnswer) {
    auto p = defaults();
    p.provider_cuda_calls = EFA_SWITCH_OFF;
    p.force_emulated = "read";
    efa::InfoPtr info = fake_info("efa", "efa");
    info->caps = FI_TAGGED | FI_HMEM;
    for (bool card_emulates : {false, true}) {
        AcceptingEp fake;
        fake.emulated = card_emulates;
        efa::ProviderSwitches sw;
        efa::apply_switches_before_enable(&fake.ep, info.get(), p, &sw);
        efa::read_switches_after_enable(&fake.ep, info.get(), p, &sw);
        EXPECT_EQ(sw.read, EFA_RMA_BY_EMULATION) << "force_emulated=read not applied";
#if HAVE_DECL_FI_OPT_CUDA_API_PERMITTED && HAVE_DECL_FI_OPT_EFA_EMULATED_READ
        EXPECT_EQ(sw.device_read, card_emulates ? EFA_RMA_BY_EMULATION : EFA_RMA_BY_DEVICE);
        EXPECT_EQ(efa::cuda_calls_off_without_read(sw), card_emulates) << card_emulates;
#else
        EXPECT_FALSE(efa::cuda_calls_off_without_read(sw)) << "no answer, yet a warning";
#endif
    }
}

TEST(AcceptedSwitches, CudaCallsOnIsTakenWithoutTouchingShm) {
    auto p = defaults();
    p.provider_cuda_calls = EFA_SWITCH_ON;
    efa::InfoPtr info = fake_info("efa", "efa");
    info->caps = FI_TAGGED | FI_HMEM;
    AcceptingEp fake;
    efa::ProviderSwitches sw;
    efa::apply_switches_before_enable(&fake.ep, info.get(), p, &sw);
    EXPECT_EQ(sw.provider_shm, EFA_SWITCH_AUTO);
#if HAVE_DECL_FI_OPT_CUDA_API_PERMITTED
    EXPECT_EQ(fake.cuda_calls_taken, 1);
    EXPECT_EQ(sw.cuda_calls, EFA_SWITCH_ON);
#else
    EXPECT_EQ(sw.cuda_calls, EFA_SWITCH_AUTO);
#endif
}

TEST(AcceptedSwitches, EmulatedReadIsReadFromTheEndpoint) {
    auto p = defaults();
    efa::InfoPtr info = fake_info("efa", "efa");
    AcceptingEp fake;
    efa::ProviderSwitches sw;
    efa::read_switches_after_enable(&fake.ep, info.get(), p, &sw);
#if HAVE_DECL_FI_OPT_EFA_EMULATED_READ && HAVE_DECL_FI_OPT_EFA_EMULATED_WRITE &&                   \
    HAVE_DECL_FI_OPT_EFA_EMULATED_ATOMICS
    EXPECT_EQ(sw.read, EFA_RMA_BY_EMULATION);
    EXPECT_EQ(sw.atomics, EFA_RMA_BY_EMULATION);
#else
    EXPECT_EQ(sw.read, EFA_RMA_BY_UNKNOWN);
#endif
}

// Every endpoint of every NIC gets the switches, and each may answer for
// itself: one that kept the provider's CUDA calls makes VMM memory unsafe
// on it, so the process must not rely on the others' "off".
TEST(MergeSwitches, ASwitchTakenOtherwiseIsUnknown) {
    efa::ProviderSwitches all;
    all.cuda_calls = EFA_SWITCH_OFF;
    all.provider_shm = EFA_SWITCH_OFF;
    all.device_read = EFA_RMA_BY_DEVICE;
    efa::ProviderSwitches same = all;
    same.lines.clear();
    efa::merge_switches(&all, same, "rail 1 (NIC b)");
    EXPECT_EQ(all.cuda_calls, EFA_SWITCH_OFF);
    EXPECT_EQ(all.provider_shm, EFA_SWITCH_OFF);
    EXPECT_TRUE(all.lines.empty()) << "agreeing endpoints said something";

    efa::ProviderSwitches refused; // the option refused there: untouched
    refused.provider_shm = EFA_SWITCH_OFF;
    efa::merge_switches(&all, refused, "rail 1 (NIC b)");
    EXPECT_EQ(all.cuda_calls, EFA_SWITCH_AUTO);
    EXPECT_EQ(all.provider_shm, EFA_SWITCH_OFF);
    ASSERT_EQ(all.lines.size(), 1u);
    EXPECT_NE(all.lines[0].find("rail 1 (NIC b): provider CUDA calls untouched where the first "
                                "endpoint has them off"),
              std::string::npos)
        << all.lines[0];
    const char *why = "";
    EXPECT_FALSE(efa_core_hmem_vmm_allowed(EFA_SWITCH_AUTO, "efa", all.cuda_calls,
                                           FI_VERSION(2, 6), &why))
        << "VMM memory handed to the efa fabric though one NIC may call CUDA: " << why;

    efa::ProviderSwitches shm_on;
    shm_on.provider_shm = EFA_SWITCH_ON;
    shm_on.device_read = EFA_RMA_BY_EMULATION;
    efa::merge_switches(&all, shm_on, "efa_1 context 2");
    EXPECT_EQ(all.provider_shm, EFA_SWITCH_AUTO);
    EXPECT_EQ(all.device_read, EFA_RMA_BY_EMULATION) << "a NIC that cannot read is hidden";
    EXPECT_NE(all.lines.back().find("efa_1 context 2: provider shm on"), std::string::npos);
}

// shm's endpoint address is the name we give it, and peers refuse an
// address of another length: two processes whose pids differ in digit count
// (9999 and 10000) could not talk (seen once in about 350 one-sided runs).
TEST(ShmName, SameLengthWhateverThePidTimeAndIndex) {
    const size_t len = efa::shm_endpoint_name(1, 1, 0, 0).size();
    EXPECT_EQ(efa::shm_endpoint_name(9999, 1795523732, 5, 0).size(), len);
    EXPECT_EQ(efa::shm_endpoint_name(10000, 1795523732, 999999999, 15).size(), len);
    EXPECT_EQ(efa::shm_endpoint_name(4194304, 99999999999LL, 1, 9).size(), len);
    EXPECT_NE(efa::shm_endpoint_name(9999, 1, 0, 0), efa::shm_endpoint_name(99990, 1, 0, 0));
    EXPECT_NE(efa::shm_endpoint_name(7, 1, 0, 1), efa::shm_endpoint_name(7, 1, 0, 2));
}

} // namespace
