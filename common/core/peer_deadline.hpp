// The peer deadline: which peers have stopped answering.
//
// A peer whose host drops off the data network while Open MPI's runtime
// still reaches it (on EFA the two are separate networks) would leave every
// operation to it pending for ever: the providers retransmit without end
// and nobody ends the job.  This class keeps, per peer, the operations
// posted to it or waiting on it and the time something last completed with
// it, and says which peers are past the deadline.  Pure bookkeeping with
// the time passed in (tests drive a fake clock); the core posts
// (ctx_post.hpp), fails (core_deadline.cpp) and probes (core_probe.cpp).
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
#include <vector>

namespace efa {

class PeerDeadline {
    struct Peer;

  public:
    enum class Kind { Send, Recv };

    // What the deadline keeps of one tracked operation, inside the caller's
    // record of it (core_deadline.cpp's stand-in): the links of its peer's
    // list, so that tracking costs no allocation and no hashing of the
    // operation (a completion unlinks it in a few instructions).
    struct Entry {
        Entry *prev = nullptr, *next = nullptr;
        Peer *peer = nullptr; // the peer whose list holds it; null: not tracked
        Kind kind = Kind::Send;
    };

    // timeout_ms 0: never expire (every call is then cheap and tracks nothing).
    explicit PeerDeadline(uint64_t timeout_ms, uint64_t check_interval_ms = 1000)
        : timeout_(timeout_ms), interval_(check_interval_ms) {}

    bool enabled() const { return timeout_ != 0; }
    uint64_t timeout_ms() const { return timeout_; }

    // An operation with 'peer' was posted.  false: the peer is dead, the
    // operation is not tracked and must fail at once.
    bool posted(uint64_t peer, Entry *op, Kind kind, uint64_t now);
    // A tracked operation completed (with or without error).  false: it was
    // no longer tracked (failed by the deadline already): the caller must
    // not complete it again.
    bool completed(Entry *op, uint64_t now);

    // Drops a tracked operation without counting it as news (its post
    // failed at once).
    void forget(Entry *op);

    bool dead(uint64_t peer) const;
    // The peer is gone from the address vector, whose address may name
    // another process next: its state goes (dead included), unless an
    // operation of it is still tracked.
    void forget_peer(uint64_t peer);
    // 'peer' (a rail's key: a rail to a peer, never a process) reaches
    // again: alive, its clock starting now.  false: it was not dead.
    bool revive(uint64_t peer, uint64_t now);
    // News of 'peer' that is no completion (its other rail was found dead:
    // the wait was that rail's, not this path's): its clock restarts.
    void touch(uint64_t peer, uint64_t now);
    // Is 'peer' past its deadline now (the first rule)?  A verdict's
    // expired peer may not be any more once another key of the same
    // process was declared dead and touched it (core_deadline.cpp).
    bool expired(uint64_t peer, uint64_t now) const;

    // This process called no progress for 'ms' (it computed): nothing of a
    // peer could complete meanwhile, so that time is no peer's silence.
    void away(uint64_t ms, uint64_t now);

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
    std::vector<Entry *> declare_dead(uint64_t peer);

    // Takes the operations of 'peer' for which take(entry) is true out of
    // tracking (the caller fails them); the peer stays alive.  One path
    // to a process lost while the process lives on (the first rail
    // taken out: core_rail0.cpp) fails what went by it, not what waits
    // on the process.
    template <class Take> std::vector<Entry *> take_if(uint64_t peer, Take take) {
        std::vector<Entry *> ops;
        auto it = peers_.find(peer);
        if (it == peers_.end()) {
            return ops;
        }
        for (Entry *e = it->second.head; e;) {
            Entry *next = e->next;
            if (take(e)) {
                unlink(e);
                ops.push_back(e);
            }
            e = next;
        }
        return ops;
    }

    size_t tracked() const { return total_; }

    // Every tracked operation, no longer tracked (the core closes).
    std::vector<Entry *> release_all();

  private:
    struct Peer {
        Entry *head = nullptr; // its tracked operations
        size_t count = 0;
        size_t sends = 0;
        uint64_t last = 0;       // last completion with it, or when it became busy
        uint64_t last_probe = 0; // when a probe was last asked for
        bool dead = false;
    };
    void unlink(Entry *e);
    void drain(Peer &p, std::vector<Entry *> *out);

    uint64_t timeout_, interval_;
    uint64_t next_check_ = 0;
    size_t total_ = 0;
    // Node-based: a Peer never moves, so entries may point at it.
    std::unordered_map<uint64_t, Peer> peers_;
};

} // namespace efa
