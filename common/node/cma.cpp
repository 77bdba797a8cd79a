// Single copy between processes of one node (efa_cma.h has the contract):
// the copy loop and the cookie check, for the matching engine (large
// messages) and btl_efa (put and get), and the watch on a peer's exit that
// the same check makes sound (both components' sweeps). Defined in C (the
// C seam's rule, docs/DESIGN.md): the engine calls the same names.
#include <cerrno>
#include <ctime>
#include <mutex>

#include <atomic>

#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "efa_cma.h"
#include "path_counts.hpp"

// glibc names it from 2.32 on, the kernel has it from 5.3 (the number is
// the unified table's on x86_64 and aarch64; fd_from_process.cpp's too).
#if !defined(SYS_pidfd_open) && (defined(__x86_64__) || defined(__aarch64__))
#define SYS_pidfd_open 434
#endif

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

namespace {
// Watches open in this process (both components'): each holds a
// descriptor, and a node of 192 processes would give each process 191.
// At most a quarter of the descriptors the process may open (Debian's
// default soft limit, 1024: 256), so that the program's own files never
// run short for them; peers past that are not watched.
std::atomic<int> g_exit_watches{0};

bool exit_watch_room() {
    rlimit lim{};
    const rlim_t cap = 0 != getrlimit(RLIMIT_NOFILE, &lim) ? 256
                       : RLIM_INFINITY == lim.rlim_cur     ? 1024
                                                           : lim.rlim_cur / 4;
    return static_cast<rlim_t>(g_exit_watches.load(std::memory_order_relaxed)) < cap;
}
} // namespace

int efa_cma_exit_watch(uint32_t pid, uint64_t cookie_addr, uint64_t cookie) {
#ifdef SYS_pidfd_open
    if (0 == pid || static_cast<pid_t>(pid) == getpid() || !exit_watch_room()) {
        return -1;
    }
    // (close-on-exec: pidfd_open sets it)
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
    if (fd < 0) {
        return -1; // ENOSYS, ESRCH (another namespace's pid, or gone), EMFILE
    }
    // The descriptor names the process that had pid when it was opened; the
    // read names the one that has it now.  Still there after the read, that
    // process held the pid throughout (a pid is reused only once its
    // process is gone): the cookie read was its own.
    if (0 != efa_cma_verify(pid, cookie_addr, cookie) || efa_cma_exited(fd)) {
        close(fd);
        return -1;
    }
    g_exit_watches.fetch_add(1, std::memory_order_relaxed);
    return fd;
#else
    (void)pid, (void)cookie_addr, (void)cookie;
    return -1;
#endif
}

bool efa_cma_exited(int fd) {
    if (fd < 0) {
        return false;
    }
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0 && 0 != (p.revents & (POLLIN | POLLHUP));
}

void efa_cma_exit_unwatch(int fd) {
    if (fd >= 0) {
        close(fd);
        g_exit_watches.fetch_sub(1, std::memory_order_relaxed);
    }
}

} // extern "C"
