// IPC of CUDA VMM memory (efa_cuda_vmm_ipc.h) against a stand-in driver:
// its allocations are memfds, so that an export is a real descriptor the
// importer takes out of the exporter (efa_fd_from_process, here out of
// this same process) and the stand-in's import knows the allocation by
// the descriptor's file.  What is checked: the name a receiver keeps its
// mapping under is the allocation's id, not the descriptor; the
// descriptor stays open until released; every retained handle is
// released; a failed import leaves nothing mapped, reserved or open; a
// buffer over several allocations side by side is mapped so at the
// receiver, under a name that changes with any of them; and memory that is
// not exportable VMM allocations without gaps is refused.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>

#include <rdma/fi_errno.h>

#include "efa_cuda_vmm_ipc.h"

namespace {

struct Alloc {
    int memfd;
    size_t size;
    uint64_t buffer_id;
    bool posix_fd; // made with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
};

// What the stand-in driver holds and was asked.
struct Driver {
    std::map<efa_cu_handle_t, Alloc> allocs; // by handle
    std::map<efa_cu_ptr_t, efa_cu_handle_t>
        mappings;     // the sender's, by address (size: its alloc's)
    int retained = 0; // retains not yet released
    efa_cu_handle_t next_handle = 100;
    // address_range answers the whole reservation from here (0: the mapping)
    efa_cu_ptr_t reservation = 0;
    size_t reservation_size = 0;
    // the importer's side
    std::map<efa_cu_handle_t, efa_cu_handle_t> imported; // new handle -> the alloc's
    efa_cu_ptr_t next_va = 0x70000000000ull;
    std::map<efa_cu_ptr_t, size_t> reserved;
    std::map<efa_cu_ptr_t, efa_cu_handle_t> mapped;
    efa_cu_access_desc_t access{};
    std::map<efa_cu_ptr_t, size_t> access_set; // every range given access
    int map_rc = 0, access_rc = 0;
    int maps_before_failing = -1; // (-1: map never fails on its own)
    int accesses_before_failing = -1;
    int unmaps = 0, frees = 0;
} d;

const Alloc *alloc_at(efa_cu_ptr_t p, efa_cu_ptr_t *base, efa_cu_handle_t *h) {
    for (const auto &[b, handle] : d.mappings) {
        const Alloc &a = d.allocs.at(handle);
        if (p >= b && p - b < a.size) {
            *base = b;
            *h = handle;
            return &a;
        }
    }
    return nullptr;
}

int pointer_attribute(void *data, int attribute, efa_cu_ptr_t ptr) {
    efa_cu_ptr_t base = 0;
    efa_cu_handle_t h = 0;
    const Alloc *a = alloc_at(ptr, &base, &h);
    if (7 != attribute || nullptr == a) {
        return 1;
    }
    *static_cast<unsigned long long *>(data) = a->buffer_id;
    return 0;
}
int address_range(efa_cu_ptr_t *base, size_t *size, efa_cu_ptr_t ptr) {
    efa_cu_handle_t h = 0;
    const Alloc *a = alloc_at(ptr, base, &h);
    if (nullptr == a) {
        return 1;
    }
    *size = a->size;
    if (0 != d.reservation) {
        *base = d.reservation;
        *size = d.reservation_size;
    }
    return 0;
}
int retain(efa_cu_handle_t *h, void *addr) {
    efa_cu_ptr_t base = 0;
    if (nullptr == alloc_at(reinterpret_cast<efa_cu_ptr_t>(addr), &base, h)) {
        return 1;
    }
    ++d.retained;
    return 0;
}
int release(efa_cu_handle_t h) {
    if (d.imported.erase(h)) {
        return 0;
    }
    --d.retained;
    return d.allocs.count(h) ? 0 : 1;
}
int export_handle(void *shareable, efa_cu_handle_t h, int type, unsigned long long flags) {
    const auto it = d.allocs.find(h);
    if (it == d.allocs.end() || 1 != type || 0 != flags || !it->second.posix_fd) {
        return 1;
    }
    *static_cast<int *>(shareable) = fcntl(it->second.memfd, F_DUPFD_CLOEXEC, 0);
    return 0;
}
ino_t inode_of(int fd) {
    struct stat st {};
    return 0 == fstat(fd, &st) ? st.st_ino : 0;
}
int import_handle(efa_cu_handle_t *h, void *os_handle, int type) {
    const int fd = static_cast<int>(reinterpret_cast<intptr_t>(os_handle));
    for (const auto &[handle, a] : d.allocs) {
        if (1 == type && inode_of(fd) == inode_of(a.memfd)) {
            *h = ++d.next_handle;
            d.imported[*h] = handle;
            return 0;
        }
    }
    return 1;
}
int reserve(efa_cu_ptr_t *ptr, size_t size, size_t, efa_cu_ptr_t, unsigned long long) {
    *ptr = d.next_va;
    d.next_va += size;
    d.reserved[*ptr] = size;
    return 0;
}
// Does [ptr, ptr + size) lie in one reserved range, not mapped yet?
bool reserved_free(efa_cu_ptr_t ptr, size_t size) {
    auto it = d.reserved.upper_bound(ptr);
    if (it == d.reserved.begin()) {
        return false;
    }
    --it;
    if (ptr + size > it->first + it->second) {
        return false;
    }
    for (const auto &[at, h] : d.mapped) {
        if (at < ptr + size && ptr < at + d.allocs.at(h).size) {
            return false;
        }
    }
    return true;
}
int map(efa_cu_ptr_t ptr, size_t size, size_t offset, efa_cu_handle_t h, unsigned long long) {
    const auto it = d.imported.find(h);
    if (0 == d.maps_before_failing--) {
        return 1;
    }
    if (0 != d.map_rc || it == d.imported.end() || 0 != offset ||
        size > d.allocs.at(it->second).size || !reserved_free(ptr, size)) {
        return 1;
    }
    d.mapped[ptr] = it->second;
    return 0;
}
int set_access(efa_cu_ptr_t ptr, size_t size, const efa_cu_access_desc_t *desc, size_t count) {
    const auto it = d.mapped.find(ptr);
    if (1 != count || it == d.mapped.end() || size != d.allocs.at(it->second).size) {
        return 1;
    }
    if (0 == d.accesses_before_failing--) {
        return 1;
    }
    d.access = *desc;
    if (0 == d.access_rc) {
        d.access_set[ptr] = size;
    }
    return d.access_rc;
}
int unmap(efa_cu_ptr_t ptr, size_t size) {
    ++d.unmaps;
    const auto it = d.mapped.find(ptr);
    if (it == d.mapped.end() || size != d.allocs.at(it->second).size) {
        return 1; // (one whole mapping at a time)
    }
    d.mapped.erase(it);
    d.access_set.erase(ptr);
    return 0;
}
int address_free(efa_cu_ptr_t ptr, size_t size) {
    ++d.frees;
    const auto it = d.reserved.find(ptr);
    if (it == d.reserved.end() || it->second != size) {
        return 1;
    }
    d.reserved.erase(it);
    return 0;
}
int context_device(int *device) {
    *device = 3;
    return 0;
}

const efa_cuda_vmm_calls_t kCalls = {
    pointer_attribute, address_range, retain,     export_handle, import_handle, release,
    reserve,           map,           set_access, unmap,         address_free,  context_device};

bool open_fd(int fd) {
    return fcntl(fd, F_GETFD) >= 0;
}

int open_fds() {
    int n = 0;
    DIR *dir = opendir("/proc/self/fd");
    while (nullptr != dir && nullptr != readdir(dir)) {
        ++n;
    }
    if (nullptr != dir) {
        closedir(dir);
    }
    return n;
}

class CudaVmmIpc : public ::testing::Test {
  protected:
    void SetUp() override { d = Driver{}; }
    void TearDown() override {
        EXPECT_EQ(0, d.retained) << "a retained handle not released";
        EXPECT_TRUE(d.imported.empty()) << "an imported handle not released";
        for (auto &[h, a] : d.allocs) {
            close(a.memfd);
        }
    }
    // An allocation of size bytes mapped at va, made with or without the
    // descriptor handle type.
    efa_cu_handle_t make(efa_cu_ptr_t va, size_t size, uint64_t id, bool posix_fd = true) {
        const int fd = memfd_create("vmm-alloc", MFD_CLOEXEC);
        EXPECT_LE(0, fd);
        const efa_cu_handle_t h = ++d.next_handle;
        d.allocs[h] = Alloc{fd, size, id, posix_fd};
        d.mappings[va] = h;
        return h;
    }
    static void *at(efa_cu_ptr_t p) { return reinterpret_cast<void *>(p); }
};

constexpr efa_cu_ptr_t kVa = 0x10000000000ull;
constexpr size_t kMiB2 = size_t{2} << 20;

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

TEST_F(CudaVmmIpc, ANoteThatIsNotTheMessagesIsRefused) {
    make(kVa, kMiB2, 77);
    make(kVa + kMiB2, kMiB2, 78);
    const auto pid = static_cast<uint32_t>(getpid());
    efa_device_ipc_t out{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + 64), kMiB2, &out));
    void *base = nullptr;
    efa_device_ipc_t other_ids = out;
    other_ids.handle[8] ^= 1; // (another first piece's id)
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_import(&kCalls, pid, &other_ids, &base));
    efa_device_ipc_t longer = out;
    longer.alloc_len += kMiB2;
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_import(&kCalls, pid, &longer, &base));
    int pipe_fds[2];
    ASSERT_EQ(0, pipe(pipe_fds));
    ASSERT_EQ(1, write(pipe_fds[1], "x", 1));
    efa_device_ipc_t a_pipe = out; // (a descriptor no note: nothing read from it)
    a_pipe.held = static_cast<uint64_t>(pipe_fds[0]) + 1;
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_import(&kCalls, pid, &a_pipe, &base));
    char byte = 0;
    EXPECT_EQ(1, read(pipe_fds[0], &byte, 1)) << "the import consumed the sender's bytes";
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    EXPECT_TRUE(d.reserved.empty());
    EXPECT_EQ(nullptr, base);
    efa_cuda_vmm_release(out.held);
}

