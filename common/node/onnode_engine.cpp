// The on-node point-to-point engine (onnode_engine.hpp has the design).
#include "onnode_engine.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include <rdma/fi_errno.h>
#include <sys/uio.h>

#include "efa_core_msg.h"
#include <unistd.h>

namespace efa::onnode {

namespace {

// Request flags and states (efa_onnode_req_t.flags / .state).
constexpr uint8_t kReqSync = 1;
constexpr uint8_t kReqRndv = 2;
constexpr uint8_t kReqPartner = 4; // a receive posted elsewhere too
constexpr uint8_t kReqArmed = 8;   // ... and that other half is posted
constexpr uint8_t kReqCancel = 16; // send: kCancel written or queued

constexpr uint8_t kFrameSync = 1; // eager frame: answer ACK on match
constexpr int kPollBudget = 64;
constexpr uint32_t kNoRing = 0xffffffffu;
// Frame bytes in the slot's first cache line (the slot's own 8-byte header
// takes the rest): slots are cache-line aligned.
constexpr size_t kFirstLine = shm::kLine - shm::kSlotHeader;

// What this process names in its RTS frames so a receiver can check that
// process_vm_readv reaches this process (and not another of the same pid
// in another namespace).
volatile uint64_t g_cookie = 0;

uint64_t make_cookie() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (static_cast<uint64_t>(getpid()) << 32) ^ static_cast<uint64_t>(ts.tv_nsec) ^
                 (static_cast<uint64_t>(ts.tv_sec) << 16) ^ reinterpret_cast<uintptr_t>(&ts);
    x += 0x9e3779b97f4a7c15ull; // splitmix64 finaliser
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return (x ^ (x >> 31)) | 1;
}

// Copy len bytes at 'remote' in process pid to local: 0 or an errno.
int cma_read(uint32_t pid, void *local, uint64_t remote, size_t len) {
#ifdef EFA_HAVE_CMA
    size_t done = 0;
    while (done < len) {
        iovec l{static_cast<uint8_t *>(local) + done, len - done};
        iovec r{reinterpret_cast<void *>(static_cast<uintptr_t>(remote + done)), len - done};
        ssize_t n = process_vm_readv(static_cast<pid_t>(pid), &l, 1, &r, 1, 0);
        if (n < 0) {
            if (EINTR == errno) {
                continue;
            }
            return errno;
        }
        if (0 == n) {
            return EFAULT;
        }
        done += static_cast<size_t>(n);
    }
    return 0;
#else
    (void)pid, (void)local, (void)remote, (void)len;
    return ENOSYS;
#endif
}

} // namespace

uint64_t IdTable::add(efa_onnode_req_t *req) {
    uint32_t i;
    if (!free_.empty()) {
        i = free_.back();
        free_.pop_back();
    } else {
        i = static_cast<uint32_t>(entries_.size());
        entries_.emplace_back();
    }
    Entry &e = entries_[i];
    e.req = req;
    e.gen = e.gen + 1 ? e.gen + 1 : 1; // never 0: an id of 0 means none
    return static_cast<uint64_t>(e.gen) << 32 | i;
}

efa_onnode_req_t *IdTable::find(uint64_t id) const {
    const uint64_t i = id & 0xffffffffu;
    if (i >= entries_.size() || entries_[i].gen != static_cast<uint32_t>(id >> 32)) {
        return nullptr;
    }
    return entries_[i].req;
}

void IdTable::remove(uint64_t id) {
    const uint64_t i = id & 0xffffffffu;
    if (0 != id && i < entries_.size() && entries_[i].req &&
        entries_[i].gen == static_cast<uint32_t>(id >> 32)) {
        entries_[i].req = nullptr;
        free_.push_back(static_cast<uint32_t>(i));
    }
}

std::string inbox_path(const std::string &dir, const std::string &job_tag, uint32_t vpid) {
    return dir + "/efa_mtl_ring." + job_tag + "." + std::to_string(vpid);
}

