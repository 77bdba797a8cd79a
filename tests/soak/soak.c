/*
 * soak: a long, seeded, random mix of point-to-point and one-sided traffic
 * with every byte checked, for runs over lossy networks (tests/soak.sh).
 *
 * Every rank draws the same plan for each round from the seed, so each
 * knows what it must receive and what its window must hold:
 *   - point-to-point: 4 messages per process and round between random
 *     pairs, 0 B to the largest size (default 4 MiB, most of them small),
 *     in standard, synchronous, buffered or ready mode, a quarter of them
 *     received with MPI_ANY_SOURCE.  In half the rounds every receive is
 *     posted before a barrier and the sends block (ready mode is valid
 *     only there); in the others the sends are nonblocking and go out
 *     before the receives are posted (the unexpected path).  A message of
 *     24 bytes or more starts with its sequence number on its (source,
 *     destination) pair, its round and index, and a checksum of the rest;
 *     the rest is a pattern of the round and index.
 *   - one-sided: every origin puts a random length into its own slot of
 *     every other rank's window, adds planned values to its counters
 *     (MPI_Accumulate), increments one (MPI_Fetch_and_op), races for one
 *     word (MPI_Compare_and_swap: exactly one origin may win per target),
 *     then reads its slot back (MPI_Get); targets check their windows.
 *     Even rounds synchronize with fences, odd ones with lock_all and
 *     flush_all (passive target).
 * Errors in data are counted (the first ones printed as "ERROR soak: ...")
 * and the run goes on; an MPI error aborts the job (test_util.h's handler).
 * Rank 0 prints the totals and "ok soak ..." when no error was seen; the
 * exit status is non-zero otherwise.
 *
 * usage: soak [-t SECONDS] [-r ROUNDS] [-s SEED] [-m MAXSIZE] [-P] [-R]
 *   -t  run this long (default 60; 0: until -r rounds)
 *   -r  stop after this many rounds (default 0: no limit)
 *   -s  seed of the plans (default 1)
 *   -m  largest point-to-point message (default 4M)
 *   -P  no point-to-point, -R no one-sided operations
 */
#include "test_util.h"

#include <stdbool.h>

#define SOAK_MSGS_PER_PROC 4
#define SOAK_MAX_MSGS 127 /* per round: tags are round * 128 + index */
#define SOAK_HDR 24       /* sequence number, round and index, checksum */
#define SOAK_SLOT (64 * 1024)
#define SOAK_NCTR 8
#define SOAK_BSEND_CAP (16u << 20)
#define SOAK_MAX_ERRORS_SHOWN 20

enum soak_mode { MODE_STD, MODE_SYNC, MODE_BUF, MODE_READY, MODE_COUNT };
static const char *const mode_name[MODE_COUNT] = {"standard", "synchronous", "buffered", "ready"};

struct soak_msg {
    int src, dst, tag;
    bool any_source;
    enum soak_mode mode;
    size_t len;
    uint64_t seq, seed;
};

struct soak_stats {
    long messages, bytes, rma_ops, rma_bytes, errors;
};

static struct soak_stats st;

static TU_PRINTF(1, 2) void soak_error(const char *fmt, ...) {
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (st.errors++ < SOAK_MAX_ERRORS_SHOWN)
        printf("ERROR soak: %s (rank %d)\n", msg, tu_rank);
}

/* The plan's random numbers: the same sequence on every rank. */
struct soak_rng {
    uint64_t s;
};
static uint64_t rng_next(struct soak_rng *r) {
    return tu_mix64(r->s++);
}
static uint64_t rng_below(struct soak_rng *r, uint64_t n) {
    return n ? rng_next(r) % n : 0;
}

/* Mostly small messages, some large, a few near the largest. */
static size_t pick_len(struct soak_rng *r, size_t max) {
    uint64_t c = rng_below(r, 100), hi;

    if (c < 50)
        hi = 1024;
    else if (c < 80)
        hi = 64 * 1024;
    else if (c < 95)
        hi = 1024 * 1024;
    else
        hi = max;
    if (hi > max)
        hi = max;
    return (size_t)rng_below(r, hi + 1);
}

