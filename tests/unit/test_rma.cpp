// The pure logic of the native one-sided path (efa_rma.h): handles that
// travel to peers, the remote address each kind of provider expects, how a
// transfer is cut at the provider's limit, the all-or-nothing choice of
// native atomics, and the mode parameter.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "efa_rma.h"

namespace {

efa_rma_handle_t handle(uint64_t base, uint64_t len, uint64_t mr_base, bool has_mr = true) {
    efa_rma_handle_t h = {};
    h.base = base;
    h.len = len;
    h.key = 7;
    h.fi_key = 0x1234;
    h.mr_base = mr_base;
    h.flags = has_mr ? EFA_RMA_HANDLE_HAS_MR : 0;
    return h;
}

// osc/rdma copies handles byte for byte into shared memory and to other
// processes: no pointers, a fixed layout without padding holes whose
// contents would be undefined.
TEST(RmaHandle, IsPlainFixedSizeData) {
    EXPECT_TRUE(std::is_trivially_copyable_v<efa_rma_handle_t>);
    EXPECT_TRUE(std::is_standard_layout_v<efa_rma_handle_t>);
    EXPECT_EQ(sizeof(efa_rma_handle_t),
              (5 + EFA_MAX_RAILS - 1) * sizeof(uint64_t) + 6 * sizeof(uint32_t));
}

TEST(RmaHandle, SurvivesAByteCopy) {
    efa_rma_handle_t h = handle(0x7f0000001000, 4096, 0x7f0000000000);
    h.access = 0x1f;
    h.owner_pid = 4242;
    unsigned char wire[sizeof(h)];
    std::memcpy(wire, &h, sizeof(h));
    efa_rma_handle_t copy;
    std::memcpy(&copy, wire, sizeof(copy));
    uint64_t a = 0, b = 0;
    ASSERT_TRUE(efa_rma_remote_addr(&h, false, 0x7f0000001800, 8, &a));
    ASSERT_TRUE(efa_rma_remote_addr(&copy, false, 0x7f0000001800, 8, &b));
    EXPECT_EQ(a, b);
    EXPECT_EQ(copy.fi_key, h.fi_key);
    EXPECT_EQ(copy.access, h.access);
    EXPECT_EQ(copy.owner_pid, h.owner_pid);
}

// osc/rdma can copy a handle while its owner rewrites the slot it sits
// in (a dynamic window's region table): the seal tells a handle as sealed,
// and its byte copy, from a mixture of two handles.
TEST(RmaHandle, SealTellsATornCopy) {
    efa_rma_handle_t a = handle(0x10000, 0x1000, 0x10000);
    efa_rma_handle_t b = handle(0x11000, 0x2000, 0x11000);
    b.key = 8;
    b.fi_key = 0x5678;
    efa_rma_handle_seal(&a);
    efa_rma_handle_seal(&b);
    EXPECT_TRUE(efa_rma_handle_intact(&a));
    EXPECT_TRUE(efa_rma_handle_intact(&b));
    efa_rma_handle_t copy;
    std::memcpy(&copy, &b, sizeof(copy));
    EXPECT_TRUE(efa_rma_handle_intact(&copy));
    // Every split point of a front-to-back copy of b over a: a's tail
    // with b's head is no sealed handle.
    for (size_t cut = 1; cut < sizeof(a); ++cut) {
        efa_rma_handle_t torn;
        std::memcpy(&torn, &a, sizeof(torn));
        std::memcpy(&torn, &b, cut);
        if (0 == std::memcmp(&torn, &a, sizeof(a)) || 0 == std::memcmp(&torn, &b, sizeof(b))) {
            continue; // the bytes that differ are all on one side: a or b itself
        }
        EXPECT_FALSE(efa_rma_handle_intact(&torn)) << "split after byte " << cut;
    }
    efa_rma_handle_t unsealed = handle(0x10000, 0x1000, 0x10000);
    unsealed.seal = 0;
    EXPECT_FALSE(efa_rma_handle_intact(&unsealed));
}

TEST(RmaRange, BoundariesAreExact) {
    efa_rma_handle_t h = handle(1000, 100, 0);
    EXPECT_TRUE(efa_rma_in_range(&h, 1000, 100));
    EXPECT_TRUE(efa_rma_in_range(&h, 1099, 1));
    EXPECT_TRUE(efa_rma_in_range(&h, 1100, 0));
    EXPECT_FALSE(efa_rma_in_range(&h, 999, 1));
    EXPECT_FALSE(efa_rma_in_range(&h, 1000, 101));
    EXPECT_FALSE(efa_rma_in_range(&h, 1099, 2));
    EXPECT_FALSE(efa_rma_in_range(&h, 1101, 0));
}

// A sum that wraps around 2^64 must not sneak a range in.
TEST(RmaRange, NoOverflow) {
    efa_rma_handle_t h = handle(1000, 100, 0);
    EXPECT_FALSE(efa_rma_in_range(&h, 1050, UINT64_MAX));
    EXPECT_FALSE(efa_rma_in_range(&h, UINT64_MAX, 2));
    efa_rma_handle_t top = handle(UINT64_MAX - 15, 16, UINT64_MAX - 4095);
    EXPECT_TRUE(efa_rma_in_range(&top, UINT64_MAX - 15, 16));
    EXPECT_FALSE(efa_rma_in_range(&top, UINT64_MAX - 15, 17));
}

// FI_MR_VIRT_ADDR: the target address is the virtual address itself.
TEST(RmaRemoteAddr, VirtualAddressing) {
    efa_rma_handle_t h = handle(0x10010, 0x1000, 0x10000);
    uint64_t out = 0;
    ASSERT_TRUE(efa_rma_remote_addr(&h, true, 0x10020, 16, &out));
    EXPECT_EQ(out, 0x10020u);
}

// Offset-addressed providers (tcp;ofi_rxm, udp;ofi_rxd, efa without
// FI_MR_VIRT_ADDR) count from the start of the MR, which the cache rounded
// down to a page and may have merged with neighbours: not from the range
// the caller registered.
TEST(RmaRemoteAddr, OffsetsCountFromTheMrStart) {
    efa_rma_handle_t h = handle(0x10010, 0x1000, 0x8000);
    uint64_t out = 0;
    ASSERT_TRUE(efa_rma_remote_addr(&h, false, 0x10010, 1, &out));
    EXPECT_EQ(out, 0x8010u);
    ASSERT_TRUE(efa_rma_remote_addr(&h, false, 0x1100f, 1, &out));
    EXPECT_EQ(out, 0x900fu);
}

TEST(RmaRemoteAddr, RefusesWhatThePeerDidNotRegister) {
    uint64_t out = 42;
    efa_rma_handle_t h = handle(0x10010, 0x1000, 0x10000);
    EXPECT_FALSE(efa_rma_remote_addr(&h, true, 0x10000, 16, &out));  // before the range
    EXPECT_FALSE(efa_rma_remote_addr(&h, false, 0x11000, 32, &out)); // runs past the end
    efa_rma_handle_t no_mr = handle(0x10010, 0x1000, 0x10000, false);
    EXPECT_FALSE(efa_rma_remote_addr(&no_mr, true, 0x10010, 8, &out));
    // A corrupted handle whose MR would start after the range.
    efa_rma_handle_t bad = handle(0x10010, 0x1000, 0x20000);
    EXPECT_FALSE(efa_rma_remote_addr(&bad, false, 0x10010, 8, &out));
    EXPECT_EQ(out, 42u); // untouched on refusal
}

// Pieces tile the transfer exactly: contiguous, none empty (except the one
// piece of an empty transfer), none above the limit.
TEST(RmaPieces, TileTheTransfer) {
    const size_t limits[] = {0, 1, 7, 4096, 1u << 20};
    const size_t lens[] = {0, 1, 6, 7, 8, 4095, 4096, 4097, 3u << 20, (3u << 20) + 5};
    for (size_t limit : limits) {
        for (size_t len : lens) {
            size_t n = efa_rma_num_pieces(len, limit);
            ASSERT_GE(n, 1u);
            size_t expect_off = 0;
            for (size_t i = 0; i < n; ++i) {
                size_t off = 99, cnt = 99;
                efa_rma_piece(len, limit, i, &off, &cnt);
                EXPECT_EQ(off, expect_off) << "len " << len << " limit " << limit;
                if (limit) {
                    EXPECT_LE(cnt, limit);
                }
                if (len) {
                    EXPECT_GT(cnt, 0u);
                }
                expect_off += cnt;
            }
            EXPECT_EQ(expect_off, len) << "len " << len << " limit " << limit;
        }
    }
    EXPECT_EQ(efa_rma_num_pieces(SIZE_MAX, SIZE_MAX), 1u);
    EXPECT_EQ(efa_rma_num_pieces(8192, 4096), 2u);
    EXPECT_EQ(efa_rma_num_pieces(8193, 4096), 3u);
}

// A fake fi_query_atomic that refuses a given set of (type, op, kind).
struct FakeProvider {
    std::set<std::tuple<int, int, int>> missing;
    int calls = 0;
    static int query(void *arg, enum fi_datatype dt, enum fi_op op, int kind) {
        auto *self = static_cast<FakeProvider *>(arg);
        ++self->calls;
        return self->missing.count({dt, op, kind}) ? -95 : 0;
    }
};

TEST(RmaAtomics, NativeWhenEverythingIsThere) {
    FakeProvider p;
    EXPECT_TRUE(efa_rma_atomics_all_supported(FakeProvider::query, &p, nullptr, nullptr));
    // 10 ops x (plain + fetch) + cswap, on two types
    EXPECT_EQ(p.calls, 2 * (10 * 2 + 1));
}

// One gap anywhere makes every atomic emulated: a job never mixes the two.
TEST(RmaAtomics, OneGapMeansNone) {
    const std::tuple<int, int, int> gaps[] = {
        {FI_INT32, FI_LXOR, EFA_RMA_ATOMIC_PLAIN},
        {FI_INT64, FI_MIN, EFA_RMA_ATOMIC_FETCH},
        {FI_INT64, FI_CSWAP, EFA_RMA_ATOMIC_COMPARE},
        {FI_INT32, FI_ATOMIC_WRITE, EFA_RMA_ATOMIC_FETCH},
    };
    for (const auto &gap : gaps) {
        FakeProvider p;
        p.missing.insert(gap);
        enum fi_op op = FI_SUM;
        enum fi_datatype dt = FI_UINT8;
        EXPECT_FALSE(efa_rma_atomics_all_supported(FakeProvider::query, &p, &op, &dt));
        EXPECT_EQ(op, std::get<1>(gap));
        EXPECT_EQ(dt, std::get<0>(gap));
    }
}

// Kinds the BTL never uses are not asked for: a provider without a
// non-fetching compare-and-swap (there is no such thing) still qualifies.
TEST(RmaAtomics, UnusedKindsDoNotMatter) {
    FakeProvider p;
    p.missing.insert({FI_INT64, FI_CSWAP, EFA_RMA_ATOMIC_PLAIN});
    p.missing.insert({FI_INT64, FI_SUM, EFA_RMA_ATOMIC_COMPARE});
    p.missing.insert({FI_INT64, FI_ATOMIC_READ, EFA_RMA_ATOMIC_FETCH});
    p.missing.insert({FI_UINT64, FI_SUM, EFA_RMA_ATOMIC_PLAIN});
    EXPECT_TRUE(efa_rma_atomics_all_supported(FakeProvider::query, &p, nullptr, nullptr));
}

TEST(RmaAtomics, KnownDefects) {
    EXPECT_NE(efa_rma_atomics_defect("udp;ofi_rxd"), nullptr);
    EXPECT_EQ(efa_rma_atomics_defect("tcp;ofi_rxm"), nullptr);
    EXPECT_EQ(efa_rma_atomics_defect("shm"), nullptr);
    EXPECT_EQ(efa_rma_atomics_defect("efa"), nullptr);
    EXPECT_EQ(efa_rma_atomics_defect(nullptr), nullptr);
}

TEST(RmaMode, Parse) {
    efa_rma_mode_t m = EFA_RMA_MODE_EMULATED;
    EXPECT_TRUE(efa_rma_parse_mode(nullptr, &m));
    EXPECT_EQ(m, EFA_RMA_MODE_AUTO);
    EXPECT_TRUE(efa_rma_parse_mode("", &m));
    EXPECT_EQ(m, EFA_RMA_MODE_AUTO);
    EXPECT_TRUE(efa_rma_parse_mode("native", &m));
    EXPECT_EQ(m, EFA_RMA_MODE_NATIVE);
    EXPECT_TRUE(efa_rma_parse_mode("emulated", &m));
    EXPECT_EQ(m, EFA_RMA_MODE_EMULATED);
    EXPECT_TRUE(efa_rma_parse_mode("auto", &m));
    EXPECT_EQ(m, EFA_RMA_MODE_AUTO);
    for (const char *bad : {"Native", "native ", "emulate", "rdma", "0", "yes"}) {
        m = EFA_RMA_MODE_NATIVE;
        EXPECT_FALSE(efa_rma_parse_mode(bad, &m)) << bad;
        EXPECT_EQ(m, EFA_RMA_MODE_NATIVE) << "changed on refusal: " << bad;
    }
}

TEST(RmaSingleCopy, Parse) {
    efa_single_copy_mode_t m = EFA_SINGLE_COPY_NONE;
    EXPECT_TRUE(efa_rma_parse_single_copy(nullptr, &m));
    EXPECT_EQ(m, EFA_SINGLE_COPY_AUTO);
    EXPECT_TRUE(efa_rma_parse_single_copy("", &m));
    EXPECT_EQ(m, EFA_SINGLE_COPY_AUTO);
    EXPECT_TRUE(efa_rma_parse_single_copy("cma", &m));
    EXPECT_EQ(m, EFA_SINGLE_COPY_CMA);
    EXPECT_TRUE(efa_rma_parse_single_copy("none", &m));
    EXPECT_EQ(m, EFA_SINGLE_COPY_NONE);
    EXPECT_TRUE(efa_rma_parse_single_copy("auto", &m));
    EXPECT_EQ(m, EFA_SINGLE_COPY_AUTO);
    for (const char *bad : {"CMA", "xpmem", "knem", "off", "0", "cma "}) {
        m = EFA_SINGLE_COPY_CMA;
        EXPECT_FALSE(efa_rma_parse_single_copy(bad, &m)) << bad;
        EXPECT_EQ(m, EFA_SINGLE_COPY_CMA) << "changed on refusal: " << bad;
    }
}

// The single-copy path writes the target's memory itself, so the range
// the handle describes is the only protection: exact bounds, checked
// before anything else, and only for a handle of the peer addressed.
TEST(RmaSingleCopy, Check) {
    const uint32_t rw = 0x6, r = 0x4, w = 0x2; // stand-ins for MCA_BTL_REG_FLAG_REMOTE_*
    efa_rma_handle_t h = handle(1000, 100, 0, false);
    h.owner_pid = 77;
    h.access = rw;
    EXPECT_EQ(efa_rma_cma_check(&h, 77, 1000, 100, w), EFA_RMA_CMA_OK);
    EXPECT_EQ(efa_rma_cma_check(&h, 77, 1099, 1, r), EFA_RMA_CMA_OK);
    EXPECT_EQ(efa_rma_cma_check(&h, 77, 1099, 2, w), EFA_RMA_CMA_OUTSIDE);
    EXPECT_EQ(efa_rma_cma_check(&h, 77, 999, 1, w), EFA_RMA_CMA_OUTSIDE);
    EXPECT_EQ(efa_rma_cma_check(&h, 77, 1050, UINT64_MAX, w), EFA_RMA_CMA_OUTSIDE);
    // outside wins over every other verdict: refused whatever the path
    EXPECT_EQ(efa_rma_cma_check(&h, 78, 5000, 8, w), EFA_RMA_CMA_OUTSIDE);
    // another process's handle, or a peer without a verified pid
    EXPECT_EQ(efa_rma_cma_check(&h, 78, 1000, 8, w), EFA_RMA_CMA_NOT_OWNER);
    EXPECT_EQ(efa_rma_cma_check(&h, 0, 1000, 8, w), EFA_RMA_CMA_NOT_OWNER);
    h.owner_pid = 0;
    EXPECT_EQ(efa_rma_cma_check(&h, 0, 1000, 8, w), EFA_RMA_CMA_NOT_OWNER);
    h.owner_pid = 77;
    h.access = r;
    EXPECT_EQ(efa_rma_cma_check(&h, 77, 1000, 8, w), EFA_RMA_CMA_NO_ACCESS);
    EXPECT_EQ(efa_rma_cma_check(&h, 77, 1000, 8, r), EFA_RMA_CMA_OK);
}

} // namespace
