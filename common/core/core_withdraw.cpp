// Withdrawing a message the sender cancels (MPI_Cancel of a send) before
// any receive has matched it.
//
// Under the provider's matching, a large send stays with the provider until
// the receiver matches it (tcp;ofi_rxm's rendezvous, efa's long
// protocols), and the provider cannot cancel a send.  The receiver can take
// the message away: its core claims the unexpected message (FI_PEEK |
// FI_CLAIM) and receives it into scratch memory.  A plain FI_DISCARD would
// not do: neither rxm nor efa tells the sender, whose send then never
// completes (tests/provider-defects/rxm_discard_holds_send.c).
//
// Which message: the tag names it exactly.  Large sends carry a seq in the
// tag (efa_tag.h) that every user receive ignores, and the claim asks for
// the whole tag from the requester's address.  The request travels after
// the message on the same pair of endpoints, so the receiver's provider has
// the message (unexpected or matched) by the time the request is read:
// send-after-send order, which MPI's non-overtaking already needs.
//
// Messages (control_tags.hpp): the request carries the tag, the message's
// length and the requester's id for the answer; the reply the id and the
// outcome.
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "control_tags.hpp"
#include "control_wire.hpp"
#include "core.hpp"

namespace efa {

namespace {

using control::kProbeTag;
using control::kReplyBit;
using control::kWithdrawBit;
using control::kWithdrawIgnore;

constexpr int kRecvsPerContext = 2;
constexpr size_t kWire = 24;  // a request: tag, id, length
constexpr size_t kReply = 16; // a reply: id, outcome

void put64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, sizeof(v));
}

// --- the requester's side ---

efa_withdraw_t *withdraw_of(efa_op_t *op, size_t offset) {
    return reinterpret_cast<efa_withdraw_t *>(reinterpret_cast<char *>(op) - offset);
}

void part_done(efa_withdraw_t *w) {
    if (__atomic_sub_fetch(&w->parts, 1, __ATOMIC_ACQ_REL) == 0) {
        free(w->sent); // (the request's send has completed: its part came)
        w->sent = nullptr;
        w->done(w, w->result);
    }
}

// A reply to request 'id' from src (efa_cqe_t.src): only the receiver
// asked may answer it.
bool reply_from_receiver(efa_core *core, uint64_t id, fi_addr_t src) {
    fi_addr_t dest = FI_ADDR_NOTAVAIL;
    {
        std::lock_guard<std::mutex> guard(core->withdraw_lock);
        auto it = core->withdraws_out.find(id);
        if (it == core->withdraws_out.end()) {
            return false; // answered already, or no such request
        }
        dest = it->second->dest;
    }
    return efa_core_source_ok(core, src, dest, "a withdraw reply");
}

// Request 'id' still waiting for its answer, taken (nullptr: taken already).
efa_withdraw_t *take(efa_core *core, uint64_t id) {
    std::lock_guard<std::mutex> guard(core->withdraw_lock);
    auto it = core->withdraws_out.find(id);
    if (it == core->withdraws_out.end()) {
        return nullptr;
    }
    efa_withdraw_t *w = it->second;
    core->withdraws_out.erase(it);
    return w;
}

// The answer (a reply, the receiver's loss, or the request's failure) for
// a request this call took.  A withdrawal has three parts: the request's
// send, the answer, and the watch, given back by the watch's own call or
// when it ends without one (a call still due gives it back when it comes,
// receiver_lost): until then w's memory is the core's.
void settle_taken(efa_withdraw_t *w, int result, bool from_watch) {
    w->result = result;
    if (from_watch || efa_core_peer_unwatch(w->core, &w->watch)) {
        part_done(w); // the watch's part (never the last: the answer's is held)
    }
    part_done(w);
}

void settle(efa_core *core, uint64_t id, int result) {
    if (efa_withdraw_t *w = take(core, id)) {
        settle_taken(w, result, false);
    }
}

void request_sent(efa_op_t *op, const efa_cqe_t *cqe) {
    efa_withdraw_t *w = withdraw_of(op, offsetof(efa_withdraw_t, send));
    if (cqe->orphaned) {
        keep_for_exit(w->sent); // the provider may still read it (24 bytes)
        w->sent = nullptr;
    }
    if (cqe->err) {
        settle(w->core, w->id, cqe->err); // no answer will come
    }
    part_done(w);
}

