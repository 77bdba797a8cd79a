// The matching engine, receiving frames: checks, single-copy pulls and
// streamed data, matching an arrival or keeping it unexpected, and the
// partnered receives' hold (engine.hpp; device memory's part in
// engine_device.cpp).
#include "engine_impl.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <rdma/fi_errno.h>

#include "efa_core_msg.h"
#include "efa_ring_inline.h"

namespace efa::engine {

// ---- receiving ---------------------------------------------------------

// May the bytes of p's messages be read out of p->pid?  Checked once, by
// the cookie p's card named (never one a frame names: a pid that holds a
// value the frame chose proves nothing).  The pid stays pinned: every
// later read is of that pid, whatever a frame says.
// Once p's process is seen gone (its exit watch), its pid may be another
// process's: single copy stops for it (one poll a large message; a
// message it sent before it died is streamed, and fails with it).
bool Engine::cma_ok(Peer *p) {
    if (Peer::kCmaUnknown == p->cma) {
        p->cma = 0 == efa_cma_verify(p->pid, p->cma_cookie_addr, p->cma_cookie) ? Peer::kCmaOn
                                                                                : Peer::kCmaOff;
    }
    if (Peer::kCmaOn == p->cma && efa_cma_exited(p->exit_fd)) {
        p->cma = Peer::kCmaOff;
    }
    return Peer::kCmaOn == p->cma;
}

// Does an RTS of process vpid (whose ring was checked) name the pid its
// card published?  One that names another is corrupted or forged: it
// would have single copy read some other process.  Peers never read so
// (through the provider, single copy off or refused, no pid on the card)
// are not asked: their RTS's pid means nothing.
bool Engine::pid_ok(uint32_t vpid, uint32_t pid) {
    int err = 0;
    const Peer *p = peer(vpid, err);
    return nullptr != p && (Peer::kCmaOff == p->cma || p->pid == pid);
}

// A receive matched an RTS: copy the bytes now (true: complete) or ask for
// them (false: DATA frames follow).  ipc: the device handle of a device
// RTS (kFrameDevice), else nullptr.
bool Engine::pull(efa_engine_req_t *req, const FrameHdr &h, const RtsBody &b,
                  const efa_device_ipc_t *ipc) {
    req->msg_src = h.src;
    req->msg_tag = h.tag;
    req->msg_len = b.len;
    const size_t n = std::min<size_t>(b.len, req->buflen);
    int err = 0;
    Peer *p = peer(h.sender, err);
    if (nullptr == p) {
        req->err = err ? err : -FI_ENOENT;
        return true;
    }
    if (0 == n && b.len > 0) { // none fits: the sender is told it is done, not asked to stream it
        req->err = -FI_ETRUNC;
        send_ctrl(h.sender, kFin, h.id, 0);
        return true;
    }
    if (ipc) [[unlikely]] {
        if (pull_device(p, req, h, b, *ipc)) {
            return true;
        }
        ++stats.device_streamed; // (single copy cannot read device memory)
    } else if (cma_ok(p)) {
        const int cma_err = 0 == n ? 0 : efa_cma_copy(p->pid, false, req->buf, b.addr, n, nullptr);
        if (0 == cma_err) {
            req->err = b.len > req->buflen ? -FI_ETRUNC : 0;
            send_ctrl(h.sender, kFin, h.id, 0);
            ++stats.single_copy;
            return true;
        }
        // Failed half way: the sender streams this one all.  Only a
        // refusal (not permitted, no such process, no CMA) is for good; a
        // passing failure (ENOMEM) leaves single copy to the next message.
        if (EPERM == cma_err || EACCES == cma_err || ESRCH == cma_err || ENOSYS == cma_err) {
            p->cma = Peer::kCmaOff;
        }
    }
    if (p->net && (h.flags & kFrameRead) && read_from(p, req, h, b)) {
        return false; // end_read completes it
    }
    req->state = kRecvData;
    req->peer = h.sender;
    req->remote = h.id;
    req->done = 0;
    req->device_done = 0;
    req->local_id = ids_.add(req);
    send_ctrl(h.sender, kCts, h.id, req->local_id);
    ++stats.streamed;
    return false;
}

// Hand a waiting message to its receive: true when complete.
bool Engine::take(Message *m, efa_engine_req_t *req) {
    req->msg_src = m->env.src;
    req->msg_tag = m->env.tag;
    req->msg_len = m->len;
    if (kEager == m->type) {
        efa_ring_copy(req->buf, m->data, std::min(m->len, req->buflen));
        req->err = m->len > req->buflen ? -FI_ETRUNC : 0;
        if (m->flags & kFrameSync) {
            send_ctrl(m->sender, kAck, m->id, 0);
        }
        free(m);
        req->state = kDone;
        return true;
    }
    FrameHdr h{};
    h.flags = m->flags;
    h.sender = m->sender;
    h.src = m->env.src;
    h.tag = m->env.tag;
    h.id = m->id;
    RtsBody b{};
    b.len = m->len;
    b.addr = m->addr;
    b.cookie_addr = m->cookie_addr;
    b.cookie = m->cookie;
    b.pid = m->pid;
    b.rails = m->rails;
    memcpy(b.rail_key, m->rail_key, sizeof(b.rail_key));
    efa_device_ipc_t ipc;
    const bool device = m->flags & kFrameDevice;
    if (device) {
        memcpy(&ipc, m->data, sizeof(ipc));
    }
    free(m);
    if (pull(req, h, b, device ? &ipc : nullptr)) {
        req->state = kDone;
        return true;
    }
    return false;
}

// DATA for a receive that answered CTS.  A sender streams in order through
// one ring, so each frame starts where the last ended; anything else (or
// bytes beyond the message's length) is a corrupted frame.
void Engine::on_data(efa_engine_req_t *req, const uint8_t *bytes, size_t n, uint8_t flags) {
    if (n < sizeof(DataBody)) {
        drop();
        return;
    }
    DataBody b;
    memcpy(&b, bytes, sizeof(b));
    bytes += sizeof(b);
    n -= sizeof(b);
    if (b.offset != req->done || n > req->msg_len - req->done) {
        drop();
        return;
    }
    if (flags & kFrameFailed) [[unlikely]] {
        req->err = -FI_EIO; // the sender's device could not read these bytes
    } else if (b.offset < req->buflen) {
        memcpy(static_cast<uint8_t *>(req->buf) + b.offset, bytes,
               std::min<size_t>(n, req->buflen - b.offset));
    }
    req->done += n;
    if (nullptr != req->device_buf && params_.net_device_piece) [[unlikely]] {
        stream_to_device(req);
    }
    if (req->done >= req->msg_len) {
        ids_.remove(req->local_id);
        if (-FI_EIO != req->err) {
            req->err = req->msg_len > req->buflen ? -FI_ETRUNC : 0;
        }
        req->state = kDone;
        finish(req);
    }
}

// A copy of an arrived message's frame, for the unexpected queue or to
// hold for a partnered receive (nullptr if out of memory).
Message *Engine::make_message(const FrameHdr &h, const RtsBody &b, const uint8_t *body, size_t blen,
                              uint32_t via, uint64_t seq) {
    // An eager message's bytes, or a device RTS's handle.
    const size_t keep = kEager == h.type                ? blen
                        : (h.flags & kFrameDevice) != 0 ? sizeof(efa_device_ipc_t)
                                                        : 0;
    auto *m = static_cast<Message *>(malloc(sizeof(Message) + keep));
    if (nullptr == m) {
        return nullptr;
    }
    m->link.next = m->link.prev = nullptr;
    m->env = Envelope{h.cid, h.src, h.tag};
    m->type = h.type;
    m->flags = h.flags;
    m->sender = h.sender;
    m->id = h.id;
    m->len = kEager == h.type ? blen : b.len;
    m->addr = b.addr;
    m->cookie_addr = b.cookie_addr;
    m->cookie = b.cookie;
    m->pid = b.pid;
    m->rails = b.rails;
    memcpy(m->rail_key, b.rail_key, sizeof(m->rail_key));
    m->via = via;
    m->seq = seq;
    if (kEager == h.type && keep) {
        memcpy(m->data, body, keep);
    } else if (keep) {
        memcpy(m->data, body + sizeof(RtsBody), keep); // (the frame's length was checked)
    }
    return m;
}

// A partnered receive matched m: keep m for it and ask for the other
// half to be cancelled.  No frame is read until partner_done.
void Engine::hold(Message *m, efa_engine_req_t *req) {
    req->state = kHeld;
    req->remote = reinterpret_cast<uintptr_t>(m);
    ++held_;
    if (req->flags & kReqArmed) {
        cancels_.push_back(req);
    } // else partner_armed asks for the cancel
}

void Engine::partner_armed(efa_engine_req_t *req) {
    {
        Guard g(mu_, mt_);
        req->flags |= kReqArmed;
        if (kHeld == req->state) {
            cancels_.push_back(req);
        }
    }
    run_cancels();
}

// One cancel at a time, taken under the mutex: a request whose other half
// completed since it was queued is no longer in cancels_ (partner_done took
// it out), and one whose cancel is being called is not handed back before
// the call returns (partner_done waits for it).
void Engine::run_cancels() {
    for (;;) {
        efa_engine_req_t *r;
        {
            Guard g(mu_, mt_);
            if (cancels_.empty()) {
                return;
            }
            r = cancels_.back();
            cancels_.pop_back();
            if (mt_) {
                cancelling_.push_back({r, std::this_thread::get_id()});
            }
        }
        r->partner_cancel(r); // (may complete r in this thread: partner_done does not wait)
        if (mt_) {
            {
                Guard g(mu_, true);
                const auto me = std::this_thread::get_id();
                for (auto it = cancelling_.begin(); it != cancelling_.end(); ++it) {
                    if (it->req == r && it->by == me) {
                        cancelling_.erase(it);
                        break;
                    }
                }
            }
            cancel_returned_.notify_all();
        }
    }
}

void Engine::wait_for_cancel(std::unique_lock<std::mutex> &lock, efa_engine_req_t *req) {
    const auto me = std::this_thread::get_id();
    cancel_returned_.wait(lock, [&] {
        for (const CancelCall &c : cancelling_) {
            if (c.req == req && c.by != me) {
                return false;
            }
        }
        return true;
    });
}

// m arrived (or came back from a partnered receive whose other half took
// a message): to the first posted receive it matches, else unexpected.
// False when it is now held.
bool Engine::hand_over(Message *m) {
    efa_engine_req_t *req = match_.arrive(m->env);
    if (nullptr == req) {
        match_.add_unexpected(m);
        ++stats.unexpected;
        return true;
    }
    if (req->flags & kReqPartner) {
        hold(m, req);
        return false;
    }
    if (take(m, req)) {
        req->state = kDone;
        finish(req);
    }
    return true;
}

// A corrupted frame: counted (the MTL reports the count), never followed.
// (Atomic: the MTL's progress reads it without the engine's lock.)
bool Engine::drop() {
    __atomic_fetch_add(&stats.dropped, 1, __ATOMIC_RELAXED);
    return true;
}

// Did process vpid write this frame: a process of the job whose ring is
// the one the frame came in by?  (Attaches the peer on first use.)
bool Engine::from_ring(uint32_t ring, uint32_t vpid) {
    if (ring & kNetVia) { // the provider message named vpid: is that one reached so?
        if ((ring & ~kNetVia) != vpid) {
            return false;
        }
        int err = 0;
        const Peer *p = peer(vpid, err);
        return nullptr != p && nullptr != p->net;
    }
    if (vpid < peers_.size() && peers_[vpid]) {
        return peers_[vpid]->ring == ring;
    }
    int err = 0;
    const Peer *p = peer(vpid, err);
    return nullptr != p && p->ring == ring;
}

// The request an answer (ACK, FIN, CTS, DATA) is about: it must be in the
// table, in 'state', and waiting for the process that wrote the frame.
efa_engine_req_t *Engine::answered(uint32_t ring, const FrameHdr &h, uint8_t state) {
    efa_engine_req_t *req = ids_.find(h.id);
    if (nullptr == req || state != req->state || req->peer != h.sender ||
        !from_ring(ring, h.sender)) {
        return nullptr;
    }
    return req;
}

// One frame from the inbox; false stops the poll (a message is now held).
// The frame is in shared memory: its header is copied once, its lengths
// come from the ring (read once there), and every field is checked before
// it is used.
bool Engine::deliver(uint32_t ring, const void *frame, size_t len) {
    if (len < kShortHdr) {
        return drop();
    }
    ++stats.frames_received;
    FrameHdr h{};
    memcpy(&h, frame, kShortHdr);
    size_t hlen = kShortHdr;
    if (kEagerShort != h.type) {
        if (len < sizeof(FrameHdr)) {
            return drop();
        }
        memcpy(&h, frame, sizeof(h));
        hlen = sizeof(h);
    }
    const uint8_t *body = static_cast<const uint8_t *>(frame) + hlen;
    const size_t blen = len - hlen;
    switch (h.type) {
    case kEagerShort:
        h.type = kEager; // the same from here on, with no answer to send
        // Nor may the frame ask for one: it names no sender, so an ACK
        // would go to vpid 0 about request 0 (a corrupted frame made this
        // process acknowledge itself and crash; tests/fuzz corpus).
        h.flags &= static_cast<uint8_t>(~kFrameSync);
        [[fallthrough]];
    case kEager:
    case kRts: {
        // Numbered before any check: the sender numbered it when written.
        const uint64_t seq = count_arrival(ring);
        RtsBody b{};
        efa_device_ipc_t ipc;
        if (kRts == h.type) {
            const size_t need =
                sizeof(b) + ((h.flags & kFrameDevice) ? sizeof(efa_device_ipc_t) : 0);
            if (blen < need) {
                return drop();
            }
            memcpy(&b, body, sizeof(b));
            if (h.flags & kFrameDevice) [[unlikely]] {
                memcpy(&ipc, body + sizeof(b), sizeof(ipc));
            }
        }
        // A frame to be answered names its sender: checked before it can
        // match (a dropped frame must not take a receive).
        if ((kRts == h.type || (h.flags & kFrameSync)) && !from_ring(ring, h.sender)) {
            return drop();
        }
        if (kRts == h.type && !pid_ok(h.sender, b.pid)) {
            return drop();
        }
        const Envelope env{h.cid, h.src, h.tag};
        efa_engine_req_t *req = match_.arrive(env);
        if (nullptr != req && !(req->flags & kReqPartner)) {
            // The common case: straight from the slot into the receive.
            if (kEager == h.type) {
                req->msg_src = h.src;
                req->msg_tag = h.tag;
                req->msg_len = blen;
                efa_ring_copy(req->buf, body, std::min(blen, req->buflen));
                req->err = blen > req->buflen ? -FI_ETRUNC : 0;
                if (h.flags & kFrameSync) {
                    send_ctrl(h.sender, kAck, h.id, 0);
                }
                req->state = kDone;
                finish(req);
            } else if (pull(req, h, b, (h.flags & kFrameDevice) ? &ipc : nullptr)) {
                req->state = kDone;
                finish(req);
            }
            return true;
        }
        Message *m = make_message(h, b, body, blen, ring, seq);
        if (nullptr == m) [[unlikely]] {
            // No memory to keep it: the message is lost, and with it MPI's
            // order (the next one would take its receive).  As a message
            // the provider lost, the owner ends the job (params_.lost).
            __atomic_fetch_add(&stats.dropped, 1, __ATOMIC_RELAXED);
            lost_.push_back({FI_ADDR_NOTAVAIL, "no memory to keep a message that arrived "
                                               "before its receive"});
            return true;
        }
        if (nullptr == req) {
            match_.add_unexpected(m);
            ++stats.unexpected;
            return true;
        }
        hold(m, req);
        return false;
    }
    case kAck:
    case kFin: {
        efa_engine_req_t *req = answered(ring, h, kAck == h.type ? kWaitAck : kWaitFin);
        if (nullptr == req) {
            return drop();
        }
        ids_.remove(req->local_id);
        req->state = kDone;
        finish(req);
        return true;
    }
    case kCts: {
        efa_engine_req_t *req = answered(ring, h, kWaitFin);
        if (blen < sizeof(CtsBody) || nullptr == req) {
            return drop();
        }
        CtsBody c;
        memcpy(&c, body, sizeof(c));
        int err = 0;
        Peer *p = peer(h.sender, err); // attached: answered() checked its ring
        if (nullptr == p) {
            ids_.remove(req->local_id);
            req->err = err ? err : -FI_ENOENT;
            finish(req);
            return true;
        }
        req->remote = c.recv_id;
        req->done = 0;
        req->state = kStreaming;
        if (req->device) [[unlikely]] {
            stage_device_send(req);
        }
        p->streams.push_back(&req->link);
        mark_busy(p);
        return true;
    }
    case kData: {
        efa_engine_req_t *req = answered(ring, h, kRecvData);
        if (nullptr == req) {
            return drop();
        }
        on_data(req, body, blen, h.flags);
        return true;
    }
    case kCancel:
        on_cancel(ring, h, body, blen);
        return true;
    case kCancelled:
    case kKept:
        on_cancel_answer(ring, h);
        return true;
    default:
        return drop(); // not a frame of this version
    }
}

// The number of a message frame that came by 'ring' (from 1): the
// sender's count of the message frames it wrote to this process, kept
// here alike.  0 for a provider message naming no process of the job.
uint64_t Engine::count_arrival(uint32_t ring) {
    size_t i = ring;
    if (ring & kNetVia) {
        const uint32_t vpid = ring & ~kNetVia;
        if (vpid >= params_.nprocs) {
            return 0;
        }
        i = poll_count_ + vpid;
    }
    if (i >= arrived_.size()) [[unlikely]] {
        arrived_.resize(i + 1);
    }
    return ++arrived_[i];
}

// A sender asks for its message number seq to be withdrawn.  The message
// frame came earlier by the same ring, so it is here: still unexpected
// (withdrawn now, the send is cancelled) or matched or claimed by a probe
// (its normal answer is on its way or already sent; an answer kKept only
// if asked for).  No message is held at this point (nothing is read
// meanwhile).  Only the sender itself may withdraw its message: it names
// itself, and the ring checks the name; the number is of that ring's
// messages alone.  A cancel names its request for the answer: id 0 names
// none, so such a frame is corrupted.
void Engine::on_cancel(uint32_t ring, const FrameHdr &h, const uint8_t *body, size_t blen) {
    if (blen < sizeof(CancelBody) || 0 == h.id || !from_ring(ring, h.sender)) {
        drop();
        return;
    }
    CancelBody c;
    memcpy(&c, body, sizeof(c));
    if (Message *m = match_.withdraw(ring, c.seq)) {
        free(m);
        send_ctrl(h.sender, kCancelled, h.id, 0);
    } else if (h.flags & kFrameAnswer) {
        send_ctrl(h.sender, kKept, h.id, 0);
    }
}

// The receiver's answer to our kCancel: kCancelled (withdrawn: the send
// is cancelled) or kKept (matched: for a send complete already, the
// cancel fails).  A send still waiting (ACK, FIN) completes now as
// cancelled; one complete already only records the outcome for the
// caller's poll (efa_engine_cancel_send).
void Engine::on_cancel_answer(uint32_t ring, const FrameHdr &h) {
    efa_engine_req_t *req = ids_.find(h.id);
    if (nullptr == req || !(req->flags & kReqCancel) || req->peer != h.sender ||
        !from_ring(ring, h.sender)) {
        drop();
        return;
    }
    if (kRecall == req->state) {
        ids_.remove(req->local_id);
        req->local_id = 0;
        req->err = kCancelled == h.type ? -FI_ECANCELED : 0;
        req->state = kDone; // no callback: it was called when the send completed
        return;
    }
    if (kKept == h.type || (kWaitAck != req->state && kWaitFin != req->state)) {
        drop(); // a waiting send is never asked for kKept
        return;
    }
    ids_.remove(req->local_id);
    req->err = -FI_ECANCELED;
    req->state = kDone;
    finish(req);
}

} // namespace efa::engine
