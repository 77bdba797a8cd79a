// The peer table: a peer's blob turned into its addresses on every rail
// (efa_core_peer_get), shared by the components by refcount, and given
// back (efa_core_peer_put).
#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "efa_rma.h"
#include "peer_blob.hpp"

namespace efa {
namespace {

// A reference to 'peer' given back (peers_lock held): its rail-0 address
// where that was the last, so it is gone, else FI_ADDR_NOTAVAIL.
// The peer's addresses (one per context) once its last reference went,
// else none.
std::vector<fi_addr_t> put_peer(efa_core *core, efa_peer_t *peer) {
    auto idx = core->peer_index.find(peer);
    if (idx == core->peer_index.end()) {
        return {};
    }
    auto it = idx->second;
    std::vector<fi_addr_t> gone;
    if (--it->second.refs == 0) {
        const int nctx = core->nic->num_contexts();
        try {
            gone.assign(peer->addr, peer->addr + nctx);
        } catch (const std::bad_alloc &) {
            gone.clear(); // (no memory: its keys stay in the deadline, as they were)
        }
        fi_av_remove(core->nic->av(), peer->addr, nctx, 0);
        for (int i = 0; i < nctx; ++i) {
            core->addr_owner.erase(peer->addr[i]);
        }
        remove_peer_rails(core, peer);
        core->peer_names.erase(peer);
        auto ids =
            core->peers_by_probe_id.equal_range(probe_id_of(it->first.data(), it->first.size()));
        for (auto i = ids.first; i != ids.second; ++i) {
            if (i->second == peer) {
                core->peers_by_probe_id.erase(i);
                break;
            }
        }
        free(peer);
        core->peers.erase(it);
        core->peer_index.erase(idx);
    }
    return gone;
}

// The entries of 'addrs' that a failed fi_av_insert did write, removed
// again (peers_lock held); how many were removed.  An entry another peer
// owns stays: shm (libfabric 1.17) answers a name whose process it cannot
// find with an entry it already holds ("addr already in AV"), and removing
// that would take the other peer's address away.
int remove_inserted(efa_core *core, const fi_addr_t *addrs, int count) {
    std::vector<fi_addr_t> in;
    for (int i = 0; i < count; ++i) {
        if (addrs[i] != FI_ADDR_NOTAVAIL && !core->addr_owner.count(addrs[i]) &&
            std::find(in.begin(), in.end(), addrs[i]) == in.end()) {
            in.push_back(addrs[i]);
        }
    }
    if (!in.empty()) {
        const int rc = fi_av_remove(core->nic->av(), in.data(), in.size(), 0);
        if (rc) {
            core->rep.say(1, std::string("fi_av_remove of a peer's partly inserted addresses: ") +
                                 fi_strerror(-rc));
        }
    }
    return static_cast<int>(in.size());
}

// What bounds the address vector, for the message of a failed insert: the
// core opens it without a size, so the provider's own bound holds, which
// its domain's ep_cnt states (shm: 256, its peers at most).
std::string av_limit(const efa_core *core) {
    const fi_info *info = core->nic->info();
    const size_t ep_cnt = info && info->domain_attr ? info->domain_attr->ep_cnt : 0;
    const size_t nctx = static_cast<size_t>(core->nic->num_contexts());
    std::string out = ep_cnt ? "the " + std::string(core->info.provider) + " domain's ep_cnt is " +
                                   std::to_string(ep_cnt)
                             : "the provider states none (domain ep_cnt 0)";
    return out + "; " + std::to_string(core->peers.size()) + " peers hold " +
           std::to_string(core->peers.size() * nctx) + " addresses (" + std::to_string(nctx) +
           " each)";
}

// Does the provider of 'selected' reach processes of other hosts?  The
// entry cannot say: libfabric (1.17 at least) echoes the FI_LOCAL_COMM and
// FI_REMOTE_COMM that the hints asked for, so tcp;ofi_rxm on a real
// interface came without either when neither was asked.  So the question
// is put again, the same entry with FI_REMOTE_COMM, which is how
// need_remote_comm keeps shm out at selection: shm answers -FI_ENODATA.
// Any other failure says nothing, and refuses no peer.
bool reaches_other_hosts(const fi_info *selected, uint32_t api_version) {
    InfoPtr hints(fi_dupinfo(selected));
    if (!hints) {
        return true;
    }
    hints->caps |= FI_LOCAL_COMM | FI_REMOTE_COMM;
    // The copy names the fabric and domain objects the entry was found
    // with, which libfabric 2.x's efa looks into and which another
    // component may have closed since: by name only.
    if (hints->fabric_attr) {
        hints->fabric_attr->fabric = nullptr;
    }
    if (hints->domain_attr) {
        hints->domain_attr->domain = nullptr;
    }
    fi_info *found = nullptr;
    const int rc = fi_getinfo(api_version, nullptr, nullptr, 0, hints.get(), &found);
    InfoPtr owned(found);
    return rc != -FI_ENODATA;
}

} // namespace
} // namespace efa

