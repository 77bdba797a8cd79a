// How often the rails beside the first are polled (ctx_progress.cpp,
// rails_due): one in 64 progress calls until something uses them, then
// one in 8.  What counts as a use: a message that came in on a rail,
// an operation posted on one, or memory registered for peers' reads or
// writes (which a provider serving RMA in software, as the stand-ins do,
// answers in this process's progress on that rail).  A core on
// tcp;ofi_rxm over two NICs (this host's interface and the loopback one,
// as test_core_rail_back.cpp): progress and a registration for local use
// leave the flag clear, a registration for peers' reads sets it.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <rdma/fabric.h>

#include "core.hpp"
#include "core_test_iface.hpp"
#include "core_with_self.hpp"

namespace {

bool rails_used(const efa_core_t *core) {
    return core->rails_used.load(std::memory_order_relaxed);
}

TEST(CoreRailsUsed, SetByMemoryPeersMayReachNotByIdleProgress) {
    std::string nics;
    efa_core_params_t p;
    if (!core_test_two_rails(&nics, &p)) {
        GTEST_SKIP() << "no interface beside loopback for a second rail";
    }
    CoreWithSelf self;
    ASSERT_TRUE(self.open(p));
    efa_core_t *core = self.core();
    ASSERT_EQ(efa_core_get_info(core)->num_nics, 2) << "two rails: " << nics;
    for (int i = 0; i < 1000; ++i) {
        efa_core_progress(core);
    }
    EXPECT_FALSE(rails_used(core)) << "idle progress took the rails as used";

    std::vector<uint8_t> buf(1 << 16, 1);
    int err = 0;
    efa_mr_t *local = efa_core_mr_acquire(core, buf.data(), buf.size() / 2, FI_READ, &err);
    ASSERT_NE(local, nullptr) << "local registration: " << err;
    EXPECT_FALSE(rails_used(core)) << "a registration for this process's own reads";

    efa_mr_t *exposed = efa_core_mr_acquire(core, buf.data() + buf.size() / 2, buf.size() / 2,
                                            FI_REMOTE_READ, &err);
    ASSERT_NE(exposed, nullptr) << "registration for peers' reads: " << err;
    EXPECT_TRUE(rails_used(core)) << "memory peers may read over a rail left the rails cold";
    efa_core_mr_release(core, exposed);
    efa_core_mr_release(core, local);
    EXPECT_TRUE(rails_used(core)) << "the flag is never cleared";
}

TEST(CoreRailsUsed, OneNicNeverSetsIt) {
    const std::string iface = core_test_first_interface();
    if (iface.empty()) {
        GTEST_SKIP() << "no interface beside loopback";
    }
    efa_core_params_t p = core_test_params("tcp;ofi_rxm");
    p.nic_include = iface.c_str();
    CoreWithSelf self;
    ASSERT_TRUE(self.open(p));
    efa_core_t *core = self.core();
    ASSERT_EQ(efa_core_get_info(core)->num_nics, 1);
    std::vector<uint8_t> buf(1 << 16, 1);
    int err = 0;
    efa_mr_t *exposed = efa_core_mr_acquire(core, buf.data(), buf.size(), FI_REMOTE_READ, &err);
    ASSERT_NE(exposed, nullptr) << err;
    EXPECT_FALSE(rails_used(core)) << "no rails, nothing to poll";
    efa_core_mr_release(core, exposed);
}

} // namespace
