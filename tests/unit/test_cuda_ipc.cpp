// CUDA's legacy IPC handles (efa_cuda_ipc.h) against a stand-in driver
// whose calls are recorded.  What is checked: the sender sets
// SYNC_MEMOPS on the allocation before it takes the handle (so a
// cudaMemset or pageable cudaMemcpy into it has landed when the peer
// copies), the first time waiting for the default stream, and names the allocation from its base
// with the buffer's offset; memory without a legacy handle (VMM, pool) is refused untouched; the
// receiver tells "already mapped" from other refusals, and accepts a mapping that holds the
// allocation (the driver may map the whole block a small cudaMalloc was carved from) but not one
// shorter than the sender said.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "efa_cuda_ipc.h"

namespace {

constexpr efa_cu_ptr_t kBase = 0x7f0000000000ull; // the sender's allocation
constexpr size_t kSize = size_t{4} << 20;
constexpr efa_cu_ptr_t kMapped = 0x7e0000000000ull; // where the receiver's open maps it

struct StandIn {
    std::vector<std::string> calls; // in order: "set 6 @base", "get_handle @base", ...
    int legacy = 1;                 // IS_LEGACY_CUDA_IPC_CAPABLE
    int open_rc = 0;
    // what cuMemGetAddressRange answers for the mapped pointer at the receiver
    efa_cu_ptr_t mapped_start = kMapped;
    size_t mapped_size = kSize;
    int closes = 0;
    int sync_memops = 0; // the allocation's CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
} s;

std::string at(efa_cu_ptr_t p) {
    return p == kBase ? "@base" : p == kMapped ? "@mapped" : "@" + std::to_string(p);
}

int pointer_attribute(void *data, int attribute, efa_cu_ptr_t) {
    if (6 == attribute) {
        *static_cast<int *>(data) = s.sync_memops;
        return 0;
    }
    if (10 != attribute) {
        return 1;
    }
    *static_cast<int *>(data) = s.legacy;
    return 0;
}
int set_attribute(const void *value, int attribute, efa_cu_ptr_t ptr) {
    if (6 == attribute) {
        s.sync_memops = *static_cast<const int *>(value);
    }
    s.calls.push_back("set " + std::to_string(attribute) + "=" +
                      std::to_string(*static_cast<const int *>(value)) + " " + at(ptr));
    return 0;
}
int address_range(efa_cu_ptr_t *base, size_t *size, efa_cu_ptr_t ptr) {
    if (ptr >= kBase && ptr < kBase + kSize) {
        *base = kBase;
        *size = kSize;
        return 0;
    }
    if (ptr >= s.mapped_start && ptr < s.mapped_start + s.mapped_size) {
        *base = s.mapped_start;
        *size = s.mapped_size;
        return 0;
    }
    return 1;
}
int get_handle(efa_cu_ipc_handle_t *h, efa_cu_ptr_t base) {
    s.calls.push_back("get_handle " + at(base));
    memset(h, 0, sizeof(*h));
    memcpy(h->reserved, &base, sizeof(base));
    return 0;
}
int open_handle(efa_cu_ptr_t *p, efa_cu_ipc_handle_t h, unsigned int flags) {
    efa_cu_ptr_t named = 0;
    memcpy(&named, h.reserved, sizeof(named));
    s.calls.push_back("open " + at(named) + " flags " + std::to_string(flags));
    if (0 != s.open_rc) {
        return s.open_rc;
    }
    *p = kMapped;
    return 0;
}
int close_handle(efa_cu_ptr_t) {
    ++s.closes;
    return 0;
}
int stream_synchronize(void *stream) {
    s.calls.push_back(EFA_CU_STREAM_LEGACY == stream ? "sync legacy" : "sync other");
    return 0;
}

const efa_cuda_ipc_calls_t kCalls = {pointer_attribute, set_attribute, address_range,
                                     get_handle,        open_handle,   close_handle,
                                     stream_synchronize};

class CudaIpc : public ::testing::Test {
  protected:
    void SetUp() override { s = StandIn{}; }
    static void *ptr(efa_cu_ptr_t p) { return reinterpret_cast<void *>(p); }
    efa_device_ipc_t exported() {
        efa_device_ipc_t out{};
        EXPECT_EQ(0, efa_cuda_ipc_export(&kCalls, ptr(kBase + 8192), 4096, &out));
        s.calls.clear();
        return out;
    }
};

TEST_F(CudaIpc, TheSenderMakesCopiesIntoTheAllocationSynchronousBeforeItsHandle) {
    efa_device_ipc_t out{};
    ASSERT_EQ(0, efa_cuda_ipc_export(&kCalls, ptr(kBase + 8192), 4096, &out));
    // (the first time, copies made before are waited for: one from
    // pageable memory may not have landed when it returned)
    const std::vector<std::string> want = {"set 6=1 @base", "sync legacy", "get_handle @base"};
    EXPECT_EQ(want, s.calls);
    EXPECT_EQ(kSize, out.alloc_len);
    EXPECT_EQ(8192u, out.offset);
    EXPECT_EQ(0u, out.held);
    s.calls.clear();
    ASSERT_EQ(0, efa_cuda_ipc_export(&kCalls, ptr(kBase + 8192), 4096, &out));
    EXPECT_EQ(std::vector<std::string>{"get_handle @base"}, s.calls)
        << "set already: no attribute set, no wait";
}

TEST_F(CudaIpc, MemoryWithoutALegacyHandleIsRefusedUntouched) {
    s.legacy = 0;
    efa_device_ipc_t out{};
    EXPECT_EQ(-FI_EINVAL, efa_cuda_ipc_export(&kCalls, ptr(kBase), 64, &out));
    EXPECT_TRUE(s.calls.empty()) << "an attribute set or a handle asked of VMM or pool memory";
    s.legacy = 1;
    EXPECT_EQ(-FI_EINVAL, efa_cuda_ipc_export(&kCalls, ptr(kBase + kSize - 64), 128, &out))
        << "a buffer past its allocation";
    EXPECT_EQ(-FI_EINVAL, efa_cuda_ipc_export(&kCalls, ptr(kBase), 0, &out));
    EXPECT_EQ(-FI_EINVAL, efa_cuda_ipc_export(&kCalls, ptr(0x1000), 64, &out))
        << "not the driver's";
    EXPECT_TRUE(s.calls.empty());
}

TEST_F(CudaIpc, ADriverWithoutTheAttributeCallsStillExports) {
    efa_cuda_ipc_calls_t bare = kCalls;
    bare.pointer_attribute = nullptr;
    bare.set_attribute = nullptr;
    efa_device_ipc_t out{};
    ASSERT_EQ(0, efa_cuda_ipc_export(&bare, ptr(kBase + 64), 64, &out));
    EXPECT_EQ(64u, out.offset);
    EXPECT_EQ(std::vector<std::string>{"get_handle @base"}, s.calls);
}

TEST_F(CudaIpc, TheReceiverMapsTheAllocationWithLazyPeerAccess) {
    const efa_device_ipc_t in = exported();
    void *base = nullptr;
    ASSERT_EQ(0, efa_cuda_ipc_import(&kCalls, &in, &base));
    EXPECT_EQ(ptr(kMapped), base);
    EXPECT_EQ(std::vector<std::string>{"open @base flags 1"}, s.calls);
    EXPECT_EQ(0, s.closes);
}

TEST_F(CudaIpc, AlreadyMappedIsToldFromOtherRefusals) {
    const efa_device_ipc_t in = exported();
    void *base = nullptr;
    s.open_rc = EFA_CUDA_ERROR_ALREADY_MAPPED;
    EXPECT_EQ(-FI_EALREADY, efa_cuda_ipc_import(&kCalls, &in, &base));
    s.open_rc = 201; // CUDA_ERROR_INVALID_CONTEXT
    EXPECT_EQ(-FI_EACCES, efa_cuda_ipc_import(&kCalls, &in, &base));
    s.open_rc = 217; // CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
    EXPECT_EQ(-FI_EACCES, efa_cuda_ipc_import(&kCalls, &in, &base));
    EXPECT_EQ(nullptr, base);
    EXPECT_EQ(0, s.closes) << "nothing mapped, nothing to close";
}

TEST_F(CudaIpc, AMappingThatHoldsTheAllocationIsTakenAShorterOneIsNot) {
    const efa_device_ipc_t in = exported();
    void *base = nullptr;
    // the whole block the allocation was carved from, starting before it
    s.mapped_start = kMapped - 2 * kSize;
    s.mapped_size = 4 * kSize;
    ASSERT_EQ(0, efa_cuda_ipc_import(&kCalls, &in, &base));
    EXPECT_EQ(ptr(kMapped), base);
    // the mapping ends before the sender's allocation would
    s.mapped_start = kMapped;
    s.mapped_size = kSize / 2;
    base = nullptr;
    EXPECT_EQ(-FI_EINVAL, efa_cuda_ipc_import(&kCalls, &in, &base));
    EXPECT_EQ(nullptr, base);
    EXPECT_EQ(1, s.closes) << "a refused mapping left open";
    efa_device_ipc_t none = in;
    none.alloc_len = 0;
    EXPECT_EQ(-FI_EINVAL, efa_cuda_ipc_import(&kCalls, &none, &base));
}

} // namespace
