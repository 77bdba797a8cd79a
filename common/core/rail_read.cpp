// One read of a peer's registered buffer into a local one, striped over
// the rails that reach the peer (efa_core_rail_read).
//
// From stripe_min the bytes are cut into one part per rail (equal shares,
// efa_rma_stripe_part), each rail reading its part with the key the
// owner's NIC on that rail gave; each part in pieces of at most the
// provider's largest transfer; below stripe_min the whole read goes over
// one rail, the owner's choice (efa_rail_read_req_t.home: own matching
// reads over the NIC of the peer's messages).  A piece whose rail fails
// (the core then takes that rail out for the peer) is read again, once,
// over the first rail: only its failure fails the read.
// The owner hears once, when every piece has completed, and, where it
// asks (landed), of each piece as its bytes are in: a device receive
// copies them on while the other pieces are still read.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "efa_mr.h"
#include "efa_rma.h"

struct efa_rail_read {
    struct Piece {
        efa_op_t op; // first: the core hands it back
        efa_rail_read *read;
        int rail;
        size_t off, n;
    };
    efa_core *core;
    efa_mr_t *mr;    // the local buffer's registration, or nullptr
    efa_ctx_t *ctx0; // the first rail: where a failed piece goes again
    fi_addr_t addr0;
    void *desc0;
    uint64_t key0;
    uint8_t *buf;
    uint64_t raddr;
    bool failover;
    std::atomic<uint32_t> left{0};
    std::atomic<int> err{0};
    std::atomic<bool> orphaned{false}; // the owner went: no call, no failover
    std::atomic<bool> refused{false};  // a piece's device memory refused: said once
    void (*done)(void *arg, int err);
    void (*landed)(void *arg, size_t off, size_t n);
    void *arg;
    uint32_t pieces = 0;
    Piece *piece = nullptr;
};

namespace {

constexpr const char *kReadFromBacklog =
    "common:efa fi_read (a read into a device buffer, from the backlog)";

struct Rail {
    int rail;
    efa_ctx_t *ctx;
    fi_addr_t addr;
    void *desc;
    uint64_t key;
};

void note_err(efa_rail_read *rd, int err) {
    int none = 0;
    rd->err.compare_exchange_strong(none, err);
}

void finish(efa_rail_read *rd) {
    if (!rd->orphaned.load()) {
        rd->done(rd->arg, rd->err.load());
    }
    delete[] rd->piece;
    delete rd;
}

void piece_done(efa_op_t *op, const efa_cqe_t *cqe) {
    auto *pc = reinterpret_cast<efa_rail_read::Piece *>(op);
    efa_rail_read *rd = pc->read;
    // A post refused from the backlog names the memory as one refused at
    // the call does (a read the provider took and failed may be the
    // peer's key's doing): a device registration's kind stops going to
    // the provider, said once for the read however many of its pieces
    // were refused, and the owner reads such memory another way.  Such a
    // piece is not read again over the first rail: the same memory would
    // be refused there.
    const bool refused = cqe->err && cqe->unposted && efa::device_registration(rd->mr) &&
                         efa::refuses_memory(cqe->err);
    if (refused) {
        if (!rd->refused.exchange(true)) {
            (void)efa_core_mr_device_post_refused(rd->core, rd->mr, kReadFromBacklog, cqe->err);
        }
        efa_core_device_refusal_taken();
    }
    if (cqe->err && !refused && pc->rail && -FI_ECANCELED != cqe->err && rd->failover &&
        !rd->orphaned.load()) {
        pc->rail = 0;
        if (0 == efa_ctx_read(rd->ctx0, rd->buf + pc->off, pc->n, rd->desc0, rd->addr0,
                              rd->raddr + pc->off, rd->key0, &pc->op)) {
            efa_core_count_stripe(0, true);
            return; // that piece is out again
        }
    }
    if (cqe->err) {
        note_err(rd, cqe->err);
    } else if (rd->landed && !rd->orphaned.load()) {
        rd->landed(rd->arg, pc->off, pc->n); // (before done: the owner is still there)
    }
    if (1 == rd->left.fetch_sub(1)) {
        finish(rd);
    }
}

} // namespace

