// The peer deadline in the post and completion paths (the rules are in
// peer_deadline.hpp).
//
// An operation the deadline fails is still the provider's: it may hand its
// context back later, or never.  So the provider never holds the owner's
// efa_op_t while the deadline is on: it holds a stand-in (Tracked) that the
// core allocates and frees only when the provider returns it.  A stand-in
// whose owner was already failed completes into nothing.  Receives failed
// this way are also cancelled, so that the provider lets go of the buffer.
#include <cstddef>
#include <ctime>
#include <new>
#include <string>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "core.hpp"

namespace efa {

namespace {

struct Tracked {
    efa_op_t op; // first: the provider hands back &op.fi_ctx
    PeerDeadline::Entry entry;
    efa_op_t *owner;
    efa_ctx *ctx;
    fi_addr_t peer;
    uint64_t flags; // what the failure completion says it was (FI_SEND, FI_RECV, ...)
};

Tracked *tracked_of(PeerDeadline::Entry *e) {
    return reinterpret_cast<Tracked *>(reinterpret_cast<char *>(e) - offsetof(Tracked, entry));
}

// A stand-in, recycled when one is free (core->deadline_free); nullptr
// when memory is out.  deadline_lock is held.
Tracked *take_tracked(efa_core *core, efa_op_t *owner, efa_ctx *ctx, fi_addr_t peer,
                      uint64_t flags) {
    Tracked *t;
    if (!core->deadline_free.empty()) {
        t = static_cast<Tracked *>(core->deadline_free.back());
        core->deadline_free.pop_back();
    } else if (!(t = new (std::nothrow) Tracked)) {
        return nullptr;
    }
    *t = Tracked{{}, {}, owner, ctx, peer, flags};
    return t;
}

// deadline_lock is held.
void give_tracked(efa_core *core, Tracked *t) {
    try {
        core->deadline_free.push_back(t);
    } catch (...) {
        delete t;
    }
}

// A coarse clock (a few ms of resolution, no system call): the deadline
// counts seconds.
uint64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

// Provider errors that say the peer cannot be reached any more: the same
// verdict as the deadline's, given at once.
bool unreachable(int err) {
    switch (-err) {
    case FI_EHOSTUNREACH:
    case FI_ETIMEDOUT:
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
        return true;
    default:
        return false;
    }
}

constexpr uint64_t kProbeTag = static_cast<uint64_t>(EFA_PROTO_PROBE) << 62;
constexpr uint64_t kProbeIgnore = (static_cast<uint64_t>(1) << 62) - 1;

// What a probe's stand-in completes into: the probe's only effect is on the
// deadline's clock.
efa_op_t g_probe_owner = {{}, efa_op_complete_nothing, EFA_RX_INTERNAL, 0, 0, nullptr};

void peer_dead(efa_core *core, fi_addr_t addr, int err, const std::string &why);

void tracked_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *t = reinterpret_cast<Tracked *>(op);
    efa_core *core = t->ctx->core;
    efa_op_t *owner = t->owner;
    const fi_addr_t peer = t->peer;
    bool mine;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        mine = core->deadline.completed(&t->entry, now_ms());
        if (!mine) {
            core->orphans.erase(t);
        }
        give_tracked(core, t); // the provider is done with it
    }
    const int err = cqe->err;
    if (mine) {
        owner->tracker = nullptr;
        owner->complete(owner, cqe);
    }
    if (mine && err && unreachable(err)) {
        peer_dead(core, peer, err, "the provider reported it unreachable");
    }
}

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

