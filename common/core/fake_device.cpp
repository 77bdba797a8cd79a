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
// IPC: a peer of the node imports an allocation by opening its memfd
// through /proc/<pid>/fd (the same permission single copy needs) and maps
// it the same two ways; the memfd's name carries the allocation's serial
// number, so a handle of a freed allocation whose descriptor number was
// reused finds a different name and is refused.
// Visible (efa_fake_device_visible, the tests of FI_HMEM): the address
// handed out is mapped readable and writable too, and described as
// FI_HMEM_SYSTEM memory, so that a provider with FI_HMEM (shm) can carry
// it; its id for registrations is the serial number, and its memfd is its
// dmabuf.  Described as memory without synchronous memory operations
// (efa_fake_device_no_sync_memops), it stands for CUDA VMM memory, and its
// exports go as VMM memory's do (efa_cuda_vmm_ipc.h): each a duplicate of
// the memfd held for the one message (efa_device_ipc_t.held, closed by
// ipc_release), which the importer takes out of the exporter with
// efa_fd_from_process; the handle names the allocation by its serial.
// Pieces (efa_fake_device_pieces): an allocation made of several memfds
// mapped side by side into one reserved range, each piece an allocation
// of its own to hmem (its own id) as CUDA VMM's physical allocations are;
// a buffer or a copy may run from one piece into the next of the same
// allocation, never into another allocation that happens to follow.
// Contiguous buffers only: Open MPI packs a non-contiguous datatype with
// the CPU, which it never does for a real GPU's memory (it knows that
// memory, not the fake's).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <vector>

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "efa_device.h"
#include "fake_host_pin.hpp"

namespace {

struct Region {
    size_t len;          // mapped bytes (whole pages)
    uint8_t *host;       // the private view
    int fd;              // the memfd, kept for peers to import (-1: imported)
    uint64_t serial;     // this process's allocation number (its memfd's name)
    bool visible;        // mapped readable at the address handed out too (hmem)
    bool no_sync_memops; // described as VMM memory is (hmem)
    uint64_t group;      // pieces of one allocation: the first piece's serial (0: alone)
    size_t whole;        // the first piece: the allocation's bytes (0: not the first)
};

std::mutex g_lock;
std::map<uintptr_t, Region> g_regions; // by device address
uint64_t g_serial = 0;
std::atomic<bool> g_refuse_ipc{false};
std::atomic<bool> g_one_import{false}; // efa_fake_device_one_import
std::atomic<uint64_t> g_imports{0}, g_import_tries{0};
std::atomic<size_t> g_held{0}; // descriptors VMM-like exports hold now
std::atomic<bool> g_visible{false};
std::atomic<bool> g_offer_dmabuf{true};
std::atomic<bool> g_no_sync_memops{false};
std::atomic<size_t> g_piece{0}; // efa_fake_device_pieces

// What a handle of the fake holds.
struct FakeHandle {
    char magic[8];
    uint64_t serial;
    int32_t fd;
};
static_assert(sizeof(FakeHandle) <= EFA_DEVICE_IPC_HANDLE_SIZE);
constexpr char kMagic[8] = "efafake";

void memfd_name(uint64_t serial, char *buf, size_t len) {
    snprintf(buf, len, "efa-fake-device-%llu", static_cast<unsigned long long>(serial));
}

// Is the file at link (a /proc fd link) the memfd called name?  Its link
// reads "/memfd:NAME (deleted)".
bool names_memfd(const char *link, const char *name) {
    char target[128];
    const ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n < 0) {
        return false;
    }
    target[n] = 0;
    const size_t wl = strlen(name);
    return 0 == strncmp(target, "/memfd:", 7) && 0 == strncmp(target + 7, name, wl) &&
           (target[7 + wl] == 0 || target[7 + wl] == ' ');
}