std::unique_ptr<Engine> Engine::create(const efa_onnode_params_t &p, int &err) {
    err = 0;
    const bool rings = !p.no_rings;
    if ((rings && !p.node && (!p.inbox_dir || !p.job_tag)) ||
        (rings && (p.nlocal == 0 || p.local_rank >= p.nlocal)) ||
        (p.node && (p.channel >= EFA_NODE_CHANNELS || node::of(p.node).nlocal() != p.nlocal ||
                    node::of(p.node).local_rank() != p.local_rank)) ||
        p.nprocs < p.nlocal || p.my_vpid >= p.nprocs || p.nprocs >= kNetVia || !p.peer_card ||
        (rings && p.slot_size < sizeof(FrameHdr) + sizeof(DataBody) + shm::kSlotHeader + 64) ||
        (!rings && !p.core) || (p.core && (!p.peer_addr || p.net_eager < 64))) {
        err = -FI_EINVAL;
        return nullptr;
    }
    std::unique_ptr<Engine> e(new Engine());
    e->params_ = p;
    e->dir_ = p.inbox_dir ? p.inbox_dir : "";
    e->job_tag_ = p.job_tag ? p.job_tag : "";
    e->params_.inbox_dir = e->dir_.c_str();
    e->params_.job_tag = e->job_tag_.c_str();
    e->mt_ = p.thread_safe;
    if (rings && p.node) {
        // The shared inbox: its channel's rings, reserved now for the same
        // reason as below.
        e->node_ = &node::of(p.node);
        err = e->node_->open_channel(p.channel, true);
        if (err) {
            return nullptr;
        }
        if (e->node_->max_frame() < sizeof(FrameHdr) + sizeof(DataBody) + 64) {
            e->node_->close_channel(p.channel);
            err = -FI_EINVAL;
            return nullptr;
        }
        e->eager_max_ = e->node_->max_frame() - sizeof(FrameHdr);
        e->data_max_ = e->node_->max_frame() - sizeof(FrameHdr) - sizeof(DataBody);
    } else if (rings) {
        shm::Geometry g;
        g.nrings = p.nlocal;
        g.nslots = p.slots;
        g.slot_size = p.slot_size;
        // Every ring reserved now: once this process publishes its card,
        // every peer sends to it through the rings (both ends must agree on
        // the path), so a sender cannot fall back later for want of room.
        e->inbox_ = shm::Inbox::create(inbox_path(e->dir_, e->job_tag_, p.my_vpid), g, err, true);
        if (!e->inbox_) {
            return nullptr;
        }
        e->eager_max_ = g.max_frame() - sizeof(FrameHdr);
        e->data_max_ = g.max_frame() - sizeof(FrameHdr) - sizeof(DataBody);
    }
    if (p.core) {
        NetParams np;
        np.core = p.core;
        np.my_vpid = p.my_vpid;
        np.buf_size = std::max(np.buf_size, p.net_eager + sizeof(FrameHdr) + sizeof(NetHdr) +
                                                sizeof(NetFrameHdr));
        // No provider message over its limit (efa-direct's is the MTU):
        // eager messages and streamed data shrink to fit.
        np.buf_size = std::min(np.buf_size, efa_core_msg_max_size(p.core));
        if (p.net_window) {
            np.window = p.net_window;
        }
        np.coalesce_bytes = p.net_coalesce_bytes;
        np.inject = !p.net_no_inject;
        if (p.net_coalesce_max) {
            np.coalesce_max = p.net_coalesce_max;
        }
        e->net_ = NetLink::create(np, net_sent, e.get(), err);
        if (!e->net_) {
            if (e->node_) {
                e->node_->close_channel(p.channel);
            }
            return nullptr;
        }
        e->order_ = NetOrder(p.nprocs);
        err = efa_core_msg_set_channel(p.core, EFA_MSG_CHANNEL_ENGINE, net_message, e.get());
        if (err) {
            e->net_.reset();
            if (e->node_) {
                e->node_->close_channel(p.channel);
            }
            return nullptr;
        }
    }
    if (0 == g_cookie) {
        g_cookie = make_cookie();
    }
    return e;
}

