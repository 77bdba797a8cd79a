// The stand-in CUDA driver of the VMM IPC unit tests (efa_cuda_vmm_ipc.h):
// its allocations are memfds, so that an export is a real descriptor the
// importer takes out of the exporter (efa_fd_from_process, here out of
// this same process) and the stand-in's import knows the allocation by
// the descriptor's file.  Used by test_cuda_vmm_ipc.cpp and
// test_cuda_vmm_notes.cpp.
#pragma once

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <vector>

#include "efa_cuda_vmm_ipc.h"

namespace vmm_standin {

struct Alloc {
    int memfd;
    size_t size;
    uint64_t buffer_id;
    bool posix_fd;        // made with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    void *pool = nullptr; // CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE (a pool's chunk)
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
    efa_cu_access_desc_t access{};              // the last given, the first of several
    std::vector<efa_cu_access_desc_t> accesses; // every descriptor of the last call
    bool several_refused = false;               // set_access refuses more than one device
    int refused_device = -1;                    // set_access refuses this device
    efa_cu_ptr_t near = 0;                      // the importer's memory, on device near_device
    int near_device = 5;
    int syncs = 0;                             // cuStreamSynchronize(CU_STREAM_LEGACY) calls
    std::map<efa_cu_ptr_t, size_t> access_set; // every range given access
    int map_rc = 0, access_rc = 0;
    int maps_before_failing = -1; // (-1: map never fails on its own)
    int accesses_before_failing = -1;
    int unmaps = 0, frees = 0;
    bool mempool_attribute = true; // answers CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE (CUDA 11.2+)
};

extern Driver d;
extern const efa_cuda_vmm_calls_t kCalls;
ino_t inode_of(int fd);
bool open_fd(int fd);
int open_fds(); // this process's open descriptors

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

} // namespace vmm_standin
