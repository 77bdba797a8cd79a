// A peer, or one of its rails, declared lost (efa_core_peer_lost in
// efa_core.h), by an expiry, an unreachable error, a peer's notice or an
// owner: what was in flight with it fails (core_deadline.cpp and
// deadline_fail.cpp hold the tracking itself).
#include <cstdint>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "deadline_tracked.hpp"
#include "efa_path_error.h"

namespace efa {

// The key's loss as the core finds it (an expiry, an unreachable error, a
// peer's notice): the first rail's key is that rail's loss alone where the
// peer can do without it (rail0_lost), else the peer's.
void path_lost(efa_core *core, fi_addr_t key, int err, const char *why) {
    if (!key_rail(key) && rail0_lost(core, key, err, why)) {
        return;
    }
    efa_core_peer_lost(core, key, err, why);
}

namespace {

// The peer's probe out over 'rail' (its home rail while the first is out:
// send_probe), tracked under its first rail's key, waits for an answer
// the lost rail cannot bring: dropped (deadline_lock held), so that the
// next check probes over the next home rail, where the first rail's key
// would otherwise expire behind it and the process be taken for lost.
void drop_probe_over(efa_core *core, fi_addr_t rail0, int rail, uint64_t now) {
    const auto it = core->probes_out.find(rail0);
    if (it == core->probes_out.end()) {
        return;
    }
    if (static_cast<Tracked *>(it->second)->ctx->rail == rail) {
        probe_settled(core, it, now);
    }
}

} // namespace

// efa_core.h's efa_core_peer_lost, also the core's own way to declare a peer
// dead (defined here, in the namespace of the helpers it uses).
extern "C" void efa_core_peer_lost(efa_core_t *core, fi_addr_t addr, int err, const char *why_c) {
    const std::string why = why_c ? why_c : "";
    std::string name;
    // A rail's key (deadline_key): that rail alone is lost for the peer,
    // or, without failover, or where it was the last that reached the
    // peer (the first one out already), the peer itself.
    int rail = key_rail(addr);
    if (rail && (!core->params.rail_failover || last_rail(core, key_addr(addr), rail))) {
        addr = key_addr(addr);
        rail = 0;
    }
    const int cause = err; // (what failed, for the report)
    if (!rail && !efa_path_error(err)) {
        // The process is lost, whatever failed last (an operation on its
        // last rail, a message that never came): its owners are told so
        // by a path error (ULFM's MPI_ERR_PROC_FAILED), as for every later
        // operation with it.
        err = -FI_EHOSTUNREACH;
    }
    std::vector<fi_addr_t> addrs = same_process(core, key_addr(addr), &name);
    if (rail) {
        // The rail is lost for every context of the peer's at once: each
        // context's operations there are tracked under its own key, and
        // would otherwise wait out their own deadline and say the loss
        // again.
        for (fi_addr_t &a : addrs) {
            a = rail_key(a, rail);
        }
    } else {
        // The process is lost on every rail: its operations there fail too.
        const size_t n = addrs.size();
        for (int r = 1; r <= static_cast<int>(core->rails.size()); ++r) {
            for (size_t i = 0; i < n; ++i) {
                addrs.push_back(rail_key(addrs[i], r));
            }
        }
    }
    if (name.empty()) {
        name = "address " + std::to_string(key_addr(addr));
    }
    // The owners to tell now, copied under the lock: once it is released
    // the provider may hand a stand-in back and it be reused.
    std::vector<FailedOp> ops;
    bool first;
    {
        std::lock_guard<std::mutex> guard(core->deadline_lock);
        core->deadline_any_dead.store(true, std::memory_order_relaxed);
        first = !core->deadline.dead(addr);
        if (first && !rail) {
            core->peers_lost.fetch_add(1, std::memory_order_relaxed);
        }
        if (rail) {
            // What was on the rail goes to the first one now: the time it
            // waited there is no silence of the first.
            const uint64_t now = now_ms();
            for (fi_addr_t a : addrs) {
                core->deadline.touch(key_addr(a), now);
                drop_probe_over(core, key_addr(a), rail, now);
            }
        }
        std::vector<Tracked *> failed;
        for (fi_addr_t a : addrs) {
            for (PeerDeadline::Entry *e : core->deadline.declare_dead(a)) {
                Tracked *t = tracked_of(e);
                if (t->owner == &g_probe_owner && probe_dropped(core, t)) {
                    give_tracked(core, t); // answered by nobody, held by nobody
                    continue;
                }
                failed.push_back(t);
            }
        }
        fail_tracked(core, failed, err, &ops);
    }
    if (first && rail) {
        rail_lost(core, key_addr(addr), rail, name, why);
    } else if (first) {
        core->rep.help("peer-unreachable", name, why, fi_strerror(-cause));
    }
    tell_failed(ops, err);
}

} // namespace efa
