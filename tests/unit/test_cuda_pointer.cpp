// A CUDA allocation's id and synchronous-copy attribute
// (efa_cuda_buffer_id): the driver's two calls stand in here, answering
// as the driver does for memory of cudaMalloc (both calls succeed), of VMM
// or a stream-ordered pool (the attribute refused, 801
// CUDA_ERROR_NOT_SUPPORTED), and for a pointer that is not CUDA's (no id).
#include <gtest/gtest.h>

#include <cstdint>

#include <rdma/fi_errno.h>

#include "efa_cuda_pointer.h"

namespace {

// What the stand-in driver answers and what it was asked.
struct Driver {
    int get_rc = 0;
    unsigned long long id = 42;
    int set_rc = 0;
    int set_attribute = -1;
    int set_value = -1;
    unsigned long long set_ptr = 0;
} g_driver;

int get(void *data, int attribute, unsigned long long ptr) {
    (void)ptr;
    if (7 != attribute) { // CU_POINTER_ATTRIBUTE_BUFFER_ID alone is asked
        return 1;
    }
    if (0 == g_driver.get_rc) {
        *static_cast<unsigned long long *>(data) = g_driver.id;
    }
    return g_driver.get_rc;
}

int set(const void *value, int attribute, unsigned long long ptr) {
    g_driver.set_attribute = attribute;
    g_driver.set_value = *static_cast<const int *>(value);
    g_driver.set_ptr = ptr;
    return g_driver.set_rc;
}

class CudaBufferId : public ::testing::Test {
  protected:
    void SetUp() override { g_driver = Driver{}; }
    const efa_cuda_pointer_calls_t cu_{get, set};
    alignas(64) char buf_[64] = {};
};

TEST_F(CudaBufferId, CudaMallocMemoryHasItsIdAndSynchronousCopies) {
    uint64_t id = 0;
    bool no_sync = true;
    ASSERT_EQ(efa_cuda_buffer_id(&cu_, buf_, &id, &no_sync), 0);
    EXPECT_EQ(id, 42u);
    EXPECT_FALSE(no_sync);
    // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS switched on, for this pointer.
    EXPECT_EQ(g_driver.set_attribute, 6);
    EXPECT_EQ(g_driver.set_value, 1);
    EXPECT_EQ(g_driver.set_ptr, reinterpret_cast<unsigned long long>(buf_));
}

TEST_F(CudaBufferId, VmmMemoryKeepsItsIdWithoutSynchronousCopies) {
    g_driver.set_rc = 801; // CUDA_ERROR_NOT_SUPPORTED, as for cuMemCreate + cuMemMap
    g_driver.id = 7;
    uint64_t id = 0;
    bool no_sync = false;
    ASSERT_EQ(efa_cuda_buffer_id(&cu_, buf_, &id, &no_sync), 0);
    EXPECT_EQ(id, 7u);
    EXPECT_TRUE(no_sync);
}

TEST_F(CudaBufferId, AnyRefusalOfTheAttributeCounts) {
    g_driver.set_rc = 1; // CUDA_ERROR_INVALID_VALUE
    uint64_t id = 0;
    bool no_sync = false;
    ASSERT_EQ(efa_cuda_buffer_id(&cu_, buf_, &id, &no_sync), 0);
    EXPECT_TRUE(no_sync);
}

TEST_F(CudaBufferId, MemoryWithoutAnIdIsRefused) {
    g_driver.get_rc = 1; // not CUDA's memory
    uint64_t id = 5;
    bool no_sync = false;
    EXPECT_EQ(efa_cuda_buffer_id(&cu_, buf_, &id, &no_sync), -FI_EINVAL);
    EXPECT_EQ(id, 5u);
    EXPECT_EQ(g_driver.set_attribute, -1); // nothing set on memory that is not CUDA's
    g_driver = Driver{};
    g_driver.id = 0; // (no allocation has id 0: a registration keyed by it could go stale)
    EXPECT_EQ(efa_cuda_buffer_id(&cu_, buf_, &id, &no_sync), -FI_EINVAL);
}

} // namespace
