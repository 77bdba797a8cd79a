// Read rendezvous under the provider's matching (efa_core.h).
//
// The provider's tagged path carries a message over one NIC.  A message
// from stripe_min to a peer reached over several rails goes instead as:
//  1. a note, one of the core's control messages (control_tags.hpp), that
//     names the message by its seq and gives its length, the sender's
//     registered buffer and its key on every NIC of the sender;
//  2. the tagged message itself, with no bytes, its tag's rendezvous bit
//     set and the same seq (efa_tag.h).  The provider matches it as it
//     matches any message (every receive ignores the seq field), so MPI's
//     order holds;
//  3. the receive that matched it finds the note (or waits for it: the
//     provider may deliver the two in either order), reads the bytes,
//     striped over the rails (rail_read.cpp), and answers the sender (fin),
//     whose send then completes.
// A probe that finds such a message learns its length from the note.
//
// Notes wait here by (the sender's probe id, seq) until their message is
// received (a receiver may meet its sender first by that message: pml cm
// adds a peer when it first needs it); a message withdrawn at the receiver
// (core_withdraw.cpp) takes its note away, or leaves word to drop it when
// it comes.  The sender's
// wait for the answer is a watch on the receiver: its loss ends the send.
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <set>
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

using Key = std::pair<uint64_t, uint32_t>; // the sender's probe id, the message's seq

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
    std::map<Key, std::deque<Note>> notes;                   // here, their message not yet received
    std::map<Key, std::deque<Take *>> waiting;               // received, their note not yet here
    std::set<Key> dropped;                                   // withdrawn before their note came
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

// The answer (the receiver's, its loss, a withdrawal, the note's failure):
// taken once, by whichever comes first.
void settle(efa_core *core, uint64_t id, int result) {
    efa_rdv_offer_t *o = nullptr;
    {
        std::lock_guard<std::mutex> guard(state(core)->lock);
        auto it = state(core)->offers.find(id);
        if (it == state(core)->offers.end()) {
            return;
        }
        o = it->second;
        state(core)->offers.erase(it);
    }
    o->result = result;
    efa_core_peer_unwatch(core, &o->watch);
    part_done(o);
}

void note_sent(efa_op_t *op, const efa_cqe_t *cqe) {
    efa_rdv_offer_t *o = offer_of(op, offsetof(efa_rdv_offer_t, note));
    if (cqe->err) {
        settle(o->core, o->id, cqe->err); // no answer will come
    }
    part_done(o);
}

void receiver_lost(efa_op_t *op, const efa_cqe_t *cqe) {
    efa_rdv_offer_t *o = offer_of(op, offsetof(efa_rdv_offer_t, watch));
    settle(o->core, o->id, cqe->err ? cqe->err : -FI_EHOSTUNREACH);
}

// An answer to offer 'id' from src: only the receiver of the note may give it.
void on_fin(efa_core *core, const RdvMsg &m, fi_addr_t src) {
    fi_addr_t dest = FI_ADDR_NOTAVAIL;
    {
        std::lock_guard<std::mutex> guard(state(core)->lock);
        auto it = state(core)->offers.find(m.id);
        if (it == state(core)->offers.end()) {
            return; // settled already (the receiver's loss), or no such offer
        }
        dest = it->second->dest;
    }
    if (efa_core_source_ok(core, src, dest, "a rendezvous answer")) {
        settle(core, m.id, m.result);
    }
}

// --- the receiver's side ---

// A receive that matched a rendezvous message: waiting for its note, then
// reading, then answering.
struct Take {
    efa_op_t watch; // the sender, while the note is due
    efa_ctx *ctx;
    efa_peer_t *peer;
    fi_addr_t from; // the sender's address on ctx
    Key key;
    void *buf;
    size_t len;
    void (*done)(void *arg, int err, size_t msg_len);
    void *arg;
    Note note;
    efa_rail_read_t *read = nullptr;
    bool started = false; // its note was found (under the lock)
};

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
    {
        std::lock_guard<std::mutex> guard(state(core)->lock);
        state(core)->takes.erase(t);
        if (err) {
            ++state(core)->failed;
        } else {
            ++state(core)->read;
            state(core)->read_bytes += t->note.m.len < t->len ? t->note.m.len : t->len;
        }
    }
    answer(t->ctx, t->from, t->note.m.id, err);
    t->done(t->arg, err, t->note.m.len);
    delete t;
}