// Both views of memfd fd's first len bytes: the device address (at 'at'
// where it is not nullptr: a piece's place in its reserved range), or
// nullptr.
void *map_both(int fd, size_t len, int own_fd, uint64_t serial, void *at = nullptr,
               uint64_t group = 0) {
    const bool visible = g_visible.load();
    const int prot = visible ? PROT_READ | PROT_WRITE : PROT_NONE;
    void *dev = mmap(at, len, prot, MAP_SHARED | (at ? MAP_FIXED : 0), fd, 0);
    void *host = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (MAP_FAILED == dev || MAP_FAILED == host) {
        if (MAP_FAILED != dev && !at) { // (a piece's place stays reserved)
            munmap(dev, len);
        }
        if (MAP_FAILED != host) {
            munmap(host, len);
        }
        return nullptr;
    }
    std::lock_guard<std::mutex> guard(g_lock);
    g_regions[reinterpret_cast<uintptr_t>(dev)] =
        Region{len,     static_cast<uint8_t *>(host),       own_fd, serial,
               visible, visible && g_no_sync_memops.load(), group,  0};
    return dev;
}

// Allocations of this process's own (imports have no descriptor).  Under
// g_lock.
size_t own_regions() {
    size_t n = 0;
    for (const auto &r : g_regions) {
        n += r.second.fd >= 0 ? 1 : 0;
    }
    return n;
}

size_t page_round(size_t len) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (len + page - 1) / page * page;
}

// The region holding address a, or end().  Under g_lock.
std::map<uintptr_t, Region>::iterator region_at(uintptr_t a) {
    auto it = g_regions.upper_bound(a);
    if (it == g_regions.begin()) {
        return g_regions.end();
    }
    --it;
    return a - it->first < it->second.len ? it : g_regions.end();
}

// Does [a, a + len) lie in the fake's memory: one region, or the pieces
// of one allocation side by side?  Under g_lock.
bool in_device(uintptr_t a, size_t len) {
    auto it = region_at(a);
    if (it == g_regions.end()) {
        return false;
    }
    for (;;) {
        const size_t run = it->second.len - (a - it->first);
        if (len <= run) {
            return true;
        }
        const auto next = std::next(it);
        if (0 == it->second.group || next == g_regions.end() ||
            next->first != it->first + it->second.len || next->second.group != it->second.group) {
            return false;
        }
        a += run;
        len -= run;
        it = next;
    }
}

// The private view of device address a and the bytes of its region from
// there.  Under g_lock; a lies in a region.
uint8_t *view_of(uintptr_t a, size_t *run) {
    const auto it = region_at(a);
    *run = it->second.len - (a - it->first);
    return it->second.host + (a - it->first);
}

int fake_check(const void *buf, size_t len) {
    std::lock_guard<std::mutex> guard(g_lock);
    return in_device(reinterpret_cast<uintptr_t>(buf), len ? len : 1) ? 1 : 0;
}

int fake_copy(void *dst, const void *src, size_t len) {
    std::lock_guard<std::mutex> guard(g_lock);
    auto d = reinterpret_cast<uintptr_t>(dst);
    auto s = reinterpret_cast<uintptr_t>(src);
    // A side that is not the fake's is host memory; one that starts in an
    // allocation and runs past it is the caller's error, as a real
    // device's copy refuses it.
    const bool d_dev = region_at(d) != g_regions.end();
    const bool s_dev = region_at(s) != g_regions.end();
    if ((d_dev && !in_device(d, len)) || (s_dev && !in_device(s, len))) {
        return -FI_EINVAL;
    }
    std::vector<uint8_t> bounce; // (both the device's and overlapping: the source first)
    if (d_dev && s_dev && d < s + len && s < d + len) {
        bounce.resize(len);
        for (size_t off = 0, run = 0; off < len; off += run) {
            const uint8_t *from = view_of(s + off, &run);
            run = std::min(run, len - off);
            memcpy(bounce.data() + off, from, run);
        }
        s = reinterpret_cast<uintptr_t>(bounce.data());
    }
    const bool s_view = s_dev && bounce.empty();
    while (len > 0) { // a piece at a time where a side runs over pieces
        size_t d_run = len, s_run = len;
        uint8_t *to = d_dev ? view_of(d, &d_run) : reinterpret_cast<uint8_t *>(d);
        const uint8_t *from = s_view ? view_of(s, &s_run) : reinterpret_cast<const uint8_t *>(s);
        const size_t n = std::min({len, d_run, s_run});
        memmove(to, from, n);
        d += n;
        s += n;
        len -= n;
    }
    return 0;
}

void fake_release(void *buf) {
    efa_fake_device_free(buf);
}

