// Read rendezvous under the provider's matching (efa_core_rdv.h).
//
// The provider's tagged path carries a message over one NIC.  A message
// from stripe_min to a peer reached over several rails goes instead as:
//  1. a note, one of the core's control messages (control_tags.hpp), that
//     names the message by its whole tag and gives its length, the
//     sender's registered buffer and its key on every NIC of the sender;
//  2. right after it, in the order of the sender's other messages, the
//     tagged message itself, with no bytes, its tag's rendezvous bit set
//     (efa_tag.h).  The provider matches it as it matches any message
//     (every receive ignores the seq field), so MPI's order holds;
//  3. the receive that matched it finds the note (or waits for it: the
//     control receives may take it later than the user's receive takes
//     the message), reads the bytes, striped over the rails
//     (rail_read.cpp), and answers the sender (fin), whose send then
//     completes.  A receive that fails answers too, with its error.
// A probe that finds such a message learns its length from the note.
//
// Notes wait here by (the sender's probe id, the message's tag) until
// their message is received (a receiver may meet its sender first by that
// message: pml cm adds a peer when it first needs it); a message withdrawn
// at the receiver (core_withdraw.cpp) takes its note away.
//
// The waits are watches on the peer (the receiver's answer, the sender's
// note); a watch whose peer was declared lost may still call after its
// owner ended it, so each holds a share of its object until it has.
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "control_tags.hpp"
#include "control_wire.hpp"
#include "core_rdv.hpp"

namespace efa {

namespace {

using control::kFinBit;
using control::kProbeTag;
using control::kRdvBit;
using control::kRdvIgnore;
using control::RdvMsg;

constexpr int kRecvsPerContext = 4;
constexpr size_t kNote = control::kRdvNoteBytes;
static_assert(sizeof(efa_rdv_offer_t::wire) == kNote);

void put64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, sizeof(v));
}

// The receiver and tag of an offer (RdvState::offered).
std::pair<fi_addr_t, uint64_t> offered_as(const efa_rdv_offer_t *o) {
    uint64_t tag;
    memcpy(&tag, o->wire + 8, sizeof(tag));
    return {o->dest, tag};
}

} // namespace

