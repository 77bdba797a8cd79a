// On-node message channel: creating, attaching and releasing the
// shared-memory segments (the hot paths are inline in shm_ring.hpp).
#include "shm_ring.hpp"

#include <algorithm>
#include <cstring>

#include <cerrno>
#include <new>

#include <ctime>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "efa_device.h"
#include "efa_shm_ring.h"

#include <rdma/fi_errno.h>

namespace efa::shm {

namespace {

size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

} // namespace

uint64_t random_cookie() {
    uint64_t x = 0;
    // getrandom: the kernel's CSPRNG, so another user cannot guess it from
    // the time or the pid.  It only fails before the pool is seeded at
    // boot (EAGAIN with GRND_NONBLOCK) or where the call is filtered; the
    // clock then still makes a stale file of an earlier job differ.
    if (static_cast<ssize_t>(sizeof(x)) != getrandom(&x, sizeof(x), GRND_NONBLOCK)) {
        timespec ts{};
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = (static_cast<uint64_t>(getpid()) << 40) ^ static_cast<uint64_t>(ts.tv_nsec) ^
            (static_cast<uint64_t>(ts.tv_sec) << 20);
        x += 0x9e3779b97f4a7c15ull; // splitmix64 finaliser: spread the bits
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        x ^= x >> 31;
    }
    return x ? x : 1;
}

size_t Geometry::ring_bytes() const {
    return round_up(kRingControl + static_cast<size_t>(nslots) * slot_size, kPage);
}

size_t Geometry::total_bytes() const {
    return kPage + static_cast<size_t>(nrings) * ring_bytes();
}

bool Geometry::valid() const {
    return nrings > 0 && nrings <= EFA_SHM_RING_MAX_SLOTS && nslots >= 2 &&
           nslots <= EFA_SHM_RING_MAX_SLOTS && 0 == (nslots & (nslots - 1)) &&
           slot_size >= 2 * kLine && 0 == slot_size % kLine && slot_size <= (1u << 24);
}

// Create path exclusively.  What is already there is replaced only when it
// can be nothing but an earlier inbox of this user (a job of the same id
// that died): a regular file of ours, mode 0600, one link.  Anything else
// (another user's file, a symbolic link, a directory) is refused and left
// as it is.
static int create_exclusive(const std::string &path, int &err) {
    constexpr int kFlags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(path.c_str(), kFlags, 0600);
    if (fd < 0 && EEXIST == errno) {
        struct stat st;
        if (0 == lstat(path.c_str(), &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
            0600 == (st.st_mode & 07777) && 1 == st.st_nlink) {
            (void)unlink(path.c_str());
            fd = open(path.c_str(), kFlags, 0600);
        } else {
            errno = EEXIST;
        }
    }
    if (fd < 0) {
        err = -errno;
        return -1;
    }
    // The umask may have taken bits away; senders need exactly these.
    if (0 != fchmod(fd, 0600)) {
        err = -errno;
        close(fd);
        (void)unlink(path.c_str());
        return -1;
    }
    return fd;
}

// posix_fallocate returns its error instead of setting errno.  On tmpfs
// a signal that arrives meanwhile (a profiler's timer, SA_RESTART or not)
// ends it with EINTR and undoes that call's pages: the range is reserved a
// piece at a time, each piece short enough to go through between two ticks
// of a fast timer, and a piece interrupted is asked for again.
static int reserve_space(int fd, size_t off, size_t len) {
    constexpr size_t kPiece = size_t{1} << 20;
    constexpr int kInterruptedMax = 1000;
    int interrupted = 0;
    for (size_t done = 0; done < len;) {
        const size_t n = std::min(kPiece, len - done);
        const int rc = posix_fallocate(fd, static_cast<off_t>(off + done), static_cast<off_t>(n));
        if (EINTR == rc && ++interrupted < kInterruptedMax) {
            continue;
        }
        if (0 != rc) {
            return -rc;
        }
        done += n;
    }
    return 0;
}

std::unique_ptr<Inbox> Inbox::create(const std::string &path, const Geometry &g, int &err,
                                     bool reserve_all) {
    err = 0;
    if (!g.valid()) {
        err = -EINVAL;
        return nullptr;
    }
    const uint64_t cookie = random_cookie();
    int fd = create_exclusive(path, err);
    if (fd < 0) {
        return nullptr;
    }
    const size_t len = g.total_bytes();
    if (0 != ftruncate(fd, static_cast<off_t>(len))) {
        err = -errno;
        close(fd);
        (void)unlink(path.c_str());
        return nullptr;
    }
    // Pages the owner reads (header, every ring's control page) or, with
    // reserve_all, every page: a store into a hole of a full tmpfs would
    // raise SIGBUS.
    int rc = reserve_space(fd, 0, reserve_all ? len : kPage);
    for (uint32_t r = 0; 0 == rc && !reserve_all && r < g.nrings; ++r) {
        rc = reserve_space(fd, kPage + r * g.ring_bytes(), kPage);
    }
    if (0 != rc) {
        err = rc;
        close(fd);
        (void)unlink(path.c_str());
        return nullptr;
    }
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int map_errno = errno;
    if (MAP_FAILED == p) {
        close(fd);
        err = -map_errno;
        (void)unlink(path.c_str());
        return nullptr;
    }
    std::unique_ptr<Inbox> in(new (std::nothrow) Inbox());
    if (!in) {
        close(fd);
        munmap(p, len);
        (void)unlink(path.c_str());
        err = -ENOMEM;
        return nullptr;
    }
    in->path_ = path;
    in->geo_ = g;
    in->ring_bytes_ = g.ring_bytes();
    in->cookie_ = cookie;
    in->base_ = static_cast<uint8_t *>(p);
    in->len_ = len;
    in->fd_ = fd;
    in->tails_.assign(g.nrings, 0);
    in->resume_.assign(static_cast<size_t>(g.nrings) + 1, 0);
    in->active_.assign(g.nrings, 0);
    // The file is zero-filled: every counter and flag starts at 0.
    auto *h = new (p) SegHeader;
    HeaderImage &f = h->image;
    f.version = kVersion;
    f.nrings = g.nrings;
    f.nslots = g.nslots;
    f.slot_size = g.slot_size;
    f.ring_offset = kPage;
    f.ring_bytes = g.ring_bytes();
    f.cookie = cookie;
    h->attach_seq.store(0, std::memory_order_relaxed);
    h->doorbell = 0;
    h->closed.store(0, std::memory_order_relaxed);
    in->hdr_ = h;
    efa_ring_consumer_t &c = in->c_;
    c.rings = in->base_ + kPage;
    c.nrings = g.nrings;
    c.ring_bytes = in->ring_bytes_;
    c.mask = g.nslots - 1;
    c.slot_size = g.slot_size;
    c.max_frame = g.max_frame();
    c.attach_seq = reinterpret_cast<const uint32_t *>(&h->attach_seq);
    c.active = in->active_.data();
    c.tails = in->tails_.data();
    c.resume = in->resume_.data();
    __atomic_store_n(&f.magic, kMagic, __ATOMIC_RELEASE);
    return in;
}

Inbox::~Inbox() {
    if (base_) {
        hdr_->closed.store(1, std::memory_order_release); // (a clean end: no loss)
        // Senders keep their own mappings of the (unlinked) file: a late
        // frame lands in memory nobody reads, never in freed memory.  The
        // name is unlinked only while it is still this file's: someone
        // else may have removed it and another job of the user made a
        // file of its own there.
        struct stat mine, named;
        if (fd_ < 0 || (0 == fstat(fd_, &mine) && 0 == lstat(path_.c_str(), &named) &&
                        mine.st_dev == named.st_dev && mine.st_ino == named.st_ino)) {
            (void)unlink(path_.c_str());
        }
        munmap(base_, len_);
    }
    if (fd_ >= 0) {
        close(fd_);
    }
}

int Inbox::reserve_rings(uint32_t first, uint32_t count) {
    if (first > geo_.nrings || count > geo_.nrings - first) {
        return -ERANGE;
    }
    return 0 == count ? 0 : reserve_space(fd_, kPage + first * ring_bytes_, count * ring_bytes_);
}

extern "C" bool efa_ring_cpu_demotes(void) {
#if defined(__x86_64__)
    // CPUID leaf 7, subleaf 0: ECX bit 25 is CLDEMOTE.
    static const bool has = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        return 0 != __get_cpuid_count(7, 0, &a, &b, &c, &d) && 0 != (c & (1u << 25));
    }();
    return has;
#else
    return false;
#endif
}

extern "C" void efa_ring_consumer_rescan(efa_ring_consumer_t *c) {
    const uint32_t seq = __atomic_load_n(c->attach_seq, __ATOMIC_ACQUIRE);
    uint32_t n = 0;
    for (uint32_t r = 0; r < c->nrings; ++r) {
        const uint8_t *ctl = c->rings + r * c->ring_bytes;
        if (__atomic_load_n(reinterpret_cast<const uint32_t *>(ctl + EFA_RING_ATTACHED_OFFSET),
                            __ATOMIC_ACQUIRE)) {
            c->active[n++] = r;
        }
    }
    __atomic_store_n(&c->nactive, n, __ATOMIC_RELAXED);
    __atomic_store_n(&c->seen_seq, seq, __ATOMIC_RELAXED);
}

uint32_t Inbox::sender(uint32_t r) const {
    if (r >= geo_.nrings) {
        return kSenderNone;
    }
    const uint32_t v = ring(r)->attached.load(std::memory_order_acquire);
    return kSenderNone == v || kSenderLeft == v ? v : kSenderAttached;
}

uint64_t Inbox::waiting(uint32_t r) const {
    RingCtl *ctl = ring(r);
    return ctl->head.load(std::memory_order_acquire) - ctl->tail.load(std::memory_order_acquire);
}

// Is the open file one this user's job created for its own use: a regular
// file of ours, closed to others, with one link?  0 or a negative errno.
// links: the links the file may have (1 by name; 0 or 1 for the owner's own
// descriptor, whose name may be gone).
static int check_owner(int fd, struct stat &st, nlink_t links) {
    if (0 != fstat(fd, &st)) {
        return -errno;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || 0 != (st.st_mode & 077) ||
        st.st_nlink > 1 || st.st_nlink < links) {
        return -EACCES;
    }
    return 0;
}

std::unique_ptr<Outbox> Outbox::attach(const std::string &path, uint32_t r, uint64_t cookie,
                                       int &err) {
    err = 0;
    // O_NOFOLLOW: a link is refused (-ELOOP); O_NONBLOCK: a FIFO planted at
    // the name does not block the open (fstat refuses it then).
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        err = -errno;
        return nullptr;
    }
    return attach_fd(fd, 1, r, cookie, err);
}

