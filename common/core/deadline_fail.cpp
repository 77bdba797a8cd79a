// Failing tracked operations: what efa_core_peer_lost (a peer) and
// rail0_lost (its first rail) share (core_deadline.cpp, core_rail0.cpp).
//
// An operation failed here may still be the provider's (deadline_tracked.hpp):
// one still in a backlog leaves it and its owner is told at once; a
// receive the provider holds is cancelled, its owner told when the
// provider hands it back (or after a further peer_timeout); the others
// become orphans, freed when the provider returns them.
#include <algorithm>
#include <string>
#include <unordered_set>
#include <vector>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "ctx_post.hpp"
#include "deadline_tracked.hpp"

namespace efa {

// Every address of the process 'addr' belongs to (one per context), and
// its name.
std::vector<fi_addr_t> same_process(efa_core *core, fi_addr_t addr, std::string *name) {
    std::lock_guard<std::mutex> guard(core->peers_lock);
    for (auto &kv : core->peer_index) {
        efa_peer_t *p = kv.first;
        for (int i = 0; i < p->num_addrs; ++i) {
            if (p->addr[i] == addr) {
                auto n = core->peer_names.find(p);
                if (n != core->peer_names.end()) {
                    *name = n->second;
                }
                return std::vector<fi_addr_t>(p->addr, p->addr + p->num_addrs);
            }
        }
    }
    return {addr};
}

namespace {

// The stand-ins of 'failed' still waiting in their contexts' backlogs,
// taken out of them (deadline_lock is held: the backlogs' locks nest in
// it, never the other way round).
std::unordered_set<const efa_op_t *> take_unposted(const std::vector<Tracked *> &failed) {
    std::vector<efa_op_t *> taken;
    std::vector<efa_ctx *> ctxs;
    std::unordered_set<const efa_op_t *> mine;
    for (Tracked *t : failed) {
        mine.insert(&t->op);
        if (std::find(ctxs.begin(), ctxs.end(), t->ctx) == ctxs.end()) {
            ctxs.push_back(t->ctx);
        }
    }
    for (efa_ctx *ctx : ctxs) {
        efa::post::take_waiting(
            ctx, [&](const efa_op_t *op) { return mine.count(op) != 0; }, &taken);
    }
    return {taken.begin(), taken.end()};
}

// An operation's owner about to be told of its failure no longer points
// at its stand-in: cleared under deadline_lock (held), where efa_ctx_cancel
// reads it.  A watch (flags 0) keeps pointing at its orphan, which lives
// until close: an unwatch racing with the call, or after it, then says the
// call is due (false) rather than that none will come.
void told(Tracked *t) {
    if (t->flags) {
        t->owner->tracker = nullptr;
    }
}

} // namespace

// The stand-ins in 'failed' (taken from the deadline, marked failed
// here) fail with err: those still in a backlog leave it and their owners
// are told at once (appended to 'tell'); a receive the provider holds is
// cancelled and its owner told when it comes back; the rest are orphans
// whose owners are told now.  deadline_lock is held.
void fail_tracked(efa_core *core, const std::vector<Tracked *> &failed, int err,
                  std::vector<FailedOp> *tell) {
    for (Tracked *t : failed) {
        t->failed.store(true, std::memory_order_release); // before the backlogs are read
    }
    const std::unordered_set<const efa_op_t *> unposted = take_unposted(failed);
    const uint64_t until = now_ms() + core->deadline.timeout_ms();
    for (Tracked *t : failed) {
        if (unposted.count(&t->op)) {
            efa::inflight_done(t->ctx, &t->op);
            told(t);
            tell->push_back(FailedOp{t->owner, t->flags, false});
            give_tracked(core, t); // nobody else ever had it
            continue;
        }
        core->orphans.insert(t);
        if (t->flags & FI_RECV) {
            // Under the lock: a stand-in handed back meanwhile could
            // be another operation's already, and that one cancelled.
            t->held_err = err ? err : -FI_EHOSTUNREACH; // (0 would read as not held)
            t->held_until = until;
            core->held_recvs.push_back(t);
            (void)fi_cancel(&t->ctx->ep->fid, &t->op.fi_ctx);
            continue;
        }
        told(t);
        tell->push_back(FailedOp{t->owner, t->flags, true});
    }
}

void tell_failed(const std::vector<FailedOp> &ops, int err) {
    for (const FailedOp &f : ops) {
        efa_cqe_t cqe{err, f.flags, 0, 0, 0, 0, FI_ADDR_NOTAVAIL, false, f.orphaned};
        f.owner->complete(f.owner, &cqe);
    }
}

} // namespace efa
