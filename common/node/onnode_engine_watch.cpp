// The on-node engine's watch on the peers on other nodes it waits on.
//
// Much of what the engine waits for has nothing out at the provider: a
// rendezvous send waiting for its CTS, a receive waiting for the DATA of a
// matched RTS, a synchronous send waiting for its ACK, a receive posted
// for one peer.  On a provider whose sends complete once a local socket
// has them (tcp;ofi_rxm), even the engine's own sends to a peer whose host
// dropped off the data network complete.  The core's peer deadline only
// sees what is tracked, so a partitioned peer would leave such a wait
// pending for ever (pml cm has no watch of its own; btl_efa's covers
// ob1).  So a sweep, about once a second from progress(), asks the core
// to watch (efa_core_addr_watch) every peer on another node that some
// request waits on, and ends the watch when none does any more.  A
// watched peer silent for half the deadline is probed; unanswered, the
// core declares it lost (its peer-unreachable message names it) and
// watch_lost fails every request waiting on it (fail_peer), so the MPI
// calls return an error instead of hanging.  Which process a receive
// posted for one source waits on, the owner says (params.source_vpid),
// here and never per message: the on-node path's receives pay nothing.
//
// Not watched: receives on MPI_ANY_SOURCE (they wait on nobody in
// particular).  A receive from a peer this process never exchanged a
// message with makes that peer (its address looked up once, as a first
// send would).
// The worst case from the start of a wait to the loss: a sweep a second
// late, half a deadline of silence, a deadline for the probe.
#include <chrono>

#include <rdma/fi_errno.h>

#include "onnode_engine.hpp"

namespace efa::onnode {

namespace {

constexpr uint64_t kSweepMs = 1000;

uint64_t now_ms() {
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
}

} // namespace

// Under mu_, from progress() (net_ is set).
void Engine::watch_sweep() {
    if (efa_core_peer_timeout(net_->core()) <= 0) {
        return; // the deadline is off: nothing is ever declared lost
    }
    const uint64_t now = now_ms();
    if (now < watch_next_ms_) {
        return;
    }
    watch_next_ms_ = now + kSweepMs;
    for (auto &p : peers_) {
        if (p && p->net) {
            p->watch.waited = p->busy(); // frames queued for it
        }
    }
    auto mark = [this](uint32_t vpid) {
        if (vpid < peers_.size() && peers_[vpid] && peers_[vpid]->net) {
            peers_[vpid]->watch.waited = true;
        }
    };
    ids_.each([&](efa_onnode_req_t *r, uint64_t) { mark(r->peer); }); // waiting for an answer
    match_.each_posted([&](efa_onnode_req_t *r) {                     // a receive for one peer
        const uint32_t vpid = source_of(r);
        if (remote_peer(vpid)) {
            mark(vpid);
        }
    });
    for (auto &p : peers_) {
        if (!p || !p->net) {
            continue;
        }
        if (p->watch.waited && p->error) {
            fail_peer(p->vpid, p->error); // waits that began after it failed
        } else if (p->watch.waited && !p->watch.on) {
            watch_peer(p.get());
        } else if (!p->watch.waited && p->watch.on) {
            efa_core_peer_unwatch(net_->core(), &p->watch.op);
            p->watch.on = false;
        }
    }
}

// The process a posted receive waits on, if it names one the owner knows.
uint32_t Engine::source_of(const efa_onnode_req_t *posted) const {
    if (EFA_ONNODE_ANY == posted->src || !params_.source_vpid) {
        return EFA_ONNODE_NO_VPID;
    }
    return params_.source_vpid(params_.peer_card_arg, posted->cid, posted->src);
}

// The peer on another node that process vpid is, made now if this
// process never exchanged a message with it (a receive may wait on a peer
// that never sent anything yet); nullptr for a process of this node (not
// watched) or one that cannot be reached.  Under mu_.
Engine::Peer *Engine::remote_peer(uint32_t vpid) {
    if (vpid >= params_.nprocs || vpid == params_.my_vpid) {
        return nullptr;
    }
    if (vpid < peers_.size() && peers_[vpid]) {
        return peers_[vpid]->net ? peers_[vpid].get() : nullptr;
    }
    efa_onnode_card_t card{};
    if ((inbox_ || node_) && -FI_ENOENT != params_.peer_card(params_.peer_card_arg, vpid, &card)) {
        return nullptr; // on this node (as peer() decides it)
    }
    if (vpid >= peers_.size()) {
        peers_.resize(static_cast<size_t>(vpid) + 1);
    }
    int err = 0;
    return net_peer(vpid, err);
}

// Under mu_.
void Engine::watch_peer(Peer *p) {
    Watch &w = p->watch;
    w.engine = this;
    w.vpid = p->vpid;
    w.op.complete = watch_lost;
    const int rc = efa_core_addr_watch(net_->core(), p->net->ctx, p->net->addr, &w.op);
    if (0 == rc) {
        w.on = true;
    } else if (-FI_EHOSTUNREACH == rc) {
        fail_peer(p->vpid, rc); // declared lost already (by another of its operations)
    }
}

// The core declared a watched peer lost (from its progress or a deadline
// check, the engine's mutex not held).
void Engine::watch_lost(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *w = reinterpret_cast<Watch *>(op);
    Engine *e = w->engine;
    {
        Guard g(e->mu_, e->mt_);
        w->on = false;
        e->fail_peer(w->vpid, cqe->err ? cqe->err : -FI_EHOSTUNREACH);
    }
    e->run_completions();
}

// The engine closes.
void Engine::unwatch_all() {
    for (auto &p : peers_) {
        if (p && p->watch.on) {
            efa_core_peer_unwatch(net_->core(), &p->watch.op);
            p->watch.on = false;
        }
    }
}

} // namespace efa::onnode
