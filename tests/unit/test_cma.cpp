// The single-copy module (common/node/cma.cpp) both components use: the
// copy loop in both directions, the cookie check that decides whether a
// published pid is the process that published it, and the errors a caller
// falls back on.  Against this process itself (process_vm_readv on one's
// own pid needs no privilege) and a child that has exited.  The watch on a
// peer's exit (efa_cma_exit_watch) that the same check vouches for: a
// child's, which sees it die; none for a pid the cookie does not prove.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "efa_cma.h"

namespace {

uint32_t self() {
    return static_cast<uint32_t>(getpid());
}

uint64_t addr_of(const void *p) {
    return reinterpret_cast<uintptr_t>(p);
}

} // namespace

TEST(Cma, CopiesBothWays) {
    ASSERT_TRUE(efa_cma_built());
    std::vector<uint8_t> src(100000), dst(100000, 0);
    for (size_t i = 0; i < src.size(); ++i) {
        src[i] = static_cast<uint8_t>(i * 7);
    }
    size_t moved = 0;
    EXPECT_EQ(0, efa_cma_copy(self(), false, dst.data(), addr_of(src.data()), src.size(), &moved));
    EXPECT_EQ(src.size(), moved);
    EXPECT_EQ(src, dst);
    std::vector<uint8_t> back(src.size(), 0);
    EXPECT_EQ(0, efa_cma_copy(self(), true, dst.data(), addr_of(back.data()), dst.size(), nullptr));
    EXPECT_EQ(src, back);
}

// A remote range that runs into unmapped memory: EFAULT, and how far it got.
TEST(Cma, UnmappedRemoteIsEfaultWithTheBytesMoved) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    auto *m = static_cast<uint8_t *>(
        mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(MAP_FAILED, static_cast<void *>(m));
    memset(m, 0x5a, page);
    ASSERT_EQ(0, munmap(m + page, page)); // the second page is gone
    std::vector<uint8_t> dst(2 * page);
    size_t moved = 0;
    EXPECT_EQ(EFAULT, efa_cma_copy(self(), false, dst.data(), addr_of(m), 2 * page, &moved));
    EXPECT_EQ(page, moved);
    EXPECT_EQ(0x5a, dst[page - 1]);
    munmap(m, page);
}

TEST(Cma, CookieIsMadeOnceAndVerifies) {
    uint64_t a1 = 0, a2 = 0;
    const uint64_t c1 = efa_cma_cookie(&a1);
    const uint64_t c2 = efa_cma_cookie(&a2);
    EXPECT_NE(0u, c1);
    EXPECT_EQ(c1, c2);
    EXPECT_EQ(a1, a2);
    EXPECT_EQ(0, efa_cma_verify(self(), a1, c1));
    // Another value at that address: the pid is another process.
    EXPECT_EQ(EFA_CMA_OTHER_PROCESS, efa_cma_verify(self(), a1, c1 ^ 1));
}

// A pid with no process behind it (a child that has exited and been
// reaped): the read fails with ESRCH, which the callers report and fall
// back on.
TEST(Cma, GonePidFailsTheCheck) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (0 == child) {
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(child, waitpid(child, &status, 0));
    uint64_t addr = 0;
    const uint64_t c = efa_cma_cookie(&addr);
    EXPECT_EQ(ESRCH, efa_cma_verify(static_cast<uint32_t>(child), addr, c));
}

namespace {

// A child that waits for its end (it shares this process's cookie: it is
// made after the cookie, at the same address).
pid_t pausing_child() {
    (void)efa_cma_cookie(nullptr);
    const pid_t child = fork();
    if (0 == child) {
        for (;;) {
            pause();
        }
    }
    return child;
}

bool pidfd_works() {
#ifdef SYS_pidfd_open
    const long fd = syscall(SYS_pidfd_open, getpid(), 0);
    if (fd >= 0) {
        close(static_cast<int>(fd));
        return true;
    }
#endif
    return false;
}

} // namespace

// The watch sees the child die (SIGKILL, then reaped: the zombie's exit is
// seen already), and never before.
TEST(CmaExitWatch, SeesAProvenChildDie) {
    if (!pidfd_works()) {
        GTEST_SKIP() << "no pidfd_open: nothing is ever watched";
    }
    uint64_t addr = 0;
    const uint64_t c = efa_cma_cookie(&addr);
    const pid_t child = pausing_child();
    ASSERT_GT(child, 0);
    const int fd = efa_cma_exit_watch(static_cast<uint32_t>(child), addr, c);
    ASSERT_GE(fd, 0);
    EXPECT_FALSE(efa_cma_exited(fd));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(efa_cma_exited(fd)) << "alive, but seen as exited";
    ASSERT_EQ(0, kill(child, SIGKILL));
    bool exited = false;
    for (int i = 0; i < 2000 && !exited; ++i) {
        exited = efa_cma_exited(fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(exited);
    int status = 0;
    ASSERT_EQ(child, waitpid(child, &status, 0));
    EXPECT_TRUE(efa_cma_exited(fd)) << "reaped, no longer seen as exited";
    efa_cma_exit_unwatch(fd);
}

// No watch where the pid is not proven to be the card's process: another
// cookie at that address (another process, or a pid of another pid
// namespace), a pid that is gone, none or this process's own.
TEST(CmaExitWatch, NoneForAPidNotProven) {
    uint64_t addr = 0;
    const uint64_t c = efa_cma_cookie(&addr);
    const pid_t child = pausing_child();
    ASSERT_GT(child, 0);
    EXPECT_EQ(-1, efa_cma_exit_watch(static_cast<uint32_t>(child), addr, c ^ 1));
    kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(child, waitpid(child, &status, 0));
    EXPECT_EQ(-1, efa_cma_exit_watch(static_cast<uint32_t>(child), addr, c));
    EXPECT_EQ(-1, efa_cma_exit_watch(0, addr, c));
    EXPECT_EQ(-1, efa_cma_exit_watch(self(), addr, c));
    EXPECT_FALSE(efa_cma_exited(-1));
    efa_cma_exit_unwatch(-1); // (nothing)
}