/* Word-wise checksum of a message's body (independent of the pattern). */
static uint64_t checksum(const unsigned char *p, size_t len) {
    uint64_t h = 0x243f6a8885a308d3ULL, w;
    size_t i;

    for (i = 0; i + 8 <= len; i += 8) {
        memcpy(&w, p + i, 8);
        h = tu_mix64(h ^ w);
    }
    for (; i < len; i++)
        h = tu_mix64(h ^ p[i]);
    return h ^ len;
}

static void fill_msg(unsigned char *buf, const struct soak_msg *m, uint64_t round, int idx) {
    if (m->len < SOAK_HDR) {
        tu_fill(buf, m->len, m->seed);
        return;
    }
    uint64_t hdr[3] = {m->seq, (round << 8) | (uint64_t)idx, 0};
    tu_fill(buf + SOAK_HDR, m->len - SOAK_HDR, m->seed);
    hdr[2] = checksum(buf + SOAK_HDR, m->len - SOAK_HDR);
    memcpy(buf, hdr, sizeof(hdr));
}

static void check_msg(const unsigned char *buf, const MPI_Status *s, const struct soak_msg *m,
                      uint64_t round, int idx) {
    int count = -1;
    size_t bad;

    MPI_Get_count(s, MPI_BYTE, &count);
    if (s->MPI_SOURCE != m->src || s->MPI_TAG != m->tag || (size_t)count != m->len) {
        soak_error("round %" PRIu64
                   " message %d: expected source %d tag %d %zu bytes, got source %d "
                   "tag %d %d bytes",
                   round, idx, m->src, m->tag, m->len, s->MPI_SOURCE, s->MPI_TAG, count);
        return;
    }
    if (m->len < SOAK_HDR) {
        bad = tu_check(buf, m->len, m->seed);
        if (bad != m->len)
            soak_error("round %" PRIu64 " message %d from %d (%zu bytes, %s): byte %zu wrong",
                       round, idx, m->src, m->len, mode_name[m->mode], bad);
        return;
    }
    uint64_t hdr[3];
    memcpy(hdr, buf, sizeof(hdr));
    if (hdr[0] != m->seq || hdr[1] != ((round << 8) | (uint64_t)idx))
        soak_error("round %" PRIu64 " message %d from %d: sequence number %" PRIu64
                   " (round/index %#" PRIx64 "), expected %" PRIu64 " (%#" PRIx64 ")",
                   round, idx, m->src, hdr[0], hdr[1], m->seq, (round << 8) | (uint64_t)idx);
    else if (hdr[2] != checksum(buf + SOAK_HDR, m->len - SOAK_HDR))
        soak_error("round %" PRIu64 " message %d from %d (%zu bytes, %s): checksum mismatch", round,
                   idx, m->src, m->len, mode_name[m->mode]);
    else if ((bad = tu_check(buf + SOAK_HDR, m->len - SOAK_HDR, m->seed)) != m->len - SOAK_HDR)
        soak_error("round %" PRIu64 " message %d from %d: byte %zu wrong under a good checksum",
                   round, idx, m->src, bad + SOAK_HDR);
}

/* Draw round's messages; seqs (size x size) advances identically everywhere. */
static int plan_p2p(uint64_t seed, uint64_t round, size_t maxlen, bool prepost, uint64_t *seqs,
                    struct soak_msg *msgs) {
    struct soak_rng r = {tu_seed(seed, round, 1, 0)};
    int n = tu_size * SOAK_MSGS_PER_PROC;
    size_t bsend_bytes = 0;

    if (n > SOAK_MAX_MSGS)
        n = SOAK_MAX_MSGS;
    for (int i = 0; i < n; i++) {
        struct soak_msg *m = &msgs[i];
        m->src = (int)rng_below(&r, (uint64_t)tu_size);
        m->dst = (int)rng_below(&r, (uint64_t)tu_size - 1);
        if (m->dst >= m->src)
            m->dst++;
        m->len = pick_len(&r, maxlen);
        m->mode = (enum soak_mode)rng_below(&r, MODE_COUNT);
        /* ready mode only where the receive is surely posted; buffered
         * within the attached buffer of each sender (counted for all: the
         * cap is per round, which is simpler and still exercises it) */
        if (m->mode == MODE_READY && !prepost)
            m->mode = MODE_STD;
        if (m->mode == MODE_BUF) {
            if (bsend_bytes + m->len > SOAK_BSEND_CAP)
                m->mode = MODE_STD;
            else
                bsend_bytes += m->len;
        }
        m->any_source = rng_below(&r, 4) == 0;
        m->tag = (int)(round % 256) * 128 + i;
        m->seq = seqs[m->src * tu_size + m->dst]++;
        m->seed = tu_seed(seed, round, (uint64_t)i, 2);
    }
    return n;
}

