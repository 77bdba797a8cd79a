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
    int ordinal_rc = 1; // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: unanswered unless set
    int ordinal = -1;
    int block_rc = 1; // CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: unanswered unless set
    unsigned long long block = 0;
    int block_asked = 0;
} g_driver;

int get(void *data, int attribute, unsigned long long ptr) {
    (void)ptr;
    if (9 == attribute) { // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL (an int)
        if (0 == g_driver.ordinal_rc) {
            *static_cast<int *>(data) = g_driver.ordinal;
        }
        return g_driver.ordinal_rc;
    }
    if (20 == attribute) { // CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID
        ++g_driver.block_asked;
        if (0 == g_driver.block_rc) {
            *static_cast<unsigned long long *>(data) = g_driver.block;
        }
        return g_driver.block_rc;
    }
    if (7 != attribute) { // CU_POINTER_ATTRIBUTE_BUFFER_ID alone besides
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

// A VMM piece mapped anew at the same address: whether the driver renews
// the mapping's BUFFER_ID or only the physical allocation's block id, the
// key changes (a registration of the old pages is never served for it).
TEST_F(CudaBufferId, VmmMemoryMappedAnewGetsAnotherKeyEvenWhereItsBufferIdStays) {
    g_driver.set_rc = 801;
    g_driver.id = 7;
    g_driver.block_rc = 0;
    g_driver.block = 100;
    uint64_t first = 0, again = 0, remapped = 0;
    bool no_sync = false;
    ASSERT_EQ(efa_cuda_buffer_id(&cu_, buf_, &first, &no_sync), 0);
    ASSERT_EQ(efa_cuda_buffer_id(&cu_, buf_, &again, &no_sync), 0);
    g_driver.block = 101; // another physical allocation, the same BUFFER_ID
    ASSERT_EQ(efa_cuda_buffer_id(&cu_, buf_, &remapped, &no_sync), 0);
    EXPECT_TRUE(no_sync);
    EXPECT_EQ(first, again); // (the same mapping keeps its key)
    EXPECT_NE(first, remapped);
    EXPECT_NE(first, 0u);
    EXPECT_NE(remapped, 0u);
    EXPECT_EQ(first, efa_cuda_mix_block_id(7, 100));
}

// cudaMalloc memory is keyed by its BUFFER_ID alone (one driver call less
// on every device buffer), and a driver without block ids keeps VMM
// memory's BUFFER_ID as its key.
TEST_F(CudaBufferId, TheBlockIdIsAskedOfMemoryWithoutSynchronousCopiesAlone) {
    g_driver.block_rc = 0;
    g_driver.block = 100;
    uint64_t id = 0;
    bool no_sync = true;
    ASSERT_EQ(efa_cuda_buffer_id(&cu_, buf_, &id, &no_sync), 0);
    EXPECT_EQ(id, 42u);
    EXPECT_EQ(g_driver.block_asked, 0);
    g_driver = Driver{};
    g_driver.set_rc = 801; // VMM memory, a driver that does not answer attribute 20
    ASSERT_EQ(efa_cuda_buffer_id(&cu_, buf_, &id, &no_sync), 0);
    EXPECT_EQ(id, 42u);
    EXPECT_EQ(g_driver.block_asked, 1);
    EXPECT_EQ(efa_cuda_mix_block_id(5, 0), 5u);
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

// The buffer's own device, as the driver says it; nothing where it does not
// (the caller then asks for the thread's current device).
TEST_F(CudaBufferId, TheDeviceOrdinalIsTheBuffersAsTheDriverSaysIt) {
    int dev = -1;
    g_driver.ordinal_rc = 0;
    g_driver.ordinal = 3;
    ASSERT_EQ(efa_cuda_device_ordinal(&cu_, buf_, &dev), 0);
    EXPECT_EQ(dev, 3);
    dev = -1;
    g_driver.ordinal_rc = 1; // CUDA_ERROR_INVALID_VALUE: not CUDA memory
    EXPECT_EQ(efa_cuda_device_ordinal(&cu_, buf_, &dev), -FI_EINVAL);
    EXPECT_EQ(dev, -1);
}
