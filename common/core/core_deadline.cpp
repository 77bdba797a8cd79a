// The peer deadline in the post and completion paths (the rules are in
// peer_deadline.hpp).
//
// An operation the deadline fails is still the provider's: it may hand its
// context back later, or never.  So the provider never holds the owner's
// efa_op_t while the deadline is on: it holds a stand-in (Tracked) that the
// core allocates and frees only when the provider returns it.  A stand-in
// whose owner was already failed completes into nothing.
//
// Failing an operation must not leave the provider free to touch the
// owner's buffer after the owner heard of it (the MTL releases the
// registration, the application may free the memory):
//  - a stand-in still waiting in a context's backlog never reached the
//    provider: it leaves the backlog before its owner is told, and one
//    that joins a backlog later (posted by another thread as the peer was
//    declared dead) is dropped by the flush (deadline_dropped);
//  - a receive the provider holds is cancelled, and its owner is told only
//    when the provider hands it back (the cancel's completion, or the
//    receive's own if it matched first), since until then the provider
//    may still write into the buffer.  A provider that keeps it (a receive
//    matched to a message whose sender died midway) is given a further
//    peer_timeout; then the owner is told anyway, and said so, so that a
//    job is never held for ever by a lost peer.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <ctime>
#include <new>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "ctx_post.hpp"
#include "deadline_tracked.hpp"
#include "efa_path_error.h"

namespace efa {

namespace {

// Provider errors that say the peer is unreachable: the deadline's verdict, at once.
bool unreachable(int err) {
    return efa_path_error(err);
}

// deadline_lock is held.
void unhold(efa_core *core, Tracked *t) {
    auto &v = core->held_recvs;
    v.erase(std::remove(v.begin(), v.end(), static_cast<void *>(t)), v.end());
    t->held_err = 0;
}

// A probe's send that failed for a reason of this side, not the path's
// (that declares the path lost in tracked_complete), is no news of the
// peer: it stays tracked, so that the peer still expires a deadline after
// its last news, and the next tick posts it again (repost_probes): counted
// as news, a peer whose probes kept failing so would never be declared lost.
bool probe_failed_here(efa_core *core, Tracked *t, int err) {
    if (0 == err || -FI_ECANCELED == err || unreachable(err)) {
        return false;
    }
    if (t->ctx->rail && core->params.rail_failover) {
        return false; // any failure on a rail takes that rail out (tracked_complete)
    }
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        if (t->in_free_list.load(std::memory_order_acquire) || t->owner != &g_probe_owner ||
            !t->entry.peer) {
            return false; // (its peer declared dead meanwhile: the usual way frees it)
        }
        core->probes_unposted.push_back(t);
    }
    core->failures.report(core->rep, "peer probe (its completion)", err);
    return true;
}

} // namespace

// Everything about t is read under deadline_lock: a stand-in handed back
// by another thread meanwhile may be another operation's already.  The
// owner's tracker is cleared under it too, before t is handed back, so
// that efa_ctx_cancel never cancels t once it is another operation's.
void tracked_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *t = reinterpret_cast<Tracked *>(op);
    efa_core *core = t->ctx->core; // (every stand-in of a core stays its own)
    if (probe_failed_here(core, t, cqe->err)) {
        return;
    }
    efa_op_t *owner;
    fi_addr_t peer;
    uint64_t flags;
    bool mine;
    int held_err = 0;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        if (t->in_free_list.load(std::memory_order_acquire)) {
            stale_completion(core, cqe); // handed back twice
            return;
        }
        if (t->owner == &g_probe_owner && probe_sent(core, t, cqe->err)) {
            return;
        }
        owner = t->owner;
        peer = t->peer;
        if (owner == &g_probe_owner && t->ctx->rail) {
            // A probe over the peer's home rail (the first is out for it):
            // a failure there is that rail's, not the first's.
            peer = rail_key(peer, t->ctx->rail);
        }
        flags = t->flags;
        mine = core->deadline.completed(&t->entry, now_ms());
        if (!mine) {
            core->orphans.erase(t);
            held_err = t->held_err; // a failed receive whose owner waited for this
            if (held_err) {
                unhold(core, t);
            }
        }
        if (mine || held_err) {
            owner->tracker = nullptr; // (an owner told already may be gone)
        }
        give_tracked(core, t); // the provider is done with it
    }
    const int err = cqe->err;
    if (mine) {
        owner->complete(owner, cqe);
    } else if (held_err) {
        // A receive that completed whole is what it is; anything else
        // (its cancel, above all) fails with the peer's loss.
        efa_cqe_t c = *cqe;
        if (c.err) {
            c = efa_cqe_t{held_err, flags, 0, 0, 0, 0, FI_ADDR_NOTAVAIL, false, false};
        }
        owner->complete(owner, &c);
    }
    if (mine && err && unreachable(err)) {
        path_lost(core, peer, err, "the provider reported it unreachable");
    } else if (mine && err && err != -FI_ECANCELED && key_rail(peer) &&
               core->params.rail_failover && !(cqe->unposted && refuses_memory(err))) {
        // Any failure on a rail beside the first takes that rail out for
        // the peer: its owner sends the operation again over another.
        // (Not a post that never reached the provider, refused for its
        // memory: the owner copies that through the host.)
        efa_core_peer_lost(core, peer, err, "an operation on it failed");
    }
}