/* Post this rank's receives of the round's messages. */
static void post_receives(int n, const struct soak_msg *msgs, unsigned char **bufs,
                          MPI_Request *reqs) {
    for (int i = 0; i < n; i++)
        if (msgs[i].dst == tu_rank)
            MPI_Irecv(bufs[i], (int)msgs[i].len, MPI_BYTE,
                      msgs[i].any_source ? MPI_ANY_SOURCE : msgs[i].src, msgs[i].tag,
                      MPI_COMM_WORLD, &reqs[i]);
}

/* One message in its blocking mode (ready mode: every receive is posted). */
static void send_blocking(const struct soak_msg *m, const unsigned char *buf) {
    int c = (int)m->len;
    switch (m->mode) {
    case MODE_STD:
        MPI_Send(buf, c, MPI_BYTE, m->dst, m->tag, MPI_COMM_WORLD);
        break;
    case MODE_SYNC:
        MPI_Ssend(buf, c, MPI_BYTE, m->dst, m->tag, MPI_COMM_WORLD);
        break;
    case MODE_BUF:
        MPI_Bsend(buf, c, MPI_BYTE, m->dst, m->tag, MPI_COMM_WORLD);
        break;
    default:
        MPI_Rsend(buf, c, MPI_BYTE, m->dst, m->tag, MPI_COMM_WORLD);
        break;
    }
}

/* One message in its nonblocking mode (no ready mode: the receive may not
 * be posted yet). */
static void send_nonblocking(const struct soak_msg *m, const unsigned char *buf, MPI_Request *req) {
    int c = (int)m->len;
    switch (m->mode) {
    case MODE_SYNC:
        MPI_Issend(buf, c, MPI_BYTE, m->dst, m->tag, MPI_COMM_WORLD, req);
        break;
    case MODE_BUF:
        MPI_Ibsend(buf, c, MPI_BYTE, m->dst, m->tag, MPI_COMM_WORLD, req);
        break;
    default:
        MPI_Isend(buf, c, MPI_BYTE, m->dst, m->tag, MPI_COMM_WORLD, req);
        break;
    }
}

/* Send the round's messages from this rank; true when one went buffered. */
static bool send_mine(int n, const struct soak_msg *msgs, unsigned char **bufs, MPI_Request *reqs,
                      bool blocking) {
    bool bsent = false;
    for (int i = 0; i < n; i++) {
        if (msgs[i].src != tu_rank)
            continue;
        if (blocking)
            send_blocking(&msgs[i], bufs[i]);
        else
            send_nonblocking(&msgs[i], bufs[i], &reqs[i]);
        bsent |= msgs[i].mode == MODE_BUF;
    }
    return bsent;
}

static void p2p_round(uint64_t seed, uint64_t round, size_t maxlen, uint64_t *seqs) {
    static struct soak_msg msgs[SOAK_MAX_MSGS];
    static unsigned char *bufs[SOAK_MAX_MSGS];
    static MPI_Request reqs[SOAK_MAX_MSGS];
    static MPI_Status stats[SOAK_MAX_MSGS];
    bool prepost = (tu_mix64(seed ^ round) & 1) != 0;
    int n = plan_p2p(seed, round, maxlen, prepost, seqs, msgs);
    bool bsent;

    for (int i = 0; i < n; i++) {
        reqs[i] = MPI_REQUEST_NULL;
        bufs[i] = NULL;
        if (msgs[i].src == tu_rank || msgs[i].dst == tu_rank)
            bufs[i] = tu_malloc(msgs[i].len);
        if (msgs[i].src == tu_rank)
            fill_msg(bufs[i], &msgs[i], round, i);
        else if (msgs[i].dst == tu_rank)
            memset(bufs[i], TU_POISON, msgs[i].len);
    }
    if (prepost) {
        post_receives(n, msgs, bufs, reqs);
        MPI_Barrier(MPI_COMM_WORLD); /* every receive is posted: ready mode is valid */
        bsent = send_mine(n, msgs, bufs, reqs, true);
    } else {
        bsent = send_mine(n, msgs, bufs, reqs, false);
        post_receives(n, msgs, bufs, reqs);
    }
    MPI_Waitall(n, reqs, stats);
    for (int i = 0; i < n; i++) {
        if (msgs[i].dst == tu_rank)
            check_msg(bufs[i], &stats[i], &msgs[i], round, i);
        if (msgs[i].src == tu_rank) {
            st.messages++;
            st.bytes += (long)msgs[i].len;
        }
        free(bufs[i]);
    }
    if (bsent) {
        /* detach waits until every buffered message has left; then the
         * next round has the whole buffer again */
        void *b;
        int sz;
        MPI_Buffer_detach(&b, &sz);
        MPI_Buffer_attach(b, sz);
    }
}

