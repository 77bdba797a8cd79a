// The matching engine's watch on the peers it waits on: those on other
// nodes, and the processes of this node (below).
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
// Blocking probes wait too, with nothing posted: pml cm's MPI_Probe calls
// probe() until a message is there.  Each miss is noted (probe_missed:
// per communicator and source, nothing per message that is found), the
// next two sweeps watch its peer, or its communicator's members for an
// ANY_SOURCE probe, and once one of those is lost the next miss returns
// the loss's error, which ends MPI_Probe with it.
//
// The worst case from the start of a wait to the loss: a sweep a second
// late, half a deadline of silence, a deadline for the probe; one more
// sweep period for an ANY_SOURCE receive.
//
// Processes of this node.  Waits through the rings are no deadline's: a
// peer that dies (a crash, a kill, which mpirun --enable-recovery lets
// the job survive) would leave them pending for ever.  Where the owner
// asks for it (params.peer_exited: mtl_efa while the deadline is on),
// each such peer gets a watch on its exit when first made, only where its
// card's pid is proven to be its process here (efa_cma_exit_watch: a
// pidfd, and its single-copy cookie read through that pid; another pid
// namespace, a refused read or no pidfd_open: never judged); one that
// only sent here (its ring in this inbox attached and not left) is made by
// the first sweep that finds a request waiting on it.  The same
// sweep, with or without the provider, marks the peers of this node that
// requests wait on as it marks those of other nodes, and node_check polls
// theirs: one gone without having closed its inbox fails like a lost
// remote peer (fail_peer) once its frames here are read, and the owner
// declares it lost (the core's peer-unreachable message).  From its
// death: at most a sweep period, one more for an ANY_SOURCE receive.
#include <algorithm>
#include <chrono>

#include <rdma/fi_errno.h>

#include "engine_impl.hpp"

