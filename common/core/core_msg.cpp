// Untagged messaging: the receive pool and the untagged sends (btl_efa).
//
// While a handler is installed each context keeps a fixed set of receive
// buffers posted with fi_recv, on every rail's contexts: both owners send
// some peers' messages over the other NICs (net_link.hpp, btl_efa_spread.c;
// an arrival there keeps the rails polled on every call for a while:
// rail_msg_warm, ctx_progress.cpp).  A completion hands the
// buffer to the handler and posts it again.  Nothing is posted while no handler is installed: under
// pml cm the BTL is opened and finalised during pml selection, and buffers left posted then would
// keep occupying the receive queue the MTL's tagged receives need (shm shares one queue for both).
// Every receive carries an efa_op_t context like all other operations the
// progress loop sees.  No post here ever spins on a full provider queue: a
// buffer that cannot be posted waits in a list that efa_core_msg_progress
// retries, and sends hand -FI_EAGAIN back to the caller.
//
// Zero-byte messages are the core's peer probes where the provider has no
// tags (core_deadline.cpp); they are dropped here.  Where the provider
// does not order messages (efa-direct), or to test that nobody relies on
// its order (debug_swap_messages, the forced direct mode), arrivals are
// handed on in swapped pairs: one is held until the next arrives, or for
// kSwapHoldCalls progress calls when none does.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <vector>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_msg_pool.hpp"
#include "deadline_tracked.hpp"
#include "efa_core_msg.h"
#include "path_counts.hpp"
#include "registered_block.hpp"

namespace {

constexpr size_t kBufSize = 64 * 1024; // one receive buffer (also the largest message)
constexpr size_t kBufsPerCtx = 32;
constexpr uint32_t kSwapHoldCalls = 64;

inline bool queue_full(ssize_t rc) {
    return rc == -FI_EAGAIN || rc == -FI_ENOMEM;
}

} // namespace

