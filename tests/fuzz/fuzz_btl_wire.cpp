// btl_efa's messages as the receiver sees them (common/efa_btl_wire.h):
// every byte of a message comes from another process, by the provider or
// through an on-node ring slot.  The harness runs the checks
// mca_btl_efa_deliver and the emulated one-sided target and initiator run
// (btl_efa_recv.c, btl_efa_emul.c), then
// does with the result what the BTL does with it: reads the payload handed
// up, copies a put's bytes, writes a get's answer into a fragment of the
// BTL's size and an answer's bytes into the request's buffer, each at its
// exact size (ASan sees a byte too far).
//
// Input: 2 bytes (the fragment size), 4 bytes (the size of the get an
// answer is for), then the message.
#include <vector>

#include "efa_btl_wire.h"
#include "fuzz_input.hpp"

namespace {

// Open MPI's MCA_BTL_TAG_MAX (4.1 and 5.0): the entries of
// mca_btl_base_active_message_trigger, which an AM's tag indexes.
constexpr unsigned kTagMax = 255;

constexpr size_t kHdr = sizeof(efa_btl_hdr_t);
constexpr size_t kRma = sizeof(efa_btl_rma_t);

// What the message must parse as, written from the wire format's
// definition rather than from the parser (but for the mapping of a
// request's type to its kind, a table both share).
efa_btl_wire_kind_t expected(const uint8_t *buf, size_t len) {
    if (len < kHdr) {
        return EFA_BTL_WIRE_SHORT;
    }
    efa_btl_hdr_t h;
    memcpy(&h, buf, kHdr);
    if (h.type == EFA_BTL_MSG_CREDIT) {
        return EFA_BTL_WIRE_CREDIT;
    }
    if (h.type == EFA_BTL_MSG_AM) {
        if (kHdr + static_cast<uint64_t>(h.len) > len) {
            return EFA_BTL_WIRE_AM_TRUNCATED;
        }
        return h.tag < kTagMax ? EFA_BTL_WIRE_AM : EFA_BTL_WIRE_AM_BAD_TAG;
    }
    if (h.type == EFA_BTL_MSG_BATCH) {
        return kHdr + static_cast<uint64_t>(h.len) > len ? EFA_BTL_WIRE_BATCH_TRUNCATED
                                                         : EFA_BTL_WIRE_BATCH;
    }
    if (len < kHdr + kRma) {
        return EFA_BTL_WIRE_SHORT_REQUEST;
    }
    if (kHdr + kRma + static_cast<uint64_t>(h.len) > len) {
        return EFA_BTL_WIRE_TRUNCATED_REQUEST;
    }
    return efa_btl_wire_request_kind(h.type);
}

volatile uint8_t g_sink;

// Every byte handed on is readable (ASan reports the first that is not).
void touch(const uint8_t *p, size_t n) {
    uint8_t s = 0;
    for (size_t i = 0; i < n; ++i) {
        s = static_cast<uint8_t>(s + p[i]);
    }
    g_sink = s;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    // The BTL's fragment: the provider's message size, at least the
    // headers; a get asks for at most what an answer's fragment holds.
    const size_t frag_size = kHdr + kRma + in.take<uint16_t>() % 9000;
    const size_t max_get = frag_size - kHdr - kRma;
    const size_t req_size = in.take<uint32_t>() % 65536;
    // The message, in a buffer of its exact size.
    const std::vector<uint8_t> buf = in.rest();
    const uint8_t *b = buf.data();

    if (buf.size() == sizeof(efa_btl_ring_req_t)) {
        // A ring frame of a one-line request's length: taken as one when
        // unpack says so; a put carries no more bytes than operand holds,
        // a get asks for no more than an answer's operand holds.
        efa_btl_ring_req_t q;
        memcpy(&q, b, sizeof(q));
        efa_btl_hdr_t h;
        efa_btl_rma_t r;
        const bool ok = efa_btl_wire_ring_req_unpack(&q, &h, &r);
        const bool put = q.type == EFA_BTL_MSG_RING_PUT, get = q.type == EFA_BTL_MSG_RING_GET;
        FUZZ_CHECK(ok == (((put || get) && q.flags >= 1 && q.flags <= EFA_BTL_RING_INLINE_MAX) ||
                          q.type == EFA_BTL_MSG_RING_ATOMIC));
        if (ok && (put || get)) {
            FUZZ_CHECK(h.type == (put ? EFA_BTL_MSG_PUT : EFA_BTL_MSG_GET));
            FUZZ_CHECK(h.len == (put ? r.len : 0) && r.len <= sizeof(q.operand));
            // (the target's check: a put carries what it names, a get asks
            // for no more than its answer holds, here a chunk of max_get)
            FUZZ_CHECK(efa_btl_wire_request_len_ok(h.type, h.len, r.len, max_get) ==
                       (put || r.len <= max_get));
            touch(reinterpret_cast<const uint8_t *>(&q.operand), static_cast<size_t>(r.len));
        } else if (ok) {
            FUZZ_CHECK(h.type == EFA_BTL_MSG_ATOMIC && h.len == 0 && (r.len == 4 || r.len == 8));
        }
    }

    efa_btl_wire_msg_t m;
    const efa_btl_wire_kind_t kind = efa_btl_wire_parse(b, buf.size(), kTagMax, &m);
    FUZZ_CHECK(kind == expected(b, buf.size()));
    if (kind == EFA_BTL_WIRE_SHORT) {
        return 0;
    }
    FUZZ_CHECK(0 == memcmp(&m.hdr, b, kHdr));

    switch (kind) {
    case EFA_BTL_WIRE_AM:
        // The callback table's index, and the segment handed up.
        FUZZ_CHECK(m.hdr.tag < kTagMax);
        FUZZ_CHECK(m.payload == b + kHdr && m.payload_len == m.hdr.len);
        touch(m.payload, m.payload_len);
        break;
    case EFA_BTL_WIRE_BATCH: {
        // Each entry handed up lies inside the batch, after the one
        // before it; the walk ends.
        FUZZ_CHECK(m.payload == b + kHdr && m.payload_len == m.hdr.len);
        const uint8_t *p = m.payload;
        size_t off = 0, prev_end = 0, n = 0;
        efa_btl_wire_kind_t k;
        efa_btl_wire_msg_t e;
        while (efa_btl_wire_batch_next(p, m.payload_len, &off, kTagMax, &k, &e)) {
            FUZZ_CHECK(++n <= m.payload_len / kHdr + 1);
            if (k == EFA_BTL_WIRE_AM) {
                FUZZ_CHECK(e.hdr.tag < kTagMax);
                FUZZ_CHECK(e.payload >= p + prev_end + kHdr &&
                           e.payload + e.payload_len <= p + m.payload_len);
                touch(e.payload, e.payload_len);
                prev_end = static_cast<size_t>(e.payload - p) + e.payload_len;
            } else {
                FUZZ_CHECK(k == EFA_BTL_WIRE_AM_BAD_TAG || k == EFA_BTL_WIRE_BATCH_BAD_ENTRY);
            }
            FUZZ_CHECK(off <= m.payload_len);
        }
        break;
    }
    case EFA_BTL_WIRE_REQUEST: {
        FUZZ_CHECK(0 == memcmp(&m.rma, b + kHdr, kRma));
        FUZZ_CHECK(m.payload == b + kHdr + kRma && m.payload_len == m.hdr.len);
        touch(m.payload, m.payload_len);
        if (m.hdr.type == EFA_BTL_MSG_ATOMIC) {
            uint64_t len = 0;
            const efa_btl_wire_atomic_t v =
                efa_btl_wire_atomic_extent(m.rma.addr, m.rma.flags, &len);
            FUZZ_CHECK(len == ((m.rma.flags & EFA_BTL_WIRE_ATOMIC_32BIT) ? 4u : 8u));
            if (v == EFA_BTL_WIRE_ATOMIC_OK) {
                FUZZ_CHECK(!(m.rma.flags & EFA_BTL_WIRE_ATOMIC_FLOAT) && m.rma.addr % len == 0);
            }
            break;
        }
        if (!efa_btl_wire_request_len_ok(m.hdr.type, m.hdr.len, m.rma.len, max_get)) {
            FUZZ_CHECK(m.hdr.type == EFA_BTL_MSG_PUT ? m.rma.len != m.hdr.len
                                                     : m.rma.len > max_get);
            break;
        }
        std::vector<uint8_t> target(static_cast<size_t>(
            m.hdr.type == EFA_BTL_MSG_PUT ? m.rma.len : 0)); // registered memory
        if (m.hdr.type == EFA_BTL_MSG_PUT) {
            // The put's bytes are the payload: rma.len of them are there.
            FUZZ_CHECK(m.rma.len <= m.payload_len);
            if (m.rma.len) {
                memcpy(target.data(), m.payload, static_cast<size_t>(m.rma.len));
            }
        } else {
            // The get's answer: headers, then rma.len bytes, in one fragment.
            std::vector<uint8_t> answer(frag_size);
            memset(answer.data() + kHdr + kRma, 0x6a, static_cast<size_t>(m.rma.len));
        }
        break;
    }
    case EFA_BTL_WIRE_RESPONSE: {
        FUZZ_CHECK(m.payload == b + kHdr + kRma && m.payload_len == m.hdr.len);
        // Taken as the answer to a get of req_size bytes (the initiator
        // finds its request by id; here every answer finds one).
        std::vector<uint8_t> local(req_size);
        const bool fits =
            efa_btl_wire_get_answer_fits(m.payload_len, m.rma.len, m.rma.offset, local.size());
        const bool inside =
            m.payload_len == m.rma.len &&
            static_cast<unsigned __int128>(m.rma.offset) + m.payload_len <= local.size();
        FUZZ_CHECK(fits == inside);
        if (fits && m.payload_len) {
            memcpy(local.data() + m.rma.offset, m.payload, m.payload_len);
        }
        break;
    }
    default:
        break;
    }
    return 0;
}