namespace efa::engine {

namespace {

constexpr uint64_t kSweepMs = 1000;
// A probe's miss is watched for this many sweeps: MPI_Probe misses again
// long before the second.
constexpr uint8_t kProbeSweeps = 2;
constexpr size_t kMaxProbeWaits = 32;

uint64_t now_ms() {
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
}

} // namespace

// Under mu_, from progress().
void Engine::watch_sweep() {
    const bool remote = net_ && efa_core_peer_timeout(net_->core()) > 0;
    if (!remote && !params_.peer_exited) {
        return; // the deadline is off: nothing is ever declared lost
    }
    const uint64_t now = now_ms();
    if (now < watch_next_ms_) {
        return;
    }
    watch_next_ms_ = now + kSweepMs;
    for (auto &p : peers_) {
        if (p) {
            p->watch.waited = p->busy(); // frames queued for it
        }
    }
    auto mark = [this](uint32_t vpid) {
        if (vpid < peers_.size() && peers_[vpid]) {
            peers_[vpid]->watch.waited = true;
        }
    };
    ids_.each([&](efa_engine_req_t *r, uint64_t) { mark(r->peer); }); // waiting for an answer
    std::vector<uint32_t> any_cids; // communicators an ANY_SOURCE receive waited on a period
    match_.each_posted([&](efa_engine_req_t *r) {
        if (EFA_ENGINE_ANY == r->src) {
            note_any_source(r, any_cids);
        } else if (Peer *p = waited_peer(source_of(r), remote)) {
            p->watch.waited = true; // a receive for one peer
        }
    });
    probe_sweep(any_cids, remote);
    for (uint32_t cid : any_cids) {
        for (uint32_t vpid : members_of(cid)) {
            if (Peer *p = waited_peer(vpid, remote)) {
                p->watch.waited = true; // one the receive may hear from
            }
        }
    }
    for (auto &p : peers_) {
        if (!p) {
            continue;
        }
        if (p->out) {
            if (p->watch.waited && p->exit_fd >= 0) {
                node_check(p.get());
            }
            continue;
        }
        if (!p->net || !remote) {
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

// A peer of this node that something waits on (under mu_; its exit is
// watched).  Once its process is gone without having closed its inbox (a
// crash, a kill: one that closed it was done with MPI) and every frame it
// wrote here is read (a message it sent before it died stays receivable),
// it is lost as a peer on another node is: what waits on it fails, later
// sends to it fail at once, and the owner hears of it outside the lock
// (report_lost: the core's peer-unreachable message).
void Engine::node_check(Peer *p) {
    if (p->error) {
        fail_peer(p->vpid, p->error); // waits that began after it failed
        return;
    }
    if (!efa_cma_exited(p->exit_fd) || p->out->owner_closed() ||
        efa_ring_waiting(poll_inbox_->consumer(), poll_first_ + p->ring)) {
        return;
    }
    fail_peer(p->vpid, -FI_EHOSTUNREACH);
    exited_.push_back(p->vpid);
}

// A probe found nothing (under mu_): pml cm's MPI_Probe calls
// again until it does, and nothing is posted meanwhile that the sweep
// would see.  So the miss is noted, for the next kProbeSweeps sweeps to
// watch what it waits on as they watch a posted receive (a polling
// MPI_Iprobe is noted alike: the same wait, seen from here); 0, or the
// error of a loss it waits on (the caller's probe then fails).  A probe
// on one source looks its peer up once, when first noted; the table is
// small (a wait per thread in MPI_Probe, as a rule) and searched in full.
int Engine::probe_missed(uint32_t cid, int32_t src) {
    for (ProbeWait &w : probe_waits_) {
        if (w.cid == cid && w.src == src) {
            w.sweeps = kProbeSweeps;
            return w.err;
        }
    }
    if (!params_.peer_exited && efa_core_peer_timeout(net_->core()) <= 0) {
        return 0; // nothing is ever declared lost
    }
    if (EFA_ENGINE_ANY != src && params_.source_vpid) {
        const uint32_t vpid = params_.source_vpid(params_.peer_card_arg, cid, src);
        if (vpid < peers_.size() && peers_[vpid] && peers_[vpid]->error) {
            return peers_[vpid]->error; // lost before
        }
    }
    if (probe_waits_.size() >= kMaxProbeWaits) { // the wait renewed longest ago goes
        auto oldest = std::min_element(
            probe_waits_.begin(), probe_waits_.end(),
            [](const ProbeWait &a, const ProbeWait &b) { return a.sweeps < b.sweeps; });
        probe_waits_.erase(oldest);
    }
    probe_waits_.push_back(ProbeWait{cid, src, kProbeSweeps, 0});
    return 0;
}

// From the sweep (under mu_): every noted probe's peer is marked waited
// on, and an ANY_SOURCE probe's communicator goes to any_cids (its
// members are marked there).  A wait on a peer that failed takes its
// error; one no miss renewed for kProbeSweeps sweeps is dropped (so is
// one of a communicator freed: comm_freed, as its id may come back).
void Engine::probe_sweep(std::vector<uint32_t> &any_cids, bool remote) {
    for (auto it = probe_waits_.begin(); it != probe_waits_.end();) {
        ProbeWait &w = *it;
        if (0 == w.sweeps) {
            it = probe_waits_.erase(it);
            continue;
        }
        --w.sweeps;
        if (EFA_ENGINE_ANY != w.src) {
            const uint32_t vpid = params_.source_vpid
                                      ? params_.source_vpid(params_.peer_card_arg, w.cid, w.src)
                                      : EFA_ENGINE_NO_VPID;
            if (Peer *p = waited_peer(vpid, remote)) {
                p->watch.waited = true;
                w.err = w.err ? w.err : p->error;
            }
        } else {
            if (std::find(any_cids.begin(), any_cids.end(), w.cid) == any_cids.end()) {
                any_cids.push_back(w.cid);
            }
            for (uint32_t vpid : members_of(w.cid)) {
                if (vpid < peers_.size() && peers_[vpid] && peers_[vpid]->error && !w.err) {
                    w.err = peers_[vpid]->error; // lost before the probe began
                }
            }
        }
        ++it;
    }
}

// Peer vpid was lost (fail_peer, under mu_): the noted probes that wait on
// it, or on ANY_SOURCE of a communicator it belongs to, fail at their next
// miss.
void Engine::probe_lost(uint32_t vpid, int err, Membership &known) {
    for (ProbeWait &w : probe_waits_) {
        if (w.err) {
            continue;
        }
        const bool hears = EFA_ENGINE_ANY == w.src
                               ? member_of(w.cid, vpid, known)
                               : params_.source_vpid && params_.source_vpid(params_.peer_card_arg,
                                                                            w.cid, w.src) == vpid;
        if (hears) {
            w.err = err;
        }
    }
}

// The process a posted receive waits on, if it names one the owner knows.
uint32_t Engine::source_of(const efa_engine_req_t *posted) const {
    if (EFA_ENGINE_ANY == posted->src || !params_.source_vpid) {
        return EFA_ENGINE_NO_VPID;
    }
    return params_.source_vpid(params_.peer_card_arg, posted->cid, posted->src);
}

// An ANY_SOURCE receive the sweep finds posted: its communicator goes to
// cids once the receive was posted at the sweep before too (a short wait
// costs nothing).  Partnered receives are left out: their other half is
// posted to the provider, which is not the engine's to fail.
void Engine::note_any_source(efa_engine_req_t *posted, std::vector<uint32_t> &cids) {
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
bool Engine::any_source_hears(const efa_engine_req_t *posted, uint32_t vpid,
                              Membership &known) const {
    if (EFA_ENGINE_ANY != posted->src || (posted->flags & kReqPartner)) {
        return false;
    }
    return member_of(posted->cid, vpid, known);
}

// Is process vpid a member of communicator cid?  Each communicator is
// asked about once per loss (known).
bool Engine::member_of(uint32_t cid, uint32_t vpid, Membership &known) const {
    for (const auto &[c, member] : known) {
        if (c == cid) {
            return member;
        }
    }
    const std::vector<uint32_t> vpids = members_of(cid);
    const bool member = std::find(vpids.begin(), vpids.end(), vpid) != vpids.end();
    known.emplace_back(cid, member);
    return member;
}

// The peer that process vpid is, for the sweep to judge: one on another
// node while the deadline is on (remote), made now if this process never
// exchanged a message with it (a receive may wait on a peer that never
// sent anything yet), as a first send would; or one of this node already
// made, whose exit is watched (Peer::exit_fd); nullptr otherwise.  Under
// mu_.
Engine::Peer *Engine::waited_peer(uint32_t vpid, bool remote) {
    if (vpid >= params_.nprocs || vpid == params_.my_vpid) {
        return nullptr;
    }
    if (vpid >= peers_.size() || !peers_[vpid]) {
        efa_engine_card_t card{};
        const bool here = (inbox_ || node_) &&
                          -FI_ENOENT != params_.peer_card(params_.peer_card_arg, vpid, &card);
        // A process of this node is judged only once a message went either
        // way: made by a send of this one, or made here once it attached
        // its ring in this inbox (it sent here) and has not left it.
        // Making every member would attach to its inbox, so that one
        // ANY_SOURCE receive on a large communicator left posted would
        // have every process of the node poll a ring per member.
        if (here ? !sent_here(card) : !remote) {
            return nullptr; // (here: as peer() decides where it is)
        }
        int err = 0;
        peer(vpid, err);
    }
    Peer *p = vpid < peers_.size() ? peers_[vpid].get() : nullptr;
    if (p && p->net) {
        return remote ? p : nullptr;
    }
    return p && p->exit_fd >= 0 ? p : nullptr;
}

// A process of this node (its card) that attached its ring in this
// engine's inbox and has not let go of it: it sent here (under mu_).
bool Engine::sent_here(const efa_engine_card_t &card) const {
    return poll_inbox_ && card.local_rank < poll_count_ &&
           shm::kSenderAttached == poll_inbox_->sender(poll_first_ + card.local_rank);
}

// Under mu_.
void Engine::watch_peer(Peer *p) {
    Watch &w = p->watch;
    w.engine = this;
    w.vpid = p->vpid;
    w.op.complete = watch_lost;
    const int rc = efa_core_addr_watch(net_->core(), p->net->ctx0, p->net->addr0, &w.op);
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

// Communicator cid was freed: its id may name another one next, whose
// receives must not take what was sent on this one and never received
// (matching knows only the id).  Those messages go, unanswered: a
// synchronous or rendezvous sender of one waited for a receive that
// never came anyway.
void Engine::comm_freed(uint32_t cid) {
    Guard g(mu_, mt_);
    probe_waits_.erase(std::remove_if(probe_waits_.begin(), probe_waits_.end(),
                                      [cid](const ProbeWait &w) { return w.cid == cid; }),
                       probe_waits_.end());
    stats.unreceived += match_.drain_unexpected_of(cid, [](Message *m) { free(m); });
}

} // namespace efa::engine
