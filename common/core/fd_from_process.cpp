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
