// CUDA VMM buffers over several allocations side by side (device_span.hpp):
// the fake device's pieces (efa_fake_device_pieces) stand for the physical
// allocations that PyTorch's expandable segments map one after the other.
// The fake copies across the pieces of one allocation and refuses a copy
// past its last; through a provider with FI_HMEM (shm) a buffer that runs
// from one piece into the next is one registration over those pieces, a
// buffer inside any of them is served by it while all of its pieces are
// as they were, a piece mapped anew (new id, same address) makes it stale
// for every buffer in it, memory that is not VMM memory never spans, an
// allocation without an id keeps id 0 (never registered), and more than
// kMrMaxPieces (256)
// pieces are refused (the caller copies through the host).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_test_params.hpp"
#include "device_span.hpp"
#include "efa_core.h"
#include "efa_device.h"

namespace {

constexpr size_t kPiece = 8192;

class FakePieces : public ::testing::Test {
  protected:
    void SetUp() override {
        efa_device_install(efa_fake_device_ops());
        efa_fake_device_pieces(kPiece);
    }
    void TearDown() override {
        efa_fake_device_pieces(0);
        efa_device_install(nullptr);
        EXPECT_EQ(efa_fake_device_live(), 0u); // every piece freed with its allocation
    }
};

TEST_F(FakePieces, ACopyRunsAcrossThePiecesOfOneAllocation) {
    auto *dev = static_cast<uint8_t *>(efa_fake_device_alloc(3 * kPiece));
    ASSERT_NE(dev, nullptr);
    EXPECT_EQ(efa_fake_device_live(), 3u);
    std::vector<uint8_t> in(2 * kPiece), out(2 * kPiece, 0);
    for (size_t i = 0; i < in.size(); ++i) {
        in[i] = static_cast<uint8_t>(i * 7 + 3);
    }
    EXPECT_TRUE(efa_device_check(dev + 100, 2 * kPiece));
    ASSERT_EQ(efa_device_copy(dev + 100, in.data(), in.size()), 0);
    ASSERT_EQ(efa_device_copy(out.data(), dev + 100, out.size()), 0);
    EXPECT_EQ(0, memcmp(in.data(), out.data(), in.size()));
    // Device to device, both sides across pieces (and not overlapping).
    uint8_t *to = dev + kPiece + kPiece / 2;
    ASSERT_EQ(efa_device_copy(to, dev + 100, kPiece), 0);
    ASSERT_EQ(efa_device_copy(out.data(), to, kPiece), 0);
    EXPECT_EQ(0, memcmp(in.data(), out.data(), kPiece));
    // Overlapping, the destination above the source: the source's bytes.
    ASSERT_EQ(efa_device_copy(dev + kPiece - 50, in.data(), kPiece), 0);
    ASSERT_EQ(efa_device_copy(dev + kPiece - 40, dev + kPiece - 50, kPiece), 0);
    ASSERT_EQ(efa_device_copy(out.data(), dev + kPiece - 40, kPiece), 0);
    EXPECT_EQ(0, memcmp(in.data(), out.data(), kPiece));
    // Past the last piece: the caller's error.
    EXPECT_FALSE(efa_device_check(dev + 2 * kPiece, kPiece + 1));
    EXPECT_EQ(efa_device_copy(dev + 2 * kPiece, in.data(), kPiece + 1), -FI_EINVAL);
    efa_fake_device_free(dev + kPiece); // (not an allocation's first byte: nothing)
    EXPECT_EQ(efa_fake_device_live(), 3u);
    efa_fake_device_free(dev);
}

TEST_F(FakePieces, EachPieceIsAnAllocationOfItsOwn) {
    efa_fake_device_visible(true);
    auto *dev = static_cast<uint8_t *>(efa_fake_device_alloc(2 * kPiece));
    ASSERT_NE(dev, nullptr);
    efa_device_hmem_t a{}, b{}, b2{};
    ASSERT_EQ(efa_device_hmem(dev + 10, 2 * kPiece - 10, &a), 0); // (runs on: described anyway)
    ASSERT_EQ(efa_device_hmem(dev + kPiece, 10, &b), 0);
    EXPECT_EQ(a.base, reinterpret_cast<uintptr_t>(dev));
    EXPECT_EQ(a.len, kPiece);
    EXPECT_EQ(b.base, reinterpret_cast<uintptr_t>(dev + kPiece));
    EXPECT_NE(a.buffer_id, b.buffer_id);
    ASSERT_EQ(efa_fake_device_remap_piece(dev + kPiece), 0);
    ASSERT_EQ(efa_device_hmem(dev + kPiece, 10, &b2), 0);
    EXPECT_EQ(b2.base, b.base);
    EXPECT_NE(b2.buffer_id, b.buffer_id);
    EXPECT_EQ(efa_fake_device_remap_piece(dev + 10), -1);
    efa_fake_device_free(dev);
    efa_fake_device_visible(false);
}

TEST(DeviceSpan, SpansOnlyMemoryWithoutSynchronousCopies) {
    efa_device_install(efa_fake_device_ops());
    efa_fake_device_visible(true);
    efa_fake_device_pieces(kPiece);
    for (bool vmm : {false, true}) {
        efa_fake_device_no_sync_memops(vmm);
        auto *dev = static_cast<uint8_t *>(efa_fake_device_alloc(3 * kPiece));
        ASSERT_NE(dev, nullptr);
        efa::DeviceSpan s;
        EXPECT_EQ(efa::describe_device_span(dev + 5, kPiece, &s), vmm ? 0 : -FI_EINVAL) << vmm;
        if (vmm) {
            EXPECT_EQ(s.pieces, 2);
            EXPECT_EQ(s.whole.base, reinterpret_cast<uintptr_t>(dev));
            EXPECT_EQ(s.whole.len, 2 * kPiece);
            EXPECT_NE(s.whole.buffer_id, s.id[0]); // (the span's key, not the first's id)
        }
        ASSERT_EQ(efa::describe_device_span(dev + kPiece + 5, 100, &s), 0); // one piece: as ever
        EXPECT_EQ(s.pieces, 1);
        EXPECT_EQ(s.whole.buffer_id, s.id[0]);
        efa_fake_device_free(dev);
    }
    efa_fake_device_no_sync_memops(false);
    efa_fake_device_pieces(0);
    efa_fake_device_visible(false);
    efa_device_install(nullptr);
}

// A backend that describes every buffer as one allocation of 1 MiB with
// no id (as a device whose id call fails).
int no_id_hmem(const void *buf, size_t, efa_device_hmem_t *out) {
    out->iface = FI_HMEM_SYSTEM;
    out->device = 0;
    out->buffer_id = 0;
    out->base = reinterpret_cast<uintptr_t>(buf);
    out->len = 1 << 20;
    out->no_sync_memops = false;
    return 0;
}

TEST(DeviceSpan, AnAllocationWithoutAnIdKeepsIdZero) {
    efa_device_ops_t ops{};
    ops.name = "no-id";
    ops.hmem = no_id_hmem;
    efa_device_install(&ops);
    static uint8_t buf[64];
    efa::DeviceSpan s;
    ASSERT_EQ(efa::describe_device_span(buf, sizeof(buf), &s), 0);
    EXPECT_EQ(s.pieces, 1);
    EXPECT_EQ(s.whole.buffer_id, 0u); // (so efa_core_mr_acquire_device refuses it)
    efa_device_install(nullptr);
}

// A core on shm (FI_HMEM) with the fake's memory visible and described as
// VMM memory (common_efa_hmem_vmm auto hands it to shm).
class CoreDeviceSpan : public ::testing::Test {
  protected:
    void open(bool vmm = true) {
        efa_core_params_t p = core_test_params("shm");
        p.debug_fake_device = true;
        p.debug_fake_device_hmem = true;
        p.debug_fake_device_vmm = vmm;
        p.debug_fake_device_piece = static_cast<int>(kPiece);
        p.hmem = true;
        int err = 0;
        core_ = efa_core_acquire(&p, &err);
        ASSERT_NE(core_, nullptr) << "efa_core_acquire: " << err;
        ASSERT_TRUE(efa_core_get_info(core_)->hmem);
    }
    void TearDown() override {
        if (core_) {
            efa_core_release(core_);
        }
        efa_fake_device_visible(false);
        efa_fake_device_no_sync_memops(false);
    }
    efa_mr_t *acquire(const void *buf, size_t len, int *err) {
        return efa_core_mr_acquire_device(core_, buf, len, FI_SEND | FI_REMOTE_READ, err);
    }
    efa_core_t *core_ = nullptr;
};

TEST_F(CoreDeviceSpan, ABufferOverPiecesIsOneRegistrationServingEachPiece) {
    open();
    auto *dev = static_cast<uint8_t *>(efa_fake_device_alloc(4 * kPiece));
    ASSERT_NE(dev, nullptr);
    int err = 0;
    efa_mr_t *a = acquire(dev + 100, 2 * kPiece, &err); // pieces 0 to 2
    ASSERT_NE(a, nullptr) << err;
    EXPECT_EQ(efa_mr_base(a), reinterpret_cast<uintptr_t>(dev));
    EXPECT_EQ(efa_mr_len(a), 3 * kPiece);
    EXPECT_EQ(efa_core_mr_device_spans(core_), 1u);
    efa_mr_t *b = acquire(dev + kPiece + 10, 10, &err); // inside piece 1
    EXPECT_EQ(b, a);
    efa_mr_t *c = acquire(dev, 4 * kPiece, &err); // all four: the union
    ASSERT_NE(c, nullptr) << err;
    EXPECT_EQ(efa_mr_len(c), 4 * kPiece);
    EXPECT_EQ(efa_core_mr_device_spans(core_), 2u);
    EXPECT_EQ(efa_core_mr_device_stale(core_), 0u);
    for (efa_mr_t *m : {a, b, c}) {
        efa_core_mr_release(core_, m);
    }
    efa_fake_device_free(dev);
}

TEST_F(CoreDeviceSpan, APieceMappedAnewMakesTheRegistrationOverItStale) {
    open();
    auto *dev = static_cast<uint8_t *>(efa_fake_device_alloc(3 * kPiece));
    ASSERT_NE(dev, nullptr);
    int err = 0;
    efa_mr_t *a = acquire(dev, 3 * kPiece, &err);
    ASSERT_NE(a, nullptr) << err;
    efa_core_mr_release(core_, a);             // kept in the cache
    efa_mr_t *b = acquire(dev + 10, 10, &err); // piece 0 alone: served by it
    EXPECT_EQ(b, a);
    efa_core_mr_release(core_, b);
    EXPECT_EQ(efa_core_mr_device_stale(core_), 0u);
    ASSERT_EQ(efa_fake_device_remap_piece(dev + kPiece), 0);
    // Piece 0 is as it was, but the registration also covers piece 1,
    // which is not: not used on, registered again over what is there.
    efa_mr_t *c = acquire(dev + 10, 10, &err);
    ASSERT_NE(c, nullptr) << err;
    EXPECT_EQ(efa_core_mr_device_stale(core_), 1u);
    EXPECT_EQ(efa_mr_base(c), reinterpret_cast<uintptr_t>(dev));
    efa_mr_t *d = acquire(dev + kPiece - 10, 20, &err); // into piece 1: the union
    ASSERT_NE(d, nullptr) << err;
    efa_mr_t *e = acquire(dev + kPiece - 10, 20, &err); // found from now on
    EXPECT_EQ(e, d);
    EXPECT_EQ(efa_core_mr_device_stale(core_), 1u);
    for (efa_mr_t *m : {c, d, e}) {
        efa_core_mr_release(core_, m);
    }
    efa_fake_device_free(dev);
}

TEST_F(CoreDeviceSpan, MemoryWithSynchronousCopiesDoesNotSpan) {
    open(false);
    auto *dev = static_cast<uint8_t *>(efa_fake_device_alloc(2 * kPiece));
    ASSERT_NE(dev, nullptr);
    int err = 0;
    EXPECT_EQ(acquire(dev + 10, kPiece, &err), nullptr);
    EXPECT_EQ(err, -FI_EINVAL);
    efa_mr_t *a = acquire(dev + kPiece, kPiece, &err); // one piece: registered
    ASSERT_NE(a, nullptr) << err;
    EXPECT_EQ(efa_core_mr_device_spans(core_), 0u);
    efa_core_mr_release(core_, a);
    efa_fake_device_free(dev);
}

TEST_F(CoreDeviceSpan, MoreThanSixtyFourPiecesAreRefused) {
    open();
    const size_t n = efa::kMrMaxPieces + 2;
    auto *dev = static_cast<uint8_t *>(efa_fake_device_alloc(n * kPiece));
    ASSERT_NE(dev, nullptr);
    int err = 0;
    EXPECT_EQ(acquire(dev, n * kPiece, &err), nullptr);
    EXPECT_EQ(err, -FI_E2BIG);
    efa_mr_t *a = acquire(dev + kPiece, efa::kMrMaxPieces * kPiece, &err); // 256: one registration
    ASSERT_NE(a, nullptr) << err;
    EXPECT_EQ(efa_mr_len(a), efa::kMrMaxPieces * kPiece);
    efa_core_mr_release(core_, a);
    efa_fake_device_free(dev);
}

} // namespace
