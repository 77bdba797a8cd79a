/*
 * One-sided (RMA) benchmarks, passive target.
 *
 * Every rank exposes a malloc'd buffer with MPI_Win_create. Rank 0 is the
 * origin and rank 1 the target; the target only waits in a barrier. For each
 * message size rank 0 takes MPI_Win_lock(MPI_LOCK_SHARED, 1), runs the
 * warm-up and the timed loop, and releases the lock.
 *
 *   -t put_lat  MPI_Put + MPI_Win_flush per operation; value = us per operation
 *   -t get_lat  MPI_Get + MPI_Win_flush per operation; value = us
 *   -t put_bw   a window of MPI_Put then one flush; value = MB/s
 *   -t get_bw   a window of MPI_Get then one flush; value = MB/s
 *   -t acc_lat  MPI_Accumulate (MPI_INT, MPI_SUM) + flush; value = us
 *   -t fop_lat  MPI_Fetch_and_op (int64, MPI_SUM) + flush; one row, size 8
 *   -t cas_lat  MPI_Compare_and_swap (int64) + flush; one row, size 8
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOT_BYTES_CAP ((size_t)64 * 1024 * 1024)
#define VERIFY_BYTES_CAP ((size_t)1024 * 1024 * 1024)

static const char *const modes[] = {"put_lat", "get_lat", "put_bw",  "get_bw",
                                    "acc_lat", "fop_lat", "cas_lat", NULL};

static const struct bench_prog prog = {
    .name = "bench_rma",
    .min_ranks = 2,
    .modes = modes,
    .default_mode = "put_lat",
    .default_min = 1,
    .default_max = (size_t)4 * 1024 * 1024,
    .default_iters = 1000,
    .default_warmup = 100,
    .default_window = 64,
};

enum rma_kind { PUT_LAT, GET_LAT, PUT_BW, GET_BW, ACC_LAT, FOP_LAT, CAS_LAT };

struct ctx {
    struct bench_opts o;
    enum rma_kind kind;
    int rank;
    int np;
    long errors;
    long nslots;      /* distinct target/origin slots for windowed tests */
    size_t slot_size; /* distance between slots */
    unsigned char *winbuf;
    size_t winbytes;
    unsigned char *obuf; /* origin buffers */
    unsigned char *rbuf; /* result buffers for get */
    MPI_Win win;
};

static const char *kind_name(enum rma_kind k) {
    return modes[k];
}

static int is_windowed(enum rma_kind k) {
    return k == PUT_BW || k == GET_BW;
}

/* Elements of an accumulate of `size` bytes. */
static int acc_count(size_t size) {
    return (int)(size / sizeof(int));
}

/* Contribution of one accumulate to element j. */
static int acc_value(size_t j) {
    return (int)(j % 13) + 1;
}

/* The target prepares its window memory for a size: zero, or a pattern for gets. */
static void target_prepare(struct ctx *c, size_t size) {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, c->rank, 0, c->win);
    memset(c->winbuf, 0, c->winbytes);
    if (c->kind == GET_LAT || c->kind == GET_BW) {
        long n = c->kind == GET_BW ? c->nslots : 1;
        for (long w = 0; w < n; w++) {
            bench_fill(c->winbuf + (size_t)w * c->slot_size, size,
                       bench_seed((uint32_t)size, 0xfeed, (uint32_t)w));
        }
    }
    MPI_Win_unlock(c->rank, c->win);
}