namespace {

RdvState *state(efa_core *core) {
    return core->rdv;
}

// --- the sender's side ---

efa_rdv_offer_t *offer_of(efa_op_t *op, size_t offset) {
    return reinterpret_cast<efa_rdv_offer_t *>(reinterpret_cast<char *>(op) - offset);
}

void part_done(efa_rdv_offer_t *o) {
    if (__atomic_sub_fetch(&o->parts, 1, __ATOMIC_ACQ_REL) == 0) {
        free(o->sent); // (the note's send has completed: its part came)
        o->sent = nullptr;
        o->done(o, o->result);
    }
}

// Offer 'id', taken out of the table by this call (nullptr: another took
// it, or there is none): whoever takes it settles it, once.  answered: the
// receiver's answer, so its note was taken with the message; otherwise the
// note may still reach the receiver and wait there (a message that failed
// or was withdrawn after it), where it would pair with the next message
// of that tag once the seq wraps: that receiver and tag stay offered, and
// such messages go their plain way.
efa_rdv_offer_t *take_offer(efa_core *core, uint64_t id, bool answered) {
    std::lock_guard<std::mutex> guard(state(core)->lock);
    auto it = state(core)->offers.find(id);
    if (it == state(core)->offers.end()) {
        return nullptr;
    }
    efa_rdv_offer_t *o = it->second;
    state(core)->offers.erase(it);
    if (answered) {
        state(core)->offered.erase(offered_as(o));
    }
    return o;
}

// The answer (the receiver's, its loss, the end the owner declares, the
// note's failure) for an offer this call took.  The offer has three parts:
// the note's send, the answer, and the watch, given back by the watch's
// own call or when it ends without one (a call still due gives it back
// when it comes, receiver_lost).
void settle(efa_rdv_offer_t *o, int result, bool from_watch) {
    o->result = result;
    if (from_watch || efa_core_peer_unwatch(o->core, &o->watch)) {
        part_done(o); // the watch's part (never the last: the answer's is held)
    }
    part_done(o);
}

// The note goes from a copy of the core's (efa_rdv_offer_t.sent), which
// outlives the offer where the provider still holds it (note_sent).
int post_note(efa_rdv_offer_t *o) {
    // (a retry after an orphaned send, whose copy was kept: a fresh one)
    if (nullptr == o->sent && nullptr == (o->sent = static_cast<uint8_t *>(malloc(kNote)))) {
        return -FI_ENOMEM;
    }
    memcpy(o->sent, o->wire, kNote);
    return efa_ctx_tsend(o->ctx, o->sent, kNote, nullptr, o->dest,
                         kProbeTag | kRdvBit | o->core->probe_id, 0, &o->note);
}

// The note's send completed.  One that failed goes again, up to
// kNoteTries in all, while the receiver is not lost: its message is at
// the receiver, whose receive waits for the note while this process lives.
// Failing every time, the offer ends with the error (and that receive
// waits until this process is gone: said).
constexpr int kNoteTries = 4;
void note_sent(efa_op_t *op, const efa_cqe_t *cqe) {
    efa_rdv_offer_t *o = offer_of(op, offsetof(efa_rdv_offer_t, note));
    if (cqe->orphaned) {
        keep_for_exit(o->sent); // the provider may still read it (72 bytes)
        o->sent = nullptr;
    }
    if (cqe->err && ++o->note_tries < kNoteTries && !deadline_refuses(o->ctx, o->dest)) {
        if (0 == post_note(o)) {
            return;
        }
    }
    if (cqe->err) {
        o->core->rep.say(1, std::string("rendezvous: a note failed ") +
                                std::to_string(o->note_tries) + " time(s) (" +
                                fi_strerror(-cqe->err) +
                                "); the send fails, its receiver waits for this process's end");
        if (take_offer(o->core, o->id, false)) {
            settle(o, cqe->err, false); // no answer will come
        }
    }
    part_done(o);
}

void receiver_lost(efa_op_t *op, const efa_cqe_t *cqe) {
    efa_rdv_offer_t *o = offer_of(op, offsetof(efa_rdv_offer_t, watch));
    if (take_offer(o->core, o->id, false)) {
        settle(o, cqe->err ? cqe->err : -FI_EHOSTUNREACH, true);
    } else {
        part_done(o); // settled before this call came: the watch's part
    }
}

// An answer to offer 'id' from src: only the receiver of the note may give it.
void on_fin(efa_core *core, const RdvMsg &m, fi_addr_t src) {
    fi_addr_t dest;
    {
        std::lock_guard<std::mutex> guard(state(core)->lock);
        auto it = state(core)->offers.find(m.id);
        if (it == state(core)->offers.end()) {
            return; // settled already (the receiver's loss), or no such offer
        }
        dest = it->second->dest; // (the offer is not used outside the lock until taken)
    }
    if (!efa_core_source_ok(core, src, dest, "a rendezvous answer")) {
        return;
    }
    if (efa_rdv_offer_t *o = take_offer(core, m.id, true)) {
        settle(o, m.result, false);
    }
}

// The receives for notes and answers, posted again as each completes.
struct ControlRecv {
    efa_op_t op;
    efa_ctx *ctx;
    uint8_t buf[kNote];
};

int post_control_recv(ControlRecv *r) {
    return static_cast<int>(fi_trecv(r->ctx->ep, r->buf, kNote, nullptr, FI_ADDR_UNSPEC,
                                     kProbeTag | kRdvBit, kRdvIgnore, &r->op.fi_ctx));
}

void control_recv_done(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *r = reinterpret_cast<ControlRecv *>(op);
    if (cqe->err == -FI_ECANCELED) {
        return;
    }
    if (!cqe->err) {
        const RdvMsg m = control::parse_rdv(cqe->tag, r->buf, cqe->len < kNote ? cqe->len : kNote);
        if (m.kind == RdvMsg::kFin) {
            on_fin(r->ctx->core, m, cqe->src);
        } else if (m.kind == RdvMsg::kNote) {
            rdv_on_note(r->ctx, m, cqe->src);
        }
    }
    int rc = repost_standing(r->ctx, &r->op, "fi_trecv (rendezvous)",
                             [r] { return static_cast<ssize_t>(post_control_recv(r)); });
    if (rc) {
        r->ctx->core->failures.report(r->ctx->core->rep, "fi_trecv (rendezvous)", rc);
    }
}

// 0, or the error of a receive for notes that could not be posted: then
// this process could not answer what peers send it, and does not open.
int rdv_open(efa_core *core) {
    if (!core->withdraw_on || !core->info.has_rma) {
        core->rep.say(10, "no read rendezvous here (it needs what withdrawing needs, and FI_RMA)");
        return 0;
    }
    core->rdv = new RdvState;
    for (int i = 0; i < core->nic->num_contexts(); ++i) {
        for (int k = 0; k < kRecvsPerContext; ++k) {
            auto *r = new ControlRecv{{}, core->nic->ctx(i), {}};
            r->op.complete = control_recv_done;
            r->op.rx_class = EFA_RX_INTERNAL;
            const int rc = post_control_recv(r);
            if (rc) {
                delete r;
                core->rep.help("rdv-not-opened", "fi_trecv", fi_strerror(-rc));
                return rc;
            }
            core->rdv->recvs.push_back(r);
        }
    }
    core->rdv_on = true;
    return 0;
}

} // namespace

// Withdraw requests and rendezvous notes are the core's control messages:
// both carry the probe id, so after deadline_open.
int control_open(efa_core *core) {
    withdraw_open(core);
    return rdv_open(core);
}

