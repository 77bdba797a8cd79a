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
// A receive from a peer this process never exchanged a message with makes
// that peer (its address looked up once, as a first send would).
//
// Receives on MPI_ANY_SOURCE follow ULFM's rule: such a receive fails when
// a member of its communicator is lost (the remote group of an
// inter-communicator), since that member may be the only one that would
// ever send what it waits for; receives of communicators without the lost
// peer stay posted.  fail_peer fails those posted when the peer is
// declared lost, and the sweep those posted later (a peer that failed
// before is marked waited on like any other).  For the loss to be found,
// the sweep also watches, for every communicator with an ANY_SOURCE
// receive posted for a whole sweep period (kReqSwept, set by the sweep
// that first saw it), the peers on other nodes of that communicator: the
// owner lists them (params.comm_members), once a second per such
// communicator.  A short wait, the common case, is never looked at twice,
// and nothing of this runs per message.  Not covered here: partnered
// receives (only without the core's traffic in the engine, where every
// peer it carries is on this node: the provider's half is mtl_efa's).
//
// The worst case from the start of a wait to the loss: a sweep a second
// late, half a deadline of silence, a deadline for the probe; one more
// sweep period for an ANY_SOURCE receive.
#include <algorithm>
#include <chrono>

#include <rdma/fi_errno.h>

#include "onnode_engine_impl.hpp"

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
    std::vector<uint32_t> any_cids; // communicators an ANY_SOURCE receive waited on a period
    match_.each_posted([&](efa_onnode_req_t *r) {
        if (EFA_ONNODE_ANY == r->src) {
            note_any_source(r, any_cids);
        } else if (const uint32_t vpid = source_of(r); remote_peer(vpid)) {
            mark(vpid); // a receive for one peer
        }
    });
    for (uint32_t cid : any_cids) {
        for (uint32_t vpid : members_of(cid)) {
            if (remote_peer(vpid)) {
                mark(vpid); // one the receive may hear from
            }
        }
    }
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

// An ANY_SOURCE receive the sweep finds posted: its communicator goes to
// cids once the receive was posted at the sweep before too (a short wait
// costs nothing).  Partnered receives are left out: their other half is
// posted to the provider, which is not the engine's to fail.
void Engine::note_any_source(efa_onnode_req_t *posted, std::vector<uint32_t> &cids) {
    if (!params_.comm_members || (posted->flags & kReqPartner)) {
        return;
    }
    if (!(posted->flags & kReqSwept)) {
        posted->flags |= kReqSwept;
    } else if (std::find(cids.begin(), cids.end(), posted->cid) == cids.end()) {
        cids.push_back(posted->cid);
    }
}

// The processes of communicator cid, as the owner lists them (none
// without the callback or for a communicator it does not know).
std::vector<uint32_t> Engine::members_of(uint32_t cid) const {
    std::vector<uint32_t> vpids;
    if (!params_.comm_members) {
        return vpids;
    }
    vpids.resize(params_.comm_members(params_.peer_card_arg, cid, nullptr, 0));
    const size_t n = params_.comm_members(params_.peer_card_arg, cid, vpids.data(), vpids.size());
    vpids.resize(std::min(n, vpids.size()));
    return vpids;
}

// Whether the lost peer vpid is one a posted ANY_SOURCE receive may hear
// from (a member of its communicator): ULFM's rule fails that receive.
// Each communicator is asked about once per loss (known).
bool Engine::any_source_hears(const efa_onnode_req_t *posted, uint32_t vpid,
                              Membership &known) const {
    if (EFA_ONNODE_ANY != posted->src || (posted->flags & kReqPartner)) {
        return false;
    }
    for (const auto &[cid, member] : known) {
        if (cid == posted->cid) {
            return member;
        }
    }
    const std::vector<uint32_t> vpids = members_of(posted->cid);
    const bool member = std::find(vpids.begin(), vpids.end(), vpid) != vpids.end();
    known.emplace_back(posted->cid, member);
    return member;
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
