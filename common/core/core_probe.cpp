// The liveness probe: how the peer deadline asks a peer it has only waited
// on whether it is still there (the second rule in peer_deadline.hpp).
//
// A probe is a ping that the peer's core answers, and only the answer is
// news.  The send of a ping completing says nothing where a provider
// completes a send once a local socket takes it: tcp;ofi_rxm did so across
// a partition (FI_DELIVERY_COMPLETE asked, not honoured), which kept a
// partitioned peer alive for ever.  Where the provider has tags, pings and
// answers are zero-byte tagged messages in the probe space of the tag
// (EFA_PROTO_PROBE), taken by a receive of their own on every context: the
// low bits carry the sender's probe id (a hash of its address blob, by
// which the receiver finds the sender among its peers), one bit tells an
// answer from a ping.  Answers are sent whatever this process's own
// deadline, from the progress loop: a peer must enter MPI within half the
// deadline of being probed (docs/RELIABILITY.md).
//
// Without tags (the direct mode) a probe is a zero-byte untagged message
// that the peer's receive pool drops (core_msg.cpp), and its completion is
// the answer: that holds where a send completes once the peer's device or
// provider has it (SRD, ofi_rxd), not on a stream provider.
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "control_tags.hpp"
#include "control_wire.hpp"
#include "deadline_tracked.hpp"
#include "rail_back.hpp"

namespace efa {

namespace {

using control::kAnswerBit;
using control::kIdMask;
using control::kProbeIgnore;
using control::kProbeTag;

// The addresses of each peer with probe id 'id' (a hash: more than one
// only by accident) that 'src' (the provider's source of the message
// naming it, efa_cqe_t.src) may be: a ping or answer from a third process
// naming a peer would otherwise keep that peer alive for the deadline, or
// have this process answer it unasked.
std::vector<std::vector<fi_addr_t>> peers_named(efa_core *core, uint64_t id, fi_addr_t src,
                                                const char *what) {
    std::vector<std::vector<fi_addr_t>> named;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        auto range = core->peers_by_probe_id.equal_range(id);
        for (auto i = range.first; i != range.second; ++i) {
            named.emplace_back(i->second->addr, i->second->addr + i->second->num_addrs);
        }
    }
    std::vector<std::vector<fi_addr_t>> out;
    for (auto &n : named) { // the check takes peers_lock itself
        if (!n.empty() && efa_core_source_ok(core, src, n[0], what)) {
            out.push_back(std::move(n));
        }
    }
    return out;
}

// A ping from the peer(s) with 'id', answered from the context it came in
// on.
void answer(efa_ctx *ctx, uint64_t id, fi_addr_t src) {
    efa_core *core = ctx->core;
    const auto peers = peers_named(core, id, src, "a peer probe");
    if (peers.empty()) {
        // A process this one has not met: it cannot be told, and its
        // deadline ends its wait on this one (it probes only peers it has
        // exchanged messages with, which are in this table).
        core->rep.say(10, "peer probe from a process not known here: not answered");
    }
    for (const auto &p : peers) {
        probe_send_answer(ctx, p[0]);
    }
}

// An answer from the peer(s) with 'id': the probes out to them are news.
void answered(efa_core *core, uint64_t id, fi_addr_t src) {
    std::vector<fi_addr_t> addrs;
    for (const auto &p : peers_named(core, id, src, "a peer probe's answer")) {
        addrs.insert(addrs.end(), p.begin(), p.end());
    }
    std::lock_guard<std::mutex> guard(core->deadline_lock);
    const uint64_t now = now_ms();
    for (fi_addr_t a : addrs) {
        auto it = core->probes_out.find(a);
        if (it != core->probes_out.end()) {
            probe_settled(core, it, now);
        }
    }
}

// The source of a ping's answer or a notice as the same process's
// first-rail address (*out): the first rail's as it is, as is "none"
// (FI_ADDR_NOTAVAIL: the provider reports no sources); another rail's
// through that rail's table (a probe or notice goes by the sender's home
// rail once its first is out: core_rail0.cpp).  false: the table does
// not know it.
bool first_rail_source(efa_ctx *ctx, fi_addr_t src, fi_addr_t *out) {
    *out = src;
    if (0 == ctx->rail || FI_ADDR_NOTAVAIL == src) {
        return true;
    }
    std::lock_guard<std::mutex> guard(ctx->core->peers_lock);
    const auto &m = ctx->core->rail_primary[ctx->rail];
    const auto it = m.find(src);
    if (it == m.end()) {
        return false;
    }
    *out = it->second;
    return true;
}

// The receive that takes the peers' pings and answers, one per context,
// posted again as each completes.
struct ProbeRecv {
    efa_op_t op;
    efa_ctx *ctx;
    int rail; // ctx's (ctx itself may be gone at close)
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
    const control::ProbeMsg m = cqe->err ? control::ProbeMsg{} : control::parse_probe(cqe->tag);
    if (m.valid && m.rail_out) {
        // (over the sender's home rail: its first, unless that is the NIC it took out)
        fi_addr_t from;
        if (first_rail_source(r->ctx, cqe->src, &from)) {
            rail_out_received(r->ctx->core, m.id, from, m.rail);
        }
    } else if (m.valid && r->ctx->rail) {
        // A lost rail asked whether it reaches (core_rail_back.cpp), or
        // the peer probed by its home rail: an answer is news of the
        // process either way.
        if (m.answer) {
            rail_answer_received(r->ctx, m.id, cqe->src);
            fi_addr_t from;
            if (first_rail_source(r->ctx, cqe->src, &from)) {
                answered(r->ctx->core, m.id, from);
            }
        } else {
            rail_ping_received(r->ctx, m.id, cqe->src);
        }
    } else if (m.valid) {
        if (m.answer) {
            answered(r->ctx->core, m.id, cqe->src);
            // An answer over the first rail to the ping of a first rail
            // taken out (core_rail_back.cpp) puts it back.
            if (r->ctx->core->rail_retry_on.load(std::memory_order_relaxed)) {
                rail_answer_received(r->ctx, m.id, cqe->src);
            }
        } else {
            answer(r->ctx, m.id, cqe->src);
        }
    }
    // A failed repost leaves later probes to the provider's unexpected
    // queue, unanswered: said once.
    int rc = repost_standing(r->ctx, &r->op, "fi_trecv (peer probe)",
                             [r] { return static_cast<ssize_t>(post_probe_recv(r)); });
    if (rc) {
        r->ctx->core->failures.report(r->ctx->core->rep, "fi_trecv (peer probe)", rc);
    }
}

} // namespace

