/*
 * Collective latency benchmarks.
 *
 *   -t allreduce  MPI_Allreduce of size/4 MPI_INTs with MPI_SUM
 *   -t alltoall   MPI_Alltoall with `size` bytes per peer
 *
 * Each rank times its own loop; the row shows the average over ranks of the
 * per-call latency (us) followed by the minimum and maximum over ranks.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const modes[] = {"allreduce", "alltoall", NULL};

static const struct bench_prog prog = {
    .name = "bench_coll",
    .modes = modes,
    .default_mode = "allreduce",
    .default_min = 4,
    .default_max = (size_t)1024 * 1024,
    .default_iters = 1000,
    .default_warmup = 100,
    .default_window = 1,
};

struct ctx {
    struct bench_opts o;
    int alltoall;
    int rank;
    int np;
    long errors;
    unsigned char *sbuf;
    unsigned char *rbuf;
};

/* Input element j of `rank` in iteration i of an allreduce. */
static int red_input(int rank, size_t j, long i) {
    return (rank + 1) + (int)(j % 11) + (int)(i % 5);
}

static void allreduce_iter(struct ctx *c, size_t size, long i) {
    int n = (int)(size / sizeof(int));
    int *in = (int *)c->sbuf;
    int *out = (int *)c->rbuf;
    if (c->o.verify) {
        for (int j = 0; j < n; j++) {
            in[j] = red_input(c->rank, (size_t)j, i);
        }
        memset(out, 0, (size_t)n * sizeof(int));
    }
    MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (c->o.verify) {
        long bad = 0;
        for (int j = 0; j < n; j++) {
            int want = 0;
            for (int r = 0; r < c->np; r++) {
                want += red_input(r, (size_t)j, i);
            }
            if (out[j] != want) {
                if (bad == 0) {
                    fprintf(stderr, "rank %d: allreduce element %d = %d, expected %d\n", c->rank, j,
                            out[j], want);
                }
                bad++;
            }
        }
        c->errors += bad != 0;
    }
}

static uint32_t a2a_seed(size_t size, long i, int src, int dst) {
    return bench_seed((uint32_t)size ^ (uint32_t)(i * 7919), (uint32_t)src, (uint32_t)dst);
}

static void alltoall_iter(struct ctx *c, size_t size, long i) {
    if (c->o.verify) {
        for (int d = 0; d < c->np; d++) {
            bench_fill(c->sbuf + (size_t)d * size, size, a2a_seed(size, i, c->rank, d));
        }
        memset(c->rbuf, 0, size * (size_t)c->np);
    }
    MPI_Alltoall(c->sbuf, (int)size, MPI_BYTE, c->rbuf, (int)size, MPI_BYTE, MPI_COMM_WORLD);
    if (c->o.verify) {
        for (int s = 0; s < c->np; s++) {
            c->errors += bench_check(c->rbuf + (size_t)s * size, size,
                                     a2a_seed(size, i, s, c->rank), "alltoall block") != 0;
        }
    }
}

static void run(struct ctx *c) {
    const char *name = c->alltoall ? "alltoall" : "allreduce";
    bench_print_header(&c->o, name, "us", "size,avg_us,min_us,max_us", NULL);
    for (size_t size = c->o.min_size; size != 0; size = bench_next_size(&c->o, size)) {
        if (!c->alltoall && (size < sizeof(int) || size % sizeof(int) != 0)) {
            continue; /* allreduce works on whole ints */
        }
        long iters = bench_iters_for(&c->o, size);
        long warm = bench_warmup_for(&c->o, size, 1);
        for (long i = 0; i < warm; i++) {
            c->alltoall ? alltoall_iter(c, size, i) : allreduce_iter(c, size, i);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            c->alltoall ? alltoall_iter(c, size, warm + i) : allreduce_iter(c, size, warm + i);
        }
        double us = (MPI_Wtime() - t0) * 1e6 / (double)iters;
        double sum = 0.0;
        double lo = 0.0;
        double hi = 0.0;
        MPI_Reduce(&us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&us, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&us, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (c->rank == 0) {
            printf("%zu %.3f %.3f %.3f\n", size, sum / c->np, lo, hi);
        }
        bench_size_done();
    }
}

int main(int argc, char **argv) {
    struct ctx c;
    memset(&c, 0, sizeof c);
    bench_start(&argc, &argv, &prog, &c.o, &c.rank, &c.np);
    c.alltoall = strcmp(c.o.mode, "alltoall") == 0;

    size_t max = c.o.max_size > 0 ? c.o.max_size : 1;
    size_t bytes = c.alltoall ? max * (size_t)c.np : max;
    c.sbuf = bench_malloc(bytes);
    c.rbuf = bench_malloc(bytes);
    memset(c.sbuf, 1, bytes);

    run(&c);

    long errors = bench_verify_report(&c.o, c.errors, c.o.mode);
    free(c.sbuf);
    free(c.rbuf);
    MPI_Finalize();
    return errors == 0 ? 0 : 1;
}
