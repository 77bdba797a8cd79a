/*
 * Pure logic of the native one-sided path: the registration handle that
 * travels to peers, the address a provider expects, how a transfer larger
 * than the provider's limit is cut, and the per-job decision whether every
 * atomic the BTL advertises can be native.
 *
 * Plain C with static inline functions and no libfabric calls (only its
 * types), so btl_efa includes it and the unit tests exercise it without a
 * provider or Open MPI.
 */
#ifndef EFA_RMA_H
#define EFA_RMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <rdma/fi_domain.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What one process hands its peers for a registered range.  osc/rdma
 * copies handles byte for byte into shared state and to other processes,
 * so it holds no pointers and its size is fixed.  Both one-sided paths use
 * it: the emulated path names the registration by 'key' and the target
 * checks base/len/access against its own table; the native path gives the
 * provider 'fi_key' and an address derived from 'mr_base'. */
typedef struct efa_rma_handle {
    uint64_t base; /* the range as registered by the caller */
    uint64_t len;
    uint64_t key;     /* the owner's table key (emulated path) */
    uint64_t fi_key;  /* libfabric key of the MR that covers the range */
    uint64_t mr_base; /* where that MR starts: offset-addressed providers count from here */
    uint32_t access;  /* MCA_BTL_REG_FLAG_* as registered */
    uint32_t flags;   /* EFA_RMA_HANDLE_* */
} efa_rma_handle_t;

enum {
    /* fi_key and mr_base are valid: the range has a libfabric MR */
    EFA_RMA_HANDLE_HAS_MR = 1u << 0,
};

/* Is [addr, addr+len) inside the handle's range?  Written so that no sum
 * can wrap: an address near 2^64 must not pass by overflowing. */
static inline bool efa_rma_in_range(const efa_rma_handle_t *h, uint64_t addr, uint64_t len) {
    return addr >= h->base && len <= h->len && addr - h->base <= h->len - len;
}

/* The remote address a provider expects for 'addr' inside the handle's
 * range: the virtual address itself with FI_MR_VIRT_ADDR, otherwise the
 * offset from the start of the MR (which the cache may have grown beyond
 * the caller's range, hence mr_base rather than base).  Returns false when
 * the handle has no MR or the range lies outside it; nothing is posted then. */
static inline bool efa_rma_remote_addr(const efa_rma_handle_t *h, bool virt_addr, uint64_t addr,
                                       uint64_t len, uint64_t *out) {
    if (!(h->flags & EFA_RMA_HANDLE_HAS_MR) || !efa_rma_in_range(h, addr, len) ||
        addr < h->mr_base) {
        return false;
    }
    *out = virt_addr ? addr : addr - h->mr_base;
    return true;
}

/* A transfer of 'len' bytes travels in pieces of at most 'limit' bytes
 * (the provider's largest message); a zero-length transfer is one empty
 * piece, so it still completes through the provider like any other. */
static inline size_t efa_rma_num_pieces(size_t len, size_t limit) {
    if (0 == limit || 0 == len) {
        return 1;
    }
    return len / limit + (len % limit != 0);
}

/* Offset and length of piece i of efa_rma_num_pieces(len, limit). */
static inline void efa_rma_piece(size_t len, size_t limit, size_t i, size_t *off, size_t *n) {
    if (0 == limit) {
        *off = 0;
        *n = len;
        return;
    }
    *off = i * limit;
    *n = len - *off < limit ? len - *off : limit;
}

/* Kinds of atomics, as fi_query_atomic distinguishes them. */
enum { EFA_RMA_ATOMIC_PLAIN = 0, EFA_RMA_ATOMIC_FETCH = 1, EFA_RMA_ATOMIC_COMPARE = 2 };

/* The provider's answer for one (type, op, kind): 0 when supported. */
typedef int (*efa_rma_atomic_query_fn)(void *arg, enum fi_datatype dt, enum fi_op op, int kind);

/* Every libfabric operation the BTL's advertised atomics map to, with the
 * kinds it is used in.  Swap is FI_ATOMIC_WRITE (plain) and its fetching
 * form; compare-and-swap is FI_CSWAP. */
static const struct {
    enum fi_op op;
    int kinds; /* bit (1 << kind) */
} efa_rma_needed_atomics[] = {
    {FI_SUM, 3},  {FI_BAND, 3}, {FI_BOR, 3}, {FI_BXOR, 3},         {FI_LAND, 3},  {FI_LOR, 3},
    {FI_LXOR, 3}, {FI_MIN, 3},  {FI_MAX, 3}, {FI_ATOMIC_WRITE, 3}, {FI_CSWAP, 4},
};

/* Native atomics are all or nothing for a job: mixing provider-executed
 * and CPU-executed atomics on one location is only safe where the provider
 * happens to use CPU atomics, which the BTL cannot know.  So native is
 * chosen only when the provider supports every advertised op on 32- and
 * 64-bit integers; *missing (optional) names the first gap. */
static inline bool efa_rma_atomics_all_supported(efa_rma_atomic_query_fn query, void *arg,
                                                 enum fi_op *missing_op,
                                                 enum fi_datatype *missing_dt) {
    static const enum fi_datatype types[] = {FI_INT32, FI_INT64};
    const size_t nops = sizeof(efa_rma_needed_atomics) / sizeof(efa_rma_needed_atomics[0]);
    for (size_t t = 0; t < 2; ++t) {
        for (size_t i = 0; i < nops; ++i) {
            for (int kind = 0; kind < 3; ++kind) {
                if (!(efa_rma_needed_atomics[i].kinds & (1 << kind))) {
                    continue;
                }
                if (0 != query(arg, types[t], efa_rma_needed_atomics[i].op, kind)) {
                    if (missing_op) {
                        *missing_op = efa_rma_needed_atomics[i].op;
                    }
                    if (missing_dt) {
                        *missing_dt = types[t];
                    }
                    return false;
                }
            }
        }
    }
    return true;
}

/* Known provider defects that rule native atomics out for a job (all or
 * nothing, as above), by provider name; NULL when there is none.  Each
 * has a reproducer in tests/provider-defects, which tests/run-all.sh runs
 * so the list can be revisited when libfabric changes. */
static inline const char *efa_rma_atomics_defect(const char *provider) {
    if (provider && strstr(provider, "ofi_rxd")) {
        return "ofi_rxd crashes on fetching and compare-and-swap atomics to the process's "
               "own address (tests/provider-defects/rxd_loopback_fetch_atomic.c)";
    }
    return NULL;
}

/* One-sided modes (btl_efa_rma_mode, btl_efa_atomic_mode). */
typedef enum { EFA_RMA_MODE_AUTO, EFA_RMA_MODE_NATIVE, EFA_RMA_MODE_EMULATED } efa_rma_mode_t;

/* Parses "auto", "native" or "emulated" (case-sensitive, as MCA values
 * are); NULL or "" means auto.  Returns false for anything else. */
static inline bool efa_rma_parse_mode(const char *s, efa_rma_mode_t *out) {
    if (NULL == s || '\0' == s[0] || 0 == strcmp(s, "auto")) {
        *out = EFA_RMA_MODE_AUTO;
    } else if (0 == strcmp(s, "native")) {
        *out = EFA_RMA_MODE_NATIVE;
    } else if (0 == strcmp(s, "emulated")) {
        *out = EFA_RMA_MODE_EMULATED;
    } else {
        return false;
    }
    return true;
}

#ifdef __cplusplus
}
#endif
#endif /* EFA_RMA_H */
