// efa::MrCache in a child of fork(): the child inherits the queue of
// invalidated ranges as the parent's threads left it, its spin flag held
// if one of them was queuing at that instant. The child's frees must not
// wait on it (a Python dataloader worker freeing memory would hang).
// And where the process asked rdma-core for fork safety (registered pages
// absent in the child), the caches drop their idle entries before a fork.
#include "mr_cache_fake_backend.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

using namespace mr_cache_test;

TEST_F(MrCacheTest, AForkChildsFreesNeverWaitOnTheParentsQueue) {
    MrCache cache(backend, 8);
    std::atomic<bool> stop{false};
    // A parent thread queuing ranges all the time: at most forks it holds the flag.
    std::thread freer([&] {
        while (!stop.load(std::memory_order_relaxed)) {
            cache.invalidate(mem.page(0), kPage);
        }
    });
    int hung = 0, failed = 0;
    for (int i = 0; i < 50 && 0 == hung; ++i) {
        const pid_t pid = fork();
        ASSERT_NE(-1, pid);
        if (0 == pid) {
            alarm(5); // (a child that spins is killed: SIGALRM)
            for (int k = 0; k < 1000; ++k) {
                cache.invalidate(mem.page(1), kPage);
            }
            _exit(0);
        }
        int status = 0;
        ASSERT_EQ(pid, waitpid(pid, &status, 0));
        if (WIFSIGNALED(status) && SIGALRM == WTERMSIG(status)) {
            ++hung;
        } else if (!WIFEXITED(status) || 0 != WEXITSTATUS(status)) {
            ++failed;
        }
    }
    stop.store(true);
    freer.join();
    EXPECT_EQ(0, hung) << "a child spun on the flag its parent's thread held at the fork";
    EXPECT_EQ(0, failed);
    // The parent's own queue still works after the forks.
    MrEntry *e = acquire(cache, mem.page(2), kPage, 0);
    cache.invalidate(mem.page(2), kPage);
    cache.release(e);
    EXPECT_EQ(backend.outstanding(), cache.cached_entries());
}

// The environment variable for the test's length only.
class ForkSafeEnv {
  public:
    explicit ForkSafeEnv(const char *value) {
        const char *old = getenv("RDMAV_FORK_SAFE");
        had_ = old != nullptr;
        if (had_) {
            old_ = old;
        }
        if (value) {
            setenv("RDMAV_FORK_SAFE", value, 1);
        } else {
            unsetenv("RDMAV_FORK_SAFE");
        }
    }
    ~ForkSafeEnv() {
        if (had_) {
            setenv("RDMAV_FORK_SAFE", old_.c_str(), 1);
        } else {
            unsetenv("RDMAV_FORK_SAFE");
        }
    }

  private:
    bool had_ = false;
    std::string old_;
};

void fork_and_wait() {
    const pid_t pid = fork();
    ASSERT_NE(-1, pid);
    if (0 == pid) {
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
}

TEST_F(MrCacheTest, IdleEntriesGoBeforeAForkOnlyWhereForkSafetyWasAsked) {
    MrCache cache(backend, 8);
    MrEntry *idle = acquire(cache, mem.page(0), kPage, 0);
    MrEntry *held = acquire(cache, mem.page(2), kPage, 0);
    cache.release(idle);
    ASSERT_EQ(2u, cache.cached_entries());
    {
        ForkSafeEnv env(nullptr); // (registered pages are copied at fork)
        fork_and_wait();
        EXPECT_EQ(2u, cache.cached_entries()) << "dropped without fork safety asked";
    }
    {
        ForkSafeEnv env("0");
        fork_and_wait();
        EXPECT_EQ(2u, cache.cached_entries()) << "dropped with fork safety off";
    }
    {
        ForkSafeEnv env("1");
        const uint64_t before = backend.deregs();
        fork_and_wait();
        EXPECT_EQ(before + 1, backend.deregs()) << "the idle entry stayed registered";
        EXPECT_EQ(1u, cache.cached_entries()); // the held one stays
        EXPECT_TRUE(cache.findable(held));
    }
    cache.release(held);
}

} // namespace
