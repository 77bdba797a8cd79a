// What the user reads when the NIC refuses memory (locked_memory.cpp): the
// locked-memory limit in [open-failed] and, once per process, in
// [registration-refused] when the registration cache cannot register a
// buffer for room, even after letting its idle registrations go.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "locked_memory.hpp"
#include "mr_cache_fake_backend.hpp"

namespace {

struct Shown {
    std::string topic, a1, a2, a3;
};
std::vector<Shown> *g_shown;

void capture(const char *topic, const char *a1, const char *a2, const char *a3) {
    g_shown->push_back({topic, a1, a2, a3});
}

struct HelpCapture {
    std::vector<Shown> shown;
    efa::Reporter rep;
    HelpCapture() {
        g_shown = &shown;
        rep.show_help = capture;
    }
    ~HelpCapture() { g_shown = nullptr; }
};

efa::LockedMemory finite(uint64_t soft, uint64_t hard) {
    efa::LockedMemory l;
    l.known = true;
    l.soft = soft;
    l.hard = hard;
    return l;
}

} // namespace

TEST(LockedMemory, BytesReadAsTheirUnit) {
    EXPECT_EQ(efa::bytes_text(100), "100 B");
    EXPECT_EQ(efa::bytes_text(64 << 10), "64 KiB");
    EXPECT_EQ(efa::bytes_text(8 << 20), "8 MiB");
    EXPECT_EQ(efa::bytes_text(3ull << 29), "1.5 GiB");
    EXPECT_EQ(efa::bytes_text(12345), "12.1 KiB");
}

TEST(LockedMemory, UnlimitedSaysSoAlone) {
    efa::LockedMemory l;
    l.known = l.unlimited = true;
    l.soft = l.hard = UINT64_MAX;
    EXPECT_EQ(efa::locked_memory_text(l), "unlimited");
}

TEST(LockedMemory, AFiniteLimitSaysBothLimitsAndHowToRaiseThem) {
    const std::string t = efa::locked_memory_text(finite(64 << 10, 8 << 20));
    EXPECT_EQ(t.rfind("64 KiB (ulimit -l; hard limit 8 MiB)", 0), 0u) << t;
    EXPECT_NE(t.find("ulimit -l unlimited"), std::string::npos) << t;
    EXPECT_NE(t.find("docker run --ulimit memlock=-1"), std::string::npos) << t;
    EXPECT_NE(efa::locked_memory_text(finite(64 << 10, UINT64_MAX)).find("hard limit unlimited"),
              std::string::npos);
}

TEST(LockedMemory, ReadsThisProcesssLimit) {
    rlimit before{};
    ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &before), 0);
    // A soft limit below the hard one can always be set, and set back.
    const rlim_t want = before.rlim_max == RLIM_INFINITY || before.rlim_max > (64 << 10)
                            ? rlim_t{64 << 10}
                            : before.rlim_max;
    rlimit low = before;
    low.rlim_cur = want;
    ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &low), 0);
    const efa::LockedMemory l = efa::locked_memory();
    ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &before), 0);
    EXPECT_TRUE(l.known);
    EXPECT_FALSE(l.unlimited);
    EXPECT_EQ(l.soft, static_cast<uint64_t>(want));
    EXPECT_EQ(l.hard, before.rlim_max == RLIM_INFINITY ? UINT64_MAX
                                                       : static_cast<uint64_t>(before.rlim_max));
}

TEST(LockedMemory, OnlyRoomFailuresMayBeTheLimit) {
    EXPECT_TRUE(efa::may_be_locked_memory(-FI_ENOMEM));
    EXPECT_TRUE(efa::may_be_locked_memory(FI_EAGAIN));
    EXPECT_FALSE(efa::may_be_locked_memory(-FI_EINVAL));
    EXPECT_FALSE(efa::may_be_locked_memory(-FI_EACCES));
    EXPECT_FALSE(efa::may_be_locked_memory(0));
}

TEST(LockedMemory, OpenFailedNamesTheCallProviderNicAndLimit) {
    HelpCapture h;
    fi_info *info = fi_allocinfo();
    ASSERT_NE(info, nullptr);
    info->fabric_attr->prov_name = strdup("efa");
    info->domain_attr->name = strdup("rdmap16s27-rdm");
    efa::say_open_failed(h.rep, "fi_endpoint", -FI_ENOMEM, info, finite(8 << 20, 8 << 20));
    fi_freeinfo(info);
    ASSERT_EQ(h.shown.size(), 1u);
    EXPECT_EQ(h.shown[0].topic, "open-failed");
    EXPECT_EQ(h.shown[0].a1, "fi_endpoint (provider efa, NIC rdmap16s27-rdm)");
    EXPECT_EQ(h.shown[0].a2, fi_strerror(FI_ENOMEM));
    EXPECT_EQ(h.shown[0].a3.rfind("8 MiB (ulimit -l", 0), 0u) << h.shown[0].a3;
}

// The cache lets its idle registrations go and tries once more; when that
// fails too, the help is shown once, whatever fails after it.
TEST(LockedMemory, ARegistrationRefusedForRoomIsExplainedOnce) {
    mr_cache_test::FakeBackend backend;
    backend.capacity = 1; // the second live registration fails with ENOMEM
    efa::MrCacheConfig cfg;
    efa::MrCache cache(backend, cfg);
    std::vector<char> a(3 * mr_cache_test::kPage), b(3 * mr_cache_test::kPage);
    int err = 0;
    efa::MrEntry *held = cache.acquire(a.data(), a.size(), mr_cache_test::kRead, &err);
    ASSERT_NE(held, nullptr);
    HelpCapture h;
    std::atomic<bool> said{false};
    for (int i = 0; i < 3; ++i) {
        err = 0;
        ASSERT_EQ(cache.acquire(b.data(), b.size(), mr_cache_test::kRead, &err), nullptr);
        ASSERT_EQ(err, -ENOMEM);
        EXPECT_EQ(
            efa::say_registration_refused(h.rep, said, b.size(), err, finite(64 << 10, 64 << 10)),
            i == 0);
    }
    cache.release(held);
    ASSERT_EQ(h.shown.size(), 1u);
    EXPECT_EQ(h.shown[0].topic, "registration-refused");
    EXPECT_EQ(h.shown[0].a1, efa::bytes_text(b.size()));
    EXPECT_EQ(h.shown[0].a2, std::string(fi_strerror(FI_ENOMEM)) + " (12)");
    EXPECT_NE(h.shown[0].a3.find("64 KiB"), std::string::npos);
}

TEST(LockedMemory, OtherRegistrationFailuresAreNotBlamedOnTheLimit) {
    HelpCapture h;
    std::atomic<bool> said{false};
    EXPECT_FALSE(efa::say_registration_refused(h.rep, said, 4096, -FI_EINVAL, finite(1, 1)));
    EXPECT_FALSE(efa::say_registration_refused(h.rep, said, 4096, -FI_EFAULT, finite(1, 1)));
    EXPECT_TRUE(h.shown.empty());
    EXPECT_FALSE(said.load()) << "a later refusal for room must still be explained";
}
