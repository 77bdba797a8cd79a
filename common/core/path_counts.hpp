// What this process moved by which path, for the MPI_T performance
// variables (common_efa_pvars.c, read through efa_core_get_current_counters):
// posts to the provider, frames through the on-node rings, single copies,
// unexpected messages, coalesced frames and emulated one-sided requests.
//
// One set per process, in static storage and never reset: a count never
// goes down, and reading one is safe at any time, before MPI_Init and
// after MPI_Finalize too.  The hot paths add with a plain load and store
// (no locked instruction: a 1 B on-node round trip is about 1800
// instructions and a locked add costs tens of cycles); only when several
// threads may add at once (MPI_THREAD_MULTIPLE, set at core open) is the
// add atomic, so no count is lost to a race.
#pragma once

#include <atomic>
#include <cstdint>

namespace efa::counts {

enum Id : unsigned {
    kProviderSends,     // messages posted to the provider (tagged and untagged)
    kProviderSendBytes, //   their bytes
    kProviderRecvs,     // receive completions read from the provider
    kProviderRecvBytes, //   their bytes
    kProviderRma,       // one-sided operations posted to the provider
    kProviderRmaBytes,  //   their bytes
    kRingFrames,        // frames sent through the on-node rings
    kRingBytes,         //   their bytes (frame headers included)
    kSingleCopies,      // single copies to or from another process (CMA)
    kSingleCopyBytes,   //   their bytes
    kUnexpected,        // messages that arrived before a receive matched them
    kUnexpectedPeak,    // most messages waiting unexpected at once (a high-water mark)
    kCoalesced,         // frames packed behind another in one provider message
    kEmulServed,        // emulated one-sided requests executed for peers
    kEmulRefused,       // ... refused (no registration, out of range, not permitted)
    kRail0Rma,          // one-sided operations posted on rail 0 (the first NIC)
    kRail0RmaBytes,     //   their bytes (puts and gets)
    kRail1Rma,          // ... on rail 1 (the second NIC)
    kRail1RmaBytes,     //
    kRail2Rma,          // ... on rail 2
    kRail2RmaBytes,     //
    kRail3Rma,          // ... on rail 3
    kRail3RmaBytes,     //
    kStriped,           // transfers striped over several rails
    kStripedBytes,      //   their bytes
    kFailedOver,        // striped parts sent again over the first rail after theirs failed
    kRailsBack,         // lost rails found reaching their peer again (core_rail_back.cpp)
    kRailOutNotices,    // peers' notices that they took out a NIC reaching this process
    kNumCounts
};

// Hidden: the hot paths reach them PC-relative, not through the GOT (every
// user is in the one library, libmca_common_efa, or links the core whole).
extern std::atomic<uint64_t> g_counts[kNumCounts] __attribute__((visibility("hidden")));
extern std::atomic<bool> g_shared __attribute__((visibility("hidden")));

inline void add_to(std::atomic<uint64_t> &c, uint64_t n, bool shared) {
    if (__builtin_expect(shared, 0)) {
        c.fetch_add(n, std::memory_order_relaxed);
    } else {
        c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
}

inline void add(Id id, uint64_t n) {
    add_to(g_counts[id], n, g_shared.load(std::memory_order_relaxed));
}

// One more of 'id' and 'bytes' more of the count after it (kRingFrames and
// kRingBytes, ...): one look at g_shared for both.
inline void add_msg(Id id, uint64_t bytes) {
    const bool shared = g_shared.load(std::memory_order_relaxed);
    add_to(g_counts[id], 1, shared);
    add_to(g_counts[id + 1], bytes, shared);
}

// The count of one-sided operations on rail 'rail' (0..3); its bytes
// follow it.
inline Id rail_rma(int rail) {
    return static_cast<Id>(kRail0Rma + 2 * rail);
}

// A high-water mark; the caller holds the lock of what it measures.
inline void peak(Id id, uint64_t level) {
    std::atomic<uint64_t> &c = g_counts[id];
    uint64_t seen = c.load(std::memory_order_relaxed);
    while (level > seen && !c.compare_exchange_weak(seen, level, std::memory_order_relaxed)) {
    }
}

inline uint64_t get(Id id) {
    return g_counts[id].load(std::memory_order_relaxed);
}

} // namespace efa::counts