/* After the origin released its lock: the target checks what was written. */
static void target_verify(struct ctx *c, size_t size, long total_ops) {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, c->rank, 0, c->win);
    switch (c->kind) {
    case PUT_LAT:
        c->errors +=
            bench_check(c->winbuf, size, bench_seed((uint32_t)size, (uint32_t)(total_ops - 1), 0),
                        "put_lat target") != 0;
        break;
    case PUT_BW: {
        long last = total_ops - 1;
        for (long w = 0; w < c->nslots; w++) {
            c->errors += bench_check(c->winbuf + (size_t)w * c->slot_size, size,
                                     bench_seed((uint32_t)size, (uint32_t)last, (uint32_t)w),
                                     "put_bw target") != 0;
        }
        break;
    }
    case ACC_LAT: {
        const int *v = (const int *)c->winbuf;
        int n = acc_count(size);
        long bad = 0;
        for (int j = 0; j < n; j++) {
            if ((long)v[j] != total_ops * acc_value((size_t)j)) {
                if (bad == 0) {
                    fprintf(stderr, "rank 1: accumulate element %d = %d, expected %ld\n", j, v[j],
                            total_ops * acc_value((size_t)j));
                }
                bad++;
            }
        }
        c->errors += bad != 0;
        break;
    }
    case FOP_LAT:
    case CAS_LAT: {
        int64_t v;
        memcpy(&v, c->winbuf, sizeof v);
        if (v != (int64_t)total_ops) {
            fprintf(stderr, "rank 1: %s target = %lld, expected %ld\n", kind_name(c->kind),
                    (long long)v, total_ops);
            c->errors++;
        }
        break;
    }
    default:
        break;
    }
    MPI_Win_unlock(c->rank, c->win);
}

/* One timed unit of work of the origin; op is the global operation index. */
static void origin_op(struct ctx *c, size_t size, long op) {
    MPI_Win win = c->win;
    switch (c->kind) {
    case PUT_LAT:
        if (c->o.verify) {
            bench_fill(c->obuf, size, bench_seed((uint32_t)size, (uint32_t)op, 0));
        }
        MPI_Put(c->obuf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win);
        MPI_Win_flush(1, win);
        break;
    case GET_LAT:
        if (c->o.verify) {
            memset(c->rbuf, 0, size);
        }
        MPI_Get(c->rbuf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win);
        MPI_Win_flush(1, win);
        if (c->o.verify) {
            c->errors += bench_check(c->rbuf, size, bench_seed((uint32_t)size, 0xfeed, 0),
                                     "get_lat result") != 0;
        }
        break;
    case PUT_BW:
        for (long w = 0; w < c->o.window; w++) {
            long s = w % c->nslots;
            unsigned char *src = c->obuf + (size_t)s * c->slot_size;
            if (c->o.verify) {
                bench_fill(src, size, bench_seed((uint32_t)size, (uint32_t)op, (uint32_t)s));
            }
            MPI_Put(src, (int)size, MPI_BYTE, 1, (MPI_Aint)((size_t)s * c->slot_size), (int)size,
                    MPI_BYTE, win);
        }
        MPI_Win_flush(1, win);
        break;
    case GET_BW:
        for (long w = 0; w < c->o.window; w++) {
            long s = w % c->nslots;
            unsigned char *dst = c->rbuf + (size_t)s * c->slot_size;
            if (c->o.verify) {
                memset(dst, 0, size);
            }
            MPI_Get(dst, (int)size, MPI_BYTE, 1, (MPI_Aint)((size_t)s * c->slot_size), (int)size,
                    MPI_BYTE, win);
        }
        MPI_Win_flush(1, win);
        if (c->o.verify) {
            for (long s = 0; s < c->nslots; s++) {
                c->errors += bench_check(c->rbuf + (size_t)s * c->slot_size, size,
                                         bench_seed((uint32_t)size, 0xfeed, (uint32_t)s),
                                         "get_bw result") != 0;
            }
        }
        break;
    case ACC_LAT:
        MPI_Accumulate(c->obuf, acc_count(size), MPI_INT, 1, 0, acc_count(size), MPI_INT, MPI_SUM,
                       win);
        MPI_Win_flush(1, win);
        break;
    case FOP_LAT: {
        int64_t one = 1;
        int64_t old = -1;
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 1, 0, MPI_SUM, win);
        MPI_Win_flush(1, win);
        if (c->o.verify && old != (int64_t)op) {
            fprintf(stderr, "rank 0: fetch_and_op %ld fetched %lld\n", op, (long long)old);
            c->errors++;
        }
        break;
    }
    case CAS_LAT: {
        int64_t compare = op;
        int64_t swap = op + 1;
        int64_t old = -1;
        MPI_Compare_and_swap(&swap, &compare, &old, MPI_INT64_T, 1, 0, win);
        MPI_Win_flush(1, win);
        if (c->o.verify && old != (int64_t)op) {
            fprintf(stderr, "rank 0: compare_and_swap %ld found %lld\n", op, (long long)old);
            c->errors++;
        }
        break;
    }
    }
}

