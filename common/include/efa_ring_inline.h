/*
 * The hot paths of the on-node rings (common/node/shm_ring.hpp has the
 * design), in C and inline: the owner's poll of its inbox, a sender's
 * reserve and commit of a frame, and copies of a few bytes into and out of
 * one.  The inbox and each outbox keep this
 * state; a component takes a pointer to it once (efa_node_consumer,
 * efa_shm_outbox_producer) and runs these functions on it, so that its
 * progress hands each frame to its own handler (inlined into the loop)
 * and its send writes the slot, without a call into the core and an
 * indirect call back: on btl_efa's 1 B on-node message those layers cost
 * about 90 instructions of about 1640.  The C++ classes (shm::Inbox,
 * shm::Outbox) run the same functions: one implementation.
 *
 * Who may poll: one caller at a time (the guard below); the consumer's
 * state changes only inside a poll (a rescan) or at the inbox's creation.
 * Who may send: one caller at a time per outbox (the caller serialises).
 */
#ifndef EFA_RING_INLINE_H
#define EFA_RING_INLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A ring's layout (shm_ring.hpp checks its own against these): a control
 * block of 4 cache lines (head, tail, attached, spare), then the slots,
 * each a uint32 length and a uint32 stamp before the frame. */
#define EFA_RING_CONTROL_BYTES 256
#define EFA_RING_HEAD_OFFSET 0
#define EFA_RING_TAIL_OFFSET 64
#define EFA_RING_ATTACHED_OFFSET 128
#define EFA_RING_SLOT_HEADER 8
#define EFA_RING_LINE 64

/* n bytes from s to d (n at most EFA_RING_LINE; the two do not overlap)
 * without a call into libc: at most two loads and two stores of a width
 * the length picks, which may overlap each other within [d, d + n) but
 * never reach outside it or [s, s + n).  mtl_efa's engine copies a
 * message of a few bytes into its frame and out of it: with memcpy's call
 * and its dispatch on the length, its 1 B send + receive took 16
 * instructions more. */
static inline __attribute__((always_inline)) void efa_ring_copy_short(void *d, const void *s,
                                                                      size_t n) {
    uint8_t *to = (uint8_t *)d;
    const uint8_t *from = (const uint8_t *)s;
    if (n >= 16) {
        if (n > 32) {
            __builtin_memcpy(to, from, 32);
            __builtin_memcpy(to + n - 32, from + n - 32, 32);
        } else {
            __builtin_memcpy(to, from, 16);
            __builtin_memcpy(to + n - 16, from + n - 16, 16);
        }
    } else if (n >= 8) {
        __builtin_memcpy(to, from, 8);
        __builtin_memcpy(to + n - 8, from + n - 8, 8);
    } else if (n >= 4) {
        __builtin_memcpy(to, from, 4);
        __builtin_memcpy(to + n - 4, from + n - 4, 4);
    } else if (n > 0) {
        to[0] = from[0];
        if (n > 1) {
            __builtin_memcpy(to + n - 2, from + n - 2, 2);
        }
    }
}

/* n bytes, any length (no overlap): up to a line inline, the rest by
 * memcpy. */
static inline __attribute__((always_inline)) void efa_ring_copy(void *d, const void *s, size_t n) {
    if (n <= EFA_RING_LINE) {
        efa_ring_copy_short(d, s, n);
    } else {
        __builtin_memcpy(d, s, n);
    }
}

/* ---- the owner's poll ---------------------------------------------------- */

/* The lines of a frame after its first (the one its stamp is in), asked
 * for together as soon as the stamp is seen, up to EFA_RING_PREFETCH_LINES
 * lines in all (longer frames' copies stream by themselves).  Without it
 * the handler reads them as it comes to them (the header, the match, then
 * the payload's copy), and each read waits for the sender's core to hand
 * its line over, one after another.  On the AMD EPYC VM of 2026-12-02 (no
 * cldemote), ranks on different cores: a 128 B round trip 0.59-0.66 us
 * without, 0.52-0.60 with; 256 B 0.59-0.70 without, 0.53-0.63 with (vader
 * 0.51-0.55); 1 B within the runs' spread (3 instructions more;
 * PERFORMANCE.md, "The on-node paths").  Inlined: out of line, the call
 * loses most of the gain. */
#define EFA_RING_PREFETCH_LINES 8
static inline __attribute__((always_inline)) void efa_ring_prefetch_frame(const uint8_t *s,
                                                                          uint64_t end) {
    for (uint64_t o = EFA_RING_LINE; o < end && o < EFA_RING_PREFETCH_LINES * EFA_RING_LINE;
         o += EFA_RING_LINE) {
        __builtin_prefetch(s + o, 0, 3);
    }
}

