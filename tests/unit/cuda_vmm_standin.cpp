// The stand-in CUDA driver of the VMM IPC unit tests (cuda_vmm_standin.hpp).
#include "cuda_vmm_standin.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

namespace vmm_standin {

Driver d;

namespace {

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
    if (9 == attribute && 0 != d.near && ptr == d.near) {
        *static_cast<int *>(data) = d.near_device;
        return 0;
    }
    if (17 == attribute && nullptr != a && d.mempool_attribute) {
        *static_cast<void **>(data) = a->pool;
        return 0;
    }
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
    if (count < 1 || count > 2 || (count > 1 && d.several_refused) || it == d.mapped.end() ||
        size != d.allocs.at(it->second).size) {
        return 1;
    }
    for (size_t i = 0; i < count; ++i) {
        if (desc[i].location_id == d.refused_device) {
            return 1;
        }
    }
    if (0 == d.accesses_before_failing--) {
        return 1;
    }
    d.access = *desc;
    d.accesses.assign(desc, desc + count);
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
int stream_synchronize(void *stream) {
    d.syncs += EFA_CU_STREAM_LEGACY == stream ? 1 : 0;
    return 0;
}

} // namespace

ino_t inode_of(int fd) {
    struct stat st {};
    return 0 == fstat(fd, &st) ? st.st_ino : 0;
}

const efa_cuda_vmm_calls_t kCalls = {pointer_attribute, address_range, retain,       export_handle,
                                     import_handle,     release,       reserve,      map,
                                     set_access,        unmap,         address_free, context_device,
                                     stream_synchronize};

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

} // namespace vmm_standin
