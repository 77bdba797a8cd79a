// The matching engine (engine.hpp has the design).
#include "engine_impl.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>

#include <rdma/fi_errno.h>

#include "efa_core_msg.h"
#include "efa_rma.h"
#include <unistd.h>

namespace efa::engine {

uint64_t IdTable::add(efa_engine_req_t *req) {
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

efa_engine_req_t *IdTable::find(uint64_t id) const {
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

std::unique_ptr<Engine> Engine::create(const efa_engine_params_t &p, int &err) {
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
    e->net_test_hooks_ = p.net_debug_lose || p.net_debug_delay || p.net_debug_swap ||
                         p.net_debug_fail_rail_send || p.net_debug_flush_first;
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
        e->poll_inbox_ = e->node_->inbox();
        e->poll_first_ = p.channel * e->node_->nlocal();
        e->poll_count_ = e->node_->nlocal();
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
        e->poll_inbox_ = e->inbox_.get();
        e->poll_first_ = 0;
        e->poll_count_ = g.nrings;
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
        if (p.net_small_window) {
            np.small_window = p.net_small_window;
        }
        np.coalesce_bytes = p.net_coalesce_bytes;
        np.inject = !p.net_no_inject;
        np.rail_failover = efa_core_get_info(p.core)->rail_failover;
        // Longer than an eager message (streamed data): over the peer's
        // rails in turn.
        np.turn_min = sizeof(NetHdr) + net_span(sizeof(FrameHdr) + p.net_eager);
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
        // As far ahead as this process grants (next + credit): a sender
        // that ignores its grant cannot make it hold more.
        e->order_ = NetOrder(p.nprocs, e->net_->credit());
        const efa_core_info_t *info = efa_core_get_info(p.core);
        e->read_on_ = p.net_read_min > 0 && info->has_rma;
        e->rails_ = std::min(info->num_nics, EFA_MAX_RAILS);
        e->next_rail_ = p.net_debug_first_rail;
        e->nctx_ = info->num_contexts;
        e->stripe_min_ = p.peer_rails ? info->stripe_min : 0;
        e->read_piece_ = info->max_rma_size ? info->max_rma_size : SIZE_MAX;
        if (p.net_debug_read_piece) {
            e->read_piece_ = std::min(e->read_piece_, p.net_debug_read_piece);
        }
        err = efa_core_msg_set_channel(p.core, EFA_MSG_CHANNEL_ENGINE, net_message, e.get());
        if (err) {
            e->net_.reset();
            if (e->node_) {
                e->node_->close_channel(p.channel);
            }
            return nullptr;
        }
    }
    e->cookie_ = efa_cma_cookie(&e->cookie_addr_);
    return e;
}

Engine::~Engine() {
    // Answers other processes still wait for (ACK, FIN, CTS, DATA) go out
    // first; a peer that is gone cannot take them, hence the bound.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while ((!busy_.empty() || !reads_.empty() || (net_ && !net_->idle())) &&
           std::chrono::steady_clock::now() < until) {
        progress();
        if (net_) {
            efa_core_progress(net_->core());
        }
    }
    if (net_) {
        orphan_reads();
        unwatch_all();
        efa_core_msg_set_channel(net_->core(), EFA_MSG_CHANNEL_ENGINE, nullptr, nullptr);
        if (interest_) {
            efa_core_net_interest(net_->core(), -1);
        }
    }
    // Device sends a peer never answered: their exports' descriptors (each
    // would keep its allocation alive until the process exits).
    ids_.each([](efa_engine_req_t *r, uint64_t) {
        if (r->device && 0 != r->ipc_held) {
            efa_device_ipc_release(r->ipc_held);
            r->ipc_held = 0;
        }
    });
    for (const auto &p : peers_) { // device sends still streaming: their host pieces
        while (efa_engine_link_t *l = p ? p->streams.front() : nullptr) {
            p->streams.remove(l);
            efa_engine_req_t *r = req_of(l);
            if (r->device) {
                unstage(r);
            }
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

efa_engine_card_t Engine::my_card() const {
    efa_engine_card_t c{};
    c.cookie = inbox_ ? inbox_->cookie() : node_ ? node_->card().cookie : 0;
    c.local_rank = params_.local_rank;
    c.pid = static_cast<uint32_t>(getpid());
    c.cma_cookie_addr = cookie_addr_;
    c.cma_cookie = cookie_;
    c.inbox_fd = node_ ? node_->card().inbox_fd : 0;
    return c;
}

Engine::Peer *Engine::peer_first(uint32_t vpid, int &err) {
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
    efa_engine_card_t card{};
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
        efa_node_card_t nc{};
        nc.cookie = card.cookie;
        nc.local_rank = card.local_rank;
        nc.channels = 1u << params_.channel;
        nc.pid = card.pid;
        nc.inbox_fd = card.inbox_fd;
        out = node_->attach(vpid, nc, params_.channel, err);
    } else {
        out = shm::Outbox::attach(inbox_path(dir_, job_tag_, vpid), params_.local_rank, card.cookie,
                                  err);
    }
    if (!out) {
        return nullptr;
    }
    // The peer's slots may be smaller than this process's (its own
    // common_efa_onnode_slot_size): what goes to it is cut to them.
    const size_t peer_frame = out->max_frame();
    if (peer_frame < sizeof(FrameHdr) + sizeof(DataBody) + 64) {
        err = -EMSGSIZE;
        return nullptr;
    }
    auto p = std::make_unique<Peer>();
    p->vpid = vpid;
    p->ring = card.local_rank;
    p->pid = card.pid;
    p->cma_cookie_addr = card.cma_cookie_addr;
    p->cma_cookie = card.cma_cookie;
    if (params_.peer_exited && vpid != params_.my_vpid) { // (alive: it published its card)
        p->exit_fd = efa_cma_exit_watch(card.pid, card.cma_cookie_addr, card.cma_cookie);
    }
    p->out = std::move(out);
    p->eager_max = std::min(eager_max_, peer_frame - sizeof(FrameHdr));
    p->data_max = std::min(data_max_, peer_frame - sizeof(FrameHdr) - sizeof(DataBody));
    if (!params_.single_copy || 0 == p->pid) {
        p->cma = Peer::kCmaOff;
    }
    peers_[vpid] = std::move(p);
    return peers_[vpid].get();
}

// A peer reached through the provider (peers_ is sized already).  Its
// messages take one NIC of this process's set: peers spread over them in
// the order this process first speaks to them (the first on NIC 0, the
// next on NIC 1, ...), so that a process that talks to many uses every
// NIC's queue pair and message rate.  A rail that does not reach the peer,
// or whose NIC of the peer's does not pair back with this one (its answer
// would come in elsewhere, from an address this NIC's table does not
// know: efa_peer_t.rails_mutual), leaves it on the first; every rail that
// reaches it so takes its turn with streamed data and reads.
Engine::Peer *Engine::net_peer(uint32_t vpid, int &err) {
    fi_addr_t addr = FI_ADDR_UNSPEC;
    efa_ctx_t *ctx = nullptr;
    if (0 != (err = params_.peer_addr(params_.peer_card_arg, vpid, &addr, &ctx))) {
        return nullptr;
    }
    auto p = std::make_unique<Peer>();
    p->vpid = vpid;
    p->ring = kNoRing;
    p->rails = params_.peer_rails ? params_.peer_rails(params_.peer_card_arg, vpid) : nullptr;
    int rail = 0;
    fi_addr_t rail_addr = addr;
    efa_ctx_t *rail_ctx = ctx;
    const int index = efa_ctx_index(ctx);
    auto reaches = [&](int r, fi_addr_t *a) {
        *a = efa_peer_rail_addr(p->rails, r, index, nctx_);
        return r > 0 && FI_ADDR_NOTAVAIL != *a && (p->rails->rails_mutual & (1u << r)) &&
               nullptr != efa_core_rail_ctx(net_->core(), r, index);
    };
    if (p->rails && rails_ > 1) {
        const int r = static_cast<int>(next_rail_++ % static_cast<uint32_t>(rails_));
        fi_addr_t a;
        if (reaches(r, &a)) {
            rail = r;
            rail_addr = a;
            rail_ctx = efa_core_rail_ctx(net_->core(), r, index);
        }
    }
    p->net = net_->add_peer(vpid, addr, ctx, rail, rail_addr, rail_ctx);
    p->net->rails_down = p->rails ? &p->rails->rails_down : nullptr;
    // (the one field of the core's peer the link writes: it takes the bits)
    p->net->rails_back = p->rails ? &const_cast<efa_peer_t *>(p->rails)->rails_back : nullptr;
    for (int r = 1; p->rails && r < rails_; ++r) {
        fi_addr_t a;
        if (reaches(r, &a)) {
            net_->add_turn(p->net, r, a, efa_core_rail_ctx(net_->core(), r, index));
        }
    }
    p->cma = Peer::kCmaOff; // its pid means nothing on this node
    p->eager_max = std::min(params_.net_eager, net_->max_frame() - sizeof(FrameHdr));
    p->data_max = net_->max_frame() - sizeof(FrameHdr) - sizeof(DataBody);
    peers_[vpid] = std::move(p);
    return peers_[vpid].get();
}

void Engine::net_limits(size_t *eager, size_t *coalesce) const {
    *eager = net_ ? std::min(params_.net_eager, net_->max_frame() - sizeof(FrameHdr)) : 0;
    *coalesce = net_ ? std::min(params_.net_coalesce_bytes, net_->buf_size() - sizeof(NetHdr)) : 0;
}

void Engine::mark_busy(Peer *p) {
    if (!p->in_busy) {
        p->in_busy = true;
        busy_.push_back(p);
    }
}

// ---- progress ----------------------------------------------------------

void Engine::run_completions() {
    for (;;) {
        efa_engine_req_t *r;
        {
            Guard g(mu_, mt_);
            efa_engine_link_t *l = done_.front();
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
    bool report = false;
    {
        Guard g(mu_, mt_);
        // While a message is held for a partnered receive no frame is read:
        // a later message of the same sender must not be matched first.
        // With the shared inbox only this channel's rings are read: the
        // other channel's frames keep flowing while a message is held.
        auto take = [this](uint32_t ring, void *frame, size_t len) {
            return deliver(ring, frame, len);
        };
        n = held_ || !poll_inbox_
                ? 0
                : poll_inbox_->poll_range(poll_first_, poll_count_, take, kPollBudget);
        if (net_) {
            net_->progress();
            if (!swap_held_.empty() && ++swap_age_ > 64) { // the hook's lone message
                std::vector<uint8_t> m;
                m.swap(swap_held_);
                net_in_order(m.data(), m.size());
            }
            if (!delayed_.empty() && ++delay_age_ > kDelayCalls) { // the other hook's
                std::vector<uint8_t> m;
                m.swap(delayed_);
                on_net_locked(m.data(), m.size(), delayed_src_, delayed_rail_);
            }
            if (order_.held() && 0 == (++gap_calls_ & 1023)) {
                check_net_gaps(); // (into lost_, said below outside the lock)
            }
            if (0 == (++watch_calls_ & 1023)) {
                watch_sweep();
                net_->leave_rails_out();
                if (net_ask_due_ || net_asking_) {
                    ask_peers();
                }
            }
        } else if (params_.peer_exited && 0 == (++watch_calls_ & 1023)) {
            watch_sweep(); // (the processes of this node alone)
        }
        if (!busy_.empty()) {
            flush_all();
        }
        fail_noted(); // posts above (or since the last call) that failed for good
        if (interest_ && net_idle()) {
            interest_ = false; // nothing can come from the provider for a while
            efa_core_net_interest(net_->core(), -1);
        }
        report = !lost_.empty() || !exited_.empty();
    }
    if (report) {
        report_lost();
    }
    if (mt_ || held_) { // (held_ is read again under the mutex)
        run_cancels();
    }
    if (mt_ || !done_.empty()) {
        run_completions();
    }
    return n;
}

} // namespace efa::engine

// The C seam (efa_engine.h): the engine's life, progress and reports. Each
// function converts the handle and calls the engine; those of sending and
// receiving end engine_send.cpp and engine_recv.cpp.
using efa::engine::Engine;

extern "C" {

efa_engine_t *efa_engine_create(const efa_engine_params_t *p, int *err) {
    int e = 0;
    auto engine = Engine::create(*p, e);
    if (!engine) {
        *err = e ? e : -FI_ENOMEM;
        return nullptr;
    }
    auto *o = new (std::nothrow) efa_engine();
    if (!o) {
        *err = -FI_ENOMEM;
        return nullptr;
    }
    o->engine = std::move(engine);
    *err = 0;
    return o;
}

void efa_engine_destroy(efa_engine_t *e) {
    delete e;
}

const char *efa_engine_inbox_path(const efa_engine_t *e) {
    return e->engine->path().c_str();
}

void efa_engine_partner_armed(efa_engine_t *e, efa_engine_req_t *req) {
    e->engine->partner_armed(req);
}

void efa_engine_comm_freed(efa_engine_t *e, uint32_t cid) {
    e->engine->comm_freed(cid);
}

int efa_engine_progress(efa_engine_t *e) {
    return e->engine->progress();
}

void efa_engine_inbox_file(const efa_engine_params_t *p, char *buf, size_t len) {
    if (len) {
        snprintf(buf, len, "%s",
                 efa::engine::inbox_path(p->inbox_dir ? p->inbox_dir : "",
                                         p->job_tag ? p->job_tag : "", p->my_vpid)
                     .c_str());
    }
}

void efa_engine_my_card(const efa_engine_t *e, efa_engine_card_t *out) {
    *out = e->engine->my_card();
}

void efa_engine_get_stats(const efa_engine_t *e, efa_engine_stats_t *out) {
    e->engine->get_stats(out);
}

void efa_engine_net_limits(const efa_engine_t *e, size_t *eager, size_t *coalesce) {
    e->engine->net_limits(eager, coalesce);
}

size_t efa_engine_node_device_min(const efa_engine_t *e) {
    return e->engine->node_device_min();
}

uint64_t efa_engine_dropped(const efa_engine_t *e) {
    return e->engine->dropped();
}

} // extern "C"