void receiver_lost(efa_op_t *op, const efa_cqe_t *cqe) {
    efa_withdraw_t *w = withdraw_of(op, offsetof(efa_withdraw_t, watch));
    if (take(w->core, w->id) == w) {
        settle_taken(w, cqe->err ? cqe->err : -FI_EHOSTUNREACH, true);
    } else {
        part_done(w); // answered already, the watch's call was due: its part
    }
}

// --- the receiver's side ---

// One request worked on: look (peek), claim, receive into scratch, reply.
struct Claim {
    enum Step { kLooking, kClaiming, kReceiving };
    efa_op_t op;
    efa_ctx *ctx;
    fi_addr_t from;
    uint64_t requester; // its probe id
    uint64_t tag, id, len;
    void *scratch;
    Step step;
    uint8_t wire[kWire];
};

void claim_forget(Claim *c) {
    {
        std::lock_guard<std::mutex> guard(c->ctx->core->withdraw_lock);
        c->ctx->core->withdraw_work.erase(c);
    }
    free(c->scratch);
    delete c;
}

void reply_sent(efa_op_t *op, const efa_cqe_t *cqe) {
    // (a lost reply shows at the requester: its watch ends the wait)
    auto *c = reinterpret_cast<Claim *>(op);
    if (cqe->orphaned) {
        // The provider may still read c->wire: out of the work, the claim
        // is left to the process's end (a few bytes), as fin_sent's.
        {
            std::lock_guard<std::mutex> guard(c->ctx->core->withdraw_lock);
            c->ctx->core->withdraw_work.erase(c);
        }
        free(c->scratch);
        c->scratch = nullptr;
        keep_for_exit(c);
        return;
    }
    claim_forget(c);
}

void reply(Claim *c, int result) {
    efa_core *core = c->ctx->core;
    free(c->scratch);
    c->scratch = nullptr;
    put64(c->wire, c->id);
    put64(c->wire + 8, static_cast<uint64_t>(static_cast<int64_t>(result)));
    c->op.complete = reply_sent;
    c->op.rx_class = EFA_RX_INTERNAL;
    int rc = efa_ctx_tsend(c->ctx, c->wire, kReply, nullptr, c->from,
                           kProbeTag | kWithdrawBit | kReplyBit, 0, &c->op);
    if (rc) {
        core->failures.report(core->rep, "fi_tsend (withdraw reply)", rc);
        claim_forget(c);
    }
}

// Looking first, without claiming: a claim cannot be undone, and the
// oldest unexpected message with this tag is the one asked for only if its
// length is too (the seq wraps, efa_tag.h).
void claim_step(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *c = reinterpret_cast<Claim *>(op);
    efa_core *core = c->ctx->core;
    if (c->step == Claim::kReceiving) {
        // Taken: whatever the receive says (a truncation cannot happen with
        // a buffer of the message's size), no user receive will see it; a
        // rendezvous message's note goes with it.
        rdv_withdrawn(core, c->requester, c->tag);
        reply(c, 1);
        return;
    }
    if (cqe->err) {
        if (cqe->err != -FI_ENOMSG) {
            core->failures.report(core->rep, "fi_trecvmsg(FI_PEEK) (withdraw)", cqe->err);
        }
        reply(c, 0); // matched already: the sender's send completes as usual
        return;
    }
    if (c->step == Claim::kLooking) {
        if (cqe->len != c->len) {
            core->rep.say(1, "withdraw: the waiting message with that tag is another one (" +
                                 std::to_string(cqe->len) + " bytes, not " +
                                 std::to_string(c->len) + "): not taken");
            reply(c, 0);
            return;
        }
        // The buffer it is taken into, had before the claim: once claimed,
        // a message no buffer can be found for would stay with the
        // provider, matched by no receive, its sender waiting for ever.
        c->scratch = malloc(cqe->len ? cqe->len : 1);
        if (nullptr == c->scratch) {
            core->rep.say(1, "withdraw: no memory for the " + std::to_string(cqe->len) +
                                 "-byte message: not taken");
            reply(c, 0);
            return;
        }
        c->step = Claim::kClaiming;
        int rc = efa_ctx_tpeek(c->ctx, c->from, c->tag, 0, true, &c->op);
        if (rc) {
            core->failures.report(core->rep, "fi_trecvmsg(FI_PEEK | FI_CLAIM) (withdraw)", rc);
            reply(c, 0);
        }
        return;
    }
    c->step = Claim::kReceiving;
    // (the claim's length is the one looked at: c->len, which the buffer holds)
    int rc = efa_ctx_trecv_claimed(c->ctx, c->scratch, c->len, nullptr, c->tag, 0, &c->op);
    if (rc) {
        // Claimed but not taken: it stays with the provider, and no receive
        // can match it any more; the sender waits for a match (said).
        core->failures.report(core->rep, "fi_trecvmsg(FI_CLAIM) (withdraw)", rc);
        reply(c, 0);
    }
}

