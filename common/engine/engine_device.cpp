// The matching engine's device memory (efa_device.h) on the receiving
// side: this node's device messages copied device to device through the
// sender's imported allocation (IPC), a device send the receiver asked to
// stream copied to the host once, and a streamed receive into device
// memory copied on to it a piece at a time (engine.hpp; reads from other
// nodes land piece by piece in engine_read.cpp).
#include "engine_impl.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <rdma/fi_errno.h>

namespace efa::engine {

// Where this process reaches peer p's device allocation 'ipc' names:
// imported once (for near, the memory it is copied to), kept (the latest
// used last); nullptr where the import fails (that handle is then not
// tried again while it is among the last kIpcKept refused, unless what
// failed may pass: descriptors, memory or a context lacking).
void *Engine::ipc_base(Peer *p, const efa_device_ipc_t &ipc, const void *near) {
    efa_device_ipc_t key = ipc;
    key.offset = 0;
    key.held = 0; // (this message's, not the allocation's: imported with it, kept without)
    for (size_t i = p->ipc.size(); i-- > 0;) {
        if (0 == memcmp(&p->ipc[i].key, &key, sizeof(key))) {
            const IpcMap m = p->ipc[i];
            p->ipc.erase(p->ipc.begin() + static_cast<std::ptrdiff_t>(i));
            p->ipc.push_back(m);
            return m.base;
        }
    }
    for (const efa_device_ipc_t &r : p->ipc_refused) {
        if (0 == memcmp(&r, &key, sizeof(key))) {
            return nullptr; // refused before: the device would refuse it again
        }
    }
    void *base = nullptr;
    efa_device_ipc_t import = key;
    import.held = ipc.held;
    int rc = 0 == p->pid ? -FI_EINVAL : efa_device_ipc_import(p->pid, &import, near, &base);
    if (-FI_EALREADY == rc && !p->ipc.empty()) {
        // One of the peer's imports kept is of an allocation it freed,
        // whose address the new one took, and the device maps the new one
        // only once the old is closed (CUDA: "already mapped").  Those kept
        // are closed (a later message imports them again) and the import
        // asked once more.  (Any other refusal leaves them be.)
        for (const IpcMap &m : p->ipc) {
            efa_device_ipc_close(m.base);
        }
        p->ipc.clear();
        rc = efa_device_ipc_import(p->pid, &import, near, &base);
    }
    if (-FI_EAGAIN == rc || -FI_EMFILE == rc || -FI_ENOMEM == rc) {
        return nullptr; // (for now: descriptors, memory or a context lacking; asked again)
    }
    if (0 != rc) {
        if (p->ipc_refused.size() >= kIpcKept) {
            p->ipc_refused.erase(p->ipc_refused.begin());
        }
        p->ipc_refused.push_back(key);
        return nullptr;
    }
    p->ipc.push_back(IpcMap{key, base});
    uint64_t kept = 0; // (past the latest)
    for (size_t i = 0; i + 1 < p->ipc.size(); ++i) {
        kept += p->ipc[i].key.alloc_len;
    }
    while (p->ipc.size() > 1 && (p->ipc.size() > kIpcKept || kept > kIpcKeptBytes)) {
        kept -= p->ipc.front().key.alloc_len;
        efa_device_ipc_close(p->ipc.front().base);
        p->ipc.erase(p->ipc.begin());
    }
    return base;
}

// A device message to this process itself names its buffer's address, not
// an IPC handle: CUDA refuses to open a handle of the process's own
// memory, and the message would stream through the host, twice copied,
// with an export and a failed import each time.  Only this process reads
// it (self_base: the receiver is the sender).
namespace {
constexpr char kSelfMagic[8] = {'e', 'f', 'a', '-', 's', 'e', 'l', 'f'};
}

void Engine::self_ipc(const efa_engine_req_t *r, efa_device_ipc_t *out) {
    memset(out, 0, sizeof(*out));
    const auto at = reinterpret_cast<uintptr_t>(r->buf);
    memcpy(out->handle, kSelfMagic, sizeof(kSelfMagic));
    memcpy(out->handle + sizeof(kSelfMagic), &at, sizeof(at));
    out->alloc_len = r->buflen;
}

void *Engine::self_base(const efa_device_ipc_t &ipc) {
    uintptr_t at = 0;
    if (0 != memcmp(ipc.handle, kSelfMagic, sizeof(kSelfMagic))) {
        return nullptr;
    }
    memcpy(&at, ipc.handle + sizeof(kSelfMagic), sizeof(at));
    // Device memory of this process, the whole message (a frame in the
    // process's own ring naming anything else is forged: not read).
    void *buf = reinterpret_cast<void *>(at);
    return efa_device_check(buf, ipc.alloc_len) ? buf : nullptr;
}

// An import that failed a copy: closed, so that the next message imports
// it afresh.
void Engine::ipc_forget(Peer *p, void *base) {
    for (size_t i = 0; i < p->ipc.size(); ++i) {
        if (p->ipc[i].base == base) {
            efa_device_ipc_close(base);
            p->ipc.erase(p->ipc.begin() + static_cast<std::ptrdiff_t>(i));
            return;
        }
    }
}

// A send from device memory the receiver asked to stream (CTS): its bytes
// go through a host buffer of one piece (net_device_piece; 0: the whole
// message), copied from the device as the frames reach them (staged), so
// the first frames leave after one piece's copy rather than the whole
// message's, and the copies of later pieces overlap the receiver taking
// the earlier ones.  Where the buffer cannot be had, every DATA frame says
// the bytes could not be read (kFrameFailed).
void Engine::stage_device_send(efa_engine_req_t *req) {
    req->device_done = 0; // (the end of the bytes staged so far)
    req->stage = malloc(stage_piece(req));
    if (nullptr == req->stage) {
        req->err = -FI_EIO;
    }
    ++stats.device_send_staged;
}

size_t Engine::stage_piece(const efa_engine_req_t *req) const {
    const size_t piece = params_.net_device_piece;
    return std::max<size_t>(1, 0 != piece ? std::min(piece, req->buflen) : req->buflen);
}

// The host bytes of a staged device send at req->done, n cut to those
// staged; the next piece is copied from the device once the frames have
// taken the last.  nullptr where the device could not copy it (this frame
// and every later one then say so, and the send fails; the frames before
// carried bytes it did read).  Pieces start at multiples of stage_piece,
// as frames never cross a piece's end.
const uint8_t *Engine::staged(efa_engine_req_t *req, size_t &n) {
    if (nullptr == req->stage) [[unlikely]] {
        return nullptr;
    }
    const size_t piece = stage_piece(req);
    if (req->done == req->device_done) {
        const size_t len = std::min(piece, req->buflen - req->done);
        if (0 !=
            efa_device_copy(req->stage, static_cast<const uint8_t *>(req->buf) + req->done, len)) {
            unstage(req);
            req->err = -FI_EIO;
            return nullptr;
        }
        req->device_done += len;
        ++stats.device_send_pieces;
    }
    n = std::min(n, req->device_done - req->done);
    return static_cast<const uint8_t *>(req->stage) + req->done % piece;
}

// A receive matched an RTS of device memory from peer p of this node: the
// bytes copied by the device from the sender's allocation (true), or
// false where that cannot be (the sender streams them).
bool Engine::pull_device(Peer *p, efa_engine_req_t *req, const FrameHdr &h, const RtsBody &b,
                         const efa_device_ipc_t &ipc) {
    const size_t n = std::min<size_t>(b.len, req->buflen);
    if (!p->out || ipc.offset > ipc.alloc_len || b.len > ipc.alloc_len - ipc.offset) {
        return false; // no handle (alloc_len 0), or one that does not hold the message
    }
    if (n > 0) {
        void *dst = req->device_buf ? req->device_buf : req->buf;
        void *base = p->vpid == params_.my_vpid ? self_base(ipc) : ipc_base(p, ipc, dst);
        if (nullptr == base) {
            return false;
        }
        if (0 != efa_device_copy(dst, static_cast<const uint8_t *>(base) + ipc.offset, n)) {
            ipc_forget(p, base);
            return false;
        }
        req->device_landed = nullptr != req->device_buf;
    }
    req->err = b.len > req->buflen ? -FI_ETRUNC : 0;
    send_ctrl(h.sender, kFin, h.id, 0);
    ++(p->vpid == params_.my_vpid ? stats.device_self : stats.device_ipc);
    return true;
}

// A streamed receive in device memory: what its DATA frames put in the
// host buffer goes on to the device a piece (net_device_piece) at a time,
// as soon as a piece is whole, and the rest when the message is in, so
// that only the last piece's copy is left after the last frame rather
// than the whole message's; the owner then copies nothing
// (device_landed).  The frames come in order (on_data), so the bytes in
// are always those before req->done.  A failed copy (or bytes the sender
// could not read) leaves the whole message to the owner, from the host
// buffer.  Under mu_: a piece's copy holds the engine as any frame's
// memcpy does.
void Engine::stream_to_device(efa_engine_req_t *req) {
    if (SIZE_MAX == req->device_done || 0 != req->err) {
        return;
    }
    const size_t piece = params_.net_device_piece;
    const bool last = req->done >= req->msg_len;
    const size_t in = std::min(req->done, req->buflen);
    const size_t to = last ? in : std::min(req->done / piece * piece, req->buflen);
    if (to > req->device_done) {
        const size_t from = req->device_done;
        if (0 != efa_device_copy(static_cast<uint8_t *>(req->device_buf) + from,
                                 static_cast<const uint8_t *>(req->buf) + from, to - from)) {
            req->device_done = SIZE_MAX;
            return;
        }
        req->device_done = to;
        ++stats.device_stream_pieces;
    }
    if (last) {
        req->device_landed = true;
        ++stats.device_stream_landed;
    }
}

} // namespace efa::engine
