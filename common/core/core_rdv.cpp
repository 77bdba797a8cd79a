// Read rendezvous under the provider's matching (efa_core.h).
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
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "control_tags.hpp"
#include "control_wire.hpp"
#include "core.hpp"

namespace efa {

namespace {

using control::kFinBit;
using control::kProbeTag;
using control::kRdvBit;
using control::kRdvIgnore;
using control::RdvMsg;

constexpr int kRecvsPerContext = 4;
constexpr size_t kNote = control::kRdvNoteBytes;
constexpr size_t kFin = control::kRdvFinBytes;
static_assert(sizeof(efa_rdv_offer_t::wire) == kNote);

void put64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, sizeof(v));
}

using Key = std::pair<uint64_t, uint64_t>; // the sender's probe id, the message's tag

struct Take;

// A note as it arrived, and where from as the provider says.
struct Note {
    RdvMsg m;
    fi_addr_t src;
};

} // namespace

// The core's rendezvous state, under 'lock'.
struct RdvState {
    std::mutex lock;
    uint64_t next_id = 1;
    std::vector<void *> recvs;                               // the control receives
    std::unordered_map<uint64_t, efa_rdv_offer_t *> offers;  // sent, waiting for the answer
    std::map<Key, std::deque<Note>> notes;                   // here, their message not yet taken
    std::map<Key, std::deque<Take *>> waiting;               // taken, their note not yet here
    std::unordered_set<Take *> takes;                        // every receive in progress
    uint64_t sent = 0, read = 0, read_bytes = 0, failed = 0; // for the report at close
};

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
        o->done(o, o->result);
    }
}

// The answer (the receiver's, its loss, the end the owner declares, the
// note's failure): taken once, by whichever comes first; false when it was
// taken already.  Outside the watch's own call the watch is ended, and one
// whose call is still due holds a part until it comes (receiver_lost):
// that part is taken before the offer can be found settled.
bool settle(efa_rdv_offer_t *o, int result, bool from_watch) {
    efa_core *core = o->core;
    if (!from_watch) {
        __atomic_add_fetch(&o->parts, 1, __ATOMIC_ACQ_REL);
    }
    bool mine;
    {
        std::lock_guard<std::mutex> guard(state(core)->lock);
        mine = state(core)->offers.erase(o->id) != 0;
    }
    if (!mine) {
        if (!from_watch) {
            part_done(o); // (the part taken above)
        }
        return false;
    }
    o->result = result;
    if (!from_watch && efa_core_peer_unwatch(core, &o->watch)) {
        __atomic_sub_fetch(&o->parts, 1, __ATOMIC_ACQ_REL); // no call will come (the answer's part
                                                            // is still held: never the last)
    }
    part_done(o);
    return true;
}

int post_note(efa_rdv_offer_t *o) {
    return efa_ctx_tsend(o->ctx, o->wire, kNote, nullptr, o->dest,
                         kProbeTag | kRdvBit | o->core->probe_id, 0, &o->note);
}

// The note's send completed.  One that failed goes once more (its message
// is at the receiver, whose receive waits for it while this process
// lives); failing again, the offer ends with the error.
void note_sent(efa_op_t *op, const efa_cqe_t *cqe) {
    efa_rdv_offer_t *o = offer_of(op, offsetof(efa_rdv_offer_t, note));
    if (cqe->err && !o->note_again) {
        o->note_again = true;
        o->core->rep.say(1, std::string("rendezvous: a note failed (") + fi_strerror(-cqe->err) +
                                "), sent again");
        if (0 == post_note(o)) {
            return;
        }
    }
    if (cqe->err) {
        settle(o, cqe->err, false); // no answer will come
    }
    part_done(o);
}

void receiver_lost(efa_op_t *op, const efa_cqe_t *cqe) {
    efa_rdv_offer_t *o = offer_of(op, offsetof(efa_rdv_offer_t, watch));
    if (!settle(o, cqe->err ? cqe->err : -FI_EHOSTUNREACH, true)) {
        part_done(o); // settled before this call came: its part is given back
    }
}

// An answer to offer 'id' from src: only the receiver of the note may give it.
void on_fin(efa_core *core, const RdvMsg &m, fi_addr_t src) {
    efa_rdv_offer_t *o = nullptr;
    {
        std::lock_guard<std::mutex> guard(state(core)->lock);
        auto it = state(core)->offers.find(m.id);
        if (it == state(core)->offers.end()) {
            return; // settled already (the receiver's loss), or no such offer
        }
        o = it->second;
    }
    if (efa_core_source_ok(core, src, o->dest, "a rendezvous answer")) {
        settle(o, m.result, false);
    }
}

// --- the receiver's side ---

