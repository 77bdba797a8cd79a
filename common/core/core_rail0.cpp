// The first rail (NIC 0 of the set) lost to one peer while other rails
// still reach it.
//
// The first rail is where the core keeps what must stay on one path per
// peer pair: the provider's tagged messages (mtl_efa's provider matching,
// its read rendezvous, withdrawals).  Where nothing of that kind uses it
// (no component pinned it: efa_core_pin_rail0), every message to the peer
// is own matching's or btl_efa's, numbered and taken on any rail,
// and the peer can do without the first rail like any other: its
// operations there fail and their owners send again over the peer's home
// rail (the lowest that reaches it both ways), the core's probes and
// notices go there too, and only the loss of the last rail is the peer's.
// What keeps waiting on the process (watches: a receive posted for it
// alone) stays under its first-rail key, which the probes over the home
// rail keep alive.
#include <atomic>
#include <string>
#include <vector>

#include <unistd.h>

#include <rdma/fi_errno.h>

#include "deadline_tracked.hpp"

namespace efa {

namespace {

bool is_first_rail_addr(const efa_peer_t *p, fi_addr_t addr) {
    for (int i = 0; i < p->num_addrs; ++i) {
        if (p->addr[i] == addr) {
            return true;
        }
    }
    return false;
}

} // namespace

bool rail0_out(efa_core *core, fi_addr_t addr) {
    if (0 == core->rail0_out_peers.load(std::memory_order_relaxed)) {
        return false;
    }
    std::lock_guard<std::mutex> guard(core->peers_lock);
    const auto it = core->addr_owner.find(addr);
    return it != core->addr_owner.end() &&
           (__atomic_load_n(&it->second->rails_down, __ATOMIC_RELAXED) & 1u);
}

bool last_rail(efa_core *core, fi_addr_t rail0, int rail) {
    std::lock_guard<std::mutex> guard(core->peers_lock);
    const auto it = core->addr_owner.find(rail0);
    if (it == core->addr_owner.end()) {
        return false;
    }
    efa_peer_t *p = it->second;
    if ((__atomic_load_n(&p->rails_down, __ATOMIC_RELAXED) & 1u) && other_rail(p, rail) < 0) {
        return true;
    }
    // Not the last: taken out now, under the lock of the check, so that a
    // loss of another rail in another thread at once finds this one out
    // (checked apart, each saw the other up, and the peer with no rail
    // left was never declared lost).  rail_lost sets it again.
    __atomic_or_fetch(&p->rails_down, 1u << rail, __ATOMIC_RELAXED);
    return false;
}

bool rail0_lost(efa_core *core, fi_addr_t addr, int err, const std::string &why) {
    if (!core->params.rail_failover || core->rails.empty() ||
        core->rail0_pinned.load(std::memory_order_relaxed)) {
        return false;
    }
    fi_addr_t first;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        const auto it = core->addr_owner.find(addr);
        if (it == core->addr_owner.end() || !is_first_rail_addr(it->second, addr)) {
            return false;
        }
        efa_peer_t *p = it->second;
        // Out already: what expired is what waits on the process (its
        // probes over the home rail went unanswered), the peer's loss.
        if ((__atomic_load_n(&p->rails_down, __ATOMIC_RELAXED) & 1u) || other_rail(p, 0) < 0) {
            return false;
        }
        __atomic_or_fetch(&p->rails_down, 1u, __ATOMIC_RELAXED);
        first = p->addr[0];
    }
    core->rail0_out_peers.fetch_add(1, std::memory_order_relaxed);
    std::string name;
    const std::vector<fi_addr_t> addrs = same_process(core, first, &name);
    if (name.empty()) {
        name = "address " + std::to_string(first);
    }
    std::vector<FailedOp> ops;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        core->deadline_any_dead.store(true, std::memory_order_relaxed);
        const uint64_t now = now_ms();
        std::vector<Tracked *> failed;
        for (fi_addr_t a : addrs) {
            // Operations that went by the first rail (flags set; probes
            // too, which no answer will come for over it); watches stay.
            const auto went = [](PeerDeadline::Entry *e) { return 0 != tracked_of(e)->flags; };
            for (PeerDeadline::Entry *e : core->deadline.take_if(a, went)) {
                Tracked *t = tracked_of(e);
                if (t->owner == &g_probe_owner && probe_dropped(core, t)) {
                    give_tracked(core, t);
                    continue;
                }
                failed.push_back(t);
            }
            core->deadline.touch(a, now); // the wait was the rail's
        }
        fail_tracked(core, failed, err, &ops);
    }
    rail_lost(core, first, 0, name, why);
    tell_failed(ops, err);
    return true;
}

} // namespace efa

extern "C" void efa_core_pin_rail0(efa_core_t *core, const char *who) {
    const char *none = nullptr;
    if (core && !core->rails.empty() && core->rail0_pinned.compare_exchange_strong(none, who)) {
        core->rep.say(1, std::string("NIC ") + core->info.domain +
                             ", the first of the set, "
                             "carries " +
                             who +
                             ", which no other NIC can take over: its loss to "
                             "a peer is that peer's, whatever NICs are left (own matching, "
                             "mtl_efa_matching own, fails over from it)");
    }
}

extern "C" bool efa_core_rail0_fails_over(const efa_core_t *core) {
    return core && core->params.rail_failover && !core->rails.empty() &&
           nullptr == core->rail0_pinned.load(std::memory_order_relaxed);
}

extern "C" void efa_core_rail0_flushed(efa_core_t *core, const char *who, int err) {
    static std::atomic<bool> said{false};
    if (!core || said.exchange(true)) {
        return;
    }
    char host[256] = "";
    (void)gethostname(host, sizeof(host) - 1);
    core->rep.say(0, std::string(who) + ": " + host + ": a receive failed on NIC " +
                         core->info.domain + ", the first of the set (" + fi_strerror(-err) +
                         "): taken as that NIC flushing its queue; the peers' messages leave "
                         "it as their sends there fail, and one it lost would be found missing "
                         "(said once)");
}
