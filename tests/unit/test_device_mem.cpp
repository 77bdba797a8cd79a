// The device-memory seam (efa_device.h) and the fake device of the tests:
// its memory is device memory, the CPU cannot touch it, only its copy
// moves the bytes, and freed memory is no longer the device's.
#include <gtest/gtest.h>

#include <csignal>
#include <csetjmp>
#include <cstring>
#include <unistd.h>
#include <vector>

#include <rdma/fi_errno.h>

#include "efa_device.h"

namespace {

sigjmp_buf g_jump;
void on_segv(int) {
    siglongjmp(g_jump, 1);
}

// Does writing one byte at p fault?
bool write_faults(void *p) {
    struct sigaction sa {
    }, old{};
    sa.sa_handler = on_segv;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old);
    bool faulted = false;
    if (0 == sigsetjmp(g_jump, 1)) {
        *static_cast<volatile char *>(p) = 1;
    } else {
        faulted = true;
    }
    sigaction(SIGSEGV, &old, nullptr);
    return faulted;
}

struct Installed {
    Installed() { efa_device_install(efa_fake_device_ops()); }
    ~Installed() { efa_device_install(nullptr); }
};

} // namespace

TEST(DeviceMem, NoBackendNothingIsDeviceMemory) {
    efa_device_install(nullptr);
    EXPECT_FALSE(efa_device_on);
    EXPECT_EQ(nullptr, efa_device_name());
    void *d = efa_fake_device_alloc(100);
    ASSERT_NE(nullptr, d);
    EXPECT_FALSE(efa_device_check(d, 100)); // nobody asks the fake
    char h[4];
    EXPECT_EQ(-FI_ENOSYS, efa_device_copy(h, d, sizeof(h)));
    efa_fake_device_free(d);
}

TEST(DeviceMem, FakeMemoryIsDeviceMemoryTheCpuCannotTouch) {
    Installed fake;
    EXPECT_TRUE(efa_device_on);
    EXPECT_STREQ("fake", efa_device_name());
    const size_t before = efa_fake_device_live();
    void *d = efa_fake_device_alloc(10000);
    ASSERT_NE(nullptr, d);
    EXPECT_EQ(before + 1, efa_fake_device_live());
    EXPECT_TRUE(efa_device_check(d, 10000));
    EXPECT_TRUE(efa_device_check(static_cast<char *>(d) + 9999, 1));
    EXPECT_TRUE(write_faults(d));
    EXPECT_TRUE(write_faults(static_cast<char *>(d) + 5000));
    std::vector<char> host(10000);
    EXPECT_FALSE(efa_device_check(host.data(), host.size()));
    EXPECT_FALSE(efa_device_check(nullptr, 1));
    efa_fake_device_free(d);
    EXPECT_EQ(before, efa_fake_device_live());
}

TEST(DeviceMem, CopiesBothWaysAndWithinTheDevice) {
    Installed fake;
    const size_t n = 3 * 4096 + 17;
    void *a = efa_fake_device_alloc(n);
    void *b = efa_fake_device_alloc(n);
    ASSERT_TRUE(a && b);
    std::vector<unsigned char> in(n), out(n, 0);
    for (size_t i = 0; i < n; ++i) {
        in[i] = static_cast<unsigned char>(i * 7 + 3);
    }
    ASSERT_EQ(0, efa_device_copy(a, in.data(), n));  // host to device
    ASSERT_EQ(0, efa_device_copy(b, a, n));          // device to device
    ASSERT_EQ(0, efa_device_copy(out.data(), b, n)); // device to host
    EXPECT_EQ(in, out);
    // An offset inside an allocation.
    std::vector<unsigned char> part(100, 0);
    ASSERT_EQ(0, efa_device_copy(part.data(), static_cast<char *>(a) + 4000, part.size()));
    EXPECT_EQ(0, memcmp(part.data(), in.data() + 4000, part.size()));
    efa_fake_device_free(a);
    efa_fake_device_free(b);
}

TEST(DeviceMem, ARangeRunningPastAnAllocationIsNotItsMemory) {
    Installed fake;
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void *d = efa_fake_device_alloc(page); // one page exactly
    ASSERT_NE(nullptr, d);
    EXPECT_TRUE(efa_device_check(d, page));
    EXPECT_FALSE(efa_device_check(d, page + 1));
    EXPECT_FALSE(efa_device_check(static_cast<char *>(d) - 1, 2));
    // A copy running past it is refused, as a device's would be.
    std::vector<char> host(page + 1);
    EXPECT_EQ(-FI_EINVAL, efa_device_copy(host.data(), d, page + 1));
    EXPECT_EQ(-FI_EINVAL, efa_device_copy(d, host.data(), page + 1));
    EXPECT_EQ(0, efa_device_copy(host.data(), d, page));
    efa_fake_device_free(d);
}

TEST(DeviceMem, FreedMemoryIsNoLongerTheDevices) {
    Installed fake;
    void *d = efa_fake_device_alloc(64);
    ASSERT_NE(nullptr, d);
    efa_fake_device_free(d);
    EXPECT_FALSE(efa_device_check(d, 64));
    efa_fake_device_free(d); // a second free of the same address: nothing happens
    efa_device_release(nullptr);
}

TEST(DeviceMem, ReleaseGivesFakeMemoryBack) {
    Installed fake;
    const size_t before = efa_fake_device_live();
    void *d = efa_fake_device_alloc(64);
    ASSERT_EQ(before + 1, efa_fake_device_live());
    efa_device_release(d);
    EXPECT_EQ(before, efa_fake_device_live());
}
