// The emulated one-sided target (common/core/emul_target.cpp) without Open
// MPI: what a peer's put, get or atomic request may touch (the registration
// table decides, not the request), what each atomic operation leaves, and
// that a refused request writes nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "efa_device.h"
#include "efa_emul_target.h"

namespace {

constexpr uint32_t kAll = EFA_BTL_WIRE_ACCESS_REMOTE_READ | EFA_BTL_WIRE_ACCESS_REMOTE_WRITE |
                          EFA_BTL_WIRE_ACCESS_REMOTE_ATOMIC;

efa_rma_handle_t handle(const void *p, size_t len, uint64_t key, uint32_t access) {
    efa_rma_handle_t h{};
    h.base = reinterpret_cast<uintptr_t>(p);
    h.len = len;
    h.key = key;
    h.access = access;
    return h;
}

efa_btl_rma_t request(const void *p, uint64_t len, uint64_t key) {
    efa_btl_rma_t r{};
    r.addr = reinterpret_cast<uintptr_t>(p);
    r.len = len;
    r.key = key;
    return r;
}

efa_btl_rma_t atomic(const void *p, uint64_t key, uint32_t op, uint64_t a, uint64_t b = 0,
                     uint32_t flags = 0) {
    efa_btl_rma_t r = request(p, 0, key);
    r.op = op;
    r.operand = a;
    r.operand2 = b;
    r.flags = flags;
    return r;
}

struct Table {
    efa_emul_table_t *t = efa_emul_table_create();
    ~Table() { efa_emul_table_destroy(t, nullptr, nullptr); }
};

TEST(EmulTarget, PutAndGetInsideTheRegistration) {
    Table tb;
    std::vector<uint8_t> mem(256, 0);
    efa_rma_handle_t h = handle(mem.data(), mem.size(), 7, kAll);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &h, nullptr));
    const char in[] = "written by a peer";
    efa_btl_rma_t put = request(mem.data() + 100, sizeof(in), 7);
    EXPECT_EQ(EFA_EMUL_DONE, efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &put, in, nullptr, nullptr));
    EXPECT_EQ(0, std::memcmp(mem.data() + 100, in, sizeof(in)));
    char out[sizeof(in)] = {};
    efa_btl_rma_t get = request(mem.data() + 100, sizeof(in), 7);
    EXPECT_EQ(EFA_EMUL_DONE, efa_emul_execute(tb.t, EFA_BTL_MSG_GET, &get, nullptr, out, nullptr));
    EXPECT_STREQ(in, out);
    // the last byte of the range, and an empty put at its end
    efa_btl_rma_t last = request(mem.data() + 255, 1, 7);
    EXPECT_EQ(EFA_EMUL_DONE, efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &last, "x", nullptr, nullptr));
    EXPECT_EQ('x', mem[255]);
    efa_btl_rma_t empty = request(mem.data() + 256, 0, 7);
    EXPECT_EQ(EFA_EMUL_DONE, efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &empty, "", nullptr, nullptr));
}

TEST(EmulTarget, RefusalsWriteNothing) {
    Table tb;
    std::vector<uint8_t> mem(64, 0), guard(64, 0);
    efa_rma_handle_t ro = handle(mem.data(), 32, 1, EFA_BTL_WIRE_ACCESS_REMOTE_READ);
    efa_rma_handle_t rw = handle(mem.data() + 32, 32, 2, kAll);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &ro, nullptr));
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &rw, nullptr));
    const std::vector<uint8_t> in(64, 0xab);
    // read-only memory: no put, no atomic
    efa_btl_rma_t put = request(mem.data(), 8, 1);
    EXPECT_EQ(EFA_EMUL_NO_ACCESS,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &put, in.data(), nullptr, nullptr));
    efa_btl_rma_t add = atomic(mem.data(), 1, EFA_BTL_WIRE_OP_ADD, 5);
    uint64_t old = 0;
    EXPECT_EQ(EFA_EMUL_NO_ACCESS,
              efa_emul_execute(tb.t, EFA_BTL_MSG_ATOMIC, &add, nullptr, nullptr, &old));
    // one byte over the end of the second registration
    efa_btl_rma_t over = request(mem.data() + 40, 25, 2);
    EXPECT_EQ(EFA_EMUL_OUTSIDE,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &over, in.data(), nullptr, nullptr));
    // a key nobody registered, on memory nobody registered
    efa_btl_rma_t stranger = request(guard.data(), 8, 99);
    EXPECT_EQ(EFA_EMUL_NO_SUCH_REG,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &stranger, in.data(), nullptr, nullptr));
    // an address that wraps around 2^64
    efa_btl_rma_t wrap = request(mem.data() + 40, UINT64_MAX - 8, 2);
    EXPECT_EQ(EFA_EMUL_OUTSIDE,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &wrap, in.data(), nullptr, nullptr));
    EXPECT_EQ(std::vector<uint8_t>(64, 0), mem);
    EXPECT_EQ(std::vector<uint8_t>(64, 0), guard);
}

