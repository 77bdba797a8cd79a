/*
 * Which of a sender's numbered messages arrived: a window of
 * EFA_SEQ_WINDOW_BITS numbers from the lowest one not seen yet, so that a
 * copy of a message (sent again over another NIC after its first send
 * failed, though it had arrived) is told from the message itself.
 * btl_efa numbers the messages it sends over a NIC beside the first
 * (btl_efa_spread.c) from 1.
 *
 * No lock is taken here: the owner holds its own.
 */
#ifndef EFA_SEQ_WINDOW_H
#define EFA_SEQ_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EFA_SEQ_WINDOW_BITS 4096

typedef struct efa_seq_window {
    uint64_t base;    /* lowest number not seen yet (starts at 1) */
    uint64_t skipped; /* numbers below base given up as not arrived (the window moved on) */
    uint64_t bits[EFA_SEQ_WINDOW_BITS / 64]; /* bit n % BITS: n arrived (n >= base) */
} efa_seq_window_t;

static inline void efa_seq_window_init(efa_seq_window_t *w) {
    for (unsigned i = 0; i < EFA_SEQ_WINDOW_BITS / 64; ++i) {
        w->bits[i] = 0;
    }
    w->base = 1;
    w->skipped = 0;
}

static inline bool efa_seq_window_bit_(const efa_seq_window_t *w, uint64_t n) {
    return (w->bits[(n % EFA_SEQ_WINDOW_BITS) / 64] >> (n % 64)) & 1;
}

static inline void efa_seq_window_put_(efa_seq_window_t *w, uint64_t n, bool on) {
    const uint64_t mask = UINT64_C(1) << (n % 64);
    uint64_t *word = &w->bits[(n % EFA_SEQ_WINDOW_BITS) / 64];
    *word = on ? (*word | mask) : (*word & ~mask);
}

/* Message n arrived: true when it had before (a copy, to drop), false
 * when it is new (now recorded).  A number a whole window past the lowest
 * one not seen moves the window on: the numbers it leaves behind count as
 * seen (w->skipped counts those that had not come), so a late copy of one
 * of them would be taken for a copy.  0 is no number: a copy. */
static inline bool efa_seq_window_seen(efa_seq_window_t *w, uint64_t n) {
    if (n < w->base) {
        return true;
    }
    if (n - w->base >= EFA_SEQ_WINDOW_BITS) {
        const uint64_t base = n - EFA_SEQ_WINDOW_BITS + 1;
        const uint64_t gone = base - w->base; /* numbers the window leaves behind */
        const uint64_t look = gone < EFA_SEQ_WINDOW_BITS ? gone : EFA_SEQ_WINDOW_BITS;
        uint64_t arrived = 0;
        for (uint64_t q = w->base; q < w->base + look; ++q) {
            if (efa_seq_window_bit_(w, q)) {
                efa_seq_window_put_(w, q, false);
                ++arrived;
            }
        }
        w->skipped += gone - arrived;
        w->base = base;
    }
    if (efa_seq_window_bit_(w, n)) {
        return true;
    }
    efa_seq_window_put_(w, n, true);
    while (efa_seq_window_bit_(w, w->base)) {
        efa_seq_window_put_(w, w->base, false);
        ++w->base;
    }
    return false;
}

/* Has a number above the lowest one not seen arrived (a gap: a message
 * that may never come)? */
static inline bool efa_seq_window_gap(const efa_seq_window_t *w) {
    for (unsigned i = 0; i < EFA_SEQ_WINDOW_BITS / 64; ++i) {
        if (w->bits[i]) {
            return true;
        }
    }
    return false;
}

#ifdef __cplusplus
}
#endif
#endif
