// The hot path: posting tagged operations and draining completion queues.
//
// A post that finds the provider's queue full (-FI_EAGAIN; shm says
// -FI_ENOMEM) is not spun on: spinning in a receive post could deadlock two
// processes that each wait for the other to send.  It joins the context's
// backlog and progress posts it later, in order; the caller sees success.
// Completions are read into a local batch and dispatched with no lock held,
// so a callback may post new operations (a synchronous-send
// acknowledgement, say) or drive progress itself.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>

#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "core.hpp"
#include "efa_core_msg.h"
#include "efa_params.hpp"
#include "efa_rma.h"

namespace {

std::string to_hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(v));
    return buf;
}

inline bool queue_full(ssize_t rc) {
    return rc == -FI_EAGAIN || rc == -FI_ENOMEM;
}

void defer(efa::Backlog &b, const char *call, efa_op_t *op, std::function<ssize_t()> post,
           bool holds_slot = false) {
    std::lock_guard<std::mutex> guard(b.lock);
    b.deferred.fetch_add(1, std::memory_order_relaxed);
    b.ops.push_back(efa::Deferred{op, std::move(post), holds_slot, call});
    b.size.fetch_add(1, std::memory_order_release);
}

// A post the provider refused for another reason than a full queue: say
// which call and why (once per kind) and hand the error to the caller.
__attribute__((noinline)) int post_failed(efa_ctx *ctx, const char *call, ssize_t rc) {
    ctx->core->failures.report(ctx->core->rep, call, static_cast<int>(rc));
    return static_cast<int>(rc);
}