// src: where the request came from (the provider's word, efa_cqe_t.src):
// it must be the requester it names, or a third process could take a
// peer's message away.
void claim_start(efa_ctx *ctx, fi_addr_t src, uint64_t requester, uint64_t tag, uint64_t id,
                 uint64_t len) {
    efa_core *core = ctx->core;
    fi_addr_t from = FI_ADDR_NOTAVAIL;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        auto range = core->peers_by_probe_id.equal_range(requester);
        for (auto i = range.first; i != range.second; ++i) {
            if (ctx->index < i->second->num_addrs) {
                from = i->second->addr[ctx->index];
                break;
            }
        }
    }
    if (from == FI_ADDR_NOTAVAIL) {
        core->rep.say(1, "withdraw request from a process not known here: not answered");
        return;
    }
    if (!efa_core_source_ok(core, src, from, "a withdraw request")) {
        return; // not answered: the claimed requester did not ask
    }
    auto *c = new (std::nothrow)
        Claim{{}, ctx, from, requester, tag, id, len, nullptr, Claim::kLooking, {}};
    if (!c) {
        core->rep.say(1, "withdraw request: out of memory, not answered");
        return;
    }
    c->op.complete = claim_step;
    c->op.rx_class = EFA_RX_INTERNAL;
    {
        std::lock_guard<std::mutex> guard(core->withdraw_lock);
        core->withdraw_work.insert(c);
    }
    int rc = efa_ctx_tpeek(ctx, from, tag, 0, false, &c->op);
    if (rc) {
        core->failures.report(core->rep, "fi_trecvmsg(FI_PEEK) (withdraw)", rc);
        reply(c, 0);
    }
}

// The receives for requests and replies, posted again as each completes.
struct ControlRecv {
    efa_op_t op;
    efa_ctx *ctx;
    uint8_t buf[kWire];
};

int post_control_recv(ControlRecv *r) {
    return static_cast<int>(fi_trecv(r->ctx->ep, r->buf, kWire, nullptr, FI_ADDR_UNSPEC,
                                     kProbeTag | kWithdrawBit, kWithdrawIgnore, &r->op.fi_ctx));
}

void control_recv_done(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *r = reinterpret_cast<ControlRecv *>(op);
    if (cqe->err == -FI_ECANCELED) {
        return;
    }
    static_assert(kWire == control::kWithdrawRequestBytes &&
                  kReply == control::kWithdrawReplyBytes);
    if (!cqe->err) {
        const control::WithdrawMsg m =
            control::parse_withdraw(cqe->tag, r->buf, cqe->len < kWire ? cqe->len : kWire);
        if (m.kind == control::WithdrawMsg::kReply) {
            if (reply_from_receiver(r->ctx->core, m.id, cqe->src)) {
                settle(r->ctx->core, m.id, m.result);
            }
        } else if (m.kind == control::WithdrawMsg::kRequest) {
            claim_start(r->ctx, cqe->src, m.requester, m.tag, m.id, m.len);
        }
    }
    int rc = repost_standing(r->ctx, &r->op, "fi_trecv (withdraw)",
                             [r] { return static_cast<ssize_t>(post_control_recv(r)); });
    if (rc) {
        r->ctx->core->failures.report(r->ctx->core->rep, "fi_trecv (withdraw)", rc);
    }
}

} // namespace