void peer_dead(efa_core *core, fi_addr_t addr, int err, const std::string &why) {
    std::string name;
    std::vector<fi_addr_t> addrs = same_process(core, addr, &name);
    if (name.empty()) {
        name = "address " + std::to_string(addr);
    }
    // What failing each operation needs, copied under the lock: once it is
    // released the provider may hand a stand-in back and it be reused.
    struct Failed {
        Tracked *t;
        efa_op_t *owner;
        fid_ep *ep;
        uint64_t flags;
    };
    std::vector<Failed> ops;
    bool first;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        core->deadline_any_dead.store(true, std::memory_order_relaxed);
        first = !core->deadline.dead(addr);
        for (fi_addr_t a : addrs) {
            for (PeerDeadline::Entry *e : core->deadline.declare_dead(a)) {
                Tracked *t = tracked_of(e);
                core->orphans.insert(t);
                ops.push_back(Failed{t, t->owner, t->ctx->ep, t->flags});
            }
        }
    }
    if (first) {
        core->rep.help("peer-unreachable", name, why, fi_strerror(-err));
    }
    for (const Failed &f : ops) {
        if (f.flags & FI_RECV) {
            // The provider keeps the stand-in until the cancel's completion.
            (void)fi_cancel(&f.ep->fid, &f.t->op.fi_ctx);
        }
        efa_cqe_t cqe{err, f.flags, 0, 0, 0, 0};
        f.owner->tracker = nullptr;
        f.owner->complete(f.owner, &cqe);
    }
}

// A zero-byte message asking for delivery completion: it completes only
// once the peer's provider has it, so it tells whether the peer answers
// (a plain send may complete as soon as a local socket takes it).  Tagged
// where the provider has tags (a receive of its own takes it); untagged
// without (the direct mode), where the peer's untagged receive pool takes
// it and drops it (core_msg.cpp: zero bytes are a probe).
ssize_t post_probe(efa_ctx *ctx, fi_addr_t addr, void *context) {
    // One empty buffer rather than none: ofi_rxd reads msg_iov[0] even
    // when iov_count is 0.
    static char nothing;
    iovec iov = {&nothing, 0};
    void *desc = nullptr;
    const uint64_t flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
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
    msg.tag = kProbeTag;
    msg.context = context;
    return fi_tsendmsg(ctx->ep, &msg, flags);
}

void send_probe(efa_core *core, fi_addr_t addr) {
    efa_ctx *ctx = core->nic->ctx(0);
    const uint64_t kind = core->info.has_tagged ? FI_SEND | FI_TAGGED : FI_SEND | FI_MSG;
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
    }
    ssize_t rc = post_probe(ctx, addr, &t->op.fi_ctx);
    if (rc) {
        // A full queue: the next check asks again.  Anything else: said once.
        if (rc != -FI_EAGAIN) {
            core->failures.report(core->rep, "fi_sendmsg (peer probe)", static_cast<int>(rc));
        }
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        core->deadline.forget(&t->entry);
        give_tracked(core, t);
    }
}

// The receive that takes the peers' probes, one per context, reposted as
// each completes.
struct ProbeRecv {
    efa_op_t op;
    efa_ctx *ctx;
};

int post_probe_recv(ProbeRecv *r) {
    return static_cast<int>(fi_trecv(r->ctx->ep, nullptr, 0, nullptr, FI_ADDR_UNSPEC, kProbeTag,
                                     kProbeIgnore, &r->op.fi_ctx));
}

void probe_recv_done(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *r = reinterpret_cast<ProbeRecv *>(op);
    if (cqe->err == -FI_ECANCELED) {
        return;
    }
    // A failed repost leaves later probes to the provider's unexpected
    // queue (the sender's probe still completes): said once.
    int rc = post_probe_recv(r);
    if (rc) {
        r->ctx->core->failures.report(r->ctx->core->rep, "fi_trecv (peer probe)", rc);
    }
}

} // namespace

void deadline_open(efa_core *core) {
    const int secs = core->params.peer_timeout;
    core->deadline_on = secs > 0;
    core->deadline = PeerDeadline(static_cast<uint64_t>(secs > 0 ? secs : 0) * 1000);
    // Posted whatever this process's own setting: a peer may probe it.
    // Without tags, probes arrive in the untagged receive pool instead.
    for (int i = 0; core->info.has_tagged && i < core->nic->num_contexts(); ++i) {
        auto *r = new ProbeRecv{{}, core->nic->ctx(i)};
        r->op.complete = probe_recv_done;
        r->op.rx_class = EFA_RX_INTERNAL;
        if (post_probe_recv(r)) {
            delete r;
            continue;
        }
        core->probe_recvs.push_back(&r->op);
    }
}