// A receive that matched a rendezvous message: waiting for its note, then
// reading (or only answering, when declined), then answering.  Shares: the
// owner's path, and the watch while it may still call.
struct Take {
    efa_op_t watch; // the sender, while the note is due
    efa_ctx *ctx;
    efa_peer_t *peer;
    fi_addr_t from; // the sender's address on ctx
    Key key;
    void *buf;
    size_t len;
    void (*done)(void *arg, int err, size_t msg_len); // nullptr: declined
    void *arg;
    int decline_err = 0;
    Note note{};
    efa_rail_read_t *read = nullptr;
    bool started = false; // its note was found (under the lock)
    int shares = 1;
};

void take_put(Take *t) {
    if (__atomic_sub_fetch(&t->shares, 1, __ATOMIC_ACQ_REL) == 0) {
        delete t;
    }
}

// The answer to a note, in flight on its own: the receive may complete
// (and its memory go) before the provider completes this send.
struct Fin {
    efa_op_t op;
    uint8_t wire[kFin];
};

void fin_sent(efa_op_t *op, const efa_cqe_t *cqe) {
    (void)cqe; // a lost answer shows at the sender: its watch ends the wait
    delete reinterpret_cast<Fin *>(op);
}

void answer(efa_ctx *ctx, fi_addr_t to, uint64_t id, int result) {
    efa_core *core = ctx->core;
    if (deadline_refuses(ctx, to)) {
        return; // the sender is lost: nobody waits for this
    }
    auto *f = new (std::nothrow) Fin{};
    if (!f) {
        core->rep.say(1, "rendezvous: out of memory for an answer; the sender waits for its peer "
                         "deadline");
        return;
    }
    put64(f->wire, id);
    put64(f->wire + 8, static_cast<uint64_t>(static_cast<int64_t>(result)));
    f->op.complete = fin_sent;
    f->op.rx_class = EFA_RX_INTERNAL;
    int rc = efa_ctx_tsend(ctx, f->wire, kFin, nullptr, to,
                           kProbeTag | kRdvBit | kFinBit | core->probe_id, 0, &f->op);
    if (rc) {
        core->failures.report(core->rep, "fi_tsend (rendezvous answer)", rc);
        delete f;
    }
}

void take_end(Take *t, int err) {
    efa_core *core = t->ctx->core;
    // A read the provider cancelled is no withdrawal: neither side may
    // read it as one.
    if (-FI_ECANCELED == err) {
        err = -FI_EIO;
    }
    {
        std::lock_guard<std::mutex> guard(state(core)->lock);
        state(core)->takes.erase(t);
        if (err || !t->done) {
            ++state(core)->failed;
        } else {
            ++state(core)->read;
            state(core)->read_bytes += t->note.m.len < t->len ? t->note.m.len : t->len;
        }
    }
    answer(t->ctx, t->from, t->note.m.id, t->done ? err : t->decline_err);
    if (t->done) {
        t->done(t->arg, err, t->note.m.len);
    }
    take_put(t);
}

void read_done(void *arg, int err) {
    take_end(static_cast<Take *>(arg), err);
}

// The note is here (t->note, t->started): read what fits.
void take_start(Take *t) {
    efa_core *core = t->ctx->core;
    if (!t->done) {
        take_end(t, 0); // declined: the answer alone
        return;
    }
    const RdvMsg &m = t->note.m;
    const size_t n = m.len < t->len ? m.len : t->len;
    if (0 == n) {
        take_end(t, 0);
        return;
    }
    efa_rail_read_req_t r{};
    r.peer = t->peer;
    r.ctx_index = t->ctx->index;
    r.buf = t->buf;
    r.len = n;
    r.raddr = m.addr;
    r.rkeys = m.rkeys;
    for (int k = 0; k < 4; ++k) {
        r.rkey[k] = m.rkey[k];
    }
    r.done = read_done;
    r.arg = t;
    const int rc = efa_core_rail_read(core, &r, &t->read);
    if (rc) {
        take_end(t, rc);
    }
}

// The watch's share: given back by its call, or when it ended without one.
void end_watch(Take *t) {
    if (efa_core_peer_unwatch(t->ctx->core, &t->watch)) {
        take_put(t);
    }
}

void sender_lost(efa_op_t *op, const efa_cqe_t *cqe) {
    Take *t = reinterpret_cast<Take *>(op);
    efa_core *core = t->ctx->core;
    {
        std::lock_guard<std::mutex> guard(state(core)->lock);
        if (t->started) {
            take_put(t); // its note came first: the reads tell
            return;
        }
        auto it = state(core)->waiting.find(t->key);
        if (it != state(core)->waiting.end()) {
            std::erase(it->second, t);
            if (it->second.empty()) {
                state(core)->waiting.erase(it);
            }
        }
        state(core)->takes.erase(t);
        ++state(core)->failed;
    }
    if (t->done) {
        t->done(t->arg, cqe->err ? cqe->err : -FI_EHOSTUNREACH, 0);
    }
    take_put(t); // the watch's
    take_put(t); // the owner's path
}

