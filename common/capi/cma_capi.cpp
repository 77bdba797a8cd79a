// The C interface of the single-copy module (efa_cma.h).
#include "efa_cma.h"

#include "cma.hpp"

extern "C" {

bool efa_cma_built(void) {
    return efa::cma::built();
}

int efa_cma_copy(uint32_t pid, bool write, void *local, uint64_t remote, size_t len,
                 size_t *moved) {
    return efa::cma::copy(pid, write, local, remote, len, moved);
}

int efa_cma_verify(uint32_t pid, uint64_t cookie_addr, uint64_t cookie) {
    return efa::cma::verify(pid, cookie_addr, cookie);
}

uint64_t efa_cma_cookie(uint64_t *addr) {
    return efa::cma::cookie(addr);
}

} // extern "C"
