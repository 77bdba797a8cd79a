// The NICs beside the first (the rails): opening them, and a peer's
// addresses on each (core.hpp).
#include "control_tags.hpp"
#include "core.hpp"
#include "deadline_tracked.hpp"
#include "path_counts.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

#include <rdma/fi_errno.h>

namespace efa {

// The set's other NICs, each with its own fabric, domain, AV and
// endpoints like NIC 0 (Nic::open).  A NIC that does not open, or whose
// addresses differ in length from NIC 0's (the blob has one length), is
// left out and said; the process then has fewer rails, never none.
void open_rails(efa_core *core, const std::vector<const fi_info *> &rail_infos,
                std::vector<FiMrBackend::Domain> *domains) {
    core->fabric_ids.assign(1, fabric_id(core->nic->info()->fabric_attr->name));
    for (const fi_info *info : rail_infos) {
        int err = 0;
        std::unique_ptr<Nic> rail = Nic::open(info, core->params, core, core->rep, &err);
        if (!rail || rail->addr_len() != core->nic->addr_len() ||
            rail->num_contexts() != core->nic->num_contexts()) {
            core->rep.help("rail-not-opened", info->domain_attr->name,
                           err ? fi_strerror(-err) : "its addresses differ from the first NIC's",
                           core->nic->info()->domain_attr->name);
            continue;
        }
        const int r = 1 + static_cast<int>(core->rails.size());
        std::vector<fid_ep *> bind_eps;
        for (int i = 0; i < rail->num_contexts(); ++i) {
            efa_ctx *ctx = rail->ctx(i);
            ctx->rail = r;
            ctx->use_cq_data = core->nic->ctx(0)->use_cq_data;
            ctx->mt = core->params.thread_multiple;
            // The rails carry one-sided transfers, and pings asking whether
            // a lost rail reaches again (core_rail_back.cpp): those are
            // answered to their source.
            ctx->source = core->selection.source;
            if (rail->info()->domain_attr->mr_mode & FI_MR_ENDPOINT) {
                bind_eps.push_back(ctx->ep);
            }
        }
        domains->push_back({rail->domain(), std::move(bind_eps)});
        core->fabric_ids.push_back(fabric_id(info->fabric_attr->name));
        core->rep.say(10, "rail " + std::to_string(r) + ": NIC " + info->domain_attr->name +
                              ", fabric " + info->fabric_attr->name);
        core->rails.push_back(std::move(rail));
    }
}

namespace {

// The entries of a short insert on rail r that did go in, removed again
// (else they hold their room in its vector for good), but for one another
// peer owns (shm answers a name it cannot find with an entry it holds);
// then none is the peer's.
void remove_rail_inserted(efa_core *core, int r, fi_addr_t *at, int nctx) {
    std::vector<fi_addr_t> in;
    for (int i = 0; i < nctx; ++i) {
        if (at[i] != FI_ADDR_NOTAVAIL && !core->rail_primary[r].count(at[i]) &&
            std::find(in.begin(), in.end(), at[i]) == in.end()) {
            in.push_back(at[i]);
        }
        at[i] = FI_ADDR_NOTAVAIL;
    }
    if (!in.empty()) {
        (void)fi_av_remove(core->rails[r - 1]->av(), in.data(), in.size(), 0);
    }
}

} // namespace

void insert_peer_rails(efa_core *core, efa_peer_t *peer, const PeerBlob &pb,
                       const std::vector<int> &pairing) {
    const int nctx = core->nic->num_contexts();
    const int nrails = peer->num_rails;
    // The peer's own pairing: which of our NICs each of its NICs meets.
    const std::vector<int> back = pair_rails(pb.fabric_ids, core->fabric_ids);
    peer->rails_mutual = 0;
    for (int r = 1; r < nrails; ++r) {
        fi_addr_t *at = peer->addr + static_cast<size_t>(r) * nctx;
        for (int i = 0; i < nctx; ++i) {
            at[i] = FI_ADDR_NOTAVAIL; // (what a failed insert leaves alone)
        }
        // A rail that cannot take the peer leaves it to the others: said
        // at verbose 10, never fatal (rail 0 reaches it).
        if (pairing[r] < 0 || fi_av_insert(core->rails[r - 1]->av(), pb.nic_names(pairing[r]), nctx,
                                           at, 0, nullptr) != nctx) {
            remove_rail_inserted(core, r, at, nctx);
            core->rep.say(10, "rail " + std::to_string(r) + " does not reach a peer (" +
                                  (pairing[r] < 0 ? "no NIC of it on this fabric"
                                                  : "address vector refused it") +
                                  ")");
            continue;
        }
        ++peer->rails_up;
        const int n = pairing[r];
        if (n >= 1 && n < static_cast<int>(back.size()) && back[static_cast<size_t>(n)] == r) {
            peer->rails_mutual = static_cast<uint8_t>(peer->rails_mutual | (1u << r));
        }
        for (int i = 0; i < nctx; ++i) {
            core->rail_primary[r][at[i]] = peer->addr[i];
        }
    }
}

void remove_peer_rails(efa_core *core, efa_peer_t *peer) {
    const int nctx = core->nic->num_contexts();
    for (int r = 1; r < peer->num_rails; ++r) {
        fi_addr_t *at = peer->addr + static_cast<size_t>(r) * nctx;
        if (at[0] == FI_ADDR_NOTAVAIL) {
            continue;
        }
        fi_av_remove(core->rails[r - 1]->av(), at, nctx, 0);
        for (int i = 0; i < nctx; ++i) {
            core->rail_primary[r].erase(at[i]);
        }
    }
}

void close_rail_endpoints(efa_core *core) {
    // A rail that lost a peer may hold operations on a dead connection,
    // and ofi_rxm crashes closing such an endpoint (DESIGN.md, "Stand-in
    // provider defects worked around"): it is left open for the process's
    // exit to reclaim; the others close before their registrations.
    for (size_t r = 0; r < core->rails.size(); ++r) {
        if (core->rail_lost_any[r + 1]) {
            core->rep.say(10, "rail " + std::to_string(r + 1) +
                                  " lost a peer: its endpoints are left for the exit");
            keep_for_exit(core->rails[r].release()); // intentionally not closed
        }
    }
    std::erase(core->rails, nullptr);
    for (auto &rail : core->rails) {
        rail->close_endpoints();
    }
}

namespace {

// Operations a provider still holds on a silent rail go on if the link
// comes back (TCP retransmits them), though the core failed them and their
// parts went again over the first rail: one process's read of the other's
// memory, or its write into it, would then move the bytes of an old
// transfer into memory the application may have reused (the reader's
// buffer takes whatever the answer brings; only the target's keys are
// checked).  Every registration is dropped (idle ones at the next progress
// call, held ones at their last release), so the keys such an operation
// carries name nothing and the target's provider refuses it; later
// transfers register anew.  Both ends drop theirs: the one that took the
// rail out, and its peer, told by a notice over the first rail, which may
// have had nothing in flight on that rail and so never see it fail.
void drop_registrations(efa_core *core) {
    constexpr size_t kEverything = SIZE_MAX;
    if (core->mr_cache) {
        core->mr_cache->invalidate(nullptr, kEverything);
    }
    if (core->dev_mr_cache) {
        core->dev_mr_cache->invalidate(nullptr, kEverything);
        // (now: progress applies only the host cache's, and a device
        // entry may see no other call for as long as the job runs)
        core->dev_mr_cache->apply_invalidations();
    }
}

} // namespace

void rail_lost(efa_core *core, fi_addr_t rail0, int rail, const std::string &peer_name,
               const std::string &why) {
    fi_addr_t to = FI_ADDR_NOTAVAIL; // the peer on its home rail's context 0
    efa_ctx *via = nullptr;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        const auto it = core->addr_owner.find(rail0);
        if (it != core->addr_owner.end()) {
            efa_peer_t *p = it->second;
            __atomic_or_fetch(&p->rails_down, 1u << rail, __ATOMIC_RELAXED);
            const int home = home_rail(p);
            if (home >= 0) {
                to = p->addr[static_cast<size_t>(home) * p->num_addrs];
                via = home ? core->rails[static_cast<size_t>(home) - 1]->ctx(0) : core->nic->ctx(0);
            }
        }
    }
    core->rails_lost.fetch_add(1, std::memory_order_relaxed);
    core->rail_lost_any[rail].store(true, std::memory_order_relaxed);
    drop_registrations(core);
    // The link is silent, not the peer: the home rail (the first, unless
    // it is the one lost) carries the notice (without tags there is no
    // space for it; DESIGN.md, "Several NICs: rails", Failover).
    if (core->info.has_tagged && via) {
        probe_send_rail_out(via, to, rail);
    }
    const Nic *nic = 0 == rail ? core->nic.get()
                     : rail - 1 < static_cast<int>(core->rails.size())
                         ? core->rails[static_cast<size_t>(rail) - 1].get()
                         : nullptr;
    core->rep.help("rail-lost", nic ? nic->info()->domain_attr->name : "?", peer_name, why);
    rail_back_schedule(core, rail0, rail);
}

