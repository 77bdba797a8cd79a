// Read rendezvous, the receiver's side (core_rdv.cpp says how it goes):
// a receive that matched a rendezvous message takes its note, or waits for
// it, reads the bytes striped over the rails (efa_core_rail_read) and
// answers the sender; probes learn a message's length from its note; a
// withdrawn message's note is dropped.  A read into a device buffer that
// the provider refuses goes again into a host buffer, copied on to the
// device.
#include <new>
#include <string>

#include <rdma/fi_errno.h>

#include "control_tags.hpp"
#include "core_rdv.hpp"
#include "efa_device.h"
#include "efa_stage.h"

namespace efa {

namespace {

using control::kFinBit;
using control::kProbeTag;
using control::kRdvBit;
using control::RdvMsg;
using Key = RdvKey;
using Note = RdvNote;
using Take = RdvTake;

constexpr size_t kFin = control::kRdvFinBytes;
constexpr const char *kReadIntoDevice =
    "common:efa fi_read (a rendezvous read into a device buffer)";

void put64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, sizeof(v));
}

RdvState *state(efa_core *core) {
    return core->rdv;
}

} // namespace

// A receive that matched a rendezvous message: waiting for its note, then
// reading (or only answering, when declined), then answering.  Shares: the
// owner's path, and the watch while it may still call.
struct RdvTake {
    efa_op_t watch; // the sender, while the note is due
    efa_ctx *ctx;
    efa_peer_t *peer;
    fi_addr_t from; // the sender's address on ctx
    Key key;
    void *buf;
    size_t len;
    efa_mr_t *mr = nullptr; // buf's registration where it needs one (device memory)
    void *host = nullptr;   // the provider refused mr: read into this, copied on to buf
    void (*done)(void *arg, int err, size_t msg_len); // nullptr: declined
    void *arg;
    int decline_err = 0;
    Note note{};
    efa_rail_read_t *read = nullptr;
    // Under the lock: in the tables (published), its note found (started),
    // or its sender lost before it was published (lost, the error).
    bool published = false, started = false;
    int lost = 0;
    int shares = 1;
};

