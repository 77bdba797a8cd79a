// The matching engine's frames to other nodes (net_link.hpp has the design).
#include "net_link.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <rdma/fi_errno.h>

#include "efa_core_msg.h"
#include "path_counts.hpp"

namespace efa::engine {

namespace {
constexpr uint32_t kSlabBufs = 32;
} // namespace

std::unique_ptr<NetLink> NetLink::create(const NetParams &p, SentFn sent, void *owner, int &err) {
    err = 0;
    if (!p.core || !sent || p.window == 0 || p.max_bufs == 0 ||
        p.buf_size < sizeof(NetHdr) + sizeof(NetFrameHdr) + 256 ||
        p.buf_size > efa_core_msg_max_size(p.core)) {
        err = -FI_EINVAL;
        return nullptr;
    }
    std::unique_ptr<NetLink> l(new NetLink());
    l->params_ = p;
    // Frames are padded to kNetAlign: a buffer of a multiple of it holds a
    // frame of max_frame() with its padding (at an MTU of 1025, a frame of
    // 1001 bytes took 1032 and the provider refused the message).
    l->params_.buf_size = (p.buf_size + 63) & ~size_t{63};
    if (l->params_.buf_size > efa_core_msg_max_size(p.core)) {
        l->params_.buf_size = p.buf_size & ~(kNetAlign - 1);
    }
    l->params_.coalesce_max = std::max<uint32_t>(p.coalesce_max, 1);
    l->params_.small_window = std::clamp<uint32_t>(p.small_window, 1, p.window);
    l->params_.credit =
        std::max<uint64_t>(p.credit ? p.credit : 16 * uint64_t{p.window}, kFirstGrant);
    const efa_core_info_t *info = efa_core_get_info(p.core);
    l->inject_max_ = p.inject ? std::min(info->inject_size, efa_core_msg_max_size(p.core)) : 0;
    l->sent_ = sent;
    l->owner_ = owner;
    return l;
}

NetLink::~NetLink() {
    // The owner waited for the provider to give back what it could; a
    // message still held by it keeps its buffer (the provider may still
    // read it) and its completion goes nowhere.
    for (auto &chunk : bufs_) {
        for (uint32_t i = 0; i < kSlabBufs; ++i) {
            chunk[i].op.complete = efa_op_complete_nothing;
        }
    }
    if (inflight_ || retired_) {
        for (const efa::RegisteredBlock &s : slabs_) {
            s.keep_for_provider(); // see above, fail_over and release
        }
        return;
    }
    for (efa::RegisteredBlock &s : slabs_) {
        s.release(params_.core, true);
    }
}

NetLink::Peer *NetLink::add_peer(uint32_t vpid, fi_addr_t addr0, efa_ctx_t *ctx0, int rail,
                                 fi_addr_t addr, efa_ctx_t *ctx) {
    auto p = std::make_unique<Peer>();
    p->vpid = vpid;
    p->addr0 = addr0;
    p->ctx0 = ctx0;
    p->rail = rail;
    p->addr = rail ? addr : addr0;
    p->ctx = rail ? ctx : ctx0;
    p->rail_ctx[0] = ctx0;
    p->rail_addr[0] = addr0;
    p->rail_ctx[rail] = p->ctx;
    p->rail_addr[rail] = p->addr;
    p->live = static_cast<uint8_t>(1u | (1u << rail));
    p->own_rail = static_cast<uint8_t>(rail);
    set_inject(p.get());
    ctx = p->ctx;
    if (rail) {
        ++stats_.rail_peers;
    }
    if (std::find(ctxs_.begin(), ctxs_.end(), ctx) == ctxs_.end()) {
        ctxs_.push_back(ctx);
        stats_.endpoints = static_cast<uint32_t>(ctxs_.size());
    }
    peers_.push_back(std::move(p));
    return peers_.back().get();
}

void NetLink::add_turn(Peer *p, int r, fi_addr_t addr, efa_ctx_t *ctx) {
    if (r <= 0 || r >= EFA_MAX_RAILS || nullptr == ctx) {
        return;
    }
    // (a rail to fail over to, whether or not it takes turns)
    p->rail_ctx[r] = ctx;
    p->rail_addr[r] = addr;
    p->live = static_cast<uint8_t>(p->live | (1u << r));
    set_inject(p);
    if (SIZE_MAX == params_.turn_min) {
        return;
    }
    if (p->turn_mask <= 1) {
        ++stats_.turn_peers;
        p->turn = static_cast<uint8_t>(p->rail); // peers start their turns apart
    }
    p->turn_mask = static_cast<uint8_t>(p->turn_mask | 1u | (1u << r));
    p->turn_rails = p->turn_mask;
}

int NetLink::next_turn(Peer *p) {
    if (p->turn_mask <= 1) {
        return p->rail;
    }
    unsigned r;
    do {
        r = p->turn++ % EFA_MAX_RAILS;
    } while (0 == (p->turn_mask & (1u << r)));
    return static_cast<int>(r);
}

NetLink::Buf *NetLink::get_buf() {
    if (free_) {
        Buf *b = free_;
        free_ = b->next_free;
        return b;
    }
    if (nbufs_ - retired_ >= params_.max_bufs) { // (retired ones are never used again)
        return nullptr;
    }
    // Another slab of buffers (registered once, where the provider needs
    // it; FI_WRITE puts the registration on the rails' domains too, whose
    // messages these buffers carry as well: fi_mr_backend.cpp).
    efa::RegisteredBlock slab;
    const efa_core_info_t *info = efa_core_get_info(params_.core);
    const uint64_t access = info->num_nics > 1 ? FI_SEND | FI_WRITE : FI_SEND;
    if (slab.make(params_.core, kSlabBufs * params_.buf_size, 4096, info->mr_local ? access : 0)) {
        return nullptr;
    }
    slabs_.push_back(slab);
    std::unique_ptr<Buf[]> chunk(new Buf[kSlabBufs]());
    for (uint32_t i = 0; i < kSlabBufs; ++i) {
        Buf &b = chunk[i];
        b.op.complete = on_complete;
        b.link = this;
        b.data = reinterpret_cast<uint8_t *>(slab.data) + i * params_.buf_size;
        b.desc = slab.desc();
        b.mr = reinterpret_cast<efa_mr_t *>(slab.mr);
        b.next_free = i + 1 < kSlabBufs ? &chunk[i + 1] : nullptr;
    }
    free_ = &chunk[1];
    Buf *b = &chunk[0];
    bufs_.push_back(std::move(chunk));
    nbufs_ += kSlabBufs;
    return b;
}

void *NetLink::reserve(Peer *p, size_t len) {
    if (len > max_frame()) {
        return nullptr;
    }
    const size_t need = net_span(len);
    Buf *b = p->open;
    if (b) {
        // A frame joins the open message while it stays within the
        // coalescing limits; a frame alone may fill a whole buffer.
        const bool room = b->used + need <= params_.buf_size &&
                          b->used + need <= sizeof(NetHdr) + params_.coalesce_bytes &&
                          b->frames < params_.coalesce_max;
        if (!room) {
            if (p->waiting || p->inflight >= params_.window || !post(p)) {
                return nullptr;
            }
            b = nullptr;
        } else if (b->frames > 0) {
            counts::add(counts::kCoalesced, 1);
        }
    }
    if (!b) {
        if (p->error) {
            return nullptr;
        }
        b = get_buf();
        if (!b) {
            return nullptr;
        }
        b->peer = p;
        b->used = sizeof(NetHdr);
        b->frames = 0;
        p->open = b;
        ++open_;
    }
    return b->data + b->used + sizeof(NetFrameHdr);
}

void NetLink::commit(Peer *p, size_t len) {
    Buf *b = p->open;
    NetFrameHdr fh{static_cast<uint32_t>(len), 0};
    memcpy(b->data + b->used, &fh, sizeof(fh));
    b->used += net_span(len);
    ++b->frames;
    ++stats_.frames;
    // (a frame that can be packed goes at once below the small window only)
    const uint32_t limit = len <= params_.coalesce_bytes ? params_.small_window : params_.window;
    if (!p->waiting && p->inflight < limit) {
        post(p); // nothing to wait for: it goes now
    }            // else it gathers more frames until one of p's messages completes
}

// Post p's open message: true when it left (or failed for good: the
// error is kept and the owner hears of it from the completion); false
// when it waits for the provider's queue or for p's grant.
bool NetLink::post(Peer *p) {
    if (!has_credit(p)) {
        if (!p->starved) {
            p->starved = true;
            ++stats_.no_credit;
        }
        return false; // granted() posts it
    }
    Buf *b = p->open;
    const auto frames = static_cast<uint16_t>(b->frames);
    const NetHdr h{kNetMagic, kNetVersion, frames, params_.my_vpid, p->seq, p->grant_out};
    memcpy(b->data, &h, sizeof(h));
    // (Not by inject on the other rails: a message there is sent again
    // from its buffer should its rail fail.)
    bool inject = 0 == p->inflight && !p->injected && b->used <= inject_max_ &&
                  (p->may_inject || (p->keep_injected && can_keep(p)));
    int rc = inject ? efa_ctx_try_inject(p->ctx, b->data, b->used, p->addr) : -FI_EMSGSIZE;
    if (rc && -FI_EAGAIN != rc && p->keep_injected) {
        rc = -FI_EMSGSIZE; // the first rail refused (out for p): post_buf moves p off it
    }
    if (-FI_EMSGSIZE == rc) { // not by inject (or the core refused it): with a completion
        inject = false;
        rc = post_buf(p, b, b->used > params_.turn_min ? next_turn(p) : p->rail);
    }
    if (-FI_EAGAIN == rc) {
        if (!p->waiting) {
            p->waiting = true;
            waiting_.push_back(p);
            pending_ = true;
        }
        return false;
    }
    p->open = nullptr;
    --open_;
    if (rc) {
        // Unreachable (a dead peer, or the provider refused): the frames
        // are lost, the owner fails what waits on this peer.
        p->error = rc;
        free_or_retire(b);
        sent_(owner_, nullptr, p, rc); // no buffer: just the error
        return true;
    }
    ++p->seq;
    p->grant_said = std::max(p->grant_said, h.grant);
    ++stats_.messages;
    if (__builtin_expect(0 != p->back, 0)) { // (an inject went over p's rail)
        stats_.sent_back += (p->back >> (inject ? p->rail : b->rail)) & 1u;
    }
    if (b->frames > 1) {
        ++stats_.batched;
    }
    if (inject) { // copied by the provider: the buffer is free again
        ++stats_.injected;
        p->injected = true;
        injected_.push_back(p);
        pending_ = true;
        if (p->keep_injected) {
            keep(p, b); // ... or kept until p has handed it on
        } else {
            free_or_retire(b);
        }
        return true;
    }
    ++p->inflight;
    ++inflight_;
    return true;
}

bool NetLink::fail_over(Buf *b) {
    Peer *p = b->peer;
    if (p->error || !leave_rail(p, b->rail)) { // (left already when an earlier message failed)
        return false;
    }
    // The bytes go again from a buffer of their own: a send the peer
    // deadline gave up on is still the provider's, which may read b until
    // the endpoint closes (a link back after the timeout), so b is never
    // written again.  Without memory for one, b itself goes again.
    Buf *nb = get_buf();
    if (nb) {
        memcpy(nb->data, b->data, b->used);
        nb->peer = p;
        nb->used = b->used;
        nb->frames = b->frames;
    } else {
        nb = b;
    }
    const int rc = post_buf(p, nb, p->home);
    if (rc && -FI_EAGAIN != rc) {
        if (nb != b) {
            free_or_retire(nb);
        }
        return false;
    }
    if (-FI_EAGAIN == rc) {
        resend_.push_back(nb);
        pending_ = true;
    }
    if (nb != b) {
        b->op.complete = efa_op_complete_nothing; // (nothing of it comes back now)
        ++retired_;
    }
    ++stats_.failed_over;
    return true;
}

// A buffer done with: free, unless the provider may still read it (orphaned).
void NetLink::free_or_retire(Buf *b) {
    if (__builtin_expect(b->orphaned, 0)) {
        b->op.complete = efa_op_complete_nothing;
        ++retired_;
        ++stats_.retired;
        return;
    }
    b->next_free = free_;
    free_ = b;
}

void NetLink::abandon(Peer *p, int err) {
    if (0 == p->error) {
        p->error = err;
    }
    // Failed over and not posted again yet: never will be.
    for (size_t i = 0; i < resend_.size();) {
        Buf *b = resend_[i];
        if (b->peer != p) {
            ++i;
            continue;
        }
        resend_.erase(resend_.begin() + static_cast<std::ptrdiff_t>(i));
        --p->inflight;
        --inflight_;
        free_or_retire(b);
    }
    if (Buf *b = p->open) {
        p->open = nullptr;
        --open_;
        free_or_retire(b);
    }
    while (Buf *b = p->kept) {
        p->kept = b->next_free;
        --p->kept_n;
        --kept_;
        free_or_retire(b);
    }
    if (p->waiting) {
        waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), p), waiting_.end());
        p->waiting = false;
    }
    p->starved = false;
}

