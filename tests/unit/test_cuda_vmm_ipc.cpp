// IPC of CUDA VMM memory (efa_cuda_vmm_ipc.h) against the stand-in driver
// of cuda_vmm_standin.hpp (allocations that are memfds).  What is checked:
// the name a receiver keeps its mapping under is the allocation's id, not
// the descriptor; the descriptor stays open until released; every
// retained handle is released; a failed import leaves nothing mapped,
// reserved or open; a buffer over several allocations side by side is
// mapped so at the receiver, under a name that changes with any of them;
// and memory that is not exportable VMM allocations without gaps, or is a
// pool's, is refused.  The notes of buffers over several allocations:
// test_cuda_vmm_notes.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>

#include <rdma/fi_errno.h>

#include "cuda_vmm_standin.hpp"

namespace {

using namespace vmm_standin;

TEST_F(CudaVmmIpc, AnExportIsADescriptorHeldForTheMessage) {
    const efa_cu_handle_t h = make(kVa, kMiB2, 77);
    efa_device_ipc_t out{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + 4096), 8192, &out));
    EXPECT_TRUE(efa_cuda_vmm_is_export(&out));
    EXPECT_EQ(kMiB2, out.alloc_len);
    EXPECT_EQ(4096u, out.offset);
    ASSERT_NE(0u, out.held);
    const int fd = static_cast<int>(out.held - 1);
    ASSERT_TRUE(open_fd(fd)) << "the descriptor must stay open for the peer";
    EXPECT_EQ(inode_of(d.allocs.at(h).memfd), inode_of(fd)) << "not the allocation's descriptor";
    efa_cuda_vmm_release(out.held);
    EXPECT_FALSE(open_fd(fd)) << "released, the descriptor stays open";
}

TEST_F(CudaVmmIpc, TheNameIsTheAllocationsIdNotItsDescriptor) {
    make(kVa, kMiB2, 77);
    make(kVa + kMiB2, kMiB2, 78);
    efa_device_ipc_t a{}, b{}, other{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa), 64, &a));
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + 100), 64, &b));
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + kMiB2), 64, &other));
    EXPECT_NE(a.held, b.held);
    EXPECT_EQ(0, memcmp(a.handle, b.handle, sizeof(a.handle))) << "one allocation, two names";
    EXPECT_NE(0, memcmp(a.handle, other.handle, sizeof(a.handle))) << "two allocations, one name";
    for (uint64_t held : {a.held, b.held, other.held}) {
        efa_cuda_vmm_release(held);
    }
}

TEST_F(CudaVmmIpc, AnImportMapsThatAllocationForThisDevice) {
    const efa_cu_handle_t h = make(kVa, kMiB2, 77);
    efa_device_ipc_t out{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + 64), 128, &out));
    void *base = nullptr;
    ASSERT_EQ(0, efa_cuda_vmm_import(&kCalls, static_cast<uint32_t>(getpid()), &out, &base));
    const auto va = reinterpret_cast<efa_cu_ptr_t>(base);
    ASSERT_EQ(1u, d.mapped.count(va));
    EXPECT_EQ(h, d.mapped[va]) << "another allocation mapped";
    EXPECT_EQ(kMiB2, d.reserved[va]);
    EXPECT_EQ(1, d.access.location_type);
    EXPECT_EQ(3, d.access.location_id) << "access for this process's device";
    EXPECT_EQ(3, d.access.flags);
    efa_cuda_vmm_release(out.held);
    EXPECT_TRUE(efa_cuda_vmm_close(&kCalls, base));
    EXPECT_TRUE(d.mapped.empty());
    EXPECT_TRUE(d.reserved.empty()) << "the range not freed";
    EXPECT_FALSE(efa_cuda_vmm_close(&kCalls, base)) << "closed twice";
}

// The sender waits for the default stream before the peer hears: VMM
// memory takes no SYNC_MEMOPS, and a synchronous copy into it may not have
// landed when it returns.
TEST_F(CudaVmmIpc, TheExportWaitsForTheDefaultStream) {
    make(kVa, kMiB2, 77);
    efa_device_ipc_t out{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa), 64, &out));
    EXPECT_EQ(1, d.syncs);
    efa_cuda_vmm_release(out.held);
    efa_cuda_vmm_calls_t bare = kCalls;
    bare.stream_synchronize = nullptr; // (a driver without it: exported all the same)
    ASSERT_EQ(0, efa_cuda_vmm_export(&bare, at(kVa), 64, &out));
    EXPECT_EQ(1, d.syncs);
    efa_cuda_vmm_release(out.held);
}