namespace {

void take_put(Take *t) {
    if (__atomic_sub_fetch(&t->shares, 1, __ATOMIC_ACQ_REL) == 0) {
        delete t;
    }
}

// The answer to a note, in flight on its own: the receive may complete
// (and its memory go) before the provider completes this send.  The
// sender waits for it while this process lives (its watch ends the wait
// only once this process is lost), so one that fails goes again, up to
// kFinTries in all, while the sender is not lost.
struct Fin {
    efa_op_t op;
    efa_ctx *ctx;
    fi_addr_t to;
    int tries = 0;
    uint8_t wire[kFin];
};
constexpr int kFinTries = 4;

int post_fin(Fin *f) {
    return efa_ctx_tsend(f->ctx, f->wire, kFin, nullptr, f->to,
                         kProbeTag | kRdvBit | kFinBit | f->ctx->core->probe_id, 0, &f->op);
}

void fin_sent(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *f = reinterpret_cast<Fin *>(op);
    if (cqe->orphaned) {
        return; // the provider may still read f->wire: left to the process's end (a few bytes)
    }
    if (cqe->err && ++f->tries < kFinTries && !deadline_refuses(f->ctx, f->to) &&
        0 == post_fin(f)) {
        return;
    }
    if (cqe->err) {
        f->ctx->core->rep.say(1, std::string("rendezvous: an answer failed ") +
                                     std::to_string(f->tries) + " time(s) (" +
                                     fi_strerror(-cqe->err) +
                                     "); its sender waits for this process's end");
    }
    delete f;
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
    f->ctx = ctx;
    f->to = to;
    put64(f->wire, id);
    put64(f->wire + 8, static_cast<uint64_t>(static_cast<int64_t>(result)));
    f->op.complete = fin_sent;
    f->op.rx_class = EFA_RX_INTERNAL;
    const int rc = post_fin(f);
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

void read_done(void *arg, int err);

// The bytes that fit, read into 'into' (registered as mr, or nullptr).
int start_read(Take *t, void *into, efa_mr_t *mr) {
    const RdvMsg &m = t->note.m;
    efa_rail_read_req_t r{};
    r.ctx = t->ctx;
    r.addr = t->from;
    r.peer = t->peer;
    r.ctx_index = t->ctx->index;
    r.buf = into;
    r.len = m.len < t->len ? m.len : t->len;
    r.mr = mr; // (a device buffer's: striped over the rails it is registered on)
    r.raddr = m.addr;
    r.rkeys = m.rkeys;
    for (int k = 0; k < 4; ++k) {
        r.rkey[k] = m.rkey[k];
    }
    r.done = read_done;
    r.arg = t;
    return efa_core_rail_read(t->ctx->core, &r, &t->read);
}

// A read into a device buffer's registration failed with err, at its post
// (at_post: nothing went out) or in its completion: where err is the
// provider refusing memory, the bytes are read again (reads change
// nothing at the sender, which waits for the answer) into a host buffer,
// copied on to the device when they are in.  A refusal at the post names
// the memory for certain: it stops memory of its kind going to the
// provider (as one refused from the backlog does, in the rail read; a
// failure of a read the provider took may be the sender's key's doing).
// True: the read is out again, or the take has ended.
bool read_through_host(Take *t, int err, bool at_post) {
    efa_core *core = t->ctx->core;
    if (t->host || !device_registration(t->mr) || !refuses_memory(err)) {
        return false;
    }
    if (at_post) {
        (void)efa_core_mr_device_post_refused(core, t->mr, kReadIntoDevice, err);
    }
    const RdvMsg &m = t->note.m;
    void *host = efa_stage_get(m.len < t->len ? m.len : t->len);
    if (!host) {
        return false;
    }
    t->host = host;
    const int rc = start_read(t, host, nullptr);
    if (rc) {
        t->host = nullptr;
        efa_stage_free(host); // (nothing went out)
        take_end(t, rc);
        return true;
    }
    std::lock_guard<std::mutex> guard(state(core)->lock);
    ++state(core)->through_host; // (t may be gone: its read may have ended already)
    return true;
}

void read_done(void *arg, int err) {
    auto *t = static_cast<Take *>(arg);
    if (t->host) {
        const RdvMsg &m = t->note.m;
        void *host = t->host;
        t->host = nullptr;
        if (err) {
            efa_stage_drop(host); // the provider may still hold it (a lost peer's read)
        } else {
            err = efa_device_copy(t->buf, host, m.len < t->len ? m.len : t->len) ? -FI_EIO : 0;
            efa_stage_free(host);
        }
    } else if (err && read_through_host(t, err, false)) {
        return;
    }
    take_end(t, err);
}

// The note is here (t->note, t->started): read what fits.
void take_start(Take *t) {
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
    const int rc = start_read(t, t->buf, t->mr);
    if (rc && !read_through_host(t, rc, true)) {
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
    Take *t = reinterpret_cast<Take *>(op); // (the watch's share keeps it)
    efa_core *core = t->ctx->core;
    const int err = cqe->err ? cqe->err : -FI_EHOSTUNREACH;
    {
        std::lock_guard<std::mutex> guard(state(core)->lock);
        if (!t->published) {
            t->lost = err; // rdv_take sees it under the lock and ends it
            take_put(t);
            return;
        }
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
        t->done(t->arg, err, 0);
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

} // namespace

void rdv_on_note(efa_ctx *ctx, const RdvMsg &m, fi_addr_t src) {
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
            // One note per key: an older one still here is left over (its
            // message's note came twice, or after a withdrawal) and would
            // pair with this message (the seq wraps after 8191 large sends
            // to one peer).
            std::deque<Note> &kept = st->notes[key];
            kept.clear();
            kept.push_back({m, src});
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

// The core closes: reads still out never complete, and their memory stays.
void rdv_orphan_takes(RdvState *st) {
    for (Take *tk : st->takes) {
        if (tk->read) {
            efa_rail_read_orphan(tk->read);
        }
    }
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

namespace {

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
int rdv_take(efa_ctx *ctx, efa_peer_t *peer, uint64_t tag, void *buf, size_t len, efa_mr_t *mr,
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
    t->mr = mr;
    t->done = done;
    t->arg = arg;
    t->decline_err = decline_err;
    // The sender is watched while the note is due (its loss ends the
    // wait); armed before the receive is published, so that a note taken
    // at once finds the watch to end.  A watch that cannot be armed
    // (no memory) leaves the wait to the note alone; its share is still
    // given back by end_watch (an unarmed watch ends at once), as with the
    // deadline off.
    t->shares = 2;
    const int wrc = efa_core_addr_watch(core, ctx, t->from, &t->watch);
    if (-FI_EHOSTUNREACH == wrc) {
        delete t; // the sender is lost: nobody to read from or answer
        return wrc;
    }
    RdvState *st = core->rdv;
    bool wait = false;
    int lost = 0;
    {
        std::lock_guard<std::mutex> guard(st->lock);
        lost = t->lost;
        while (!lost) {
            auto it = st->notes.find(t->key);
            if (it == st->notes.end()) {
                st->waiting[t->key].push_back(t);
                wait = true;
                break;
            }
            t->note = it->second.front();
            it->second.pop_front();
            if (it->second.empty()) {
                st->notes.erase(it);
            }
            // A note kept before its sender was known to this process is
            // checked now: another process's is dropped (said), and the
            // sender's own is still to come.
            if (efa_core_source_ok(core, t->note.src, t->from, "a rendezvous note")) {
                t->started = true;
                break;
            }
        }
        if (!lost) {
            st->takes.insert(t);
            t->published = true;
        }
    }
    if (lost) { // the watch called before the receive was published
        if (t->done) {
            t->done(t->arg, lost, 0);
        }
        take_put(t);
        return 0;
    }
    if (wait) {
        return 0; // rdv_on_note starts it
    }
    end_watch(t);
    take_start(t);
    return 0;
}

} // namespace
} // namespace efa

extern "C" int efa_ctx_rdv_take(efa_ctx_t *ctx, efa_peer_t *peer, uint64_t tag, void *buf,
                                size_t len, void (*done)(void *arg, int err, size_t msg_len),
                                void *arg) {
    return efa_ctx_rdv_take_mr(ctx, peer, tag, buf, len, nullptr, done, arg);
}

extern "C" int efa_ctx_rdv_take_mr(efa_ctx_t *ctx, efa_peer_t *peer, uint64_t tag, void *buf,
                                   size_t len, efa_mr_t *mr,
                                   void (*done)(void *arg, int err, size_t msg_len), void *arg) {
    if (!done) {
        return -FI_EINVAL; // (a receive that declines calls efa_ctx_rdv_decline)
    }
    const int rc = efa::rdv_take(ctx, peer, tag, buf, len, mr, done, arg, 0);
    if (rc) {
        efa_ctx_rdv_decline(ctx, peer, tag, rc); // the sender hears it, if anything can
    }
    return rc;
}

extern "C" void efa_ctx_rdv_decline(efa_ctx_t *ctx, efa_peer_t *peer, uint64_t tag, int err) {
    (void)efa::rdv_take(ctx, peer, tag, nullptr, 0, nullptr, nullptr, nullptr, err ? err : -FI_EIO);
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