void NetLink::on_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *b = reinterpret_cast<Buf *>(op);
    b->orphaned = b->orphaned || cqe->orphaned; // (once: a post again of b does not undo it)
    b->link->sent_(b->link->owner_, b, b->peer, cqe->err);
}

void NetLink::release(Buf *b) {
    Peer *p = b->peer;
    --p->inflight;
    --inflight_;
    // (a peer declared lost while the provider held the message, alive
    // after all, could still get these bytes: never another's message)
    free_or_retire(b);
    if (p->open && !p->waiting && p->inflight < params_.window) {
        post(p);
    }
}

// A grant alone to p: true when it left, or need not (p is unreachable:
// its messages fail anyway); false to try again from progress().
bool NetLink::send_grant(Peer *p) {
    if (p->error) {
        return true;
    }
    const uint64_t seq = p->ask_due ? kAskSeq : kNoSeq;
    const NetHdr h{kNetMagic, kNetVersion, 0, params_.my_vpid, seq, p->grant_out};
    int rc = -FI_EMSGSIZE;
    if (sizeof(h) <= inject_max_ && (p->may_inject || p->keep_injected)) {
        rc = efa_ctx_try_inject(p->ctx, &h, sizeof(h), p->addr);
        if (rc && -FI_EAGAIN != rc && p->keep_injected) {
            rc = -FI_EMSGSIZE; // the first rail refused: with a completion, which moves p
        }
    }
    if (-FI_EMSGSIZE == rc) {
        Buf *b = get_buf();
        if (!b) {
            return false;
        }
        b->peer = p;
        b->used = sizeof(h);
        b->frames = 0;
        memcpy(b->data, &h, sizeof(h));
        rc = post_buf(p, b, p->rail);
        if (0 == rc) {
            ++p->inflight; // release() on completion, as for any message
            ++inflight_;
        } else {
            free_or_retire(b);
        }
    }
    if (-FI_EAGAIN == rc) {
        return false;
    }
    if (0 == rc) {
        p->grant_said = std::max(p->grant_said, h.grant);
        ++(p->ask_due ? stats_.asks : stats_.grants);
    } else { // unreachable: the owner fails p (its sender would wait for the grant)
        p->error = rc;
        sent_(owner_, nullptr, p, rc);
    }
    p->ask_due = false;
    return true;
}

