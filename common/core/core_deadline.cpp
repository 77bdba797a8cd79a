// The peer deadline in the post and completion paths (the rules are in
// peer_deadline.hpp).
//
// An operation the deadline fails is still the provider's: it may hand its
// context back later, or never.  So the provider never holds the owner's
// efa_op_t while the deadline is on: it holds a stand-in (Tracked) that the
// core allocates and frees only when the provider returns it.  A stand-in
// whose owner was already failed completes into nothing.  Receives failed
// this way are also cancelled, so that the provider lets go of the buffer.
#include <ctime>
#include <string>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "core.hpp"

namespace efa {

namespace {

struct Tracked {
    efa_op_t op; // first: the provider hands back &op.fi_ctx
    efa_op_t *owner;
    efa_ctx *ctx;
    fi_addr_t peer;
    uint64_t flags; // what the failure completion says it was (FI_SEND, FI_RECV, ...)
};

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
    bool mine;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        mine = core->deadline.completed(t->peer, t, now_ms());
        if (!mine) {
            core->orphans.erase(t);
        }
    }
    const fi_addr_t peer = t->peer;
    const int err = cqe->err;
    if (mine) {
        t->owner->tracker = nullptr;
        t->owner->complete(t->owner, cqe);
    }
    delete t;
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
    std::vector<const void *> ops;
    bool first;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        first = !core->deadline.dead(addr);
        for (fi_addr_t a : addrs) {
            std::vector<const void *> more = core->deadline.declare_dead(a);
            ops.insert(ops.end(), more.begin(), more.end());
        }
        core->orphans.insert(ops.begin(), ops.end());
    }
    if (first) {
        core->rep.help("peer-unreachable", name, why, fi_strerror(-err));
    }
    for (const void *p : ops) {
        auto *t = const_cast<Tracked *>(static_cast<const Tracked *>(p));
        if (t->flags & FI_RECV) {
            // The provider keeps the stand-in until the cancel's completion.
            (void)fi_cancel(&t->ctx->ep->fid, &t->op.fi_ctx);
        }
        efa_cqe_t cqe{err, t->flags, 0, 0, 0, 0};
        t->owner->tracker = nullptr;
        t->owner->complete(t->owner, &cqe);
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
    auto *t = new Tracked{{}, &g_probe_owner, ctx, addr, kind};
    t->op.complete = tracked_complete;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        if (!core->deadline.posted(addr, t, PeerDeadline::Kind::Send, now_ms())) {
            delete t;
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
        core->deadline.forget(addr, t);
        delete t;
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
    std::vector<const void *> left = core->deadline.release_all();
    left.insert(left.end(), core->orphans.begin(), core->orphans.end());
    for (const void *p : left) {
        delete static_cast<const Tracked *>(p);
    }
    core->orphans.clear();
}

efa_op_t *deadline_track(efa_ctx *ctx, fi_addr_t peer, efa_op_t *op, PeerDeadline::Kind kind,
                         uint64_t flags, int *err) {
    op->tracker = nullptr;
    efa_core *core = ctx->core;
    if (!core->deadline_on) {
        return op;
    }
    auto *t = new Tracked{{}, op, ctx, peer, flags};
    t->op.complete = tracked_complete;
    t->op.rx_class = op->rx_class;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        if (!core->deadline.posted(peer, t, kind, now_ms())) {
            delete t;
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
        ctx->core->deadline.forget(t->peer, t);
    }
    op->tracker = nullptr;
    delete t;
}

bool deadline_refuses(efa_ctx *ctx, fi_addr_t peer) {
    efa_core *core = ctx->core;
    if (!core->deadline_on) {
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
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        core->deadline_next_ms.store(now + 1000, std::memory_order_relaxed);
        if (!core->deadline.due(now)) {
            return;
        }
        v = core->deadline.check(now);
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
        core->deadline.forget(t->peer, t);
    }
    watch->tracker = nullptr;
    delete t;
}
