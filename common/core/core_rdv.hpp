// Read rendezvous (efa_core_rdv.h): what the sender's side and the control
// receives (core_rdv.cpp) and the receiver's side (core_rdv_take.cpp) share.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "control_wire.hpp"
#include "core.hpp"

namespace efa {

// A note by its sender's probe id and its message's tag.
using RdvKey = std::pair<uint64_t, uint64_t>;

// A note as it arrived, and where from as the provider says.
struct RdvNote {
    control::RdvMsg m;
    fi_addr_t src;
};

struct RdvTake; // a receive that matched a rendezvous message (core_rdv_take.cpp)

// The core's rendezvous state, under 'lock'.
struct RdvState {
    std::mutex lock;
    uint64_t next_id = 1;
    std::vector<void *> recvs;                              // the control receives
    std::unordered_map<uint64_t, efa_rdv_offer_t *> offers; // sent, waiting for the answer
    // Their receivers and tags: one offer at a time per pair, as the
    // receiver pairs a note with its message by the sender and the tag
    // (the seq in it wraps while an unmatched message may still wait).
    std::set<std::pair<fi_addr_t, uint64_t>> offered;
    std::map<RdvKey, std::deque<RdvNote>> notes;             // here, their message not yet taken
    std::map<RdvKey, std::deque<RdvTake *>> waiting;         // taken, their note not yet here
    std::unordered_set<RdvTake *> takes;                     // every receive in progress
    uint64_t sent = 0, read = 0, read_bytes = 0, failed = 0; // for the report at close
    uint64_t through_host = 0; // reads into device memory the provider refused, read again
};

// The receiver's side (core_rdv_take.cpp): a note arrived on ctx (from
// the control receives); the receives still in progress when the core
// closes (their reads never complete).
void rdv_on_note(efa_ctx *ctx, const control::RdvMsg &m, fi_addr_t src);
void rdv_orphan_takes(RdvState *st);

} // namespace efa
