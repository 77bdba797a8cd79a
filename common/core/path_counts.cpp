// The process's path counts (path_counts.hpp).
#include "path_counts.hpp"

namespace efa::counts {

std::atomic<uint64_t> g_counts[kNumCounts];
std::atomic<bool> g_shared{false};

} // namespace efa::counts