void read_done(void *arg, int err) {
    take_end(static_cast<Take *>(arg), err);
}

// The note is here (t->note): read what fits.
void take_start(Take *t) {
    efa_core *core = t->ctx->core;
    efa_core_peer_unwatch(core, &t->watch); // the reads are watched themselves
    if (!efa_core_source_ok(core, t->note.src, t->from, "a rendezvous note")) {
        take_end(t, -FI_EACCES); // another process wrote it: nothing is read
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

void sender_lost(efa_op_t *op, const efa_cqe_t *cqe) {
    Take *t = reinterpret_cast<Take *>(op);
    efa_core *core = t->ctx->core;
    {
        std::lock_guard<std::mutex> guard(state(core)->lock);
        if (t->started) {
            return; // its note came first: the reads tell
        }
        auto it = state(core)->waiting.find(t->key);
        if (it != state(core)->waiting.end()) {
            std::erase(it->second, t);
            if (it->second.empty()) {
                state(core)->waiting.erase(it);
            }
        }
        state(core)->takes.erase(t);
    }
    t->done(t->arg, cqe->err ? cqe->err : -FI_EHOSTUNREACH, 0);
    delete t;
}

void on_note(efa_ctx *ctx, const RdvMsg &m, fi_addr_t src) {
    RdvState *st = state(ctx->core);
    const Key key{m.sender, m.seq};
    Take *t = nullptr;
    {
        std::lock_guard<std::mutex> guard(st->lock);
        if (st->dropped.erase(key)) {
            return; // its message was withdrawn
        }
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
    take_start(t);
}

// The probe id of a peer, as its notes carry it (a hash of its blob).
uint64_t probe_id_of_peer(efa_core *core, efa_peer_t *peer) {
    std::lock_guard<std::mutex> guard(core->peers_lock);
    auto idx = core->peer_index.find(peer);
    return idx == core->peer_index.end()
               ? 0
               : probe_id_of(idx->second->first.data(), idx->second->first.size());
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

void rdv_open(efa_core *core) {
    const fi_info *ni = core->nic->info();
    if (!core->withdraw_on || !core->info.has_rma) {
        core->rep.say(10, "no read rendezvous here (it needs what withdrawing needs, and FI_RMA)");
        return;
    }
    (void)ni;
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
                return; // rdv_on stays false; the posted ones close with the rest
            }
            core->rdv->recvs.push_back(r);
        }
    }
    core->rdv_on = true;
}

} // namespace

// Withdraw requests and rendezvous notes are the core's control messages:
// both carry the probe id, so after deadline_open.
void control_open(efa_core *core) {
    withdraw_open(core);
    rdv_open(core);
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
            delete t;
        }
        delete st;
        core->rdv = nullptr;
    }
    core->rdv_on = false;
}

// A withdrawn message with this tag of the process with probe id
// 'requester' (core_withdraw.cpp): its note, here or still to come, is
// dropped.
void rdv_withdrawn(efa_core *core, uint64_t requester, uint64_t tag) {
    const efa_tag_codec_t codec = efa_tag_codec_make(&core->layout);
    RdvState *st = state(core);
    if (!st || !(tag & codec.rdv_bit)) {
        return;
    }
    const Key key{requester, efa_tag_codec_seq(&codec, tag)};
    std::lock_guard<std::mutex> guard(st->lock);
    auto it = st->notes.find(key);
    if (it == st->notes.end()) {
        st->dropped.insert(key);
        return;
    }
    it->second.pop_front();
    if (it->second.empty()) {
        st->notes.erase(it);
    }
}

} // namespace efa

