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
#include <vector>
#include <utility>
#include <optional>

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

// The fork-safety variables for the test's length only: the one named
// set to 'value', the others unset (a host may have any of them set).
class ForkSafeEnv {
  public:
    ForkSafeEnv(const char *name, const char *value) {
        for (const char *n : kNames) {
            const char *old = getenv(n);
            saved_.emplace_back(n, old ? std::optional<std::string>(old) : std::nullopt);
            unsetenv(n);
        }
        if (name) {
            setenv(name, value, 1);
        }
    }
    ~ForkSafeEnv() {
        for (const auto &[n, old] : saved_) {
            if (old) {
                setenv(n, old->c_str(), 1);
            } else {
                unsetenv(n);
            }
        }
    }

  private:
    static constexpr const char *kNames[] = {"FI_EFA_FORK_SAFE", "RDMAV_FORK_SAFE",
                                             "IBV_FORK_SAFE"};
    std::vector<std::pair<const char *, std::optional<std::string>>> saved_;
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
    MrEntry *held = acquire(cache, mem.page(2), kPage, 0);
    // Not asked: none set (pages are copied at fork), or libfabric's own
    // variable false.
    for (const char *off : {"", "0", "no", "off"}) {
        ForkSafeEnv env(*off ? "FI_EFA_FORK_SAFE" : nullptr, off);
        cache.release(acquire(cache, mem.page(0), kPage, 0)); // one idle entry
        fork_and_wait();
        EXPECT_EQ(2u, cache.cached_entries()) << "dropped with FI_EFA_FORK_SAFE '" << off << "'";
    }
    // Asked: rdma-core's variables set, whatever their value, or
    // libfabric's true.
    const std::pair<const char *, const char *> on[] = {{"RDMAV_FORK_SAFE", "1"},
                                                        {"RDMAV_FORK_SAFE", "0"},
                                                        {"IBV_FORK_SAFE", ""},
                                                        {"FI_EFA_FORK_SAFE", "1"},
                                                        {"FI_EFA_FORK_SAFE", "yes"}};
    for (const auto &[name, value] : on) {
        ForkSafeEnv env(name, value);
        cache.release(acquire(cache, mem.page(0), kPage, 0)); // idle again
        ASSERT_EQ(2u, cache.cached_entries());
        const uint64_t before = backend.deregs();
        fork_and_wait();
        EXPECT_EQ(before + 1, backend.deregs())
            << name << "=" << value << ": the idle entry stayed registered";
        EXPECT_EQ(1u, cache.cached_entries()); // the held one stays
        EXPECT_TRUE(cache.findable(held));
    }
    cache.release(held);
}

// A child that forks again drops nothing: its caches are its parent's,
// whose mutexes a parent thread may have held at the first fork.
TEST_F(MrCacheTest, AForkChildForkingAgainLeavesItsParentsCachesAlone) {
    MrCache cache(backend, 8);
    ForkSafeEnv env("RDMAV_FORK_SAFE", "1");
    const pid_t pid = fork();
    ASSERT_NE(-1, pid);
    if (0 == pid) {
        alarm(5);
        MrEntry *e = nullptr;
        int err = 0;
        e = cache.acquire(mem.page(0), kPage, 0, &err);
        if (!e) {
            _exit(2);
        }
        cache.release(e); // idle in the child's copy
        const pid_t grandchild = fork();
        if (0 == grandchild) {
            _exit(0);
        }
        int status = 0;
        waitpid(grandchild, &status, 0);
        _exit(1u == cache.cached_entries() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT_TRUE(WIFEXITED(status)) << "the child hung or died";
    EXPECT_EQ(0, WEXITSTATUS(status)) << "the child dropped its parent's entries at its own fork";
}

} // namespace
