// A lost rail brought back (rail_back.hpp).
//
// A rail is taken out for a peer when its operations fail or stop
// completing (rail_lost); what it carried goes over the peer's home rail
// (the first, or the lowest left once the first is out).  A
// link that comes back (a cable reseated, a switch port restarted) would
// otherwise leave the process with fewer NICs for the rest of the job.
// So, common_efa_rail_retry seconds after the loss, the core pings the
// peer over that rail alone, in the probe space of the tag
// (core_probe.cpp): the peer's rail contexts take pings and answer over
// the same rail.  The first rail, where nothing pinned it (core_rail0.cpp),
// is asked the same way: its ping is a peer probe over it, which the peer
// answers over it as any, and that answer puts it back too.  Only the
// answer is news (a stream provider completes a
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
    return 0 == rail ? core->nic->info()->domain_attr->name
           : rail >= 1 && rail <= static_cast<int>(core->rails.size())
               ? core->rails[static_cast<size_t>(rail) - 1]->info()->domain_attr->name
               : "?";
}

// The first NIC meets the peer's first both ways; another only where the
// pairing says so (efa_peer_t.rails_mutual).
bool pairs_back(const efa_peer_t *p, int rail) {
    return 0 == rail || (p->rails_mutual & (1u << rail));
}

uint64_t rail_bytes(int rail) {
    return rail >= 0 && rail < kMaxRails
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

// The peer whose rail-0 address is 'rail0' (its first context's); under
// peers_lock.
efa_peer_t *peer_at(efa_core *core, fi_addr_t rail0) {
    auto it = core->addr_owner.find(rail0);
    return it != core->addr_owner.end() && it->second->addr[0] == rail0 ? it->second : nullptr;
}

// A peer as a ping or an answer over a rail names it, copied under
// peers_lock: its rail-0 address and its address on that rail for the
// context the message came in on.
struct RailPeer {
    fi_addr_t rail0;
    fi_addr_t on_rail;
};

// The peer(s) with probe id 'id' whose rail 'rail' pairs back with this
// process's NIC (rails_mutual) and whose addresses on it include 'src'
// (any, where the provider reports no source).
std::vector<RailPeer> peers_on_rail(efa_core *core, uint64_t id, int rail, int index,
                                    fi_addr_t src) {
    const int nctx = core->nic->num_contexts();
    std::vector<RailPeer> out;
    std::lock_guard<std::mutex> guard(core->peers_lock);
    auto range = core->peers_by_probe_id.equal_range(id);
    for (auto i = range.first; i != range.second; ++i) {
        const efa_peer_t *p = i->second;
        if (rail >= p->num_rails || !pairs_back(p, rail)) {
            continue;
        }
        const fi_addr_t *at = p->addr + static_cast<size_t>(rail) * nctx;
        if (src == FI_ADDR_NOTAVAIL || std::find(at, at + nctx, src) != at + nctx) {
            out.push_back({p->addr[0], at[index % nctx]});
        }
    }
    return out;
}

// The rail reaches the peer at 'rail0' again: back in its plans, its
// deadline keys alive, and said.  Only an answer to a ping of this loss
// counts, and never for a peer declared dead meanwhile.
void put_back(efa_core *core, fi_addr_t rail0, int rail) {
    const int nctx = core->nic->num_contexts();
    std::vector<fi_addr_t> addrs;
    std::string name;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        const efa_peer_t *p = peer_at(core, rail0);
        if (!p) {
            return; // released meanwhile
        }
        addrs.assign(p->addr, p->addr + nctx);
        auto n = core->peer_names.find(const_cast<efa_peer_t *>(p));
        name = n == core->peer_names.end() ? "a peer" : n->second;
    }
    uint64_t lost_bytes = 0;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        auto it = core->rail_retries.find(rail_key(rail0, rail));
        if (it == core->rail_retries.end() || !it->second.down || !it->second.asked) {
            return; // back already, or an answer to a ping of an earlier loss
        }
        if (core->deadline.dead(rail0)) {
            core->rail_retries.erase(it); // the peer itself is lost: nothing to bring back
            return;
        }
        it->second.down = false;
        lost_bytes = it->second.lost_bytes;
        const uint64_t now = now_ms();
        // (the first rail's keys are the process's own, never declared
        // dead for the rail: rail0_lost)
        for (fi_addr_t a : addrs) {
            if (rail) {
                (void)core->deadline.revive(rail_key(a, rail), now);
            }
        }
    }
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        if (efa_peer_t *p = peer_at(core, rail0)) {
            const uint32_t was =
                __atomic_fetch_and(&p->rails_down, ~(1u << rail), __ATOMIC_RELAXED);
            if (0 == rail && (was & 1u)) {
                core->rail0_out_peers.fetch_sub(1, std::memory_order_relaxed);
            }
        }
    }
    // Lost again between the two locks (rail_lost sets the bit, then the
    // entry): the bit cleared above was the new loss's; set it back.
    bool again;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        auto it = core->rail_retries.find(rail_key(rail0, rail));
        again = it != core->rail_retries.end() && it->second.down;
    }
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        if (efa_peer_t *p = peer_at(core, rail0)) {
            // (release: who takes the back bit sees the down bit cleared)
            const uint32_t was = __atomic_fetch_or(again ? &p->rails_down : &p->rails_back,
                                                   1u << rail, __ATOMIC_RELEASE);
            if (!again) {
                __atomic_fetch_or(&p->rails_back_btl, 1u << rail, __ATOMIC_RELAXED);
            }
            if (again && 0 == rail && !(was & 1u)) {
                core->rail0_out_peers.fetch_add(1, std::memory_order_relaxed);
            }
        }
    }
    if (again) {
        return;
    }
    counts::add(counts::kRailsBack, 1);
    core->rep.say(1, std::string("NIC ") + nic_name(core, rail) + " reaches " + name +
                         " again: it carries its share from now on (" +
                         std::to_string(rail_bytes(rail)) + " bytes on it so far, " +
                         std::to_string(lost_bytes) + " when it was lost)");
}

} // namespace