// A process with several GPUs: the mapping is made for the device of the
// memory the bytes go to, and for the context's device, which runs the
// copy; where the two together are refused, the context's alone, else
// near's alone.
TEST_F(CudaVmmIpc, AnImportForMemoryOfAnotherDeviceGivesThatDeviceAccess) {
    make(kVa, kMiB2, 77);
    efa_device_ipc_t out{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa), 64, &out));
    const auto pid = static_cast<uint32_t>(getpid());
    d.near = 0x90000000000ull;
    void *base = nullptr;
    ASSERT_EQ(0, efa_cuda_vmm_import_near(&kCalls, pid, &out, at(d.near), &base));
    ASSERT_EQ(2u, d.accesses.size());
    EXPECT_EQ(5, d.accesses[0].location_id) << "near's device";
    EXPECT_EQ(3, d.accesses[1].location_id) << "the context's device";
    EXPECT_TRUE(efa_cuda_vmm_close(&kCalls, base));
    d.several_refused = true;
    ASSERT_EQ(0, efa_cuda_vmm_import_near(&kCalls, pid, &out, at(d.near), &base));
    ASSERT_EQ(1u, d.accesses.size());
    EXPECT_EQ(3, d.accesses[0].location_id) << "not the context's, as before";
    EXPECT_TRUE(efa_cuda_vmm_close(&kCalls, base));
    d.refused_device = 3;
    ASSERT_EQ(0, efa_cuda_vmm_import_near(&kCalls, pid, &out, at(d.near), &base));
    ASSERT_EQ(1u, d.accesses.size());
    EXPECT_EQ(5, d.accesses[0].location_id);
    EXPECT_TRUE(efa_cuda_vmm_close(&kCalls, base));
    d.refused_device = -1;
    d.near_device = 3; // (the context's own: one descriptor)
    d.several_refused = false;
    ASSERT_EQ(0, efa_cuda_vmm_import_near(&kCalls, pid, &out, at(d.near), &base));
    EXPECT_EQ(1u, d.accesses.size());
    EXPECT_TRUE(efa_cuda_vmm_close(&kCalls, base));
    efa_cuda_vmm_release(out.held);
}

TEST_F(CudaVmmIpc, AFailedImportLeavesNothingBehind) {
    make(kVa, kMiB2, 77);
    efa_device_ipc_t out{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa), 128, &out));
    const auto pid = static_cast<uint32_t>(getpid());
    void *base = nullptr;
    d.map_rc = 1;
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_import(&kCalls, pid, &out, &base));
    EXPECT_TRUE(d.reserved.empty());
    d.map_rc = 0;
    d.access_rc = 1; // (another device's memory without peer access)
    EXPECT_EQ(-FI_EACCES, efa_cuda_vmm_import(&kCalls, pid, &out, &base));
    EXPECT_TRUE(d.mapped.empty());
    EXPECT_TRUE(d.reserved.empty());
    EXPECT_EQ(nullptr, base);
    d.access_rc = 0;
    efa_device_ipc_t longer = out; // (a length the allocation does not have)
    longer.alloc_len = 2 * kMiB2;
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_import(&kCalls, pid, &longer, &base));
    EXPECT_TRUE(d.reserved.empty());
    efa_cuda_vmm_release(out.held);
    // The descriptor gone (the message done): nothing to take, or, where
    // its number was taken again, a file that is no allocation.
    EXPECT_GT(0, efa_cuda_vmm_import(&kCalls, pid, &out, &base));
    efa_device_ipc_t legacy{}; // a legacy handle: nothing held
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_import(&kCalls, pid, &legacy, &base));
}

TEST_F(CudaVmmIpc, MemoryThatIsNotOneExportableAllocationIsRefused) {
    make(kVa, kMiB2, 77);
    make(kVa + kMiB2, kMiB2, 78);
    make(kVa + 2 * kMiB2, kMiB2, 79, false);
    make(kVa + 4 * kMiB2, kMiB2, 80);
    make(kVa + 6 * kMiB2, kMiB2, 81);
    efa_device_ipc_t out{};
    const int fds = open_fds();
    // into a gap after an allocation
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_export(&kCalls, at(kVa + 5 * kMiB2 - 64), 128, &out));
    // across an allocation made without the descriptor handle type: the
    // descriptors of the others not kept
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_export(&kCalls, at(kVa + kMiB2 + 64), 2 * kMiB2, &out));
    EXPECT_EQ(fds, open_fds()) << "a refused export left a descriptor open";
    // no length
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_export(&kCalls, at(kVa), 0, &out));
    // not the driver's memory
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_export(&kCalls, at(kVa - 4096), 64, &out));
    // made without the descriptor handle type
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_export(&kCalls, at(kVa + 2 * kMiB2), 64, &out));
    // a range whose start lies in another allocation (the driver naming
    // the whole reservation): the offset in the allocation is unknown
    d.reservation = kVa;
    d.reservation_size = 3 * kMiB2;
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_export(&kCalls, at(kVa + kMiB2 + 64), 64, &out));
    EXPECT_EQ(0u, out.held);
}

