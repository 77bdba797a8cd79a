// One-sided operations of a context: RMA write and read, the three kinds of
// atomics, and cancel (which also finds an operation still in a backlog).
#include <cstdio>
#include <memory>
#include <vector>

#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "ctx_post.hpp"
#include "deadline_tracked.hpp"
#include "efa_core.h"
#include "efa_rma.h"
#include "path_counts.hpp"

using namespace efa::post;

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

extern "C" int efa_ctx_write(efa_ctx_t *ctx, const void *buf, size_t len, void *desc,
                             fi_addr_t dest, uint64_t raddr, uint64_t rkey, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    if (refuses_for_test(ctx, buf, len, desc)) {
        return refuse_for_test(ctx, ctx->tx_backlog, "fi_writemsg", op);
    }
    const int rc = tracked_post(ctx, dest, op, kSend, FI_RMA | FI_WRITE, [&](efa_op_t *pop) {
        void *context = &pop->fi_ctx;
        return submit(ctx, ctx->tx_backlog, "fi_writemsg", pop, [=] {
            iovec iov = {const_cast<void *>(buf), len};
            void *d = desc;
            fi_rma_iov riov = {raddr, len, rkey};
            fi_msg_rma msg = rma_msg(&iov, &d, dest, &riov, context);
            return fi_writemsg(ep, &msg, kRemoteCompleteFlags);
        });
    });
    if (rc == 0) { // posted, or waiting in the backlog
        efa::counts::add_msg(efa::counts::kProviderRma, len);
        efa::counts::add_msg(efa::counts::rail_rma(ctx->rail), len);
    }
    return rc;
}

