// The peer deadline: which peers have stopped answering.
//
// A peer whose host drops off the data network while Open MPI's runtime
// still reaches it (on EFA the two are separate networks) would leave every
// operation to it pending for ever: the providers retransmit without end
// and nobody ends the job.  This class keeps, per peer, the operations
// posted to it or waiting on it and the time something last completed with
// it, and says which peers are past the deadline.  Pure bookkeeping with
// the time passed in (tests drive a fake clock); the core (core_capi.cpp)
// posts, fails and probes.
//
// Rules:
//  - a peer with a send (or one-sided operation, or probe) outstanding and
//    nothing completed with it for 'timeout' is expired;
//  - a peer that is only waited on (receives posted for it alone: a
//    blocking receive, a synchronous send's acknowledgement) has nothing
//    that could fail; after half the timeout without news it is due a
//    probe, a zero-byte message whose completion refreshes it and whose
//    lack expires it by the first rule half a timeout later;
//  - a peer declared dead stays dead: its operations are handed back to
//    be failed, and later posts to it are refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace efa {

class PeerDeadline {
  public:
    enum class Kind { Send, Recv };

    // timeout_ms 0: never expire (every call is then cheap and tracks nothing).
    explicit PeerDeadline(uint64_t timeout_ms, uint64_t check_interval_ms = 1000)
        : timeout_(timeout_ms), interval_(check_interval_ms) {}

    bool enabled() const { return timeout_ != 0; }
    uint64_t timeout_ms() const { return timeout_; }

    // An operation with 'peer' was posted.  false: the peer is dead, the
    // operation is not tracked and must fail at once.
    bool posted(uint64_t peer, const void *op, Kind kind, uint64_t now);
    // A tracked operation completed (with or without error).  false: it was
    // no longer tracked (failed by the deadline already): the caller must
    // not complete it again.
    bool completed(uint64_t peer, const void *op, uint64_t now);

    // Drops a tracked operation without counting it as news (its post
    // failed at once).
    void forget(uint64_t peer, const void *op);

    bool dead(uint64_t peer) const;

    // Is a check due (at most once per check interval, and only while some
    // operation is tracked)?  Marks the check as done.
    bool due(uint64_t now);

    struct Verdict {
        std::vector<uint64_t> expired; // declare these dead
        std::vector<uint64_t> probe;   // send these a probe
    };
    Verdict check(uint64_t now);

    // Marks the peer dead; returns its tracked operations (they are no
    // longer tracked: the caller fails them).  Idempotent.
    std::vector<const void *> declare_dead(uint64_t peer);

    size_t tracked() const { return total_; }

    // Every tracked operation, no longer tracked (the core closes).
    std::vector<const void *> release_all();

  private:
    struct Peer {
        std::unordered_map<const void *, Kind> ops;
        size_t sends = 0;
        uint64_t last = 0;       // last completion with it, or when it became busy
        uint64_t last_probe = 0; // when a probe was last asked for
        bool dead = false;
    };
    uint64_t timeout_, interval_;
    uint64_t next_check_ = 0;
    size_t total_ = 0;
    std::unordered_map<uint64_t, Peer> peers_;
};

} // namespace efa
