// A rail's failed untagged receive buffers set aside until their rail may
// be back (core_msg_pool.hpp), and the pool's buffers on one rail counted
// and cancelled (efa_core_msg.h: tests).
#include <algorithm>
#include <new>

#include <rdma/fi_endpoint.h>

#include "core_msg_pool.hpp"
#include "deadline_tracked.hpp"

namespace efa {

// A rail's failed receive set aside until it is posted again (the pool's
// resting); without common_efa_rail_retry it stays out, as its rail.
void msg_rest(efa_msg_pool::Buf *b) {
    efa_msg_pool *pool = b->pool;
    const uint64_t base = static_cast<uint64_t>(std::max(0, pool->core->params.rail_retry)) * 1000;
    if (0 == base) {
        return;
    }
    const uint64_t now = efa::now_ms();
    std::lock_guard<std::mutex> guard(pool->lock);
    if (pool->closing.load(std::memory_order_acquire)) {
        return; // (unpost_all, which set it before the lock, lets the buffers go)
    }
    try {
        pool->resting.push_back(b);
    } catch (const std::bad_alloc &) {
        return; // (no memory: it stays out)
    }
    if (1 == pool->resting.size()) {
        // (failed again within the last wait of being posted again: twice
        // that; else the parameter's)
        const bool again = pool->rest_wait_ms && now - pool->rested_ms < pool->rest_wait_ms;
        pool->rest_wait_ms = again ? std::min(2 * pool->rest_wait_ms, 8 * base) : base;
        pool->rest_due_ms.store(now + pool->rest_wait_ms, std::memory_order_relaxed);
    }
    pool->resting_count.fetch_add(1, std::memory_order_release);
}

} // namespace efa

size_t efa_core_msg_posted(const efa_core_t *core, int rail) {
    if (!core->msg_pool) {
        return 0;
    }
    return static_cast<size_t>(std::count_if(
        core->msg_pool->bufs.begin(), core->msg_pool->bufs.end(), [rail](const auto &b) {
            return b.ctx->rail == rail && b.posted.load(std::memory_order_acquire);
        }));
}

void efa_core_msg_cancel_rail(efa_core_t *core, int rail) {
    if (!core->msg_pool) {
        return;
    }
    for (auto &b : core->msg_pool->bufs) {
        if (b.ctx->rail == rail && b.posted.load(std::memory_order_acquire)) {
            (void)fi_cancel(&b.ctx->ep->fid, &b.op.fi_ctx);
        }
    }
}
