// The matching engine, sending: eager frames, rendezvous announcements, control
// frames, and the queue of what found a ring full (engine.hpp).
#include "engine_impl.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <rdma/fi_errno.h>

#include "efa_core_msg.h"
#include "efa_ring_inline.h"

namespace efa::engine {

// ---- sending -----------------------------------------------------------

// A long frame's first line, written after the rest: the header's kHdr
// bytes and the message's first kFirstLine - kHdr.  Lengths known at
// compile time become a few moves; as variables (the header is one of two
// sizes) their copies cost about 47 instructions more per frame past its
// first line (49 at 256 B), and 17 more for a short frame's header.
template <size_t kHdr>
static inline void write_first_line(uint8_t *f, const FrameHdr &h, const void *buf) {
    static_assert(kHdr < kFirstLine);
    memcpy(f, &h, kHdr);
    memcpy(f + kHdr, buf, kFirstLine - kHdr);
}

namespace {
// A device send by IPC (this node) carries its handle in the RTS; one to
// another node offers its registration (net_mr, set when it was sent).
bool device_by_ipc(const efa_engine_req_t *r) {
    return r->device && nullptr == r->net_mr;
}
size_t rts_len(const efa_engine_req_t *r) {
    return sizeof(RtsBody) + (device_by_ipc(r) ? sizeof(efa_device_ipc_t) : 0);
}
} // namespace

bool Engine::write_message(Peer *p, efa_engine_req_t *r) {
    const bool rndv = r->flags & kReqRndv;
    const bool short_hdr = 0 == r->flags; // eager, standard mode
    const size_t hlen = short_hdr ? kShortHdr : sizeof(FrameHdr);
    const size_t len = hlen + (!rndv ? r->buflen : rts_len(r));
    auto *f = static_cast<uint8_t *>(reserve(p, len));
    if (nullptr == f) {
        return false;
    }
    FrameHdr h{};
    h.type = rndv ? kRts : short_hdr ? kEagerShort : kEager;
    h.flags = (r->flags & kReqSync) ? kFrameSync : 0;
    RtsBody b{};
    if (rndv) {
        b.len = r->buflen;
        if (device_by_ipc(r)) [[unlikely]] {
            h.flags |= kFrameDevice;
            b.pid = static_cast<uint32_t>(getpid()); // (checked against the card's)
            efa_device_ipc_t ipc;
            if (p->vpid == params_.my_vpid) {
                self_ipc(r, &ipc); // (no handle: the receiver is this process)
            } else if (0 != efa_device_ipc_export(r->buf, r->buflen, &ipc)) {
                memset(&ipc, 0, sizeof(ipc)); // none: the receiver asks for DATA
            } else if (0 != ipc.held) {
                r->ipc_held = ipc.held; // (until the send finishes, however)
                r->flags |= kReqHeld;
            }
            memcpy(f + hlen + sizeof(b), &ipc, sizeof(ipc));
        } else if (offer_read(p, r, b)) { // a peer on another node reads it by RMA
            h.flags |= kFrameRead;
        } else if (!r->device) { // (device memory: never for a single copy; streamed)
            b.addr = reinterpret_cast<uintptr_t>(r->buf);
            b.cookie_addr = cookie_addr_;
            b.cookie = cookie_;
            b.pid = static_cast<uint32_t>(getpid());
        }
    }
    h.sender = params_.my_vpid;
    h.cid = r->cid;
    h.src = r->src;
    h.tag = r->tag;
    h.id = r->local_id;
    r->seq = ++p->sent; // the receiver counts it alike (count_arrival)
    if (!rndv && hlen + r->buflen > kFirstLine) {
        // The bytes past the slot's first cache line go first, the first
        // line (header, first bytes) last: the receiver spins on that line,
        // and it should see it change once, complete, rather than lose it
        // to every store of the copy.
        const size_t head = kFirstLine - hlen;
        memcpy(f + kFirstLine, static_cast<const uint8_t *>(r->buf) + head, r->buflen - head);
        if (short_hdr) {
            write_first_line<kShortHdr>(f, h, r->buf);
        } else {
            write_first_line<sizeof(FrameHdr)>(f, h, r->buf);
        }
        commit(p, hlen + r->buflen);
        ++stats.eager;
        ++stats.frames_sent;
        return true;
    }
    if (short_hdr) {
        memcpy(f, &h, kShortHdr); // (a constant length: a few moves, no call)
    } else {
        memcpy(f, &h, sizeof(FrameHdr));
    }
    if (rndv) {
        memcpy(f + sizeof(h), &b, sizeof(b));
        ++stats.rendezvous;
    } else {
        efa_ring_copy_short(f + hlen, r->buf, r->buflen); // (it fits the first line)
        ++stats.eager;
    }
    commit(p, len);
    ++stats.frames_sent;
    return true;
}

// The message frame is in the ring: complete now (true) or wait.
static bool after_written(efa_engine_req_t *r) {
    if (r->flags & kReqRndv) {
        r->state = kWaitFin;
        return false;
    }
    if (r->flags & kReqSync) {
        r->state = kWaitAck;
        return false;
    }
    r->state = kDone;
    return true;
}

bool Engine::write_ctrl(Peer *p, const Ctrl &c) {
    auto *f = static_cast<uint8_t *>(reserve(p, c.len));
    if (nullptr == f) {
        return false;
    }
    memcpy(f, &c.hdr, sizeof(c.hdr));
    if (c.len > sizeof(c.hdr)) {
        memcpy(f + sizeof(c.hdr), &c.cts, sizeof(c.cts));
    }
    commit(p, c.len);
    ++stats.frames_sent;
    return true;
}

// body: a kCts frame's receive id, a kCancel frame's message number.
void Engine::send_ctrl(uint32_t vpid, uint8_t type, uint64_t id, uint64_t body, uint8_t flags) {
    int err = 0;
    Peer *p = peer(vpid, err);
    if (nullptr == p || p->error) {
        return; // the sender's inbox is gone, or the provider cannot reach it: so is the sender
    }
    Ctrl c{};
    static_assert(sizeof(CancelBody) == sizeof(CtsBody));
    c.hdr.type = type;
    c.hdr.flags = flags;
    c.hdr.sender = params_.my_vpid;
    c.hdr.id = id;
    c.cts.recv_id = body;
    c.len = sizeof(FrameHdr) + (kCts == type || kCancel == type ? sizeof(CtsBody) : 0);
    if (p->ctrl.empty() && write_ctrl(p, c)) {
        return;
    }
    p->ctrl.push_back(c);
    mark_busy(p);
}

// Write what waits for p: control frames, then messages in order, then
// DATA of streaming sends.  True when nothing is left.
bool Engine::flush(Peer *p) {
    while (!p->ctrl.empty() && write_ctrl(p, p->ctrl.front())) {
        p->ctrl.pop_front();
    }
    while (efa_engine_link_t *l = p->sends.front()) {
        efa_engine_req_t *r = req_of(l);
        if (!write_message(p, r)) {
            break;
        }
        p->sends.remove(l);
        if (after_written(r)) {
            finish(r);
        }
    }
    while (efa_engine_link_t *l = p->streams.front()) {
        efa_engine_req_t *r = req_of(l);
        while (r->done < r->buflen) {
            size_t n = std::min(r->buflen - r->done, p->data_max);
            const uint8_t *src = static_cast<const uint8_t *>(r->buf) + r->done;
            if (r->device) [[unlikely]] {
                src = staged(r, n); // its host piece (n cut to it)
            }
            auto *f = static_cast<uint8_t *>(reserve(p, sizeof(FrameHdr) + sizeof(DataBody) + n));
            if (nullptr == f) {
                return false;
            }
            FrameHdr h{};
            h.type = kData;
            h.sender = params_.my_vpid;
            h.id = r->remote;
            DataBody b{r->done};
            if (nullptr != src) [[likely]] {
                memcpy(f + sizeof(h) + sizeof(b), src, n);
            } else {
                // A device send whose bytes the device could not copy
                // (staged): the receiver is told.
                h.flags |= kFrameFailed;
            }
            memcpy(f, &h, sizeof(h));
            memcpy(f + sizeof(h), &b, sizeof(b));
            commit(p, sizeof(FrameHdr) + sizeof(DataBody) + n);
            ++stats.frames_sent;
            r->done += n;
        }
        p->streams.remove(l);
        if (r->device) [[unlikely]] {
            unstage(r);
        }
        ids_.remove(r->local_id);
        r->state = kDone;
        finish(r);
    }
    return !p->busy();
}

void Engine::flush_all() {
    size_t keep = 0;
    for (size_t i = 0; i < busy_.size(); ++i) {
        Peer *p = busy_[i];
        if (flush(p)) {
            p->in_busy = false;
        } else {
            busy_[keep++] = p;
        }
    }
    busy_.resize(keep);
}

// Above what goes eager, where the slots hold the RTS with the handle.
size_t Engine::node_device_min() const {
    return sizeof(RtsBody) + sizeof(efa_device_ipc_t) > eager_max_ ? SIZE_MAX : eager_max_ + 1;
}

// kDevice: buf is device memory (efa_engine_send_device); a host send
// pays nothing for device sends but the store of req->device.
// kDevice with req->net_mr set: a device send to another node, read from
// that registration (efa_engine_send_device_read).
template <bool kDevice>
int Engine::send(uint32_t vpid, uint32_t cid, int32_t src, int32_t tag, const void *buf, size_t len,
                 bool sync, efa_engine_req_t *req) {
    Guard g(mu_, mt_);
    int err = 0;
    Peer *p = peer(vpid, err);
    if (nullptr == p) {
        return err ? err : -FI_ENOENT;
    }
    if (p->error) {
        return p->error;
    }
    if (p->net && !interest_) {
        interest_ = true; // answers and completions come from the provider now
        efa_core_net_interest(net_->core(), 1);
    }
    req->buf = const_cast<void *>(buf);
    req->buflen = len;
    req->cid = cid;
    req->src = src;
    req->tag = tag;
    req->peer = vpid;
    req->err = 0;
    req->done = 0;
    req->seq = 0;
    req->device = kDevice;
    if constexpr (kDevice) {
        req->ipc_held = 0;
        void *const device_mr = req->net_mr;
        if (nullptr != device_mr) {
            if (p->out || !p->net) {
                return -FI_EOPNOTSUPP; // a registration to read: a peer on another node only
            }
        } else if (!p->out || sizeof(RtsBody) + sizeof(efa_device_ipc_t) > p->eager_max) {
            return -FI_EOPNOTSUPP; // by IPC: a peer of this node only, by slots its RTS fits
        }
        // Never copied into a frame: always a rendezvous.
        req->flags = static_cast<uint8_t>((sync ? kReqSync : 0) | kReqRndv);
        if (nullptr != device_mr) {
            req->flags |= kReqHeld; // (offer_read offers it; finish releases it)
        }
    } else {
        req->flags =
            static_cast<uint8_t>((sync ? kReqSync : 0) | (len > p->eager_max ? kReqRndv : 0));
    }
    // Only a send the receiver answers (ACK, FIN, CTS) needs an id.
    req->local_id = req->flags ? ids_.add(req) : 0;
    if (p->sends.empty() && write_message(p, req)) {
        const int done = after_written(req) ? 1 : 0;
        fail_noted(); // its post failed for good: req fails with the peer if it waits
        return done;
    }
    req->state = kSendQueued;
    p->sends.push_back(&req->link);
    ++stats.queued;
    mark_busy(p);
    fail_noted(); // (reserve() may have posted p's open message, and that failed)
    return 0;
}

template int Engine::send<false>(uint32_t, uint32_t, int32_t, int32_t, const void *, size_t, bool,
                                 efa_engine_req_t *);
template int Engine::send<true>(uint32_t, uint32_t, int32_t, int32_t, const void *, size_t, bool,
                                efa_engine_req_t *);

} // namespace efa::engine

// The C seam (efa_engine.h) of what this file implements.

extern "C" {

int efa_engine_send(efa_engine_t *e, uint32_t peer, uint32_t cid, int32_t src, int32_t tag,
                    const void *buf, size_t len, bool sync, efa_engine_req_t *req) {
    return e->engine->send<false>(peer, cid, src, tag, buf, len, sync, req);
}

int efa_engine_send_device(efa_engine_t *e, uint32_t peer, uint32_t cid, int32_t src, int32_t tag,
                           const void *buf, size_t len, bool sync, efa_engine_req_t *req) {
    req->net_mr = nullptr; // (by IPC)
    return e->engine->send<true>(peer, cid, src, tag, buf, len, sync, req);
}

int efa_engine_send_device_read(efa_engine_t *e, uint32_t peer, uint32_t cid, int32_t src,
                                int32_t tag, const void *buf, size_t len, bool sync, efa_mr_t *mr,
                                efa_engine_req_t *req) {
    if (nullptr == mr) {
        return -FI_EINVAL;
    }
    req->net_mr = mr;
    return e->engine->send<true>(peer, cid, src, tag, buf, len, sync, req);
}

} // extern "C"