// The note an export holds, copied into a memfd of this test's (sealed as
// the exporter seals its own where seal is true), and the copy's held.
uint64_t copy_note(const efa_device_ipc_t &out, bool seal, size_t fd_offset = 0, int32_t fd = 0) {
    char note[4096];
    const ssize_t n = pread(static_cast<int>(out.held - 1), note, sizeof(note), 0);
    EXPECT_LT(0, n);
    if (0 != fd_offset) {
        memcpy(note + fd_offset, &fd, sizeof(fd));
    }
    const int copy = memfd_create("note-copy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    EXPECT_EQ(n, pwrite(copy, note, static_cast<size_t>(n), 0));
    if (seal) {
        EXPECT_EQ(
            0, fcntl(copy, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE));
    }
    return static_cast<uint64_t>(copy) + 1;
}

TEST_F(CudaVmmIpc, OnlyASealedNoteIsRead) {
    make(kVa, kMiB2, 77);
    make(kVa + kMiB2, kMiB2, 78);
    const auto pid = static_cast<uint32_t>(getpid());
    efa_device_ipc_t out{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + 64), kMiB2, &out));
    void *base = nullptr;
    efa_device_ipc_t unsealed = out;
    unsealed.held = copy_note(out, false);
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_import(&kCalls, pid, &unsealed, &base))
        << "a file that any process of the sender's may still change taken for its note";
    efa_device_ipc_t sealed = out;
    sealed.held = copy_note(out, true);
    ASSERT_EQ(0, efa_cuda_vmm_import(&kCalls, pid, &sealed, &base)) << "the same note, sealed";
    EXPECT_TRUE(efa_cuda_vmm_close(&kCalls, base));
    // A note naming a piece's descriptor that is not open: the pieces
    // taken before it are let go.
    const int fds = open_fds();
    efa_device_ipc_t closed = out;
    // (the note: a 16-byte header, then per piece its id, length and
    // descriptor in 24 bytes: piece 1's descriptor at 16 + 24 + 16)
    closed.held = copy_note(out, true, 16 + 24 + 16, 1000);
    EXPECT_EQ(-FI_ENOENT, efa_cuda_vmm_import(&kCalls, pid, &closed, &base));
    EXPECT_EQ(fds + 1, open_fds()) << "a piece's descriptor taken and left open"; // (+1: the copy)
    EXPECT_TRUE(d.reserved.empty());
    for (uint64_t held : {unsealed.held, sealed.held, closed.held}) {
        close(static_cast<int>(held - 1));
    }
    efa_cuda_vmm_release(out.held);
}

