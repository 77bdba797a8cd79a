// The hot path: posting tagged operations and draining completion queues.
//
// Every post retries -FI_EAGAIN after driving progress: a full provider
// queue only delays an operation; it is never dropped.  Completions are
// read into a local batch and dispatched with no lock held, so a callback
// may post new operations (a synchronous-send acknowledgement, say) or
// drive progress itself.
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "core.hpp"

namespace {

template <typename Post> inline int post_with_retry(efa_ctx *ctx, Post post) {
    for (;;) {
        ssize_t rc = post();
        if (rc != -FI_EAGAIN) {
            return static_cast<int>(rc);
        }
        efa_core_progress(ctx->core);
    }
}

inline void dispatch_error(fid_cq *cq) {
    fi_cq_err_entry err = {};
    if (fi_cq_readerr(cq, &err, 0) < 0) {
        return;
    }
    auto *op = static_cast<efa_op_t *>(err.op_context);
    if (!op) {
        return;
    }
    efa_cqe_t cqe;
    cqe.err = -err.err;
    cqe.flags = err.flags;
    cqe.tag = err.tag;
    cqe.data = err.data;
    cqe.len = err.len;
    cqe.olen = err.olen;
    op->complete(op, &cqe);
}

inline int drain(efa_ctx *ctx, int batch) {
    fi_cq_tagged_entry entries[64];
    if (batch > 64) {
        batch = 64;
    }
    ssize_t n = fi_cq_read(ctx->cq, entries, static_cast<size_t>(batch));
    if (n > 0) {
        for (ssize_t i = 0; i < n; ++i) {
            auto *op = static_cast<efa_op_t *>(entries[i].op_context);
            if (!op) {
                continue;
            }
            efa_cqe_t cqe{0, entries[i].flags, entries[i].tag, entries[i].data, entries[i].len, 0};
            op->complete(op, &cqe);
        }
        return static_cast<int>(n);
    }
    if (n == -FI_EAVAIL) {
        dispatch_error(ctx->cq);
        return 1;
    }
    return 0;
}

} // namespace

extern "C" {

int efa_core_progress(efa_core_t *core) {
    int events = 0;
    const int n = core->nic->num_contexts();
    for (int i = 0; i < n; ++i) {
        events += drain(core->nic->ctx(i), core->progress_batch);
    }
    return events;
}

int efa_ctx_tsend(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                  uint64_t tag, uint64_t data, efa_op_t *op) {
    if (ctx->use_cq_data) {
        return post_with_retry(ctx, [&] {
            return fi_tsenddata(ctx->ep, buf, len, desc, data, dest, tag, &op->fi_ctx);
        });
    }
    return post_with_retry(ctx,
                           [&] { return fi_tsend(ctx->ep, buf, len, desc, dest, tag, &op->fi_ctx); });
}

int efa_ctx_tinject(efa_ctx_t *ctx, const void *buf, size_t len, fi_addr_t dest, uint64_t tag,
                    uint64_t data) {
    if (ctx->use_cq_data) {
        return post_with_retry(
            ctx, [&] { return fi_tinjectdata(ctx->ep, buf, len, data, dest, tag); });
    }
    return post_with_retry(ctx, [&] { return fi_tinject(ctx->ep, buf, len, dest, tag); });
}

int efa_ctx_trecv(efa_ctx_t *ctx, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
                  uint64_t ignore, efa_op_t *op) {
    return post_with_retry(
        ctx, [&] { return fi_trecv(ctx->ep, buf, len, desc, src, tag, ignore, &op->fi_ctx); });
}

int efa_ctx_tpeek(efa_ctx_t *ctx, fi_addr_t src, uint64_t tag, uint64_t ignore, bool claim,
                  efa_op_t *op) {
    fi_msg_tagged msg = {};
    msg.addr = src;
    msg.tag = tag;
    msg.ignore = ignore;
    msg.context = &op->fi_ctx;
    uint64_t flags = FI_PEEK | FI_COMPLETION | (claim ? FI_CLAIM : 0);
    return post_with_retry(ctx, [&] { return fi_trecvmsg(ctx->ep, &msg, flags); });
}

int efa_ctx_trecv_claimed(efa_ctx_t *ctx, void *buf, size_t len, void *desc, uint64_t tag,
                          uint64_t ignore, efa_op_t *op) {
    iovec iov = {buf, len};
    fi_msg_tagged msg = {};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = FI_ADDR_UNSPEC;
    msg.tag = tag;
    msg.ignore = ignore;
    msg.context = &op->fi_ctx;
    return post_with_retry(
        ctx, [&] { return fi_trecvmsg(ctx->ep, &msg, FI_CLAIM | FI_COMPLETION); });
}

int efa_ctx_cancel(efa_ctx_t *ctx, efa_op_t *op) {
    return static_cast<int>(fi_cancel(&ctx->ep->fid, &op->fi_ctx));
}

} // extern "C"