TEST(EmulTarget, TheKeyIsAHintAnotherCoveringRegistrationServes) {
    // osc/rdma can pair a region's range with its neighbour's key
    Table tb;
    std::vector<uint8_t> a(16, 0), b(16, 0);
    efa_rma_handle_t ha = handle(a.data(), a.size(), 1, kAll);
    efa_rma_handle_t hb = handle(b.data(), b.size(), 2, kAll);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &ha, nullptr));
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &hb, nullptr));
    efa_btl_rma_t put = request(b.data(), 4, 1);
    EXPECT_EQ(EFA_EMUL_DONE,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &put, "abcd", nullptr, nullptr));
    EXPECT_EQ(0, std::memcmp(b.data(), "abcd", 4));
}

TEST(EmulTarget, ANeighbourOfAnotherKindDoesNotServe) {
    // a window's key paired with the range of a buffer registered for one
    // peer's RDMA (pml ob1's: remote write alone) writes nothing there
    Table tb;
    std::vector<uint8_t> a(16, 0), b(16, 0);
    efa_rma_handle_t window = handle(a.data(), a.size(), 1, kAll);
    efa_rma_handle_t buffer = handle(b.data(), b.size(), 2, EFA_BTL_WIRE_ACCESS_REMOTE_WRITE);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &window, nullptr));
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &buffer, nullptr));
    efa_btl_rma_t put = request(b.data(), 4, 1);
    EXPECT_EQ(EFA_EMUL_OUTSIDE,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &put, "abcd", nullptr, nullptr));
    EXPECT_EQ(std::vector<uint8_t>(16, 0), b);
    efa_btl_rma_t own = request(b.data(), 4, 2); // its own key still serves
    EXPECT_EQ(EFA_EMUL_DONE,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &own, "abcd", nullptr, nullptr));
}

TEST(EmulTarget, RemovedRegistrationIsRefused) {
    Table tb;
    std::vector<uint8_t> mem(16, 0);
    efa_rma_handle_t h = handle(mem.data(), mem.size(), 5, kAll);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &h, nullptr));
    EXPECT_EQ(1u, efa_emul_table_size(tb.t));
    efa_emul_table_remove(tb.t, 5);
    efa_emul_table_remove(tb.t, 7);
    EXPECT_EQ(0u, efa_emul_table_size(tb.t));
    efa_btl_rma_t put = request(mem.data(), 4, 5);
    EXPECT_EQ(EFA_EMUL_NO_SUCH_REG,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &put, "abcd", nullptr, nullptr));
    EXPECT_EQ(0, mem[0]);
}

TEST(EmulTarget, ARequestNamingAGoneKeyIsRefusedByANewRegistrationThere) {
    // a request that outlived its window (its origin gave up on it) comes
    // after the window was freed and a new one registered at its address
    Table tb;
    std::vector<uint8_t> mem(16, 0);
    efa_rma_handle_t old_window = handle(mem.data(), mem.size(), 5, kAll);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &old_window, nullptr));
    efa_emul_table_remove(tb.t, 5);
    efa_rma_handle_t new_window = handle(mem.data(), mem.size(), 6, kAll);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &new_window, nullptr));
    efa_btl_rma_t late = request(mem.data(), 4, 5);
    EXPECT_EQ(EFA_EMUL_NO_SUCH_REG,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &late, "abcd", nullptr, nullptr));
    EXPECT_EQ(std::vector<uint8_t>(16, 0), mem)
        << "the new window was written by the old one's request";
    efa_btl_rma_t now = request(mem.data(), 4, 6);
    EXPECT_EQ(EFA_EMUL_DONE,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &now, "abcd", nullptr, nullptr));
}

