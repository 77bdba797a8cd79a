// What the matching engine's unit tests (test_engine.cpp,
// test_engine_partner.cpp, test_engine_forged_frames.cpp, test_engine_net.cpp)
// share: a request that counts its completions, and message bytes that differ
// by position and seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "efa_engine.h"

namespace engine_test {

struct Req {
    efa_engine_req_t on{};
    int completions = 0;
};

inline void on_complete(efa_engine_req_t *r) {
    reinterpret_cast<Req *>(reinterpret_cast<char *>(r) - offsetof(Req, on))->completions++;
}

inline std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
    }
    return v;
}

} // namespace engine_test