void rail_back_schedule(efa_core *core, fi_addr_t rail0, int rail) {
    const char *stays = nullptr;
    fi_addr_t first = FI_ADDR_NOTAVAIL;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        auto it = core->addr_owner.find(rail0);
        if (it != core->addr_owner.end()) {
            first = it->second->addr[0]; // one entry per peer and rail, whichever context failed
            if (!pairs_back(it->second, rail)) {
                stays = "the peer's NIC on it pairs with another of this process's NICs";
            }
        }
    }
    if (core->params.rail_retry <= 0) {
        stays = "common_efa_rail_retry 0";
    } else if (!core->info.has_tagged) {
        stays = "no tags for the ping over it";
    } else if (first == FI_ADDR_NOTAVAIL) {
        stays = "the peer is gone";
    }
    if (stays) {
        core->rep.say(10, std::string("NIC ") + nic_name(core, rail) +
                              " stays out for that peer (" + stays + ")");
        return;
    }
    const uint64_t base = static_cast<uint64_t>(core->params.rail_retry) * 1000;
    std::lock_guard<std::mutex> guard(core->deadline_lock);
    RailRetry &r = core->rail_retries[rail_key(first, rail)];
    // A rail lost again after it came back starts from the wait its last
    // try reached (each try doubles it: rail_back_tick).
    if (r.wait_ms == 0) {
        r.wait_ms = base;
    }
    r.due_ms = now_ms() + r.wait_ms;
    r.down = true;
    r.asked = false;
    r.refused = false;
    r.lost_bytes = rail_bytes(rail);
    core->rail_retry_on.store(true, std::memory_order_relaxed);
}

