// How a context posts an operation (the hot path's shared steps, used by
// ctx_tagged.cpp and ctx_rma.cpp; ctx_progress.cpp drains what they post).
//
// A post that finds the provider's queue full (-FI_EAGAIN; shm says
// -FI_ENOMEM) is not spun on: spinning in a receive post could deadlock two
// processes that each wait for the other to send.  It joins the context's
// backlog and progress posts it later, in order; the caller sees success.
// Completions are read into a local batch and dispatched with no lock held,
// so a callback may post new operations (a synchronous-send
// acknowledgement, say) or drive progress itself.
#ifndef EFA_CTX_POST_HPP
#define EFA_CTX_POST_HPP

#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "efa_device.h"

namespace efa::post {

inline bool queue_full(ssize_t rc) {
    return rc == -FI_EAGAIN || rc == -FI_ENOMEM;
}

// While the backlog b tells an owner its post was refused
// (ctx_progress.cpp), what the owner posts instead into b goes where the
// refused post was: b's head, in the order posted (refusal_taken.cpp).  A
// post behind the refused one (the same peer's next message, or a receive
// posted after it) must not overtake it.  Posts into other backlogs keep
// their place; a refusal told inside the owner's callback has its own.
class RepostInPlace {
  public:
    explicit RepostInPlace(efa::Backlog *b);
    ~RepostInPlace();
    RepostInPlace(const RepostInPlace &) = delete;
    RepostInPlace &operator=(const RepostInPlace &) = delete;