namespace {

// A send's outcome for the caller: -FI_EAGAIN for a full queue (the BTL
// queues the fragment), 0, or another error, said once per kind.
inline int checked(efa_ctx *ctx, const char *call, ssize_t rc) {
    if (__builtin_expect(rc == 0, 1)) {
        return 0;
    }
    if (queue_full(rc)) {
        return -FI_EAGAIN;
    }
    ctx->core->failures.report(ctx->core->rep, call, static_cast<int>(rc));
    return static_cast<int>(rc);
}

// One attempt; a full queue parks the buffer for efa_core_msg_progress,
// and a rail's that its NIC refuses rests (as one that failed).
void post(efa_msg_pool::Buf *b) {
    efa_msg_pool *pool = b->pool;
    b->posted.store(true, std::memory_order_relaxed);
    b->op.rx_counted = 0;  // the pool's share of the queue is set aside (see nic.cpp)
    b->op.net_counted = 0; // standing: not an operation anyone waits for
    ssize_t rc = fi_recv(b->ctx->ep, b->data, kBufSize, b->desc, FI_ADDR_UNSPEC, &b->op.fi_ctx);
    if (rc == 0) {
        return;
    }
    b->posted.store(false, std::memory_order_relaxed);
    if (queue_full(rc)) {
        std::lock_guard<std::mutex> guard(pool->lock);
        if (!pool->closing.load(std::memory_order_acquire)) { // (else its buffers go)
            pool->unposted.push_back(b);
            pool->unposted_count.fetch_add(1, std::memory_order_release);
        }
        return;
    }
    pool->core->failures.report(pool->core->rep, "fi_recv (untagged receive buffer)",
                                static_cast<int>(rc));
    if (b->ctx->rail || efa_core_rail0_fails_over(pool->core)) {
        efa::msg_rest(b);
    }
}

// Hand an arrived message (or a failed receive) to its channel and post
// the buffer again.
void deliver(efa_msg_pool::Buf *b, size_t len, int err, fi_addr_t src) {
    efa_msg_pool *pool = b->pool;
    if (err) {
        // Every channel hears of it (a failed receive names no channel);
        // on a rail beside the first each takes it as its senders' cue to
        // move to the first NIC, not as a loss.
        for (int c = 0; c < EFA_MSG_CHANNELS; ++c) {
            if (efa_msg_handler_fn fn = pool->fn[c].load(std::memory_order_acquire)) {
                fn(pool->arg[c], b->ctx, nullptr, 0, err, FI_ADDR_NOTAVAIL);
            }
        }
    } else if (len > 0) { // zero bytes: a peer probe, nothing to hand on
        const int c = efa_msg_channel_of(b->data, len);
        if (efa_msg_handler_fn fn = pool->fn[c].load(std::memory_order_acquire)) {
            fn(pool->arg[c], b->ctx, b->data, len, 0, src);
        } // else nobody listens on that channel in this process: dropped
    }
    // A rail's receive that failed (but for a truncation: a lost message)
    // is not posted again at once: a rail in error could fail each at
    // once, and its senders move to another NIC.  It rests until the rail
    // may be back.  The first NIC's too where it can be left (elsewhere
    // its failure ends the job).
    const bool rail_broken =
        err && -FI_ETRUNC != err && (b->ctx->rail || efa_core_rail0_fails_over(pool->core));
    if (pool->closing.load(std::memory_order_acquire)) {
        return;
    }
    if (rail_broken) {
        efa::msg_rest(b);
    } else {
        post(b);
    }
}

// The swap: hold this arrival back if none is held (true: held), else
// hand it on before the one held.
bool swap_arrival(efa_msg_pool::Buf *b, size_t len, fi_addr_t src) {
    efa_msg_pool *pool = b->pool;
    b->len = len;
    b->src = src;
    efa_msg_pool::Buf *prev = pool->held.exchange(nullptr, std::memory_order_acq_rel);
    if (!prev) {
        efa_msg_pool::Buf *none = nullptr;
        pool->held_calls.store(0, std::memory_order_relaxed);
        return pool->held.compare_exchange_strong(none, b, std::memory_order_acq_rel);
    }
    deliver(b, len, 0, src);
    pool->swapped.fetch_add(1, std::memory_order_relaxed);
    deliver(prev, prev->len, 0, prev->src);
    return true;
}

// A held arrival that waited long enough for a successor goes on alone.
void release_held(efa_msg_pool *pool) {
    if (!pool->held.load(std::memory_order_acquire) ||
        pool->held_calls.fetch_add(1, std::memory_order_relaxed) < kSwapHoldCalls) {
        return;
    }
    if (efa_msg_pool::Buf *prev = pool->held.exchange(nullptr, std::memory_order_acq_rel)) {
        deliver(prev, prev->len, 0, prev->src);
    }
}

void recv_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *b = reinterpret_cast<efa_msg_pool::Buf *>(op);
    efa_msg_pool *pool = b->pool;
    b->posted.store(false, std::memory_order_release);
    if (pool->closing.load(std::memory_order_acquire)) {
        return;
    }
    if (b->ctx->rail && !cqe->err) {
        // A peer sends its messages here: poll the rails on every call
        // (the answer to this one likely comes the same way).
        pool->core->rail_msg_warm.store(efa::kRailMsgWarmCalls, std::memory_order_relaxed);
        efa::note_rails_used(pool->core);
    }
    if (pool->swap && !cqe->err && cqe->len > 0 && swap_arrival(b, cqe->len, cqe->src)) {
        return;
    }
    deliver(b, cqe->len, cqe->err, cqe->src);
}

bool any_posted(efa_msg_pool *pool) {
    return std::any_of(pool->bufs.begin(), pool->bufs.end(), [](const efa_msg_pool::Buf &b) {
        return b.posted.load(std::memory_order_acquire);
    });
}

// Cancel every posted buffer and collect the cancellations (bounded).
// Frees the buffers unless the provider still holds some.
void unpost_all(efa_msg_pool *pool) {
    pool->closing.store(true, std::memory_order_release);
    // A message held back by the swap is dropped: nobody listens any more.
    pool->held.store(nullptr, std::memory_order_release);
    {
        std::lock_guard<std::mutex> guard(pool->lock);
        pool->unposted.clear();
        pool->unposted_count.store(0, std::memory_order_release);
        pool->resting.clear();
        pool->resting_count.store(0, std::memory_order_release);
    }
    for (auto &b : pool->bufs) {
        if (b.posted.load(std::memory_order_acquire)) {
            fi_cancel(&b.ctx->ep->fid, &b.op.fi_ctx);
        }
    }
    for (int i = 0; i < 1000 && any_posted(pool); ++i) {
        efa_core_progress(pool->core);
    }
    if (any_posted(pool)) {
        return; // keep the memory: efa_core_msg_close tries again
    }
    pool->slab.release(pool->core, true);
    pool->rail_slab.release(pool->core, true);
    pool->bufs.clear();
}