// The sender's address on ctx, from the probe id a note carries
// (FI_ADDR_NOTAVAIL: not a peer of this process yet).
fi_addr_t sender_addr(efa_ctx *ctx, uint64_t probe_id) {
    efa_core *core = ctx->core;
    std::lock_guard<std::mutex> guard(core->peers_lock);
    auto range = core->peers_by_probe_id.equal_range(probe_id);
    for (auto i = range.first; i != range.second; ++i) {
        if (ctx->index < i->second->num_addrs) {
            return i->second->addr[ctx->index];
        }
    }
    return FI_ADDR_NOTAVAIL;
}

void on_note(efa_ctx *ctx, const RdvMsg &m, fi_addr_t src) {
    // Where the provider says who sent it and the process it names is
    // known, the two must agree: another process's note is dropped (said).
    if (!efa_core_source_ok(ctx->core, src, sender_addr(ctx, m.sender), "a rendezvous note")) {
        return;
    }
    RdvState *st = state(ctx->core);
    const Key key{m.sender, m.tag};
    Take *t = nullptr;
    {
        std::lock_guard<std::mutex> guard(st->lock);
        auto it = st->waiting.find(key);
        if (it == st->waiting.end()) {
            st->notes[key].push_back({m, src});
            return;
        }
        t = it->second.front();
        it->second.pop_front();
        if (it->second.empty()) {
            st->waiting.erase(it);
        }
        t->note = {m, src};
        t->started = true;
    }
    end_watch(t);
    take_start(t);
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
            on_note(r->ctx, m, cqe->src);
        }
    }
    int rc = post_control_recv(r);
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
                             " bytes), " + std::to_string(st->failed) + " failed");
        for (void *r : st->recvs) {
            delete static_cast<ControlRecv *>(r);
        }
        for (Take *t : st->takes) {
            if (t->read) {
                efa_rail_read_orphan(t->read);
            }
        }
        delete st;
        core->rdv = nullptr;
    }
    core->rdv_on = false;
}

// A withdrawn message with this tag of the process with probe id
// 'requester' (core_withdraw.cpp): its note is dropped.  (Its note went
// before it, so it is here, or waiting in the provider for a control
// receive: such a note would stay unclaimed, with a tag no later message
// of that sender carries until its seq wraps.)
void rdv_withdrawn(efa_core *core, uint64_t requester, uint64_t tag) {
    RdvState *st = state(core);
    if (!st || !(tag & efa_tag_rdv_bit(&core->layout))) {
        return;
    }
    std::lock_guard<std::mutex> guard(st->lock);
    auto it = st->notes.find(Key{requester, tag});
    if (it != st->notes.end()) {
        it->second.pop_front();
        if (it->second.empty()) {
            st->notes.erase(it);
        }
    }
}

// The probe id of a peer, as its notes carry it (a hash of its blob).
uint64_t probe_id_of_peer(efa_core *core, efa_peer_t *peer) {
    std::lock_guard<std::mutex> guard(core->peers_lock);
    auto idx = core->peer_index.find(peer);
    return idx == core->peer_index.end()
               ? 0
               : probe_id_of(idx->second->first.data(), idx->second->first.size());
}