void NetLink::granted(Peer *p, uint64_t grant) {
    if (grant <= p->limit) {
        return; // old news (grants may arrive in any order)
    }
    p->limit = grant;
    p->starved = false;
    if (__builtin_expect(p->answer_due, 0) && !p->grant_due) {
        p->grant_due = true; // the answer that waited for this grant
        grants_.push_back(p);
        pending_ = true;
    }
    if (p->kept) {
        confirm_kept(p);
    }
    if (p->open && !p->waiting && p->inflight < params_.window) {
        post(p);
    }
}

void NetLink::delivered(Peer *p, uint64_t delivered) {
    const uint64_t grant = delivered + params_.credit;
    if (grant <= p->grant_out) {
        return;
    }
    p->grant_out = grant;
    if (!p->grant_due && grant - p->grant_said >= params_.credit / 4) {
        p->grant_due = true; // sent by send_grants() unless a message to p carries it first
        grants_.push_back(p);
        pending_ = true;
    }
}

void NetLink::send_grants() {
    if (grants_.empty()) {
        return;
    }
    std::vector<Peer *> todo;
    todo.swap(grants_);
    for (Peer *p : todo) {
        if (__builtin_expect(p->answer_due, 0) && !send_answer(p)) {
            grants_.push_back(p); // the provider's queue is full: later
            pending_ = true;
            continue;
        }
        // (an answer carried the grant, or was all that was due)
        const bool say = p->ask_due || (p->grant_out > p->grant_said &&
                                        p->grant_out - p->grant_said >= params_.credit / 4);
        if (!say || send_grant(p)) {
            p->grant_due = false;
        } else {
            grants_.push_back(p); // the provider's queue is full: later
            pending_ = true;
        }
    }
}

