// efa_core.h's efa_core_get_counters: what the core counted since it
// opened, for the MPI_T performance variables (common_efa_glue.c).
#include "core.hpp"
#include "path_counts.hpp"

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
    // Host and device registrations alike (the device cache where there is one).
    for (const efa::MrCache *cache : {core->mr_cache.get(), core->dev_mr_cache.get()}) {
        if (cache) {
            const efa::MrCache::Stats mr = cache->counts();
            out->mr_hits += mr.hits;
            out->mr_misses += mr.misses;
            out->mr_evictions += mr.evictions;
        }
    }
    out->peers_lost = core->peers_lost.load(relaxed);
    out->rails_lost = core->rails_lost.load(relaxed);
}

namespace efa {

void read_path_counts(efa_core_counters_t *out) {
    using namespace efa::counts;
    out->provider_sends = get(kProviderSends);
    out->provider_send_bytes = get(kProviderSendBytes);
    out->provider_recvs = get(kProviderRecvs);
    out->provider_recv_bytes = get(kProviderRecvBytes);
    out->provider_rma = get(kProviderRma);
    out->provider_rma_bytes = get(kProviderRmaBytes);
    out->ring_frames = get(kRingFrames);
    out->ring_bytes = get(kRingBytes);
    out->single_copies = get(kSingleCopies);
    out->single_copy_bytes = get(kSingleCopyBytes);
    out->unexpected = get(kUnexpected);
    out->unexpected_peak = get(kUnexpectedPeak);
    out->coalesced = get(kCoalesced);
    out->emul_served = get(kEmulServed);
    out->emul_refused = get(kEmulRefused);
    // By NIC, each counted where it is posted.
    for (int r = 0; r < efa::kMaxRails; ++r) {
        out->nic_rma[r] = get(rail_rma(r));
        out->nic_rma_bytes[r] = get(static_cast<Id>(rail_rma(r) + 1));
        out->rail_rma += r ? out->nic_rma[r] : 0;
        out->rail_rma_bytes += r ? out->nic_rma_bytes[r] : 0;
    }
    out->rails_back = get(kRailsBack);
    out->rail_out_notices = get(kRailOutNotices);
    out->striped = get(kStriped);
    out->striped_bytes = get(kStripedBytes);
    out->failed_over = get(kFailedOver);
}

} // namespace efa
