// A two-process job's communicators for engine tests whose processes are
// the job's ranks 0 and 1: kCid holds both, kCidAlone the first alone
// (ANY_SOURCE rules ask who belongs to which).
#pragma once

#include <cstddef>
#include <cstdint>

namespace engine_two_ranks {

constexpr uint32_t kCid = 5;      // both processes
constexpr uint32_t kCidAlone = 6; // rank 0 alone

// efa_engine_params_t.source_vpid: a communicator's rank is the process.
inline uint32_t source_vpid(void *, uint32_t, int32_t src) {
    return static_cast<uint32_t>(src);
}

// efa_engine_params_t.comm_members
inline size_t comm_members(void *, uint32_t cid, uint32_t *vpids, size_t max) {
    const size_t n = kCidAlone == cid ? 1 : 2;
    for (size_t i = 0; i < n && i < max; ++i) {
        vpids[i] = static_cast<uint32_t>(i);
    }
    return n;
}

} // namespace engine_two_ranks