bool tracked_stands_for(const efa_op_t *tracked, const efa_op_t *owner) {
    const auto *t = reinterpret_cast<const Tracked *>(tracked);
    return tracked->complete == tracked_complete && t->owner == owner &&
           !t->in_free_list.load(std::memory_order_acquire);
}

bool deadline_dropped(const efa_op_t *op) {
    return op->complete == tracked_complete &&
           reinterpret_cast<const Tracked *>(op)->failed.load(std::memory_order_acquire);
}

namespace {

// The receives a lost peer's provider still holds after their grace
// (held_until): their owners are told now.  The provider may still write
// into such a buffer if the message ever comes: said once, with the count.
void release_held(efa_core *core, uint64_t now) {
    std::vector<std::pair<efa_op_t *, efa_cqe_t>> late;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        for (size_t i = 0; i < core->held_recvs.size();) {
            auto *t = static_cast<Tracked *>(core->held_recvs[i]);
            if (now < t->held_until) {
                ++i;
                continue;
            }
            late.push_back({t->owner, efa_cqe_t{t->held_err, t->flags, 0, 0, 0, 0, FI_ADDR_NOTAVAIL,
                                                false, true}});
            t->owner->tracker = nullptr; // (under the lock: efa_ctx_cancel reads it there)
            unhold(core, t);             // its hand-back, if any, now only frees it
        }
    }
    if (late.empty()) {
        return;
    }
    static std::atomic<bool> said{false};
    const int level = said.exchange(true) ? 10 : 0;
    core->rep.say(level, "peer deadline: the provider still holds " + std::to_string(late.size()) +
                             " receive(s) of a lost peer after their cancel; they fail now, "
                             "and their buffers may still be written if the message comes");
    for (auto &l : late) {
        l.first->complete(l.first, &l.second);
    }
}

void post_probe(efa_core *core, Tracked *t);

// A probe (core_probe.cpp), tracked like a send; tagged, it is news only
// when its answer arrives (probes_out), not when its send completes.
void send_probe(efa_core *core, fi_addr_t addr) {
    core->rep.say(20, "peer deadline: probing address " + std::to_string(addr));
    efa_ctx *ctx = core->nic->ctx(0);
    if (rail0_out(core, addr)) { // over the peer's home rail (post_probe)
        std::lock_guard<std::mutex> guard(core->peers_lock);
        const auto it = core->addr_owner.find(addr);
        const int home = it != core->addr_owner.end() ? home_rail(it->second) : -1;
        if (home <= 0) {
            return; // no rail left: the deadline ends the wait
        }
        ctx = core->rails[static_cast<size_t>(home) - 1]->ctx(0);
    }
    const bool tagged = core->info.has_tagged;
    const uint64_t kind = tagged ? FI_SEND | FI_TAGGED : FI_SEND | FI_MSG;
    Tracked *t;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        t = take_tracked(core, &g_probe_owner, ctx, addr, kind);
        if (!t) {
            return; // the next check asks again
        }
        t->op.complete = tracked_complete;
        if (!core->deadline.posted(addr, &t->entry, PeerDeadline::Kind::Send, now_ms())) {
            give_tracked(core, t);
            return;
        }
        if (tagged) {
            core->probes_out[addr] = t;
        }
    }
    post_probe(core, t);
}

// A probe that goes without ever reaching the provider again; under
// deadline_lock.
void drop_probe_locked(efa_core *core, Tracked *t) {
    const auto it = core->probes_out.find(t->peer);
    if (it != core->probes_out.end() && it->second == t) {
        core->probes_out.erase(it);
    }
    core->deadline.forget(&t->entry);
    core->orphans.erase(t); // (among them if its peer was declared dead meanwhile)
    give_tracked(core, t);
}