extern "C" bool efa_core_can_rdv(const efa_core_t *core) {
    return core->rdv_on;
}

extern "C" int efa_ctx_rdv_offer(efa_ctx_t *ctx, fi_addr_t dest, uint32_t seq, efa_mr_t *mr,
                                 const void *buf, size_t len, efa_rdv_offer_t *o) {
    efa_core *core = ctx->core;
    if (!core->rdv_on) {
        return -FI_ENOSYS;
    }
    const auto addr = reinterpret_cast<uintptr_t>(buf);
    const int rails = efa_mr_rails(mr) < 4 ? efa_mr_rails(mr) : 4;
    o->core = core;
    o->dest = dest;
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
    efa::put64(o->wire + 8, seq);
    efa::put64(o->wire + 16, len);
    efa::put64(o->wire + 24, core->info.mr_virt_addr ? addr : addr - efa_mr_base(mr));
    efa::put64(o->wire + 32, static_cast<uint64_t>(rails));
    for (int k = 0; k < rails; ++k) {
        efa::put64(o->wire + 40 + 8 * k, 0 == k ? efa_mr_key(mr) : efa_mr_rail_key(mr, k));
    }
    int rc = efa_core_addr_watch(core, ctx, dest, &o->watch);
    if (!rc) {
        rc = efa_ctx_tsend(ctx, o->wire, efa::kNote, nullptr, dest,
                           efa::kProbeTag | efa::kRdvBit | core->probe_id, 0, &o->note);
        if (rc) {
            efa_core_peer_unwatch(core, &o->watch);
        }
    }
    if (rc) {
        std::lock_guard<std::mutex> guard(core->rdv->lock);
        core->rdv->offers.erase(o->id);
    }
    return rc;
}

extern "C" void efa_rdv_offer_withdrawn(efa_rdv_offer_t *o) {
    if (o->core->rdv_on) { // (an offer was made only then)
        efa::settle(o->core, o->id, -FI_ECANCELED);
    }
}

extern "C" int efa_ctx_rdv_take(efa_ctx_t *ctx, efa_peer_t *peer, uint32_t seq, void *buf,
                                size_t len, void (*done)(void *arg, int err, size_t msg_len),
                                void *arg) {
    efa_core *core = ctx->core;
    if (!core->rdv_on || ctx->index >= peer->num_addrs) {
        return -FI_ENOSYS;
    }
    auto *t = new (std::nothrow) efa::Take{};
    if (!t) {
        return -FI_ENOMEM;
    }
    t->watch.complete = efa::sender_lost;
    t->ctx = ctx;
    t->peer = peer;
    t->from = peer->addr[ctx->index];
    t->key = {efa::probe_id_of_peer(core, peer), seq};
    t->buf = buf;
    t->len = len;
    t->done = done;
    t->arg = arg;
    int rc = efa_core_addr_watch(core, ctx, t->from, &t->watch);
    if (rc) {
        delete t;
        return rc;
    }
    efa::RdvState *st = core->rdv;
    {
        std::lock_guard<std::mutex> guard(st->lock);
        st->takes.insert(t);
        auto it = st->notes.find(t->key);
        if (it == st->notes.end()) {
            st->waiting[t->key].push_back(t);
            return 0; // on_note starts it
        }
        t->note = it->second.front();
        it->second.pop_front();
        if (it->second.empty()) {
            st->notes.erase(it);
        }
        t->started = true;
    }
    efa::take_start(t);
    return 0;
}

extern "C" int efa_ctx_rdv_len(efa_ctx_t *ctx, efa_peer_t *peer, uint32_t seq, size_t *len) {
    efa_core *core = ctx->core;
    if (!core->rdv_on || ctx->index >= peer->num_addrs) {
        return -FI_ENOSYS;
    }
    const efa::Key key{efa::probe_id_of_peer(core, peer), seq};
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
