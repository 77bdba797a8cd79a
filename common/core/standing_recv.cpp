// Standing receives of the core's own (rendezvous notes, withdrawals, peer
// probes) posted again after each completion: one the provider has no room
// for now waits in the context's internal backlog, posted by progress.
#include "core.hpp"
#include "ctx_post.hpp"

// A standing receive (notes, withdrawals, probes) posted again after its
// completion: one the provider finds no room for now is parked in the
// context's internal backlog and posted by progress, instead of lost for
// good (its kind would go unanswered from then on).
int efa::repost_standing(efa_ctx *ctx, efa_op_t *op, const char *call,
                         std::function<ssize_t()> post) {
    const ssize_t rc = post();
    if (efa::post::queue_full(rc)) {
        efa::post::defer(ctx, ctx->rx_internal_backlog, call, op, std::move(post));
        return 0;
    }
    return static_cast<int>(rc);
}