// Post a tracked probe.  One the provider refuses stays tracked as a send,
// so that the peer still expires a deadline after its last news, and the
// next tick posts it again: for now (-FI_EAGAIN: a full queue, or
// tcp;ofi_rxm's connection to the peer not up yet, which a peer that
// vanished before it was never lets it be), or for any other reason, said
// once (dropped, a peer no probe could be posted to would never be declared
// lost); a path's error declares that path lost at once.
void post_probe(efa_core *core, Tracked *t) {
    // On the home rail (the first out for the peer), to the peer's
    // address there: the peer's rail contexts answer pings over the rail
    // they came by (rail_ping_received), and the answer is news of the
    // process (rail_answer_received).
    fi_addr_t to = FI_ADDR_NOTAVAIL;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        const auto it = core->addr_owner.find(t->peer);
        if (it != core->addr_owner.end()) {
            to = t->ctx->rail
                     ? it->second->addr[static_cast<size_t>(t->ctx->rail) * it->second->num_addrs]
                     : t->peer;
        }
    }
    if (to == FI_ADDR_NOTAVAIL) {
        // The peer was released since the probe was made (its address may
        // name another process next): nobody waits on it any more, so
        // nothing is said and the probe goes.
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        drop_probe_locked(core, t);
        return;
    }
    const int rc = static_cast<int>(probe_post_ping(t->ctx, to, &t->op.fi_ctx));
    if (0 == rc) {
        return;
    }
    if (-FI_EAGAIN != rc) {
        core->failures.report(
            core->rep,
            core->info.has_tagged ? "fi_tsendmsg (peer probe)" : "fi_sendmsg (peer probe)", rc);
    }
    const int rail = t->ctx->rail;
    const fi_addr_t key = rail ? rail_key(t->peer, rail) : t->peer;
    const bool path = unreachable(rc);
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        if (rail && path) {
            // That rail goes out for the peer (below), and with it this
            // probe: the next check asks over the peer's next rail.
            drop_probe_locked(core, t);
        } else {
            core->probes_unposted.push_back(t); // (its peer declared dead meanwhile: freed there)
        }
    }
    if (path) {
        path_lost(core, key, rc, "a probe to it could not be posted");
    }
}

// The probes the provider refused, posted again (those whose peer was
// declared dead meanwhile are done: the provider never had them).
void repost_probes(efa_core *core) {
    std::vector<void *> again;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        if (core->probes_unposted.empty()) {
            return;
        }
        for (void *p : core->probes_unposted) {
            auto *t = static_cast<Tracked *>(p);
            if (t->entry.peer) {
                again.push_back(t);
            } else {
                core->orphans.erase(t);
                give_tracked(core, t);
            }
        }
        core->probes_unposted.clear();
    }
    for (void *p : again) {
        post_probe(core, static_cast<Tracked *>(p));
    }
}

} // namespace

void deadline_open(efa_core *core) {
    const int secs = core->params.peer_timeout;
    core->deadline_on = secs > 0;
    core->deadline = PeerDeadline(static_cast<uint64_t>(secs > 0 ? secs : 0) * 1000);
    probe_open(core); // whatever this process's own setting: a peer may probe it
}

void deadline_close(efa_core *core) {
    probe_close(core);
    rail_back_close(core);
    // The endpoints are closed: nothing hands these back any more.
    for (PeerDeadline::Entry *e : core->deadline.release_all()) {
        delete tracked_of(e);
    }
    for (const void *p : core->orphans) {
        delete static_cast<const Tracked *>(p);
    }
    core->orphans.clear();
    // Their owners are not told: nothing is left to hear it at close.
    core->held_recvs.clear();      // each an orphan: freed above
    core->probes_unposted.clear(); // each is tracked or an orphan: freed above
    for (void *p : core->deadline_free) {
        delete static_cast<Tracked *>(p);
    }
    core->deadline_free.clear();
}

// What the deadline tracks an operation under: the peer's rail-0 address,
// or for another rail that address with the rail in the top byte, so that
// a rail that stops completing expires alone (rail_lost) while the peer's
// messages go on (peers_lock, taken and left before deadline_lock).
static fi_addr_t deadline_key(efa_ctx *ctx, fi_addr_t addr) {
    if (ctx->rail == 0) {
        return addr;
    }
    std::lock_guard<std::mutex> guard(ctx->core->peers_lock);
    const auto &m = ctx->core->rail_primary[ctx->rail];
    const auto it = m.find(addr);
    // (a peer already released: no key of any peer's, so not tracked)
    return it == m.end() ? FI_ADDR_NOTAVAIL : rail_key(it->second, ctx->rail);
}