void NetLink::ask(Peer *p) {
    p->ask_due = true;
    p->asking = true;
    if (!p->grant_due) {
        p->grant_due = true;
        grants_.push_back(p);
        pending_ = true;
    }
}

void NetLink::answer(Peer *p) {
    if (p->error) {
        return; // nothing reaches p: its asker's watch fails it
    }
    p->answer_due = true;
    if (!p->grant_due) {
        p->grant_due = true; // (sent by send_grants, as a grant)
        grants_.push_back(p);
        pending_ = true;
    }
}

// p's answer: a message of its own, numbered next, with no frame and p's
// grant (p's open message, if any, follows it).  True when it left, or
// need not (p failed), or must wait for p's grant (granted() brings it
// back); false to try again from progress().
bool NetLink::send_answer(Peer *p) {
    if (p->error) {
        p->answer_due = false;
        return true;
    }
    if (!has_credit(p)) {
        return true;
    }
    Buf *b = get_buf();
    if (!b) {
        return false;
    }
    const NetHdr h{kNetMagic, kNetVersion, 0, params_.my_vpid, p->seq, p->grant_out};
    b->peer = p;
    b->used = sizeof(h);
    b->frames = 0;
    memcpy(b->data, &h, sizeof(h));
    const int rc = post_buf(p, b, p->rail);
    if (rc) {
        free_or_retire(b);
        if (-FI_EAGAIN == rc) {
            return false;
        }
        p->error = rc;
        p->answer_due = false;
        sent_(owner_, nullptr, p, rc); // unreachable: the owner fails p
        return true;
    }
    p->answer_due = false;
    ++p->seq;
    ++p->inflight; // release() on completion, as for any message
    ++inflight_;
    p->grant_said = std::max(p->grant_said, h.grant);
    ++stats_.messages;
    ++stats_.answers;
    return true;
}

void NetLink::progress_pending() {
    for (Peer *p : injected_) {
        p->injected = false;
    }
    injected_.clear();
    send_grants();
    if (!resend_.empty()) {
        std::vector<Buf *> todo;
        todo.swap(resend_);
        for (Buf *b : todo) {
            Peer *p = b->peer;
            const bool failed = 0 != p->error;
            const int rc = failed ? p->error : post_buf(p, b, p->home);
            if (-FI_EAGAIN == rc) {
                resend_.push_back(b);
                pending_ = true;
                continue;
            }
            if (0 == rc) {
                continue;
            }
            // Failed for good: the buffer goes back, the owner fails the peer.
            p->error = rc;
            --p->inflight;
            --inflight_;
            free_or_retire(b);
            if (!failed) {
                sent_(owner_, nullptr, p, rc);
            }
        }
    }
    if (!waiting_.empty()) {
        std::vector<Peer *> todo;
        todo.swap(waiting_);
        for (Peer *p : todo) {
            p->waiting = false;
            if (p->open) {
                post(p); // back into waiting_ if still full
            }
        }
    }
    pending_ = !injected_.empty() || !grants_.empty() || !waiting_.empty() || !resend_.empty();
}

} // namespace efa::engine
