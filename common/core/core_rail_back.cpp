// A lost rail brought back (rail_back.hpp).
//
// A rail is taken out for a peer when its operations fail or stop
// completing (rail_lost); what it carried goes over the first rail.  A
// link that comes back (a cable reseated, a switch port restarted) would
// otherwise leave the process with fewer NICs for the rest of the job.
// So, common_efa_rail_retry seconds after the loss, the core pings the
// peer over that rail alone, in the probe space of the tag
// (core_probe.cpp): the peer's rail contexts take pings and answer over
// the same rail.  Only the answer is news (a stream provider completes a
// send once a local socket takes it); it clears the rail's bit in the
// peer's rails_down and revives the rail's keys in the peer deadline, so
// the next striped transfer plans with it.  No answer by the next try:
// the wait doubles, to 8 times the parameter.  One ping per lost rail is
// held by the provider at a time: a rail whose link is silent costs one
// held ping, not one per try.
#include <algorithm>
#include <new>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "control_tags.hpp"
#include "deadline_tracked.hpp"
#include "path_counts.hpp"
#include "rail_back.hpp"

namespace efa {

namespace {

// A ping the provider holds; freed when it hands it back (or at close).
struct RailPing {
    efa_op_t op; // first: the provider hands back &op.fi_ctx
    efa_core *core;
    fi_addr_t key; // rail_key(peer rail-0 address, rail)
};

const char *nic_name(const efa_core *core, int rail) {
    return rail >= 1 && rail <= static_cast<int>(core->rails.size())
               ? core->rails[static_cast<size_t>(rail) - 1]->info()->domain_attr->name
               : "?";
}

uint64_t rail_bytes(int rail) {
    return rail >= 1 && rail < kMaxRails
               ? counts::get(static_cast<counts::Id>(counts::rail_rma(rail) + 1))
               : 0;
}

void ping_done(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *p = reinterpret_cast<RailPing *>(op);
    efa_core *core = p->core;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        core->rail_pings.erase(p);
        auto it = core->rail_retries.find(p->key);
        if (it != core->rail_retries.end() && it->second.ping == p) {
            it->second.ping = nullptr; // an error: the next try is at due_ms
        }
    }
    if (cqe->err) {
        core->rep.say(10, std::string("rail ") + std::to_string(key_rail(p->key)) +
                              ": a ping to a peer it lost failed (" + fi_strerror(-cqe->err) +
                              "); asked again later");
    }
    delete p;
}

// The peer whose rail-0 addresses include 'rail0', and its name; under
// peers_lock.
efa_peer_t *owner_of(efa_core *core, fi_addr_t rail0, std::string *name) {
    auto it = core->addr_owner.find(rail0);
    if (it == core->addr_owner.end()) {
        return nullptr;
    }
    if (name) {
        auto n = core->peer_names.find(it->second);
        *name = n == core->peer_names.end() ? "a peer" : n->second;
    }
    return it->second;
}

// The peer(s) with probe id 'id' whose addresses on 'rail' include 'src'
// (any, where the provider reports no source).
std::vector<efa_peer_t *> peers_on_rail(efa_core *core, uint64_t id, int rail, fi_addr_t src) {
    const int nctx = core->nic->num_contexts();
    std::vector<efa_peer_t *> out;
    std::lock_guard<std::mutex> guard(core->peers_lock);
    auto range = core->peers_by_probe_id.equal_range(id);
    for (auto i = range.first; i != range.second; ++i) {
        efa_peer_t *p = i->second;
        if (rail >= p->num_rails) {
            continue;
        }
        const fi_addr_t *at = p->addr + static_cast<size_t>(rail) * nctx;
        if (src == FI_ADDR_NOTAVAIL || std::find(at, at + nctx, src) != at + nctx) {
            out.push_back(p);
        }
    }
    return out;
}

// The rail reaches 'peer' again: back in its plans, its deadline keys
// alive, and said.
void put_back(efa_core *core, efa_peer_t *peer, int rail) {
    const int nctx = core->nic->num_contexts();
    std::vector<fi_addr_t> rail0;
    std::string name;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        if (core->peer_index.find(peer) == core->peer_index.end()) {
            return; // released meanwhile
        }
        rail0.assign(peer->addr, peer->addr + nctx);
        auto n = core->peer_names.find(peer);
        name = n == core->peer_names.end() ? "a peer" : n->second;
    }
    uint64_t lost_bytes = 0;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        auto it = core->rail_retries.find(rail_key(rail0[0], rail));
        if (it == core->rail_retries.end() || !it->second.down) {
            return; // back already (an answer to an earlier ping too)
        }
        it->second.down = false;
        lost_bytes = it->second.lost_bytes;
        const uint64_t now = now_ms();
        for (fi_addr_t a : rail0) {
            (void)core->deadline.revive(rail_key(a, rail), now);
        }
    }
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        if (core->peer_index.find(peer) != core->peer_index.end()) {
            __atomic_and_fetch(&peer->rails_down, ~(1u << rail), __ATOMIC_RELAXED);
        }
    }
    counts::add(counts::kRailsBack, 1);
    core->rep.say(1, std::string("NIC ") + nic_name(core, rail) + " reaches " + name +
                         " again: it carries its share from now on (" +
                         std::to_string(rail_bytes(rail)) + " bytes on it so far, " +
                         std::to_string(lost_bytes) + " when it was lost)");
}

} // namespace