efa_op_t *deadline_track(efa_ctx *ctx, fi_addr_t peer, efa_op_t *op, PeerDeadline::Kind kind,
                         uint64_t flags, int *err) {
    op->tracker = nullptr;
    efa_core *core = ctx->core;
    if (!core->deadline_on) {
        return op;
    }
    peer = deadline_key(ctx, peer);
    if (ctx->rail && peer == FI_ADDR_NOTAVAIL) {
        return op; // a rail's address of no peer known here: nothing to track it by
    }
    if (0 == ctx->rail && flags && rail0_out(core, peer)) {
        *err = -FI_EHOSTUNREACH; // the first rail is out for it: its owner goes by another
        return nullptr;
    }
    Tracked *t;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        t = take_tracked(core, op, ctx, peer, flags);
        if (!t) {
            *err = -FI_ENOMEM;
            return nullptr;
        }
        t->op.complete = tracked_complete;
        t->op.rx_class = op->rx_class;
        if (!core->deadline.posted(peer, &t->entry, kind, now_ms())) {
            give_tracked(core, t);
            *err = -FI_EHOSTUNREACH;
            return nullptr;
        }
    }
    op->tracker = &t->op;
    return &t->op;
}

bool deadline_untrack(efa_ctx *ctx, efa_op_t *tracked, efa_op_t *op) {
    if (tracked == op) {
        return false;
    }
    auto *t = reinterpret_cast<Tracked *>(tracked);
    efa_core *core = ctx->core;
    bool told = false;
    std::lock_guard<std::mutex> guard(core->deadline_lock);
    if (t->failed.load(std::memory_order_acquire)) {
        // The peer was declared lost between the tracking and the post
        // (fail_tracked): an orphan now, which the provider never got.  A
        // receive waited for the provider to hand it back, which it never
        // will: its owner hears of this failed post instead.  Anything else
        // had its owner told (tell_failed).
        core->orphans.erase(t);
        if (t->held_err) {
            unhold(core, t);
        } else {
            told = true;
        }
    } else {
        core->deadline.forget(&t->entry);
    }
    give_tracked(core, t);
    op->tracker = nullptr;
    return told;
}

// The peer was declared lost between the tracking and the post of a
// receive (fail_tracked found it in neither the provider nor a backlog:
// its cancel found nothing): cancelled now, so that the provider hands it
// back and its owner hears at once, not after a further peer_timeout
// (release_held) with the provider still free to write into the buffer.
// Under the lock: a stand-in handed back meanwhile may be another's.
void deadline_posted(efa_ctx *ctx, efa_op_t *tracked, efa_op_t *op) {
    auto *t = reinterpret_cast<Tracked *>(tracked);
    if (tracked == op || !t->failed.load(std::memory_order_acquire)) {
        return;
    }
    std::lock_guard<std::mutex> guard(ctx->core->deadline_lock);
    if (!t->in_free_list.load(std::memory_order_acquire) && t->held_err) {
        (void)fi_cancel(&t->ctx->ep->fid, &t->op.fi_ctx);
    }
}

bool deadline_refuses(efa_ctx *ctx, fi_addr_t peer) {
    efa_core *core = ctx->core;
    // No lock until some peer died: an inject per message would pay for it.
    if (!core->deadline_on || !core->deadline_any_dead.load(std::memory_order_relaxed)) {
        return false;
    }
    peer = deadline_key(ctx, peer);
    if (0 == ctx->rail && rail0_out(core, peer)) {
        return true;
    }
    std::lock_guard<std::mutex> guard(core->deadline_lock);
    return (0 == ctx->rail || peer != FI_ADDR_NOTAVAIL) && core->deadline.dead(peer);
}

void rail_outs_take(efa_core *core) {
    std::vector<fi_addr_t> due;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        due.swap(core->rail_outs_due);
        core->rail_outs_pending.store(false, std::memory_order_relaxed);
    }
    for (fi_addr_t key : due) {
        path_lost(core, key, -FI_EHOSTUNREACH,
                  "the peer took its NIC on this path out (and told this process)");
    }
}

