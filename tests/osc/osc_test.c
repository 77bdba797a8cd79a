/*
 * One-sided tests for osc/rdma over btl_efa.  Usage: osc_test TEST[,TEST...]
 *   putget    put and get 1 B .. 16 MiB (OSC_PUTGET_MAX caps it) with data verification (fence)
 *   atomics   every atomic op on int32 and int64, all ranks on one location
 *   lock      compare-and-swap spin lock guarding a non-atomic counter
 *   sync      fence, post-start-complete-wait, lock/unlock, lock_all + flush
 *   dynamic   MPI_Win_create_dynamic + attach/detach, memory re-allocated
 *   accumulate MPI_Accumulate MPI_SUM on doubles
 *   accflush  MPI_Accumulate MPI_SUM of a large block of doubles from every
 *             rank but 0 into rank 0, MPI_Win_flush_local after each, in a
 *             lock_all epoch; OSC_ACCFLUSH_DOUBLES and OSC_ACCFLUSH_ROUNDS
 *             (default 65536 and 4) size it; prints the time taken
 *   realloc   windows on memory freed and re-allocated between epochs
 *   busytarget rank 1 computes without calling MPI for OSC_BUSY_MS (default
 *             600) while rank 0 puts and gets 8 B .. 2 KiB, a flush after
 *             each: rank 0 must finish them in under a third of that
 *             (a small put or get in the target's ring is taken back and
 *             done by single copy), and the data must be right
 *             (OSC_BUSY_UNTIMED=1: the data only)
 * Windows come from MPI_Win_create / dynamic windows only (MPI_Win_allocate
 * would take osc/rdma's shared-memory path on one node).  Prints
 * "OK <test>" from rank 0 on success; several tests, comma-separated, run
 * one after the other in the one job (one start for all: the runner's
 * time), each with its "OK <test>" once it passed, and a failed one ends
 * the job (those after it print nothing).
 */
#include "osc_util.h"

