// efa_core.h's efa_core_get_counters: what the core counted since it
// opened, for the MPI_T performance variables (common_efa_glue.c).
#include "core.hpp"

extern "C" void efa_core_get_counters(efa_core_t *core, efa_core_counters_t *out) {
    *out = efa_core_counters_t{};
    if (!core) {
        return;
    }
    constexpr auto relaxed = std::memory_order_relaxed;
    std::vector<const efa_ctx *> ctxs;
    for (int i = 0; i < core->nic->num_contexts(); ++i) {
        ctxs.push_back(core->nic->ctx(i));
    }
    for (const auto &rail : core->rails) {
        for (int i = 0; i < rail->num_contexts(); ++i) {
            ctxs.push_back(rail->ctx(i));
        }
    }
    for (const efa_ctx *ctx : ctxs) {
        out->completions += ctx->completions.load(relaxed);
        for (const efa::Backlog *b :
             {&ctx->tx_backlog, &ctx->rx_backlog, &ctx->rx_internal_backlog}) {
            out->posts_deferred += b->deferred.load(relaxed);
            out->posts_waiting += b->size.load(relaxed);
        }
    }
    const efa::MrCache::Stats mr = core->mr_cache->counts();
    out->mr_hits = mr.hits;
    out->mr_misses = mr.misses;
    out->mr_evictions = mr.evictions;
    out->peers_lost = core->peers_lost.load(relaxed);
    out->rails_lost = core->rails_lost.load(relaxed);
}