// The registration a request found last is remembered (a peer's requests
// on one window name one key after another): it must be forgotten with
// the table's changes, and a miss must still search the table.
TEST(EmulTarget, TheLastRegistrationFoundFollowsTheTable) {
    Table tb;
    std::vector<uint8_t> mem(32, 0), other(32, 0);
    efa_rma_handle_t h = handle(mem.data(), mem.size(), 9, kAll);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &h, nullptr));
    efa_btl_rma_t put = request(mem.data(), 4, 9);
    ASSERT_EQ(EFA_EMUL_DONE,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &put, "abcd", nullptr, nullptr));
    // removed after use: refused, nothing written
    efa_emul_table_remove(tb.t, 9);
    mem[0] = 0;
    EXPECT_EQ(EFA_EMUL_NO_SUCH_REG,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &put, "wxyz", nullptr, nullptr));
    EXPECT_EQ(0, mem[0]);
    // the same key again, read only: the new access decides
    efa_rma_handle_t ro = handle(mem.data(), mem.size(), 9, EFA_BTL_WIRE_ACCESS_REMOTE_READ);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &ro, nullptr));
    efa_btl_rma_t get = request(mem.data(), 4, 9);
    char out[4];
    ASSERT_EQ(EFA_EMUL_DONE, efa_emul_execute(tb.t, EFA_BTL_MSG_GET, &get, nullptr, out, nullptr));
    EXPECT_EQ(EFA_EMUL_NO_ACCESS,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &put, "wxyz", nullptr, nullptr));
    EXPECT_EQ(0, mem[0]);
    // the remembered key names another range: the table still serves it
    // (a registration with the named one's rights)
    efa_rma_handle_t o = handle(other.data(), other.size(), 10, EFA_BTL_WIRE_ACCESS_REMOTE_READ);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &o, nullptr));
    ASSERT_EQ(EFA_EMUL_DONE, efa_emul_execute(tb.t, EFA_BTL_MSG_GET, &get, nullptr, out, nullptr));
    std::memcpy(other.data() + 8, "efgh", 4);
    efa_btl_rma_t elsewhere = request(other.data() + 8, 4, 9);
    EXPECT_EQ(EFA_EMUL_DONE,
              efa_emul_execute(tb.t, EFA_BTL_MSG_GET, &elsewhere, nullptr, out, nullptr));
    EXPECT_EQ(0, std::memcmp(out, "efgh", 4));
}

struct AtomicCase {
    uint32_t op;
    int64_t start, a, b, after;
};

