// One-sided requests as the target sees them (common/efa_rma.h): the
// handle, address and length of a request come from another process.  The
// range check the emulated target and the single-copy path apply must be
// exact (no wrap-around near 2^64 lets anything outside through, nothing
// inside is refused), the provider address must stay inside the MR, and
// the cutting of a transfer into pieces must cover it exactly.
#include "efa_rma.h"
#include "fuzz_input.hpp"

namespace {
using u128 = unsigned __int128;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    efa_rma_handle_t h;
    h.base = in.take<uint64_t>();
    h.len = in.take<uint64_t>();
    h.key = in.take<uint64_t>();
    h.fi_key = in.take<uint64_t>();
    h.mr_base = in.take<uint64_t>();
    h.access = in.take<uint32_t>();
    h.flags = in.take<uint32_t>();
    h.owner_pid = in.take<uint32_t>();
    h.seal = 0; // from the input's end (the layout of the seeds stays)
    const uint64_t addr = in.take<uint64_t>();
    const uint64_t len = in.take<uint64_t>();
    const uint32_t peer_pid = in.take<uint32_t>();
    const uint32_t need = in.take<uint32_t>();
    const bool virt = in.take<uint8_t>() & 1;

    const bool inside =
        addr >= h.base && static_cast<u128>(addr) + len <= static_cast<u128>(h.base) + h.len;
    FUZZ_CHECK(efa_rma_in_range(&h, addr, len) == inside);

    uint64_t remote = 0;
    if (efa_rma_remote_addr(&h, virt, addr, len, &remote)) {
        FUZZ_CHECK(inside && (h.flags & EFA_RMA_HANDLE_HAS_MR) && addr >= h.mr_base);
        FUZZ_CHECK(remote == (virt ? addr : addr - h.mr_base));
    } else {
        FUZZ_CHECK(!inside || !(h.flags & EFA_RMA_HANDLE_HAS_MR) || addr < h.mr_base);
    }

    const efa_rma_cma_verdict_t v = efa_rma_cma_check(&h, peer_pid, addr, len, need);
    FUZZ_CHECK((v == EFA_RMA_CMA_OUTSIDE) == !inside);
    if (v == EFA_RMA_CMA_OK) {
        FUZZ_CHECK(peer_pid != 0 && peer_pid == h.owner_pid && (h.access & need) == need);
    }

    // Pieces: bounded so that one input stays fast.
    const size_t tlen = in.take<uint32_t>();
    const size_t limit = in.take<uint16_t>();
    const size_t n = efa_rma_num_pieces(tlen, limit);
    FUZZ_CHECK(n >= 1);
    if (n <= 4096) {
        size_t covered = 0;
        for (size_t i = 0; i < n; ++i) {
            size_t off = 0, piece = 0;
            efa_rma_piece(tlen, limit, i, &off, &piece);
            FUZZ_CHECK(off == covered);
            FUZZ_CHECK(limit == 0 || piece <= limit);
            FUZZ_CHECK(piece > 0 || tlen == 0);
            covered += piece;
        }
        FUZZ_CHECK(covered == tlen);
    }

    // The seal: a handle passes as intact only with its own digest, and
    // sealing makes any handle intact (a torn copy is all the seal catches).
    h.seal = in.take<uint32_t>();
    FUZZ_CHECK(efa_rma_handle_intact(&h) == (h.seal == efa_rma_handle_digest(&h)));
    efa_rma_handle_seal(&h);
    FUZZ_CHECK(efa_rma_handle_intact(&h));
    return 0;
}
