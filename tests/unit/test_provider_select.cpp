// Provider selection against this machine's real libfabric: the stand-in
// providers are admitted only when named; bad lists are refused with the
// right diagnostic; the default (efa) fails cleanly where there is no EFA.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "provider_select.hpp"

namespace {

std::vector<std::string> g_topics;

void record(const char *topic, const char *, const char *, const char *) {
    g_topics.push_back(topic);
}

efa_core_params_t params(const char *inc, const char *exc = "") {
    efa_core_params_t p{};
    p.provider_include = inc;
    p.provider_exclude = exc;
    p.num_contexts = 1;
    p.mr_cache_size = 16;
    p.progress_batch = 16;
    return p;
}

int select(const efa_core_params_t &p, efa::Selection *sel) {
    efa::Reporter rep;
    rep.show_help = record;
    g_topics.clear();
    return efa::select_provider(p, rep, sel);
}

bool has_provider(const char *name) {
    for (const auto &n : efa::known_provider_names()) {
        if (n == name) {
            return true;
        }
    }
    return false;
}

TEST(ProviderSelect, StandInTcpRxm) {
    if (!has_provider("tcp;ofi_rxm")) {
        GTEST_FAIL() << "tcp;ofi_rxm is expected on the test machines (libfabric-bin)";
    }
    efa::Selection sel;
    ASSERT_EQ(select(params("tcp;ofi_rxm"), &sel), 0);
    ASSERT_FALSE(sel.nics.empty());
    EXPECT_STREQ(sel.nics[0]->fabric_attr->prov_name, "tcp;ofi_rxm");
    EXPECT_TRUE(sel.caps & FI_TAGGED);
    EXPECT_TRUE(sel.caps & FI_RMA);
    // Every NIC of the first one's provider and address family, each once,
    // none a loopback interface (not named in a NIC list); their fabrics
    // (subnets) may differ: rails pair NICs by fabric.
    for (size_t i = 0; i < sel.nics.size(); ++i) {
        const fi_info *n = sel.nics[i];
        EXPECT_STREQ(n->fabric_attr->prov_name, "tcp;ofi_rxm");
        EXPECT_EQ(n->addr_format, sel.nics[0]->addr_format);
        EXPECT_FALSE(efa::is_loopback(n)) << n->domain_attr->name;
        for (size_t j = 0; j < i; ++j) {
            EXPECT_STRNE(n->domain_attr->name, sel.nics[j]->domain_attr->name);
        }
    }
    EXPECT_TRUE(g_topics.empty());
}

TEST(ProviderSelect, ShmHasAtomics) {
    efa::Selection sel;
    ASSERT_EQ(select(params("shm"), &sel), 0);
    EXPECT_TRUE(sel.caps & FI_ATOMIC);
    EXPECT_FALSE(sel.mr_local);
}

TEST(ProviderSelect, ForcedMrLocal) {
    auto p = params("udp;ofi_rxd");
    p.force_mr_local = true;
    efa::Selection sel;
    ASSERT_EQ(select(p, &sel), 0);
    EXPECT_TRUE(sel.mr_local);
}

TEST(ProviderSelect, UnknownNameIsRefused) {
    efa::Selection sel;
    EXPECT_EQ(select(params("tpc;ofi_rxm"), &sel), -FI_EINVAL);
    ASSERT_EQ(g_topics.size(), 1u);
    EXPECT_EQ(g_topics[0], "unknown-provider");
}

TEST(ProviderSelect, UnknownExcludedNameIsRefused) {
    efa::Selection sel;
    EXPECT_EQ(select(params("", "tpc;ofi_rxm"), &sel), -FI_EINVAL);
    ASSERT_EQ(g_topics.size(), 1u);
    EXPECT_EQ(g_topics[0], "unknown-excluded-provider");
}

TEST(ProviderSelect, ExcludingEfaIsNeverUnknown) {
    efa::Selection sel;
    select(params("", "efa"), &sel);
    for (const auto &t : g_topics) {
        EXPECT_NE(t, "unknown-excluded-provider");
    }
}

TEST(ProviderSelect, ConflictingListsAreRefused) {
    efa::Selection sel;
    EXPECT_EQ(select(params("shm", "tcp"), &sel), -FI_EINVAL);
    ASSERT_EQ(g_topics.size(), 1u);
    EXPECT_EQ(g_topics[0], "conflicting-lists");
}

TEST(ProviderSelect, DefaultIsEfaOnly) {
    efa::Selection sel;
    if (has_provider("efa")) {
        ASSERT_EQ(select(params(""), &sel), 0);
        EXPECT_STREQ(sel.nics[0]->fabric_attr->prov_name, "efa");
        return;
    }
    EXPECT_EQ(select(params(""), &sel), -FI_ENODATA);
    ASSERT_EQ(g_topics.size(), 1u);
    EXPECT_EQ(g_topics[0], "no-efa-device");
}

TEST(ProviderSelect, NodeLocalProviderRefusedForMultiNodeJob) {
    auto p = params("shm");
    p.need_remote_comm = true;
    efa::Selection sel;
    EXPECT_EQ(select(p, &sel), -FI_ENODATA);
    ASSERT_EQ(g_topics.size(), 1u);
    EXPECT_EQ(g_topics[0], "no-provider-matched");
}

TEST(ProviderSelect, AbsurdParameterIsRefused) {
    auto p = params("shm");
    p.num_contexts = 100000;
    efa::Selection sel;
    EXPECT_EQ(select(p, &sel), -FI_EINVAL);
    ASSERT_EQ(g_topics.size(), 1u);
    EXPECT_EQ(g_topics[0], "bad-param");
}

} // namespace

// mtl_efa_matching auto: own where measured (the tcp and udp stand-ins)
// and, on any tagged provider, where the node offers several rails (own
// matching spreads and fails over; the provider's tags keep the first
// NIC); the provider's otherwise; own whatever the rails without tags.
TEST(AutoMatching, MeasuredRailsOrProvider) {
    EXPECT_EQ(efa_core_auto_matching("tcp;ofi_rxm", true, 1), EFA_AUTO_MATCH_MEASURED);
    EXPECT_EQ(efa_core_auto_matching("udp;ofi_rxd", true, 4), EFA_AUTO_MATCH_MEASURED);
    EXPECT_EQ(efa_core_auto_matching("efa", true, 1), EFA_AUTO_MATCH_PROVIDER);
    EXPECT_EQ(efa_core_auto_matching("efa", true, 2), EFA_AUTO_MATCH_RAILS);
    EXPECT_EQ(efa_core_auto_matching("efa", true, 4), EFA_AUTO_MATCH_RAILS);
    EXPECT_EQ(efa_core_auto_matching("shm", true, 1), EFA_AUTO_MATCH_PROVIDER);
    EXPECT_EQ(efa_core_auto_matching("efa", false, 1), EFA_AUTO_MATCH_NO_TAGS);
    EXPECT_EQ(efa_core_auto_matching("efa-direct", false, 4), EFA_AUTO_MATCH_NO_TAGS);
    EXPECT_EQ(efa_core_auto_matching(nullptr, true, 1), EFA_AUTO_MATCH_PROVIDER);
}
