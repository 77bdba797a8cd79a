// Emulated one-sided requests as the target executes them (common/include/
// efa_emul_target.h): type, address, length, key, operation and flags all
// come from another process.  The target's memory is two registrations
// inside one heap block of exactly the registered size (ASan sees a byte
// too far), one read-only.  Whatever the request, a request the target
// executes must lie inside a registration that grants its access, and a
// refused one must leave every byte as it was.
//
// Input: 1 byte type (PUT, GET or ATOMIC, by the low 2 bits), 1 byte
// address mode (0: an offset into the block, else a raw 64-bit address),
// 8 bytes address/offset, 8 bytes length, 1 byte key (1, 2 or other),
// 4 bytes op, 4 bytes flags, 8 + 8 bytes operands; the rest is a put's
// payload (a put whose payload is shorter is not sent: the receiver
// checks that a put carries what it names before the target sees it).
#include <cstdlib>
#include <cstring>
#include <vector>

#include "efa_emul_target.h"
#include "fuzz_input.hpp"

namespace {

constexpr size_t kBlock = 96;
constexpr size_t kReadOnly = 32; // [0, 32): read-only, key 1; [32, 96): everything, key 2

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
    const bool raw = in.take<uint8_t>() != 0;
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
    rma.addr = raw ? where : base + where;
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
    efa_emul_table_add(t, &ro, nullptr);
    efa_emul_table_add(t, &rw, nullptr);

    const std::vector<uint8_t> before(block, block + kBlock);
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
        FUZZ_CHECK(granted(base, rma.addr, len, EFA_BTL_MSG_GET != type));
    } else {
        FUZZ_CHECK(std::memcmp(before.data(), block, kBlock) == 0);
    }
    efa_emul_table_destroy(t, nullptr, nullptr);
    std::free(block);
    return 0;
}
