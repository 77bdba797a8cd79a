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
//
// A receive in device memory that the provider takes (device_by_provider:
// FI_HMEM) is read straight into the device buffer's registration, striped
// like a host buffer where that registration is on several NICs; on EFA
// that is GPUDirect RDMA into the GPU, no copy on either side when the
// sender's buffer is device memory too.  Where that registration cannot
// be had or its read cannot be posted, or the provider does not take the
// buffer, the read goes to the host buffer as below; a read into the
// device that fails asks for DATA frames like any other.
//
// Another receive in device memory (its bytes landing in its host buffer
// first) is read in pieces of at most
// net_device_piece, each copied on to the device as soon as it is in
// (landed), while the pieces after it are still read: only the last
// piece's copy is left when the read ends, not the whole message's.  Once
// every byte went so, device_landed tells the owner not to copy again; a
// failed copy or read leaves that to the owner, from the host buffer.
#include "engine_impl.hpp"

#include "efa_core_rdv.h"
#include "efa_rma.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include <rdma/fi_errno.h>

namespace efa::engine {

struct Engine::ReadOp {
    Engine *engine = nullptr;
    efa_engine_req_t *req = nullptr;
    uint32_t sender = 0;
    uint64_t sender_id = 0;          // the sender's id of the message, for FIN or CTS
    efa_mr_t *mr = nullptr;          // the receive buffer's, where the provider wants local ones
    efa_rail_read_t *read = nullptr; // the core's striped read (rail_read.cpp)
    int err = 0;
    bool ended_in_post = false; // its pieces all completed before the post returned
    // A device receive's pieces copied on as they landed (from progress,
    // mu_ not held): the bytes copied, and whether a copy failed.
    uint8_t *device_buf = nullptr;
    size_t len = 0;           // the bytes read
    bool into_device = false; // read straight into the device buffer (mr its registration)
    std::atomic<size_t> device_copied{0};
    std::atomic<uint32_t> device_pieces{0};
    std::atomic<bool> device_failed{false};
};

namespace {
// The read this thread is posting (under mu_): its end, should the core
// report it inside the post (another thread's progress completed every
// piece), is left to read_from, which holds mu_ already.
thread_local const void *t_posting = nullptr;
// A read straight into a device buffer, named where the provider refuses it.
constexpr const char *kReadIntoDevice = "mtl_efa fi_readmsg (a read into a device buffer)";
} // namespace

// Under mu_, from write_message: register r's buffer and fill b with what
// a reader needs.  False: no offer (the receiver asks for DATA frames).
bool Engine::offer_read(Peer *p, efa_engine_req_t *r, RtsBody &b) {
    if (!read_on_ || nullptr == p->net || r->buflen < params_.net_read_min) {
        return false;
    }
    if (!(r->flags & kReqHeld)) { // (a host send: only ever its registration)
        int err = 0;
        efa_mr_t *mr = efa_core_mr_acquire(net_->core(), r->buf, r->buflen, FI_REMOTE_READ, &err);
        if (nullptr == mr) {
            return false;
        }
        r->net_mr = mr;
        r->flags |= kReqHeld;
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
    if (r->device) [[unlikely]] {
        ++stats.device_send_read; // (its device registration: its keys on each NIC it is on)
    }
    return true;
}

void Engine::release_held(efa_engine_req_t *r) {
    if (nullptr != r->net_mr) {
        efa_core_mr_release(net_->core(), static_cast<efa_mr_t *>(r->net_mr));
        r->net_mr = nullptr;
    }
    if (r->device && 0 != r->ipc_held) {
        efa_device_ipc_release(r->ipc_held); // (the peer answered, or never will)
        r->ipc_held = 0;
    }
    r->flags &= static_cast<uint8_t>(~kReqHeld);
}

// Under mu_, from pull(): a receive matched an RTS of peer p that offers
// its bytes for reading.  False when no read could be posted (the caller
// streams instead); else the receive completes in end_read.  From
// stripe_min the core stripes the read over every rail that reaches the
// peer and on which both buffers are registered (the sender's keys in the
// RTS, this one's where the provider wants descriptors), and reads a piece
// whose rail fails again by the first.
bool Engine::read_from(Peer *p, efa_engine_req_t *req, const FrameHdr &h, const RtsBody &b) {
    const size_t n = std::min<size_t>(b.len, req->buflen);
    if (!read_on_ || 0 == n) {
        return false;
    }
    efa_core_t *core = net_->core();
    if (req->device_by_provider && nullptr != req->device_buf) [[unlikely]] {
        int err = 0;
        efa_mr_t *mr = efa_core_mr_acquire_device(core, req->device_buf, n, FI_READ, &err);
        if (nullptr != mr && post_read(p, req, h, b, n, mr, true)) {
            return true;
        }
        // (refused: said by the core; the host buffer takes the read)
    }
    efa_mr_t *mr = nullptr;
    if (efa_core_get_info(core)->mr_local) {
        int err = 0;
        mr = efa_core_mr_acquire(core, req->buf, n, FI_READ, &err);
        if (nullptr == mr) {
            return false;
        }
    }
    if (!post_read(p, req, h, b, n, mr, false)) {
        ++stats.net_read_failed;
        return false;
    }
    return true;
}

// Under mu_: post the read of n bytes of b's offer into req's host buffer
// or (into_device) straight into its device buffer, mr the buffer's
// registration (given back here where nothing could be posted).
bool Engine::post_read(Peer *p, efa_engine_req_t *req, const FrameHdr &h, const RtsBody &b,
                       size_t n, efa_mr_t *mr, bool into_device) {
    auto ro = std::make_unique<ReadOp>();
    ro->engine = this;
    ro->req = req;
    ro->sender = h.sender;
    ro->sender_id = h.id;
    ro->mr = mr;
    ro->into_device = into_device;
    efa_core_t *core = net_->core();
    efa_rail_read_req_t r{};
    r.ctx = p->net->ctx0;
    r.addr = p->net->addr0;
    r.peer = stripe_min_ ? p->rails : nullptr;
    r.ctx_index = efa_ctx_index(p->net->ctx0);
    // Below stripe_min one rail: the peer's in turn (striped, it does not matter).
    r.home = n < stripe_min_ ? net_->next_turn(p->net) : p->net->rail;
    r.piece_max = read_piece_;
    r.buf = into_device ? req->device_buf : req->buf;
    if (!into_device && nullptr != req->device_buf && params_.net_device_piece) {
        ro->device_buf = static_cast<uint8_t *>(req->device_buf);
        ro->len = n;
        r.piece_max = std::min(read_piece_, params_.net_device_piece);
        r.landed = read_landed;
    }
    r.len = n;
    r.mr = mr;
    r.raddr = b.addr;
    r.rkeys = static_cast<int>(std::clamp<uint32_t>(b.rails, 1, 4));
    r.rkey[0] = b.cookie;
    for (int k = 1; k < 4; ++k) {
        r.rkey[k] = b.rail_key[k - 1];
    }
    r.done = read_done;
    r.arg = ro.get();
    req->state = kRecvRead;
    req->peer = h.sender;
    req->remote = h.id;
    ReadOp *rd = ro.release();
    reads_.push_back(rd);
    t_posting = rd;
    const int rc = efa_core_rail_read(core, &r, &rd->read);
    t_posting = nullptr;
    if (rc != 0) { // nothing went out: stream it (or read into the host buffer)
        reads_.pop_back();
        if (into_device) [[unlikely]] {
            // Refused for the memory (the request's arguments are sound
            // here, so the error is the provider's post): such memory is
            // not registered again.  (A read that fails later is only
            // streamed; one refused from the backlog marks the kind in the
            // rail read, a failure of one the provider took cannot tell
            // the memory from the peer's key or the path.)
            (void)efa_core_mr_device_post_refused(core, rd->mr, kReadIntoDevice, rc);
        }
        if (rd->mr) {
            efa_core_mr_release(core, rd->mr);
        }
        delete rd;
        return false;
    }
    if (rd->ended_in_post) {
        end_read(rd);
    }
    return true;
}

// The read completed, every piece of it (from the core's progress, mu_
// not held).
void Engine::read_done(void *arg, int err) {
    auto *r = static_cast<ReadOp *>(arg);
    Engine *e = r->engine;
    if (t_posting == r) { // inside read_from, which holds mu_ and ends it
        r->err = err ? err : e->params_.net_debug_fail_reads ? -FI_EIO : 0;
        r->ended_in_post = true;
        return;
    }
    {
        Guard g(e->mu_, e->mt_);
        // (The test hook takes every read as one the provider failed.)
        r->err = err ? err : e->params_.net_debug_fail_reads ? -FI_EIO : 0;
        e->end_read(r);
    }
    e->run_completions();
}

// A piece of a device receive's read is in its host buffer (from the
// core's progress, mu_ not held; pieces may land on several threads at
// once, each copying its own bytes).
void Engine::read_landed(void *arg, size_t off, size_t n) {
    auto *r = static_cast<ReadOp *>(arg);
    if (r->device_failed.load(std::memory_order_relaxed)) {
        return; // the owner copies the whole message
    }
    const auto *host = static_cast<const uint8_t *>(r->req->buf);
    if (0 != efa_device_copy(r->device_buf + off, host + off, n)) {
        r->device_failed.store(true);
        return;
    }
    r->device_copied.fetch_add(n);
    r->device_pieces.fetch_add(1);
}

// Does a read's error say that the peer is gone (the core's deadline, the
// provider's own), rather than that the read itself was refused?
static int peer_gone(int err) {
    return -FI_EHOSTUNREACH == err || -FI_ETIMEDOUT == err || -FI_ECONNRESET == err ? err : 0;
}

// Under mu_: every piece of r is done.  Complete the receive and answer
// FIN, or ask for the bytes as DATA frames (CTS), or fail the receive if
// the peer is lost.  A peer with a rail beside the first may have lost
// only the path the read took (its first rail: the core fails what went
// by it with the peer's errors): the bytes are asked for as DATA, over
// the rails left, and a peer truly lost fails the CTS and the receive.
void Engine::end_read(ReadOp *r) {
    reads_.erase(std::find(reads_.begin(), reads_.end(), r));
    if (r->mr) {
        efa_core_mr_release(net_->core(), r->mr);
    }
    efa_engine_req_t *req = r->req;
    int err = 0;
    const Peer *p = peer(r->sender, err);
    const int lost = nullptr == p                     ? (err ? err : -FI_ENOENT)
                     : p->error                       ? p->error
                     : p->net && (p->net->live & ~1u) ? 0
                                                      : peer_gone(r->err);
    if (r->device_buf) {
        stats.device_read_pieces += r->device_pieces.load();
    }
    if (0 == r->err) {
        // (every byte read went on to the device: the owner copies none)
        if (r->into_device) [[unlikely]] {
            req->device_landed = true;
            ++stats.device_read_direct;
        } else if (r->device_buf && !r->device_failed.load() && r->device_copied.load() == r->len) {
            req->device_landed = true;
            ++stats.device_read_landed;
        }
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
        req->device_done = 0;
        req->local_id = ids_.add(req);
        send_ctrl(r->sender, kCts, r->sender_id, req->local_id);
        ++stats.streamed;
    }
    delete r;
}

// The engine closes with reads still out: their completions may still
// come from the core, which stays open; the core's read then calls nobody,
// and the registration is never given back.  The engine closes at
// finalize, which no other thread's progress runs beside (MPI allows no
// calls from other threads then), so no callback of a piece (landed,
// done) is running while its ReadOp goes.
void Engine::orphan_reads() {
    for (ReadOp *r : reads_) {
        efa_rail_read_orphan(r->read);
        delete r;
    }
    reads_.clear();
}

} // namespace efa::engine