// After the endpoints are closed: nothing completes any more.
void control_close(efa_core *core) {
    withdraw_close(core);
    if (RdvState *st = state(core)) {
        // (The test harness reads this line.)
        core->rep.say(1, "read rendezvous: " + std::to_string(st->sent) + " messages sent, " +
                             std::to_string(st->read) + " read (" + std::to_string(st->read_bytes) +
                             " bytes), " + std::to_string(st->failed) + " failed" +
                             (st->through_host
                                  ? ", " + std::to_string(st->through_host) +
                                        " read again through the host (a device buffer the "
                                        "provider would not take)"
                                  : std::string()));
        for (void *r : st->recvs) {
            delete static_cast<ControlRecv *>(r);
        }
        rdv_orphan_takes(st);
        delete st;
        core->rdv = nullptr;
    }
    core->rdv_on = false;
}

} // namespace efa

extern "C" bool efa_core_can_rdv(const efa_core_t *core) {
    return core->rdv_on;
}

extern "C" int efa_ctx_rdv_offer(efa_ctx_t *ctx, fi_addr_t dest, uint64_t tag, uint64_t data,
                                 efa_mr_t *mr, const void *buf, size_t len, efa_op_t *tagged,
                                 efa_rdv_offer_t *o) {
    efa_core *core = ctx->core;
    if (!core->rdv_on) {
        return -FI_ENOSYS;
    }
    const auto addr = reinterpret_cast<uintptr_t>(buf);
    const int rails = efa_mr_rails(mr) < 4 ? efa_mr_rails(mr) : 4;
    o->core = core;
    o->ctx = ctx;
    o->dest = dest;
    o->note_tries = 0;
    // (the note's copy first: without memory for it the message goes its
    // plain way, as the owner takes -FI_ENOMEM, nothing offered yet)
    o->sent = static_cast<uint8_t *>(malloc(efa::kNote));
    if (nullptr == o->sent) {
        return -FI_ENOMEM;
    }
    o->parts = 3; // the note's send, the answer, the watch
    o->result = 0;
    o->note.complete = efa::note_sent;
    o->note.rx_class = EFA_RX_INTERNAL;
    o->watch.complete = efa::receiver_lost;
    o->watch.tracker = nullptr;
    memset(o->wire, 0, sizeof(o->wire));
    efa::put64(o->wire + 8, tag);
    {
        std::lock_guard<std::mutex> guard(core->rdv->lock);
        // An older message of this tag to this receiver still waits for
        // its answer (the seq wrapped): the receiver could not tell the
        // two notes apart.  The owner sends this one its plain way.
        if (!core->rdv->offered.insert(efa::offered_as(o)).second) {
            free(o->sent);
            o->sent = nullptr;
            return -FI_EALREADY;
        }
        o->id = core->rdv->next_id++;
        core->rdv->offers.emplace(o->id, o);
        ++core->rdv->sent;
    }
    efa::put64(o->wire, o->id);
    efa::put64(o->wire + 16, len);
    efa::put64(o->wire + 24, core->info.mr_virt_addr ? addr : addr - efa_mr_base(mr));
    efa::put64(o->wire + 32, static_cast<uint64_t>(rails));
    for (int k = 0; k < rails; ++k) {
        efa::put64(o->wire + 40 + 8 * k, 0 == k ? efa_mr_key(mr) : efa_mr_rail_key(mr, k));
    }
    int rc = efa_core_addr_watch(core, ctx, dest, &o->watch);
    if (rc) { // the receiver is lost already: nothing was armed or sent
        {
            std::lock_guard<std::mutex> guard(core->rdv->lock);
            core->rdv->offers.erase(o->id);
            core->rdv->offered.erase(efa::offered_as(o));
            --core->rdv->sent;
        }
        free(o->sent);
        o->sent = nullptr;
        return rc;
    }
    // The note, and at once the message: the sender's order is MPI's.  A
    // post that fails ends the offer with its error, which the owner hears
    // as the message's (nothing of it left this process).
    rc = efa::post_note(o);
    const bool noted = 0 == rc;
    if (noted) {
        rc = efa_ctx_tsend(ctx, nullptr, 0, nullptr, dest, tag, data, tagged);
    }
    if (rc) {
        efa_cqe_t failed{rc, FI_SEND | FI_TAGGED, 0, 0, 0, 0, FI_ADDR_NOTAVAIL, false, false};
        if (efa::take_offer(core, o->id, false)) {
            efa::settle(o, rc, false);
        }
        if (!noted) {
            efa::part_done(o); // the note's part
        }
        tagged->complete(tagged, &failed); // (efa_rdv_offer_end then finds it settled)
    }
    return 0;
}

extern "C" void efa_rdv_offer_end(efa_rdv_offer_t *o, int err) {
    if (o->core->rdv_on && efa::take_offer(o->core, o->id, false)) {
        efa::settle(o, err, false);
    }
}
