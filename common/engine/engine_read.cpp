// The matching engine's rendezvous with peers on other nodes by RMA read.
//
// Streaming a large message as DATA frames copies every byte twice on
// each side (into the link's send buffers, out of the receive pool) and
// sends one provider message per 16 KiB.  Where the provider has FI_RMA,
// a sender instead registers its buffer and names it in the RTS (address
// and key, flag kFrameRead); the receiver, once the RTS matches, reads
// the bytes straight into the receive buffer and answers FIN, as the
// single-copy path on the node does.  On EFA hardware that reads
// natively this is one zero-copy transfer by the NIC; where the provider
// emulates the read it is the provider's own bulk protocol, still one
// request for the whole message.
//
// The RTS stays an offer: a receiver whose read fails for any reason but
// the peer's loss answers CTS instead, and the sender, still waiting in
// kWaitFin, streams the message as before.  A read that fails because the
// peer is lost fails the receive.  The sender's registration lives until
// its send finishes (FIN, the streamed data, a cancel or the peer's loss).
#include "engine_impl.hpp"

#include "efa_rma.h"

#include <algorithm>
#include <memory>
#include <vector>

#include <rdma/fi_errno.h>

namespace efa::engine {

struct Engine::ReadOp {
    struct Piece {
        efa_op_t op; // first: the core hands it back
        ReadOp *read;
        int rail;      // the NIC it went by (0: the first, the peer's message path)
        size_t off, n; // its bytes, for a failover to the first rail
    };
    Engine *engine = nullptr;
    efa_engine_req_t *req = nullptr;
    uint32_t sender = 0;
    uint64_t sender_id = 0;       // the sender's id of the message, for FIN or CTS
    efa_mr_t *mr = nullptr;       // the receive buffer's, where the provider wants local ones
    uint64_t raddr = 0, key0 = 0; // the sender's buffer, its key on the first rail
    uint32_t pieces = 0, left = 0;
    int err = 0;
    std::unique_ptr<Piece[]> piece;
};

// Under mu_, from write_message: register r's buffer and fill b with what
// a reader needs.  False: no offer (the receiver asks for DATA frames).
bool Engine::offer_read(Peer *p, efa_engine_req_t *r, RtsBody &b) {
    if (!read_on_ || nullptr == p->net || r->buflen < params_.net_read_min) {
        return false;
    }
    if (!(r->flags & kReqNetMr)) {
        int err = 0;
        efa_mr_t *mr = efa_core_mr_acquire(net_->core(), r->buf, r->buflen, FI_REMOTE_READ, &err);
        if (nullptr == mr) {
            return false;
        }
        r->net_mr = mr;
        r->flags |= kReqNetMr;
    }
    const auto *mr = static_cast<const efa_mr_t *>(r->net_mr);
    const auto addr = reinterpret_cast<uintptr_t>(r->buf);
    const efa_core_info_t *info = efa_core_get_info(net_->core());
    b.addr = info->mr_virt_addr ? addr : addr - efa_mr_base(mr);
    b.cookie = efa_mr_key(mr);
    b.cookie_addr = 0;
    b.pid = 0;
    b.rails = static_cast<uint32_t>(std::min(efa_mr_rails(mr), 4));
    for (uint32_t r = 1; r < b.rails; ++r) {
        b.rail_key[r - 1] = efa_mr_rail_key(mr, static_cast<int>(r));
    }
    return true;
}

void Engine::release_send_mr(efa_engine_req_t *r) {
    efa_core_mr_release(net_->core(), static_cast<efa_mr_t *>(r->net_mr));
    r->net_mr = nullptr;
    r->flags &= static_cast<uint8_t>(~kReqNetMr);
}

// Under mu_, from pull(): a receive matched an RTS of peer p that offers
// its bytes for reading.  False when no read could be posted (the caller
// streams instead); else the receive completes in end_read.
bool Engine::read_from(Peer *p, efa_engine_req_t *req, const FrameHdr &h, const RtsBody &b) {
    const size_t n = std::min<size_t>(b.len, req->buflen);
    if (!read_on_ || 0 == n) {
        return false;
    }
    auto ro = std::make_unique<ReadOp>();
    ro->engine = this;
    ro->req = req;
    ro->sender = h.sender;
    ro->sender_id = h.id;
    efa_core_t *core = net_->core();
    void *desc = nullptr;
    if (efa_core_get_info(core)->mr_local) {
        int err = 0;
        ro->mr = efa_core_mr_acquire(core, req->buf, n, FI_READ, &err);
        if (nullptr == ro->mr) {
            return false;
        }
        desc = efa_mr_desc(ro->mr);
    }
    // The rails: the first, and from stripe_min every other that reaches
    // the peer and on which both buffers are registered (the sender's
    // keys in the RTS, this one's where the provider wants descriptors).
    struct Rail {
        int rail;
        efa_ctx_t *ctx;
        fi_addr_t addr;
        void *desc;
        uint64_t key;
    } rails[EFA_MAX_RAILS] = {{0, p->net->ctx, p->net->addr, desc, b.cookie}};
    int nrails = 1;
    for (int r = 1; stripe_min_ && n >= stripe_min_ && p->rails && r < rails_; ++r) {
        const fi_addr_t a = efa_peer_rail_addr(p->rails, r, 0, nctx_);
        const int nic = p->rails->rail_nic[r];
        if (FI_ADDR_NOTAVAIL == a || nic >= static_cast<int>(b.rails) ||
            (ro->mr && r >= efa_mr_rails(ro->mr))) {
            continue;
        }
        rails[nrails++] = {r, efa_core_rail_ctx(core, r, 0), a,
                           ro->mr ? efa_mr_rail_desc(ro->mr, r) : nullptr,
                           0 == nic ? b.cookie : b.rail_key[nic - 1]};
    }
    std::vector<ReadOp::Piece> plan;
    for (int k = 0; k < nrails; ++k) {
        size_t part_off, part_len;
        efa_rma_stripe_part(n, nrails, k, &part_off, &part_len);
        for (size_t off = 0; off < part_len; off += read_piece_) {
            plan.push_back({{}, nullptr, k, part_off + off, std::min(read_piece_, part_len - off)});
        }
    }
    ro->raddr = b.addr;
    ro->key0 = b.cookie;
    ro->pieces = static_cast<uint32_t>(plan.size()); // (n > 0: at least one)
    ro->piece = std::make_unique<ReadOp::Piece[]>(ro->pieces);
    req->state = kRecvRead;
    req->peer = h.sender;
    req->remote = h.id;
    ReadOp *r = ro.get();
    if (nrails > 1) {
        efa_core_count_stripe(n, false);
    }
    for (uint32_t i = 0; i < r->pieces; ++i) {
        ReadOp::Piece &pc = r->piece[i];
        const Rail &rl = rails[plan[i].rail];
        pc.op.complete = read_done;
        pc.read = r;
        pc.rail = rl.rail;
        pc.off = plan[i].off;
        pc.n = plan[i].n;
        int rc = efa_ctx_read(rl.ctx, static_cast<uint8_t *>(req->buf) + pc.off, pc.n, rl.desc,
                              rl.addr, b.addr + pc.off, rl.key, &pc.op);
        if (rc && pc.rail && failover_) { // that rail refused the peer: the first takes it
            pc.rail = 0;
            rc = efa_ctx_read(p->net->ctx, static_cast<uint8_t *>(req->buf) + pc.off, pc.n, desc,
                              p->net->addr, b.addr + pc.off, b.cookie, &pc.op);
            if (0 == rc) {
                efa_core_count_stripe(0, true);
            }
        }
        if (rc) {
            r->err = rc; // the pieces posted still complete; then it ends
            break;
        }
        ++r->left;
    }
    if (0 == r->left) { // nothing went out: stream it
        if (r->mr) {
            efa_core_mr_release(core, r->mr);
        }
        ++stats.net_read_failed;
        return false;
    }
    reads_.push_back(ro.release());
    return true;
}

// A piece of a read completed (from the core's progress, mu_ not held).
void Engine::read_done(efa_op_t *op, const efa_cqe_t *cqe) {
    ReadOp::Piece *pc = reinterpret_cast<ReadOp::Piece *>(op);
    ReadOp *r = pc->read;
    Engine *e = r->engine;
    {
        Guard g(e->mu_, e->mt_);
        // A piece whose rail failed (the core took it out for the peer)
        // goes again, once, by the first rail, the peer's message path.
        if (cqe->err && pc->rail && -FI_ECANCELED != cqe->err && e->failover_ && e->reread(r, pc)) {
            return;
        }
        // (The test hook takes every read as one the provider failed.)
        const int err = cqe->err ? cqe->err : e->params_.net_debug_fail_reads ? -FI_EIO : 0;
        if (err && !r->err) {
            r->err = err;
        }
        if (0 == --r->left) {
            e->end_read(r);
        }
    }
    e->run_completions();
}

// Under mu_: piece pc of r again on the first rail.  False when it could
// not be posted (the read then fails as the piece did).
bool Engine::reread(ReadOp *r, void *piece) {
    auto *pc = static_cast<ReadOp::Piece *>(piece);
    int err = 0;
    Peer *p = peer(r->sender, err);
    if (nullptr == p || nullptr == p->net || p->error) {
        return false;
    }
    pc->rail = 0;
    efa_core_count_stripe(0, true);
    return 0 == efa_ctx_read(p->net->ctx, static_cast<uint8_t *>(r->req->buf) + pc->off, pc->n,
                             r->mr ? efa_mr_desc(r->mr) : nullptr, p->net->addr, r->raddr + pc->off,
                             r->key0, &pc->op);
}

// Does a read's error say that the peer is gone (the core's deadline, the
// provider's own), rather than that the read itself was refused?
static int peer_gone(int err) {
    return -FI_EHOSTUNREACH == err || -FI_ETIMEDOUT == err || -FI_ECONNRESET == err ? err : 0;
}

// Under mu_: every piece of r is done.  Complete the receive and answer
// FIN, or ask for the bytes as DATA frames (CTS), or fail the receive if
// the peer is lost.
void Engine::end_read(ReadOp *r) {
    reads_.erase(std::find(reads_.begin(), reads_.end(), r));
    if (r->mr) {
        efa_core_mr_release(net_->core(), r->mr);
    }
    efa_engine_req_t *req = r->req;
    int err = 0;
    const Peer *p = peer(r->sender, err);
    const int lost = nullptr == p ? (err ? err : -FI_ENOENT)
                     : p->error   ? p->error
                                  : peer_gone(r->err);
    if (0 == r->err) {
        req->err = req->msg_len > req->buflen ? -FI_ETRUNC : 0;
        req->state = kDone;
        send_ctrl(r->sender, kFin, r->sender_id, 0);
        ++stats.net_read;
        finish(req);
    } else if (lost) {
        req->err = lost;
        req->state = kDone;
        finish(req);
    } else {
        ++stats.net_read_failed;
        req->state = kRecvData;
        req->done = 0;
        req->local_id = ids_.add(req);
        send_ctrl(r->sender, kCts, r->sender_id, req->local_id);
        ++stats.streamed;
    }
    delete r;
}

// The engine closes with reads still out: their completions may still
// come from the core, which stays open, so they find a function of the
// core's library, and memory (the pieces, the registration) that is never
// given back.
void Engine::orphan_reads() {
    for (ReadOp *r : reads_) {
        for (uint32_t i = 0; i < r->pieces; ++i) {
            r->piece[i].op.complete = efa_op_complete_nothing;
        }
    }
    reads_.clear();
}

} // namespace efa::engine