  private:
    efa::Backlog *outer_;
    int outer_at_;
};
int repost_place(const efa::Backlog *b); // -1: none (the tail); else the next place from the head

inline void defer(efa_ctx *ctx, efa::Backlog &b, const char *call, efa_op_t *op,
                  std::function<ssize_t()> post, bool holds_slot = false) {
    const int place = repost_place(&b);
    {
        std::lock_guard<std::mutex> guard(b.lock);
        b.deferred.fetch_add(1, std::memory_order_relaxed);
        const auto at = place < 0 || static_cast<size_t>(place) > b.ops.size()
                            ? b.ops.end()
                            : b.ops.begin() + place;
        b.ops.insert(at, efa::Deferred{op, std::move(post), holds_slot, call});
        b.size.fetch_add(1, std::memory_order_seq_cst);
    }
    efa::note_posted(ctx->core);
}

// Takes out of ctx's backlogs every waiting post whose operation 'pick'
// chooses, and appends those operations to *taken: the peer deadline
// fails them (core_deadline.cpp), and a post that never reached the
// provider must not reach it after its owner heard it failed.
template <typename Pick>
inline void take_waiting(efa_ctx *ctx, Pick pick, std::vector<efa_op_t *> *taken) {
    for (efa::Backlog *b : {&ctx->tx_backlog, &ctx->rx_backlog, &ctx->rx_internal_backlog}) {
        if (b->size.load(std::memory_order_acquire) == 0) {
            continue;
        }
        std::lock_guard<std::mutex> guard(b->lock);
        for (auto it = b->ops.begin(); it != b->ops.end();) {
            if (it->op && pick(it->op)) {
                taken->push_back(it->op);
                it = b->ops.erase(it);
                b->size.fetch_sub(1, std::memory_order_release);
            } else {
                ++it;
            }
        }
    }
}

// A post the provider refused for another reason than a full queue: say
// which call and why (once per kind) and hand the error to the caller.
// Out of line (ctx_progress.cpp): the failure path stays off the hot one.
int post_failed(efa_ctx *ctx, const char *call, ssize_t rc);

// Test setting (common_efa_debug_fake_device_refuse_post): a post of the
// fake device's memory with a descriptor (its registration), refused as a
// provider would refuse it (device_post_refused.cpp).  On the hot path a
// load of the core's flag and a branch.
int refuse_for_test(efa_ctx *ctx, efa::Backlog &b, const char *call, efa_op_t *op);
inline bool refuses_for_test(efa_ctx *ctx, const void *buf, size_t len, const void *desc) {
    return __builtin_expect(ctx->core->dev_refuse_test.load(std::memory_order_relaxed), 0) &&
           desc && efa_device_check(buf, len);
}

template <typename Post>
inline int submit(efa_ctx *ctx, efa::Backlog &b, const char *call, efa_op_t *op, Post post,
                  bool peek = false) {
    if (op) {
        op->rx_counted = 0;
        op->peek = peek;
        efa::inflight_add(ctx, op); // before the post: a completion may come first
    }
    if (b.size.load(std::memory_order_acquire) == 0) {
        ssize_t rc = post();
        if (rc == 0) {
            return 0;
        }
        if (!queue_full(rc)) {
            if (op) {
                efa::inflight_done(ctx, op);
            }
            return post_failed(ctx, call, rc);
        }
    }
    defer(ctx, b, call, op, post);
    return 0;
}

// Receive-queue slots (see EFA_RX_* in efa_core.h).  A counter is only
// ever changed by one thread at a time unless the context is shared by
// threads (ctx->mt): then locked read-modify-writes, else a plain load and
// store, which spares two locked instructions per post and per completion.
inline int slot_add(efa_ctx *ctx, std::atomic<int> &counter, int delta) {
    if (ctx->mt) {
        return counter.fetch_add(delta, std::memory_order_acq_rel);
    }
    const int old = counter.load(std::memory_order_relaxed);
    counter.store(old + delta, std::memory_order_relaxed);
    return old;
}

inline bool take_slot(efa_ctx *ctx, efa_op_t *op) {
    if (ctx->rx_capacity == 0) {
        return true;
    }
    const bool user = op->rx_class != EFA_RX_INTERNAL;
    if (slot_add(ctx, ctx->rx_posted, 1) >= ctx->rx_capacity) {
        slot_add(ctx, ctx->rx_posted, -1);
        return false;
    }
    if (user && slot_add(ctx, ctx->rx_posted_user, 1) >= ctx->rx_user_capacity) {
        slot_add(ctx, ctx->rx_posted_user, -1);
        slot_add(ctx, ctx->rx_posted, -1);
        return false;
    }
    op->rx_counted = 1;
    return true;
}

inline void release_slot(efa_ctx *ctx, efa_op_t *op) {
    if (op->rx_counted) {
        op->rx_counted = 0;
        slot_add(ctx, ctx->rx_posted, -1);
        if (op->rx_class != EFA_RX_INTERNAL) {
            slot_add(ctx, ctx->rx_posted_user, -1);
        }
    }
}

// A receive: it needs a queue slot of its class, and waits in its class's
// backlog (internal receives never wait behind user receives).
template <typename Post>
inline int submit_recv(efa_ctx *ctx, const char *call, efa_op_t *op, Post post) {
    efa::Backlog &b = op->rx_class == EFA_RX_INTERNAL ? ctx->rx_internal_backlog : ctx->rx_backlog;
    op->rx_counted = 0;
    op->peek = 0;
    efa::inflight_add(ctx, op);
    if (b.size.load(std::memory_order_acquire) == 0 && take_slot(ctx, op)) {
        ssize_t rc = post();
        if (rc == 0) {
            return 0;
        }
        release_slot(ctx, op);
        if (!queue_full(rc)) {
            efa::inflight_done(ctx, op);
            return post_failed(ctx, call, rc);
        }
    }
    defer(ctx, b, call, op, post, true);
    return 0;
}

// Posts 'op' with 'peer' through the peer deadline: the provider gets the
// deadline's stand-in (core_deadline.cpp) when it is on.  post(pop) posts
// with pop as the operation.
template <typename Post>
inline int tracked_post(efa_ctx *ctx, fi_addr_t peer, efa_op_t *op, efa::PeerDeadline::Kind kind,
                        uint64_t flags, Post post) {
    int err = 0;
    efa_op_t *pop = efa::deadline_track(ctx, peer, op, kind, flags, &err);
    if (!pop) {
        return err;
    }
    int rc = post(pop);
    if (rc && efa::deadline_untrack(ctx, pop, op)) {
        return 0; // its owner was told of the peer's loss meanwhile: once is enough
    }
    if (0 == rc && (flags & FI_RECV)) {
        efa::deadline_posted(ctx, pop, op);
    }
    return rc;
}

inline constexpr auto kSend = efa::PeerDeadline::Kind::Send;

} // namespace efa::post

#endif // EFA_CTX_POST_HPP