TEST_F(CudaVmmIpc, AFailedMappingOfOnePieceLeavesNothingBehind) {
    make(kVa, kMiB2, 77);
    make(kVa + kMiB2, kMiB2, 78);
    make(kVa + 2 * kMiB2, kMiB2, 79);
    efa_device_ipc_t out{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa), 3 * kMiB2, &out));
    const int fds = open_fds();
    void *base = nullptr;
    d.maps_before_failing = 2; // (the third piece's map fails)
    EXPECT_EQ(-FI_EINVAL,
              efa_cuda_vmm_import(&kCalls, static_cast<uint32_t>(getpid()), &out, &base));
    EXPECT_TRUE(d.mapped.empty()) << "the pieces mapped before not unmapped";
    EXPECT_TRUE(d.reserved.empty());
    EXPECT_EQ(fds, open_fds()) << "a taken descriptor left open";
    d.maps_before_failing = 0; // (the first)
    EXPECT_EQ(-FI_EINVAL,
              efa_cuda_vmm_import(&kCalls, static_cast<uint32_t>(getpid()), &out, &base));
    EXPECT_TRUE(d.reserved.empty());
    d.maps_before_failing = -1;
    d.accesses_before_failing = 2; // (the third piece's access)
    EXPECT_EQ(-FI_EACCES,
              efa_cuda_vmm_import(&kCalls, static_cast<uint32_t>(getpid()), &out, &base));
    EXPECT_TRUE(d.mapped.empty()) << "the pieces mapped before not unmapped";
    EXPECT_TRUE(d.reserved.empty());
    EXPECT_EQ(fds, open_fds());
    d.accesses_before_failing = -1;
    d.access_rc = 1;
    EXPECT_EQ(-FI_EACCES,
              efa_cuda_vmm_import(&kCalls, static_cast<uint32_t>(getpid()), &out, &base));
    EXPECT_TRUE(d.mapped.empty());
    EXPECT_TRUE(d.reserved.empty());
    EXPECT_EQ(fds, open_fds());
    efa_cuda_vmm_release(out.held);
}

