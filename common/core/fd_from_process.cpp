// A descriptor of another process of the node, duplicated into this one
// (efa_device.h): how a device allocation exported as a file descriptor
// (CUDA VMM memory) reaches the peer that maps it, without a socket
// between the two.  pidfd_getfd asks the permission process_vm_readv
// asks (ptrace's attach check), so it works wherever single copy does.
#include "efa_device.h"

#include <cerrno>

#include <sys/syscall.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

// glibc names these calls from 2.32 on; the kernel has had them since 5.6
// whatever the C library it runs under (Amazon Linux 2, RHEL 8 and Ubuntu
// 20.04 build with an older glibc and run 5.10 or later).  Numbered here
// where the number is the same on every such machine (the unified table of
// x86_64 and aarch64); a kernel without them answers ENOSYS at run time.
#if !defined(SYS_pidfd_open) && (defined(__x86_64__) || defined(__aarch64__))
#define SYS_pidfd_open 434
#endif
#if !defined(SYS_pidfd_getfd) && (defined(__x86_64__) || defined(__aarch64__))
#define SYS_pidfd_getfd 438
#endif

namespace {
// What the caller can tell apart: a kernel without the calls and a process
// out of descriptors are not a refusal (which the rest is: not permitted).
[[maybe_unused]] int fi_code(int err) {
    switch (err) {
    case ENOSYS:
        return -FI_ENOSYS;
    case EMFILE:
    case ENFILE:
        return -FI_EMFILE;
    case ENOMEM:
        return -FI_ENOMEM;
    default:
        return -FI_EACCES;
    }
}
} // namespace

extern "C" int efa_fd_from_process(uint32_t pid, int fd) {
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
    if (0 == pid || fd < 0) {
        return -FI_EINVAL;
    }
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
    if (pidfd < 0) {
        return errno == ESRCH ? -FI_ENOENT : fi_code(errno);
    }
    const int got = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
    const int why = errno;
    close(pidfd);
    if (got < 0) {
        return why == EBADF ? -FI_ENOENT : fi_code(why);
    }
    return got; // (the kernel sets close-on-exec on it)
#else
    (void)pid;
    (void)fd;
    return -FI_ENOSYS;
#endif
}
