// The liveness probe's sends (core_probe.cpp has what it is for): pings,
// answers to the peers' pings, and notices of a NIC taken out
// (core_rails.cpp), zero-byte messages in the probe space of the tag (or
// untagged, without tags).  Shared by the peer deadline's
// probe and a lost rail's (core_rail_back.cpp), so that neither calls the
// other.
#include <new>
#include <utility>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "control_tags.hpp"
#include "deadline_tracked.hpp"

namespace efa {

namespace {

using control::kAnswerBit;
using control::kProbeTag;
using control::kRailOutBit;
using control::kRailOutIdMask;
using control::kRailOutRailShift;

// A zero-byte message; tagged with 'tag' where the provider has tags.
ssize_t post_empty(efa_ctx *ctx, fi_addr_t addr, uint64_t tag, uint64_t flags, void *context) {
    // One empty buffer rather than none: ofi_rxd reads msg_iov[0] even
    // when iov_count is 0.
    static char nothing;
    iovec iov = {&nothing, 0};
    void *desc = nullptr;
    if (!ctx->core->info.has_tagged) {
        fi_msg msg = {};
        msg.msg_iov = &iov;
        msg.desc = &desc;
        msg.iov_count = 1;
        msg.addr = addr;
        msg.context = context;
        return fi_sendmsg(ctx->ep, &msg, flags);
    }
    fi_msg_tagged msg = {};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = addr;
    msg.tag = tag;
    msg.context = context;
    return fi_tsendmsg(ctx->ep, &msg, flags);
}

// An answer or a notice the provider holds, freed when it hands it back
// (or at close).
struct Answer {
    efa_op_t op;
    efa_core *core;
    int rail; // of the context it went out on
};

void answer_done(efa_op_t *op, const efa_cqe_t *cqe) {
    (void)cqe;
    auto *a = reinterpret_cast<Answer *>(op);
    {
        std::lock_guard<std::mutex> guard(a->core->deadline_lock);
        a->core->answers_out.erase(a);
    }
    delete a;
}

// -FI_EAGAIN: the queue is full, ask again later.
ssize_t post_answer(efa_ctx *ctx, fi_addr_t to, uint64_t tag) {
    efa_core *core = ctx->core;
    auto *a = new (std::nothrow) Answer{{}, core, ctx->rail};
    if (!a) {
        return -FI_EAGAIN;
    }
    a->op.complete = answer_done;
    a->op.rx_class = EFA_RX_INTERNAL;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        core->answers_out.insert(a);
    }
    ssize_t rc = post_empty(ctx, to, tag, FI_COMPLETION, &a->op.fi_ctx);
    if (rc) {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        core->answers_out.erase(a);
        delete a;
    }
    return rc;
}

// An answer or a notice; one the queue refuses for now is posted again from
// progress (probe_answers_retry).
void send_control(efa_ctx *ctx, fi_addr_t to, uint64_t tag) {
    efa_core *core = ctx->core;
    ssize_t rc = post_answer(ctx, to, tag);
    if (rc == -FI_EAGAIN) {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        core->answers_due.push_back({ctx, to, tag});
        core->answers_pending.store(true, std::memory_order_relaxed);
    } else if (rc) {
        core->failures.report(core->rep,
                              tag & kRailOutBit ? "fi_tsendmsg (notice of a NIC taken out)"
                                                : "fi_tsendmsg (peer probe answer)",
                              static_cast<int>(rc));
    }
}

} // namespace

void probe_send_answer(efa_ctx *ctx, fi_addr_t to) {
    send_control(ctx, to, kProbeTag | kAnswerBit | ctx->core->probe_id);
}

void probe_send_rail_out(efa_ctx *ctx, fi_addr_t to, int rail) {
    send_control(ctx, to,
                 kProbeTag | kRailOutBit | (static_cast<uint64_t>(rail & 3) << kRailOutRailShift) |
                     (ctx->core->probe_id & kRailOutIdMask));
}

ssize_t probe_post_ping(efa_ctx *ctx, fi_addr_t addr, void *context) {
    return post_empty(ctx, addr, kProbeTag | ctx->core->probe_id,
                      FI_COMPLETION | FI_DELIVERY_COMPLETE, context);
}

void probe_answers_retry(efa_core *core) {
    std::vector<ControlDue> due;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        due.swap(core->answers_due);
        core->answers_pending.store(false, std::memory_order_relaxed);
    }
    for (const ControlDue &d : due) {
        send_control(d.ctx, d.to, d.tag);
    }
}

void probe_sends_close(efa_core *core) {
    core->answers_due.clear();
    for (void *p : core->answers_out) {
        auto *a = static_cast<Answer *>(p);
        if (core->rail_lost_any[a->rail]) { // its endpoint stays open for the exit
            keep_for_exit(a);
        } else {
            delete a;
        }
    }
    core->answers_out.clear();
}

} // namespace efa
