// The peer table: a peer's blob turned into its addresses on every rail
// (efa_core_peer_get), shared by the components by refcount, and given
// back (efa_core_peer_put).
#include <cstdlib>
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
fi_addr_t put_peer(efa_core *core, efa_peer_t *peer) {
    auto idx = core->peer_index.find(peer);
    if (idx == core->peer_index.end()) {
        return FI_ADDR_NOTAVAIL;
    }
    auto it = idx->second;
    fi_addr_t gone = FI_ADDR_NOTAVAIL;
    if (--it->second.refs == 0) {
        gone = peer->addr[0];
        const int nctx = core->nic->num_contexts();
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
    int n = fi_av_insert(core->nic->av(), pb.nic_names(0), nctx, peer->addr, 0, nullptr);
    if (n != nctx) {
        free(peer);
        core->rep.help("av-insert-failed", std::to_string(n), fi_strerror(n < 0 ? -n : FI_EOTHER));
        *err = n < 0 ? n : -FI_EOTHER;
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

void efa_core_peer_put(efa_core_t *core, efa_peer_t *peer) {
    fi_addr_t gone = FI_ADDR_NOTAVAIL;
    {
        std::lock_guard<std::mutex> guard(core->peers_lock);
        gone = put_peer(core, peer);
    }
    if (gone != FI_ADDR_NOTAVAIL) {
        rail_back_forget(core, gone); // (deadline_lock: never under peers_lock)
    }
}

} // extern "C"
