// A CUDA allocation's id and synchronous-copy attribute (efa_cuda_pointer.h).
#include "efa_cuda_pointer.h"

#include <rdma/fi_errno.h>

namespace {
// cuda.h's values (the driver API is not built against: the backend takes
// the calls from the driver Open MPI loaded).
constexpr int kSyncMemops = 6;    // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
constexpr int kBufferId = 7;      // CU_POINTER_ATTRIBUTE_BUFFER_ID
constexpr int kDeviceOrdinal = 9; // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL (an int)
} // namespace

extern "C" int efa_cuda_buffer_id(const efa_cuda_pointer_calls_t *cu, const void *buf, uint64_t *id,
                                  bool *no_sync_memops) {
    unsigned long long got = 0;
    const auto ptr = reinterpret_cast<unsigned long long>(buf);
    if (0 != cu->get(&got, kBufferId, ptr) || 0 == got) {
        return -FI_EINVAL;
    }
    // Set on every call, as Open MPI's get_buffer_id does (the driver
    // keeps it per allocation; a set that is already set costs a call).
    // Any refusal counts: CUDA_ERROR_NOT_SUPPORTED is what VMM and pool
    // memory answer, and no other answer makes the copies synchronous.
    const int on = 1;
    *no_sync_memops = 0 != cu->set(&on, kSyncMemops, ptr);
    // Memory without synchronous copies (VMM, pool) may have another
    // physical allocation mapped at its address: keyed by both ids.
    unsigned long long block = 0;
    if (*no_sync_memops && 0 != cu->get(&block, EFA_CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, ptr)) {
        block = 0;
    }
    *id = efa_cuda_mix_block_id(got, block);
    return 0;
}

extern "C" int efa_cuda_device_ordinal(const efa_cuda_pointer_calls_t *cu, const void *buf,
                                       int *dev) {
    int got = -1;
    if (0 != cu->get(&got, kDeviceOrdinal, reinterpret_cast<unsigned long long>(buf)) || got < 0) {
        return -FI_EINVAL;
    }
    *dev = got;
    return 0;
}
