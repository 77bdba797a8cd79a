// On-node message channel: one shared-memory segment per receiving
// process, holding one single-producer/single-consumer ring per sender on
// the node (indexed by the sender's local rank).
//
// Layout of a segment (a file, mapped MAP_SHARED by the owner and by each
// sender):
//
//   page 0        header: magic, version, geometry, attach counter,
//                 doorbell (its own cache line: senders ring it)
//   ring r        at ring_offset + r * ring_bytes (page aligned):
//                   head     (cache line of its own: producer writes)
//                   tail     (cache line of its own: consumer writes)
//                   attached (the sender's state: 0 never attached, 1
//                            attached, 2 left in order; kSender*)
//                   slots    nslots x slot_size: uint32 length, uint32
//                            stamp, then the frame
//
// head and tail are free-running 64-bit counters; slot = counter mod
// nslots (a power of two).  The producer writes a slot's length and frame,
// then publishes it with a release store of the slot's stamp (the low 32
// bits of its counter + 1, so a stamp left from an earlier lap never
// passes for a new one), and of head.  The consumer polls the stamp of the
// slot it expects next (acquire), not head: a message then costs the
// consumer one cache line from the producer, the slot itself, where
// reading head first would cost two.  It hands the frame (in place) to its
// caller, then gives the slot back with a release store of tail, which the
// producer reads only when it finds the ring full by its own last copy.
// Neither side takes a lock: each ring has one writer of each counter.  A sender that may be driven
// by several threads serialises its own calls (the BTL holds its module lock).
//
// The owner polls only rings whose sender has attached: senders bump the
// header's attach counter, and the owner rescans the attached flags when
// the counter changes, so an idle poll reads one header word and one head
// per attached sender.
//
// Leaving.  A sender that lets go of its ring in order (the outbox's
// destructor: its component's finalize, its process closing the node
// stack) marks it left (attached = kSenderLeft, a release store, before
// it unmaps the ring and so before its process exits); a re-attach marks
// it attached again.  A process that dies never marks it: the owner, once
// it saw the sender's process exit (acquire: it reads the mark after the
// exit, which follows the store), tells an orderly end from a death
// (Inbox::sender, efa_node_ring_sender) even where it never sent to that
// process and so has no outbox whose owner_closed would say.  Any nonzero
// value is "attached" to the poll (a left ring may still hold frames).
//
// Trust.  The file is created exclusively (O_EXCL, O_NOFOLLOW, mode 0600):
// a file or symbolic link planted at its name is refused and left alone.
// An attaching sender opens it without following links and checks that it
// is a regular file of its own user, closed to others, and that the
// header's random cookie is the one the owner published through the modex:
// it then writes only into the file its peer created.  Nothing read from
// the shared mapping is trusted by the reader: each side works from its
// own copy of the geometry (the owner's from create, the sender's copied
// and checked once at attach), a slot's length is read once and checked,
// and a frame too long for its slot is dropped and counted.
//
// Space.  The owner reserves the header and every ring's control page
// (posix_fallocate), and, with reserve_all, every ring; otherwise a
// sender reserves its own ring when it attaches.  A full tmpfs then fails
// the create or the attach (-ENOSPC: the caller falls back to the
// provider) instead of raising SIGBUS in a later store into a hole.
#ifndef EFA_SHM_RING_HPP
#define EFA_SHM_RING_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <sys/types.h>

#include "efa_ring_inline.h"
#include "path_counts.hpp"

