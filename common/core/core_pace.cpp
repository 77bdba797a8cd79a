// How often Open MPI's progress loop polls the network provider.
//
// Every opal_progress() call used to poll every context's completion
// queue.  On tcp;ofi_rxm and udp;ofi_rxd that poll is the provider's whole
// progress engine (socket reads, timers): 0.3 to 0.5 us, paid by every
// on-node message the rings carry in 0.1 us, whether or not the network
// could have brought anything.  The provider is now polled on every call
// only when it can have something this process waits for, and otherwise at
// a bounded interval, which still delivers whatever arrives unannounced
// (a message nobody has posted a receive for yet, a provider's own
// acknowledgements and retransmissions).  The interval starts at
// net_poll_interval_us when the provider goes quiet and doubles with each
// paced poll that finds nothing, up to net_poll_interval_max_us: each such
// poll (a system call on the stand-ins) stalls whatever on-node message
// arrives meanwhile, and at every 20 us it made a 1 B on-node round trip
// 15 % slower (docs/PERFORMANCE.md, "The paced provider poll").  What an
// on-node peer sends by the provider does not wait for the interval: the
// sender rings this process's doorbell (efa_core_set_doorbell).
#include <algorithm>
#include <chrono>

#include "core.hpp"

namespace {

// Calls between two looks at the clock while idle (a clock read costs
// about as much as the rest of an idle call).
constexpr uint32_t kClockEvery = 16;
// After a poll that found completions, every call polls for this long: a
// stream of messages keeps the provider hot, and only a lull of this
// length lets pacing start again.
constexpr uint64_t kWarmNs = 1000000;
// After a ring of the doorbell, every call polls until a poll finds a
// completion (then the warm period above), for this long at most: the
// message may need the provider's own exchanges first (tcp;ofi_rxm sets
// up its connection to a peer of the node in about 100 ms, with no
// completion), and a native one-sided operation brings none at all.
constexpr uint64_t kBellNs = 1000000000;

inline uint64_t now_ns() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
}

template <typename T> inline T relaxed(const std::atomic<T> &v) {
    return v.load(std::memory_order_relaxed);
}

// Has at least span passed from then to now?  Signed: another thread may
// have stored a then later than this thread's now.
inline bool passed(uint64_t now, uint64_t then, uint64_t span) {
    return static_cast<int64_t>(now - then) >= static_cast<int64_t>(span);
}

// Something posted through the core is waiting for the provider (the
// loads seq_cst: after the clear of net_posted, see work_posted).
inline bool work_in_flight(efa_core *core) {
    constexpr auto sc = std::memory_order_seq_cst;
    const int n = core->nic->num_contexts();
    for (int i = 0; i < n; ++i) {
        efa_ctx *ctx = core->nic->ctx(i);
        if (ctx->inflight.load(sc) != 0 || ctx->tx_backlog.size.load(sc) != 0 ||
            ctx->rx_backlog.size.load(sc) != 0 || ctx->rx_internal_backlog.size.load(sc) != 0) {
            return true;
        }
    }
    for (const auto &rail : core->rails) {
        for (int i = 0; i < n; ++i) {
            efa_ctx *ctx = rail->ctx(i);
            if (ctx->inflight.load(sc) != 0 || ctx->tx_backlog.size.load(sc) != 0) {
                return true;
            }
        }
    }
    return false;
}

// Is something posted still waiting?  Counted only after a post flagged
// it (note_posted, core.hpp); once the count finds nothing the flag is
// cleared, and counted again: a post of another thread between the two
// either shows in the second count or sets the flag after the clear
// (each side writes, then reads the other's word, all seq_cst).
__attribute__((noinline)) bool work_posted(efa_core *core) {
    if (work_in_flight(core)) {
        return true;
    }
    core->net_posted.store(false, std::memory_order_seq_cst);
    if (work_in_flight(core)) {
        core->net_posted.store(true, std::memory_order_relaxed);
        return true;
    }
    return false;
}