void deadline_tick(efa_core *core) {
    const uint64_t now = now_ms();
    note_progress_gap(core, now);
    if (now < core->deadline_next_ms.load(std::memory_order_relaxed)) {
        return;
    }
    PeerDeadline::Verdict v;
    std::vector<efa_core::DeadlineTick> ticks;
    bool due;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        if (now < core->deadline_next_ms.load(std::memory_order_relaxed)) {
            return; // another thread ticked meanwhile
        }
        core->deadline_next_ms.store(now + 1000, std::memory_order_relaxed);
        ticks = core->deadline_ticks;
        const uint64_t away = core->away_ms.load(std::memory_order_relaxed);
        core->deadline.away(away - core->deadline_away_taken, now);
        core->deadline_away_taken = away;
        due = core->deadline.due(now);
        if (due) {
            v = core->deadline.check(now);
        }
    }
    for (const efa_core::DeadlineTick &t : ticks) {
        t.fn(t.arg); // may start or end watches: no lock held
    }
    release_held(core, now);
    repost_probes(core);
    if (core->rail_retry_on.load(std::memory_order_relaxed)) {
        rail_back_tick(core, now);
    }
    if (!due) {
        return;
    }
    for (fi_addr_t a : v.probe) {
        send_probe(core, a);
    }
    const std::string why = "nothing completed with it for " +
                            std::to_string(core->params.peer_timeout) +
                            " s (common_efa_peer_timeout)";
    // A peer's other rails before its first: one that expires in the same
    // check hands its work to the first rail and restarts its clock (the
    // touch in efa_core_peer_lost: the first's wait can be the dead rail's,
    // a stream's parts held behind the one it carried).  The first's key is
    // then asked again, not declared dead on a verdict the touch made stale.
    std::stable_partition(v.expired.begin(), v.expired.end(),
                          [](uint64_t a) { return key_rail(a) != 0; });
    for (fi_addr_t a : v.expired) {
        if (!key_rail(a)) {
            std::lock_guard<std::mutex> guard(core->deadline_lock);
            if (!core->deadline.expired(a, now_ms())) {
                continue;
            }
        }
        path_lost(core, a, -FI_ETIMEDOUT, why.c_str());
    }
}

} // namespace efa

extern "C" void efa_core_peer_set_name(efa_core_t *core, efa_peer_t *peer, const char *name) {
    std::lock_guard<std::mutex> guard(core->peers_lock);
    core->peer_names[peer] = name ? name : "";
}

extern "C" int efa_core_peer_timeout(const efa_core_t *core) {
    return core->params.peer_timeout;
}

// A watch is a stand-in the provider never sees, tracked as a receive:
// flags 0, so that declaring the peer dead does not cancel it at the
// provider.
extern "C" int efa_core_add_deadline_tick(efa_core_t *core, void (*fn)(void *arg), void *arg) {
    std::lock_guard<std::mutex> guard(core->deadline_lock);
    try {
        core->deadline_ticks.push_back({fn, arg});
    } catch (const std::bad_alloc &) {
        return -FI_ENOMEM;
    }
    return 0;
}

extern "C" void efa_core_remove_deadline_tick(efa_core_t *core, void (*fn)(void *arg), void *arg) {
    std::lock_guard<std::mutex> guard(core->deadline_lock);
    auto &v = core->deadline_ticks;
    v.erase(
        std::remove_if(v.begin(), v.end(),
                       [&](const efa_core::DeadlineTick &t) { return t.fn == fn && t.arg == arg; }),
        v.end());
}

extern "C" int efa_core_addr_watch(efa_core_t *core, efa_ctx_t *ctx, fi_addr_t addr,
                                   efa_op_t *watch) {
    (void)core;
    int err = 0;
    efa_op_t *t = efa::deadline_track(ctx, addr, watch, efa::PeerDeadline::Kind::Recv, 0, &err);
    return t ? 0 : err;
}

extern "C" int efa_core_peer_watch(efa_core_t *core, efa_peer_t *peer, efa_op_t *watch) {
    return efa_core_addr_watch(core, core->nic->ctx(0), peer->addr[0], watch);
}

extern "C" bool efa_core_peer_unwatch(efa_core_t *core, efa_op_t *watch) {
    auto *t = reinterpret_cast<efa::Tracked *>(watch->tracker);
    if (!t) {
        return true;
    }
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        if (core->orphans.count(t)) {
            return false; // declared dead meanwhile: its call is due, the close frees it
        }
        core->deadline.forget(&t->entry);
        give_tracked(core, t);
    }
    watch->tracker = nullptr;
    return true;
}
