// A lost rail brought back (core_rail_back.cpp): after common_efa_rail_retry
// seconds the core pings the peer over that rail alone, the peer's core
// answers over it, and the answer puts the rail back for that peer.
#pragma once

#include <cstdint>

#include <rdma/fabric.h>

struct efa_core;
struct efa_ctx;

namespace efa {

// One lost rail to one peer, by rail_key(rail0, rail) in
// efa_core::rail_retries (under deadline_lock).  It stays after the rail
// is back, so that a rail that fails again waits longer before its next
// try (a flapping link costs a failover per try, not one per second).
struct RailRetry {
    bool down = false;       // taken out; tried again from due_ms
    bool asked = false;      // a ping went out since the loss: only then is an answer news
    bool refused = false;    // the last post found the queue full (-FI_EAGAIN)
    uint64_t due_ms = 0;     // the next ping's time
    uint64_t wait_ms = 0;    // from one try to the next: doubles, to 8 times rail_retry
    void *ping = nullptr;    // the ping the provider holds (one at a time)
    uint64_t lost_bytes = 0; // the rail's byte count when it was lost (said when it is back)
};

// rail_lost's: the rail is tried again after its wait (nothing where
// common_efa_rail_retry is 0, or the provider has no tags for the ping).
void rail_back_schedule(efa_core *core, fi_addr_t rail0, int rail);
// From the deadline's tick, about once a second: the pings that are due.
void rail_back_tick(efa_core *core, uint64_t now_ms);
// A ping or an answer that came in over a rail's context (core_probe.cpp
// hands them here; 'src' is the provider's source, FI_ADDR_NOTAVAIL where
// it reports none).
void rail_ping_received(efa_ctx *ctx, uint64_t id, fi_addr_t src);
void rail_answer_received(efa_ctx *ctx, uint64_t id, fi_addr_t src);
// A peer released (called with each of its contexts' first-NIC
// addresses): its entries go, so that a later peer given the same address
// inherits nothing.
void rail_back_forget(efa_core *core, fi_addr_t addr);
// At release, after the endpoints that close are closed: the pings the
// provider still held (those on a rail left open for the exit stay).
void rail_back_close(efa_core *core);

} // namespace efa
