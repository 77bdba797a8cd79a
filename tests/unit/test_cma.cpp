// The single-copy module (common/node/cma.cpp) both components use: the
// copy loop in both directions, the cookie check that decides whether a
// published pid is the process that published it, and the errors a caller
// falls back on.  Against this process itself (process_vm_readv on one's
// own pid needs no privilege) and a child that has exited.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <sys/wait.h>
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