typedef struct efa_ring_consumer {
    uint8_t *rings;  /* ring 0's control block; ring r's at rings + r * ring_bytes */
    uint32_t nrings; /* rings in the segment (one per local rank and channel) */
    uint64_t ring_bytes;
    uint64_t mask;              /* slots per ring - 1 (a power of two) */
    uint64_t slot_size;         /* bytes per slot, header included */
    uint64_t max_frame;         /* slot_size - EFA_RING_SLOT_HEADER */
    const uint32_t *attach_seq; /* in the shared header: bumped by each attaching sender */
    uint32_t *active;           /* rings with a sender attached, ascending: nactive of them */
    uint64_t *tails;            /* the owner's own copy of each ring's tail */
    /* Per window of rings, at its first ring: where its next poll starts
     * (from the window's first), the ring after the one whose frames spent
     * the last poll's budget (a sender that keeps its ring full would
     * otherwise keep the poll from the rings after it).  nrings + 1. */
    uint32_t *resume;
    uint32_t nactive;   /* read before the guard: __atomic */
    uint32_t seen_seq;  /* attach_seq when active was built: __atomic */
    uint8_t polling;    /* the guard: __atomic */
    uint8_t one_thread; /* only one thread ever polls (below MPI_THREAD_MULTIPLE) */
    uint64_t dropped;   /* frames longer than a slot (a corrupted sender): __atomic */
} efa_ring_consumer_t;

/* Rebuild active from the rings' attached flags (shm_ring.cpp; inside a
 * poll, when attach_seq moved). */
void efa_ring_consumer_rescan(efa_ring_consumer_t *c);

/* A frame, valid until the call returns: false stops the poll after it. */
typedef bool (*efa_ring_frame_fn)(void *arg, uint32_t ring, void *frame, size_t len);

/* Hand up to budget waiting frames of rings [first, first + count) to
 * fn(arg, ring - first, frame, len), in ring order from where the last
 * poll that spent its budget stopped (resume); returns how many slots
 * it consumed (a corrupted frame, skipped, counts: a sender writing only
 * those must not keep one poll going for ever).  A
 * poll while another runs (another thread, or fn polling again) returns 0
 * at once.  Always inlined: fn, a constant at the call site, is then
 * inlined into the loop. */