TEST(EmulTarget, EveryAtomicOn64And32Bits) {
    const AtomicCase cases[] = {
        {EFA_BTL_WIRE_OP_ADD, 40, 2, 0, 42},
        {EFA_BTL_WIRE_OP_AND, 0xf0f, 0x0ff, 0, 0x00f},
        {EFA_BTL_WIRE_OP_OR, 0xf00, 0x00f, 0, 0xf0f},
        {EFA_BTL_WIRE_OP_XOR, 0xff, 0x0f, 0, 0xf0},
        {EFA_BTL_WIRE_OP_LAND, 3, 0, 0, 0},
        {EFA_BTL_WIRE_OP_LAND, 3, 7, 0, 1},
        {EFA_BTL_WIRE_OP_LOR, 0, 0, 0, 0},
        {EFA_BTL_WIRE_OP_LOR, 0, 9, 0, 1},
        {EFA_BTL_WIRE_OP_LXOR, 5, 9, 0, 0},
        {EFA_BTL_WIRE_OP_LXOR, 0, 9, 0, 1},
        {EFA_BTL_WIRE_OP_SWAP, 1, 77, 0, 77},
        {EFA_BTL_WIRE_OP_MIN, -3, 4, 0, -3},
        {EFA_BTL_WIRE_OP_MIN, 4, -3, 0, -3},
        {EFA_BTL_WIRE_OP_MAX, -3, 4, 0, 4},
        {EFA_BTL_WIRE_OP_MAX, 4, -3, 0, 4},
        {EFA_BTL_WIRE_OP_CSWAP, 10, 10, 20, 20},
        {EFA_BTL_WIRE_OP_CSWAP, 10, 11, 20, 10},
    };
    Table tb;
    alignas(8) int64_t w64 = 0;
    alignas(4) int32_t w32 = 0;
    efa_rma_handle_t h64 = handle(&w64, sizeof(w64), 1, kAll);
    efa_rma_handle_t h32 = handle(&w32, sizeof(w32), 2, kAll);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &h64, nullptr));
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &h32, nullptr));
    for (const AtomicCase &c : cases) {
        w64 = c.start;
        uint64_t old = 0;
        efa_btl_rma_t r =
            atomic(&w64, 1, c.op, static_cast<uint64_t>(c.a), static_cast<uint64_t>(c.b));
        ASSERT_EQ(EFA_EMUL_DONE,
                  efa_emul_execute(tb.t, EFA_BTL_MSG_ATOMIC, &r, nullptr, nullptr, &old));
        EXPECT_EQ(c.after, w64) << "op 0x" << std::hex << c.op;
        EXPECT_EQ(static_cast<uint64_t>(c.start), old) << "op 0x" << std::hex << c.op;

        w32 = static_cast<int32_t>(c.start);
        r = atomic(&w32, 2, c.op, static_cast<uint32_t>(c.a), static_cast<uint32_t>(c.b),
                   EFA_BTL_WIRE_ATOMIC_32BIT);
        ASSERT_EQ(EFA_EMUL_DONE,
                  efa_emul_execute(tb.t, EFA_BTL_MSG_ATOMIC, &r, nullptr, nullptr, &old));
        EXPECT_EQ(static_cast<int32_t>(c.after), w32) << "32-bit op 0x" << std::hex << c.op;
        EXPECT_EQ(static_cast<uint32_t>(c.start), old) << "32-bit op 0x" << std::hex << c.op;
    }
}

TEST(EmulTarget, AtomicsRefusedBeforeTheTable) {
    Table tb;
    alignas(8) uint64_t words[2] = {0, 0};
    efa_rma_handle_t h = handle(words, sizeof(words), 1, kAll);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &h, nullptr));
    uint64_t old = 0;
    efa_btl_rma_t bad_op = atomic(words, 1, 0x99, 1);
    EXPECT_EQ(EFA_EMUL_UNSUPPORTED_OP,
              efa_emul_execute(tb.t, EFA_BTL_MSG_ATOMIC, &bad_op, nullptr, nullptr, &old));
    efa_btl_rma_t fp = atomic(words, 1, EFA_BTL_WIRE_OP_ADD, 1, 0, EFA_BTL_WIRE_ATOMIC_FLOAT);
    EXPECT_EQ(EFA_EMUL_UNSUPPORTED_OP,
              efa_emul_execute(tb.t, EFA_BTL_MSG_ATOMIC, &fp, nullptr, nullptr, &old));
    efa_btl_rma_t skew = atomic(reinterpret_cast<uint8_t *>(words) + 4, 1, EFA_BTL_WIRE_OP_ADD, 1);
    EXPECT_EQ(EFA_EMUL_MISALIGNED,
              efa_emul_execute(tb.t, EFA_BTL_MSG_ATOMIC, &skew, nullptr, nullptr, &old));
    // a 32-bit atomic at that address is aligned; one over the end is not inside
    efa_btl_rma_t last32 = atomic(reinterpret_cast<uint8_t *>(words) + 12, 1, EFA_BTL_WIRE_OP_ADD,
                                  1, 0, EFA_BTL_WIRE_ATOMIC_32BIT);
    EXPECT_EQ(EFA_EMUL_DONE,
              efa_emul_execute(tb.t, EFA_BTL_MSG_ATOMIC, &last32, nullptr, nullptr, &old));
    efa_btl_rma_t past = atomic(words + 2, 1, EFA_BTL_WIRE_OP_ADD, 1);
    EXPECT_EQ(EFA_EMUL_OUTSIDE,
              efa_emul_execute(tb.t, EFA_BTL_MSG_ATOMIC, &past, nullptr, nullptr, &old));
    EXPECT_EQ(0u, words[0]);
    EXPECT_EQ(uint64_t{1} << 32, words[1]); // only last32's add, in the upper half
}

