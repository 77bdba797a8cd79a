#include "efa_params.hpp"

#include "gpu_nics.hpp"
#include "provider_options.hpp"

namespace efa {

namespace {
void check_range(std::vector<ParamProblem> &out, const char *name, int v, int lo, int hi) {
    if (v < lo || v > hi) {
        out.push_back({name, std::to_string(v), std::to_string(lo) + " to " + std::to_string(hi)});
    }
}
} // namespace

std::vector<ParamProblem> validate_params(const efa_core_params_t &p) {
    std::vector<ParamProblem> out;
    check_range(out, "num_contexts", p.num_contexts, 1, ParamLimits::kMaxContexts);
    check_range(out, "nics_per_proc", p.nics_per_proc, 0, ParamLimits::kMaxNicsPerProc);
    // 0 turns striping off; below a page a part would cost more to post
    // than to move.
    if (p.stripe_min != 0) {
        check_range(out, "stripe_min", p.stripe_min, ParamLimits::kMinStripe,
                    ParamLimits::kMaxStripe);
    }
    // 0 keeps the provider's default; tiny values are allowed on purpose
    // (tests use them to make queues overflow).
    check_range(out, "tx_size", p.tx_size, 0, ParamLimits::kMaxQueueSize);
    check_range(out, "rx_size", p.rx_size, 0, ParamLimits::kMaxQueueSize);
    check_range(out, "mr_cache_size", p.mr_cache_size, 0, ParamLimits::kMaxMrCache);
    check_range(out, "progress_batch", p.progress_batch, 1, ParamLimits::kMaxProgressBatch);
    // (test setting: 1 at the post, 2 from the backlog)
    check_range(out, "debug_fake_device_refuse_post", p.debug_fake_device_refuse_post, 0, 2);
    // (test setting: 0 off; below a page a piece would not be one)
    if (p.debug_fake_device_piece != 0) {
        check_range(out, "debug_fake_device_piece", p.debug_fake_device_piece, 4096, 1 << 30);
    }
    // -1 leaves the provider's default; 7 means "retry for ever" on EFA.
    check_range(out, "rnr_retry", p.rnr_retry, -1, ParamLimits::kMaxRnrRetry);
    // 0 turns the peer deadline off; a day is more than any real silence.
    check_range(out, "peer_timeout", p.peer_timeout, 0, ParamLimits::kMaxPeerTimeout);
    // 0 leaves a lost rail out; an hour between tries is already idle.
    check_range(out, "rail_retry", p.rail_retry, 0, ParamLimits::kMaxRailRetry);
    // 0 polls on every call; a second is already far beyond any use.
    check_range(out, "net_poll_interval", p.net_poll_interval_us, 0,
                ParamLimits::kMaxNetPollInterval);
    check_range(out, "net_poll_interval_max", p.net_poll_interval_max_us, 0,
                ParamLimits::kMaxNetPollInterval);
    // Only read in the forced direct mode; checked always, as a typo there
    // would otherwise surface only once someone turns the mode on.
    // 0 means the default (kDefaultDirectMtu).
    if (p.direct_mode_mtu != 0) {
        check_range(out, "direct_mode_mtu", p.direct_mode_mtu, ParamLimits::kMinDirectMtu,
                    ParamLimits::kMaxDirectMtu);
    }
    if (p.gpu && !gpu_setting_valid(p.gpu)) {
        out.push_back({"gpu", p.gpu, "auto, none, an accelerator's index or its PCI address"});
    }
    EmulatedOverride ignored;
    std::string bad;
    if (!parse_emulated_list(p.force_emulated, &ignored, &bad)) {
        out.push_back({"force_emulated", p.force_emulated,
                       "a comma-separated list of read, write, atomics (or empty)"});
    }
    return out;
}

} // namespace efa