// FNV-1a over the blob, cut to the tag's id bits: two peers share an id
// with odds of about n^2 / 2^57 (an accidental share answers both).
uint64_t probe_id_of(const void *blob, size_t len) {
    uint64_t h = 14695981039346656037ull;
    const auto *b = static_cast<const unsigned char *>(blob);
    for (size_t i = 0; i < len; ++i) {
        h = (h ^ b[i]) * 1099511628211ull;
    }
    return h & kIdMask;
}

void probe_open(efa_core *core) {
    core->probe_id = probe_id_of(core->blob.data(), core->blob.size());
    // Without tags, probes arrive in the untagged receive pool instead.
    // Each rail's contexts take pings too: a peer asks over a rail it lost
    // whether it reaches this process again (core_rail_back.cpp).
    for (int rail = 0; core->info.has_tagged && rail <= static_cast<int>(core->rails.size());
         ++rail) {
        Nic &nic = rail ? *core->rails[static_cast<size_t>(rail) - 1] : *core->nic;
        for (int i = 0; i < nic.num_contexts(); ++i) {
            auto *r = new ProbeRecv{{}, nic.ctx(i), rail};
            r->op.complete = probe_recv_done;
            r->op.rx_class = EFA_RX_INTERNAL;
            if (post_probe_recv(r)) {
                delete r;
                continue;
            }
            core->probe_recvs.push_back(&r->op);
        }
    }
}

void probe_close(efa_core *core) {
    for (efa_op_t *op : core->probe_recvs) {
        auto *r = reinterpret_cast<ProbeRecv *>(op);
        // A rail that lost a peer keeps its endpoint open for the exit
        // (close_rail_endpoints), and with it this posted receive.
        if (core->rail_lost_any[r->rail]) {
            keep_for_exit(r);
        } else {
            delete r;
        }
    }
    core->probe_recvs.clear();
    core->probes_out.clear(); // still tracked: the deadline's release frees them
    probe_sends_close(core);
}

bool probe_sent(efa_core *core, Tracked *t, int err) {
    if (!core->info.has_tagged) {
        return false; // the completion is the answer
    }
    if (err) {
        auto it = core->probes_out.find(t->peer);
        if (it != core->probes_out.end() && it->second == t) {
            core->probes_out.erase(it);
        }
        return false;
    }
    if (t->entry.peer) {
        t->sent = true; // waits for the answer
        return true;
    }
    // Answered already, or its peer was declared dead: done.
    core->orphans.erase(t);
    give_tracked(core, t);
    return true;
}

void probe_settled(efa_core *core, decltype(efa_core::probes_out)::iterator it, uint64_t now) {
    auto *t = static_cast<Tracked *>(it->second);
    core->probes_out.erase(it);
    core->deadline.completed(&t->entry, now);
    if (t->sent) {
        give_tracked(core, t);
    } else {
        core->orphans.insert(t); // the provider still holds it: its completion frees it
    }
}

bool probe_dropped(efa_core *core, Tracked *t) {
    auto it = core->probes_out.find(t->peer);
    if (it != core->probes_out.end() && it->second == t) {
        core->probes_out.erase(it);
    }
    return t->sent;
}

} // namespace efa
