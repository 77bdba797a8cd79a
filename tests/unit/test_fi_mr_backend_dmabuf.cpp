// FiMrBackend's dmabuf path against a stand-in domain that refuses every
// registration through a dmabuf (FI_MR_DMABUF) and takes every other: the
// refusal is said once, that allocation and every later one go by device
// address, and the provider is not asked through a dmabuf again.  One
// that fails for room is no refusal.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "core.hpp"
#include "efa_device.h"

namespace {

// FI_MR_DMABUF where libfabric has it (1.20+), else no flag at all.
#ifdef FI_MR_DMABUF
constexpr uint64_t kDmabuf = FI_MR_DMABUF;
#else
constexpr uint64_t kDmabuf = 0;
#endif

struct StandInDomain {
    fid_domain domain{};
    fi_ops_mr mr_ops{};
    int through_dmabuf = 0;    // registrations asked through a dmabuf (refused, see below)
    int by_address = 0;        // the others (all taken)
    int live = 0;              // taken and not closed
    int dmabuf_no_room = 0;    // the next ones through a dmabuf fail for room (-FI_ENOMEM)
    int bind_refused = 0;      // the next binds to an endpoint fail (-FI_EINVAL)
    bool dmabuf_taken = false; // after those: taken rather than refused
};
StandInDomain *g_domain = nullptr;

int close_mr(fid *f) {
    --g_domain->live;
    delete reinterpret_cast<fid_mr *>(f);
    return 0;
}
int bind_mr(fid *, fid *, uint64_t) {
    if (g_domain->bind_refused > 0) {
        --g_domain->bind_refused;
        return -FI_EINVAL;
    }
    return 0;
}
int control_mr(fid *, int, void *) {
    return 0; // (FI_ENABLE)
}
fi_ops mr_fid_ops() {
    fi_ops ops{};
    ops.size = sizeof(fi_ops);
    ops.close = close_mr;
    ops.bind = bind_mr;
    ops.control = control_mr;
    return ops;
}
fi_ops g_mr_fid_ops = mr_fid_ops();

int regattr(fid *, const fi_mr_attr *attr, uint64_t flags, fid_mr **out) {
    if (flags & kDmabuf) {
        ++g_domain->through_dmabuf;
        if (g_domain->dmabuf_no_room > 0) {
            --g_domain->dmabuf_no_room;
            return -FI_ENOMEM;
        }
        if (!g_domain->dmabuf_taken) {
            return -FI_EOPNOTSUPP;
        }
    } else {
        ++g_domain->by_address;
    }
    ++g_domain->live;
    auto *mr = new fid_mr{};
    mr->fid.ops = &g_mr_fid_ops;
    mr->key = attr->requested_key;
    *out = mr;
    return 0;
}

std::vector<std::string> g_said;
void keep_verbose(int, const char *msg) {
    g_said.emplace_back(msg);
}

class FiMrBackendDmabuf : public ::testing::Test {
  protected:
    void SetUp() override {
        g_domain = &domain_;
        g_said.clear();
        domain_.mr_ops.size = sizeof(fi_ops_mr);
        domain_.mr_ops.regattr = regattr;
        domain_.domain.mr = &domain_.mr_ops;
        efa_device_install(efa_fake_device_ops());
        efa_fake_device_visible(true);
        rep_.verbose = keep_verbose;
        rep_.verbosity = 1;
    }
    void TearDown() override {
        efa_fake_device_visible(false);
        efa_device_install(nullptr);
        g_domain = nullptr;
    }
    // Two allocations of the fake's, freed at the end of the test.
    void two_allocations(void **a, void **b) {
        *a = efa_fake_device_alloc(4096);
        *b = efa_fake_device_alloc(4096);
        ASSERT_NE(*a, nullptr);
        ASSERT_NE(*b, nullptr);
    }
    StandInDomain domain_;
    efa::Reporter rep_;
};

TEST_F(FiMrBackendDmabuf, ARefusalIsSaidOnceAndEveryAllocationGoesByAddress) {
    efa::FiMrBackend host({{&domain_.domain, {}}}, false);
    efa::FiMrBackend device({{&domain_.domain, {}}}, false, host);
    device.use_dmabuf(&rep_);
    ASSERT_TRUE(device.dmabuf());
    void *a = nullptr, *b = nullptr;
    two_allocations(&a, &b);
    efa::MrRegistration ra{}, rb{};
    ASSERT_EQ(device.reg(a, 4096, FI_SEND | FI_REMOTE_READ, &ra), 0);
    ASSERT_EQ(device.reg(b, 4096, FI_SEND | FI_REMOTE_READ, &rb), 0);
    // (libfabric below 1.20 has no dmabuf registration to ask for: the
    // backend's first try fails before the provider, as a refusal)
    EXPECT_EQ(domain_.through_dmabuf, kDmabuf ? 1 : 0);
    EXPECT_EQ(domain_.by_address, 2);
    EXPECT_FALSE(device.dmabuf());
    EXPECT_EQ(device.dmabuf_regs(), 0u);
    ASSERT_EQ(g_said.size(), 1u);
    EXPECT_NE(g_said[0].find("device addresses from now on"), std::string::npos) << g_said[0];
    device.dereg(ra);
    device.dereg(rb);
    EXPECT_EQ(domain_.live, 0);
    efa_fake_device_free(a);
    efa_fake_device_free(b);
}

// A registration through a dmabuf that fails for room (the NIC's
// registrations, the locked-memory limit) is no refusal: the error goes
// back as it is, for the cache to let its idle registrations go and ask
// again, nothing is said, and the next one goes through a dmabuf still.
TEST_F(FiMrBackendDmabuf, NoRoomIsNoRefusal) {
    if (0 == kDmabuf) {
        GTEST_SKIP() << "libfabric below 1.20: no registration through a dmabuf to fail";
    }
    efa::FiMrBackend host({{&domain_.domain, {}}}, false);
    efa::FiMrBackend device({{&domain_.domain, {}}}, false, host);
    device.use_dmabuf(&rep_);
    domain_.dmabuf_no_room = 1;
    domain_.dmabuf_taken = true;
    void *a = efa_fake_device_alloc(4096);
    ASSERT_NE(a, nullptr);
    efa::MrRegistration ra{};
    EXPECT_EQ(device.reg(a, 4096, FI_SEND | FI_REMOTE_READ, &ra), -FI_ENOMEM);
    EXPECT_EQ(domain_.by_address, 0);
    EXPECT_TRUE(device.dmabuf());
    EXPECT_TRUE(g_said.empty());
    ASSERT_EQ(device.reg(a, 4096, FI_SEND | FI_REMOTE_READ, &ra), 0);
    EXPECT_EQ(domain_.through_dmabuf, 2);
    EXPECT_EQ(device.dmabuf_regs(), 1u);
    device.dereg(ra);
    EXPECT_EQ(domain_.live, 0);
    efa_fake_device_free(a);
}

// A registration through a dmabuf that the provider took but that would
// not bind to the endpoints (FI_MR_ENDPOINT) says nothing of dmabuf: that
// allocation goes by address, dmabuf stays on, and the next one goes
// through a dmabuf.
TEST_F(FiMrBackendDmabuf, ARegistrationThatWouldNotBindGoesByAddress) {
    if (0 == kDmabuf) {
        GTEST_SKIP() << "libfabric below 1.20: no registration through a dmabuf to bind";
    }
    fid_ep ep{};
    efa::FiMrBackend host({{&domain_.domain, {&ep}}}, false);
    efa::FiMrBackend device({{&domain_.domain, {&ep}}}, false, host);
    device.use_dmabuf(&rep_);
    domain_.dmabuf_taken = true;
    domain_.bind_refused = 1;
    void *a = nullptr, *b = nullptr;
    two_allocations(&a, &b);
    efa::MrRegistration ra{}, rb{};
    ASSERT_EQ(device.reg(a, 4096, FI_SEND | FI_REMOTE_READ, &ra), 0);
    EXPECT_EQ(domain_.through_dmabuf, 1);
    EXPECT_EQ(domain_.by_address, 1);
    EXPECT_TRUE(device.dmabuf());
    EXPECT_TRUE(g_said.empty());
    ASSERT_EQ(device.reg(b, 4096, FI_SEND | FI_REMOTE_READ, &rb), 0);
    EXPECT_EQ(device.dmabuf_regs(), 1u);
    device.dereg(ra);
    device.dereg(rb);
    EXPECT_EQ(domain_.live, 0) << "the registration that would not bind was not closed";
    efa_fake_device_free(a);
    efa_fake_device_free(b);
}

} // namespace