void rail_back_tick(efa_core *core, uint64_t now) {
    struct Due {
        fi_addr_t key;
        RailPing *ping;
        uint64_t due_ms, wait_ms; // before this try, restored where the post is refused
        bool asked;
    };
    std::vector<Due> due;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        const uint64_t cap = 8 * static_cast<uint64_t>(core->params.rail_retry) * 1000;
        for (auto it = core->rail_retries.begin(); it != core->rail_retries.end();) {
            RailRetry &r = it->second;
            if (r.down && core->deadline.dead(key_addr(it->first))) {
                it = core->rail_retries.erase(it); // the peer itself is lost
                continue;
            }
            const fi_addr_t key = it->first;
            ++it;
            if (!r.down || now < r.due_ms || r.ping) {
                continue; // (a ping the provider still holds: no pile-up)
            }
            auto *p = new (std::nothrow) RailPing{{}, core, key};
            if (!p) {
                continue;
            }
            p->op.complete = ping_done;
            p->op.rx_class = EFA_RX_INTERNAL;
            due.push_back({key, p, r.due_ms, r.wait_ms, r.asked});
            r.asked = true; // (before the post: its answer may come before the lock again)
            r.due_ms = now + r.wait_ms; // unanswered by then: asked again, later still
            r.wait_ms = std::min(2 * r.wait_ms, cap);
            r.ping = p;
            core->rail_pings.insert(p);
        }
    }
    for (const Due &d : due) {
        const int rail = key_rail(d.key);
        fi_addr_t to = FI_ADDR_NOTAVAIL;
        {
            std::lock_guard<std::mutex> guard(core->peers_lock);
            if (const efa_peer_t *p = peer_at(core, key_addr(d.key)); p && rail < p->num_rails) {
                to = p->addr[static_cast<size_t>(rail) * core->nic->num_contexts()];
            }
        }
        // The rail's own address of the peer, whatever rails_down says
        // (on the first rail the ping is a peer probe to the peer, which
        // answers it over that rail as any).
        efa_ctx *via =
            rail ? core->rails[static_cast<size_t>(rail) - 1]->ctx(0) : core->nic->ctx(0);
        const ssize_t rc =
            to == FI_ADDR_NOTAVAIL ? 0 : probe_post_ping(via, to, &d.ping->op.fi_ctx);
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        auto it = core->rail_retries.find(d.key);
        RailRetry *r =
            it != core->rail_retries.end() && it->second.ping == d.ping ? &it->second : nullptr;
        if (to != FI_ADDR_NOTAVAIL && rc == 0) {
            if (r) {
                r->refused = false;
            }
            core->rep.say(10, "rail " + std::to_string(rail) + ": asking a peer it lost whether " +
                                  "it reaches it again");
            continue;
        }
        core->rail_pings.erase(d.ping);
        delete d.ping;
        if (!r) {
            continue;
        }
        r->ping = nullptr;
        r->asked = d.asked; // no ping of this loss went out
        if (to == FI_ADDR_NOTAVAIL) {
            core->rail_retries.erase(it); // the peer is gone: nothing to bring back
        } else if (rc == -FI_EAGAIN && !r->refused) {
            // A full queue, or tcp;ofi_rxm connecting the rail anew: once
            // in a row, no try; asked again at the next tick.
            r->refused = true;
            r->due_ms = d.due_ms;
            r->wait_ms = d.wait_ms;
        }
    }
}

void rail_ping_received(efa_ctx *ctx, uint64_t id, fi_addr_t src) {
    efa_core *core = ctx->core;
    const std::vector<RailPeer> peers = peers_on_rail(core, id, ctx->rail, ctx->index, src);
    if (peers.empty()) {
        core->rep.say(10, "rail " + std::to_string(ctx->rail) +
                              ": a ping from a process not known on it: not answered");
        return;
    }
    // Over the rail it came by, to where it came from (the peer's rail
    // pairs back with this NIC: peers_on_rail).
    probe_send_answer(ctx, src != FI_ADDR_NOTAVAIL ? src : peers[0].on_rail);
}

void rail_answer_received(efa_ctx *ctx, uint64_t id, fi_addr_t src) {
    for (const RailPeer &p : peers_on_rail(ctx->core, id, ctx->rail, ctx->index, src)) {
        put_back(ctx->core, p.rail0, ctx->rail);
    }
}

void rail_back_forget(efa_core *core, fi_addr_t addr) {
    std::lock_guard<std::mutex> guard(core->deadline_lock);
    for (int r = 0; r < kMaxRails; ++r) {
        core->rail_retries.erase(rail_key(addr, r));
        // The address vector hands the address to the next process it
        // takes (MPI_Comm_accept after a client died): it must not find
        // it dead.  (One context's address and its rails: the caller
        // names each context's.)
        core->deadline.forget_peer(rail_key(addr, r));
    }
}

void rail_back_close(efa_core *core) {
    // A rail that lost a peer keeps its endpoint open for the exit
    // (close_rail_endpoints), and with it the provider's hold on its pings.
    for (void *p : core->rail_pings) {
        auto *ping = static_cast<RailPing *>(p);
        if (core->rail_lost_any[key_rail(ping->key)]) {
            keep_for_exit(ping);
        } else {
            delete ping;
        }
    }
    core->rail_pings.clear();
    core->rail_retries.clear();
}

} // namespace efa
