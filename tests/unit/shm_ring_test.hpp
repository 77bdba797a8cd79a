// Helpers of the on-node channel's tests (test_shm_ring*.cpp): a file
// name of this process, a geometry, and a poll that collects the frames.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <unistd.h>

#include "shm_ring.hpp"

namespace shm_ring_test {

using efa::shm::Geometry;
using efa::shm::Inbox;

inline std::string temp_path(const char *what) {
    return "/tmp/efa_shm_ring_test." + std::to_string(getpid()) + "." + what;
}

inline Geometry geo(uint32_t nrings, uint32_t nslots, uint32_t slot_size) {
    Geometry g;
    g.nrings = nrings;
    g.nslots = nslots;
    g.slot_size = slot_size;
    return g;
}

struct Frame {
    uint32_t ring;
    std::vector<uint8_t> bytes;
};

inline std::vector<Frame> drain(Inbox &in, int budget = 1000) {
    std::vector<Frame> got;
    in.poll(
        [&](uint32_t r, void *f, size_t len) {
            auto *p = static_cast<uint8_t *>(f);
            got.push_back({r, std::vector<uint8_t>(p, p + len)});
        },
        budget);
    return got;
}

} // namespace shm_ring_test
