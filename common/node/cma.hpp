// Single copy between processes of one node (efa_cma.h has the contract):
// the copy loop and the cookie check, for the on-node engine (large
// messages) and, through the C seam, btl_efa (put and get).
#pragma once

#include <cstddef>
#include <cstdint>

namespace efa::cma {

bool built();
int copy(uint32_t pid, bool write, void *local, uint64_t remote, size_t len, size_t *moved);
int verify(uint32_t pid, uint64_t cookie_addr, uint64_t cookie);
uint64_t cookie(uint64_t *addr);

} // namespace efa::cma