extern "C" int efa_core_rail_read(efa_core_t *core, const efa_rail_read_req_t *r,
                                  efa_rail_read_t **out) {
    const efa_core_info_t *info = &core->info;
    const int nctx = core->nic->num_contexts();
    if (r->len == 0 || r->ctx_index < 0 || r->ctx_index >= nctx || r->rkeys < 1 || !r->ctx) {
        return -FI_EINVAL;
    }
    Rail rails[EFA_MAX_RAILS] = {
        {0, r->ctx, r->addr, r->mr ? efa_mr_desc(r->mr) : nullptr, r->rkey[0]}};
    int nrails = 1;
    const int nics = r->peer ? 1 + static_cast<int>(core->rails.size()) : 1;
    // Can rail k carry a part (it reaches the peer, the owner gave its key
    // there, and the local buffer is registered on it)?
    const auto usable = [&](int k, Rail *out) {
        const fi_addr_t a = efa_peer_rail_addr(r->peer, k, r->ctx_index, nctx);
        const int nic = r->peer->rail_nic[k]; // the owner's NIC there: its key
        if (FI_ADDR_NOTAVAIL == a || nic >= r->rkeys || (r->mr && k >= efa_mr_rails(r->mr))) {
            return false;
        }
        *out = {k, core->rails[static_cast<size_t>(k) - 1]->ctx(r->ctx_index), a,
                r->mr ? efa_mr_rail_desc(r->mr, k) : nullptr, r->rkey[nic]};
        return true;
    };
    // The first rail out for the peer (core_rail0.cpp): the lowest rail
    // left stands in for it, as the one a failed piece goes again by.
    int stand_in = 0;
    if (r->peer && FI_ADDR_NOTAVAIL == efa_peer_rail_addr(r->peer, 0, r->ctx_index, nctx)) {
        for (int k = 1; k < nics && !stand_in; ++k) {
            stand_in = usable(k, &rails[0]) ? k : 0;
        }
        if (!stand_in) {
            return -FI_EHOSTUNREACH;
        }
        rails[0].rail = 0; // (pieces on it are the first's: failed, they fail the read)
    }
    for (int k = 1; info->stripe_min && r->len >= info->stripe_min && k < nics; ++k) {
        if (k != stand_in && usable(k, &rails[nrails])) {
            ++nrails;
        }
    }
    // Not striped: the one part goes over the home rail where it reaches
    // the peer (own matching's peer's rail), the first rail staying where
    // a failed piece goes again.
    int first = 0;
    if (1 == nrails && r->home > 0 && r->home < nics && r->home != stand_in &&
        usable(r->home, &rails[1])) {
        first = 1;
    }
    const size_t piece_max = r->piece_max         ? r->piece_max
                             : info->max_rma_size ? info->max_rma_size
                                                  : SIZE_MAX;
    uint32_t pieces = 0;
    for (int k = 0; k < nrails; ++k) {
        size_t off, n;
        efa_rma_stripe_part(r->len, nrails, k, &off, &n);
        pieces += static_cast<uint32_t>(n ? efa_rma_num_pieces(n, piece_max) : 0);
    }
    auto *rd = new (std::nothrow) efa_rail_read;
    auto *piece = new (std::nothrow) efa_rail_read::Piece[pieces];
    if (!rd || !piece) {
        delete rd;
        delete[] piece;
        return -FI_ENOMEM;
    }
    rd->core = core;
    rd->mr = r->mr;
    rd->ctx0 = rails[0].ctx;
    rd->addr0 = rails[0].addr;
    rd->desc0 = rails[0].desc;
    rd->key0 = rails[0].key;
    rd->buf = static_cast<uint8_t *>(r->buf);
    rd->raddr = r->raddr;
    rd->failover = info->rail_failover;
    rd->done = r->done;
    rd->landed = r->landed;
    rd->arg = r->arg;
    rd->pieces = pieces;
    rd->piece = piece;
    // One share held while posting, so that the read cannot finish before
    // every piece has been tried (another thread's progress may complete
    // the pieces already out).
    rd->left.store(1);
    int rc = 0;
    uint32_t i = 0, posted = 0;
    for (int k = 0; k < nrails && 0 == rc; ++k) {
        size_t part_off, part_len;
        efa_rma_stripe_part(r->len, nrails, k, &part_off, &part_len);
        const Rail &on = rails[first + k];
        for (size_t off = 0; off < part_len && 0 == rc; off += piece_max, ++i) {
            efa_rail_read::Piece &pc = piece[i];
            pc.op = {};
            pc.op.complete = piece_done;
            pc.read = rd;
            pc.rail = on.rail;
            pc.off = part_off + off;
            pc.n = std::min(piece_max, part_len - off);
            rd->left.fetch_add(1);
            rc = efa_ctx_read(on.ctx, rd->buf + pc.off, pc.n, on.desc, on.addr, r->raddr + pc.off,
                              on.key, &pc.op);
            if (rc && pc.rail && rd->failover) { // that rail refused: the first takes it
                pc.rail = 0;
                rc = efa_ctx_read(rd->ctx0, rd->buf + pc.off, pc.n, rd->desc0, rd->addr0,
                                  r->raddr + pc.off, rd->key0, &pc.op);
                if (0 == rc) {
                    efa_core_count_stripe(0, true);
                }
            }
            if (rc) {
                rd->left.fetch_sub(1);
            } else {
                ++posted;
            }
        }
    }
    if (0 == posted) { // nothing went out: no call will come
        delete[] piece;
        delete rd;
        return rc;
    }
    if (rc) {
        note_err(rd, rc); // the pieces out complete, then the read fails
    } else if (nrails > 1) {
        efa_core_count_stripe(r->len, false);
    }
    if (out) {
        *out = rd;
    }
    if (1 == rd->left.fetch_sub(1)) {
        finish(rd); // every piece completed while posting
    }
    return 0;
}

extern "C" void efa_rail_read_orphan(efa_rail_read_t *rd) {
    rd->orphaned.store(true);
}
