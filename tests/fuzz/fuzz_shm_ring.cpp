// The on-node rings (common/shm_ring.*): every byte of a segment is
// writable by every process that attaches to it.  Two halves:
//  - attach: a sender maps a segment whose header page (and size) another
//    process wrote: it must refuse what is not a valid segment, and what it
//    accepts must carry frames without touching memory outside its ring;
//  - poll: the owner reads a ring whose control words, slot headers and
//    frames a sender wrote at will (and the header's attach counter): it
//    must hand out only frames inside a slot, and never crash.
#include <fcntl.h>
#include <sys/mman.h>
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
    memcpy(page + offsetof(SegHeader, magic), &magic, 8);
    memcpy(page + offsetof(SegHeader, version), &version, 4);
    memcpy(page + offsetof(SegHeader, nrings), &nrings, 4);
    memcpy(page + offsetof(SegHeader, nslots), &nslots, 4);
    memcpy(page + offsetof(SegHeader, slot_size), &slot_size, 4);
    memcpy(page + offsetof(SegHeader, ring_offset), &ring_offset, 8);
    memcpy(page + offsetof(SegHeader, ring_bytes), &ring_bytes, 8);
    // File size: as the header says, or shorter/longer (capped: sparse).
    size_t file_len = g.total_bytes();
    if (which & 128) {
        file_len = in.take<uint32_t>() % (g.total_bytes() * 2 + 1);
    }
    const uint32_t ring = in.take<uint8_t>() % 8;

    int fd = memfd_create("efa-fuzz-seg", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(0 == ftruncate(fd, static_cast<off_t>(file_len)));
    if (file_len > 0) {
        FUZZ_CHECK(static_cast<ssize_t>(std::min(file_len, kPage)) ==
                   pwrite(fd, page, std::min(file_len, kPage), 0));
    }
    int err = 0;
    auto out = Outbox::attach("/proc/self/fd/" + std::to_string(fd), ring, err);
    const bool valid_header = (which & 0x7f) == 0 && file_len >= g.total_bytes();
    if (valid_header && ring < g.nrings) {
        FUZZ_CHECK(out != nullptr);
    }
    if (out) {
        FUZZ_CHECK(err == 0);
        // Frames of the sizes the input asks for, until the ring is full.
        for (int i = 0; i < 8 && in.left(); ++i) {
            std::vector<uint8_t> frame = in.bytes(255);
            frame.resize(frame.size() * (in.take<uint8_t>() % 8 + 1), 0x5a);
            const int rc = out->send(frame.data(), frame.size());
            FUZZ_CHECK(rc == 0 || rc == -EAGAIN || rc == -EMSGSIZE);
            FUZZ_CHECK((rc == -EMSGSIZE) == (frame.size() > out->max_frame()));
        }
    } else {
        FUZZ_CHECK(err < 0);
    }
    close(fd);
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
    auto out = Outbox::attach(path, 1, err);
    FUZZ_CHECK(out != nullptr);
    // A few honest frames first, so that the counters are not all zero.
    const uint8_t honest = in.take<uint8_t>() % (g.nslots + 1);
    for (uint8_t i = 0; i < honest; ++i) {
        uint8_t frame[32];
        memset(frame, i, sizeof(frame));
        (void)out->send(frame, sizeof(frame));
    }
    // The sender's own view of its ring, written at will.
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    FUZZ_CHECK(fd >= 0);
    const size_t ring_len = g.ring_bytes();
    auto *ring = static_cast<uint8_t *>(
        mmap(nullptr, ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, kPage + ring_len));
    FUZZ_CHECK(ring != MAP_FAILED);
    auto *hdr =
        static_cast<uint8_t *>(mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    FUZZ_CHECK(hdr != MAP_FAILED);
    close(fd);
    int budget = 1;
    while (in.left() >= 4) {
        const uint8_t op = in.take<uint8_t>();
        switch (op % 4) {
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
    munmap(ring, ring_len);
    munmap(hdr, kPage);
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
