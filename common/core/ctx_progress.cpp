// Progress of a context: drain its completion queue (a bounded batch, each
// completion dispatched through the efa_op_t it carries, with no lock
// held, so a callback may post or drive progress itself) and post what its
// backlogs hold.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "ctx_post.hpp"
#include "efa_core.h"
#include "efa_core_msg.h"
#include "efa_params.hpp"
#include "mr_cache.hpp"
#include "path_counts.hpp"

namespace efa::post {

__attribute__((noinline)) int post_failed(efa_ctx *ctx, const char *call, ssize_t rc) {
    ctx->core->failures.report(ctx->core->rep, call, static_cast<int>(rc));
    return static_cast<int>(rc);
}

} // namespace efa::post

namespace {
using namespace efa::post;

std::string to_hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(v));
    return buf;
}

// Post what a backlog holds, oldest first, until the provider (or the
// receive class's share of it) is full again.  A stand-in whose peer was
// declared dead since it was tracked is dropped, never posted: its owner
// heard it failed, and the buffer may be gone (core_deadline.cpp).  Out
// of line: progress calls it only when the backlog is non-empty.
__attribute__((noinline)) void flush_backlog_slow(efa_ctx *ctx, efa::Backlog &b) {
    std::vector<efa_op_t *> failed, dropped;
    std::vector<int> errors;
    std::vector<const char *> calls;
    bool held = false; // stopped at a refusal: reposting set, one more counted (undone below)
    {
        std::unique_lock<std::mutex> guard(b.lock, std::try_to_lock);
        if (!guard.owns_lock() || b.reposting.load(std::memory_order_acquire)) {
            return; // another thread is at it (or telling an owner of a refusal)
        }
        while (!b.ops.empty()) {
            efa::Deferred &d = b.ops.front();
            if (d.op && efa::deadline_dropped(d.op)) {
                dropped.push_back(d.op);
                b.ops.pop_front();
                b.size.fetch_sub(1, std::memory_order_release);
                continue;
            }
            if (d.holds_slot && !take_slot(ctx, d.op)) {
                // Peeks and claimed receives take no slot and keep no order
                // with internal receives: they go past one that waits for a
                // slot (an acknowledgement's, which may wait on the very
                // peer a probe spins for).  User receives keep their order.
                if (&b == &ctx->rx_internal_backlog) {
                    for (auto it = b.ops.begin() + 1; it != b.ops.end();) {
                        if (it->holds_slot || (it->op && efa::deadline_dropped(it->op))) {
                            ++it;
                            continue;
                        }
                        const ssize_t rc = it->post();
                        if (queue_full(rc)) {
                            break;
                        }
                        if (rc != 0) {
                            failed.push_back(it->op);
                            errors.push_back(static_cast<int>(rc));
                            calls.push_back(it->call);
                        }
                        it = b.ops.erase(it);
                        b.size.fetch_sub(1, std::memory_order_release);
                    }
                }
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
                if (op) {
                    // (what its owner posts instead goes first: RepostInPlace;
                    // meanwhile the backlog counts one more, so that posts
                    // from other threads, which go straight to the provider
                    // when it looks empty, queue behind it)
                    b.size.fetch_add(1, std::memory_order_seq_cst);
                    b.reposting.store(true, std::memory_order_release);
                    held = true;
                    break;
                }
            }
        }
    }
    efa_core *core = ctx->core;
    for (size_t i = 0; i < failed.size(); ++i) {
        core->failures.report(core->rep, std::string(calls[i]) + " (deferred)", errors[i]);
        // An owner that takes the error as the provider refusing its
        // device buffer, and goes through the host instead, says so
        // (efa::post::refusal_taken, in this thread): no failure to tell
        // the user of.
        bool taken = false;
        if (failed[i]) { // an inject has no operation to fail
            efa::inflight_done(ctx, failed[i]);
            efa_cqe_t cqe{errors[i], 0, 0, 0, 0, 0, FI_ADDR_NOTAVAIL, true, false};
            (void)efa::post::take_refusal_taken();
            {
                const efa::post::RepostInPlace in_place(&b);
                failed[i]->complete(failed[i], &cqe);
            }
            taken = efa::post::take_refusal_taken();
        }
        static std::atomic<int> reported{0};
        if (!taken && reported.fetch_add(1) < 8) {
            core->rep.say(0, std::string("deferred post failed: ") + fi_strerror(-errors[i]));
        }
    }
    if (held) { // (the flush stopped at the refusal: see above)
        b.reposting.store(false, std::memory_order_release);
        b.size.fetch_sub(1, std::memory_order_release);
    }
    for (efa_op_t *op : dropped) { // back to the deadline, which tells the owner if need be
        efa::inflight_done(ctx, op);
        efa_cqe_t cqe{-FI_ECANCELED, 0, 0, 0, 0, 0, FI_ADDR_NOTAVAIL, false, false};
        op->complete(op, &cqe);
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
    efa_cqe_t cqe{}; // (unposted false: the provider had it)
    cqe.err = -err.err;
    cqe.flags = err.flags;
    cqe.tag = err.tag;
    cqe.data = err.data;
    cqe.len = err.len;
    cqe.olen = err.olen;
    cqe.src = FI_ADDR_NOTAVAIL; // (FI_SOURCE_ERR is not asked for)
    op->complete(op, &cqe);
}

// A queue without tags (a provider without FI_TAGGED: efa-direct) hands
// back fi_cq_data_entry, a tagged entry less its tag: its n entries, read
// into the front of the tagged array, are spread to the tagged stride with
// a zero tag, from the last (each moves to where it or a later one was).
// Out of line, and only where completions came: an empty poll of a tagged
// queue pays nothing for it.
__attribute__((noinline)) void widen_untagged(fi_cq_tagged_entry *entries, ssize_t n) {
    static_assert(sizeof(fi_cq_data_entry) <= sizeof(fi_cq_tagged_entry));
    auto *packed = reinterpret_cast<unsigned char *>(entries);
    for (ssize_t i = n - 1; i >= 0; --i) {
        fi_cq_data_entry e;
        std::memcpy(&e, packed + static_cast<size_t>(i) * sizeof(e), sizeof(e));
        fi_cq_tagged_entry t{};
        t.op_context = e.op_context;
        t.flags = e.flags;
        t.len = e.len;
        t.buf = e.buf;
        t.data = e.data;
        t.tag = 0;
        entries[i] = t;
    }
}

__attribute__((always_inline)) inline int drain(efa_ctx *ctx, int batch) {
    // validate_params keeps batch within 1..kMaxProgressBatch (refused otherwise).
    fi_cq_tagged_entry entries[efa::ParamLimits::kMaxProgressBatch];
    // With FI_SOURCE each completion comes with its sender's AV entry
    // (receives only; FI_ADDR_NOTAVAIL for a sender not in the AV), which
    // owners check claimed senders against (core_source.cpp).
    fi_addr_t srcs[efa::ParamLimits::kMaxProgressBatch];
    const bool source = ctx->source;
    ssize_t n = source ? fi_cq_readfrom(ctx->cq, entries, static_cast<size_t>(batch), srcs)
                       : fi_cq_read(ctx->cq, entries, static_cast<size_t>(batch));
    if (n > 0) {
        if (__builtin_expect(!ctx->tagged_cq, 0)) {
            widen_untagged(entries, n);
        }
        efa::counts::add_to(ctx->completions, static_cast<uint64_t>(n), ctx->mt);
        for (ssize_t i = 0; i < n; ++i) {
            auto *op = static_cast<efa_op_t *>(entries[i].op_context);
            if (!op) {
                continue;
            }
            release_slot(ctx, op);
            efa::inflight_done(ctx, op);
            if ((entries[i].flags & FI_RECV) && !op->peek) { // a peek only looked
                efa::counts::add_msg(efa::counts::kProviderRecvs, entries[i].len);
            }
            fi_addr_t src = FI_ADDR_NOTAVAIL;
            if (source && (entries[i].flags & FI_RECV)) {
                src = srcs[i];
                if (__builtin_expect(src == FI_ADDR_NOTAVAIL, 0)) {
                    efa::source_unchecked(ctx->core);
                }
            }
            efa_cqe_t cqe{0,
                          entries[i].flags,
                          entries[i].tag,
                          entries[i].data,
                          entries[i].len,
                          0,
                          src,
                          false,
                          false};
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

// A relaxed load and store, not a locked increment: the count only paces
// the deadline's checks (and the idle rails' polls).
inline uint32_t bump(std::atomic<uint32_t> &c) {
    const uint32_t v = c.load(std::memory_order_relaxed) + 1;
    c.store(v, std::memory_order_relaxed);
    return v;
}

// Are the rails polled in this call?  They complete only what this process
// posted on them: on every call while some of it is in flight.  Otherwise
// every kRailIdleEvery-th call: peers' reads of this process's memory over
// a rail need its progress on providers that serve RMA in software
// (tcp;ofi_rxm, efa's emulated operations), but not at the cost of a poll
// of each idle rail in every call (0.3 to 0.5 us on the stand-ins: a 1 B
// round trip between nodes was 5 to 10% slower with a second NIC).
// A message that came in on a rail (own matching's, to some peers) keeps
// them polled on every call for kRailMsgWarmCalls calls.
// Until anything has used the rails (efa_core.rails_used: no message came
// in on one, nothing was posted on one, no memory was registered for
// peers' access), a rail poll is a peer's first message or connection
// there, and one in kRailColdEvery calls finds it: a process whose peers
// all take the first NIC (one peer: a pingpong's 1 B round trip between
// nodes was 3 to 8% slower with a second link at one in 8) pays next to
// nothing for the others.
constexpr uint32_t kRailIdleEvery = 8;
constexpr uint32_t kRailColdEvery = 64;
inline bool rails_due(efa_core *core, int n) {
    if (const uint32_t warm = core->rail_msg_warm.load(std::memory_order_relaxed)) {
        core->rail_msg_warm.store(warm - 1, std::memory_order_relaxed);
        return true;
    }
    for (const auto &rail : core->rails) {
        for (int i = 0; i < n; ++i) {
            const efa_ctx *ctx = rail->ctx(i);
            if (ctx->inflight.load(std::memory_order_relaxed) != 0 ||
                ctx->tx_backlog.size.load(std::memory_order_relaxed) != 0) {
                efa::note_rails_used(core);
                return true;
            }
        }
    }
    const uint32_t every =
        core->rails_used.load(std::memory_order_relaxed) ? kRailIdleEvery : kRailColdEvery;
    return bump(core->rail_idle_calls) % every == 0;
}
} // namespace

extern "C" int efa_core_progress(efa_core_t *core) {
    int events = 0;
    const int n = core->nic->num_contexts();
    for (int i = 0; i < n; ++i) {
        efa_ctx *ctx = core->nic->ctx(i);
        events += drain(ctx, core->progress_batch);
        flush_backlog(ctx, ctx->tx_backlog);
        flush_backlog(ctx, ctx->rx_internal_backlog);
        flush_backlog(ctx, ctx->rx_backlog);
    }
    if (!core->rails.empty() && rails_due(core, n)) {
        for (const auto &rail : core->rails) {
            for (int i = 0; i < n; ++i) {
                efa_ctx *ctx = rail->ctx(i);
                events += drain(ctx, core->progress_batch);
                flush_backlog(ctx, ctx->tx_backlog);
                flush_backlog(ctx, ctx->rx_internal_backlog); // (parked standing receives)
            }
        }
    }
    // Untagged receive buffers that found the queue full are posted again
    // here, whichever component owns a channel (a load when there are none).
    if (core->msg_progress) {
        core->msg_progress(core);
    }
    if (core->mr_cache) {
        core->mr_cache->apply_invalidations(); // memory freed since: deregistered here
    }
    // The deadline's clock is read when a call found nothing (a wait), or
    // every 64th busy call (a peer may be silent while others keep this
    // process busy), so the fast path stays a counter.
    if (core->deadline_on && (events == 0 || (bump(core->busy_calls) & 63) == 0)) {
        efa::deadline_tick(core);
    }
    if (core->answers_pending.load(std::memory_order_relaxed)) {
        efa::probe_answers_retry(core); // whatever this process's deadline: peers may probe it
    }
    if (core->rail_outs_pending.load(std::memory_order_relaxed)) {
        efa::rail_outs_take(core); // a peer's notice (core_rails.cpp), whatever the deadline
    }
    return events;
}
