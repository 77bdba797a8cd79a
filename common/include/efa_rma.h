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

/* The most NICs (rails) a process opens: aws-ofi-nccl's limit too. */
#define EFA_MAX_RAILS 4

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
    /* The owner's process id (getpid()) for the single-copy path between
     * processes of one node, 0 when the owner offers none.  Only a hint:
     * the initiator uses it only when it equals the pid it verified for the
     * peer the operation goes to (efa_rma_cma_check). */
    uint32_t owner_pid;
    /* The registration on the owner's other NICs (rails 1..rails-1), for
     * transfers striped over them (btl_efa_native.c); rails is 1 where the
     * owner has one NIC or registered on one. */
    uint32_t rails;
    uint64_t rail_key[EFA_MAX_RAILS - 1];
    /* efa_rma_handle_seal's digest of every other field.  osc/rdma can
     * read a handle while its owner is still writing it (a dynamic
     * window's region table, read without its lock); such a mixture of
     * two handles fails efa_rma_handle_intact, and the paths that trust
     * the handle (native, single copy) are then not taken. */
    uint32_t seal;
    uint32_t spare; /* zero: no padding hole in a handle copied byte for byte */
} efa_rma_handle_t;

enum {
    /* fi_key and mr_base are valid: the range has a libfabric MR */
    EFA_RMA_HANDLE_HAS_MR = 1u << 0,
    /* the range is a device's (GPU) memory: no single copy; with an MR
     * (registered with its device where the provider granted FI_HMEM)
     * puts and gets reach it by the provider's RDMA, without one they go
     * to its owner, which copies with the device's copy (efa_device.h);
     * atomics on it are refused */
    EFA_RMA_HANDLE_DEVICE = 1u << 1,
};

/* The digest of a handle's fields (the bytes before 'seal', eight at a
 * time: FNV-1a's step on 64-bit words, each followed by a shift-xor so
 * that a difference in a word's high bits reaches the low ones, folded to
 * 32 bits): not a protection against a forger, only against a torn copy.
 * Every put and get to a process of the node checks it, so it is about 30
 * instructions, where a byte at a time took 300 (as much as the copy). */
static inline uint32_t efa_rma_handle_digest(const efa_rma_handle_t *h) {
    const unsigned char *p = (const unsigned char *)h;
    const size_t n = offsetof(efa_rma_handle_t, seal);
    uint64_t d = 14695981039346656037ull;
    size_t i = 0;
    for (; i + sizeof(uint64_t) <= n; i += sizeof(uint64_t)) {
        uint64_t w;
        memcpy(&w, p + i, sizeof(w));
        d = (d ^ w) * 1099511628211ull;
        d ^= d >> 29;
    }
    if (i + sizeof(uint32_t) <= n) {
        uint32_t w;
        memcpy(&w, p + i, sizeof(w));
        d = (d ^ w) * 1099511628211ull;
        i += sizeof(w);
    }
    for (; i < n; ++i) {
        d = (d ^ p[i]) * 1099511628211ull;
    }
    return (uint32_t)(d ^ (d >> 32));
}

/* The owner seals a handle once every other field is final. */
static inline void efa_rma_handle_seal(efa_rma_handle_t *h) {
    h->seal = efa_rma_handle_digest(h);
}

/* Is the handle as its owner sealed it (no mixture of two handles)? */
static inline bool efa_rma_handle_intact(const efa_rma_handle_t *h) {
    return h->seal == efa_rma_handle_digest(h);
}

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

/* A transfer of 'len' bytes striped over 'rails' rails: rail r's part
 * (offset and length).  Equal parts in whole cache lines, the last one
 * shorter; a part may be empty when len is small against the rails. */
static inline void efa_rma_stripe_part(size_t len, int rails, int r, size_t *off, size_t *n) {
    if (rails <= 1) {
        *off = 0;
        *n = len;
        return;
    }
    size_t part = (len + (size_t)rails - 1) / (size_t)rails;
    part = (part + 63) & ~(size_t)63;
    const size_t start = part * (size_t)r;
    *off = start < len ? start : len;
    *n = len - *off < part ? len - *off : part;
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

/* Single-copy path between processes of one node (btl_efa_single_copy):
 * auto (CMA where the kernel allows it, else the provider), cma (the same,
 * but a refusal is reported loudly), none (always the provider). */
typedef enum {
    EFA_SINGLE_COPY_AUTO,
    EFA_SINGLE_COPY_CMA,
    EFA_SINGLE_COPY_NONE
} efa_single_copy_mode_t;

/* Parses "auto", "cma" or "none"; NULL or "" means auto.  Returns false
 * for anything else. */
static inline bool efa_rma_parse_single_copy(const char *s, efa_single_copy_mode_t *out) {
    if (NULL == s || '\0' == s[0] || 0 == strcmp(s, "auto")) {
        *out = EFA_SINGLE_COPY_AUTO;
    } else if (0 == strcmp(s, "cma")) {
        *out = EFA_SINGLE_COPY_CMA;
    } else if (0 == strcmp(s, "none")) {
        *out = EFA_SINGLE_COPY_NONE;
    } else {
        return false;
    }
    return true;
}

/* What the single-copy path may do with an operation on [addr, addr+len)
 * of a peer's handle, the peer's verified pid being 'peer_pid' and the
 * operation needing the access bits 'need' (MCA_BTL_REG_FLAG_REMOTE_*). */
typedef enum {
    EFA_RMA_CMA_OK,        /* copy directly */
    EFA_RMA_CMA_OUTSIDE,   /* outside the handle's range: refuse, copy nothing */
    EFA_RMA_CMA_NOT_OWNER, /* the handle is not the peer's (or offers no pid): provider path */
    EFA_RMA_CMA_NO_ACCESS, /* registered without the right: the provider decides */
} efa_rma_cma_verdict_t;

/* The range is checked first, byte for byte as the emulated target does,
 * so an address outside the registration is refused whichever path would
 * otherwise have carried it. */
static inline efa_rma_cma_verdict_t efa_rma_cma_check(const efa_rma_handle_t *h, uint32_t peer_pid,
                                                      uint64_t addr, uint64_t len, uint32_t need) {
    if (!efa_rma_in_range(h, addr, len)) {
        return EFA_RMA_CMA_OUTSIDE;
    }
    if (0 == peer_pid || h->owner_pid != peer_pid) {
        return EFA_RMA_CMA_NOT_OWNER;
    }
    if ((h->access & need) != need) {
        return EFA_RMA_CMA_NO_ACCESS;
    }
    return EFA_RMA_CMA_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* EFA_RMA_H */
