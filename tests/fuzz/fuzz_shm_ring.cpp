// The on-node rings (common/shm_ring.*): every byte of a segment is
// writable by every process that attaches to it.  Two halves:
//  - attach: a sender maps a segment whose header page (and size, mode,
//    cookie) another process wrote: it must refuse what is not a valid
//    segment of the cookie it was given, and what it accepts must carry
//    frames without touching memory outside its ring, however the file's
//    bytes (header, control words of any ring, slots) change after the
//    attach;
//  - poll: the owner reads a segment of which a sender may write every
//    byte at will (header fields, ring offsets and sizes included, control
//    words, slot lengths and stamps of any ring): it must hand out only
//    frames inside a slot, and never crash.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "fuzz_input.hpp"
#include "shm_ring.hpp"

using namespace efa::shm;

namespace {

void fuzz_attach(fuzz::Input &in) {
    // A valid header to start from; the input overwrites the fields it
    // selects, so that both near-valid and arbitrary headers are reached.
    Geometry g;
    g.nrings = in.take<uint8_t>() % 4 + 1;
    g.nslots = 1u << (in.take<uint8_t>() % 6 + 1);
    g.slot_size = 64 * (in.take<uint8_t>() % 8 + 2);
    uint8_t page[kPage] = {};
    uint64_t magic = kMagic;
    uint32_t version = kVersion, nrings = g.nrings, nslots = g.nslots, slot_size = g.slot_size;
    uint64_t ring_offset = kPage, ring_bytes = g.ring_bytes();
    const uint8_t which = in.take<uint8_t>();
    if (which & 1)
        magic = in.take<uint64_t>();
    if (which & 2)
        version = in.take<uint32_t>();
    if (which & 4)
        nrings = in.take<uint32_t>();
    if (which & 8)
        nslots = in.take<uint32_t>();
    if (which & 16)
        slot_size = in.take<uint32_t>();
    if (which & 32)
        ring_offset = in.take<uint64_t>();
    if (which & 64)
        ring_bytes = in.take<uint64_t>();
    memcpy(page + offsetof(HeaderImage, magic), &magic, 8);
    memcpy(page + offsetof(HeaderImage, version), &version, 4);
    memcpy(page + offsetof(HeaderImage, nrings), &nrings, 4);
    memcpy(page + offsetof(HeaderImage, nslots), &nslots, 4);
    memcpy(page + offsetof(HeaderImage, slot_size), &slot_size, 4);
    memcpy(page + offsetof(HeaderImage, ring_offset), &ring_offset, 8);
    memcpy(page + offsetof(HeaderImage, ring_bytes), &ring_bytes, 8);
    // File size: as the header says, or shorter/longer (capped: sparse).
    size_t file_len = g.total_bytes();
    if (which & 128) {
        file_len = in.take<uint32_t>() % (g.total_bytes() * 2 + 1);
    }
    const uint32_t ring = in.take<uint8_t>() % 8;
    // The owner's cookie (the sender is given another with bit 1), and
    // the file's mode (open to others with bit 2).
    const uint8_t which2 = in.take<uint8_t>();
    const uint64_t cookie = 0x5eed0000c0ffee01ull;
    memcpy(page + offsetof(HeaderImage, cookie), &cookie, 8);

    // A real file (the attach opens without following links, so no
    // /proc/self/fd path), of this user, mode 0600 unless asked otherwise.
    const std::string path = "/dev/shm/efa-fuzz-seg." + std::to_string(getpid());
    (void)unlink(path.c_str());
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(0 == fchmod(fd, (which2 & 2) ? 0644 : 0600));
    FUZZ_CHECK(0 == ftruncate(fd, static_cast<off_t>(file_len)));
    if (file_len > 0) {
        FUZZ_CHECK(static_cast<ssize_t>(std::min(file_len, kPage)) ==
                   pwrite(fd, page, std::min(file_len, kPage), 0));
    }
    int err = 0;
    auto out = Outbox::attach(path, ring, (which2 & 1) ? ~cookie : cookie, err);
    const bool valid = (which & 0x7f) == 0 && file_len == g.total_bytes() && !(which2 & 3);
    if (valid && ring < g.nrings) {
        FUZZ_CHECK(out != nullptr);
    }
    if (which2 & 2) {
        FUZZ_CHECK(out == nullptr && err == -EACCES);
    } else if ((which & 0x7f) == 0 && file_len == g.total_bytes() && (which2 & 1)) {
        FUZZ_CHECK(out == nullptr && err == -EKEYREJECTED);
    }
    if (out) {
        FUZZ_CHECK(err == 0);
        const size_t max = out->max_frame();
        // Frames of the sizes the input asks for, until the ring is full,
        // while any word of the file (header, any ring's control words and
        // slots, this sender's own head and tail) changes under the sender.
        for (int i = 0; i < 16 && in.left(); ++i) {
            if (in.take<uint8_t>() & 1) {
                const uint64_t off = in.take<uint32_t>() % (file_len - 7);
                const uint64_t v = in.take<uint64_t>();
                FUZZ_CHECK(8 == pwrite(fd, &v, 8, static_cast<off_t>(off)));
                continue;
            }
            std::vector<uint8_t> frame = in.bytes(255);
            frame.resize(frame.size() * (in.take<uint8_t>() % 8 + 1), 0x5a);
            const int rc = out->send(frame.data(), frame.size());
            FUZZ_CHECK(rc == 0 || rc == -EAGAIN || rc == -EMSGSIZE);
            FUZZ_CHECK((rc == -EMSGSIZE) == (frame.size() > max));
            FUZZ_CHECK(out->max_frame() == max); // its own copy of the geometry
        }
    } else {
        FUZZ_CHECK(err < 0);
    }
    close(fd);
    (void)unlink(path.c_str());
}

void fuzz_poll(fuzz::Input &in) {
    Geometry g;
    g.nrings = 2;
    g.nslots = 1u << (in.take<uint8_t>() % 4 + 1);
    g.slot_size = 64 * (in.take<uint8_t>() % 4 + 2);
    const std::string path = "/dev/shm/efa-fuzz-ring." + std::to_string(getpid());
    int err = 0;
    auto inbox = Inbox::create(path, g, err);
    FUZZ_CHECK(inbox != nullptr);
    auto out = Outbox::attach(path, 1, inbox->cookie(), err);
    FUZZ_CHECK(out != nullptr);
    // A few honest frames first, so that the counters are not all zero.
    const uint8_t honest = in.take<uint8_t>() % (g.nslots + 1);
    for (uint8_t i = 0; i < honest; ++i) {
        uint8_t frame[32];
        memset(frame, i, sizeof(frame));
        (void)out->send(frame, sizeof(frame));
    }
    // The whole segment, written at will: any process that can attach
    // can write every byte of it, not only its own ring.
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    FUZZ_CHECK(fd >= 0);
    const size_t ring_len = g.ring_bytes();
    const size_t seg_len = g.total_bytes();
    auto *seg =
        static_cast<uint8_t *>(mmap(nullptr, seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    FUZZ_CHECK(seg != MAP_FAILED);
    close(fd);
    uint8_t *const hdr = seg;
    int budget = 1;
    while (in.left() >= 4) {
        const uint8_t op = in.take<uint8_t>();
        // Ring 1 (the attached sender's) unless the op's high bit picks 0.
        uint8_t *ring = seg + kPage + ((op & 0x80) ? 0 : ring_len);
        switch (op % 5) {
        case 0: { // a word of the ring: control block or a slot
            const uint32_t off = in.take<uint32_t>() % (ring_len - 7);
            const uint64_t v = in.take<uint64_t>();
            memcpy(ring + off, &v, 8);
            break;
        }
        case 1: { // a slot with a stamp that publishes it and any length
            const uint64_t n = in.take<uint16_t>();
            uint8_t *s = ring + kRingControl + (n & (g.nslots - 1)) * g.slot_size;
            const uint32_t len = in.take<uint32_t>();
            const uint32_t stamp = static_cast<uint32_t>(n + 1);
            memcpy(s, &len, 4);
            memcpy(s + 4, &stamp, 4);
            break;
        }
        case 2: { // the header's attach counter (senders bump it)
            const uint32_t v = in.take<uint32_t>();
            memcpy(hdr + offsetof(SegHeader, attach_seq), &v, 4);
            break;
        }
        case 3: { // a header field (magic, version, geometry, ring offset
                  // and size, cookie), or a word anywhere in the segment
            const uint8_t f = in.take<uint8_t>();
            const uint64_t v = in.take<uint64_t>();
            const size_t off = (f & 0x80) ? (in.take<uint32_t>() % (seg_len - 7)) : (f % 8) * 8;
            memcpy(seg + off, &v, 8);
            break;
        }
        default:
            budget = in.take<uint8_t>() % 16 + 1;
            break;
        }
        const size_t max = inbox->geometry().max_frame();
        inbox->poll(
            [&](uint32_t r, void *frame, size_t len) {
                FUZZ_CHECK(r < g.nrings);
                FUZZ_CHECK(len <= max);
                // Every byte handed out is readable (ASan/SEGV otherwise).
                volatile uint8_t sum = 0;
                for (size_t i = 0; i < len; ++i) {
                    sum = static_cast<uint8_t>(sum + static_cast<uint8_t *>(frame)[i]);
                }
                (void)sum;
            },
            budget);
    }
    munmap(seg, seg_len);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    if (in.take<uint8_t>() & 1) {
        fuzz_poll(in);
    } else {
        fuzz_attach(in);
    }
    return 0;
}