TEST(EmulTarget, ConcurrentAddsLoseNothing) {
    Table tb;
    alignas(8) uint64_t counter = 0;
    efa_rma_handle_t h = handle(&counter, sizeof(counter), 1, kAll);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &h, nullptr));
    constexpr int kThreads = 4, kEach = 5000;
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([&] {
            for (int k = 0; k < kEach; ++k) {
                uint64_t old;
                efa_btl_rma_t r = atomic(&counter, 1, EFA_BTL_WIRE_OP_ADD, 1);
                efa_emul_execute(tb.t, EFA_BTL_MSG_ATOMIC, &r, nullptr, nullptr, &old);
            }
        });
    }
    // the process's own CPU atomics mix with the peers'
    for (int k = 0; k < kEach; ++k) {
        __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
    }
    for (auto &t : threads) {
        t.join();
    }
    EXPECT_EQ(uint64_t{(kThreads + 1) * kEach}, counter);
}

TEST(EmulTarget, DestroyHandsBackWhatIsLeft) {
    efa_emul_table_t *t = efa_emul_table_create();
    ASSERT_NE(nullptr, t);
    int owners[3] = {};
    std::vector<uint8_t> mem(8);
    for (int i = 0; i < 3; ++i) {
        efa_rma_handle_t h = handle(mem.data(), mem.size(), 10 + i, kAll);
        ASSERT_EQ(0, efa_emul_table_add(t, &h, &owners[i]));
    }
    efa_emul_table_remove(t, 11);
    std::vector<void *> left;
    efa_emul_table_destroy(
        t,
        [](void *arg, void *owner) { static_cast<std::vector<void *> *>(arg)->push_back(owner); },
        &left);
    ASSERT_EQ(2u, left.size());
    EXPECT_TRUE((left[0] == &owners[0] && left[1] == &owners[2]) ||
                (left[0] == &owners[2] && left[1] == &owners[0]));
}

// A registration of device memory (the fake device: the CPU cannot touch
// it, a CPU write or read takes SIGSEGV) is written and read with the
// device's copy only; an atomic on it is refused and changes nothing; a
// host registration beside it is still served with the CPU.
struct FakeDevice {
    FakeDevice() { efa_device_install(efa_fake_device_ops()); }
    ~FakeDevice() { efa_device_install(nullptr); }
};
struct FakeAlloc {
    uint8_t *p;
    explicit FakeAlloc(size_t len) : p(static_cast<uint8_t *>(efa_fake_device_alloc(len))) {}
    ~FakeAlloc() { efa_fake_device_free(p); }
};