void rail_back_schedule(efa_core *core, fi_addr_t rail0, int rail) {
    if (core->params.rail_retry <= 0 || !core->info.has_tagged) {
        core->rep.say(10, std::string("NIC ") + nic_name(core, rail) +
                              " stays out for that peer (" +
                              (core->params.rail_retry <= 0 ? "common_efa_rail_retry 0"
                                                            : "no tags for the ping over it") +
                              ")");
        return;
    }
    fi_addr_t first = rail0;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        if (efa_peer_t *p = owner_of(core, rail0, nullptr)) {
            first = p->addr[0]; // one entry per peer and rail, whichever context failed
        }
    }
    const uint64_t base = static_cast<uint64_t>(core->params.rail_retry) * 1000;
    std::lock_guard<std::mutex> guard(core->deadline_lock);
    RailRetry &r = core->rail_retries[rail_key(first, rail)];
    // A rail lost again after it came back waits twice as long as the try
    // that brought it back (each try doubled the wait: rail_back_tick).
    if (r.wait_ms == 0) {
        r.wait_ms = base;
    }
    r.due_ms = now_ms() + r.wait_ms;
    r.down = true;
    r.lost_bytes = rail_bytes(rail);
    core->rail_retry_on.store(true, std::memory_order_relaxed);
}

void rail_back_tick(efa_core *core, uint64_t now) {
    struct Due {
        fi_addr_t key;
        RailPing *ping;
    };
    std::vector<Due> due;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        const uint64_t cap = 8 * static_cast<uint64_t>(core->params.rail_retry) * 1000;
        for (auto it = core->rail_retries.begin(); it != core->rail_retries.end();) {
            auto &kv = *it;
            RailRetry &r = kv.second;
            if (r.down && !r.ping && core->deadline.dead(key_addr(kv.first))) {
                it = core->rail_retries.erase(it); // the peer itself is lost
                continue;
            }
            ++it;
            if (!r.down || now < r.due_ms) {
                continue;
            }
            r.due_ms = now + r.wait_ms; // unanswered by then: asked again, later still
            r.wait_ms = std::min(2 * r.wait_ms, cap);
            if (r.ping) {
                continue; // the provider still holds the last one: no pile-up
            }
            auto *p = new (std::nothrow) RailPing{{}, core, kv.first};
            if (!p) {
                continue;
            }
            p->op.complete = ping_done;
            p->op.rx_class = EFA_RX_INTERNAL;
            r.ping = p;
            core->rail_pings.insert(p);
            due.push_back({kv.first, p});
        }
    }
    const uint64_t base = static_cast<uint64_t>(core->params.rail_retry) * 1000;
    for (const Due &d : due) {
        const int rail = key_rail(d.key);
        fi_addr_t to = FI_ADDR_NOTAVAIL;
        {
            std::lock_guard<std::mutex> guard(core->peers_lock);
            if (efa_peer_t *p = owner_of(core, key_addr(d.key), nullptr);
                p && rail < p->num_rails) {
                to = p->addr[static_cast<size_t>(rail) * core->nic->num_contexts()];
            }
        }
        // The rail's own address of the peer, whatever rails_down says.
        const ssize_t rc = to == FI_ADDR_NOTAVAIL
                               ? -FI_ENOENT
                               : probe_post_ping(core->rails[static_cast<size_t>(rail) - 1]->ctx(0),
                                                 to, &d.ping->op.fi_ctx);
        if (rc == 0) {
            core->rep.say(10, "rail " + std::to_string(rail) + ": asking a peer it lost whether " +
                                  "it reaches it again");
            continue;
        }
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        core->rail_pings.erase(d.ping);
        auto it = core->rail_retries.find(d.key);
        if (it != core->rail_retries.end() && it->second.ping == d.ping) {
            RailRetry &r = it->second;
            r.ping = nullptr;
            if (rc == -FI_ENOENT) {
                core->rail_retries.erase(it); // the peer is gone: nothing to bring back
            } else if (rc == -FI_EAGAIN) {
                // A full queue, or tcp;ofi_rxm connecting the rail anew:
                // not a try, asked again at the next tick.
                r.wait_ms = std::max(r.wait_ms / 2, base);
                r.due_ms = now;
            }
        }
        delete d.ping;
    }
}

void rail_ping_received(efa_ctx *ctx, uint64_t id, fi_addr_t src) {
    efa_core *core = ctx->core;
    const std::vector<efa_peer_t *> peers = peers_on_rail(core, id, ctx->rail, src);
    if (peers.empty()) {
        core->rep.say(10, "rail " + std::to_string(ctx->rail) +
                              ": a ping from a process not known on it: not answered");
        return;
    }
    // Over the rail it came by, to where it came from: the peer's own rail
    // may pair with another NIC of this process than the one it asked by.
    const int nctx = core->nic->num_contexts();
    const fi_addr_t to = src != FI_ADDR_NOTAVAIL
                             ? src
                             : peers[0]->addr[static_cast<size_t>(ctx->rail) * nctx + ctx->index];
    probe_send_answer(ctx, to);
}

void rail_answer_received(efa_ctx *ctx, uint64_t id, fi_addr_t src) {
    for (efa_peer_t *p : peers_on_rail(ctx->core, id, ctx->rail, src)) {
        put_back(ctx->core, p, ctx->rail);
    }
}

void rail_back_close(efa_core *core) {
    for (void *p : core->rail_pings) {
        delete static_cast<RailPing *>(p);
    }
    core->rail_pings.clear();
    core->rail_retries.clear();
}

} // namespace efa
