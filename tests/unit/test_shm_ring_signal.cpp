// An inbox reserved whole (reserve_all) while a fast timer's signal keeps
// arriving, as a sampling profiler's does: tmpfs ends a reservation that
// a signal interrupts with EINTR, whatever SA_RESTART says, and undoes it.
// The inbox must be made all the same.  (Whether a kernel interrupts the
// reservation depends on its version: the 6.18 kernel of the machine this
// was written on did not, and there the test passes with or without the
// retry; where one does, it fails without it.)
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include "shm_ring.hpp"

namespace {

std::atomic<unsigned> g_ticks{0};

void tick(int) {
    g_ticks.fetch_add(1, std::memory_order_relaxed);
}

// A timer every 50 us while it lives (SIGALRM, SA_RESTART).
class FastTimer {
  public:
    FastTimer() {
        struct sigaction sa = {};
        sa.sa_handler = tick;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGALRM, &sa, &old_);
        const itimerval every = {{0, 50}, {0, 50}};
        setitimer(ITIMER_REAL, &every, nullptr);
    }
    ~FastTimer() {
        const itimerval off = {};
        setitimer(ITIMER_REAL, &off, nullptr);
        sigaction(SIGALRM, &old_, nullptr);
    }

  private:
    struct sigaction old_ = {};
};

} // namespace

TEST(ShmRingSignal, AWholeReservationGoesThroughAFastTimersSignals) {
    efa::shm::Geometry g;
    g.nrings = 96; // 96 local ranks of 64 slots of 8 KiB: 48 MiB
    g.nslots = 64;
    g.slot_size = 8192;
    const std::string path = "/dev/shm/efa_shm_ring_signal." + std::to_string(getpid());
    FastTimer timer;
    for (int i = 0; i < 4; ++i) {
        int err = 0;
        auto in = efa::shm::Inbox::create(path, g, err, true);
        ASSERT_NE(in, nullptr) << "try " << i << ": error " << err << " after " << g_ticks.load()
                               << " ticks";
        EXPECT_EQ(err, 0);
    }
    EXPECT_GT(g_ticks.load(), 0u); // the signals did arrive meanwhile
}