/* ---- one-sided ---------------------------------------------------------- */

struct soak_win {
    MPI_Win win;
    unsigned char *base; /* tu_size slots, then the counters */
    int64_t *ctr;        /* SOAK_NCTR accumulate counters, fetch-op counter, CAS word */
};

static size_t win_bytes(void) {
    return (size_t)tu_size * SOAK_SLOT + (SOAK_NCTR + 2) * 8;
}
static MPI_Aint ctr_disp(int k) {
    return (MPI_Aint)((size_t)tu_size * SOAK_SLOT + (size_t)k * 8);
}

/* What origin o does to target t in this round: put length, pattern,
 * accumulate value. */
static size_t rma_len(uint64_t seed, uint64_t round, int o, int t) {
    return (size_t)(tu_seed(seed, round, (uint64_t)o, (uint64_t)t * 2 + 100) % (SOAK_SLOT + 1));
}
static uint64_t rma_seed(uint64_t seed, uint64_t round, int o, int t) {
    return tu_seed(seed, round, (uint64_t)o, (uint64_t)t * 2 + 101);
}
static int64_t acc_value(uint64_t seed, uint64_t round, int o, int t) {
    return (int64_t)(tu_seed(seed, round, (uint64_t)o, (uint64_t)t + 5000) % 1000000) - 500000;
}

