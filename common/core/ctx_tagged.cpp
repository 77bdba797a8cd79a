// Tagged operations of a context: send, inject, receive, peek and the
// receive of a claimed message, each posted through the peer deadline and
// the backlog (ctx_post.hpp).
#include <memory>
#include <vector>

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "ctx_post.hpp"
#include "efa_core.h"
#include "path_counts.hpp"

using namespace efa::post;

extern "C" {

int efa_ctx_tsend(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                  uint64_t tag, uint64_t data, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    if (refuses_for_test(ctx, buf, len, desc)) {
        return refuse_for_test(ctx, ctx->tx_backlog, "fi_tsend", op);
    }
    const int rc = tracked_post(ctx, dest, op, kSend, FI_SEND | FI_TAGGED, [&](efa_op_t *pop) {
        void *context = &pop->fi_ctx;
        if (ctx->use_cq_data) {
            return submit(ctx, ctx->tx_backlog, "fi_tsenddata", pop, [=] {
                return fi_tsenddata(ep, buf, len, desc, data, dest, tag, context);
            });
        }
        return submit(ctx, ctx->tx_backlog, "fi_tsend", pop,
                      [=] { return fi_tsend(ep, buf, len, desc, dest, tag, context); });
    });
    if (rc == 0) { // posted, or waiting in the backlog: it will be sent
        efa::counts::add_msg(efa::counts::kProviderSends, len);
    }
    return rc;
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
            efa::counts::add_msg(efa::counts::kProviderSends, len);
            return 0;
        }
        if (!queue_full(rc)) {
            return post_failed(ctx, "fi_tinject", rc);
        }
    }
    // The caller may reuse its buffer as soon as we return: keep a copy.
    auto copy = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t *>(buf),
                                                       static_cast<const uint8_t *>(buf) + len);
    defer(ctx, ctx->tx_backlog, "fi_tinject", nullptr, [=] { return inject(copy->data()); });
    efa::counts::add_msg(efa::counts::kProviderSends, len);
    return 0;
}

int efa_ctx_trecv(efa_ctx_t *ctx, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
                  uint64_t ignore, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    if (refuses_for_test(ctx, buf, len, desc)) {
        return refuse_for_test(
            ctx, op->rx_class == EFA_RX_INTERNAL ? ctx->rx_internal_backlog : ctx->rx_backlog,
            "fi_trecv", op);
    }
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
    // A claim takes the message it finds: behind user receives that wait
    // for the provider (posted earlier, they match first), not past them.
    // A peek alone takes nothing and needs no slot: it never waits behind
    // internal receives that wait for one (ctx_progress.cpp).
    efa::Backlog &b = claim && ctx->rx_backlog.size.load(std::memory_order_acquire) != 0
                          ? ctx->rx_backlog
                          : ctx->rx_internal_backlog;
    return submit(
        ctx, b, "fi_trecvmsg(FI_PEEK)", op,
        [=] {
            fi_msg_tagged msg = {};
            msg.addr = src;
            msg.tag = tag;
            msg.ignore = ignore;
            msg.context = &op->fi_ctx;
            return fi_trecvmsg(ep, &msg, flags);
        },
        true);
}

int efa_ctx_trecv_claimed(efa_ctx_t *ctx, void *buf, size_t len, void *desc, uint64_t tag,
                          uint64_t ignore, efa_op_t *op) {
    fid_ep *ep = ctx->ep;
    void *obuf = ctx->overflow_buf, *odesc = ctx->overflow_desc;
    size_t olen = ctx->overflow_len;
    op->tracker = nullptr;
    if (refuses_for_test(ctx, buf, len, desc)) {
        return refuse_for_test(ctx, ctx->rx_internal_backlog, "fi_trecvmsg(FI_CLAIM)", op);
    }
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

} // extern "C"
