// FiMrBackend's device registrations on a process's several NICs, against
// stand-in domains that take every registration (or refuse each one): a
// device allocation that peers may read or write, or that a read or write
// of this process lands in or leaves from, is registered on every NIC
// with the same key and its device's interface, so that a transfer of it
// can be striped; one for messages alone stays on the first NIC; a NIC
// that refuses leaves the allocation on the NICs before it.  A rail that
// refuses a dmabuf takes the allocation by address, and turns dmabuf off
// for itself alone: the first NIC keeps it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "core.hpp"
#include "efa_device.h"

namespace {

struct StandInDomain {
    fid_domain domain{}; // (first: the provider's calls get its fid)
    fi_ops_mr mr_ops{};
    bool refuse = false;
    int refuse_with = -FI_ENOSYS; // (-FI_ENOMEM: no room)
    bool refuse_dmabuf = false;
    int through_dmabuf = 0; // taken through a dmabuf
    int taken = 0;          // registrations taken
    int live = 0;           // ... and not closed
    uint64_t last_key = 0;
    fi_hmem_iface last_iface = FI_HMEM_SYSTEM;
    uint64_t last_access = 0;
};

struct StandInMr {
    fid_mr mr{};
    StandInDomain *domain = nullptr;
};

int close_mr(fid *f) {
    auto *m = reinterpret_cast<StandInMr *>(f);
    --m->domain->live;
    delete m;
    return 0;
}
fi_ops mr_fid_ops() {
    fi_ops ops{};
    ops.size = sizeof(fi_ops);
    ops.close = close_mr;
    return ops;
}
fi_ops g_mr_fid_ops = mr_fid_ops();

// FI_MR_DMABUF where libfabric has it (1.20+), else no flag at all.
#ifdef FI_MR_DMABUF
constexpr uint64_t kDmabuf = FI_MR_DMABUF;
#else
constexpr uint64_t kDmabuf = 0;
#endif

int regattr(fid *f, const fi_mr_attr *attr, uint64_t flags, fid_mr **out) {
    auto *d = reinterpret_cast<StandInDomain *>(f);
    const bool dmabuf = kDmabuf && (flags & kDmabuf);
    if (d->refuse) {
        return d->refuse_with;
    }
    if (dmabuf && d->refuse_dmabuf) {
        return -FI_ENOSYS;
    }
    d->through_dmabuf += dmabuf ? 1 : 0;
    ++d->taken;
    ++d->live;
    d->last_key = attr->requested_key;
    d->last_iface = attr->iface;
    d->last_access = attr->access;
    auto *m = new StandInMr{};
    m->mr.fid.ops = &g_mr_fid_ops;
    m->mr.key = attr->requested_key;
    m->mr.mem_desc = m;
    m->domain = d;
    *out = &m->mr;
    return 0;
}

// Host memory (fi_mr_reg) as a registration of the system's interface.
int reg(fid *f, const void *buf, size_t len, uint64_t access, uint64_t, uint64_t key,
        uint64_t flags, fid_mr **out, void *) {
    const iovec iov{const_cast<void *>(buf), len};
    fi_mr_attr attr{};
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = access;
    attr.requested_key = key;
    return regattr(f, &attr, flags, out);
}

class FiMrBackendDeviceRails : public ::testing::Test {
  protected:
    void SetUp() override {
        for (StandInDomain &d : nics_) {
            d.mr_ops.size = sizeof(fi_ops_mr);
            d.mr_ops.regattr = regattr;
            d.mr_ops.reg = reg;
            d.domain.mr = &d.mr_ops;
        }
        efa_device_install(efa_fake_device_ops());
        efa_fake_device_visible(true);
        buf_ = efa_fake_device_alloc(kLen);
        ASSERT_NE(buf_, nullptr);
    }
    void TearDown() override {
        efa_fake_device_free(buf_);
        efa_fake_device_visible(false);
        efa_device_install(nullptr);
    }
    std::vector<efa::FiMrBackend::Domain> domains() {
        return {{&nics_[0].domain, {}}, {&nics_[1].domain, {}}, {&nics_[2].domain, {}}};
    }
    int live() const { return nics_[0].live + nics_[1].live + nics_[2].live; }
    static constexpr size_t kLen = 1 << 16;
    StandInDomain nics_[3];
    void *buf_ = nullptr;
};

TEST_F(FiMrBackendDeviceRails, MemoryPeersReadIsRegisteredOnEveryNicWithOneKey) {
    efa::FiMrBackend host(domains(), false);
    efa::FiMrBackend device(domains(), false, host);
    efa::MrRegistration r{};
    ASSERT_EQ(device.reg(buf_, kLen, FI_REMOTE_READ, &r), 0);
    EXPECT_TRUE(r.device);
    ASSERT_EQ(r.rails, 3);
    for (const StandInDomain &d : nics_) {
        EXPECT_EQ(d.taken, 1);
        EXPECT_EQ(d.last_key, r.key) << "the NICs' keys differ";
        EXPECT_EQ(d.last_iface, FI_HMEM_SYSTEM) << "registered without its device's interface";
        EXPECT_EQ(d.last_access, static_cast<uint64_t>(FI_REMOTE_READ));
    }
    EXPECT_NE(r.rail[0].desc, nullptr);
    EXPECT_NE(r.rail[1].desc, r.rail[0].desc);
    EXPECT_EQ(r.rail[1].key, r.key);
    device.dereg(r);
    EXPECT_EQ(live(), 0) << "a NIC's registration outlived the allocation's";
}

TEST_F(FiMrBackendDeviceRails, ALocalReadsTargetIsOnEveryNicWhateverMrLocalSays) {
    efa::FiMrBackend host(domains(), false);
    efa::FiMrBackend device(domains(), false, host); // (no FI_MR_LOCAL)
    efa::MrRegistration r{};
    ASSERT_EQ(device.reg(buf_, kLen, FI_READ, &r), 0);
    EXPECT_EQ(r.rails, 3) << "a read striped into device memory needs its descriptor on each NIC";
    device.dereg(r);
    EXPECT_EQ(live(), 0);
}

TEST_F(FiMrBackendDeviceRails, MessagesAloneStayOnTheFirstNic) {
    efa::FiMrBackend host(domains(), false);
    efa::FiMrBackend device(domains(), false, host);
    efa::MrRegistration r{};
    ASSERT_EQ(device.reg(buf_, kLen, FI_SEND | FI_RECV, &r), 0);
    EXPECT_EQ(r.rails, 1);
    EXPECT_EQ(nics_[1].taken + nics_[2].taken, 0);
    device.dereg(r);
    EXPECT_EQ(live(), 0);
}

TEST_F(FiMrBackendDeviceRails, ANicThatRefusesLeavesItOnTheNicsBefore) {
    nics_[1].refuse = true;
    efa::FiMrBackend host(domains(), false);
    efa::FiMrBackend device(domains(), false, host);
    efa::MrRegistration r{};
    ASSERT_EQ(device.reg(buf_, kLen, FI_REMOTE_READ | FI_REMOTE_WRITE, &r), 0);
    EXPECT_EQ(r.rails, 1);
    EXPECT_EQ(nics_[2].taken, 0) << "registered past a NIC that refused";
    EXPECT_FALSE(r.rails_short_of_room) << "a refusal taken for want of room";
    device.dereg(r);
    EXPECT_EQ(live(), 0);
}

// A rail without room says so, host memory or device memory: the cache
// lets its idle registrations go and asks again (test_mr_cache_lookup.cpp).
TEST_F(FiMrBackendDeviceRails, ANicWithoutRoomSaysSo) {
    nics_[2].refuse = true;
    nics_[2].refuse_with = -FI_ENOMEM;
    efa::FiMrBackend host(domains(), false);
    efa::FiMrBackend device(domains(), false, host);
    efa::MrRegistration r{};
    ASSERT_EQ(device.reg(buf_, kLen, FI_REMOTE_READ, &r), 0);
    EXPECT_EQ(r.rails, 2);
    EXPECT_TRUE(r.rails_short_of_room);
    device.dereg(r);
    std::vector<char> mem(kLen);
    efa::MrRegistration h{};
    ASSERT_EQ(host.reg(mem.data(), kLen, FI_REMOTE_WRITE, &h), 0);
    EXPECT_EQ(h.rails, 2);
    EXPECT_TRUE(h.rails_short_of_room);
    host.dereg(h);
    EXPECT_EQ(live(), 0);
}

TEST_F(FiMrBackendDeviceRails, TheFirstNicsRefusalFailsTheRegistration) {
    nics_[0].refuse = true;
    efa::FiMrBackend host(domains(), false);
    efa::FiMrBackend device(domains(), false, host);
    efa::MrRegistration r{};
    EXPECT_EQ(device.reg(buf_, kLen, FI_REMOTE_READ, &r), -FI_ENOSYS);
    EXPECT_EQ(nics_[1].taken + nics_[2].taken, 0);
    EXPECT_EQ(live(), 0);
}

std::vector<std::string> g_said;
void keep_verbose(int, const char *msg) {
    g_said.emplace_back(msg);
}

TEST_F(FiMrBackendDeviceRails, ARailsDmabufRefusalTurnsItOffThereAlone) {
    if (!kDmabuf) {
        GTEST_SKIP() << "libfabric below 1.20 has no dmabuf registration to refuse";
    }
    nics_[1].refuse_dmabuf = true;
    g_said.clear();
    efa::Reporter rep;
    rep.verbose = keep_verbose;
    rep.verbosity = 1;
    efa::FiMrBackend host(domains(), false);
    efa::FiMrBackend device(domains(), false, host);
    device.use_dmabuf(&rep);
    for (int i = 0; i < 2; ++i) {
        efa::MrRegistration r{};
        ASSERT_EQ(device.reg(buf_, kLen, FI_REMOTE_READ, &r), 0);
        EXPECT_EQ(r.rails, 3) << "the rail that refused a dmabuf was left out";
        device.dereg(r);
    }
    EXPECT_TRUE(device.dmabuf()) << "one rail's refusal turned dmabuf off for the first NIC";
    EXPECT_EQ(nics_[0].through_dmabuf, 2);
    EXPECT_EQ(nics_[1].through_dmabuf, 0);
    EXPECT_EQ(nics_[1].taken, 2) << "the rail took it by address";
    EXPECT_EQ(nics_[2].through_dmabuf, 2);
    EXPECT_EQ(device.dmabuf_regs(), 2u);
    ASSERT_EQ(g_said.size(), 1u) << "said once";
    EXPECT_NE(g_said[0].find("on NIC 1"), std::string::npos) << g_said[0];
    EXPECT_EQ(live(), 0);
}

} // namespace
