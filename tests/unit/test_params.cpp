// Parameter range checks: every bound accepted, one past it refused.
#include <gtest/gtest.h>

#include "efa_params.hpp"

using efa::ParamLimits;
using efa::validate_params;

namespace {

efa_core_params_t defaults() {
    efa_core_params_t p{};
    p.num_contexts = 1;
    p.mr_cache_size = 1024;
    p.progress_batch = 16;
    return p;
}

bool refused(const efa_core_params_t &p, const std::string &name) {
    for (const auto &pb : validate_params(p)) {
        if (pb.name == name) {
            return true;
        }
    }
    return false;
}

TEST(Params, DefaultsAreValid) {
    EXPECT_TRUE(validate_params(defaults()).empty());
}

TEST(Params, NumContextsBounds) {
    auto p = defaults();
    for (int v : {1, ParamLimits::kMaxContexts}) {
        p.num_contexts = v;
        EXPECT_FALSE(refused(p, "num_contexts")) << v;
    }
    for (int v : {0, -1, ParamLimits::kMaxContexts + 1, 1 << 30}) {
        p.num_contexts = v;
        EXPECT_TRUE(refused(p, "num_contexts")) << v;
    }
}

TEST(Params, NicsPerProcBounds) {
    auto p = defaults();
    for (int v : {0, 1, ParamLimits::kMaxNicsPerProc}) {
        p.nics_per_proc = v;
        EXPECT_FALSE(refused(p, "nics_per_proc")) << v;
    }
    for (int v : {-1, ParamLimits::kMaxNicsPerProc + 1}) {
        p.nics_per_proc = v;
        EXPECT_TRUE(refused(p, "nics_per_proc")) << v;
    }
}

TEST(Params, QueueSizes) {
    auto p = defaults();
    p.tx_size = 0;
    p.rx_size = 1;
    EXPECT_TRUE(validate_params(p).empty());
    p.tx_size = -5;
    EXPECT_TRUE(refused(p, "tx_size"));
    p.tx_size = 0;
    p.rx_size = ParamLimits::kMaxQueueSize + 1;
    EXPECT_TRUE(refused(p, "rx_size"));
}

TEST(Params, MrCacheAndBatch) {
    auto p = defaults();
    p.mr_cache_size = 0;
    p.progress_batch = ParamLimits::kMaxProgressBatch;
    EXPECT_TRUE(validate_params(p).empty());
    p.mr_cache_size = -1;
    p.progress_batch = 0;
    auto problems = validate_params(p);
    ASSERT_EQ(problems.size(), 2u);
    EXPECT_EQ(problems[0].name, "mr_cache_size");
    EXPECT_EQ(problems[0].value, "-1");
    EXPECT_EQ(problems[1].name, "progress_batch");
    EXPECT_EQ(problems[1].allowed, "1 to 64");
}

// The progress loop reads at most 64 completions per CQ read: a larger
// batch would be cut silently, so it is refused instead.
TEST(Params, ProgressBatchAboveWhatOneReadTakesIsRefused) {
    auto p = defaults();
    p.progress_batch = 64;
    EXPECT_TRUE(validate_params(p).empty());
    p.progress_batch = 65;
    EXPECT_TRUE(refused(p, "progress_batch"));
    p.progress_batch = 1024;
    EXPECT_TRUE(refused(p, "progress_batch"));
}

// The peer deadline: 0 (off) to a day; a negative one would never be met.
TEST(Params, PeerTimeoutBounds) {
    auto p = defaults();
    p.peer_timeout = 0;
    EXPECT_TRUE(validate_params(p).empty());
    p.peer_timeout = ParamLimits::kMaxPeerTimeout;
    EXPECT_TRUE(validate_params(p).empty());
    p.peer_timeout = -1;
    EXPECT_TRUE(refused(p, "peer_timeout"));
    p.peer_timeout = ParamLimits::kMaxPeerTimeout + 1;
    EXPECT_TRUE(refused(p, "peer_timeout"));
}

// A lost rail's retry: 0 (never) to an hour; a negative one is a typo.
TEST(Params, RailRetryBounds) {
    auto p = defaults();
    for (int v : {0, 10, ParamLimits::kMaxRailRetry}) {
        p.rail_retry = v;
        EXPECT_FALSE(refused(p, "rail_retry")) << v;
    }
    for (int v : {-1, ParamLimits::kMaxRailRetry + 1}) {
        p.rail_retry = v;
        EXPECT_TRUE(refused(p, "rail_retry")) << v;
    }
}

// The provider poll's pacing: 0 (every call) to a second.
TEST(Params, NetPollIntervalBounds) {
    auto p = defaults();
    p.net_poll_interval_us = 0;
    EXPECT_TRUE(validate_params(p).empty());
    p.net_poll_interval_us = ParamLimits::kMaxNetPollInterval;
    EXPECT_TRUE(validate_params(p).empty());
    p.net_poll_interval_us = -1;
    EXPECT_TRUE(refused(p, "net_poll_interval"));
    p.net_poll_interval_us = ParamLimits::kMaxNetPollInterval + 1;
    EXPECT_TRUE(refused(p, "net_poll_interval"));
}

// Its longest wait: the same range, checked on its own.
TEST(Params, NetPollIntervalMaxBounds) {
    auto p = defaults();
    p.net_poll_interval_max_us = 0;
    EXPECT_TRUE(validate_params(p).empty());
    p.net_poll_interval_max_us = ParamLimits::kMaxNetPollInterval;
    EXPECT_TRUE(validate_params(p).empty());
    p.net_poll_interval_max_us = -5;
    EXPECT_TRUE(refused(p, "net_poll_interval_max"));
    p.net_poll_interval_max_us = ParamLimits::kMaxNetPollInterval + 1;
    EXPECT_TRUE(refused(p, "net_poll_interval_max"));
}

} // namespace

TEST(Params, DirectModeMtu) {
    auto p = defaults();
    for (int v : {0, ParamLimits::kMinDirectMtu, ParamLimits::kMaxDirectMtu}) {
        p.direct_mode_mtu = v;
        EXPECT_FALSE(refused(p, "direct_mode_mtu")) << v;
    }
    for (int v : {-1, 1, ParamLimits::kMinDirectMtu - 1, ParamLimits::kMaxDirectMtu + 1}) {
        p.direct_mode_mtu = v;
        EXPECT_TRUE(refused(p, "direct_mode_mtu")) << v;
    }
}

namespace {
// (test setting: 0 off, else a page to 1 GiB)
TEST(Params, FakeDevicePieceBounds) {
    auto p = defaults();
    for (int v : {0, 4096, 1 << 30}) {
        p.debug_fake_device_piece = v;
        EXPECT_FALSE(refused(p, "debug_fake_device_piece")) << v;
    }
    for (int v : {-1, 1, 4095, (1 << 30) + 1}) {
        p.debug_fake_device_piece = v;
        EXPECT_TRUE(refused(p, "debug_fake_device_piece")) << v;
    }
}
} // namespace