// The allocation that holds all of [a, a + len), and its address in
// *base; nullptr if none does.  Under g_lock.
const Region *region_of(uintptr_t a, size_t len, uintptr_t *base) {
    auto it = g_regions.upper_bound(a);
    if (it == g_regions.begin()) {
        return nullptr;
    }
    --it;
    if (a - it->first >= it->second.len || len > it->second.len - (a - it->first)) {
        return nullptr;
    }
    *base = it->first;
    return &it->second;
}

int fake_ipc_export(const void *buf, size_t len, efa_device_ipc_t *out) {
    const auto a = reinterpret_cast<uintptr_t>(buf);
    std::lock_guard<std::mutex> guard(g_lock);
    uintptr_t base = 0;
    const Region *r = region_of(a, len, &base);
    if (!r || r->fd < 0) {
        return -FI_EINVAL; // not (all) one allocation of this process's own
    }
    FakeHandle h{};
    memcpy(h.magic, kMagic, sizeof(h.magic));
    h.serial = r->serial;
    h.fd = r->fd;
    memset(out, 0, sizeof(*out));
    if (r->no_sync_memops) { // (as CUDA VMM memory: a descriptor for this message)
        const int held = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
        if (held < 0) {
            return -FI_EMFILE;
        }
        g_held.fetch_add(1);
        h.fd = -1; // (not the allocation's name: it changes with each message)
        out->held = static_cast<uint64_t>(held) + 1;
    }
    memcpy(out->handle, &h, sizeof(h));
    out->alloc_len = r->len;
    out->offset = a - base;
    return 0;
}

int fake_ipc_import(uint32_t pid, const efa_device_ipc_t *in, const void *, void **base) {
    FakeHandle h;
    memcpy(&h, in->handle, sizeof(h));
    g_import_tries.fetch_add(1);
    const int theirs = 0 != in->held ? static_cast<int>(in->held - 1) : h.fd;
    if (g_one_import.load()) {
        std::lock_guard<std::mutex> guard(g_lock);
        if (g_regions.size() > own_regions()) {
            return -FI_EALREADY; // (as CUDA's "already mapped")
        }
    }
    if (g_refuse_ipc.load() || 0 != memcmp(h.magic, kMagic, sizeof(h.magic)) || theirs < 0 ||
        0 == in->alloc_len || in->alloc_len > (uint64_t{1} << 40) || in->held > INT32_MAX) {
        return -FI_EINVAL;
    }
    char path[64], want[64];
    snprintf(path, sizeof(path), "/proc/%u/fd/%d", pid, theirs);
    memfd_name(h.serial, want, sizeof(want));
    // (a held descriptor is taken out of the exporter as CUDA VMM's is)
    const int fd =
        0 != in->held ? efa_fd_from_process(pid, theirs) : open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        return -FI_EACCES;
    }
    // The file opened, not the name at that path a moment before, must be
    // that allocation (not a later one that took its descriptor number).
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    if (!names_memfd(self, want)) {
        close(fd);
        return -FI_ENOENT;
    }
    struct stat st {};
    void *dev = nullptr;
    if (0 == fstat(fd, &st) && static_cast<uint64_t>(st.st_size) >= in->alloc_len) {
        dev = map_both(fd, in->alloc_len, -1, h.serial);
    }
    close(fd); // the mappings keep the memory
    if (nullptr == dev) {
        return -FI_ENOMEM;
    }
    g_imports.fetch_add(1);
    *base = dev;
    return 0;
}

void fake_ipc_close(void *base) {
    efa_fake_device_free(base);
}

void fake_ipc_release(uint64_t held) {
    close(static_cast<int>(held - 1));
    g_held.fetch_sub(1);
}

// The allocation (piece) holding buf; the buffer may run on into the next
// piece (efa_device.h), which the core asks for in turn.
int fake_hmem(const void *buf, size_t len, efa_device_hmem_t *out) {
    (void)len;
    std::lock_guard<std::mutex> guard(g_lock);
    uintptr_t base = 0;
    const Region *r = region_of(reinterpret_cast<uintptr_t>(buf), 1, &base);
    if (!r || !r->visible) {
        return -FI_EINVAL; // (the CPU-blind kind: no provider could read it)
    }
    out->iface = FI_HMEM_SYSTEM;
    out->device = 0;
    out->buffer_id = r->serial;
    out->base = base;
    out->len = r->len;
    out->no_sync_memops = r->no_sync_memops;
    return 0;
}

