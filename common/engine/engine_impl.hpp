// What the matching engine's source files share and nothing else needs:
// the poll budget and the slot's first line (engine.cpp and the
// _send, _deliver, _recv and _read files use them).  The request and frame
// flags are in engine.hpp, with the requests' states.
#ifndef EFA_ENGINE_ENGINE_IMPL_HPP
#define EFA_ENGINE_ENGINE_IMPL_HPP

#include <cstddef>
#include <cstdint>

#include "engine.hpp"

namespace efa::engine {

constexpr int kPollBudget = 64;
constexpr uint32_t kNoRing = 0xffffffffu;
// Frame bytes in the slot's first cache line (the slot's own 8-byte header
// takes the rest): slots are cache-line aligned.
constexpr size_t kFirstLine = shm::kLine - shm::kSlotHeader;

} // namespace efa::engine

#endif // EFA_ENGINE_ENGINE_IMPL_HPP
