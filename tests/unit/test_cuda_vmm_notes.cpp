// IPC of CUDA VMM buffers over several allocations side by side
// (efa_cuda_vmm_ipc.h) against the stand-in driver (cuda_vmm_standin.hpp):
// the note the sender holds for such a message is read only where it is
// this message's (sealed, of the size its count gives, its ids giving the
// frame's name), a failed mapping of one piece leaves nothing behind,
// names past seven pieces hold a digest of them all, and exports in
// flight hold a bounded share of the process's descriptors.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include <rdma/fi_errno.h>

#include "cuda_vmm_standin.hpp"

namespace {

using namespace vmm_standin;

// A buffer over two allocations side by side, exported: what the notes
// below are taken from.
class CudaVmmNote : public CudaVmmIpc {
  protected:
    void export_two_pieces(efa_device_ipc_t *out) {
        make(kVa, kMiB2, 77);
        make(kVa + kMiB2, kMiB2, 78);
        ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa + 64), kMiB2, out));
    }
};

TEST_F(CudaVmmNote, ANoteThatIsNotTheMessagesIsRefused) {
    const auto pid = static_cast<uint32_t>(getpid());
    efa_device_ipc_t out{};
    ASSERT_NO_FATAL_FAILURE(export_two_pieces(&out));
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

TEST_F(CudaVmmNote, OnlyASealedNoteIsRead) {
    const auto pid = static_cast<uint32_t>(getpid());
    efa_device_ipc_t out{};
    ASSERT_NO_FATAL_FAILURE(export_two_pieces(&out));
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

// A frame's count beyond the most, and a note not of the size its count
// gives, are not this message's (nothing allocated for the count, nothing
// read past the header).
TEST_F(CudaVmmNote, AForgedCountOrNoteSizeIsRefused) {
    const auto pid = static_cast<uint32_t>(getpid());
    efa_device_ipc_t out{};
    ASSERT_NO_FATAL_FAILURE(export_two_pieces(&out));
    void *base = nullptr;
    for (uint32_t count : {uint32_t{EFA_CUDA_VMM_MAX_PIECES + 1}, uint32_t{0xffffffffu}, 1u, 3u}) {
        efa_device_ipc_t forged = out;
        memcpy(forged.handle + 4, &count, sizeof(count));
        EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_import(&kCalls, pid, &forged, &base)) << count;
    }
    // The note with one byte more, sealed.
    char note[4096];
    const ssize_t n = pread(static_cast<int>(out.held - 1), note, sizeof(note), 0);
    ASSERT_EQ(16 + 2 * 24, n);
    const int longer = memfd_create("note-longer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ASSERT_EQ(n + 1, pwrite(longer, note, static_cast<size_t>(n) + 1, 0));
    ASSERT_EQ(0,
              fcntl(longer, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE));
    efa_device_ipc_t wrong_size = out;
    wrong_size.held = static_cast<uint64_t>(longer) + 1;
    EXPECT_EQ(-FI_EINVAL, efa_cuda_vmm_import(&kCalls, pid, &wrong_size, &base));
    close(longer);
    EXPECT_TRUE(d.reserved.empty());
    efa_cuda_vmm_release(out.held);
}

// Exports in flight hold at most a quarter of the process's descriptors
// (soft RLIMIT_NOFILE): one beyond is refused, and the message streams.
TEST_F(CudaVmmIpc, ExportsHoldAtMostAQuarterOfTheProcesssDescriptors) {
    struct rlimit was {};
    ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &was));
    for (size_t i = 0; i < 20; ++i) {
        make(kVa + i * kMiB2, kMiB2, 300 + i);
    }
    ASSERT_LT(open_fds() + 11, 64) << "this process holds too many descriptors for the test";
    struct rlimit low = was;
    low.rlim_cur = 64; // a budget of 16
    ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &low));
    const int fds0 = open_fds();
    efa_device_ipc_t all{}, ten{}, again{};
    EXPECT_EQ(-FI_EAGAIN, efa_cuda_vmm_export(&kCalls, at(kVa), 20 * kMiB2, &all)) << "21 of 16";
    EXPECT_EQ(fds0, open_fds());
    ASSERT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa), 10 * kMiB2, &ten)); // 11 held
    EXPECT_EQ(-FI_EAGAIN, efa_cuda_vmm_export(&kCalls, at(kVa), 10 * kMiB2, &again));
    efa_cuda_vmm_release(ten.held);
    EXPECT_EQ(fds0, open_fds());
    EXPECT_EQ(0, efa_cuda_vmm_export(&kCalls, at(kVa), 10 * kMiB2, &again)) << "given back";
    efa_cuda_vmm_release(again.held);
    ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &was));
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