// A receive of ctx takes the message with 'tag' of peer: done == nullptr
// declines it (answers err).  0, or nothing will be called.
int rdv_take(efa_ctx *ctx, efa_peer_t *peer, uint64_t tag, void *buf, size_t len,
             void (*done)(void *, int, size_t), void *arg, int decline_err) {
    efa_core *core = ctx->core;
    if (!core->rdv_on || ctx->index >= peer->num_addrs) {
        return -FI_ENOSYS;
    }
    auto *t = new (std::nothrow) Take{};
    if (!t) {
        core->rep.say(1, "rendezvous: out of memory for a receive; its sender waits for its peer "
                         "deadline");
        return -FI_ENOMEM;
    }
    t->watch.complete = sender_lost;
    t->ctx = ctx;
    t->peer = peer;
    t->from = peer->addr[ctx->index];
    t->key = {probe_id_of_peer(core, peer), tag};
    t->buf = buf;
    t->len = len;
    t->done = done;
    t->arg = arg;
    t->decline_err = decline_err;
    RdvState *st = core->rdv;
    bool wait = false;
    for (bool bad = true; bad && !wait;) {
        {
            std::lock_guard<std::mutex> guard(st->lock);
            st->takes.insert(t);
            auto it = st->notes.find(t->key);
            if (it == st->notes.end()) {
                st->waiting[t->key].push_back(t);
                t->shares = 2; // and the watch's, armed next
                wait = true;
                break;
            }
            t->note = it->second.front();
            it->second.pop_front();
            if (it->second.empty()) {
                st->notes.erase(it);
            }
        }
        // A note kept before its sender was known to this process is
        // checked now: another process's is dropped (said), and the
        // sender's own is still to come.
        bad = !efa_core_source_ok(core, t->note.src, t->from, "a rendezvous note");
    }
    if (!wait) {
        std::lock_guard<std::mutex> guard(st->lock);
        t->started = true;
    }
    if (wait) {
        // The sender's note went before its message: only its loss keeps
        // it away.  (A watch that fails at once calls sender_lost itself
        // through the deadline, or says the peer is gone: then end here.)
        if (efa_core_addr_watch(core, ctx, t->from, &t->watch) != 0) {
            efa_cqe_t lost{-FI_EHOSTUNREACH, 0, 0, 0, 0, 0, FI_ADDR_NOTAVAIL};
            sender_lost(&t->watch, &lost);
        }
        return 0;
    }
    take_start(t);
    return 0;
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
    o->note_again = false;
    o->parts = 2; // the note's send, and the answer
    o->result = 0;
    o->note.complete = efa::note_sent;
    o->note.rx_class = EFA_RX_INTERNAL;
    o->watch.complete = efa::receiver_lost;
    o->watch.tracker = nullptr;
    {
        std::lock_guard<std::mutex> guard(core->rdv->lock);
        o->id = core->rdv->next_id++;
        core->rdv->offers.emplace(o->id, o);
        ++core->rdv->sent;
    }
    memset(o->wire, 0, sizeof(o->wire));
    efa::put64(o->wire, o->id);
    efa::put64(o->wire + 8, tag);
    efa::put64(o->wire + 16, len);
    efa::put64(o->wire + 24, core->info.mr_virt_addr ? addr : addr - efa_mr_base(mr));
    efa::put64(o->wire + 32, static_cast<uint64_t>(rails));
    for (int k = 0; k < rails; ++k) {
        efa::put64(o->wire + 40 + 8 * k, 0 == k ? efa_mr_key(mr) : efa_mr_rail_key(mr, k));
    }
    int rc = efa_core_addr_watch(core, ctx, dest, &o->watch);
    if (rc) { // the receiver is lost already: nothing was armed or sent
        std::lock_guard<std::mutex> guard(core->rdv->lock);
        core->rdv->offers.erase(o->id);
        --core->rdv->sent;
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
        efa_cqe_t failed{rc, FI_SEND | FI_TAGGED, 0, 0, 0, 0, FI_ADDR_NOTAVAIL};
        efa::settle(o, rc, false);
        if (!noted) {
            efa::part_done(o); // the note's part
        }
        tagged->complete(tagged, &failed);
    }
    return 0;
}

extern "C" void efa_rdv_offer_end(efa_rdv_offer_t *o, int err) {
    if (o->core->rdv_on) { // (an offer was made only then)
        efa::settle(o, err, false);
    }
}

extern "C" int efa_ctx_rdv_take(efa_ctx_t *ctx, efa_peer_t *peer, uint64_t tag, void *buf,
                                size_t len, void (*done)(void *arg, int err, size_t msg_len),
                                void *arg) {
    if (!done) {
        return -FI_EINVAL; // (a receive that declines calls efa_ctx_rdv_decline)
    }
    const int rc = efa::rdv_take(ctx, peer, tag, buf, len, done, arg, 0);
    if (rc) {
        efa_ctx_rdv_decline(ctx, peer, tag, rc); // the sender hears it, if anything can
    }
    return rc;
}

extern "C" void efa_ctx_rdv_decline(efa_ctx_t *ctx, efa_peer_t *peer, uint64_t tag, int err) {
    (void)efa::rdv_take(ctx, peer, tag, nullptr, 0, nullptr, nullptr, err ? err : -FI_EIO);
}

extern "C" int efa_ctx_rdv_len(efa_ctx_t *ctx, efa_peer_t *peer, uint64_t tag, size_t *len) {
    efa_core *core = ctx->core;
    if (!core->rdv_on || ctx->index >= peer->num_addrs) {
        return -FI_ENOSYS;
    }
    const efa::Key key{efa::probe_id_of_peer(core, peer), tag};
    {
        std::lock_guard<std::mutex> guard(core->rdv->lock);
        auto it = core->rdv->notes.find(key);
        if (it != core->rdv->notes.end()) {
            *len = it->second.front().m.len;
            return 0;
        }
    }
    return efa::deadline_refuses(ctx, peer->addr[ctx->index]) ? -FI_EHOSTUNREACH : -FI_EAGAIN;
}