Engine::~Engine() {
    // Answers other processes still wait for (ACK, FIN, CTS, DATA) go out
    // first; a peer that is gone cannot take them, hence the bound.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while ((!busy_.empty() || (net_ && !net_->idle())) &&
           std::chrono::steady_clock::now() < until) {
        progress();
        if (net_) {
            efa_core_progress(net_->core());
        }
    }
    if (net_) {
        efa_core_msg_set_channel(net_->core(), EFA_MSG_CHANNEL_ENGINE, nullptr, nullptr);
        if (interest_) {
            efa_core_net_interest(net_->core(), -1);
        }
    }
    match_.drain_unexpected([](Message *m) { free(m); });
    if (node_) {
        node_->close_channel(params_.channel); // the node (and its file) stays its other users'
    }
}

const std::string &Engine::path() const {
    static const std::string none;
    return inbox_ ? inbox_->path() : node_ ? node_->path() : none;
}

efa_onnode_card_t Engine::my_card() const {
    efa_onnode_card_t c{};
    c.cookie = inbox_ ? inbox_->cookie() : node_ ? node_->card().cookie : 0;
    c.local_rank = params_.local_rank;
    return c;
}

Engine::Peer *Engine::peer(uint32_t vpid, int &err) {
    if (vpid >= params_.nprocs) {
        err = -FI_EINVAL; // not a process of this job
        return nullptr;
    }
    if (vpid >= peers_.size()) {
        peers_.resize(static_cast<size_t>(vpid) + 1);
    }
    if (peers_[vpid]) {
        return peers_[vpid].get();
    }
    efa_onnode_card_t card{};
    if (!inbox_ && !node_) {
        return net_peer(vpid, err);
    }
    if (vpid == params_.my_vpid) {
        card = my_card();
    } else if (0 != (err = params_.peer_card(params_.peer_card_arg, vpid, &card))) {
        if (-FI_ENOENT == err && net_) {
            return net_peer(vpid, err);
        }
        return nullptr;
    }
    if (card.local_rank >= params_.nlocal) {
        err = -FI_EINVAL;
        return nullptr;
    }
    std::unique_ptr<shm::Outbox> out;
    if (node_) { // the peer's card said it serves this channel (else peer_card said -FI_ENOENT)
        const efa_node_card_t nc{card.cookie, card.local_rank, 1u << params_.channel};
        out = node_->attach(vpid, nc, params_.channel, err);
    } else {
        out = shm::Outbox::attach(inbox_path(dir_, job_tag_, vpid), params_.local_rank, card.cookie,
                                  err);
    }
    if (!out) {
        return nullptr;
    }
    auto p = std::make_unique<Peer>();
    p->vpid = vpid;
    p->ring = card.local_rank;
    p->out = std::move(out);
    p->eager_max = eager_max_;
    p->data_max = data_max_;
    if (!params_.single_copy) {
        p->cma = Peer::kCmaOff;
    }
    peers_[vpid] = std::move(p);
    return peers_[vpid].get();
}

// A peer reached through the provider (peers_ is sized already).
Engine::Peer *Engine::net_peer(uint32_t vpid, int &err) {
    fi_addr_t addr = FI_ADDR_UNSPEC;
    efa_ctx_t *ctx = nullptr;
    if (0 != (err = params_.peer_addr(params_.peer_card_arg, vpid, &addr, &ctx))) {
        return nullptr;
    }
    auto p = std::make_unique<Peer>();
    p->vpid = vpid;
    p->ring = kNoRing;
    p->net = net_->add_peer(vpid, addr, ctx);
    p->cma = Peer::kCmaOff; // its pid means nothing on this node
    p->eager_max = std::min(params_.net_eager, net_->max_frame() - sizeof(FrameHdr));
    p->data_max = net_->max_frame() - sizeof(FrameHdr) - sizeof(DataBody);
    peers_[vpid] = std::move(p);
    return peers_[vpid].get();
}