namespace efa::shm {

constexpr uint64_t kMagic = 0x45464153484d5231ull; // "EFASHMR1"
// 2: slots carry stamps; 3: cookie; 4: doorbell; 5: closed; 6: a sender
// marks its ring left (kSenderLeft).  A sender of 5 never does, so an owner
// of 6 would take its orderly exit for a death: the two refuse each other
// (-EPROTO: the pair falls back to the provider).
constexpr uint32_t kVersion = 6;
constexpr size_t kLine = 64;
constexpr size_t kPage = 4096;
constexpr size_t kRingControl = 4 * kLine; // head, tail, attached, spare
constexpr size_t kSlotHeader = 8;          // uint32 length + uint32 stamp

// RingCtl::attached: the ring's sender (EFA_NODE_SENDER_* in efa_node.h).
constexpr uint32_t kSenderNone = 0;     // never attached
constexpr uint32_t kSenderAttached = 1; // attached, still there (or died)
constexpr uint32_t kSenderLeft = 2;     // let go of the ring in order

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

struct Geometry {
    uint32_t nrings = 0;    // senders (local ranks) the segment serves
    uint32_t nslots = 64;   // per ring, a power of two
    uint32_t slot_size = 0; // bytes per slot, header included; multiple of 64
    // Largest frame one slot carries.
    size_t max_frame() const { return slot_size - kSlotHeader; }
    size_t ring_bytes() const;
    size_t total_bytes() const;
    bool valid() const;
};

// The header's fields: in the file at offset 0, and as a sender reads
// them, once, into a private copy (the only one it uses).
struct HeaderImage {
    uint64_t magic; // written last by the owner (release)
    uint32_t version;
    uint32_t nrings;
    uint32_t nslots;
    uint32_t slot_size;
    uint64_t ring_offset;
    uint64_t ring_bytes;
    uint64_t cookie; // random; the owner publishes it so that senders know its file
};

struct SegHeader {
    HeaderImage image;
    alignas(kLine) std::atomic<uint32_t> attach_seq; // bumped by each attaching sender
    // Set by a sender that sent the owner something by the network provider
    // (Outbox::wake); the owner's paced provider poll answers and clears it
    // (efa_core_set_doorbell).  On a line of its own: rung only then.
    alignas(kLine) uint32_t doorbell;
    // Set by the owner as it closes the inbox (its process is done with the
    // rings: MPI_Finalize): a sender that finds the owner's process gone
    // takes it for lost only while this is 0 (Outbox::owner_closed).
    alignas(kLine) std::atomic<uint32_t> closed;
};
static_assert(offsetof(SegHeader, image) == 0);

// A random 64-bit value nobody else can predict (never 0).
uint64_t random_cookie();

struct RingCtl {
    alignas(kLine) std::atomic<uint64_t> head;     // next slot the producer fills
    alignas(kLine) std::atomic<uint64_t> tail;     // next slot the consumer reads
    alignas(kLine) std::atomic<uint32_t> attached; // the sender's state: kSender*
};
static_assert(sizeof(RingCtl) <= kRingControl);
// The C poll (efa_ring_inline.h) knows the layout by its own constants.
static_assert(kRingControl == EFA_RING_CONTROL_BYTES);
static_assert(offsetof(RingCtl, tail) == EFA_RING_TAIL_OFFSET);
static_assert(offsetof(RingCtl, attached) == EFA_RING_ATTACHED_OFFSET);
static_assert(kSlotHeader == EFA_RING_SLOT_HEADER);

// The owner's inbound segment.  Created at init, unlinked and unmapped by
// the destructor.
class Inbox {
  public:
    // err: 0, or a negative errno (-EEXIST: something not ours is at
    // path, left alone; -ENOSPC: no room to reserve).  A file at path of
    // this user, mode 0600 and one link (an earlier job's) is replaced.
    // reserve_all: reserve every ring now (else each sender its own).
    static std::unique_ptr<Inbox> create(const std::string &path, const Geometry &g, int &err,
                                         bool reserve_all = false);
    ~Inbox();
    Inbox(const Inbox &) = delete;
    Inbox &operator=(const Inbox &) = delete;

    const Geometry &geometry() const { return geo_; }
    const std::string &path() const { return path_; }
    // What senders must be told (through the modex) to attach: the cookie,
    // and the descriptor that reaches the segment when its name does not
    // (Outbox::attach_from_process).
    uint64_t cookie() const { return cookie_; }
    int fd() const { return fd_; }
    // Frames dropped: a length longer than the slot (a corrupted sender).
    uint64_t dropped() const { return __atomic_load_n(&c_.dropped, __ATOMIC_RELAXED); }