void rail_out_received(efa_core *core, uint64_t id, fi_addr_t src, int peer_rail) {
    // The peers whose probe id's low bits are 'id' (the notice's top bits
    // carry the rail), each with its rail-0 addresses and this process's
    // rail that meets the peer's NIC 'peer_rail' both ways (the path the
    // peer lost; -1: none), and whether that rail is out already.
    struct Named {
        std::vector<fi_addr_t> addrs;
        int rail = -1;
        bool down = false;
    };
    std::vector<Named> named;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        for (uint64_t top = 0; top < 4; ++top) {
            auto range =
                core->peers_by_probe_id.equal_range(id | (top << control::kRailOutRailShift));
            for (auto i = range.first; i != range.second; ++i) {
                const efa_peer_t *p = i->second;
                Named n;
                n.addrs.assign(p->addr, p->addr + p->num_addrs);
                // (the peer's first NIC meets this process's first)
                for (int q = 0; q < p->num_rails && q < kMaxRails; ++q) {
                    if (p->rail_nic[q] == peer_rail && (q == 0 || (p->rails_mutual & (1u << q)))) {
                        n.rail = q;
                        n.down = __atomic_load_n(&p->rails_down, __ATOMIC_RELAXED) & (1u << q);
                        break;
                    }
                }
                named.push_back(std::move(n));
            }
        }
    }
    bool known = false;
    for (const Named &n : named) { // the check takes peers_lock itself
        if (!n.addrs.empty() &&
            efa_core_source_ok(core, src, n.addrs[0], "a notice of a NIC taken out")) {
            known = true;
            // The peer may have seen its NIC fail at once (an error
            // completion) where this side would wait its whole deadline
            // on what it has in flight there: taken out here too, unless
            // it is out already (this side's own loss, whose notice the
            // peer answers this way) or failover is off here.  From the
            // next progress call (rail_outs_take), outside this
            // completion.
            if (n.rail >= 0 && !n.down && core->params.rail_failover) {
                std::lock_guard<std::mutex> guard(core->deadline_lock);
                for (fi_addr_t a : n.addrs) {
                    core->rail_outs_due.push_back(rail_key(a, n.rail));
                    if (0 == n.rail) {
                        break; // (the first rail is out for the process at once)
                    }
                }
                core->rail_outs_pending.store(true, std::memory_order_relaxed);
            }
        }
    }
    if (!known) {
        core->rep.say(10, "a notice of a NIC taken out from a process not known here: ignored");
        return;
    }
    drop_registrations(core);
    counts::add(counts::kRailOutNotices, 1);
    core->rep.say(10, "a peer took out a NIC by which it reached this process: every "
                      "registration dropped (held ones at their last release)");
}

} // namespace efa

extern "C" void efa_core_count_stripe(size_t bytes, bool again) {
    if (again) {
        efa::counts::add(efa::counts::kFailedOver, 1);
        return;
    }
    efa::counts::add_msg(efa::counts::kStriped, bytes);
}
