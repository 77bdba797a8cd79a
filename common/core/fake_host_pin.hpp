// The fake device's pinning of host memory (efa_device_ops_t's
// host_register): kept in a table, so that the tests see which buffers
// the staging pool pinned and that each is unpinned once.
#pragma once

#include <cstddef>

namespace efa::fake {

int host_register(void *buf, size_t len);
int host_unregister(void *buf);

} // namespace efa::fake