static void rma_round(struct soak_win *w, uint64_t seed, uint64_t round) {
    bool fence = (round % 2) == 0;
    int n = tu_size;
    int64_t *fetched = tu_malloc(sizeof(int64_t) * (size_t)n * 2), one = 1, zero = 0;
    unsigned char **back = tu_malloc(sizeof(*back) * (size_t)n);
    unsigned char **src = tu_malloc(sizeof(*src) * (size_t)n);
    long won = 0, won_all = 0;

    /* reset my window before anyone touches it this round */
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, tu_rank, 0, w->win);
    memset(w->base, 0, win_bytes());
    MPI_Win_unlock(tu_rank, w->win);
    MPI_Barrier(MPI_COMM_WORLD);
    /* (fence epochs are opened and closed explicitly: the window's own
     * locks above and below may not overlap one) */
    if (fence)
        MPI_Win_fence(MPI_MODE_NOPRECEDE, w->win);
    else
        MPI_Win_lock_all(0, w->win);
    for (int k = 1; k < n; k++) {
        int t = (tu_rank + k) % n;
        size_t len = rma_len(seed, round, tu_rank, t);
        int64_t v = acc_value(seed, round, tu_rank, t);
        src[t] = tu_malloc(len);
        tu_fill(src[t], len, rma_seed(seed, round, tu_rank, t));
        MPI_Put(src[t], (int)len, MPI_BYTE, t, (MPI_Aint)tu_rank * SOAK_SLOT, (int)len, MPI_BYTE,
                w->win);
        MPI_Accumulate(&v, 1, MPI_INT64_T, t, ctr_disp((tu_rank + t) % SOAK_NCTR), 1, MPI_INT64_T,
                       MPI_SUM, w->win);
        MPI_Fetch_and_op(&one, &fetched[2 * t], MPI_INT64_T, t, ctr_disp(SOAK_NCTR), MPI_SUM,
                         w->win);
        int64_t mine = tu_rank + 1;
        MPI_Compare_and_swap(&mine, &zero, &fetched[2 * t + 1], MPI_INT64_T, t,
                             ctr_disp(SOAK_NCTR + 1), w->win);
        st.rma_ops += 4;
        st.rma_bytes += (long)len + 24;
    }
    if (fence)
        MPI_Win_fence(0, w->win);
    else
        MPI_Win_flush_all(w->win);
    for (int k = 1; k < n; k++) {
        int t = (tu_rank + k) % n;
        size_t len = rma_len(seed, round, tu_rank, t);
        back[t] = tu_malloc(len);
        memset(back[t], TU_POISON, len);
        MPI_Get(back[t], (int)len, MPI_BYTE, t, (MPI_Aint)tu_rank * SOAK_SLOT, (int)len, MPI_BYTE,
                w->win);
        st.rma_ops++;
        st.rma_bytes += (long)len;
    }
    if (fence) {
        MPI_Win_fence(MPI_MODE_NOSUCCEED, w->win);
    } else {
        MPI_Win_unlock_all(w->win);
        MPI_Barrier(MPI_COMM_WORLD); /* every origin is done with my window */
    }
    for (int k = 1; k < n; k++) {
        int t = (tu_rank + k) % n;
        size_t len = rma_len(seed, round, tu_rank, t), bad;
        if ((bad = tu_check(back[t], len, rma_seed(seed, round, tu_rank, t))) != len)
            soak_error("round %" PRIu64 ": get of my slot at %d (%zu bytes): byte %zu wrong", round,
                       t, len, bad);
        if (fetched[2 * t] < 0 || fetched[2 * t] >= n - 1)
            soak_error("round %" PRIu64 ": fetch-and-add at %d fetched %" PRId64 ", outside 0..%d",
                       round, t, fetched[2 * t], n - 2);
        if (fetched[2 * t + 1] == 0)
            won++;
        else if (fetched[2 * t + 1] < 1 || fetched[2 * t + 1] > n || fetched[2 * t + 1] == t + 1)
            soak_error("round %" PRIu64 ": compare-and-swap at %d fetched %" PRId64, round, t,
                       fetched[2 * t + 1]);
        free(back[t]);
        free(src[t]);
    }
    /* my window: every origin's slot, the counters */
    MPI_Win_lock(MPI_LOCK_SHARED, tu_rank, 0, w->win);
    MPI_Win_sync(w->win);
    int64_t expect[SOAK_NCTR] = {0};
    for (int o = 0; o < n; o++) {
        size_t len, bad;
        const unsigned char *slot = w->base + (size_t)o * SOAK_SLOT;
        if (o == tu_rank)
            continue;
        len = rma_len(seed, round, o, tu_rank);
        expect[(o + tu_rank) % SOAK_NCTR] += acc_value(seed, round, o, tu_rank);
        if ((bad = tu_check(slot, len, rma_seed(seed, round, o, tu_rank))) != len)
            soak_error("round %" PRIu64 ": slot of origin %d (%zu bytes put): byte %zu wrong",
                       round, o, len, bad);
        for (size_t i = len; i < SOAK_SLOT; i++)
            if (slot[i] != 0) {
                soak_error("round %" PRIu64
                           ": slot of origin %d: byte %zu written past the %zu put",
                           round, o, i, len);
                break;
            }
    }
    for (int k = 0; k < SOAK_NCTR; k++)
        if (w->ctr[k] != expect[k])
            soak_error("round %" PRIu64 ": accumulate counter %d is %" PRId64 ", expected %" PRId64,
                       round, k, w->ctr[k], expect[k]);
    if (w->ctr[SOAK_NCTR] != n - 1)
        soak_error("round %" PRIu64 ": fetch-and-add counter is %" PRId64 ", expected %d", round,
                   w->ctr[SOAK_NCTR], n - 1);
    if (w->ctr[SOAK_NCTR + 1] < 1 || w->ctr[SOAK_NCTR + 1] > n ||
        w->ctr[SOAK_NCTR + 1] == tu_rank + 1)
        soak_error("round %" PRIu64 ": compare-and-swap word is %" PRId64, round,
                   w->ctr[SOAK_NCTR + 1]);
    MPI_Win_unlock(tu_rank, w->win);
    /* exactly one winner of the compare-and-swap per target */
    MPI_Allreduce(&won, &won_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (tu_rank == 0 && won_all != n)
        soak_error("round %" PRIu64 ": %ld compare-and-swap winners over %d targets", round,
                   won_all, n);
    free(fetched);
    free(back);
    free(src);
}

