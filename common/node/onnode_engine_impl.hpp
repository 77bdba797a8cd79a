// What the on-node engine's source files share and nothing else needs:
// request and frame flags, the poll budget, and the single-copy read
// (onnode_engine.cpp defines these; _send.cpp, _deliver.cpp and _recv.cpp
// use them).
#ifndef EFA_ONNODE_ENGINE_IMPL_HPP
#define EFA_ONNODE_ENGINE_IMPL_HPP

#include <cstddef>
#include <cstdint>

#include "onnode_engine.hpp"

namespace efa::onnode {

// Request flags and states (efa_onnode_req_t.flags / .state).
constexpr uint8_t kReqSync = 1;
constexpr uint8_t kReqRndv = 2;
constexpr uint8_t kReqPartner = 4; // a receive posted elsewhere too
constexpr uint8_t kReqArmed = 8;   // ... and that other half is posted
constexpr uint8_t kReqCancel = 16; // send: kCancel written or queued
constexpr uint8_t kReqSwept = 32;  // ANY_SOURCE receive: seen posted by a watch sweep

constexpr uint8_t kFrameSync = 1; // eager frame: answer ACK on match
constexpr int kPollBudget = 64;
constexpr uint32_t kNoRing = 0xffffffffu;
// Frame bytes in the slot's first cache line (the slot's own 8-byte header
// takes the rest): slots are cache-line aligned.
constexpr size_t kFirstLine = shm::kLine - shm::kSlotHeader;

} // namespace efa::onnode

#endif // EFA_ONNODE_ENGINE_IMPL_HPP