static inline __attribute__((always_inline)) int efa_ring_consume(efa_ring_consumer_t *c,
                                                                  uint32_t first, uint32_t count,
                                                                  efa_ring_frame_fn fn, void *arg,
                                                                  int budget) {
    if (0 == __atomic_load_n(&c->nactive, __ATOMIC_RELAXED) &&
        __atomic_load_n(c->attach_seq, __ATOMIC_RELAXED) ==
            __atomic_load_n(&c->seen_seq, __ATOMIC_RELAXED)) {
        return 0; /* nobody attached: the idle poll of a process without local peers */
    }
    /* With one thread only re-entry can happen, which a plain load and
     * store see: the locked exchange costs about 20 cycles of every
     * on-node message's critical path. */
    if (c->one_thread) {
        if (__atomic_load_n(&c->polling, __ATOMIC_RELAXED)) {
            return 0;
        }
        __atomic_store_n(&c->polling, 1, __ATOMIC_RELAXED);
    } else if (__atomic_exchange_n(&c->polling, 1, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    if (__atomic_load_n(c->attach_seq, __ATOMIC_ACQUIRE) !=
        __atomic_load_n(&c->seen_seq, __ATOMIC_RELAXED)) {
        efa_ring_consumer_rescan(c);
    }
    /* The geometry in locals: fn may be an opaque call, after which the
     * fields would be loaded again for every slot. */
    const uint32_t end = first + count;
    const uint64_t mask = c->mask;
    const uint64_t slot_size = c->slot_size;
    const uint64_t max_frame = c->max_frame;
    const uint32_t *const active = c->active;
    const uint32_t nactive = c->nactive;
    /* (an offset in the window, below count, kept by the writer below;
     * the array has a spare entry for an empty window at the end) */
    const uint32_t from = first + c->resume[first];
    int n = 0;
    /* From 'from' to the window's end, then from its start to 'from'. */
    for (uint32_t lo = from, hi = end;; lo = first, hi = from) {
        for (uint32_t i = 0; i < nactive; ++i) {
            const uint32_t r = active[i];
            if (r < lo) {
                continue;
            }
            if (r >= hi) {
                break;
            }
            uint8_t *const ctl = c->rings + r * c->ring_bytes;
            uint8_t *const slots = ctl + EFA_RING_CONTROL_BYTES;
            uint64_t t = c->tails[r];
            while (n < budget) {
                uint8_t *s = slots + (t & mask) * slot_size;
                /* The stamp, published last by the sender (release): the low
                 * 32 bits of the slot's counter + 1. */
                if (__atomic_load_n((const uint32_t *)(s + 4), __ATOMIC_ACQUIRE) !=
                    (uint32_t)(t + 1)) {
                    break; /* not written yet */
                }
                uint32_t len;
                __builtin_memcpy(&len, s, sizeof(len)); /* read once: checked, then used */
                ++t;
                bool more = true;
                if (len <= max_frame) {
                    const uint64_t frame_end = EFA_RING_SLOT_HEADER + (uint64_t)len;
                    if (__builtin_expect(frame_end > EFA_RING_LINE, 0)) {
                        efa_ring_prefetch_frame(s, frame_end);
                    }
                    more = fn(arg, r - first, s + EFA_RING_SLOT_HEADER, (size_t)len);
                } else {
                    __atomic_fetch_add(&c->dropped, 1, __ATOMIC_RELAXED); /* skipped */
                }
                ++n;
                /* (efa_ring_waiting reads it) */
                __atomic_store_n(&c->tails[r], t, __ATOMIC_RELAXED);
                __atomic_store_n((uint64_t *)(ctl + EFA_RING_TAIL_OFFSET), t, __ATOMIC_RELEASE);
                if (!more) {
                    __atomic_store_n(&c->polling, 0, __ATOMIC_RELEASE);
                    return n;
                }
            }
            if (n >= budget) {
                c->resume[first] = r + 1 < end ? r + 1 - first : 0;
                __atomic_store_n(&c->polling, 0, __ATOMIC_RELEASE);
                return n;
            }
        }
        if (lo == first) {
            break;
        }
    }
    __atomic_store_n(&c->polling, 0, __ATOMIC_RELEASE);
    return n;
}

/* Is a frame waiting in ring r (its next slot stamped)?  For a look from
 * outside the poll (a sender's loss is judged only once its frames are
 * read): a poll under way meanwhile may make the answer stale, never
 * "none" while one waits. */
static inline bool efa_ring_waiting(const efa_ring_consumer_t *c, uint32_t r) {
    const uint64_t t = __atomic_load_n(&c->tails[r], __ATOMIC_RELAXED);
    const uint8_t *s =
        c->rings + r * c->ring_bytes + EFA_RING_CONTROL_BYTES + (t & c->mask) * c->slot_size;
    return __atomic_load_n((const uint32_t *)(s + 4), __ATOMIC_ACQUIRE) == (uint32_t)(t + 1);
}

/* ---- a sender's frame ----------------------------------------------------- */

typedef struct efa_ring_producer {
    uint8_t *ctl;         /* the ring's control block (head, tail) */
    uint8_t *slots;       /* ctl + EFA_RING_CONTROL_BYTES */
    uint64_t head;        /* the sender's own copy of head */
    uint64_t cached_tail; /* the last tail seen */
    uint64_t nslots;      /* a power of two */
    uint64_t slot_size;
    uint64_t max_frame;
    uint64_t *counts;             /* the process's path counts: frames, then their bytes */
    const uint8_t *counts_shared; /* several threads may count: add atomically */
    uint8_t demote;               /* the CPU has cldemote (efa_ring_cpu_demotes) */
    uint32_t *bell;               /* the owner's doorbell, in its segment's header */
} efa_ring_producer_t;

/* The owner's doorbell: something for it went by the network provider (a
 * frame larger than a slot, a one-sided operation), which its paced
 * provider poll would otherwise find only at its interval, up to a
 * millisecond later (efa_core_set_doorbell).  Rung only when not rung
 * already: a stream of such sends moves the line once, not every time. */
static inline void efa_ring_wake(efa_ring_producer_t *p) {
    if (0 == __atomic_load_n(p->bell, __ATOMIC_RELAXED)) {
        __atomic_store_n(p->bell, 1u, __ATOMIC_RELEASE);
    }
}

/* Does this CPU carry out cldemote?  On CPUs that do not enumerate it
 * (AMD's, Xeons before Sapphire Rapids) the instruction is a no-op, and
 * efa_ring_demote's loop would only cost: 41 instructions of a 256 B
 * frame on the AMD EPYC VM of 2026-12-02.  Asked of CPUID once
 * (shm_ring.cpp). */
bool efa_ring_cpu_demotes(void);

/* Room for a frame of len bytes in the next slot, or NULL (the ring is
 * full, or len exceeds max_frame).  efa_ring_commit publishes it; nothing
 * else may be reserved in between. */
static inline __attribute__((always_inline)) void *efa_ring_reserve(efa_ring_producer_t *p,
                                                                    size_t len) {
    if (len > p->max_frame) {
        return NULL;
    }
    if (p->head - p->cached_tail >= p->nslots) {
        /* Full by the last tail seen: only now is the owner's line read. */
        p->cached_tail =
            __atomic_load_n((const uint64_t *)(p->ctl + EFA_RING_TAIL_OFFSET), __ATOMIC_ACQUIRE);
        if (p->head - p->cached_tail >= p->nslots) {
            return NULL;
        }
    }
    return p->slots + (p->head & (p->nslots - 1)) * p->slot_size + EFA_RING_SLOT_HEADER;
}

/* Add n to a path count: a plain load and store unless several threads
 * count (path_counts.hpp has why). */
static inline __attribute__((always_inline)) void efa_ring_count(uint64_t *c, uint64_t n,
                                                                 bool shared) {
    if (__builtin_expect(shared, 0)) {
        __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
    } else {
        __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
    }
}

/* The lines of a frame the owner reads after its stamp (all but the
 * first, which it polls), pushed out of this core's caches towards the
 * shared cache (cldemote, a hint: a no-op where the CPU lacks it).  The
 * owner's read of such a line then does not wait for this core to hand
 * it over: on the VM of 2026-12-01 (Xeon with cldemote) that was about
 * 0.1 us per frame each way, a 64 B ob1 round trip over btl_efa 0.45-0.55
 * us without it, 0.28-0.40 with.  Up to EFA_RING_DEMOTE_LINES lines:
 * those of a longer frame are copied in turn, and its own size sets its
 * time. */
#define EFA_RING_DEMOTE_LINES 8
static __attribute__((noinline)) void efa_ring_demote(const efa_ring_producer_t *p, size_t len) {
#if defined(__x86_64__)
    /* (the slot just committed) */
    const uint8_t *s = p->slots + ((p->head - 1) & (p->nslots - 1)) * p->slot_size;
    const size_t n = EFA_RING_SLOT_HEADER + len;
    for (size_t o = EFA_RING_LINE; o < n && o < EFA_RING_DEMOTE_LINES * EFA_RING_LINE;
         o += EFA_RING_LINE) {
        __asm__ volatile("cldemote %0" ::"m"(*(const volatile uint8_t *)(s + o)));
    }
#else
    (void)p;
    (void)len;
#endif
}

/* Publish the reserved slot's len bytes: its length, then its stamp
 * (release), which the owner polls; then push the frame's further lines
 * towards the owner (efa_ring_demote, where the CPU has cldemote). */
static inline __attribute__((always_inline)) void efa_ring_commit(efa_ring_producer_t *p,
                                                                  size_t len) {
    const bool shared = __atomic_load_n(p->counts_shared, __ATOMIC_RELAXED);
    efa_ring_count(&p->counts[0], 1, shared);
    efa_ring_count(&p->counts[1], len, shared);
    const uint64_t mask = p->nslots - 1;
    uint8_t *s = p->slots + (p->head & mask) * p->slot_size;
    const uint32_t l = (uint32_t)len;
    __builtin_memcpy(s, &l, sizeof(l));
    ++p->head;
    __atomic_store_n((uint32_t *)(s + 4), (uint32_t)p->head, __ATOMIC_RELEASE);
    /* head itself only for tests (the owner polls stamps) */
    __atomic_store_n((uint64_t *)(p->ctl + EFA_RING_HEAD_OFFSET), p->head, __ATOMIC_RELAXED);
    /* Ask for the next slot's first lines in exclusive state now, while the
     * owner handles this frame: the next frame's stores then do not wait
     * for the owner's copy of those lines to be invalidated. */
    uint8_t *next = p->slots + (p->head & mask) * p->slot_size;
    __builtin_prefetch(next, 1, 3);
    __builtin_prefetch(next + EFA_RING_LINE, 1, 3);
    if (__builtin_expect(len > EFA_RING_LINE - EFA_RING_SLOT_HEADER, 0) && p->demote) {
        efa_ring_demote(p, len);
    }
}

#ifdef __cplusplus
}
#endif
#endif /* EFA_RING_INLINE_H */