using namespace efa;

extern "C" {

efa_peer_t *efa_core_peer_get(efa_core_t *core, const void *blob, size_t len, int *err) {
    const int nctx = core->nic->num_contexts();
    PeerBlob pb;
    std::string why;
    switch (parse_peer_blob(blob, len, core->nic->addr_len(), nctx, &pb, &why)) {
    case PeerBlobStatus::kOk:
        break;
    case PeerBlobStatus::kMalformed:
        // Said always: the peer becomes unreachable, and MPI_Init's message
        // alone does not say why.
        core->rep.say(0, why);
        *err = -FI_EINVAL;
        return nullptr;
    case PeerBlobStatus::kContextMismatch:
        core->rep.help("context-mismatch", std::to_string(nctx),
                       std::to_string(pb.header.num_contexts));
        *err = -FI_EINVAL;
        return nullptr;
    }
    std::vector<uint8_t> key(static_cast<const uint8_t *>(blob),
                             static_cast<const uint8_t *>(blob) + len);
    std::lock_guard<std::mutex> guard(core->peers_lock);
    auto it = core->peers.find(key);
    if (it != core->peers.end()) {
        ++it->second.refs;
        return it->second.peer;
    }
    // Rail r: our NIC r with the peer's NIC on its fabric; rail 0 always
    // with the peer's first NIC, the one that receives messages (the
    // selection puts every process's first NIC on one fabric).
    const int nrails = 1 + static_cast<int>(core->rails.size());
    std::vector<int> pairing = pair_rails(core->fabric_ids, pb.fabric_ids);
    pairing[0] = 0; // only the peer's first NIC receives messages
    const size_t naddrs = static_cast<size_t>(nrails) * nctx;
    auto *peer = static_cast<efa_peer_t *>(malloc(sizeof(efa_peer_t) + sizeof(fi_addr_t) * naddrs));
    if (!peer) {
        *err = -FI_ENOMEM;
        return nullptr;
    }
    peer->num_addrs = nctx; // rail 0's: what the messages, probes and the deadline use
    peer->send_seq = 0;
    peer->num_rails = nrails;
    peer->rails_up = 1;
    peer->rails_down = 0;
    peer->rails_back = 0;
    peer->rails_back_btl = 0;
    for (int r = 0; r < EFA_MAX_RAILS; ++r) {
        peer->rail_nic[r] = static_cast<uint8_t>(r < nrails && pairing[r] > 0 ? pairing[r] : 0);
    }
    // Entries the provider leaves alone read as not inserted: one that
    // fails the whole call need not write them.
    for (int i = 0; i < nctx; ++i) {
        peer->addr[i] = FI_ADDR_NOTAVAIL;
    }
    int n = fi_av_insert(core->nic->av(), pb.nic_names(0), nctx, peer->addr, 0, nullptr);
    if (n != nctx) {
        // A short count (shm's vector holds 256 addresses, and every peer
        // takes one per context) leaves the entries that did go in: taken
        // out again, else they hold their room in the vector for good.
        const int written = static_cast<int>(std::count_if(
            peer->addr, peer->addr + nctx, [](fi_addr_t a) { return a != FI_ADDR_NOTAVAIL; }));
        const int removed = remove_inserted(core, peer->addr, nctx);
        free(peer);
        std::string inserted = std::to_string(n < 0 ? written : n) + " of " + std::to_string(nctx) +
                               " addresses (one per context; common_efa_num_contexts)";
        if (removed > 0) {
            inserted += ", " + std::to_string(removed) + " removed again";
        }
        core->rep.help("av-insert-failed", inserted,
                       n < 0 ? fi_strerror(-n)
                             : "the provider inserted fewer addresses than asked, with no error",
                       av_limit(core));
        *err = n < 0 ? n : -FI_ENOSPC;
        return nullptr;
    }
    // An entry another peer owns, counted as inserted: shm (libfabric 1.17)
    // answers a name whose process it cannot find with an entry it already
    // gave, and the two peers would then take each other's messages.
    for (int i = 0; i < nctx; ++i) {
        const auto owner = core->addr_owner.find(peer->addr[i]);
        if (owner == core->addr_owner.end()) {
            continue;
        }
        const auto named = core->peer_names.find(owner->second);
        const std::string whose = named != core->peer_names.end() && !named->second.empty()
                                      ? named->second
                                      : std::string("another peer");
        remove_inserted(core, peer->addr, nctx); // (the owned one stays)
        free(peer);
        core->rep.help("av-entry-shared", core->info.provider, whose);
        *err = -FI_EADDRINUSE;
        return nullptr;
    }
    insert_peer_rails(core, peer, pb, pairing);
    auto inserted = core->peers.emplace(std::move(key), efa_core::PeerEntry{peer, 1}).first;
    core->peer_index.emplace(peer, inserted);
    core->peers_by_probe_id.emplace(probe_id_of(blob, len), peer);
    for (int i = 0; i < nctx; ++i) {
        core->addr_owner[peer->addr[i]] = peer;
    }
    return peer;
}

const char *efa_core_host_only(efa_core_t *core) {
    // A provider that libfabric admitted for remote peers (need_remote_comm
    // asks for FI_REMOTE_COMM at selection) reaches them.
    if (core->params.need_remote_comm) {
        return nullptr;
    }
    int state = core->host_only_state.load(std::memory_order_acquire);
    if (state == efa_core::kHostUnknown) {
        // (Threads that ask at once may both put the question: the same answer.)
        state = reaches_other_hosts(core->nic->info(), core->selection.api_version)
                    ? efa_core::kHostOthers
                    : efa_core::kHostAlone;
        core->host_only_state.store(state, std::memory_order_release);
    }
    return state == efa_core::kHostAlone ? core->info.provider : nullptr;
}

void efa_core_peer_put(efa_core_t *core, efa_peer_t *peer) {
    std::vector<fi_addr_t> gone;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        gone = put_peer(core, peer);
    }
    for (fi_addr_t a : gone) {
        rail_back_forget(core, a); // (deadline_lock: never under peers_lock)
    }
}

} // extern "C"

// Whether the peer deadline declared the process lost (efa_core.h).
extern "C" int efa_core_peer_state(efa_core_t *core, const efa_peer_t *peer) {
    if (!core->deadline_on) {
        return -1;
    }
    if (!core->deadline_any_dead.load(std::memory_order_relaxed)) {
        return 0;
    }
    // The process lost: every address of it declared dead, its first
    // rail's too (a first rail alone out is not: core_rail0.cpp).
    std::lock_guard<std::mutex> guard(core->deadline_lock);
    return core->deadline.dead(peer->addr[0]) ? 1 : 0;
}