    // Hand up to 'budget' waiting frames to deliver(ring, frame, len), in
    // ring order; the frame is valid until deliver returns.  A deliver that
    // returns bool stops the poll after this frame by returning false.
    // Returns the slots consumed (delivered, or dropped as corrupted).  A poll while another is
    // running (another thread, or deliver itself polling) returns 0 at once.
    template <class F> int poll(F &&deliver, int budget) {
        return poll_range(0, geo_.nrings, static_cast<F &&>(deliver), budget);
    }
    // The same over rings [first, first + count) only, deliver being told
    // the ring's index within the range (ring - first).  One inbox then
    // serves several channels (common/node.hpp): each polls its own block
    // of rings, so one channel that stops reading (the engine holding a
    // message) never stalls another.  The guard is the inbox's: a range
    // poll while any other poll runs returns 0 (the next progress call
    // takes the frames).  A process without local peers returns at the
    // first test; otherwise the loop passes over the other channels' rings
    // (a test per ring: cheaper per message than keeping the range's bounds).
    // The loop is efa_ring_consume (efa_ring_inline.h), which a C
    // component runs on consumer() itself.
    template <class F> int poll_range(uint32_t first, uint32_t count, F &&deliver, int budget);
    // The poll's state, for a component that polls in C (efa_ring_consume).
    efa_ring_consumer_t *consumer() { return &c_; }
    // The word senders ring (Outbox::wake), for the owner's paced poll.
    uint32_t *doorbell() const { return &hdr_->doorbell; }

    // Frames a sender posted that the owner has not taken (tests).
    uint64_t waiting(uint32_t ring) const;

    // The sender of ring r: kSenderNone (never attached, or no ring r),
    // kSenderAttached (attached and has not left: still there, or dead),
    // kSenderLeft (let go of the ring in order).  Read with acquire: a
    // left mark stored before the sender's process exited is seen by a
    // read after its exit was.  A value no sender writes (a corrupted
    // sender) reads as attached.
    uint32_t sender(uint32_t r) const;

    // Only one thread ever polls (MPI below MPI_THREAD_MULTIPLE): the
    // poll's guard then takes no locked instruction.  Set before the
    // first poll.
    void set_one_thread(bool one) { c_.one_thread = one; }

    // Reserve the space of rings [first, first + count) now (as reserve_all
    // does for every ring): for a channel whose senders must never fail to
    // attach for want of room.  0 or a negative errno (-ENOSPC).
    int reserve_rings(uint32_t first, uint32_t count);

  private:
    Inbox() = default;
    RingCtl *ring(uint32_t r) const;
    uint8_t *slot(uint32_t r, uint64_t n) const;

    std::string path_;
    Geometry geo_; // the owner's own copy: the shared header is never read back
    size_t ring_bytes_ = 0;
    uint64_t cookie_ = 0;
    uint8_t *base_ = nullptr;
    size_t len_ = 0;
    int fd_ = -1;              // kept open for reserve_rings
    SegHeader *hdr_ = nullptr; // only attach_seq is read from it
    // What the poll reads and writes (its active and tails point into the
    // two vectors, sized once at create and never reallocated).
    efa_ring_consumer_t c_{};
    std::vector<uint32_t> active_; // rings with a sender attached (changed only while polling)
    std::vector<uint64_t> tails_;  // the consumer's own copy of each tail
    std::vector<uint32_t> resume_; // where each window's next poll starts (efa_ring_consume)
};

// A sender's view of one ring of a peer's segment.
class Outbox {
  public:
    // err: 0, or a negative errno (-ENOENT: the peer has no segment;
    // -ELOOP: a symbolic link; -EACCES: not a regular file of this user
    // closed to others; -EPROTO: not a segment of this version or
    // corrupted; -EKEYREJECTED: not the segment whose cookie the peer
    // published; -ERANGE: no ring 'ring'; -ENOSPC: no room to reserve it).
    static std::unique_ptr<Outbox> attach(const std::string &path, uint32_t ring, uint64_t cookie,
                                          int &err);
    // The same through the owner's own descriptor of its segment (Inbox::fd
    // in process pid, duplicated by efa_fd_from_process), for a segment
    // whose name is gone or taken by another file: removed from the
    // directory by someone else (systemd-logind's RemoveIPC removes a
    // user's files there at the end of its last session).  -ENOENT: no
    // such process or descriptor; -EACCES: not permitted (as for single
    // copy); -ENOSYS: no pidfd_getfd; -EMFILE, -ENOMEM; else attach's
    // errors.
    static std::unique_ptr<Outbox> attach_from_process(uint32_t pid, int owner_fd, uint32_t ring,
                                                       uint64_t cookie, int &err);
    ~Outbox();
    Outbox(const Outbox &) = delete;
    Outbox &operator=(const Outbox &) = delete;