std::unique_ptr<Outbox> Outbox::attach_from_process(uint32_t pid, int owner_fd, uint32_t r,
                                                    uint64_t cookie, int &err) {
    const int fd = efa_fd_from_process(pid, owner_fd);
    if (fd < 0) {
        err = fd == -FI_ENOENT   ? -ENOENT
              : fd == -FI_ENOSYS ? -ENOSYS
              : fd == -FI_EMFILE ? -EMFILE
              : fd == -FI_ENOMEM ? -ENOMEM
                                 : -EACCES;
        return nullptr;
    }
    return attach_fd(fd, 0, r, cookie, err);
}

std::unique_ptr<Outbox> Outbox::attach_fd(int fd, nlink_t links, uint32_t r, uint64_t cookie,
                                          int &err) {
    err = 0;
    struct stat st;
    err = check_owner(fd, st, links);
    if (0 != err) {
        close(fd);
        return nullptr;
    }
    // The header, read once; only this copy is used from here on.
    HeaderImage h{};
    if (static_cast<size_t>(st.st_size) < kPage ||
        sizeof(h) != static_cast<size_t>(pread(fd, &h, sizeof(h), 0))) {
        close(fd);
        err = -EPROTO;
        return nullptr;
    }
    Geometry g;
    g.nrings = h.nrings;
    g.nslots = h.nslots;
    g.slot_size = h.slot_size;
    if (kMagic != h.magic || kVersion != h.version || !g.valid() || h.ring_offset != kPage ||
        h.ring_bytes != g.ring_bytes() || static_cast<size_t>(st.st_size) != g.total_bytes()) {
        close(fd);
        err = -EPROTO;
        return nullptr;
    }
    if (h.cookie != cookie) {
        close(fd);
        err = -EKEYREJECTED;
        return nullptr;
    }
    if (r >= g.nrings) {
        close(fd);
        err = -ERANGE;
        return nullptr;
    }
    // Only this sender's ring is mapped, once its pages are reserved.
    const size_t len = g.ring_bytes();
    const size_t off = kPage + static_cast<size_t>(r) * len;
    err = reserve_space(fd, off, len);
    if (0 != err) {
        close(fd);
        return nullptr;
    }
    void *hp = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (MAP_FAILED == hp) {
        err = -errno;
        close(fd);
        return nullptr;
    }
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(off));
    const int map_errno = errno;
    close(fd);
    if (MAP_FAILED == p) {
        munmap(hp, kPage);
        err = -map_errno;
        return nullptr;
    }
    auto *ctl = reinterpret_cast<RingCtl *>(p);
    // A re-attach (the component opened again) resumes where the ring is;
    // counters that cannot be (more in flight than slots) are corruption.
    const uint64_t head = ctl->head.load(std::memory_order_relaxed);
    const uint64_t tail = ctl->tail.load(std::memory_order_acquire);
    std::unique_ptr<Outbox> out(head - tail <= g.nslots ? new (std::nothrow) Outbox() : nullptr);
    if (!out) {
        munmap(p, len);
        munmap(hp, kPage);
        err = head - tail <= g.nslots ? -ENOMEM : -EPROTO;
        return nullptr;
    }
    out->geo_ = g;
    out->map_ = static_cast<uint8_t *>(p);
    out->len_ = len;
    efa_ring_producer_t &pr = out->p_;
    pr.ctl = out->map_;
    pr.slots = out->map_ + kRingControl;
    pr.head = head;
    pr.cached_tail = tail;
    pr.nslots = g.nslots;
    pr.slot_size = g.slot_size;
    pr.max_frame = g.max_frame();
    // The path counts, as the C side sees them (the same words).
    static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
    static_assert(sizeof(std::atomic<bool>) == sizeof(uint8_t));
    static_assert(counts::kRingBytes == counts::kRingFrames + 1);
    pr.counts = reinterpret_cast<uint64_t *>(&counts::g_counts[counts::kRingFrames]);
    pr.counts_shared = reinterpret_cast<const uint8_t *>(&counts::g_shared);
    pr.demote = efa_ring_cpu_demotes() ? 1 : 0;
    // The header stays mapped for its doorbell.
    out->hdr_map_ = hp;
    pr.bell = &static_cast<SegHeader *>(hp)->doorbell;
    // (A re-attach after an orderly leave: attached again.)
    ctl->attached.store(kSenderAttached, std::memory_order_release);
    out->attached_ = true;
    static_cast<SegHeader *>(hp)->attach_seq.fetch_add(1, std::memory_order_acq_rel);
    return out;
}

