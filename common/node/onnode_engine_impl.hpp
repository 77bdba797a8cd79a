// What the on-node engine's source files share and nothing else needs:
// the poll budget and the slot's first line (onnode_engine.cpp and the
// _send, _deliver, _recv and _read files use them).  The request and frame
// flags are in onnode_engine.hpp, with the requests' states.
#ifndef EFA_ONNODE_ENGINE_IMPL_HPP
#define EFA_ONNODE_ENGINE_IMPL_HPP

#include <cstddef>
#include <cstdint>

#include "onnode_engine.hpp"

namespace efa::onnode {

constexpr int kPollBudget = 64;
constexpr uint32_t kNoRing = 0xffffffffu;
// Frame bytes in the slot's first cache line (the slot's own 8-byte header
// takes the rest): slots are cache-line aligned.
constexpr size_t kFirstLine = shm::kLine - shm::kSlotHeader;

} // namespace efa::onnode

#endif // EFA_ONNODE_ENGINE_IMPL_HPP