    size_t max_frame() const { return geo_.max_frame(); }
    // Frames committed so far, and slots of the ring.
    uint64_t committed() const { return p_.head; }
    uint32_t slots() const { return geo_.nslots; }

    // Room for a frame of len bytes, or nullptr (the ring is full, or len
    // exceeds max_frame()).  commit(len) publishes it; nothing else may be
    // reserved in between.  (efa_ring_reserve and efa_ring_commit, which a
    // C component runs on producer() itself.)
    void *reserve(size_t len) { return efa_ring_reserve(&p_, len); }
    void commit(size_t len) { efa_ring_commit(&p_, len); }
    // reserve + copy + commit.  0, -EAGAIN (full) or -EMSGSIZE.
    int send(const void *buf, size_t len);
    // The sender's state, for a component that sends in C.
    efa_ring_producer_t *producer() { return &p_; }
    // Tell the owner that something for it went by the network provider
    // (efa_ring_wake).
    void wake() { efa_ring_wake(&p_); }
    // The owner closed its inbox (SegHeader::closed).
    bool owner_closed() const {
        return 0 !=
               static_cast<const SegHeader *>(hdr_map_)->closed.load(std::memory_order_acquire);
    }

  private:
    Outbox() = default;
    // links: how many names the file may have at least (1, or 0 for a
    // descriptor from its owner).  Takes fd.
    static std::unique_ptr<Outbox> attach_fd(int fd, nlink_t links, uint32_t ring, uint64_t cookie,
                                             int &err);

    Geometry geo_;
    uint8_t *map_ = nullptr; // the ring's control block and slots
    size_t len_ = 0;
    void *hdr_map_ = nullptr; // the segment's header page (its doorbell)
    bool attached_ = false;   // marked attached: the destructor marks it left
    efa_ring_producer_t p_{};
};

inline RingCtl *Inbox::ring(uint32_t r) const {
    return reinterpret_cast<RingCtl *>(base_ + kPage + r * ring_bytes_);
}

inline uint8_t *Inbox::slot(uint32_t r, uint64_t n) const {
    return reinterpret_cast<uint8_t *>(ring(r)) + kRingControl +
           (n & (geo_.nslots - 1)) * geo_.slot_size;
}

// (always inlined into the engine's progress: the hot path of every
// on-node message of own matching; out of line it cost 60 instructions per
// message.  deliver, a lambda, is inlined through the constant function
// pointer once efa_ring_consume is.)
template <class F>
__attribute__((always_inline)) inline int Inbox::poll_range(uint32_t first, uint32_t count,
                                                            F &&deliver, int budget) {
    using D = std::remove_reference_t<F>;
    efa_ring_frame_fn fn = [](void *d, uint32_t r, void *frame, size_t len) -> bool {
        if constexpr (std::is_same_v<decltype((*static_cast<D *>(d))(r, frame, len)), bool>) {
            return (*static_cast<D *>(d))(r, frame, len);
        } else {
            (*static_cast<D *>(d))(r, frame, len);
            return true;
        }
    };
    return efa_ring_consume(&c_, first, count, fn,
                            const_cast<void *>(static_cast<const void *>(&deliver)), budget);
}

} // namespace efa::shm

// The C handles (efa_shm_ring.h), here so that other C seams (efa_node.h)
// can hand out outboxes.
struct efa_shm_inbox {
    std::unique_ptr<efa::shm::Inbox> in;
};

struct efa_shm_outbox {
    std::unique_ptr<efa::shm::Outbox> out;
};

#endif