TEST_F(CudaVmmIpc, MoreAllocationsThanTheMostAreRefused) {
    const size_t n = EFA_CUDA_VMM_MAX_PIECES;
    for (size_t i = 0; i <= n; ++i) {
        make(kVa + i * kMiB2, kMiB2, 100 + i);
    }
    efa_device_ipc_t out{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa), n * kMiB2, &out)) << "as many as it holds";
    void *base = nullptr;
    ASSERT_EQ(0, efa_cuda_vmm_import(&kCalls, static_cast<uint32_t>(getpid()), &out, &base));
    EXPECT_EQ(n, d.mapped.size());
    EXPECT_TRUE(efa_cuda_vmm_close(&kCalls, base));
    efa_cuda_vmm_release(out.held);
    out = efa_device_ipc_t{};
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_export(&kCalls, at(kVa), n * kMiB2 + 1, &out));
    EXPECT_EQ(0u, out.held);
}

// Past the ids a name holds (7), it holds the first six and a digest of
// them all: a buffer over 12 allocations is mapped whole at the receiver,
// and its name changes with a piece far beyond the sixth.
TEST_F(CudaVmmIpc, ABufferOverMorePiecesThanANamesIdsIsNamedByAllOfThem) {
    constexpr size_t n = 12;
    for (size_t i = 0; i < n; ++i) {
        make(kVa + i * kMiB2, kMiB2, 200 + i);
    }
    efa_device_ipc_t a{}, b{};
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + 64), n * kMiB2 - 128, &a));
    EXPECT_EQ(n * kMiB2, a.alloc_len);
    void *base = nullptr;
    ASSERT_EQ(0, efa_cuda_vmm_import(&kCalls, static_cast<uint32_t>(getpid()), &a, &base));
    const auto va = reinterpret_cast<efa_cu_ptr_t>(base);
    ASSERT_EQ(n, d.mapped.size());
    for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(d.mappings.at(kVa + i * kMiB2), d.mapped[va + i * kMiB2]) << "piece " << i;
    }
    EXPECT_TRUE(efa_cuda_vmm_close(&kCalls, base));
    // Piece 10 unmapped, another allocation mapped in its place.
    const efa_cu_handle_t old = d.mappings.at(kVa + 10 * kMiB2);
    d.mappings.erase(kVa + 10 * kMiB2);
    make(kVa + 10 * kMiB2, kMiB2, 999);
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + 64), n * kMiB2 - 128, &b));
    EXPECT_NE(0, memcmp(a.handle, b.handle, sizeof(a.handle)))
        << "a mapping of the old tenth piece would be taken for the new";
    // A note whose later ids are not the name's is not this message's.
    efa_device_ipc_t other = b;
    other.held = a.held; // (a's note: the same first six ids, another tenth)
    EXPECT_EQ(-FI_EINVAL,
              efa_cuda_vmm_import(&kCalls, static_cast<uint32_t>(getpid()), &other, &base));
    EXPECT_TRUE(d.reserved.empty());
    efa_cuda_vmm_release(a.held);
    efa_cuda_vmm_release(b.held);
    close(d.allocs.at(old).memfd);
    d.allocs.erase(old);
}

TEST(FdFromProcess, TakesTheSameFileOutOfAProcess) {
    const int fd = memfd_create("fd-from-process", MFD_CLOEXEC);
    ASSERT_LE(0, fd);
    const int got = efa_fd_from_process(static_cast<uint32_t>(getpid()), fd);
    ASSERT_LE(0, got) << "pidfd_getfd refused";
    EXPECT_NE(fd, got);
    EXPECT_EQ(inode_of(fd), inode_of(got));
    EXPECT_NE(0, fcntl(got, F_GETFD) & FD_CLOEXEC);
    close(got);
    close(fd);
    // (a number far above this process's: closed fd's would be taken by
    // the pidfd the call opens in this same process)
    EXPECT_EQ(-FI_ENOENT, efa_fd_from_process(static_cast<uint32_t>(getpid()), 1000))
        << "a descriptor that is not open";
    EXPECT_EQ(-FI_EINVAL, efa_fd_from_process(0, 0));
    EXPECT_EQ(-FI_EINVAL, efa_fd_from_process(static_cast<uint32_t>(getpid()), -1));
}

} // namespace
