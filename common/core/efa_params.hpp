// Range checks for the core's parameters, kept pure so that every bound is
// unit-tested.  The glue reports each problem with opal_show_help and the
// component declines: an absurd value never reaches libfabric.
#pragma once

#include <string>
#include <vector>

#include "efa_core.h"

namespace efa {

struct ParamProblem {
    std::string name;  // parameter name without the framework prefix, e.g. "num_contexts"
    std::string value; // what was given
    std::string allowed;
};

struct ParamLimits {
    static constexpr int kMaxContexts = 16;    // QPs per NIC are scarce (about 256)
    static constexpr int kMaxNicsPerProc = 64; // p5.48xlarge, the largest, has 32
    static constexpr int kMinStripe = 4096, kMaxStripe = 1 << 30;
    static constexpr int kMaxRailRetry = 3600;
    static constexpr int kMaxQueueSize = 1 << 20;
    static constexpr int kMaxMrCache = 1 << 20;
    // The completions one CQ read takes, into an array on the stack of the
    // progress call (48 bytes each); more per call buys nothing measurable.
    static constexpr int kMaxProgressBatch = 64;
    static constexpr int kMaxRnrRetry = 7;              // the device's field is 3 bits wide
    static constexpr int kMaxPeerTimeout = 86400;       // seconds
    static constexpr int kMaxNetPollInterval = 1000000; // microseconds
    static constexpr int kMinDirectMtu = 1024;          // room for the engine's headers
    static constexpr int kMaxDirectMtu = 65536;         // the untagged receive buffers' size
    static constexpr int kDefaultDirectMtu = 8192;      // an EFA device's MTU is 8928 bytes
};

std::vector<ParamProblem> validate_params(const efa_core_params_t &p);

} // namespace efa