// Receive buffers for every context of NICs first .. last-1, in slab
// (new; FI_READ and FI_WRITE put its registration on the rails' domains
// too: fi_mr_backend.cpp), posted.
int add_bufs(efa_msg_pool *pool, efa::RegisteredBlock &slab, int first, int last) {
    efa_core *core = pool->core;
    const int nctx = core->nic->num_contexts();
    const size_t per_nic = pool->per_ctx * static_cast<size_t>(nctx);
    const uint64_t access = core->info.mr_local ? (FI_RECV | FI_SEND | FI_READ | FI_WRITE) : 0;
    if (int err =
            slab.make(core, per_nic * static_cast<size_t>(last - first) * kBufSize, 4096, access)) {
        return err;
    }
    if (core->info.mr_local && slab.rails() < last) {
        // Without a descriptor on a rail nothing is received there: peers'
        // messages over that NIC would be lost, so the channel is refused.
        core->rep.say(0, "the untagged receive buffers could not be registered on NIC " +
                             std::to_string(slab.rails()) +
                             " of the set: peers' messages over it would not be received");
        slab.release(core, true);
        return -FI_ENOKEY;
    }
    const size_t start = pool->bufs.size();
    for (int rail = first; rail < last; ++rail) {
        for (int c = 0; c < nctx; ++c) {
            for (size_t k = 0; k < pool->per_ctx; ++k) {
                const size_t i =
                    (static_cast<size_t>((rail - first) * nctx + c)) * pool->per_ctx + k;
                efa_msg_pool::Buf &b = pool->bufs.emplace_back();
                b.op.complete = recv_complete;
                b.pool = pool;
                b.ctx = rail == 0 ? core->nic->ctx(c) : core->rails[rail - 1]->ctx(c);
                b.data = reinterpret_cast<uint8_t *>(slab.data) + i * kBufSize;
                b.desc = slab.desc(rail);
            }
        }
    }
    pool->closing.store(false, std::memory_order_release);
    for (size_t i = start; i < pool->bufs.size(); ++i) {
        post(&pool->bufs[i]);
    }
    return 0;
}

int post_all(efa_msg_pool *pool) {
    return add_bufs(pool, pool->slab, 0, 1);
}

// The other rails' buffers, once a channel listens.
int post_rails(efa_msg_pool *pool) {
    efa_core *core = pool->core;
    if (core->rails.empty() || pool->rail_slab.data) {
        return 0;
    }
    return add_bufs(pool, pool->rail_slab, 1, 1 + static_cast<int>(core->rails.size()));
}

// An untagged send under the peer deadline: tracked before the post (a
// dead peer refuses it at once), untracked again when the post fails.
template <class Post>
int tracked_send(efa_ctx_t *ctx, fi_addr_t dest, efa_op_t *op, const char *call, Post post) {
    int err = 0;
    efa_op_t *pop =
        efa::deadline_track(ctx, dest, op, efa::PeerDeadline::Kind::Send, FI_SEND, &err);
    if (!pop) {
        return err;
    }
    pop->rx_counted = 0;
    efa::inflight_add(ctx, pop);
    const int rc = checked(ctx, call, post(&pop->fi_ctx));
    if (rc) {
        efa::inflight_done(ctx, pop);
        if (efa::deadline_untrack(ctx, pop, op)) {
            return 0; // its owner was told of the peer's loss meanwhile: once is enough
        }
    }
    return rc;
}

} // namespace