Outbox::~Outbox() {
    if (map_ && attached_) {
        // An orderly leave (a process that dies never gets here): after
        // every frame it committed, before its process can exit, so that
        // an owner that saw the exit finds the mark (Inbox::sender).
        reinterpret_cast<RingCtl *>(map_)->attached.store(kSenderLeft, std::memory_order_release);
    }
    if (map_) {
        munmap(map_, len_);
    }
    if (hdr_map_) {
        munmap(hdr_map_, kPage);
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

// The C seam (efa_shm_ring.h)

extern "C" {

efa_shm_inbox_t *efa_shm_inbox_create(const char *path, unsigned nrings, unsigned nslots,
                                      size_t slot_size, int *err) {
    efa::shm::Geometry g;
    g.nrings = nrings;
    g.nslots = nslots;
    g.slot_size = static_cast<uint32_t>(slot_size);
    int rc = 0;
    auto in = efa::shm::Inbox::create(path, g, rc);
    if (!in) {
        if (err) {
            *err = rc;
        }
        return nullptr;
    }
    return new efa_shm_inbox{std::move(in)};
}

uint64_t efa_shm_inbox_cookie(const efa_shm_inbox_t *inbox) {
    return inbox->in->cookie();
}

uint64_t efa_shm_inbox_dropped(const efa_shm_inbox_t *inbox) {
    return inbox->in->dropped();
}

void efa_shm_inbox_destroy(efa_shm_inbox_t *inbox) {
    delete inbox;
}

int efa_shm_inbox_poll(efa_shm_inbox_t *inbox, efa_shm_deliver_fn fn, void *arg, int budget) {
    return inbox->in->poll(
        [fn, arg](uint32_t r, void *frame, size_t len) { fn(arg, r, frame, len); }, budget);
}

int efa_shm_inbox_poll_range(efa_shm_inbox_t *inbox, unsigned first, unsigned count,
                             efa_shm_deliver_fn fn, void *arg, int budget) {
    return inbox->in->poll_range(
        first, count, [fn, arg](uint32_t r, void *frame, size_t len) { fn(arg, r, frame, len); },
        budget);
}

efa_shm_outbox_t *efa_shm_outbox_attach(const char *path, unsigned ring, uint64_t cookie,
                                        int *err) {
    int rc = 0;
    auto out = efa::shm::Outbox::attach(path, ring, cookie, rc);
    if (!out) {
        if (err) {
            *err = rc;
        }
        return nullptr;
    }
    return new efa_shm_outbox{std::move(out)};
}

void efa_shm_outbox_detach(efa_shm_outbox_t *outbox) {
    delete outbox;
}

size_t efa_shm_outbox_max_frame(const efa_shm_outbox_t *outbox) {
    return outbox->out->max_frame();
}

int efa_shm_outbox_send(efa_shm_outbox_t *outbox, const void *buf, size_t len) {
    return outbox->out->send(buf, len);
}

void *efa_shm_outbox_reserve(efa_shm_outbox_t *outbox, size_t len) {
    return outbox->out->reserve(len);
}

void efa_shm_outbox_commit(efa_shm_outbox_t *outbox, size_t len) {
    outbox->out->commit(len);
}

uint64_t efa_shm_outbox_committed(const efa_shm_outbox_t *outbox) {
    return outbox->out->committed();
}

unsigned efa_shm_outbox_slots(const efa_shm_outbox_t *outbox) {
    return outbox->out->slots();
}

efa_ring_producer *efa_shm_outbox_producer(efa_shm_outbox_t *outbox) {
    return outbox->out->producer();
}

void efa_shm_outbox_wake(efa_shm_outbox_t *outbox) {
    outbox->out->wake();
}

bool efa_shm_outbox_owner_closed(const efa_shm_outbox_t *outbox) {
    return outbox->out->owner_closed();
}

// What an error of create or attach means, in words.
const char *efa_shm_strerror(int err) {
    switch (-err) {
    case EEXIST:
        return "a file not created by this user's job for this purpose (another user's, a "
               "symbolic link, or open to others) has the inbox's name: refused and left alone";
    case ELOOP:
        return "the inbox's name is a symbolic link: refused";
    case EACCES:
        return "the inbox is not a regular file of this user closed to others: refused";
    case EKEYREJECTED:
        return "the file at the inbox's name is not the inbox its owner published (cookie "
               "differs): refused";
    case EPROTO:
        return "not an inbox of this version, or a corrupted one";
    case ENOSPC:
        return "no room to reserve the rings' memory (a full /dev/shm? Docker's is 64 MiB: "
               "--shm-size)";
    default:
        return strerror(-err);
    }
}

} // extern "C"