// Memory of an exportable stream-ordered pool lies at some offset in one
// of the pool's chunks, which its retained handle names from the start:
// refused (it streams), never mapped from the chunk's first byte.  A
// driver that cannot say whose pool memory is (before CUDA 11.2) leaves
// plain VMM memory exportable.
TEST_F(CudaVmmIpc, PoolMemoryIsRefused) {
    int pool_handle = 0;
    const efa_cu_handle_t pooled = make(kVa, kMiB2, 77);
    d.allocs.at(pooled).pool = &pool_handle;
    make(kVa + 2 * kMiB2, kMiB2, 78);
    efa_device_ipc_t out{};
    const int fds = open_fds();
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_export(&kCalls, at(kVa + 4096), 64, &out));
    EXPECT_EQ(0u, out.held);
    EXPECT_EQ(fds, open_fds()) << "a refused export left a descriptor open";
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + 2 * kMiB2), 64, &out))
        << "memory of no pool";
    efa_cuda_vmm_release(out.held);
    d.mempool_attribute = false;
    d.allocs.at(pooled).pool = nullptr;
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa), 64, &out))
        << "a driver without the attribute";
    efa_cuda_vmm_release(out.held);
}

// PyTorch's expandable segments map allocations side by side in one
// reservation; a tensor may lie over several.
TEST_F(CudaVmmIpc, ABufferOverSeveralAllocationsIsMappedSoAtTheReceiver) {
    const efa_cu_handle_t h0 = make(kVa, kMiB2, 77);
    const efa_cu_handle_t h1 = make(kVa + kMiB2, 2 * kMiB2, 78);
    const efa_cu_handle_t h2 = make(kVa + 3 * kMiB2, kMiB2, 79);
    efa_device_ipc_t out{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + kMiB2 - 64), 2 * kMiB2 + 128, &out));
    EXPECT_TRUE(efa_cuda_vmm_is_export(&out));
    EXPECT_EQ(4 * kMiB2, out.alloc_len);
    EXPECT_EQ(kMiB2 - 64, out.offset);
    ASSERT_NE(0u, out.held);
    void *base = nullptr;
    ASSERT_EQ(0, efa_cuda_vmm_import(&kCalls, static_cast<uint32_t>(getpid()), &out, &base));
    const auto va = reinterpret_cast<efa_cu_ptr_t>(base);
    EXPECT_EQ(4 * kMiB2, d.reserved[va]);
    ASSERT_EQ(3u, d.mapped.size());
    EXPECT_EQ(h0, d.mapped[va]);
    EXPECT_EQ(h1, d.mapped[va + kMiB2]) << "the pieces not side by side as at the sender";
    EXPECT_EQ(h2, d.mapped[va + 3 * kMiB2]);
    EXPECT_EQ(3, d.access.location_id);
    const std::map<efa_cu_ptr_t, size_t> every{
        {va, kMiB2}, {va + kMiB2, 2 * kMiB2}, {va + 3 * kMiB2, kMiB2}};
    EXPECT_EQ(every, d.access_set) << "a piece without access for this device";
    // The sender held every piece's descriptor for the message, and lets
    // go of all of them.
    const int fds = open_fds();
    efa_cuda_vmm_release(out.held);
    EXPECT_EQ(fds - 4, open_fds()) << "the note and its three descriptors not all closed";
    EXPECT_TRUE(efa_cuda_vmm_close(&kCalls, base));
    EXPECT_TRUE(d.mapped.empty()) << "a piece left mapped";
    EXPECT_TRUE(d.reserved.empty());
}

TEST_F(CudaVmmIpc, TheNameOfABufferOverSeveralAllocationsChangesWithAnyOfThem) {
    make(kVa, kMiB2, 77);
    make(kVa + kMiB2, kMiB2, 78);
    make(kVa + 2 * kMiB2, kMiB2, 79);
    efa_device_ipc_t a{}, b{}, c{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + 64), 3 * kMiB2 - 128, &a));
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + 128), 3 * kMiB2 - 256, &b));
    EXPECT_EQ(0, memcmp(a.handle, b.handle, sizeof(a.handle))) << "the same pieces, two names";
    // The middle allocation unmapped, another mapped in its place.
    const efa_cu_handle_t old = d.mappings.at(kVa + kMiB2);
    d.mappings.erase(kVa + kMiB2);
    make(kVa + kMiB2, kMiB2, 90);
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + 64), 3 * kMiB2 - 128, &c));
    EXPECT_NE(0, memcmp(a.handle, c.handle, sizeof(a.handle)))
        << "a mapping of the old middle piece would be taken for the new";
    for (uint64_t held : {a.held, b.held, c.held}) {
        efa_cuda_vmm_release(held);
    }
    close(d.allocs.at(old).memfd);
    d.allocs.erase(old);
}

} // namespace