static MPI_Win make_win(void *base, size_t size) {
    MPI_Win win;
    /* Failing to create the window (osc/rdma not available) fails the test. */
    OU_MPI(MPI_Win_create(base, (MPI_Aint)size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    return win;
}

/* ---- putget ---- */

static long env_long(const char *name, long dflt);

static void test_putget(void) {
    /* OSC_PUTGET_MAX caps the sizes (the runner's, where a stand-in
     * provider's defect shows only with many chunks in flight). */
    const long asked = env_long("OSC_PUTGET_MAX", 16l << 20);
    const size_t max = asked >= 1 && asked <= (16l << 20) ? (size_t)asked : 16u << 20;
    const size_t sizes[] = {1, 3, 8, 100, 4096, 8191, 65536, 65537, 1u << 20, (3u << 20) + 5, 16u << 20};
    uint8_t *winbuf = malloc(max), *src = malloc(max), *dst = malloc(max);
    OU_CHECK(winbuf && src && dst, "out of memory");
    MPI_Win win = make_win(winbuf, max);
    int right = (ou_rank + 1) % ou_size, left = (ou_rank + ou_size - 1) % ou_size;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
        size_t n = sizes[k];
        if (n > max)
            break;
        unsigned seed = (unsigned)(k * 64 + ou_rank);
        memset(winbuf, 0, max);
        ou_fill(src, n, seed);
        OU_MPI(MPI_Win_fence(0, win));
        OU_MPI(MPI_Put(src, (int)n, MPI_BYTE, right, 0, (int)n, MPI_BYTE, win));
        OU_MPI(MPI_Win_fence(0, win));
        size_t bad = ou_verify(winbuf, n, (unsigned)(k * 64 + left));
        OU_CHECK(bad == n, "put of %zu bytes: byte %zu wrong", n, bad);
        OU_CHECK(n == max || winbuf[n] == 0, "put of %zu bytes wrote past its end", n);
        memset(dst, 0, n);
        OU_MPI(MPI_Get(dst, (int)n, MPI_BYTE, right, 0, (int)n, MPI_BYTE, win));
        OU_MPI(MPI_Win_fence(0, win));
        bad = ou_verify(dst, n, seed);
        OU_CHECK(bad == n, "get of %zu bytes: byte %zu wrong", n, bad);
        /* Unaligned displacement, passive target. */
        if (n < max) {
            OU_MPI(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
            OU_MPI(MPI_Get(dst, (int)n, MPI_BYTE, right, 1, (int)n - (n > 1), MPI_BYTE, win));
            OU_MPI(MPI_Win_unlock(right, win));
            OU_CHECK(n < 2 || dst[0] == ou_byte(seed, 1), "unaligned get of %zu bytes wrong", n);
        }
        OU_MPI(MPI_Win_fence(0, win));
    }
    OU_MPI(MPI_Win_free(&win));
    free(winbuf);
    free(src);
    free(dst);
}

/* ---- atomics ---- */

#define ITERS 1000

/* Runs every op on one type; T is int32_t or int64_t. */
#define ATOMIC_SUITE(T, MPIT)                                                                      \
    do {                                                                                           \
        T *loc = calloc(8, sizeof(T));                                                             \
        loc[4] = (T) ~(T)0; /* and: from all ones */                                               \
        loc[5] = 1000;      /* min */                                                              \
        MPI_Win win = make_win(loc, 8 * sizeof(T));                                                \
        T one = 1, res = 0, v;                                                                     \
        int n = ou_size;                                                                           \
        /* fetch-add: 1000 each, exact sum; fetched values are all distinct */                     \
        OU_MPI(MPI_Win_lock_all(0, win));                                                          \
        for (int i = 0; i < ITERS; ++i) {                                                          \
            OU_MPI(MPI_Fetch_and_op(&one, &res, MPIT, 0, 0, MPI_SUM, win));                        \
            OU_MPI(MPI_Win_flush(0, win));                                                         \
            OU_CHECK(res >= 0 && res < (T)(n * ITERS), "fetch-add returned %lld", (long long)res); \
        }                                                                                          \
        /* non-fetching add */                                                                     \
        for (int i = 0; i < ITERS; ++i) {                                                          \
            OU_MPI(MPI_Accumulate(&one, 1, MPIT, 0, sizeof(T), 1, MPIT, MPI_SUM, win));            \
        }                                                                                          \
        OU_MPI(MPI_Win_flush_all(win));                                                            \
        /* or / xor / and: each rank owns one bit */                                               \
        v = (T)1 << ou_rank;                                                                       \
        OU_MPI(MPI_Fetch_and_op(&v, &res, MPIT, 0, 2 * sizeof(T), MPI_BOR, win));                  \
        OU_MPI(MPI_Accumulate(&v, 1, MPIT, 0, 3 * sizeof(T), 1, MPIT, MPI_BXOR, win));             \
        OU_MPI(MPI_Accumulate(&v, 1, MPIT, 0, 3 * sizeof(T), 1, MPIT, MPI_BXOR, win));             \
        OU_MPI(MPI_Fetch_and_op(&v, &res, MPIT, 0, 3 * sizeof(T), MPI_BXOR, win));                 \
        v = ~((T)1 << ou_rank);                                                                    \
        OU_MPI(MPI_Fetch_and_op(&v, &res, MPIT, 0, 4 * sizeof(T), MPI_BAND, win));                 \
        /* min / max, with negative values */                                                      \
        v = (T)(-(ou_rank + 1));                                                                   \
        OU_MPI(MPI_Fetch_and_op(&v, &res, MPIT, 0, 5 * sizeof(T), MPI_MIN, win));                  \
        v = (T)(ou_rank + 5);                                                                      \
        OU_MPI(MPI_Accumulate(&v, 1, MPIT, 0, 6 * sizeof(T), 1, MPIT, MPI_MAX, win));              \
        /* swap */                                                                                 \
        for (int i = 0; i < 100; ++i) {                                                            \
            v = (T)(ou_rank + 1);                                                                  \
            OU_MPI(MPI_Fetch_and_op(&v, &res, MPIT, 0, 7 * sizeof(T), MPI_REPLACE, win));          \
            OU_MPI(MPI_Win_flush(0, win));                                                         \
            OU_CHECK(res >= 0 && res <= (T)n, "swap returned %lld", (long long)res);               \
        }                                                                                          \
        /* no-op fetch */                                                                          \
        OU_MPI(MPI_Fetch_and_op(NULL, &res, MPIT, 0, 7 * sizeof(T), MPI_NO_OP, win));              \
        OU_MPI(MPI_Win_unlock_all(win));                                                           \
        MPI_Barrier(MPI_COMM_WORLD);                                                               \
        if (0 == ou_rank) {                                                                        \
            T all = (T)(((T)1 << n) - 1);                                                          \
            OU_CHECK(loc[0] == (T)(n * ITERS), "fetch-add sum %lld", (long long)loc[0]);           \
            OU_CHECK(loc[1] == (T)(n * ITERS), "add sum %lld", (long long)loc[1]);                 \
            OU_CHECK(loc[2] == all, "or gave %llx", (long long)loc[2]);                            \
            OU_CHECK(loc[3] == all, "xor gave %llx", (long long)loc[3]);                           \
            OU_CHECK(loc[4] == (T)~all, "and gave %llx", (long long)loc[4]);                       \
            OU_CHECK(loc[5] == (T)(-n), "min gave %lld", (long long)loc[5]);                       \
            OU_CHECK(loc[6] == (T)(n + 4), "max gave %lld", (long long)loc[6]);                    \
            OU_CHECK(loc[7] >= 1 && loc[7] <= (T)n, "swap left %lld", (long long)loc[7]);          \
        }                                                                                          \
        OU_MPI(MPI_Win_free(&win));                                                                \
        free(loc);                                                                                 \
    } while (0)

static void test_atomics(void) {
    ATOMIC_SUITE(int32_t, MPI_INT32_T);
    ATOMIC_SUITE(int64_t, MPI_INT64_T);
}

/* ---- lock: compare-and-swap spin lock guarding a non-atomic counter ---- */

static void test_lock(void) {
    int64_t *mem = calloc(2, sizeof(int64_t)); /* [0] lock word, [1] counter */
    MPI_Win win = make_win(mem, 2 * sizeof(int64_t));
    const int iters = 200;
    int64_t me = ou_rank + 1, zero = 0, old, counter;
    OU_MPI(MPI_Win_lock_all(0, win));
    for (int i = 0; i < iters; ++i) {
        do {
            OU_MPI(MPI_Compare_and_swap(&me, &zero, &old, MPI_INT64_T, 0, 0, win));
            OU_MPI(MPI_Win_flush(0, win));
        } while (old != 0);
        OU_MPI(MPI_Get(&counter, 1, MPI_INT64_T, 0, sizeof(int64_t), 1, MPI_INT64_T, win));
        OU_MPI(MPI_Win_flush(0, win));
        ++counter;
        OU_MPI(MPI_Put(&counter, 1, MPI_INT64_T, 0, sizeof(int64_t), 1, MPI_INT64_T, win));
        OU_MPI(MPI_Win_flush(0, win));
        OU_MPI(MPI_Compare_and_swap(&zero, &me, &old, MPI_INT64_T, 0, 0, win));
        OU_MPI(MPI_Win_flush(0, win));
        OU_CHECK(old == me, "lock word was %lld while held by %lld", (long long)old, (long long)me);
    }
    OU_MPI(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == ou_rank) {
        OU_CHECK(mem[1] == (int64_t)iters * ou_size, "counter %lld, expected %lld",
                 (long long)mem[1], (long long)iters * ou_size);
        OU_CHECK(mem[0] == 0, "lock left held");
    }
    OU_MPI(MPI_Win_free(&win));
    free(mem);
}

/* ---- sync: every synchronization mode ---- */

static void test_sync(void) {
    const int n = 1024;
    int *mem = calloc((size_t)n * (size_t)ou_size + 1, sizeof(int));
    int *src = malloc(sizeof(int) * (size_t)n);
    MPI_Win win = make_win(mem, sizeof(int) * ((size_t)n * (size_t)ou_size + 1));
    int right = (ou_rank + 1) % ou_size, left = (ou_rank + ou_size - 1) % ou_size;
    for (int i = 0; i < n; ++i) {
        src[i] = ou_rank * 100000 + i;
    }
    /* post-start-complete-wait with the neighbours */
    MPI_Group world, lg, rg;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &left, &lg);
    MPI_Group_incl(world, 1, &right, &rg);
    for (int round = 0; round < 3; ++round) {
        OU_MPI(MPI_Win_post(lg, 0, win));
        OU_MPI(MPI_Win_start(rg, 0, win));
        OU_MPI(MPI_Put(src, n, MPI_INT, right, 0, n, MPI_INT, win));
        OU_MPI(MPI_Win_complete(win));
        OU_MPI(MPI_Win_wait(win));
        for (int i = 0; i < n; ++i) {
            OU_CHECK(mem[i] == left * 100000 + i, "pscw: element %d is %d", i, mem[i]);
        }
        memset(mem, 0, sizeof(int) * (size_t)n);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Group_free(&lg);
    MPI_Group_free(&rg);
    MPI_Group_free(&world);
    /* exclusive lock/unlock: non-atomic increment of rank 0's last int */
    int last = n * ou_size;
    for (int i = 0; i < 50; ++i) {
        int v;
        OU_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        OU_MPI(MPI_Get(&v, 1, MPI_INT, 0, (MPI_Aint)(sizeof(int) * (size_t)last), 1, MPI_INT, win));
        OU_MPI(MPI_Win_flush(0, win));
        ++v;
        OU_MPI(MPI_Put(&v, 1, MPI_INT, 0, (MPI_Aint)(sizeof(int) * (size_t)last), 1, MPI_INT, win));
        OU_MPI(MPI_Win_unlock(0, win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == ou_rank) {
        OU_CHECK(mem[last] == 50 * ou_size, "exclusive lock counter %d", mem[last]);
    }
    /* lock_all + flush: everybody puts its block into everybody */
    MPI_Barrier(MPI_COMM_WORLD);
    OU_MPI(MPI_Win_lock_all(0, win));
    for (int t = 0; t < ou_size; ++t) {
        OU_MPI(MPI_Put(src, n, MPI_INT, t, (MPI_Aint)(sizeof(int) * (size_t)n * (size_t)ou_rank), n,
                       MPI_INT, win));
    }
    OU_MPI(MPI_Win_flush_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    OU_MPI(MPI_Win_sync(win));
    for (int r = 0; r < ou_size; ++r) {
        for (int i = 0; i < n; ++i) {
            OU_CHECK(mem[r * n + i] == r * 100000 + i, "lock_all: block %d element %d is %d", r, i,
                     mem[r * n + i]);
        }
    }
    OU_MPI(MPI_Win_unlock_all(win));
    /* fence */
    OU_MPI(MPI_Win_fence(0, win));
    OU_MPI(MPI_Put(&ou_rank, 1, MPI_INT, right, 0, 1, MPI_INT, win));
    OU_MPI(MPI_Win_fence(0, win));
    OU_CHECK(mem[0] == left, "fence: got %d", mem[0]);
    OU_MPI(MPI_Win_free(&win));
    free(mem);
    free(src);
}

/* ---- dynamic windows ---- */

static void test_dynamic(void) {
    MPI_Win win;
    OU_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    int right = (ou_rank + 1) % ou_size, left = (ou_rank + ou_size - 1) % ou_size;
    MPI_Aint *addrs = malloc(sizeof(MPI_Aint) * (size_t)ou_size);
    for (int round = 0; round < 4; ++round) {
        size_t n = (size_t)4096 << (round * 3); /* 4 KiB .. 2 MiB */
        uint8_t *mem = calloc(n + sizeof(int64_t), 1);
        uint8_t *src = malloc(n), *dst = malloc(n);
        OU_MPI(MPI_Win_attach(win, mem, (MPI_Aint)(n + sizeof(int64_t))));
        MPI_Aint mine;
        MPI_Get_address(mem, &mine);
        MPI_Allgather(&mine, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD);
        ou_fill(src, n, (unsigned)(round * 16 + ou_rank));
        OU_MPI(MPI_Win_lock_all(0, win));
        OU_MPI(MPI_Put(src, (int)n, MPI_BYTE, right, addrs[right], (int)n, MPI_BYTE, win));
        int64_t one = 1, res;
        OU_MPI(MPI_Fetch_and_op(&one, &res, MPI_INT64_T, 0, addrs[0] + (MPI_Aint)n, MPI_SUM, win));
        OU_MPI(MPI_Win_flush_all(win));
        MPI_Barrier(MPI_COMM_WORLD);
        OU_MPI(MPI_Get(dst, (int)n, MPI_BYTE, right, addrs[right], (int)n, MPI_BYTE, win));
        OU_MPI(MPI_Win_flush(right, win));
        OU_MPI(MPI_Win_unlock_all(win));
        size_t bad = ou_verify(mem, n, (unsigned)(round * 16 + left));
        OU_CHECK(bad == n, "dynamic put round %d: byte %zu wrong", round, bad);
        bad = ou_verify(dst, n, (unsigned)(round * 16 + ou_rank));
        OU_CHECK(bad == n, "dynamic get round %d: byte %zu wrong", round, bad);
        MPI_Barrier(MPI_COMM_WORLD);
        if (0 == ou_rank) {
            int64_t c;
            memcpy(&c, mem + n, sizeof(c));
            OU_CHECK(c == ou_size, "dynamic fetch-add round %d: %lld", round, (long long)c);
        }
        OU_MPI(MPI_Win_detach(win, mem));
        MPI_Barrier(MPI_COMM_WORLD);
        free(mem);
        free(src);
        free(dst);
    }
    free(addrs);
    OU_MPI(MPI_Win_free(&win));
}

/* ---- accumulate on doubles ---- */

static void test_accumulate(void) {
    const int n = 1000, rounds = 10;
    double *mem = calloc((size_t)n, sizeof(double));
    double *src = malloc(sizeof(double) * (size_t)n);
    MPI_Win win = make_win(mem, sizeof(double) * (size_t)n);
    for (int i = 0; i < n; ++i) {
        src[i] = (ou_rank + 1) * 0.5 + i;
    }
    OU_MPI(MPI_Win_fence(0, win));
    for (int r = 0; r < rounds; ++r) {
        OU_MPI(MPI_Accumulate(src, n, MPI_DOUBLE, 0, 0, n, MPI_DOUBLE, MPI_SUM, win));
    }
    OU_MPI(MPI_Win_fence(0, win));
    OU_MPI(MPI_Win_lock_all(0, win));
    for (int r = 0; r < rounds; ++r) {
        OU_MPI(MPI_Accumulate(src, 1, MPI_DOUBLE, 0, 0, 1, MPI_DOUBLE, MPI_SUM, win));
    }
    OU_MPI(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == ou_rank) {
        double ranks = 0.5 * ou_size * (ou_size + 1) / 2.0; /* sum of (r+1)*0.5 */
        for (int i = 0; i < n; ++i) {
            double expect = rounds * (ranks + (double)ou_size * i);
            if (0 == i) {
                expect *= 2;
            }
            OU_CHECK(mem[i] == expect, "element %d is %g, expected %g", i, mem[i], expect);
        }
    }
    OU_MPI(MPI_Win_free(&win));
    free(mem);
    free(src);
}

/* ---- accumulate of large blocks with flush_local ---- */

static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    return (v && *v) ? strtol(v, NULL, 10) : dflt;
}

/* osc/rdma carries an accumulate of doubles (no BTL atomic for it) as lock
 * the target's accumulate lock, get, add, put, unlock: large blocks are
 * many get and put chunks, and two origins contend for the one lock. */
static void test_accflush(void) {
    const long n = env_long("OSC_ACCFLUSH_DOUBLES", 65536);
    const long rounds = env_long("OSC_ACCFLUSH_ROUNDS", 4);
    OU_CHECK(n > 0 && n <= (1L << 27) && rounds > 0, "bad OSC_ACCFLUSH_DOUBLES/ROUNDS");
    double *mem = calloc((size_t)n, sizeof(double));
    double *src = malloc(sizeof(double) * (size_t)n);
    OU_CHECK(mem && src, "out of memory");
    MPI_Win win = make_win(mem, sizeof(double) * (size_t)n);
    for (long i = 0; i < n; ++i) {
        src[i] = ou_rank + (double)(i % 1000); /* exact in doubles: the sum is too */
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    OU_MPI(MPI_Win_lock_all(0, win));
    if (0 != ou_rank) {
        for (long r = 0; r < rounds; ++r) {
            OU_MPI(MPI_Accumulate(src, (int)n, MPI_DOUBLE, 0, 0, (int)n, MPI_DOUBLE, MPI_SUM, win));
            OU_MPI(MPI_Win_flush_local(0, win));
        }
    }
    OU_MPI(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0;
    if (0 == ou_rank) {
        double ranks = 0.5 * (ou_size - 1) * ou_size; /* sum of the origins' ranks */
        for (long i = 0; i < n; ++i) {
            double expect = (double)rounds * (ranks + (double)(ou_size - 1) * (double)(i % 1000));
            OU_CHECK(mem[i] == expect, "element %ld is %g, expected %g", i, mem[i], expect);
        }
        printf("accflush: %ld doubles x %ld rounds from %d origin(s): %.3f s\n", n, rounds,
               ou_size - 1, t);
    }
    OU_MPI(MPI_Win_free(&win));
    free(mem);
    free(src);
}

/* ---- windows on memory freed and re-allocated ---- */

static void test_realloc(void) {
    int right = (ou_rank + 1) % ou_size, left = (ou_rank + ou_size - 1) % ou_size;
    for (int round = 0; round < 6; ++round) {
        /* sizes vary so the allocator hands back overlapping ranges */
        size_t n = (round % 2) ? 256 * 1024 : 64 * 1024 + (size_t)round * 4096;
        uint8_t *mem = calloc(n, 1), *src = malloc(n), *dst = malloc(n);
        MPI_Win win = make_win(mem, n);
        for (int epoch = 0; epoch < 2; ++epoch) {
            unsigned seed = (unsigned)(round * 64 + epoch * 8);
            ou_fill(src, n, seed + (unsigned)ou_rank);
            OU_MPI(MPI_Win_fence(0, win));
            OU_MPI(MPI_Put(src, (int)n, MPI_BYTE, right, 0, (int)n, MPI_BYTE, win));
            OU_MPI(MPI_Win_fence(0, win));
            size_t bad = ou_verify(mem, n, seed + (unsigned)left);
            OU_CHECK(bad == n, "round %d epoch %d: byte %zu wrong", round, epoch, bad);
            OU_MPI(MPI_Get(dst, (int)n, MPI_BYTE, left, 0, (int)n, MPI_BYTE, win));
            OU_MPI(MPI_Win_fence(0, win));
            bad = ou_verify(dst, n, seed + (unsigned)((left + ou_size - 1) % ou_size));
            OU_CHECK(bad == n, "round %d epoch %d get: byte %zu wrong", round, epoch, bad);
        }
        OU_MPI(MPI_Win_free(&win));
        free(mem);
        free(src);
        free(dst);
    }
}

/* ---- busytarget ---- */

static double now_s(void) {
    return MPI_Wtime();
}

static void test_busytarget(void) {
    OU_CHECK(ou_size >= 2, "needs 2 ranks");
    const double busy = (double)env_long("OSC_BUSY_MS", 600) / 1000.0;
    const size_t sizes[] = {8, 64, 512, 2048};
    const int rounds = 50;
    const size_t span = 2048 * rounds * 4;
    uint8_t *winbuf = calloc(1, span), *src = malloc(2048), *dst = malloc(2048);
    OU_CHECK(winbuf && src && dst, "out of memory");
    MPI_Win win = make_win(winbuf, span);
    /* No lock traffic: osc/rdma's locks are atomics the target executes. */
    OU_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    if (0 == ou_rank) { /* a first put: the single copy to rank 1 is probed */
        OU_MPI(MPI_Put(src, 8, MPI_BYTE, 1, 0, 8, MPI_BYTE, win));
        OU_MPI(MPI_Win_flush(1, win));
    }
    OU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (1 == ou_rank) {
        const double until = now_s() + busy;
        volatile double x = 1.0;
        while (now_s() < until) { /* computing, no MPI call that progresses */
            x = x * 1.0000001 + 1e-9;
        }
    } else if (0 == ou_rank) {
        const double t0 = now_s();
        size_t off = 0;
        for (int r = 0; r < rounds; ++r) {
            for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
                const size_t n = sizes[k];
                const unsigned seed = (unsigned)(r * 16 + k);
                ou_fill(src, n, seed);
                OU_MPI(MPI_Put(src, (int)n, MPI_BYTE, 1, (MPI_Aint)off, (int)n, MPI_BYTE, win));
                OU_MPI(MPI_Win_flush(1, win));
                memset(dst, 0, n);
                OU_MPI(MPI_Get(dst, (int)n, MPI_BYTE, 1, (MPI_Aint)off, (int)n, MPI_BYTE, win));
                OU_MPI(MPI_Win_flush(1, win));
                const size_t bad = ou_verify(dst, n, seed);
                OU_CHECK(bad == n, "get of %zu bytes at %zu: byte %zu wrong", n, off, bad);
                off += 2048;
            }
        }
        const double took = now_s() - t0;
        printf("busytarget: %d puts and gets took %.1f ms while the target computed %.0f ms\n",
               rounds * 4, 1e3 * took, 1e3 * busy);
        if (0 == env_long("OSC_BUSY_UNTIMED", 0)) {
            OU_CHECK(took < busy / 3, "the puts and gets waited for the busy target: %.1f ms",
                     1e3 * took);
        }
    }
    OU_MPI(MPI_Win_unlock_all(win));
    OU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (1 == ou_rank) { /* every put landed once, where it was aimed */
        size_t off = 0;
        for (int r = 0; r < rounds; ++r) {
            for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
                const size_t bad = ou_verify(winbuf + off, sizes[k], (unsigned)(r * 16 + k));
                OU_CHECK(bad == sizes[k], "put of %zu bytes at %zu: byte %zu wrong", sizes[k], off,
                         bad);
                off += 2048;
            }
        }
    }
    OU_MPI(MPI_Win_free(&win));
    free(winbuf);
    free(src);
    free(dst);
}

int main(int argc, char **argv) {
    ou_init(&argc, &argv);
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"putget", test_putget},   {"atomics", test_atomics},   {"lock", test_lock},
        {"sync", test_sync},       {"dynamic", test_dynamic},   {"accumulate", test_accumulate},
        {"realloc", test_realloc}, {"accflush", test_accflush}, {"busytarget", test_busytarget}};
    const size_t ntests = sizeof(tests) / sizeof(tests[0]);
    char list[256];
    snprintf(list, sizeof(list), "%s", argc > 1 ? argv[1] : "");
    int ran = 0;
    char *save = NULL;
    for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (size_t i = 0; i < ntests; ++i) {
            if (0 == strcmp(name, tests[i].name) || 0 == strcmp(name, "all")) {
                ou_test = tests[i].name;
                tests[i].fn();
                found = 1;
                ++ran;
                MPI_Barrier(MPI_COMM_WORLD);
                if (0 == ou_rank && 0 != strcmp(name, "all")) {
                    printf("OK %s\n", tests[i].name);
                    fflush(stdout);
                }
            }
        }
        ou_test = name;
        OU_CHECK(found, "unknown test");
    }
    ou_test = argc > 1 ? argv[1] : "";
    OU_CHECK(ran > 0, "no test named");
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == ou_rank && (argc < 2 || NULL != strchr(argv[1], ',') || 0 == strcmp(argv[1], "all"))) {
        printf("OK %s\n", argc > 1 ? argv[1] : "");
    }
    MPI_Finalize();
    return 0;
}
