// The fake device's pinned host memory (fake_host_pin.hpp).
#include "fake_host_pin.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

#include <rdma/fi_errno.h>

#include "efa_device.h"

namespace {
std::mutex g_lock;
std::map<void *, size_t> g_pinned; // under g_lock
std::atomic<uint64_t> g_pins{0}, g_bad_unpins{0};
} // namespace

namespace efa::fake {

int host_register(void *buf, size_t len) {
    std::lock_guard<std::mutex> guard(g_lock);
    if (nullptr == buf || 0 == len || !g_pinned.emplace(buf, len).second) {
        return -FI_EINVAL; // (CUDA: already registered)
    }
    g_pins.fetch_add(1);
    return 0;
}

int host_unregister(void *buf) {
    std::lock_guard<std::mutex> guard(g_lock);
    if (0 == g_pinned.erase(buf)) {
        g_bad_unpins.fetch_add(1);
        return -FI_EINVAL;
    }
    return 0;
}

} // namespace efa::fake

extern "C" {

size_t efa_fake_device_pinned(void) {
    std::lock_guard<std::mutex> guard(g_lock);
    return g_pinned.size();
}

uint64_t efa_fake_device_pins(void) {
    return g_pins.load();
}

uint64_t efa_fake_device_bad_unpins(void) {
    return g_bad_unpins.load();
}

} // extern "C"