void Engine::mark_busy(Peer *p) {
    if (!p->in_busy) {
        p->in_busy = true;
        busy_.push_back(p);
    }
}

// ---- sending -----------------------------------------------------------

bool Engine::write_message(Peer *p, efa_onnode_req_t *r) {
    const bool rndv = r->flags & kReqRndv;
    const bool short_hdr = 0 == r->flags; // eager, standard mode
    const size_t hlen = short_hdr ? kShortHdr : sizeof(FrameHdr);
    const size_t len = hlen + (rndv ? sizeof(RtsBody) : r->buflen);
    auto *f = static_cast<uint8_t *>(reserve(p, len));
    if (nullptr == f) {
        return false;
    }
    FrameHdr h{};
    h.type = rndv ? kRts : short_hdr ? kEagerShort : kEager;
    h.flags = (r->flags & kReqSync) ? kFrameSync : 0;
    h.sender = params_.my_vpid;
    h.cid = r->cid;
    h.src = r->src;
    h.tag = r->tag;
    h.id = r->local_id;
    if (!rndv && hlen + r->buflen > kFirstLine) {
        // The bytes past the slot's first cache line go first, the first
        // line (header, first bytes) last: the receiver spins on that line,
        // and it should see it change once, complete, rather than lose it
        // to every store of the copy.
        const size_t head = kFirstLine - hlen;
        memcpy(f + kFirstLine, static_cast<const uint8_t *>(r->buf) + head, r->buflen - head);
        memcpy(f, &h, hlen);
        memcpy(f + hlen, r->buf, head);
        commit(p, hlen + r->buflen);
        ++stats.eager;
        ++stats.frames_sent;
        return true;
    }
    memcpy(f, &h, hlen);
    if (rndv) {
        RtsBody b{};
        b.len = r->buflen;
        b.addr = reinterpret_cast<uintptr_t>(r->buf);
        b.cookie_addr = reinterpret_cast<uintptr_t>(&g_cookie);
        b.cookie = g_cookie;
        b.pid = static_cast<uint32_t>(getpid());
        memcpy(f + sizeof(h), &b, sizeof(b));
        ++stats.rendezvous;
    } else {
        if (r->buflen) {
            memcpy(f + hlen, r->buf, r->buflen);
        }
        ++stats.eager;
    }
    commit(p, len);
    ++stats.frames_sent;
    return true;
}

