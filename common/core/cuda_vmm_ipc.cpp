// IPC of CUDA VMM memory between processes of a node (efa_cuda_vmm_ipc.h).
#include "efa_cuda_vmm_ipc.h"

#include <cstring>
#include <map>
#include <mutex>

#include <unistd.h>

#include <rdma/fi_errno.h>

namespace {

// cuda.h's values (the driver API is not built against: the backend takes
// the calls from the driver Open MPI loaded).
constexpr int kBufferId = 7;       // CU_POINTER_ATTRIBUTE_BUFFER_ID
constexpr int kPosixFd = 1;        // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
constexpr int kLocationDevice = 1; // CU_MEM_LOCATION_TYPE_DEVICE
constexpr int kReadWrite = 3;      // CU_MEM_ACCESS_FLAGS_PROT_READWRITE

// The allocation's name in efa_device_ipc_t.handle: what a receiver keeps
// its mapping under (the descriptor, which changes with every message, is
// in held, outside the name).
struct VmmName {
    char magic[8];
    uint64_t buffer_id;
};
static_assert(sizeof(VmmName) <= EFA_DEVICE_IPC_HANDLE_SIZE);
constexpr char kMagic[8] = "efacvmm";

// This process's mappings of other processes' allocations, and their
// lengths (what cuMemUnmap and cuMemAddressFree need back).
std::mutex g_lock;
std::map<efa_cu_ptr_t, size_t> g_mapped;

} // namespace

extern "C" bool efa_cuda_vmm_is_export(const efa_device_ipc_t *h) {
    return 0 != h->held && 0 == memcmp(h->handle, kMagic, sizeof(kMagic));
}

extern "C" int efa_cuda_vmm_export(const efa_cuda_vmm_calls_t *cu, const void *buf, size_t len,
                                   efa_device_ipc_t *out) {
    const auto p = reinterpret_cast<efa_cu_ptr_t>(buf);
    unsigned long long id = 0;
    efa_cu_ptr_t base = 0;
    size_t size = 0;
    if (0 != cu->pointer_attribute(&id, kBufferId, p) || 0 == id ||
        0 != cu->address_range(&base, &size, p) || p < base || p - base >= size ||
        len > size - (p - base)) {
        return -FI_EINVAL;
    }
    // The range the driver gave must start in the same physical
    // allocation, which a mapping always maps from its first byte: the
    // buffer's offset in it is then p - base.
    efa_cu_handle_t h = 0, at_base = 0;
    if (0 != cu->retain(&h, const_cast<void *>(buf))) {
        return -FI_EINVAL; // (not VMM memory)
    }
    bool one = false;
    if (0 == cu->retain(&at_base, reinterpret_cast<void *>(base))) {
        one = at_base == h;
        (void)cu->release(at_base);
    }
    int fd = -1;
    const bool exported = one && 0 == cu->export_handle(&fd, h, kPosixFd, 0) && fd >= 0;
    (void)cu->release(h); // (the retain's; the descriptor holds the memory)
    if (!exported) {
        return -FI_EINVAL; // (made without the descriptor handle type)
    }
    memset(out, 0, sizeof(*out));
    VmmName name{};
    memcpy(name.magic, kMagic, sizeof(kMagic));
    name.buffer_id = id;
    memcpy(out->handle, &name, sizeof(name));
    out->alloc_len = size;
    out->offset = p - base;
    out->held = static_cast<uint64_t>(fd) + 1;
    return 0;
}

extern "C" void efa_cuda_vmm_release(uint64_t held) {
    if (0 != held) {
        close(static_cast<int>(held - 1));
    }
}

extern "C" int efa_cuda_vmm_import(const efa_cuda_vmm_calls_t *cu, uint32_t pid,
                                   const efa_device_ipc_t *in, void **base) {
    if (!efa_cuda_vmm_is_export(in) || 0 == in->alloc_len || in->held > INT32_MAX) {
        return -FI_EINVAL;
    }
    const int fd = efa_fd_from_process(pid, static_cast<int>(in->held - 1));
    if (fd < 0) {
        return fd;
    }
    efa_cu_handle_t h = 0;
    const int rc =
        cu->import_handle(&h, reinterpret_cast<void *>(static_cast<intptr_t>(fd)), kPosixFd);
    close(fd); // (the imported handle holds the memory)
    if (0 != rc) {
        return -FI_EACCES;
    }
    int device = 0;
    efa_cu_ptr_t va = 0;
    const size_t len = in->alloc_len;
    if (0 != cu->context_device(&device) || 0 != cu->reserve(&va, len, 0, 0, 0)) {
        (void)cu->release(h);
        return -FI_ENOMEM;
    }
    if (0 != cu->map(va, len, 0, h, 0)) {
        (void)cu->address_free(va, len);
        (void)cu->release(h);
        return -FI_EINVAL; // (longer than the allocation: the sender's range was not it)
    }
    (void)cu->release(h); // (the mapping holds the memory)
    const efa_cu_access_desc_t access{kLocationDevice, device, kReadWrite};
    if (0 != cu->set_access(va, len, &access, 1)) {
        (void)cu->unmap(va, len);
        (void)cu->address_free(va, len);
        return -FI_EACCES; // (another device's memory without peer access)
    }
    {
        std::lock_guard<std::mutex> guard(g_lock);
        g_mapped[va] = len;
    }
    *base = reinterpret_cast<void *>(va);
    return 0;
}

extern "C" bool efa_cuda_vmm_close(const efa_cuda_vmm_calls_t *cu, void *base) {
    const auto va = reinterpret_cast<efa_cu_ptr_t>(base);
    size_t len = 0;
    {
        std::lock_guard<std::mutex> guard(g_lock);
        auto it = g_mapped.find(va);
        if (it == g_mapped.end()) {
            return false;
        }
        len = it->second;
        g_mapped.erase(it);
    }
    (void)cu->unmap(va, len);
    (void)cu->address_free(va, len);
    return true;
}
