// Single copy between processes of one node (efa_cma.h has the contract):
// the copy loop and the cookie check, for the matching engine (large
// messages) and btl_efa (put and get). Defined in C (the C seam's rule,
// docs/DESIGN.md): the engine calls the same names.
#include <cerrno>
#include <ctime>
#include <mutex>

#include <sys/uio.h>
#include <unistd.h>

#include "efa_cma.h"
#include "path_counts.hpp"

namespace {

// Read by peers through process_vm_readv: one per process, whichever
// component published it.
volatile uint64_t g_cookie = 0;
std::once_flag g_cookie_once;

// A value no other process is likely to hold at the same address.
uint64_t make_cookie() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (static_cast<uint64_t>(getpid()) << 32) ^ static_cast<uint64_t>(ts.tv_nsec) ^
                 (static_cast<uint64_t>(ts.tv_sec) << 16) ^ reinterpret_cast<uintptr_t>(&ts);
    x += 0x9e3779b97f4a7c15ull; // splitmix64 finaliser: spread the bits
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return (x ^ (x >> 31)) | 1;
}

} // namespace

extern "C" {

bool efa_cma_built(void) {
#ifdef EFA_HAVE_CMA
    return true;
#else
    return false;
#endif
}

} // extern "C"

namespace {
// The copy itself; efa_cma_copy counts it (MPI_T), efa_cma_verify's look at
// a peer's cookie is no transfer and is not counted.
int copy(uint32_t pid, bool write, void *local, uint64_t remote, size_t len, size_t *moved) {
    size_t done = 0;
    int err = 0;
#ifdef EFA_HAVE_CMA
    while (done < len) {
        iovec l{static_cast<uint8_t *>(local) + done, len - done};
        iovec r{reinterpret_cast<void *>(static_cast<uintptr_t>(remote + done)), len - done};
        const pid_t p = static_cast<pid_t>(pid);
        ssize_t n =
            write ? process_vm_writev(p, &l, 1, &r, 1, 0) : process_vm_readv(p, &l, 1, &r, 1, 0);
        if (n < 0) {
            if (EINTR == errno) {
                continue;
            }
            err = errno;
            break;
        }
        if (0 == n) { // no progress: nothing more is mapped there
            err = EFAULT;
            break;
        }
        done += static_cast<size_t>(n);
    }
#else
    (void)pid, (void)write, (void)local, (void)remote;
    err = len ? ENOSYS : 0;
#endif
    *moved = done;
    return err;
}
} // namespace

extern "C" {

int efa_cma_copy(uint32_t pid, bool write, void *local, uint64_t remote, size_t len,
                 size_t *moved) {
    size_t done = 0;
    const int err = copy(pid, write, local, remote, len, &done);
    if (done) {
        efa::counts::add_msg(efa::counts::kSingleCopies, done);
    }
    if (moved) {
        *moved = done;
    }
    return err;
}

int efa_cma_verify(uint32_t pid, uint64_t cookie_addr, uint64_t cookie) {
    uint64_t seen = 0;
    size_t done = 0;
    const int err = copy(pid, false, &seen, cookie_addr, sizeof(seen), &done);
    if (err) {
        return err;
    }
    return seen == cookie ? 0 : EFA_CMA_OTHER_PROCESS;
}

uint64_t efa_cma_cookie(uint64_t *addr) {
    std::call_once(g_cookie_once, [] { g_cookie = make_cookie(); });
    if (addr) {
        *addr = reinterpret_cast<uintptr_t>(&g_cookie);
    }
    return g_cookie;
}

} // extern "C"