// The message frame is in the ring: complete now (true) or wait.
static bool after_written(efa_onnode_req_t *r) {
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

void Engine::send_ctrl(uint32_t vpid, uint8_t type, uint64_t id, uint64_t recv_id) {
    int err = 0;
    Peer *p = peer(vpid, err);
    if (nullptr == p || p->error) {
        return; // the sender's inbox is gone, or the provider cannot reach it: so is the sender
    }
    Ctrl c{};
    c.hdr.type = type;
    c.hdr.sender = params_.my_vpid;
    c.hdr.id = id;
    c.cts.recv_id = recv_id;
    c.len = sizeof(FrameHdr) + (kCts == type ? sizeof(CtsBody) : 0);
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
    while (efa_onnode_link_t *l = p->sends.front()) {
        efa_onnode_req_t *r = req_of(l);
        if (!write_message(p, r)) {
            break;
        }
        p->sends.remove(l);
        if (after_written(r)) {
            finish(r);
        }
    }
    while (efa_onnode_link_t *l = p->streams.front()) {
        efa_onnode_req_t *r = req_of(l);
        while (r->done < r->buflen) {
            const size_t n = std::min(r->buflen - r->done, p->data_max);
            auto *f = static_cast<uint8_t *>(reserve(p, sizeof(FrameHdr) + sizeof(DataBody) + n));
            if (nullptr == f) {
                return false;
            }
            FrameHdr h{};
            h.type = kData;
            h.sender = params_.my_vpid;
            h.id = r->remote;
            DataBody b{r->done};
            memcpy(f, &h, sizeof(h));
            memcpy(f + sizeof(h), &b, sizeof(b));
            memcpy(f + sizeof(h) + sizeof(b), static_cast<const uint8_t *>(r->buf) + r->done, n);
            commit(p, sizeof(FrameHdr) + sizeof(DataBody) + n);
            ++stats.frames_sent;
            r->done += n;
        }
        p->streams.remove(l);
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

int Engine::send(uint32_t vpid, uint32_t cid, int32_t src, int32_t tag, const void *buf, size_t len,
                 bool sync, efa_onnode_req_t *req) {
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
    req->flags = static_cast<uint8_t>((sync ? kReqSync : 0) | (len > p->eager_max ? kReqRndv : 0));
    // Only a send the receiver answers (ACK, FIN, CTS) needs an id.
    req->local_id = req->flags ? ids_.add(req) : 0;
    if (p->sends.empty() && write_message(p, req)) {
        return after_written(req) ? 1 : 0;
    }
    req->state = kSendQueued;
    p->sends.push_back(&req->link);
    ++stats.queued;
    mark_busy(p);
    return 0;
}

// ---- receiving ---------------------------------------------------------

bool Engine::cma_ok(Peer *p, const RtsBody &b) {
    if (Peer::kCmaUnknown == p->cma) {
        uint64_t seen = 0;
        p->cma = (0 == cma_read(b.pid, &seen, b.cookie_addr, sizeof(seen)) && seen == b.cookie)
                     ? Peer::kCmaOn
                     : Peer::kCmaOff;
    }
    return Peer::kCmaOn == p->cma;
}

// A receive matched an RTS: copy the bytes now (true: complete) or ask for
// them (false: DATA frames follow).
bool Engine::pull(efa_onnode_req_t *req, const FrameHdr &h, const RtsBody &b) {
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
    if (cma_ok(p, b)) {
        if (0 == n || 0 == cma_read(b.pid, req->buf, b.addr, n)) {
            req->err = b.len > req->buflen ? -FI_ETRUNC : 0;
            send_ctrl(h.sender, kFin, h.id, 0);
            ++stats.single_copy;
            return true;
        }
        p->cma = Peer::kCmaOff; // refused half way: the sender streams it all
    }
    req->state = kRecvData;
    req->peer = h.sender;
    req->remote = h.id;
    req->done = 0;
    req->local_id = ids_.add(req);
    send_ctrl(h.sender, kCts, h.id, req->local_id);
    ++stats.streamed;
    return false;
}

// Hand a waiting message to its receive: true when complete.
bool Engine::take(Message *m, efa_onnode_req_t *req) {
    req->msg_src = m->env.src;
    req->msg_tag = m->env.tag;
    req->msg_len = m->len;
    if (kEager == m->type) {
        const size_t n = std::min(m->len, req->buflen);
        if (n) {
            memcpy(req->buf, m->data, n);
        }
        req->err = m->len > req->buflen ? -FI_ETRUNC : 0;
        if (m->flags & kFrameSync) {
            send_ctrl(m->sender, kAck, m->id, 0);
        }
        free(m);
        req->state = kDone;
        return true;
    }
    FrameHdr h{};
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
    free(m);
    if (pull(req, h, b)) {
        req->state = kDone;
        return true;
    }
    return false;
}

// DATA for a receive that answered CTS.  A sender streams in order through
// one ring, so each frame starts where the last ended; anything else (or
// bytes beyond the message's length) is a corrupted frame.
void Engine::on_data(efa_onnode_req_t *req, const uint8_t *bytes, size_t n) {
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
    if (b.offset < req->buflen) {
        memcpy(static_cast<uint8_t *>(req->buf) + b.offset, bytes,
               std::min<size_t>(n, req->buflen - b.offset));
    }
    req->done += n;
    if (req->done >= req->msg_len) {
        ids_.remove(req->local_id);
        req->err = req->msg_len > req->buflen ? -FI_ETRUNC : 0;
        req->state = kDone;
        finish(req);
    }
}

// A copy of an arrived message's frame, for the unexpected queue or to
// hold for a partnered receive (nullptr if out of memory).
Message *Engine::make_message(const FrameHdr &h, const RtsBody &b, const uint8_t *body,
                              size_t blen) {
    const size_t keep = kEager == h.type ? blen : 0;
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
    if (keep) {
        memcpy(m->data, body, keep);
    }
    return m;
}

// A partnered receive matched m: keep m for it and ask for the other
// half to be cancelled.  No frame is read until partner_done.
void Engine::hold(Message *m, efa_onnode_req_t *req) {
    req->state = kHeld;
    req->remote = reinterpret_cast<uintptr_t>(m);
    ++held_;
    if (req->flags & kReqArmed) {
        cancels_.push_back(req);
    } // else partner_armed asks for the cancel
}

void Engine::partner_armed(efa_onnode_req_t *req) {
    {
        Guard g(mu_, mt_);
        req->flags |= kReqArmed;
        if (kHeld == req->state) {
            cancels_.push_back(req);
        }
    }
    run_cancels();
}

void Engine::run_cancels() {
    std::vector<efa_onnode_req_t *> todo;
    {
        Guard g(mu_, mt_);
        todo.swap(cancels_);
    }
    for (efa_onnode_req_t *r : todo) {
        r->partner_cancel(r);
    }
}

// m arrived (or came back from a partnered receive whose other half took
// a message): to the first posted receive it matches, else unexpected.
// False when it is now held.
bool Engine::hand_over(Message *m) {
    efa_onnode_req_t *req = match_.arrive(m->env);
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
bool Engine::drop() {
    ++stats.dropped;
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
efa_onnode_req_t *Engine::answered(uint32_t ring, const FrameHdr &h, uint8_t state) {
    efa_onnode_req_t *req = ids_.find(h.id);
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
        RtsBody b{};
        if (kRts == h.type) {
            if (blen < sizeof(b)) {
                return drop();
            }
            memcpy(&b, body, sizeof(b));
        }
        // A frame to be answered names its sender: checked before it can
        // match (a dropped frame must not take a receive).
        if ((kRts == h.type || (h.flags & kFrameSync)) && !from_ring(ring, h.sender)) {
            return drop();
        }
        const Envelope env{h.cid, h.src, h.tag};
        efa_onnode_req_t *req = match_.arrive(env);
        if (nullptr != req && !(req->flags & kReqPartner)) {
            // The common case: straight from the slot into the receive.
            if (kEager == h.type) {
                req->msg_src = h.src;
                req->msg_tag = h.tag;
                req->msg_len = blen;
                const size_t n = std::min(blen, req->buflen);
                if (n) {
                    memcpy(req->buf, body, n);
                }
                req->err = blen > req->buflen ? -FI_ETRUNC : 0;
                if (h.flags & kFrameSync) {
                    send_ctrl(h.sender, kAck, h.id, 0);
                }
                req->state = kDone;
                finish(req);
            } else if (pull(req, h, b)) {
                req->state = kDone;
                finish(req);
            }
            return true;
        }
        Message *m = make_message(h, b, body, blen);
        if (nullptr == m) {
            return true; // cannot happen in practice; the sender's ssend would wait
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
        efa_onnode_req_t *req = answered(ring, h, kAck == h.type ? kWaitAck : kWaitFin);
        if (nullptr == req) {
            return drop();
        }
        ids_.remove(req->local_id);
        req->state = kDone;
        finish(req);
        return true;
    }
    case kCts: {
        efa_onnode_req_t *req = answered(ring, h, kWaitFin);
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
        p->streams.push_back(&req->link);
        mark_busy(p);
        return true;
    }
    case kData: {
        efa_onnode_req_t *req = answered(ring, h, kRecvData);
        if (nullptr == req) {
            return drop();
        }
        on_data(req, body, blen);
        return true;
    }
    case kCancel: {
        // The message frame came earlier in this ring, so it is here: still
        // unexpected (withdrawn now, the send is cancelled) or matched (its
        // normal answer is on its way or already sent: nothing to add).
        // No message is held at this point (nothing is read meanwhile).
        // Only the sender itself may withdraw its message.
        if (!from_ring(ring, h.sender)) {
            return drop();
        }
        if (Message *m = match_.withdraw(h.sender, h.id)) {
            free(m);
            send_ctrl(h.sender, kCancelled, h.id, 0);
        }
        return true;
    }
    case kCancelled: {
        efa_onnode_req_t *req = ids_.find(h.id);
        if (nullptr == req || !(req->flags & kReqCancel) || req->peer != h.sender ||
            (kWaitAck != req->state && kWaitFin != req->state) || !from_ring(ring, h.sender)) {
            return drop();
        }
        ids_.remove(req->local_id);
        req->err = -FI_ECANCELED;
        req->state = kDone;
        finish(req);
        return true;
    }
    default:
        return drop(); // not a frame of this version
    }
}

int Engine::recv(uint32_t cid, int32_t src, int32_t tag, efa_onnode_req_t *req) {
    return post_recv(cid, src, tag, req, 0);
}

int Engine::post_recv(uint32_t cid, int32_t src, int32_t tag, efa_onnode_req_t *req,
                      uint8_t flags) {
    Guard g(mu_, mt_);
    if (net_ && !interest_) {
        interest_ = true; // a peer on another node may send what it waits for
        efa_core_net_interest(net_->core(), 1);
    }
    req->flags = flags; // requests are recycled: nothing of an earlier use may stay
    req->cid = cid;
    req->src = src;
    req->tag = tag;
    req->err = 0;
    req->link.next = req->link.prev = nullptr;
    req->state = kPosted;
    Message *m = match_.post(req);
    if (nullptr == m) {
        return 0;
    }
    req->state = kIdle;
    return take(m, req) ? 1 : 0;
}

int Engine::recv_partnered(uint32_t cid, int32_t src, int32_t tag, efa_onnode_req_t *req) {
    if (net_) {
        // With the provider's traffic in the engine, a receive has nothing
        // else to be posted to; holding a message would also stall frames
        // that came in one provider message.
        return -FI_EOPNOTSUPP;
    }
    const int rc = post_recv(cid, src, tag, req, kReqPartner);
    if (0 == rc && kPosted != req->state) {
        req->flags = 0;
        return EFA_ONNODE_MATCHED_LATER; // took an RTS: the bytes follow
    }
    if (1 == rc) {
        req->flags = 0;
    }
    return rc;
}

int Engine::partner_done(efa_onnode_req_t *req, bool matched) {
    int rc = 0;
    {
        Guard g(mu_, mt_);
        req->flags &= static_cast<uint8_t>(~(kReqPartner | kReqArmed));
        if (kPosted == req->state) {
            match_.cancel(req);
            req->state = kDone;
            return 0;
        }
        if (kHeld != req->state) {
            return 0;
        }
        auto *m = reinterpret_cast<Message *>(static_cast<uintptr_t>(req->remote));
        --held_;
        if (matched) {
            req->state = kDone;
            hand_over(m); // as if it had just arrived
        } else {
            req->state = kIdle;
            if (take(m, req)) {
                req->state = kDone;
                finish(req);
            }
            rc = 1;
        }
    }
    run_cancels();
    run_completions();
    return rc;
}

int Engine::mrecv(Message *m, efa_onnode_req_t *req) {
    Guard g(mu_, mt_);
    req->flags = 0;
    req->err = 0;
    req->link.next = req->link.prev = nullptr;
    req->state = kIdle;
    return take(m, req) ? 1 : 0;
}

int Engine::probe(uint32_t cid, int32_t src, int32_t tag, bool claim, efa_onnode_probe_t *out) {
    if (net_) {
        efa_core_progress(net_->core()); // ... and those the provider has
    }
    progress(); // messages already in the rings count as arrived
    Guard g(mu_, mt_);
    Message *m = match_.probe(cid, src, tag, claim);
    if (nullptr == m) {
        return 0;
    }
    out->src = m->env.src;
    out->tag = m->env.tag;
    out->len = m->len;
    out->msg = claim ? m : nullptr;
    return 1;
}

bool Engine::cancel(efa_onnode_req_t *req) {
    {
        Guard g(mu_, mt_);
        if (kPosted != req->state || !match_.cancel(req)) {
            return false;
        }
        req->err = -FI_ECANCELED;
        req->msg_len = 0;
        req->state = kDone;
        finish(req);
    }
    run_completions();
    return true;
}

// A send the caller wants cancelled.  Only a message no receiver can ever
// match may be reported cancelled: one still queued here, or one the
// receiver withdraws from its unexpected queue.  Asking the receiver is
// the only way to know: the message may have matched meanwhile.
void Engine::cancel_send(efa_onnode_req_t *req) {
    {
        Guard g(mu_, mt_);
        if (kSendQueued == req->state) { // never written: nobody saw it
            int err = 0;
            Peer *p = peer(req->peer, err);
            if (nullptr != p) {
                p->sends.remove(&req->link);
                if (req->local_id) {
                    ids_.remove(req->local_id);
                }
                req->err = -FI_ECANCELED;
                req->state = kDone;
                finish(req);
            }
        } else if ((kWaitAck == req->state || kWaitFin == req->state) &&
                   !(req->flags & kReqCancel)) {
            req->flags |= kReqCancel; // asked once
            send_ctrl(req->peer, kCancel, req->local_id, 0);
        } // else streaming or done: matched, completes as it is
    }
    run_completions();
}

// ---- progress ----------------------------------------------------------

void Engine::run_completions() {
    for (;;) {
        efa_onnode_req_t *r;
        {
            Guard g(mu_, mt_);
            efa_onnode_link_t *l = done_.front();
            if (nullptr == l) {
                return;
            }
            done_.remove(l);
            r = req_of(l);
        }
        r->complete(r);
    }
}

int Engine::progress() {
    int n;
    {
        Guard g(mu_, mt_);
        // While a message is held for a partnered receive no frame is read:
        // a later message of the same sender must not be matched first.
        // With the shared inbox only this channel's rings are read: the
        // other channel's frames keep flowing while a message is held.
        auto take = [this](uint32_t ring, void *frame, size_t len) {
            return deliver(ring, frame, len);
        };
        n = held_    ? 0
            : inbox_ ? inbox_->poll(take, kPollBudget)
            : node_  ? node_->poll(params_.channel, take, kPollBudget)
                     : 0;
        if (net_) {
            net_->progress();
            if (!swap_held_.empty() && ++swap_age_ > 64) { // the shim's lone message
                std::vector<uint8_t> m;
                m.swap(swap_held_);
                net_in_order(m.data(), m.size());
            }
        }
        if (!busy_.empty()) {
            flush_all();
        }
        if (interest_ && net_idle()) {
            interest_ = false; // nothing can come from the provider for a while
            efa_core_net_interest(net_->core(), -1);
        }
    }
    if (mt_ || held_) { // (held_ is read again under the mutex)
        run_cancels();
    }
    if (mt_ || !done_.empty()) {
        run_completions();
    }
    return n;
}

} // namespace efa::onnode