TEST(EmulTarget, DeviceMemoryOnlyThroughTheDevicesCopy) {
    FakeDevice fake;
    Table tb;
    FakeAlloc mem(128);
    uint8_t *dev = mem.p;
    ASSERT_NE(nullptr, dev);
    efa_rma_handle_t h = handle(dev, 128, 5, kAll);
    h.flags |= EFA_RMA_HANDLE_DEVICE;
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &h, nullptr));
    std::vector<uint8_t> host(64, 0);
    efa_rma_handle_t hh = handle(host.data(), host.size(), 6, kAll);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &hh, nullptr));

    const char in[] = "into device memory";
    efa_btl_rma_t put = request(dev + 40, sizeof(in), 5);
    EXPECT_EQ(EFA_EMUL_DONE, efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &put, in, nullptr, nullptr));
    char seen[sizeof(in)] = {};
    ASSERT_EQ(0, efa_device_copy(seen, dev + 40, sizeof(in)));
    EXPECT_STREQ(in, seen);
    char out[sizeof(in)] = {};
    efa_btl_rma_t get = request(dev + 40, sizeof(in), 5);
    EXPECT_EQ(EFA_EMUL_DONE, efa_emul_execute(tb.t, EFA_BTL_MSG_GET, &get, nullptr, out, nullptr));
    EXPECT_STREQ(in, out);

    const uint64_t before = 41;
    ASSERT_EQ(0, efa_device_copy(dev + 64, &before, sizeof(before)));
    uint64_t result = 99;
    efa_btl_rma_t add = atomic(dev + 64, 5, EFA_BTL_WIRE_OP_ADD, 1);
    EXPECT_EQ(EFA_EMUL_DEVICE_ATOMIC,
              efa_emul_execute(tb.t, EFA_BTL_MSG_ATOMIC, &add, nullptr, nullptr, &result));
    EXPECT_EQ(99u, result);
    uint64_t after = 0;
    ASSERT_EQ(0, efa_device_copy(&after, dev + 64, sizeof(after)));
    EXPECT_EQ(before, after);

    efa_btl_rma_t host_add = atomic(host.data() + 8, 6, EFA_BTL_WIRE_OP_ADD, 3);
    EXPECT_EQ(EFA_EMUL_DONE,
              efa_emul_execute(tb.t, EFA_BTL_MSG_ATOMIC, &host_add, nullptr, nullptr, &result));
    EXPECT_EQ(3u, host[8]);

    // A copy the device refuses (running past its allocation, which the
    // registration claims to cover) is a verdict, not a write.
    efa_rma_handle_t big = handle(dev, 1 << 20, 7, kAll);
    big.flags |= EFA_RMA_HANDLE_DEVICE;
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &big, nullptr));
    std::vector<uint8_t> lots(8192, 1);
    efa_btl_rma_t past = request(dev, lots.size(), 7);
    EXPECT_EQ(EFA_EMUL_DEVICE_COPY_FAILED,
              efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &past, lots.data(), nullptr, nullptr));
    ASSERT_EQ(0, efa_device_copy(seen, dev + 40, sizeof(in)));
    EXPECT_STREQ(in, seen);
    // A removal returns with no copy running (none here: it must not wait).
    efa_emul_table_remove(tb.t, 5);
    efa_emul_table_remove(tb.t, 7);
    EXPECT_EQ(EFA_EMUL_NO_SUCH_REG,
              efa_emul_execute(tb.t, EFA_BTL_MSG_GET, &get, nullptr, out, nullptr));
}

// A device copy runs outside the table's spin lock (it may wait for the
// device): a removal of its registration must still wait for it, and a
// request on another registration must not.  The device here is one whose
// copy holds until the test lets it go.
std::atomic<int> g_copy_gate{0}; // 1: a copy is waiting, 2: let it go
int gated_check(const void *, size_t) {
    return 1;
}
int gated_copy(void *dst, const void *src, size_t len) {
    g_copy_gate.store(1);
    while (g_copy_gate.load() != 2) {
        std::this_thread::yield();
    }
    std::memcpy(dst, src, len);
    return 0;
}
void gated_release(void *) {}
const efa_device_ops_t kGated = {
    .name = "gated",
    .check = gated_check,
    .copy = gated_copy,
    .release = gated_release,
    .ipc_export = nullptr, // (no IPC)
    .ipc_import = nullptr,
    .ipc_close = nullptr,
    .ipc_release = nullptr,
    .hmem = nullptr,
    .dmabuf = nullptr,
    .host_register = nullptr,
    .host_unregister = nullptr,
};

struct GatedDevice {
    GatedDevice() { efa_device_install(&kGated); }
    ~GatedDevice() {
        g_copy_gate.store(2); // (a copy still held, after a failed check, goes)
        efa_device_install(nullptr);
    }
};