extern "C" int efa_ctx_read(efa_ctx_t *ctx, void *buf, size_t len, void *desc, fi_addr_t src,
                            uint64_t raddr, uint64_t rkey, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    if (refuses_for_test(ctx, buf, len, desc)) {
        return refuse_for_test(ctx, ctx->tx_backlog, "fi_readmsg", op);
    }
    const int rc = tracked_post(ctx, src, op, kSend, FI_RMA | FI_READ, [&](efa_op_t *pop) {
        void *context = &pop->fi_ctx;
        return submit(ctx, ctx->tx_backlog, "fi_readmsg", pop, [=] {
            iovec iov = {buf, len};
            void *d = desc;
            fi_rma_iov riov = {raddr, len, rkey};
            fi_msg_rma msg = rma_msg(&iov, &d, src, &riov, context);
            return fi_readmsg(ep, &msg, kLocalCompleteFlags);
        });
    });
    if (rc == 0) { // posted, or waiting in the backlog
        efa::counts::add_msg(efa::counts::kProviderRma, len);
        efa::counts::add_msg(efa::counts::rail_rma(ctx->rail), len);
    }
    return rc;
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

extern "C" int efa_ctx_atomic(efa_ctx_t *ctx, enum fi_op aop, enum fi_datatype dt,
                              const void *operand, void *desc, fi_addr_t dest, uint64_t raddr,
                              uint64_t rkey, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    const int rc = tracked_post(ctx, dest, op, kSend, FI_ATOMIC | FI_WRITE, [&](efa_op_t *pop) {
        void *context = &pop->fi_ctx;
        return submit(ctx, ctx->tx_backlog, "fi_atomicmsg", pop, [=] {
            fi_ioc ioc = {const_cast<void *>(operand), 1};
            void *d = desc;
            fi_rma_ioc rioc = {raddr, 1, rkey};
            fi_msg_atomic msg = atomic_msg(&ioc, &d, dest, &rioc, dt, aop, context);
            return fi_atomicmsg(ep, &msg, kRemoteCompleteFlags);
        });
    });
    if (rc == 0) { // posted, or waiting in the backlog
        efa::counts::add(efa::counts::kProviderRma, 1);
        efa::counts::add(efa::counts::rail_rma(ctx->rail), 1);
    }
    return rc;
}

extern "C" int efa_ctx_fetch_atomic(efa_ctx_t *ctx, enum fi_op aop, enum fi_datatype dt,
                                    const void *operand, void *desc, void *result,
                                    void *result_desc, fi_addr_t dest, uint64_t raddr,
                                    uint64_t rkey, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    const int rc = tracked_post(ctx, dest, op, kSend, FI_ATOMIC | FI_READ, [&](efa_op_t *pop) {
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
    if (rc == 0) { // posted, or waiting in the backlog
        efa::counts::add(efa::counts::kProviderRma, 1);
        efa::counts::add(efa::counts::rail_rma(ctx->rail), 1);
    }
    return rc;
}

extern "C" int efa_ctx_compare_atomic(efa_ctx_t *ctx, enum fi_datatype dt, const void *swap,
                                      void *desc, const void *compare, void *compare_desc,
                                      void *result, void *result_desc, fi_addr_t dest,
                                      uint64_t raddr, uint64_t rkey, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    const int rc = tracked_post(ctx, dest, op, kSend, FI_ATOMIC | FI_READ, [&](efa_op_t *pop) {
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
    if (rc == 0) { // posted, or waiting in the backlog
        efa::counts::add(efa::counts::kProviderRma, 1);
        efa::counts::add(efa::counts::rail_rma(ctx->rail), 1);
    }
    return rc;
}

extern "C" int efa_core_query_atomic(efa_core_t *core, enum fi_datatype dt, enum fi_op aop,
                                     int kind) {
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

extern "C" int efa_ctx_cancel(efa_ctx_t *ctx, efa_op_t *op) {
    // The provider (or the backlog) holds the deadline's stand-in, if any;
    // its cancel completion reaches op through it.  Looked at under
    // deadline_lock, and cancelled under it: op may complete in another
    // thread meanwhile, and its stand-in, handed back, become another
    // operation's, which the cancel must not reach.
    std::unique_lock<std::mutex> lock(ctx->core->deadline_lock, std::defer_lock);
    if (ctx->core->deadline_on) {
        lock.lock();
    }
    if (op->tracker) { // (set only while the deadline is on)
        efa_op_t *t = op->tracker;
        if (nullptr == t || !efa::tracked_stands_for(t, op)) {
            return -FI_ENOENT; // completed already
        }
        op = t;
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
        if (lock.owns_lock()) {
            lock.unlock(); // (its completion takes it; nobody else has op now)
        }
        efa::inflight_done(ctx, op);
        efa_cqe_t cqe{-FI_ECANCELED, 0, 0, 0, 0, 0, FI_ADDR_NOTAVAIL, false, false};
        op->complete(op, &cqe);
        return 0;
    }
    return static_cast<int>(fi_cancel(&ctx->ep->fid, &op->fi_ctx));
}

namespace {
int query_atomic(void *core, enum fi_datatype dt, enum fi_op op, int kind) {
    return efa_core_query_atomic(static_cast<efa_core_t *>(core), dt, op, kind);
}
} // namespace

extern "C" bool efa_core_atomics_usable(efa_core_t *core, char *why, size_t why_len) {
    if (!core->info.has_atomic) {
        std::snprintf(why, why_len, "the provider did not grant FI_ATOMIC");
        return false;
    }
    if (const char *defect = efa_rma_atomics_defect(core->info.provider)) {
        std::snprintf(why, why_len, "%s", defect);
        return false;
    }
    enum fi_op op = FI_SUM;
    enum fi_datatype dt = FI_INT64;
    if (!efa_rma_atomics_all_supported(query_atomic, core, &op, &dt)) {
        std::snprintf(why, why_len, "fi_query_atomic: the provider lacks %s on %s",
                      fi_tostr(&op, FI_TYPE_ATOMIC_OP), fi_tostr(&dt, FI_TYPE_ATOMIC_TYPE));
        return false;
    }
    return true;
}
