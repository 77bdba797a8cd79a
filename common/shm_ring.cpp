// On-node message channel: creating, attaching and releasing the
// shared-memory segments (the hot paths are inline in shm_ring.hpp).
#include "shm_ring.hpp"

#include <cerrno>
#include <new>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace efa::shm {

namespace {

size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

} // namespace

size_t Geometry::ring_bytes() const {
    return round_up(kRingControl + static_cast<size_t>(nslots) * slot_size, kPage);
}

size_t Geometry::total_bytes() const {
    return kPage + static_cast<size_t>(nrings) * ring_bytes();
}

bool Geometry::valid() const {
    return nrings > 0 && nrings <= 65536 && nslots >= 2 && nslots <= 65536 &&
           0 == (nslots & (nslots - 1)) && slot_size >= 2 * kLine && 0 == slot_size % kLine &&
           slot_size <= (1u << 24);
}

std::unique_ptr<Inbox> Inbox::create(const std::string &path, const Geometry &g, int &err) {
    err = 0;
    if (!g.valid()) {
        err = -EINVAL;
        return nullptr;
    }
    // A file left by an earlier job of the same name cannot be trusted.
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && EEXIST == errno) {
        (void)unlink(path.c_str());
        fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    }
    if (fd < 0) {
        err = -errno;
        return nullptr;
    }
    const size_t len = g.total_bytes();
    // Sparse: pages are allocated when a ring is first used.
    if (0 != ftruncate(fd, static_cast<off_t>(len))) {
        err = -errno;
        close(fd);
        (void)unlink(path.c_str());
        return nullptr;
    }
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int map_errno = errno;
    close(fd);
    if (MAP_FAILED == p) {
        err = -map_errno;
        (void)unlink(path.c_str());
        return nullptr;
    }
    std::unique_ptr<Inbox> in(new (std::nothrow) Inbox());
    if (!in) {
        munmap(p, len);
        (void)unlink(path.c_str());
        err = -ENOMEM;
        return nullptr;
    }
    in->path_ = path;
    in->geo_ = g;
    in->base_ = static_cast<uint8_t *>(p);
    in->len_ = len;
    in->tails_.assign(g.nrings, 0);
    in->active_.reserve(g.nrings);
    // The file is zero-filled: every counter and flag starts at 0.
    auto *h = new (p) SegHeader;
    h->version = kVersion;
    h->nrings = g.nrings;
    h->nslots = g.nslots;
    h->slot_size = g.slot_size;
    h->ring_offset = kPage;
    h->ring_bytes = g.ring_bytes();
    h->attach_seq.store(0, std::memory_order_relaxed);
    in->hdr_ = h;
    h->magic.store(kMagic, std::memory_order_release);
    return in;
}

Inbox::~Inbox() {
    if (base_) {
        // Senders keep their own mappings of the (unlinked) file: a late
        // frame lands in memory nobody reads, never in freed memory.
        (void)unlink(path_.c_str());
        munmap(base_, len_);
    }
}

void Inbox::rescan() {
    const uint32_t seq = hdr_->attach_seq.load(std::memory_order_acquire);
    active_.clear();
    for (uint32_t r = 0; r < geo_.nrings; ++r) {
        if (ring(r)->attached.load(std::memory_order_acquire)) {
            active_.push_back(r);
        }
    }
    seen_seq_.store(seq, std::memory_order_relaxed);
    any_.store(!active_.empty(), std::memory_order_relaxed);
}

uint64_t Inbox::waiting(uint32_t r) const {
    RingCtl *ctl = ring(r);
    return ctl->head.load(std::memory_order_acquire) - ctl->tail.load(std::memory_order_acquire);
}

std::unique_ptr<Outbox> Outbox::attach(const std::string &path, uint32_t r, int &err) {
    err = 0;
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        err = -errno;
        return nullptr;
    }
    struct stat st;
    if (0 != fstat(fd, &st) || static_cast<size_t>(st.st_size) < kPage) {
        close(fd);
        err = -EPROTO;
        return nullptr;
    }
    void *hp = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (MAP_FAILED == hp) {
        err = -errno;
        close(fd);
        return nullptr;
    }
    auto *h = static_cast<SegHeader *>(hp);
    Geometry g;
    g.nrings = h->nrings;
    g.nslots = h->nslots;
    g.slot_size = h->slot_size;
    if (kMagic != h->magic.load(std::memory_order_acquire) || kVersion != h->version ||
        !g.valid() || h->ring_offset != kPage || h->ring_bytes != g.ring_bytes() ||
        static_cast<size_t>(st.st_size) < g.total_bytes()) {
        munmap(hp, kPage);
        close(fd);
        err = -EPROTO;
        return nullptr;
    }
    if (r >= g.nrings) {
        munmap(hp, kPage);
        close(fd);
        err = -ERANGE;
        return nullptr;
    }
    // Only this sender's ring is mapped.
    const size_t len = g.ring_bytes();
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   static_cast<off_t>(kPage + r * len));
    const int map_errno = errno;
    close(fd);
    if (MAP_FAILED == p) {
        munmap(hp, kPage);
        err = -map_errno;
        return nullptr;
    }
    std::unique_ptr<Outbox> out(new (std::nothrow) Outbox());
    if (!out) {
        munmap(p, len);
        munmap(hp, kPage);
        err = -ENOMEM;
        return nullptr;
    }
    out->geo_ = g;
    out->map_ = static_cast<uint8_t *>(p);
    out->len_ = len;
    out->ctl_ = reinterpret_cast<RingCtl *>(p);
    out->slots_ = out->map_ + kRingControl;
    // A ring is attached once per job (one sender per local rank); a
    // re-attach (the component opened again) resumes where it was.
    out->head_ = out->ctl_->head.load(std::memory_order_relaxed);
    out->cached_tail_ = out->ctl_->tail.load(std::memory_order_acquire);
    out->ctl_->attached.store(1, std::memory_order_release);
    h->attach_seq.fetch_add(1, std::memory_order_acq_rel);
    munmap(hp, kPage);
    return out;
}

Outbox::~Outbox() {
    if (map_) {
        munmap(map_, len_);
    }
}

int Outbox::send(const void *buf, size_t len) {
    if (len > geo_.max_frame()) {
        return -EMSGSIZE;
    }
    void *dst = reserve(len);
    if (nullptr == dst) {
        return -EAGAIN;
    }
    if (len) {
        __builtin_memcpy(dst, buf, len);
    }
    commit(len);
    return 0;
}

} // namespace efa::shm
