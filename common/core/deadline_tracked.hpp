// The peer deadline's stand-in for one operation it tracks
// (deadline_tracked.cpp), shared by the post and completion hooks
// (core_deadline.cpp) and the liveness probe (core_probe.cpp, which
// core_deadline.cpp calls, never the other way round).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core.hpp"

namespace efa {

struct Tracked {
    efa_op_t op; // first: the provider hands back &op.fi_ctx
    PeerDeadline::Entry entry;
    efa_op_t *owner;
    efa_ctx *ctx;
    fi_addr_t peer;
    uint64_t flags; // what the failure completion says it was (FI_SEND, FI_RECV, ...)
    bool sent;      // a probe the provider has handed back, still waiting for its answer
    // Failed by efa_core_peer_lost: never to reach the provider after that (a
    // backlog's flush drops it: deadline_dropped).  Atomic: the flush
    // reads it under the backlog's lock, not deadline_lock.
    std::atomic<bool> failed;
    // A receive failed by efa_core_peer_lost that the provider still held: its
    // owner is told (with held_err) only when the provider hands it back,
    // or at held_until (ms) at the latest (deadline_lock).  0: not held.
    int held_err;
    uint64_t held_until;
    // In deadline_free: set under deadline_lock by give_tracked, cleared
    // by take_tracked; read without it by tracked_complete, which the
    // provider only calls for a stand-in it holds (never a free one).
    std::atomic<bool> in_free_list;
};

inline Tracked *tracked_of(PeerDeadline::Entry *e) {
    return reinterpret_cast<Tracked *>(reinterpret_cast<char *>(e) - offsetof(Tracked, entry));
}

// A stand-in, recycled when one is free; nullptr when memory is out.
// deadline_lock is held.
Tracked *take_tracked(efa_core *core, efa_op_t *owner, efa_ctx *ctx, fi_addr_t peer,
                      uint64_t flags);
// deadline_lock is held.
void give_tracked(efa_core *core, Tracked *t);

// Failing tracked operations (core_deadline.cpp).  An owner to tell,
// copied under deadline_lock: once it is released the provider may hand
// a stand-in back and it be reused.
struct FailedOp {
    efa_op_t *owner;
    uint64_t flags;
    bool orphaned; // the provider still holds it (efa_cqe_t.orphaned)
};
// Every address of the process 'addr' belongs to (one per context on the
// first rail), and its name; {addr} for an address of no peer.
std::vector<fi_addr_t> same_process(efa_core *core, fi_addr_t addr, std::string *name);
// The stand-ins in 'failed', taken from the deadline, fail with err: the
// owners to tell now are appended to 'tell'.  deadline_lock is held.
void fail_tracked(efa_core *core, const std::vector<Tracked *> &failed, int err,
                  std::vector<FailedOp> *tell);
// Tells them (no lock held).
void tell_failed(const std::vector<FailedOp> &ops, int err);
// Would taking out 'rail' (> 0) leave the peer at rail-0 address 'rail0'
// with no rail, the first being out already (core_rail0.cpp)?  If not,
// the rail is marked out at once, in the same section as the check.
bool last_rail(efa_core *core, fi_addr_t rail0, int rail);
// The key's loss (core_peer_lost.cpp): the first rail's key is that
// rail's loss alone where the peer can do without it, else the peer's.
void path_lost(efa_core *core, fi_addr_t key, int err, const char *why);

// A completion of a stand-in that is free (in_free_list): counted, said
// once, and ignored (a provider that completed an operation twice).
__attribute__((cold)) void stale_completion(efa_core *core, const efa_cqe_t *cqe);

// The completion of every stand-in (core_deadline.cpp): how a backlog
// tells a stand-in from an owner's operation.
void tracked_complete(efa_op_t *op, const efa_cqe_t *cqe);

// A coarse clock in ms (a few ms of resolution, no system call).
uint64_t now_ms();

// The liveness probe (core_probe.cpp).  A probe is a ping that the peer's
// core answers: its completion at the provider alone is no news (on a
// stream provider a send completes once a local socket takes it).
extern efa_op_t g_probe_owner;    // what a probe's stand-in completes into
void probe_open(efa_core *core);  // the receives for pings and answers
void probe_close(efa_core *core); // after the endpoints are closed
// Posts a ping to 'addr' from 'ctx' (the caller tracks it: core_deadline.cpp;
// probe_send.cpp).
ssize_t probe_post_ping(efa_ctx *ctx, fi_addr_t addr, void *context);
// Answers a ping from 'to' over 'ctx' (later, from progress, where the
// queue is full); both in probe_send.cpp.
void probe_send_answer(efa_ctx *ctx, fi_addr_t to);
// Tells the peer at 'to' that this process took out its rail 'rail' (its
// NIC of the set) to it (rail_lost), the same way.
void probe_send_rail_out(efa_ctx *ctx, fi_addr_t to, int rail);
// At close: the answers the provider still held, and those still due.
void probe_sends_close(efa_core *core);
// A probe's send came back from the provider.  true: handled (the probe
// now waits for its answer, or was answered or failed already); false:
// complete it as any tracked operation (an error, or no answers here).
// deadline_lock is held.
bool probe_sent(efa_core *core, Tracked *t, int err);
// Is 'tracked' the stand-in the provider holds for owner now (not handed
// back, not another operation's since)?  deadline_lock is held.
bool tracked_stands_for(const efa_op_t *tracked, const efa_op_t *owner);
// efa_core_peer_lost, deadline_lock held: a probe of the dead peer leaves the table
// of probes out; true when the provider no longer holds it (free it).
bool probe_dropped(efa_core *core, Tracked *t);
// A probe out (at 'it' in probes_out) that needs no answer any more (one
// came, or its rail was lost): out of the table and of the deadline, freed
// or left to its send's completion.  deadline_lock is held.
void probe_settled(efa_core *core, decltype(efa_core::probes_out)::iterator it, uint64_t now);

} // namespace efa
