// btl_efa's checks of received messages (common/efa_btl_wire.h), on the
// cases the fuzzer (tests/fuzz/fuzz_btl_wire.cpp) found or guards.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "efa_btl_wire.h"

namespace {

// Open MPI's MCA_BTL_TAG_MAX (entries of the active-message table).
constexpr unsigned kTagMax = 255;

std::vector<uint8_t> am(uint8_t tag, uint32_t len, size_t carried) {
    efa_btl_hdr_t h{};
    h.type = EFA_BTL_MSG_AM;
    h.tag = tag;
    h.len = len;
    std::vector<uint8_t> m(sizeof(h) + carried, 0x11);
    memcpy(m.data(), &h, sizeof(h));
    return m;
}

TEST(BtlWire, ActiveMessageTagInsideTheTable) {
    efa_btl_wire_msg_t msg;
    auto m = am(254, 4, 4);
    EXPECT_EQ(EFA_BTL_WIRE_AM, efa_btl_wire_parse(m.data(), m.size(), kTagMax, &msg));
    EXPECT_EQ(m.data() + sizeof(efa_btl_hdr_t), msg.payload);
    EXPECT_EQ(4u, msg.payload_len);
    // 255: one past the table's end (read and called before the check).
    m = am(255, 4, 4);
    EXPECT_EQ(EFA_BTL_WIRE_AM_BAD_TAG, efa_btl_wire_parse(m.data(), m.size(), kTagMax, &msg));
}

TEST(BtlWire, LengthsBeyondTheMessageAreRefused) {
    efa_btl_wire_msg_t msg;
    auto m = am(1, 5, 4);
    EXPECT_EQ(EFA_BTL_WIRE_AM_TRUNCATED, efa_btl_wire_parse(m.data(), m.size(), kTagMax, &msg));
    EXPECT_EQ(EFA_BTL_WIRE_SHORT, efa_btl_wire_parse(m.data(), 15, kTagMax, &msg));
    m[0] = EFA_BTL_MSG_GET; // a request needs room for its rma header
    EXPECT_EQ(EFA_BTL_WIRE_SHORT_REQUEST, efa_btl_wire_parse(m.data(), m.size(), kTagMax, &msg));
}

// A CREDIT message's tag says what it asks (btl_efa_spread_ask.c): kept
// through the parse, whatever padding follows the header (the answer
// through the provider is made longer than a ring slot).
TEST(BtlWire, CreditAskAndPaddedAnswer) {
    efa_btl_wire_msg_t msg;
    efa_btl_hdr_t h{};
    h.type = EFA_BTL_MSG_CREDIT;
    h.tag = EFA_BTL_CREDIT_ASK;
    h.credits = 3;
    std::vector<uint8_t> m(sizeof(h));
    memcpy(m.data(), &h, sizeof(h));
    EXPECT_EQ(EFA_BTL_WIRE_CREDIT, efa_btl_wire_parse(m.data(), m.size(), kTagMax, &msg));
    EXPECT_EQ(EFA_BTL_CREDIT_ASK, msg.hdr.tag);
    EXPECT_EQ(3u, msg.hdr.credits);
    h.tag = EFA_BTL_CREDIT_TELL;
    m.assign(8193, 0);
    memcpy(m.data(), &h, sizeof(h));
    EXPECT_EQ(EFA_BTL_WIRE_CREDIT, efa_btl_wire_parse(m.data(), m.size(), kTagMax, &msg));
    EXPECT_EQ(EFA_BTL_CREDIT_TELL, msg.hdr.tag);
    EXPECT_EQ(nullptr, msg.payload); // the padding is nobody's payload
}

TEST(BtlWire, GetAnswerInsideItsRequest) {
    EXPECT_TRUE(efa_btl_wire_get_answer_fits(16, 16, 4080, 4096));
    EXPECT_FALSE(efa_btl_wire_get_answer_fits(16, 16, 4081, 4096));
    EXPECT_FALSE(efa_btl_wire_get_answer_fits(16, 16, UINT64_MAX - 7, 4096)); // no wrap
    EXPECT_FALSE(efa_btl_wire_get_answer_fits(16, 8, 0, 4096));
}

TEST(BtlWire, RequestLengthsAndAtomics) {
    EXPECT_TRUE(efa_btl_wire_request_len_ok(EFA_BTL_MSG_PUT, 8, 8, 0));
    EXPECT_FALSE(efa_btl_wire_request_len_ok(EFA_BTL_MSG_PUT, 8, 4096, 1 << 20));
    EXPECT_TRUE(efa_btl_wire_request_len_ok(EFA_BTL_MSG_GET, 0, 4096, 4096));
    EXPECT_FALSE(efa_btl_wire_request_len_ok(EFA_BTL_MSG_GET, 0, 4097, 4096));
    uint64_t len = 0;
    EXPECT_EQ(EFA_BTL_WIRE_ATOMIC_OK,
              efa_btl_wire_atomic_extent(0x1004, EFA_BTL_WIRE_ATOMIC_32BIT, &len));
    EXPECT_EQ(4u, len);
    EXPECT_EQ(EFA_BTL_WIRE_ATOMIC_MISALIGNED, efa_btl_wire_atomic_extent(0x1004, 0, &len));
    EXPECT_EQ(8u, len);
    EXPECT_EQ(EFA_BTL_WIRE_ATOMIC_UNSUPPORTED,
              efa_btl_wire_atomic_extent(0x1000, EFA_BTL_WIRE_ATOMIC_FLOAT, &len));
}

// A batch as btl_efa's sender packs it (efa_btl_wire_batch_add) and its
// receiver walks it (efa_btl_wire_batch_next).
std::vector<uint8_t> batch_of(const std::vector<std::vector<uint8_t>> &msgs, size_t cap = 4096) {
    std::vector<uint8_t> b(sizeof(efa_btl_hdr_t) + cap, 0xee);
    size_t used = 0;
    for (const auto &m : msgs) {
        // header and first bytes from one place, the rest from another,
        // as an in-place fragment is packed
        const size_t head = m.size() > 20 ? 20 : m.size();
        EXPECT_TRUE(efa_btl_wire_batch_add(b.data() + sizeof(efa_btl_hdr_t), cap, &used, m.data(),
                                           head, m.data() + head, m.size() - head));
    }
    efa_btl_hdr_t h{};
    h.type = EFA_BTL_MSG_BATCH;
    h.len = static_cast<uint32_t>(used);
    memcpy(b.data(), &h, sizeof(h));
    b.resize(sizeof(h) + used);
    return b;
}

TEST(BtlWire, BatchRoundTripInOrderAligned) {
    std::vector<std::vector<uint8_t>> msgs = {am(65, 3, 3), am(66, 0, 0), am(67, 200, 200)};
    for (size_t i = 0; i < msgs.size(); ++i) { // distinct payloads
        for (size_t j = sizeof(efa_btl_hdr_t); j < msgs[i].size(); ++j) {
            msgs[i][j] = static_cast<uint8_t>(i * 31 + j);
        }
    }
    auto b = batch_of(msgs);
    efa_btl_wire_msg_t msg;
    ASSERT_EQ(EFA_BTL_WIRE_BATCH, efa_btl_wire_parse(b.data(), b.size(), kTagMax, &msg));
    const uint8_t *p = msg.payload;
    const size_t len = msg.payload_len;
    size_t off = 0, n = 0;
    efa_btl_wire_kind_t kind;
    efa_btl_wire_msg_t sub;
    while (efa_btl_wire_batch_next(p, len, &off, kTagMax, &kind, &sub)) {
        ASSERT_LT(n, msgs.size());
        EXPECT_EQ(EFA_BTL_WIRE_AM, kind);
        EXPECT_EQ(msgs[n][1], sub.hdr.tag);
        ASSERT_EQ(msgs[n].size() - sizeof(efa_btl_hdr_t), sub.payload_len);
        EXPECT_EQ(0, memcmp(sub.payload, msgs[n].data() + sizeof(efa_btl_hdr_t), sub.payload_len));
        EXPECT_EQ(0u, static_cast<size_t>(sub.payload - p) % EFA_BTL_WIRE_BATCH_ALIGN);
        ++n;
    }
    EXPECT_EQ(msgs.size(), n);
}

TEST(BtlWire, BatchFullRefusesWithoutWriting) {
    std::vector<uint8_t> p(40, 0x5a);
    size_t used = 0;
    auto m = am(1, 8, 8); // 24 bytes, one span of 24
    EXPECT_TRUE(efa_btl_wire_batch_add(p.data(), p.size(), &used, m.data(), m.size(), nullptr, 0));
    EXPECT_EQ(24u, used);
    EXPECT_FALSE(efa_btl_wire_batch_add(p.data(), p.size(), &used, m.data(), m.size(), nullptr, 0));
    EXPECT_EQ(24u, used);
    EXPECT_EQ(0x5a, p[24]);
}

TEST(BtlWire, BatchWalkStopsAtAnEntryThatIsNoWholeMessage) {
    auto b = batch_of({am(65, 4, 4), am(66, 4, 4)});
    efa_btl_wire_msg_t msg;
    ASSERT_EQ(EFA_BTL_WIRE_BATCH, efa_btl_wire_parse(b.data(), b.size(), kTagMax, &msg));
    // the second entry claims more bytes than the batch holds
    std::vector<uint8_t> payload(msg.payload, msg.payload + msg.payload_len);
    efa_btl_hdr_t h;
    memcpy(&h, payload.data() + 24, sizeof(h));
    h.len = 1000;
    memcpy(payload.data() + 24, &h, sizeof(h));
    size_t off = 0;
    efa_btl_wire_kind_t kind;
    efa_btl_wire_msg_t sub;
    ASSERT_TRUE(
        efa_btl_wire_batch_next(payload.data(), payload.size(), &off, kTagMax, &kind, &sub));
    EXPECT_EQ(EFA_BTL_WIRE_AM, kind);
    ASSERT_TRUE(
        efa_btl_wire_batch_next(payload.data(), payload.size(), &off, kTagMax, &kind, &sub));
    EXPECT_EQ(EFA_BTL_WIRE_BATCH_BAD_ENTRY, kind);
    EXPECT_FALSE(
        efa_btl_wire_batch_next(payload.data(), payload.size(), &off, kTagMax, &kind, &sub));
    // a batch inside a batch, and a request, are no entries either
    for (uint8_t type :
         {uint8_t(EFA_BTL_MSG_BATCH), uint8_t(EFA_BTL_MSG_PUT), uint8_t(EFA_BTL_MSG_CREDIT)}) {
        memcpy(&h, payload.data(), sizeof(h));
        h.type = type;
        h.len = 0;
        memcpy(payload.data(), &h, sizeof(h));
        off = 0;
        ASSERT_TRUE(
            efa_btl_wire_batch_next(payload.data(), payload.size(), &off, kTagMax, &kind, &sub));
        EXPECT_EQ(EFA_BTL_WIRE_BATCH_BAD_ENTRY, kind);
        EXPECT_EQ(payload.size(), off);
    }
    // the batch's own length past the message
    memcpy(&h, b.data(), sizeof(h));
    h.len += 1;
    memcpy(b.data(), &h, sizeof(h));
    EXPECT_EQ(EFA_BTL_WIRE_BATCH_TRUNCATED, efa_btl_wire_parse(b.data(), b.size(), kTagMax, &msg));
}

} // namespace

