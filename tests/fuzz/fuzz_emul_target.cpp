// Emulated one-sided requests as the target executes them (common/include/
// efa_emul_target.h): type, address, length, key, operation and flags all
// come from another process.  The target's memory is two registrations
// inside one heap block of exactly the registered size (ASan sees a byte
// too far), one read-only, and a third of the fake device's memory (the
// CPU cannot touch it: a CPU copy or atomic there crashes the harness).
// Whatever the request, a request the target executes must lie inside a
// registration that grants its access, never an atomic on device memory,
// and a refused one must leave every byte as it was.
//
// Input: 1 byte type (PUT, GET or ATOMIC, by the low 2 bits), 1 byte
// address mode (0: an offset into the block, 1: into the device block,
// else a raw 64-bit address), 8 bytes address/offset, 8 bytes length,
// 1 byte key (1, 2, 3: the device block, or other),
// 4 bytes op, 4 bytes flags, 8 + 8 bytes operands; the rest is a put's
// payload (a put whose payload is shorter is not sent: the receiver
// checks that a put carries what it names before the target sees it).
#include <cstdlib>
#include <cstring>
#include <vector>

#include "efa_device.h"
#include "efa_emul_target.h"
#include "fuzz_input.hpp"

namespace {

constexpr size_t kBlock = 96;
constexpr size_t kReadOnly = 32; // [0, 32): read-only, key 1; [32, 96): everything, key 2

constexpr size_t kDevice = 64; // key 3: everything, device memory

bool in_device(uint64_t dev, uint64_t addr, uint64_t len) {
    return addr >= dev && len <= kDevice && addr - dev <= kDevice - len;
}

std::vector<uint8_t> device_bytes(const void *dev) {
    std::vector<uint8_t> b(kDevice);
    FUZZ_CHECK(0 == efa_device_copy(b.data(), dev, kDevice));
    return b;
}

bool granted(uint64_t base, uint64_t addr, uint64_t len, bool writes) {
    const uint64_t ro = base, rw = base + kReadOnly;
    const bool in_rw =
        addr >= rw && len <= kBlock - kReadOnly && addr - rw <= kBlock - kReadOnly - len;
    const bool in_ro = addr >= ro && len <= kReadOnly && addr - ro <= kReadOnly - len;
    return in_rw || (!writes && in_ro);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    static const uint8_t kTypes[] = {EFA_BTL_MSG_PUT, EFA_BTL_MSG_GET, EFA_BTL_MSG_ATOMIC,
                                     EFA_BTL_MSG_ATOMIC};
    const uint8_t type = kTypes[in.take<uint8_t>() & 3];
    const uint8_t mode = in.take<uint8_t>();
    const uint64_t where = in.take<uint64_t>();
    efa_btl_rma_t rma{};
    rma.len = in.take<uint64_t>();
    const uint8_t key = in.take<uint8_t>();
    rma.op = in.take<uint32_t>();
    rma.flags = in.take<uint32_t>();
    rma.operand = in.take<uint64_t>();
    rma.operand2 = in.take<uint64_t>();
    std::vector<uint8_t> payload;
    while (in.left() > 0) {
        payload.push_back(in.take<uint8_t>());
    }

    auto *block = static_cast<uint8_t *>(std::malloc(kBlock));
    for (size_t i = 0; i < kBlock; ++i) {
        block[i] = static_cast<uint8_t>(i * 7 + 1);
    }
    const uint64_t base = reinterpret_cast<uintptr_t>(block);
    // (one device block for the whole run: the fake maps a page per block)
    static void *const dev_block = [] {
        efa_device_install(efa_fake_device_ops());
        return efa_fake_device_alloc(kDevice);
    }();
    FUZZ_CHECK(nullptr != dev_block);
    const uint64_t dev = reinterpret_cast<uintptr_t>(dev_block);
    rma.addr = 0 == mode ? base + where : 1 == mode ? dev + where : where;
    rma.key = key;
    if (EFA_BTL_MSG_PUT == type && rma.len > payload.size()) {
        std::free(block);
        return 0;
    }
    if (EFA_BTL_MSG_GET == type && rma.len > 4096) {
        std::free(block); // the receiver's efa_btl_wire_request_len_ok bounds a get
        return 0;
    }

    efa_emul_table_t *t = efa_emul_table_create();
    efa_rma_handle_t ro{}, rw{};
    ro.base = base;
    ro.len = kReadOnly;
    ro.key = 1;
    ro.access = EFA_BTL_WIRE_ACCESS_REMOTE_READ;
    rw.base = base + kReadOnly;
    rw.len = kBlock - kReadOnly;
    rw.key = 2;
    rw.access = EFA_BTL_WIRE_ACCESS_REMOTE_READ | EFA_BTL_WIRE_ACCESS_REMOTE_WRITE |
                EFA_BTL_WIRE_ACCESS_REMOTE_ATOMIC;
    efa_rma_handle_t dh = rw;
    dh.base = dev;
    dh.len = kDevice;
    dh.key = 3;
    dh.flags = EFA_RMA_HANDLE_DEVICE;
    efa_emul_table_add(t, &ro, nullptr);
    efa_emul_table_add(t, &rw, nullptr);
    efa_emul_table_add(t, &dh, nullptr);

    const std::vector<uint8_t> before(block, block + kBlock);
    const std::vector<uint8_t> dev_before = device_bytes(dev_block);
    std::vector<uint8_t> out(EFA_BTL_MSG_GET == type ? rma.len : 0);
    uint64_t result = 0;
    const efa_emul_verdict_t v =
        efa_emul_execute(t, type, &rma, payload.data(), out.data(), &result);

    uint64_t len = rma.len;
    if (EFA_BTL_MSG_ATOMIC == type) {
        len = (rma.flags & EFA_BTL_WIRE_ATOMIC_32BIT) ? 4 : 8;
    }
    // executed only inside what was granted; refused: nothing changed
    if (EFA_EMUL_DONE == v) {
        const bool on_device = in_device(dev, rma.addr, len);
        FUZZ_CHECK(granted(base, rma.addr, len, EFA_BTL_MSG_GET != type) || on_device);
        FUZZ_CHECK(!on_device || EFA_BTL_MSG_ATOMIC != type);
        // and nothing written on the other side (a get writes neither)
        if (on_device || EFA_BTL_MSG_GET == type) {
            FUZZ_CHECK(std::memcmp(before.data(), block, kBlock) == 0);
        }
        if (!on_device || EFA_BTL_MSG_GET == type) {
            FUZZ_CHECK(device_bytes(dev_block) == dev_before);
        }
    } else {
        FUZZ_CHECK(std::memcmp(before.data(), block, kBlock) == 0);
        FUZZ_CHECK(device_bytes(dev_block) == dev_before);
    }
    efa_emul_table_destroy(t, nullptr, nullptr);
    std::free(block);
    return 0;
}