int main(int argc, char **argv) {
    double secs = 60, t0;
    long max_rounds = 0;
    uint64_t seed = 1, round;
    size_t maxlen = 4u << 20;
    bool p2p = true, rma = true;
    struct soak_win w = {MPI_WIN_NULL, NULL, NULL};
    void *bbuf;
    int bsize, opt;

    tu_init(&argc, &argv, "soak");
    while ((opt = getopt(argc, argv, "t:r:s:m:PRh")) != -1) {
        switch (opt) {
        case 't':
            secs = (double)tu_parse_long(optarg);
            break;
        case 'r':
            max_rounds = tu_parse_long(optarg);
            break;
        case 's':
            seed = (uint64_t)tu_parse_long(optarg);
            break;
        case 'm':
            maxlen = tu_parse_size(optarg);
            break;
        case 'P':
            p2p = false;
            break;
        case 'R':
            rma = false;
            break;
        case 'h':
            tu_usage("[-t SECONDS] [-r ROUNDS] [-s SEED] [-m MAXSIZE] [-P] [-R]", 0);
        default:
            tu_usage("[-t SECONDS] [-r ROUNDS] [-s SEED] [-m MAXSIZE] [-P] [-R]", 1);
        }
    }
    if (tu_size < 2 || maxlen > (size_t)1 << 30 || (secs <= 0 && max_rounds <= 0)) {
        if (tu_rank == 0)
            fprintf(stderr, "soak: needs 2 processes or more, -m up to 1G, and -t or -r\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    uint64_t *seqs = tu_malloc(sizeof(uint64_t) * (size_t)tu_size * (size_t)tu_size);
    memset(seqs, 0, sizeof(uint64_t) * (size_t)tu_size * (size_t)tu_size);
    bsize = (int)(SOAK_BSEND_CAP + SOAK_MAX_MSGS * (MPI_BSEND_OVERHEAD + 64));
    bbuf = tu_malloc((size_t)bsize);
    MPI_Buffer_attach(bbuf, bsize);
    if (rma) {
        MPI_Win_allocate((MPI_Aint)win_bytes(), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w.base, &w.win);
        w.ctr = (int64_t *)(w.base + (size_t)tu_size * SOAK_SLOT);
    }
    t0 = MPI_Wtime();
    for (round = 0;; round++) {
        int go = 1;
        if (tu_rank == 0)
            go = (max_rounds <= 0 || (long)round < max_rounds) &&
                 (secs <= 0 || MPI_Wtime() - t0 < secs);
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!go)
            break;
        if (p2p)
            p2p_round(seed, round, maxlen, seqs);
        if (rma)
            rma_round(&w, seed, round);
    }
    double elapsed = MPI_Wtime() - t0;
    if (rma)
        MPI_Win_free(&w.win);
    MPI_Buffer_detach(&bbuf, &bsize);
    free(bbuf);
    free(seqs);

    long mine[5] = {st.messages, st.bytes, st.rma_ops, st.rma_bytes, st.errors}, all[5];
    MPI_Allreduce(mine, all, 5, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (tu_rank == 0)
        printf("soak: seed %" PRIu64 ", %d processes, %" PRIu64
               " rounds, %ld messages (%ld bytes), "
               "%ld one-sided operations (%ld bytes), %ld errors, %.1f s\n",
               seed, tu_size, round, all[0], all[1], all[2], all[3], all[4], elapsed);
    if (all[4] != 0) {
        if (tu_rank == 0)
            printf("FAIL soak: %ld errors in the data (the first ones are above)\n", all[4]);
        alarm(0);
        MPI_Finalize();
        return 1;
    }
    tu_ok("seed %" PRIu64 " rounds %" PRIu64 " messages %ld one-sided %ld", seed, round, all[0],
          all[2]);
    return 0;
}