template <typename Post>
int submit(efa_ctx *ctx, efa::Backlog &b, const char *call, efa_op_t *op, Post post) {
    if (op) {
        op->rx_counted = 0;
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
    defer(b, call, op, post);
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
template <typename Post> int submit_recv(efa_ctx *ctx, const char *call, efa_op_t *op, Post post) {
    efa::Backlog &b = op->rx_class == EFA_RX_INTERNAL ? ctx->rx_internal_backlog : ctx->rx_backlog;
    op->rx_counted = 0;
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
    defer(b, call, op, post, true);
    return 0;
}

// Post what a backlog holds, oldest first, until the provider (or the
// receive class's share of it) is full again.  Out of line: progress calls
// it only when the backlog is non-empty.
__attribute__((noinline)) void flush_backlog_slow(efa_ctx *ctx, efa::Backlog &b) {
    std::vector<efa_op_t *> failed;
    std::vector<int> errors;
    std::vector<const char *> calls;
    {
        std::unique_lock<std::mutex> guard(b.lock, std::try_to_lock);
        if (!guard.owns_lock()) {
            return; // another thread is at it
        }
        while (!b.ops.empty()) {
            efa::Deferred &d = b.ops.front();
            if (d.holds_slot && !take_slot(ctx, d.op)) {
                break;
            }
            ssize_t rc = d.post();
            if (rc != 0 && d.holds_slot) {
                release_slot(ctx, d.op);
            }
            if (queue_full(rc)) {
                break;
            }
            efa_op_t *op = b.ops.front().op;
            const char *call = b.ops.front().call;
            b.ops.pop_front();
            b.size.fetch_sub(1, std::memory_order_release);
            if (rc != 0) {
                failed.push_back(op);
                errors.push_back(static_cast<int>(rc));
                calls.push_back(call);
            }
        }
    }
    for (size_t i = 0; i < failed.size(); ++i) {
        static std::atomic<int> reported{0};
        if (reported.fetch_add(1) < 8) {
            ctx->core->rep.say(0, std::string("deferred post failed: ") + fi_strerror(-errors[i]));
        }
        ctx->core->failures.report(ctx->core->rep, std::string(calls[i]) + " (deferred)",
                                   errors[i]);
        if (failed[i]) { // an inject has no operation to fail
            efa::inflight_done(ctx, failed[i]);
            efa_cqe_t cqe{errors[i], 0, 0, 0, 0, 0};
            failed[i]->complete(failed[i], &cqe);
        }
    }
}

inline void flush_backlog(efa_ctx *ctx, efa::Backlog &b) {
    if (b.size.load(std::memory_order_acquire) != 0) {
        flush_backlog_slow(ctx, b);
    }
}

// Which kind of operation a failed completion belongs to, in the words of
// the call that posted it.
const char *completion_kind(uint64_t flags) {
    if (flags & FI_READ) {
        return "completion of fi_read";
    }
    if (flags & FI_WRITE) {
        return "completion of fi_write";
    }
    if (flags & FI_ATOMIC) {
        return "completion of fi_atomic";
    }
    if (flags & FI_SEND) {
        return (flags & FI_TAGGED) ? "completion of fi_tsend" : "completion of fi_send";
    }
    if (flags & FI_RECV) {
        return (flags & FI_TAGGED) ? "completion of fi_trecv" : "completion of fi_recv";
    }
    return "completion";
}

__attribute__((noinline)) void dispatch_error(efa_ctx *ctx) {
    fi_cq_err_entry err = {};
    if (fi_cq_readerr(ctx->cq, &err, 0) < 0) {
        return;
    }
    // The manual says positive; shm (1.17) reports some negative.
    err.err = err.err < 0 ? -err.err : err.err;
    // Cancels, empty probes and truncation are normal MPI outcomes. Anything
    // else fails a request: say so with the provider's own words (the first
    // few times unconditionally, so a failed job shows why).
    const bool expected = err.err == FI_ECANCELED || err.err == FI_ENOMSG || err.err == FI_ETRUNC;
    static std::atomic<int> reported{0};
    const int level = (!expected && reported.fetch_add(1) < 8) ? 0 : 10;
    const char *kind = completion_kind(err.flags);
    const bool new_kind =
        !expected && ctx->core->rep.verbosity >= 1 && ctx->core->failures.is_new(kind, err.err);
    if (new_kind || ctx->core->rep.verbosity >= level) {
        char buf[256];
        const char *prov = fi_cq_strerror(ctx->cq, err.prov_errno, err.err_data, buf, sizeof(buf));
        std::string detail = std::string(prov ? prov : "") + ", provider errno " +
                             std::to_string(err.prov_errno) + ", flags 0x" + to_hex(err.flags);
        if (!(new_kind && ctx->core->failures.report(ctx->core->rep, kind, err.err, detail))) {
            ctx->core->rep.say(level, std::string("completion error: ") + fi_strerror(err.err) +
                                          " (provider: " + detail + ")");
        }
    }
    auto *op = static_cast<efa_op_t *>(err.op_context);
    if (!op) {
        return;
    }
    release_slot(ctx, op);
    efa::inflight_done(ctx, op);
    efa_cqe_t cqe;
    cqe.err = -err.err;
    cqe.flags = err.flags;
    cqe.tag = err.tag;
    cqe.data = err.data;
    cqe.len = err.len;
    cqe.olen = err.olen;
    op->complete(op, &cqe);
}

__attribute__((always_inline)) inline int drain(efa_ctx *ctx, int batch) {
    // validate_params keeps batch within 1..kMaxProgressBatch (refused otherwise).
    fi_cq_tagged_entry entries[efa::ParamLimits::kMaxProgressBatch];
    ssize_t n = fi_cq_read(ctx->cq, entries, static_cast<size_t>(batch));
    if (n > 0) {
        for (ssize_t i = 0; i < n; ++i) {
            auto *op = static_cast<efa_op_t *>(entries[i].op_context);
            if (!op) {
                continue;
            }
            release_slot(ctx, op);
            efa::inflight_done(ctx, op);
            efa_cqe_t cqe{0, entries[i].flags, entries[i].tag, entries[i].data, entries[i].len, 0};
            op->complete(op, &cqe);
        }
        return static_cast<int>(n);
    }
    if (n == -FI_EAVAIL) {
        dispatch_error(ctx);
        return 1;
    }
    return 0;
}

// Posts 'op' with 'peer' through the peer deadline: the provider gets the
// deadline's stand-in (core_deadline.cpp) when it is on.  post(pop) posts
// with pop as the operation.
template <typename Post>
int tracked_post(efa_ctx *ctx, fi_addr_t peer, efa_op_t *op, efa::PeerDeadline::Kind kind,
                 uint64_t flags, Post post) {
    int err = 0;
    efa_op_t *pop = efa::deadline_track(ctx, peer, op, kind, flags, &err);
    if (!pop) {
        return err;
    }
    int rc = post(pop);
    if (rc) {
        efa::deadline_untrack(ctx, pop, op);
    }
    return rc;
}

constexpr auto kSend = efa::PeerDeadline::Kind::Send;

// A relaxed load and store, not a locked increment: the count only paces
// the deadline's checks.
inline uint32_t bump(std::atomic<uint32_t> &c) {
    const uint32_t v = c.load(std::memory_order_relaxed) + 1;
    c.store(v, std::memory_order_relaxed);
    return v;
}
} // namespace

extern "C" {

void efa_op_complete_nothing(efa_op_t *op, const efa_cqe_t *cqe) {
    (void)op;
    (void)cqe;
}

int efa_core_progress(efa_core_t *core) {
    int events = 0;
    const int n = core->nic->num_contexts();
    for (int i = 0; i < n; ++i) {
        efa_ctx *ctx = core->nic->ctx(i);
        events += drain(ctx, core->progress_batch);
        flush_backlog(ctx, ctx->tx_backlog);
        flush_backlog(ctx, ctx->rx_internal_backlog);
        flush_backlog(ctx, ctx->rx_backlog);
    }
    // Untagged receive buffers that found the queue full are posted again
    // here, whichever component owns a channel (a load when there are none).
    efa_core_msg_progress(core);
    if (core->mr_cache) {
        core->mr_cache->apply_invalidations(); // memory freed since: deregistered here
    }
    // The deadline's clock is read when a call found nothing (a wait), or
    // every 64th busy call (a peer may be silent while others keep this
    // process busy), so the fast path stays a counter.
    if (core->deadline_on && (events == 0 || (bump(core->busy_calls) & 63) == 0)) {
        efa::deadline_tick(core);
    }
    return events;
}

int efa_ctx_tsend(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                  uint64_t tag, uint64_t data, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    return tracked_post(ctx, dest, op, kSend, FI_SEND | FI_TAGGED, [&](efa_op_t *pop) {
        void *context = &pop->fi_ctx;
        if (ctx->use_cq_data) {
            return submit(ctx, ctx->tx_backlog, "fi_tsenddata", pop, [=] {
                return fi_tsenddata(ep, buf, len, desc, data, dest, tag, context);
            });
        }
        return submit(ctx, ctx->tx_backlog, "fi_tsend", pop,
                      [=] { return fi_tsend(ep, buf, len, desc, dest, tag, context); });
    });
}

int efa_ctx_tinject(efa_ctx_t *ctx, const void *buf, size_t len, fi_addr_t dest, uint64_t tag,
                    uint64_t data) {
    fid_ep *ep = ctx->ep;
    const bool use_data = ctx->use_cq_data;
    if (efa::deadline_refuses(ctx, dest)) {
        return -FI_EHOSTUNREACH;
    }
    auto inject = [=](const void *b) {
        return use_data ? fi_tinjectdata(ep, b, len, data, dest, tag)
                        : fi_tinject(ep, b, len, dest, tag);
    };
    if (ctx->tx_backlog.size.load(std::memory_order_acquire) == 0) {
        ssize_t rc = inject(buf);
        if (rc == 0) {
            return 0;
        }
        if (!queue_full(rc)) {
            return post_failed(ctx, "fi_tinject", rc);
        }
    }
    // The caller may reuse its buffer as soon as we return: keep a copy.
    auto copy = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t *>(buf),
                                                       static_cast<const uint8_t *>(buf) + len);
    defer(ctx->tx_backlog, "fi_tinject", nullptr, [=] { return inject(copy->data()); });
    return 0;
}

int efa_ctx_trecv(efa_ctx_t *ctx, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
                  uint64_t ignore, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    auto post = [&](efa_op_t *pop) {
        void *context = &pop->fi_ctx;
        if (ctx->overflow_buf) {
            void *obuf = ctx->overflow_buf, *odesc = ctx->overflow_desc;
            size_t olen = ctx->overflow_len;
            return submit_recv(ctx, "fi_trecvv", pop, [=] {
                iovec iov[2] = {{buf, len}, {obuf, olen}};
                void *descs[2] = {desc, odesc};
                return fi_trecvv(ep, iov, descs, 2, src, tag, ignore, context);
            });
        }
        return submit_recv(ctx, "fi_trecv", pop,
                           [=] { return fi_trecv(ep, buf, len, desc, src, tag, ignore, context); });
    };
    // A receive from one peer waits on it (the deadline probes it); one
    // from any source waits on nobody in particular.
    if (src == FI_ADDR_UNSPEC) {
        op->tracker = nullptr;
        return post(op);
    }
    return tracked_post(ctx, src, op, efa::PeerDeadline::Kind::Recv, FI_RECV | FI_TAGGED, post);
}

int efa_ctx_tpeek(efa_ctx_t *ctx, fi_addr_t src, uint64_t tag, uint64_t ignore, bool claim,
                  efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    const uint64_t flags = FI_PEEK | FI_COMPLETION | (claim ? FI_CLAIM : 0);
    op->tracker = nullptr;
    return submit(ctx, ctx->rx_internal_backlog, "fi_trecvmsg(FI_PEEK)", op, [=] {
        fi_msg_tagged msg = {};
        msg.addr = src;
        msg.tag = tag;
        msg.ignore = ignore;
        msg.context = &op->fi_ctx;
        return fi_trecvmsg(ep, &msg, flags);
    });
}

int efa_ctx_trecv_claimed(efa_ctx_t *ctx, void *buf, size_t len, void *desc, uint64_t tag,
                          uint64_t ignore, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    void *obuf = ctx->overflow_buf, *odesc = ctx->overflow_desc;
    size_t olen = ctx->overflow_len;
    op->tracker = nullptr;
    return submit(ctx, ctx->rx_internal_backlog, "fi_trecvmsg(FI_CLAIM)", op, [=] {
        iovec iov[2] = {{buf, len}, {obuf, olen}};
        void *d[2] = {desc, odesc};
        fi_msg_tagged msg = {};
        msg.msg_iov = iov;
        msg.desc = d;
        msg.iov_count = obuf ? 2 : 1;
        msg.addr = FI_ADDR_UNSPEC;
        msg.tag = tag;
        msg.ignore = ignore;
        msg.context = &op->fi_ctx;
        return fi_trecvmsg(ep, &msg, FI_CLAIM | FI_COMPLETION);
    });
}

// ---- one-sided ----
//
// The lambdas hold copies of every argument (descriptors included), so a
// post deferred to the backlog needs nothing of the caller's stack.

namespace {
// Writes and non-fetching atomics: completion must mean the target's memory
// holds the update (see efa_core.h).  Reads and fetching atomics complete
// when the data is back, which already implies that.
constexpr uint64_t kRemoteCompleteFlags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
constexpr uint64_t kLocalCompleteFlags = FI_COMPLETION;

// One local buffer against one remote range: every put and get is this shape.
fi_msg_rma rma_msg(const iovec *iov, void **desc, fi_addr_t peer, const fi_rma_iov *riov,
                   void *context) {
    fi_msg_rma msg = {};
    msg.msg_iov = iov;
    msg.desc = desc;
    msg.iov_count = 1;
    msg.addr = peer;
    msg.rma_iov = riov;
    msg.rma_iov_count = 1;
    msg.context = context;
    return msg;
}
} // namespace

int efa_ctx_write(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                  uint64_t raddr, uint64_t rkey, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    return tracked_post(ctx, dest, op, kSend, FI_RMA | FI_WRITE, [&](efa_op_t *pop) {
        void *context = &pop->fi_ctx;
        return submit(ctx, ctx->tx_backlog, "fi_writemsg", pop, [=] {
            iovec iov = {const_cast<void *>(buf), len};
            void *d = desc;
            fi_rma_iov riov = {raddr, len, rkey};
            fi_msg_rma msg = rma_msg(&iov, &d, dest, &riov, context);
            return fi_writemsg(ep, &msg, kRemoteCompleteFlags);
        });
    });
}

int efa_ctx_read(efa_ctx_t *ctx, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t raddr,
                 uint64_t rkey, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    return tracked_post(ctx, src, op, kSend, FI_RMA | FI_READ, [&](efa_op_t *pop) {
        void *context = &pop->fi_ctx;
        return submit(ctx, ctx->tx_backlog, "fi_readmsg", pop, [=] {
            iovec iov = {buf, len};
            void *d = desc;
            fi_rma_iov riov = {raddr, len, rkey};
            fi_msg_rma msg = rma_msg(&iov, &d, src, &riov, context);
            return fi_readmsg(ep, &msg, kLocalCompleteFlags);
        });
    });
}

namespace {
fi_msg_atomic atomic_msg(const fi_ioc *ioc, void **desc, fi_addr_t dest, const fi_rma_ioc *rioc,
                         enum fi_datatype dt, enum fi_op aop, void *context) {
    fi_msg_atomic msg = {};
    msg.msg_iov = ioc;
    msg.desc = desc;
    msg.iov_count = 1;
    msg.addr = dest;
    msg.rma_iov = rioc;
    msg.rma_iov_count = 1;
    msg.datatype = dt;
    msg.op = aop;
    msg.context = context;
    return msg;
}
} // namespace

int efa_ctx_atomic(efa_ctx_t *ctx, enum fi_op aop, enum fi_datatype dt, const void *operand,
                   void *desc, fi_addr_t dest, uint64_t raddr, uint64_t rkey, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    return tracked_post(ctx, dest, op, kSend, FI_ATOMIC | FI_WRITE, [&](efa_op_t *pop) {
        void *context = &pop->fi_ctx;
        return submit(ctx, ctx->tx_backlog, "fi_atomicmsg", pop, [=] {
            fi_ioc ioc = {const_cast<void *>(operand), 1};
            void *d = desc;
            fi_rma_ioc rioc = {raddr, 1, rkey};
            fi_msg_atomic msg = atomic_msg(&ioc, &d, dest, &rioc, dt, aop, context);
            return fi_atomicmsg(ep, &msg, kRemoteCompleteFlags);
        });
    });
}

int efa_ctx_fetch_atomic(efa_ctx_t *ctx, enum fi_op aop, enum fi_datatype dt, const void *operand,
                         void *desc, void *result, void *result_desc, fi_addr_t dest,
                         uint64_t raddr, uint64_t rkey, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    return tracked_post(ctx, dest, op, kSend, FI_ATOMIC | FI_READ, [&](efa_op_t *pop) {
        void *context = &pop->fi_ctx;
        return submit(ctx, ctx->tx_backlog, "fi_fetch_atomicmsg", pop, [=] {
            fi_ioc ioc = {const_cast<void *>(operand), 1};
            void *d = desc;
            fi_ioc res = {result, 1};
            void *rd = result_desc;
            fi_rma_ioc rioc = {raddr, 1, rkey};
            fi_msg_atomic msg = atomic_msg(&ioc, &d, dest, &rioc, dt, aop, context);
            return fi_fetch_atomicmsg(ep, &msg, &res, &rd, 1, kLocalCompleteFlags);
        });
    });
}

int efa_ctx_compare_atomic(efa_ctx_t *ctx, enum fi_datatype dt, const void *swap, void *desc,
                           const void *compare, void *compare_desc, void *result, void *result_desc,
                           fi_addr_t dest, uint64_t raddr, uint64_t rkey, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    return tracked_post(ctx, dest, op, kSend, FI_ATOMIC | FI_READ, [&](efa_op_t *pop) {
        void *context = &pop->fi_ctx;
        return submit(ctx, ctx->tx_backlog, "fi_compare_atomicmsg", pop, [=] {
            fi_ioc ioc = {const_cast<void *>(swap), 1};
            void *d = desc;
            fi_ioc cmp = {const_cast<void *>(compare), 1};
            void *cd = compare_desc;
            fi_ioc res = {result, 1};
            void *rd = result_desc;
            fi_rma_ioc rioc = {raddr, 1, rkey};
            fi_msg_atomic msg = atomic_msg(&ioc, &d, dest, &rioc, dt, FI_CSWAP, context);
            return fi_compare_atomicmsg(ep, &msg, &cmp, &cd, 1, &res, &rd, 1, kLocalCompleteFlags);
        });
    });
}

int efa_core_query_atomic(efa_core_t *core, enum fi_datatype dt, enum fi_op aop, int kind) {
    if (!(core->info.has_atomic)) {
        return -FI_EOPNOTSUPP;
    }
    uint64_t flags = kind == EFA_RMA_ATOMIC_FETCH     ? FI_FETCH_ATOMIC
                     : kind == EFA_RMA_ATOMIC_COMPARE ? FI_COMPARE_ATOMIC
                                                      : 0;
    fi_atomic_attr attr = {};
    int rc = fi_query_atomic(core->nic->domain(), dt, aop, &attr, flags);
    if (rc) {
        return rc;
    }
    return attr.count >= 1 ? 0 : -FI_EOPNOTSUPP;
}

int efa_ctx_cancel(efa_ctx_t *ctx, efa_op_t *op) {
    // The provider (or the backlog) holds the deadline's stand-in, if any;
    // its cancel completion reaches op through it.
    if (op->tracker) {
        op = op->tracker;
    }
    bool found = false;
    for (efa::Backlog *b : {&ctx->rx_backlog, &ctx->rx_internal_backlog}) {
        if (found || b->size.load(std::memory_order_acquire) == 0) {
            continue;
        }
        std::lock_guard<std::mutex> guard(b->lock);
        for (auto it = b->ops.begin(); it != b->ops.end(); ++it) {
            if (it->op == op) {
                b->ops.erase(it);
                b->size.fetch_sub(1, std::memory_order_release);
                found = true;
                break;
            }
        }
    }
    if (found) { // never reached the provider: cancelled here
        efa::inflight_done(ctx, op);
        efa_cqe_t cqe{-FI_ECANCELED, 0, 0, 0, 0, 0};
        op->complete(op, &cqe);
        return 0;
    }
    return static_cast<int>(fi_cancel(&ctx->ep->fid, &op->fi_ctx));
}

} // extern "C"