// An answer through a ring (efa_btl_ring_resp_t) fills one cache line with
// the slot's 8-byte header, and one that reaches the general parse (its
// type forged, or its length) is dropped there, never read as a request.
TEST(BtlWire, RingAnswerIsOneLineAndNoRequest) {
    EXPECT_LE(sizeof(efa_btl_ring_resp_t) + 8, 64u);
    efa_btl_ring_resp_t a{};
    a.type = EFA_BTL_MSG_RING_RESP;
    a.req = 1;
    efa_btl_wire_msg_t msg;
    EXPECT_EQ(EFA_BTL_WIRE_SHORT_REQUEST, efa_btl_wire_parse(&a, sizeof(a), kTagMax, &msg));
    std::vector<uint8_t> big(sizeof(efa_btl_hdr_t) + sizeof(efa_btl_rma_t), 0);
    big[0] = EFA_BTL_MSG_RING_RESP;
    EXPECT_EQ(EFA_BTL_WIRE_UNKNOWN_TYPE, efa_btl_wire_parse(big.data(), big.size(), kTagMax, &msg));
}

// A request in one line through a ring (efa_btl_ring_req_t) fills one
// cache line with the slot's header, reaches the general target as the
// header and rma block it stands for, and is dropped by the general parse
// (never read as another kind) when it arrives any other way.
TEST(BtlWire, RingRequestIsOneLineAndUnpacksToItsRequest) {
    EXPECT_EQ(sizeof(efa_btl_ring_req_t) + 8, 64u);
    efa_btl_ring_req_t q{};
    q.type = EFA_BTL_MSG_RING_ATOMIC;
    q.flags = EFA_BTL_WIRE_ATOMIC_32BIT;
    q.op = EFA_BTL_WIRE_OP_CSWAP;
    q.claim = EFA_BTL_CLAIM_OPEN;
    q.src = 0x1234;
    q.req = 0x8000000000000041ull;
    q.addr = 0x7f0000001000ull;
    q.key = 77;
    q.operand = 5;
    q.operand2 = 6;
    efa_btl_hdr_t hdr;
    efa_btl_rma_t rma;
    // what every kind carries over: sender, id, address, key, claim
    const auto addressed = [&] {
        EXPECT_EQ(0u, hdr.credits);
        EXPECT_EQ(q.src, hdr.src);
        EXPECT_EQ(q.req, rma.req);
        EXPECT_EQ(q.addr, rma.addr);
        EXPECT_EQ(q.key, rma.key);
        EXPECT_EQ(q.claim, rma.claim);
    };
    ASSERT_TRUE(efa_btl_wire_ring_req_unpack(&q, &hdr, &rma));
    EXPECT_EQ(EFA_BTL_MSG_ATOMIC, hdr.type);
    EXPECT_EQ(0u, hdr.len);
    addressed();
    EXPECT_EQ(4u, rma.len);
    EXPECT_EQ(5u, rma.operand);
    EXPECT_EQ(6u, rma.operand2);
    EXPECT_EQ(static_cast<uint32_t>(EFA_BTL_WIRE_OP_CSWAP), rma.op);
    EXPECT_EQ(EFA_BTL_WIRE_ATOMIC_32BIT, rma.flags);
    q.flags = 0;
    ASSERT_TRUE(efa_btl_wire_ring_req_unpack(&q, &hdr, &rma));
    EXPECT_EQ(8u, rma.len);
    EXPECT_TRUE(efa_btl_wire_ring_atomic_fits(EFA_BTL_WIRE_OP_CSWAP, EFA_BTL_WIRE_ATOMIC_FLOAT));
    EXPECT_FALSE(efa_btl_wire_ring_atomic_fits(0x10000u, 0));
    EXPECT_FALSE(efa_btl_wire_ring_atomic_fits(EFA_BTL_WIRE_OP_ADD, 0x100u));
    efa_btl_wire_msg_t msg;
    EXPECT_EQ(EFA_BTL_WIRE_SHORT_REQUEST, efa_btl_wire_parse(&q, sizeof(q), kTagMax, &msg));

    // a put: its bytes in operand, its length in flags; none past operand
    // (nor a get asking for more)
    q.type = EFA_BTL_MSG_RING_PUT;
    q.flags = 3;
    ASSERT_TRUE(efa_btl_wire_ring_req_unpack(&q, &hdr, &rma));
    EXPECT_EQ(EFA_BTL_MSG_PUT, hdr.type);
    EXPECT_EQ(3u, hdr.len);
    EXPECT_EQ(3u, rma.len);
    addressed();
    EXPECT_EQ(0u, rma.operand);
    EXPECT_EQ(0u, rma.op);
    // a get: its length in flags, no bytes of its own
    q.type = EFA_BTL_MSG_RING_GET;
    q.flags = EFA_BTL_RING_INLINE_MAX;
    ASSERT_TRUE(efa_btl_wire_ring_req_unpack(&q, &hdr, &rma));
    EXPECT_EQ(EFA_BTL_MSG_GET, hdr.type);
    EXPECT_EQ(0u, hdr.len);
    addressed();
    EXPECT_EQ(EFA_BTL_RING_INLINE_MAX, rma.len);
    for (const uint8_t type : {uint8_t{EFA_BTL_MSG_RING_PUT}, uint8_t{EFA_BTL_MSG_RING_GET}}) {
        q.type = type;
        for (const uint8_t bad : {uint8_t{0}, uint8_t{EFA_BTL_RING_INLINE_MAX + 1}, uint8_t{255}}) {
            q.flags = bad;
            EXPECT_FALSE(efa_btl_wire_ring_req_unpack(&q, &hdr, &rma))
                << int(type) << " " << int(bad);
        }
    }
    q.type = EFA_BTL_MSG_ATOMIC; // a general type in a one-line frame
    q.flags = 0;
    EXPECT_FALSE(efa_btl_wire_ring_req_unpack(&q, &hdr, &rma));
}