void withdraw_open(efa_core *core) {
    const fi_info *ni = core->nic->info();
    if (!core->info.has_tagged || core->layout.seq_bits <= 1 ||
        (ni->domain_attr->mr_mode & FI_MR_LOCAL)) {
        core->rep.say(10, "held sends cannot be withdrawn here (no tags, no seq in the tag layout, "
                          "or local registration needed)");
        return;
    }
    // shm never completes a peek that finds nothing (docs/DESIGN.md, the
    // stand-ins' defects): the answer for a matched message would never
    // come, and the cancelling sender would wait for it.
    if (std::string(ni->fabric_attr->prov_name) == "shm") {
        core->rep.say(10, "held sends cannot be withdrawn on shm (a peek that finds nothing never "
                          "completes)");
        return;
    }
    for (int i = 0; i < core->nic->num_contexts(); ++i) {
        for (int k = 0; k < kRecvsPerContext; ++k) {
            auto *r = new ControlRecv{{}, core->nic->ctx(i), {}};
            r->op.complete = control_recv_done;
            r->op.rx_class = EFA_RX_INTERNAL;
            if (post_control_recv(r)) {
                delete r;
                return; // withdraw_on stays false; the posted ones close with the rest
            }
            core->withdraw_recvs.push_back(r);
        }
    }
    core->withdraw_on = true;
}

// After the endpoints are closed.
void withdraw_close(efa_core *core) {
    for (void *r : core->withdraw_recvs) {
        delete static_cast<ControlRecv *>(r);
    }
    core->withdraw_recvs.clear();
    for (void *w : core->withdraw_work) {
        auto *c = static_cast<Claim *>(w);
        free(c->scratch);
        delete c;
    }
    core->withdraw_work.clear();
    core->withdraws_out.clear();
    core->withdraw_on = false;
}

} // namespace efa

extern "C" bool efa_core_can_withdraw(const efa_core_t *core) {
    return core->withdraw_on;
}

extern "C" int efa_ctx_withdraw(efa_ctx_t *ctx, fi_addr_t dest, uint64_t tag, size_t len,
                                efa_withdraw_t *w) {
    efa_core *core = ctx->core;
    if (!core->withdraw_on) {
        return -FI_ENOSYS;
    }
    w->core = core;
    w->dest = dest;
    w->sent = static_cast<uint8_t *>(malloc(efa::kWire)); // (efa_withdraw_t.sent)
    if (nullptr == w->sent) {
        return -FI_ENOMEM;
    }
    w->parts = 3; // the request's send, the answer, the watch
    w->result = 0;
    w->send.complete = efa::request_sent;
    w->send.rx_class = EFA_RX_INTERNAL;
    w->watch.complete = efa::receiver_lost;
    w->watch.tracker = nullptr;
    {
        std::lock_guard<std::mutex> guard(core->withdraw_lock);
        w->id = core->withdraw_next_id++;
        core->withdraws_out.emplace(w->id, w);
    }
    efa::put64(w->wire, tag);
    efa::put64(w->wire + 8, w->id);
    efa::put64(w->wire + 16, len);
    memcpy(w->sent, w->wire, efa::kWire);
    int rc = efa_core_addr_watch(core, ctx, dest, &w->watch);
    if (rc) {
        {
            std::lock_guard<std::mutex> guard(core->withdraw_lock);
            core->withdraws_out.erase(w->id);
        }
        free(w->sent);
        w->sent = nullptr;
        return rc; // nothing holds w
    }
    rc = efa_ctx_tsend(ctx, w->sent, efa::kWire, nullptr, dest,
                       efa::control::kProbeTag | efa::control::kWithdrawBit | core->probe_id, 0,
                       &w->send);
    if (!rc) {
        return 0;
    }
    // The request did not go.  Its receiver lost meanwhile (another
    // thread): that answer took the withdrawal, and the send's part is the
    // last.  Else a watch that ends here leaves w to the caller; one whose
    // call is due (the receiver just lost) ends the withdrawal with this
    // error when it comes, and w stays the core's till then.
    if (efa::take(core, w->id) != w) {
        efa::part_done(w); // the send's part: done() now
        return 0;
    }
    if (efa_core_peer_unwatch(core, &w->watch)) {
        free(w->sent); // (nothing was sent: nobody holds it)
        w->sent = nullptr;
        return rc;
    }
    w->result = rc;
    efa::part_done(w); // the send's part
    efa::part_done(w); // the answer's (the watch's part is held)
    return 0;
}