TEST(EmulTarget, ARemovalWaitsForTheDeviceCopyRunning) {
    GatedDevice gated;
    Table tb;
    std::vector<uint8_t> dev_mem(64, 0), host(64, 0);
    efa_rma_handle_t d = handle(dev_mem.data(), dev_mem.size(), 1, kAll);
    d.flags |= EFA_RMA_HANDLE_DEVICE;
    efa_rma_handle_t h = handle(host.data(), host.size(), 2, kAll);
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &d, nullptr));
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &h, nullptr));
    g_copy_gate.store(0);
    const char in[] = "late";
    std::thread put([&] {
        efa_btl_rma_t r = request(dev_mem.data(), sizeof(in), 1);
        EXPECT_EQ(EFA_EMUL_DONE, efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &r, in, nullptr, nullptr));
    });
    while (g_copy_gate.load() != 1) {
        std::this_thread::yield();
    }
    // the copy holds: a host request is served meanwhile
    efa_btl_rma_t add = atomic(host.data(), 2, EFA_BTL_WIRE_OP_ADD, 1);
    uint64_t old = 7;
    EXPECT_EQ(EFA_EMUL_DONE,
              efa_emul_execute(tb.t, EFA_BTL_MSG_ATOMIC, &add, nullptr, nullptr, &old));
    EXPECT_EQ(0u, old);
    std::atomic<bool> removed{false};
    std::thread rm([&] {
        efa_emul_table_remove(tb.t, 1);
        removed.store(true);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(removed.load()) << "the removal returned while a device copy of it ran";
    g_copy_gate.store(2);
    put.join();
    rm.join();
    EXPECT_TRUE(removed.load());
    EXPECT_STREQ(in, reinterpret_cast<const char *>(dev_mem.data()));
}

// Two removals while a device copy runs on the second registration: the
// first (no copy of its own) returns at once, and the second still waits
// for its copy (they shared two counters by turns, and the second waited
// on the one the copy was not counted in).
TEST(EmulTarget, ARemovalAfterAnothersStillWaitsForItsOwnDeviceCopy) {
    GatedDevice gated;
    Table tb;
    std::vector<uint8_t> mem_a(64, 0), mem_b(64, 0);
    efa_rma_handle_t a = handle(mem_a.data(), mem_a.size(), 1, kAll);
    efa_rma_handle_t b = handle(mem_b.data(), mem_b.size(), 3, kAll);
    a.flags |= EFA_RMA_HANDLE_DEVICE;
    b.flags |= EFA_RMA_HANDLE_DEVICE;
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &a, nullptr));
    ASSERT_EQ(0, efa_emul_table_add(tb.t, &b, nullptr));
    g_copy_gate.store(0);
    const char in[] = "on b";
    std::thread put([&] {
        efa_btl_rma_t r = request(mem_b.data(), sizeof(in), 3);
        EXPECT_EQ(EFA_EMUL_DONE, efa_emul_execute(tb.t, EFA_BTL_MSG_PUT, &r, in, nullptr, nullptr));
    });
    while (g_copy_gate.load() != 1) {
        std::this_thread::yield();
    }
    std::atomic<bool> removed_a{false}, removed_b{false};
    std::thread rm_a([&] {
        efa_emul_table_remove(tb.t, 1);
        removed_a.store(true);
    });
    for (int i = 0; i < 2000 && !removed_a.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(removed_a.load()) << "a removal waited for a copy on another registration";
    std::thread rm_b([&] {
        efa_emul_table_remove(tb.t, 3);
        removed_b.store(true);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(removed_b.load()) << "the removal returned while a device copy of it ran";
    g_copy_gate.store(2);
    put.join();
    rm_a.join();
    rm_b.join();
    EXPECT_TRUE(removed_b.load());
    EXPECT_STREQ(in, reinterpret_cast<const char *>(mem_b.data()));
}

TEST(EmulTarget, VerdictsHaveWords) {
    for (efa_emul_verdict_t v :
         {EFA_EMUL_NO_SUCH_REG, EFA_EMUL_OUTSIDE, EFA_EMUL_NO_ACCESS, EFA_EMUL_UNSUPPORTED_OP,
          EFA_EMUL_MISALIGNED, EFA_EMUL_DEVICE_ATOMIC, EFA_EMUL_DEVICE_COPY_FAILED}) {
        EXPECT_STRNE("unknown verdict", efa_emul_verdict_text(v));
    }
}

} // namespace
