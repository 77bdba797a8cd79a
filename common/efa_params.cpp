#include "efa_params.hpp"

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
    // 0 keeps the provider's default; tiny values are allowed on purpose
    // (tests use them to make queues overflow).
    check_range(out, "tx_size", p.tx_size, 0, ParamLimits::kMaxQueueSize);
    check_range(out, "rx_size", p.rx_size, 0, ParamLimits::kMaxQueueSize);
    check_range(out, "mr_cache_size", p.mr_cache_size, 0, ParamLimits::kMaxMrCache);
    check_range(out, "progress_batch", p.progress_batch, 1, ParamLimits::kMaxProgressBatch);
    return out;
}

} // namespace efa