static void run(struct ctx *c) {
    int atomic = c->kind == FOP_LAT || c->kind == CAS_LAT;
    int bw = is_windowed(c->kind);
    bench_print_header(&c->o, kind_name(c->kind), bw ? "MB/s" : "us",
                       bw ? "size,mb_per_s" : "size,latency_us", "target=passive");

    size_t first = c->o.min_size;
    if (atomic) {
        first = sizeof(int64_t);
    }
    for (size_t size = first; size != 0; size = atomic ? 0 : bench_next_size(&c->o, size)) {
        if (c->kind == ACC_LAT && (size < sizeof(int) || size % sizeof(int) != 0)) {
            continue; /* accumulate works on whole ints */
        }
        long iters = bench_iters_for(&c->o, size);
        long warm = bench_warmup_for(&c->o, size, bw ? c->o.window : 1);
        if (c->rank == 1) {
            target_prepare(c, size);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (c->rank == 0) {
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, c->win);
            for (long i = 0; i < warm; i++) {
                origin_op(c, size, i);
            }
            double t0 = MPI_Wtime();
            for (long i = 0; i < iters; i++) {
                origin_op(c, size, warm + i);
            }
            double t = MPI_Wtime() - t0;
            MPI_Win_unlock(1, c->win);
            if (bw) {
                double bytes = (double)size * (double)c->o.window * (double)iters;
                printf("%zu %.3f\n", size, bytes / t / 1e6);
            } else {
                printf("%zu %.3f\n", size, t * 1e6 / (double)iters);
            }
        }
        bench_size_done();
        if (c->rank == 1 && c->o.verify) {
            target_verify(c, size, warm + iters);
        }
    }
}

int main(int argc, char **argv) {
    struct ctx c;
    memset(&c, 0, sizeof c);
    bench_start(&argc, &argv, &prog, &c.o, &c.rank, &c.np);
    for (int k = 0; modes[k] != NULL; k++) {
        if (strcmp(modes[k], c.o.mode) == 0) {
            c.kind = (enum rma_kind)k;
        }
    }

    size_t max = c.o.max_size;
    if (c.kind == FOP_LAT || c.kind == CAS_LAT) {
        max = sizeof(int64_t);
    }
    if (max < sizeof(int64_t)) {
        max = sizeof(int64_t);
    }
    c.slot_size = max;
    c.nslots = 1;
    if (is_windowed(c.kind)) {
        size_t cap = c.o.verify ? VERIFY_BYTES_CAP : SLOT_BYTES_CAP;
        size_t n = cap / max;
        if (c.o.verify && (size_t)c.o.window > n) {
            bench_die("verification needs window * max size <= %zu bytes", cap);
        }
        c.nslots = (size_t)c.o.window < n ? c.o.window : (long)(n > 0 ? n : 1);
    }
    c.winbytes = (size_t)c.nslots * c.slot_size;
    c.winbuf = bench_malloc(c.winbytes);
    c.obuf = bench_malloc(c.winbytes);
    c.rbuf = bench_malloc(c.winbytes);
    memset(c.obuf, 'o', c.winbytes);
    memset(c.rbuf, 'r', c.winbytes);
    if (c.kind == ACC_LAT) {
        int *v = (int *)c.obuf;
        for (size_t j = 0; j < c.winbytes / sizeof(int); j++) {
            v[j] = acc_value(j);
        }
    }

    bench_where = "MPI_Win_create";
    MPI_Win_create(c.winbuf, (MPI_Aint)c.winbytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &c.win);
    bench_win_errhandler(c.win);
    bench_where = c.o.mode;
    run(&c);
    MPI_Win_free(&c.win);

    long errors = bench_verify_report(&c.o, c.errors, c.o.mode);
    free(c.winbuf);
    free(c.obuf);
    free(c.rbuf);
    MPI_Finalize();
    return errors == 0 ? 0 : 1;
}