// A visible allocation's dmabuf: its memfd (a duplicate, for the caller
// to close), the allocation from its first byte.  (A provider that takes
// FI_MR_DMABUF for FI_HMEM_SYSTEM memory reaches it at base_addr +
// offset, the address handed out.)
int fake_dmabuf(const efa_device_hmem_t *alloc, int *fd, uint64_t *offset) {
    if (!g_offer_dmabuf.load()) {
        return -FI_EOPNOTSUPP;
    }
    std::lock_guard<std::mutex> guard(g_lock);
    const auto it = g_regions.find(alloc->base);
    if (it == g_regions.end() || !it->second.visible || it->second.fd < 0 ||
        alloc->len > it->second.len) {
        return -FI_EINVAL;
    }
    const int dup_fd = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0) {
        return -FI_EMFILE;
    }
    *fd = dup_fd;
    *offset = 0;
    return 0;
}

const efa_device_ops_t g_fake_ops = {
    .name = "fake",
    .check = fake_check,
    .copy = fake_copy,
    .release = fake_release,
    .ipc_export = fake_ipc_export,
    .ipc_import = fake_ipc_import,
    .ipc_close = fake_ipc_close,
    .ipc_release = fake_ipc_release,
    .hmem = fake_hmem,
    .dmabuf = fake_dmabuf,
    .host_register = efa::fake::host_register,
    .host_unregister = efa::fake::host_unregister,
};

} // namespace

namespace {
// One allocation (a piece where 'at' is given: its place in the reserved range, and 'group'
// the allocation's): a new memfd of mapped bytes, both views; the device address or nullptr.
void *alloc_one(size_t mapped, void *at, uint64_t group) {
    uint64_t serial;
    {
        std::lock_guard<std::mutex> guard(g_lock);
        serial = ++g_serial;
    }
    char name[64];
    memfd_name(serial, name, sizeof(name));
    const int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
        return nullptr;
    }
    void *dev = nullptr;
    if (0 == ftruncate(fd, static_cast<off_t>(mapped))) {
        dev = map_both(fd, mapped, fd, serial, at, group); // fd kept: peers import through it
    }
    if (nullptr == dev) {
        close(fd);
    }
    return dev;
}

// The regions of the allocation at buf (its pieces, or it alone), taken
// out of the map.  Under g_lock.
std::vector<std::pair<uintptr_t, Region>> take_allocation(uintptr_t a) {
    std::vector<std::pair<uintptr_t, Region>> out;
    auto it = g_regions.find(a);
    if (it == g_regions.end() || (it->second.group && 0 == it->second.whole)) {
        return out; // (not an allocation's first byte: a piece after the first)
    }
    const uint64_t group = it->second.group;
    const uintptr_t end = a + (group ? it->second.whole : it->second.len);
    while (it != g_regions.end() && it->first < end && (it->first == a || group)) {
        out.emplace_back(it->first, it->second);
        it = g_regions.erase(it);
    }
    return out;
}
} // namespace