// Every kClockEvery-th idle call: is the provider still warm, or is its
// paced poll due?  (Out of line: the calls in between then need no stack
// frame at all.)
__attribute__((noinline)) bool clock_says_poll(efa_core *core) {
    const uint64_t now = now_ns();
    if (core->net_warm.load(std::memory_order_acquire)) {
        uint64_t bell = relaxed(core->net_bell_ns);
        if (core->net_events.exchange(false, std::memory_order_relaxed)) {
            core->net_last_event_ns.store(now, std::memory_order_relaxed);
        } else if (passed(now, relaxed(core->net_last_event_ns), kWarmNs) &&
                   (0 == bell || passed(now, bell, kBellNs)) &&
                   core->net_bell_ns.compare_exchange_strong(bell, 0, std::memory_order_relaxed)) {
            // (a bell answered meanwhile by another thread keeps it warm)
            core->net_warm.store(false, std::memory_order_relaxed);
        }
        return true;
    }
    const uint64_t wait = relaxed(core->net_wait_ns);
    if (!passed(now, relaxed(core->net_last_poll_ns), wait)) {
        return false;
    }
    core->net_last_poll_ns.store(now, std::memory_order_relaxed);
    // Should this poll find nothing, the next waits twice as long (one that
    // finds something starts again from the shortest: poll_now).
    core->net_wait_ns.store(std::min(2 * wait, core->net_interval_max_ns),
                            std::memory_order_relaxed);
    return true;
}

// An on-node peer sent something by the provider and rang the doorbell:
// warm from now until a poll finds a completion (any: the bell does not
// say which; kBellNs at most), so that every call polls until it is in.
__attribute__((noinline)) bool answer_bell(efa_core *core, uint32_t *bell) {
    if (0 == __atomic_exchange_n(bell, 0u, __ATOMIC_ACQUIRE)) {
        return false; // another thread answered it
    }
    const uint64_t now = now_ns();
    core->net_bell_ns.store(now, std::memory_order_relaxed);
    core->net_last_event_ns.store(now, std::memory_order_relaxed);
    core->net_wait_ns.store(core->net_interval_ns, std::memory_order_relaxed);
    core->net_warm.store(true, std::memory_order_release); // (after the above: clock_says_poll)
    return true;
}

// Does this call poll the provider?
inline bool poll_due(efa_core *core) {
    if (core->net_interval_ns == 0 || relaxed(core->net_interest) > 0 ||
        (relaxed(core->net_posted) && work_posted(core))) {
        return true;
    }
    uint32_t *const bell = core->net_bell.load(std::memory_order_acquire);
    if (bell && __atomic_load_n(bell, __ATOMIC_RELAXED) && answer_bell(core, bell)) {
        return true;
    }
    const uint32_t calls = relaxed(core->net_idle_calls) + 1;
    core->net_idle_calls.store(calls, std::memory_order_relaxed);
    if (calls % kClockEvery == 0) {
        return clock_says_poll(core);
    }
    return relaxed(core->net_warm);
}

// The poll itself, and what it tells the pacing.
__attribute__((noinline)) int poll_now(efa_core *core) {
    const int events = efa_core_progress(core);
    if (events > 0 && core->net_interval_ns != 0) {
        core->net_wait_ns.store(core->net_interval_ns, std::memory_order_relaxed);
        if (relaxed(core->net_bell_ns)) {
            core->net_bell_ns.store(0, std::memory_order_relaxed); // what the bell announced
        }
        if (!relaxed(core->net_warm)) {
            core->net_last_event_ns.store(now_ns(), std::memory_order_relaxed);
            core->net_warm.store(true, std::memory_order_relaxed);
        } else {
            core->net_events.store(true, std::memory_order_relaxed);
        }
    }
    return events;
}

} // namespace

extern "C" {

uint64_t efa_core_away_ms(const efa_core_t *core) {
    return core->away_ms.load(std::memory_order_relaxed);
}

int efa_core_progress_paced(efa_core_t *core) {
    // The idle call (every on-node message pays several) is a few loads
    // and a tail call at most.
    return poll_due(core) ? poll_now(core) : 0;
}

void efa_core_net_interest(efa_core_t *core, int delta) {
    core->net_interest.fetch_add(delta, std::memory_order_relaxed);
}

void efa_core_set_doorbell(efa_core_t *core, uint32_t *bell) {
    core->net_bell.store(bell, std::memory_order_release);
}

uint64_t efa_core_net_wait_us(const efa_core_t *core) {
    return relaxed(core->net_wait_ns) / 1000;
}

} // extern "C"