extern "C" {

int efa_core_msg_open(efa_core_t *core) {
    auto *pool = new efa_msg_pool();
    pool->core = core;
    const fi_info *info = core->nic->info();
    pool->per_ctx = kBufsPerCtx;
    pool->swap = core->info.swaps_messages;
    if (info->rx_attr && info->rx_attr->size > 0) {
        // Leave room in the receive queue for the MTL's tagged receives.
        pool->per_ctx = std::min(pool->per_ctx, std::max<size_t>(info->rx_attr->size / 4, 1));
    }
    core->msg_pool = pool;
    core->msg_progress = efa_core_msg_progress;
    return 0;
}

void efa_core_msg_close(efa_core_t *core) {
    efa_msg_pool *pool = core->msg_pool;
    if (!pool) {
        return;
    }
    if (const uint64_t n = pool->swapped.load(std::memory_order_relaxed)) {
        core->rep.say(1, "untagged messages: " + std::to_string(n) +
                             " handed on out of order (swapped in pairs on arrival, a test "
                             "setting)");
    }
    for (auto &fn : pool->fn) {
        fn.store(nullptr, std::memory_order_release);
    }
    if (!pool->bufs.empty()) {
        unpost_all(pool);
    }
    if (pool->slab.data) {
        // The provider never gave some buffers back: it may still write into
        // them, and (FI_CONTEXT2) into their contexts in pool->bufs, until
        // the endpoints close.  The registration goes now (before the
        // domain); the memory and the pool stay until efa_core_msg_free,
        // after the endpoints are closed.
        core->rep.say(10, "untagged receive buffers still held by the provider at close: kept "
                          "until the endpoints are closed");
        pool->slab.unregister(core);
        pool->rail_slab.unregister(core);
        return;
    }
    core->msg_pool = nullptr;
    core->msg_progress = nullptr;
    delete pool;
}

void efa_core_msg_free(efa_core_t *core) {
    efa_msg_pool *pool = core->msg_pool;
    if (!pool) {
        return;
    }
    core->msg_pool = nullptr;
    core->msg_progress = nullptr;
    for (const auto &lost : core->rail_lost_any) {
        if (lost.load(std::memory_order_relaxed)) {
            // A rail that lost a peer is left open for the exit
            // (close_rail_endpoints): its provider may still write into
            // the buffers posted there.
            efa::keep_for_exit(pool);
            return;
        }
    }
    pool->slab.release(core, false); // (unregistered at close)
    pool->rail_slab.release(core, false);
    delete pool;
}

int efa_core_msg_set_handler(efa_core_t *core, efa_msg_handler_fn fn, void *arg) {
    return efa_core_msg_set_channel(core, EFA_MSG_CHANNEL_BTL, fn, arg);
}

int efa_core_msg_set_channel(efa_core_t *core, int channel, efa_msg_handler_fn fn, void *arg) {
    efa_msg_pool *pool = core->msg_pool;
    if (channel < 0 || channel >= EFA_MSG_CHANNELS) {
        return -FI_EINVAL;
    }
    if (!pool) {
        return fn ? -FI_ENODEV : 0;
    }
    if (!fn) {
        pool->fn[channel].store(nullptr, std::memory_order_release);
        const bool other = std::any_of(std::begin(pool->fn), std::end(pool->fn), [](auto &f) {
            return f.load(std::memory_order_acquire) != nullptr;
        });
        if (!other && !pool->bufs.empty()) {
            unpost_all(pool);
        }
        return 0;
    }
    pool->arg[channel] = arg;
    if (pool->bufs.empty() || pool->closing.load(std::memory_order_acquire)) {
        if (pool->slab.data) {
            unpost_all(pool); // an earlier detach left buffers with the provider
            if (pool->slab.data) {
                return -FI_EBUSY;
            }
        }
        int rc = post_all(pool);
        if (rc) {
            return rc;
        }
    }
    if (int rc = post_rails(pool)) {
        // Peers send some messages over the other NICs, not knowing this
        // process cannot receive them there: the channel is refused.
        core->rep.say(0, std::string("the untagged receive buffers could not be posted on the "
                                     "other NICs of the set (") +
                             fi_strerror(-rc) +
                             "): the channel is refused; common_efa_stripe_min 0 keeps "
                             "every message on the first NIC");
        const bool other = std::any_of(std::begin(pool->fn), std::end(pool->fn), [](auto &f) {
            return f.load(std::memory_order_acquire) != nullptr;
        });
        if (!other) {
            unpost_all(pool); // nobody listens: the queue is the MTL's again
        }
        return rc;
    }
    pool->fn[channel].store(fn, std::memory_order_release);
    return 0;
}

size_t efa_core_msg_recv_count(const efa_core_t *core) {
    return core->msg_pool ? core->msg_pool->per_ctx : 0;
}

int efa_core_msg_progress(efa_core_t *core) {
    efa_msg_pool *pool = core->msg_pool;
    if (!pool) {
        return 0;
    }
    if (pool->swap) {
        release_held(pool);
    }
    // (resting buffers: the clock read only while some rest, the lock
    // taken only once they are due)
    const bool resting = pool->resting_count.load(std::memory_order_acquire) != 0;
    const uint64_t now = resting ? efa::now_ms() : 0;
    const bool due = resting && now >= pool->rest_due_ms.load(std::memory_order_relaxed);
    if (pool->unposted_count.load(std::memory_order_acquire) == 0 && !due) {
        return 0;
    }
    std::vector<efa_msg_pool::Buf *> todo;
    {
        std::lock_guard<std::mutex> guard(pool->lock);
        todo.swap(pool->unposted);
        pool->unposted_count.store(0, std::memory_order_release);
        if (due && now >= pool->rest_due_ms.load(std::memory_order_relaxed)) {
            todo.insert(todo.end(), pool->resting.begin(), pool->resting.end());
            pool->resting.clear();
            pool->resting_count.store(0, std::memory_order_release);
            pool->rested_ms = now;
        }
    }
    // post() parks again whatever still does not fit.
    for (auto *b : todo) {
        post(b);
    }
    return static_cast<int>(todo.size());
}

size_t efa_core_msg_max_size(const efa_core_t *core) {
    size_t max = kBufSize;
    if (core->info.max_msg_size && core->info.max_msg_size < max) {
        max = core->info.max_msg_size;
    }
    return max;
}

int efa_ctx_try_send(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                     efa_op_t *op) {
    // The peer's buffers hold kBufSize; the provider (efa-direct: its
    // MTU) may take less.
    if (len > efa_core_msg_max_size(ctx->core)) {
        return -FI_EMSGSIZE;
    }
    const int rc = tracked_send(ctx, dest, op, "fi_send", [&](void *context) {
        return fi_send(ctx->ep, buf, len, desc, dest, context);
    });
    if (rc == 0) { // a refused try is tried again: counted once, when taken
        efa::counts::add_msg(efa::counts::kProviderSends, len);
    }
    return rc;
}

int efa_ctx_try_inject(efa_ctx_t *ctx, const void *buf, size_t len, fi_addr_t dest) {
    // Refused before the provider sees it: past its inject size the
    // provider may fail the endpoint (or, in the forced direct mode, take
    // a message over the MTU that efa-direct would not).  The caller sends
    // it with a completion instead.
    if (len > ctx->core->info.inject_size || len > efa_core_msg_max_size(ctx->core)) {
        return -FI_EMSGSIZE;
    }
    if (efa::deadline_refuses(ctx, dest)) {
        return -FI_EHOSTUNREACH;
    }
    ssize_t rc = fi_inject(ctx->ep, buf, len, dest);
    if (rc == 0) {
        efa::counts::add_msg(efa::counts::kProviderSends, len);
    }
    return checked(ctx, "fi_inject", rc);
}

int efa_ctx_try_sendv(efa_ctx_t *ctx, const struct iovec *iov, void **desc, size_t count,
                      fi_addr_t dest, efa_op_t *op) {
    size_t len = 0;
    for (size_t i = 0; i < count; ++i) {
        len += iov[i].iov_len;
    }
    // The peer's buffers hold kBufSize; the provider (efa-direct: its
    // MTU) may take less.
    if (len > efa_core_msg_max_size(ctx->core)) {
        return -FI_EMSGSIZE;
    }
    const int rc = tracked_send(ctx, dest, op, "fi_sendv", [&](void *context) {
        return fi_sendv(ctx->ep, iov, desc, count, dest, context);
    });
    if (rc == 0) {
        efa::counts::add_msg(efa::counts::kProviderSends, len);
    }
    return rc;
}

} // extern "C"
