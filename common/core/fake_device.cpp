// The fake device of the tests (efa_device.h): memory the CPU cannot touch.
//
// Each allocation is a memfd mapped twice: once with no access at all (the
// address handed out, the "device" address) and once readable and
// writable (the fake's private view).  Only the fake's copy goes through
// the private view, so a component that reads or writes device memory
// with the CPU (a ring's memcpy, a single copy, a provider without
// FI_HMEM) takes SIGSEGV or EFAULT at once instead of working by chance.
// Freed memory is unmapped and forgotten: the same address handed out
// again by the kernel is host memory until the fake hands it out again.
// Contiguous buffers only: Open MPI packs a non-contiguous datatype with
// the CPU, which it never does for a real GPU's memory (it knows that
// memory, not the fake's).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

#include <rdma/fi_errno.h>

#include "efa_device.h"

namespace {

struct Region {
    size_t len;    // mapped bytes (whole pages)
    uint8_t *host; // the private view
};

std::mutex g_lock;
std::map<uintptr_t, Region> g_regions; // by device address

size_t page_round(size_t len) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (len + page - 1) / page * page;
}

// The private view of [p, p + len) if it lies inside one allocation, else
// nullptr.  Under g_lock.
uint8_t *host_view(const void *p, size_t len) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = g_regions.upper_bound(a);
    if (it == g_regions.begin()) {
        return nullptr;
    }
    --it;
    const uintptr_t base = it->first;
    if (a - base >= it->second.len || len > it->second.len - (a - base)) {
        return nullptr;
    }
    return it->second.host + (a - base);
}

int fake_check(const void *buf, size_t len) {
    std::lock_guard<std::mutex> guard(g_lock);
    return nullptr != host_view(buf, len ? len : 1) ? 1 : 0;
}

int fake_copy(void *dst, const void *src, size_t len) {
    std::lock_guard<std::mutex> guard(g_lock);
    uint8_t *d = host_view(dst, len);
    const uint8_t *s = host_view(src, len);
    // A side that is not the fake's is host memory; one that starts in an
    // allocation and runs past it is the caller's error, as a real
    // device's copy refuses it.
    if ((!d && host_view(dst, 1)) || (!s && host_view(src, 1))) {
        return -FI_EINVAL;
    }
    memmove(d ? d : static_cast<uint8_t *>(dst), s ? s : static_cast<const uint8_t *>(src), len);
    return 0;
}

void fake_release(void *buf) {
    efa_fake_device_free(buf);
}

const efa_device_ops_t g_fake_ops = {"fake", fake_check, fake_copy, fake_release};

} // namespace

extern "C" {

const efa_device_ops_t *efa_fake_device_ops(void) {
    return &g_fake_ops;
}

void *efa_fake_device_alloc(size_t len) {
    const size_t mapped = page_round(len ? len : 1);
    const int fd = memfd_create("efa-fake-device", MFD_CLOEXEC);
    if (fd < 0) {
        return nullptr;
    }
    void *dev = MAP_FAILED, *host = MAP_FAILED;
    if (0 == ftruncate(fd, static_cast<off_t>(mapped))) {
        dev = mmap(nullptr, mapped, PROT_NONE, MAP_SHARED, fd, 0);
        host = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd); // the mappings keep the memory
    if (MAP_FAILED == dev || MAP_FAILED == host) {
        if (MAP_FAILED != dev) {
            munmap(dev, mapped);
        }
        if (MAP_FAILED != host) {
            munmap(host, mapped);
        }
        return nullptr;
    }
    std::lock_guard<std::mutex> guard(g_lock);
    g_regions[reinterpret_cast<uintptr_t>(dev)] = Region{mapped, static_cast<uint8_t *>(host)};
    return dev;
}

void efa_fake_device_free(void *buf) {
    Region r{};
    {
        std::lock_guard<std::mutex> guard(g_lock);
        const auto it = g_regions.find(reinterpret_cast<uintptr_t>(buf));
        if (it == g_regions.end()) {
            return;
        }
        r = it->second;
        g_regions.erase(it);
    }
    munmap(r.host, r.len);
    munmap(buf, r.len);
}

size_t efa_fake_device_live(void) {
    std::lock_guard<std::mutex> guard(g_lock);
    return g_regions.size();
}

} // extern "C"
