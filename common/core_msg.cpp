// Untagged messaging: the receive pool and the untagged sends (btl_efa).
//
// Each context keeps a fixed set of receive buffers posted with fi_recv.
// A completion hands the buffer to the installed handler and posts it
// again; without a handler the buffer is held (not re-posted) until one is
// installed, so nothing that arrived early is lost.  Every receive carries
// an efa_op_t context like all other operations the progress loop sees.
#include <algorithm>
#include <cstdlib>
#include <deque>
#include <vector>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "core.hpp"
#include "efa_core_msg.h"

namespace {

constexpr size_t kBufSize = 64 * 1024; // one receive buffer (also the largest message)
constexpr size_t kBufsPerCtx = 32;

} // namespace

struct efa_msg_pool {
    struct Buf {
        efa_op_t op; // first: the progress loop casts the context back
        efa_msg_pool *pool;
        efa_ctx *ctx;
        uint8_t *data;
        size_t len; // bytes received, while held
        bool posted;
    };
    efa_core *core = nullptr;
    uint8_t *slab = nullptr;
    size_t slab_len = 0;
    efa::MrEntry *mr = nullptr;
    void *desc = nullptr;
    std::vector<Buf> bufs;
    std::deque<Buf *> held;
    efa_msg_handler_fn fn = nullptr;
    void *arg = nullptr;
    bool closing = false;
};

namespace {

int post(efa_msg_pool::Buf *b) {
    for (;;) {
        ssize_t rc =
            fi_recv(b->ctx->ep, b->data, kBufSize, b->pool->desc, FI_ADDR_UNSPEC, &b->op.fi_ctx);
        if (rc == 0) {
            b->posted = true;
            return 0;
        }
        if (rc != -FI_EAGAIN) {
            return static_cast<int>(rc);
        }
        efa_core_progress(b->pool->core);
    }
}

void repost(efa_msg_pool::Buf *b) {
    int rc = post(b);
    if (rc) {
        b->pool->core->rep.say(1, std::string("cannot re-post an untagged receive: ") +
                                      fi_strerror(-rc));
    }
}

void recv_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *b = reinterpret_cast<efa_msg_pool::Buf *>(op);
    efa_msg_pool *pool = b->pool;
    b->posted = false;
    if (pool->closing) {
        return;
    }
    if (cqe->err) {
        if (pool->fn) {
            pool->fn(pool->arg, b->ctx, nullptr, 0, cqe->err);
        }
        repost(b);
        return;
    }
    b->len = cqe->len;
    if (!pool->fn || !pool->held.empty()) {
        pool->held.push_back(b);
        return;
    }
    pool->fn(pool->arg, b->ctx, b->data, b->len, 0);
    repost(b);
}

template <typename Post> int retry(efa_ctx *ctx, Post p) {
    for (;;) {
        ssize_t rc = p();
        if (rc != -FI_EAGAIN) {
            return static_cast<int>(rc);
        }
        efa_core_progress(ctx->core);
    }
}

} // namespace

extern "C" {

int efa_core_msg_open(efa_core_t *core) {
    auto pool = std::make_unique<efa_msg_pool>();
    pool->core = core;
    const fi_info *info = core->nic->info();
    size_t per_ctx = kBufsPerCtx;
    if (info->rx_attr && info->rx_attr->size > 0) {
        // Leave room in the receive queue for the MTL's tagged receives.
        per_ctx = std::min(per_ctx, std::max<size_t>(info->rx_attr->size / 4, 1));
    }
    const int nctx = core->nic->num_contexts();
    const size_t count = per_ctx * static_cast<size_t>(nctx);
    pool->slab_len = count * kBufSize;
    if (posix_memalign(reinterpret_cast<void **>(&pool->slab), 4096, pool->slab_len)) {
        return -FI_ENOMEM;
    }
    if (core->info.mr_local) {
        int err = 0;
        pool->mr = core->mr_cache->acquire(pool->slab, pool->slab_len,
                                           FI_RECV | FI_SEND | FI_READ | FI_WRITE, &err);
        if (!pool->mr) {
            free(pool->slab);
            return err ? err : -FI_ENOMEM;
        }
        pool->desc = pool->mr->reg.desc;
    }
    pool->bufs.resize(count);
    for (size_t i = 0; i < count; ++i) {
        efa_msg_pool::Buf &b = pool->bufs[i];
        b.op.complete = recv_complete;
        b.pool = pool.get();
        b.ctx = core->nic->ctx(static_cast<int>(i / per_ctx));
        b.data = pool->slab + i * kBufSize;
        b.len = 0;
        b.posted = false;
    }
    core->msg_pool = pool.release();
    for (auto &b : core->msg_pool->bufs) {
        int rc = post(&b);
        if (rc) {
            core->rep.say(1, std::string("cannot post untagged receives: ") + fi_strerror(-rc));
            efa_core_msg_close(core);
            return rc;
        }
    }
    return 0;
}

void efa_core_msg_close(efa_core_t *core) {
    efa_msg_pool *pool = core->msg_pool;
    if (!pool) {
        return;
    }
    pool->closing = true;
    pool->fn = nullptr;
    for (auto &b : pool->bufs) {
        if (b.posted) {
            fi_cancel(&b.ctx->ep->fid, &b.op.fi_ctx);
        }
    }
    // Collect the cancellations (bounded: the endpoints close next anyway).
    for (int i = 0; i < 1000; ++i) {
        bool any = std::any_of(pool->bufs.begin(), pool->bufs.end(),
                               [](const efa_msg_pool::Buf &b) { return b.posted; });
        if (!any) {
            break;
        }
        efa_core_progress(core);
    }
    if (pool->mr) {
        core->mr_cache->release(pool->mr);
    }
    free(pool->slab);
    core->msg_pool = nullptr;
    delete pool;
}

void efa_core_msg_set_handler(efa_core_t *core, efa_msg_handler_fn fn, void *arg) {
    efa_msg_pool *pool = core->msg_pool;
    if (!pool) {
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    while (pool->fn && !pool->held.empty()) {
        efa_msg_pool::Buf *b = pool->held.front();
        pool->held.pop_front();
        pool->fn(pool->arg, b->ctx, b->data, b->len, 0);
        repost(b);
    }
}

size_t efa_core_msg_max_size(const efa_core_t *core) {
    size_t max = kBufSize;
    if (core->info.max_msg_size && core->info.max_msg_size < max) {
        max = core->info.max_msg_size;
    }
    return max;
}

int efa_ctx_send(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                 efa_op_t *op) {
    if (len > kBufSize) {
        return -FI_EMSGSIZE;
    }
    return retry(ctx, [&] { return fi_send(ctx->ep, buf, len, desc, dest, &op->fi_ctx); });
}

int efa_ctx_try_send(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                     efa_op_t *op) {
    if (len > kBufSize) {
        return -FI_EMSGSIZE;
    }
    return static_cast<int>(fi_send(ctx->ep, buf, len, desc, dest, &op->fi_ctx));
}

} // extern "C"