extern "C" {

const efa_device_ops_t *efa_fake_device_ops(void) {
    return &g_fake_ops;
}

void *efa_fake_device_alloc(size_t len) {
    const size_t mapped = page_round(len ? len : 1);
    const size_t piece = g_piece.load();
    if (0 == piece || mapped <= piece) {
        return alloc_one(mapped, nullptr, 0);
    }
    // Pieces side by side in one reserved range (as cuMemAddressReserve and
    // cuMemMap per piece): each maps over its part of the reservation.
    const size_t n = (mapped + piece - 1) / piece;
    void *range =
        mmap(nullptr, n * piece, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (MAP_FAILED == range) {
        return nullptr;
    }
    auto *at = static_cast<uint8_t *>(range);
    uint64_t group = 0;
    for (size_t i = 0; i < n; ++i) {
        if (nullptr == alloc_one(piece, at + i * piece, group)) {
            std::lock_guard<std::mutex> guard(g_lock);
            for (auto &r : take_allocation(reinterpret_cast<uintptr_t>(at))) {
                munmap(r.second.host, r.second.len);
                close(r.second.fd);
            }
            munmap(range, n * piece);
            return nullptr;
        }
        std::lock_guard<std::mutex> guard(g_lock);
        Region &r = g_regions[reinterpret_cast<uintptr_t>(at + i * piece)];
        if (0 == i) {
            group = r.serial; // the allocation's name: its first piece's
            r.whole = n * piece;
        }
        r.group = group;
    }
    return range;
}

void *efa_fake_device_alloc_at(void *at, size_t len) {
    return nullptr == at ? nullptr : alloc_one(page_round(len ? len : 1), at, 0);
}

void efa_fake_device_free(void *buf) {
    std::vector<std::pair<uintptr_t, Region>> pieces;
    {
        std::lock_guard<std::mutex> guard(g_lock);
        pieces = take_allocation(reinterpret_cast<uintptr_t>(buf));
    }
    if (pieces.empty()) {
        return;
    }
    size_t whole = 0;
    for (const auto &p : pieces) {
        munmap(p.second.host, p.second.len);
        if (p.second.fd >= 0) {
            close(p.second.fd);
        }
        whole += p.second.len;
    }
    munmap(buf, whole); // (the pieces' reserved range too)
}

size_t efa_fake_device_live(void) {
    std::lock_guard<std::mutex> guard(g_lock);
    return own_regions();
}

size_t efa_fake_device_imported(void) {
    std::lock_guard<std::mutex> guard(g_lock);
    return g_regions.size() - own_regions();
}

void efa_fake_device_refuse_ipc(bool refuse) {
    g_refuse_ipc.store(refuse);
}

void efa_fake_device_one_import(bool one) {
    g_one_import.store(one);
}

uint64_t efa_fake_device_imports(void) {
    return g_imports.load();
}

size_t efa_fake_device_held(void) {
    return g_held.load();
}

uint64_t efa_fake_device_import_tries(void) {
    return g_import_tries.load();
}

void efa_fake_device_visible(bool visible) {
    g_visible.store(visible);
}

void efa_fake_device_dmabuf(bool offer) {
    g_offer_dmabuf.store(offer);
}

void efa_fake_device_no_sync_memops(bool none) {
    g_no_sync_memops.store(none);
}

void efa_fake_device_pieces(size_t piece) {
    g_piece.store(piece ? page_round(piece) : 0);
}

int efa_fake_device_remap_piece(void *at) {
    const auto a = reinterpret_cast<uintptr_t>(at);
    uint64_t serial;
    size_t len;
    {
        std::lock_guard<std::mutex> guard(g_lock);
        const auto it = g_regions.find(a);
        if (it == g_regions.end() || 0 == it->second.group || it->second.fd < 0) {
            return -1;
        }
        len = it->second.len;
        serial = ++g_serial;
    }
    char name[64];
    memfd_name(serial, name, sizeof(name));
    const int fd = memfd_create(name, MFD_CLOEXEC);
    void *host = MAP_FAILED;
    if (fd >= 0 && 0 == ftruncate(fd, static_cast<off_t>(len))) {
        host = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    Region old{};
    bool done = false;
    if (MAP_FAILED != host) {
        // The new memory replaces the old device view in place (a fixed
        // mapping over it: no munmap for the memory hooks to see), under the
        // lock, so that the piece cannot be freed meanwhile.
        std::lock_guard<std::mutex> guard(g_lock);
        const auto it = g_regions.find(a);
        if (it != g_regions.end() && it->second.len == len && it->second.fd >= 0) {
            Region &r = it->second;
            const int prot = r.visible ? PROT_READ | PROT_WRITE : PROT_NONE;
            if (MAP_FAILED != mmap(at, len, prot, MAP_SHARED | MAP_FIXED, fd, 0)) {
                old = r;
                r.host = static_cast<uint8_t *>(host);
                r.fd = fd;
                r.serial = serial;
                done = true;
            }
        }
    }
    if (!done) {
        if (MAP_FAILED != host) {
            munmap(host, len);
        }
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    munmap(old.host, old.len);
    close(old.fd);
    return 0;
}

} // extern "C"