void deadline_close(efa_core *core) {
    for (efa_op_t *op : core->probe_recvs) {
        delete reinterpret_cast<ProbeRecv *>(op);
    }
    core->probe_recvs.clear();
    // The endpoints are closed: nothing hands these back any more.
    for (PeerDeadline::Entry *e : core->deadline.release_all()) {
        delete tracked_of(e);
    }
    for (const void *p : core->orphans) {
        delete static_cast<const Tracked *>(p);
    }
    core->orphans.clear();
    for (void *p : core->deadline_free) {
        delete static_cast<Tracked *>(p);
    }
    core->deadline_free.clear();
}

efa_op_t *deadline_track(efa_ctx *ctx, fi_addr_t peer, efa_op_t *op, PeerDeadline::Kind kind,
                         uint64_t flags, int *err) {
    op->tracker = nullptr;
    efa_core *core = ctx->core;
    if (!core->deadline_on) {
        return op;
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

void deadline_untrack(efa_ctx *ctx, efa_op_t *tracked, efa_op_t *op) {
    if (tracked == op) {
        return;
    }
    auto *t = reinterpret_cast<Tracked *>(tracked);
    {
        std::lock_guard<std::mutex> guard(ctx->core->deadline_lock);
        ctx->core->deadline.forget(&t->entry);
        give_tracked(ctx->core, t);
    }
    op->tracker = nullptr;
}

bool deadline_refuses(efa_ctx *ctx, fi_addr_t peer) {
    efa_core *core = ctx->core;
    // No lock until some peer died: an inject per message would pay for it.
    if (!core->deadline_on || !core->deadline_any_dead.load(std::memory_order_relaxed)) {
        return false;
    }
    std::lock_guard<std::mutex> guard(core->deadline_lock);
    return core->deadline.dead(peer);
}

void deadline_tick(efa_core *core) {
    const uint64_t now = now_ms();
    if (now < core->deadline_next_ms.load(std::memory_order_relaxed)) {
        return;
    }
    PeerDeadline::Verdict v;
    void (*tick)(void *) = nullptr;
    void *tick_arg = nullptr;
    bool due;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        if (now < core->deadline_next_ms.load(std::memory_order_relaxed)) {
            return; // another thread ticked meanwhile
        }
        core->deadline_next_ms.store(now + 1000, std::memory_order_relaxed);
        tick = core->deadline_tick_fn;
        tick_arg = core->deadline_tick_arg;
        due = core->deadline.due(now);
        if (due) {
            v = core->deadline.check(now);
        }
    }
    if (tick) {
        tick(tick_arg); // may start or end watches: no lock held
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
    for (fi_addr_t a : v.expired) {
        peer_dead(core, a, -FI_ETIMEDOUT, why);
    }
}

} // namespace efa

extern "C" void efa_core_peer_set_name(efa_core_t *core, efa_peer_t *peer, const char *name) {
    std::lock_guard<std::mutex> guard(core->peers_lock);
    core->peer_names[peer] = name ? name : "";
}

extern "C" void efa_core_peer_lost(efa_core_t *core, fi_addr_t addr, int err, const char *why) {
    efa::peer_dead(core, addr, err, why ? why : "");
}

extern "C" int efa_core_peer_timeout(const efa_core_t *core) {
    return core->params.peer_timeout;
}

// A watch is a stand-in the provider never sees, tracked as a receive:
// flags 0, so that declaring the peer dead does not cancel it at the
// provider.
extern "C" void efa_core_set_deadline_tick(efa_core_t *core, void (*fn)(void *arg), void *arg) {
    std::lock_guard<std::mutex> guard(core->deadline_lock);
    core->deadline_tick_fn = fn;
    core->deadline_tick_arg = arg;
}

extern "C" int efa_core_peer_watch(efa_core_t *core, efa_peer_t *peer, efa_op_t *watch) {
    int err = 0;
    efa_op_t *t = efa::deadline_track(core->nic->ctx(0), peer->addr[0], watch,
                                      efa::PeerDeadline::Kind::Recv, 0, &err);
    return t ? 0 : err;
}

extern "C" void efa_core_peer_unwatch(efa_core_t *core, efa_op_t *watch) {
    auto *t = reinterpret_cast<efa::Tracked *>(watch->tracker);
    if (!t) {
        return;
    }
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        if (core->orphans.count(t)) {
            return; // declared dead meanwhile: its call is due, the close frees it
        }
        core->deadline.forget(&t->entry);
        give_tracked(core, t);
    }
    watch->tracker = nullptr;
}
