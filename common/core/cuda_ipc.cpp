// CUDA's legacy IPC handles (efa_cuda_ipc.h).
#include "efa_cuda_ipc.h"

#include <cstring>

#include <rdma/fi_errno.h>

namespace {
// cuda.h's values (the driver API is not built against).
constexpr int kSyncMemops = 6;    // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
constexpr int kLegacyIpc = 10;    // CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE (an int)
constexpr unsigned kLazyPeer = 1; // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
} // namespace

static_assert(sizeof(efa_cu_ipc_handle_t) <= EFA_DEVICE_IPC_HANDLE_SIZE,
              "a CUDA IPC handle fits the seam's");

extern "C" int efa_cuda_ipc_export(const efa_cuda_ipc_calls_t *cu, const void *buf, size_t len,
                                   efa_device_ipc_t *out) {
    const auto p = reinterpret_cast<efa_cu_ptr_t>(buf);
    // Memory the driver says has no legacy handle (VMM, pool memory) is
    // not offered to cuIpcGetMemHandle: a handle of it, were one given,
    // could not be opened by the peer.  (A driver without the attribute:
    // the handle call decides.)
    int legacy = 1;
    if (cu->pointer_attribute && 0 != cu->pointer_attribute(&legacy, kLegacyIpc, p)) {
        legacy = 1;
    }
    efa_cu_ptr_t base = 0;
    size_t size = 0;
    if (0 == legacy || 0 == len || 0 != cu->address_range(&base, &size, p) || p < base ||
        p - base >= size || len > size - (p - base)) {
        return -FI_EINVAL;
    }
    // Synchronous copies into it finish before they return from now on
    // (the driver keeps it per allocation; memory that refuses it has no
    // legacy handle).  Set the first time, copies made before it may still
    // be landing (one from pageable memory returns before its DMA is
    // done): the default stream, behind which they queue, is waited for.
    int synchronous = 0;
    if (cu->set_attribute &&
        (!cu->pointer_attribute || 0 != cu->pointer_attribute(&synchronous, kSyncMemops, base) ||
         0 == synchronous)) {
        const int on = 1;
        (void)cu->set_attribute(&on, kSyncMemops, base);
        if (cu->stream_synchronize) {
            (void)cu->stream_synchronize(EFA_CU_STREAM_LEGACY);
        }
    }
    efa_cu_ipc_handle_t h;
    if (0 != cu->get_handle(&h, base)) {
        return -FI_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->handle, &h, sizeof(h));
    out->alloc_len = size;
    out->offset = p - base;
    return 0;
}

extern "C" int efa_cuda_ipc_import(const efa_cuda_ipc_calls_t *cu, const efa_device_ipc_t *in,
                                   void **base) {
    if (0 == in->alloc_len) {
        return -FI_EINVAL;
    }
    efa_cu_ipc_handle_t h;
    memcpy(&h, in->handle, sizeof(h));
    efa_cu_ptr_t p = 0;
    const int rc = cu->open_handle(&p, h, kLazyPeer);
    if (EFA_CUDA_ERROR_ALREADY_MAPPED == rc) {
        return -FI_EALREADY;
    }
    if (0 != rc) {
        return -FI_EACCES;
    }
    // The engine copies within alloc_len bytes from *base, as the sender
    // said: the mapping must hold them.  (Its range may start before p: the
    // driver may map the whole block a small cudaMalloc was carved from.)
    efa_cu_ptr_t start = 0;
    size_t size = 0;
    if (0 != cu->address_range(&start, &size, p) || p < start || p - start > size ||
        in->alloc_len > size - (p - start)) {
        (void)cu->close_handle(p);
        return -FI_EINVAL;
    }
    *base = reinterpret_cast<void *>(p);
    return 0;
}
