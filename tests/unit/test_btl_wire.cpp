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

} // namespace
