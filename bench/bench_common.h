/*
 * Shared helpers for the EFA component benchmark programs.
 *
 * Every program prints one header line
 *     # bench=<name> unit=<unit> np=<ranks> ...
 * followed by one row per message size:
 *     <size> <value> [extra columns...]
 * so that bench/runner.py can parse the output without knowing the program.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

/* Iterations are divided by this factor above the large-message threshold. */
#define BENCH_LARGE_DIVISOR 10

/* Least warm-up of the first (small) size of a sweep, in messages (or
 * operations); see bench_warmup_for. */
#define BENCH_FIRST_WARMUP 2048

struct bench_opts {
    const char *mode;    /* -t: which test of the program's family */
    size_t min_size;     /* -m */
    size_t max_size;     /* -M */
    size_t factor;       /* -f: size multiplier between rows (default 2) */
    long iters;          /* -i: timed iterations for small messages */
    long warmup;         /* -x: untimed warm-up iterations for small messages */
    long window;         /* -w: outstanding operations per window */
    size_t large_thresh; /* -L: above this size iterations and warm-up are divided */
    int verify;          /* -v: check the moved data, exit non-zero on mismatch */
    int quiet;           /* -q: do not print the header comment lines */
};

/* Description of a program for the usage text and the defaults. */
struct bench_prog {
    const char *name;         /* program name, e.g. "bench_pt2pt" */
    int min_ranks;            /* bench_start stops a job of fewer processes (0: any) */
    const char *const *modes; /* NULL-terminated list of accepted -t values */
    const char *default_mode; /* used when -t is not given */
    size_t default_min;       /* default -m */
    size_t default_max;       /* default -M */
    long default_iters;       /* default -i */
    long default_warmup;      /* default -x */
    long default_window;      /* default -w */
};

/*
 * Parse the command line. On error or -h, rank 0 prints the usage and the
 * function calls MPI_Finalize and exit(). Must be called after MPI_Init.
 */
void bench_parse_args(int argc, char **argv, const struct bench_prog *prog,
                      struct bench_opts *opts);

/* Timed and warm-up iteration counts for one message size; per_iter: the
 * messages (or operations) one iteration of the caller moves per process,
 * which sets how many iterations the first size's warm-up needs. */
long bench_iters_for(const struct bench_opts *opts, size_t size);
long bench_warmup_for(const struct bench_opts *opts, size_t size, long per_iter);

/* Next size of the sweep; returns 0 when the sweep is finished. */
size_t bench_next_size(const struct bench_opts *opts, size_t size);

/*
 * Print the header line (rank 0 only). extra may be NULL or a string of
 * additional key=value pairs.
 */
void bench_print_header(const struct bench_opts *opts, const char *bench, const char *unit,
                        const char *columns, const char *extra);

/* Allocate page-aligned memory or abort the job. */
void *bench_malloc(size_t bytes);

/*
 * Deterministic data pattern: the byte at offset i of a message identified by
 * (seed) is a function of both, so that misplaced, stale and truncated data
 * are all detected.
 */
void bench_fill(void *buf, size_t bytes, uint32_t seed);

/*
 * Check a buffer against bench_fill(seed). Returns the number of bad bytes
 * (0 when the buffer is correct). On mismatch a diagnostic naming what is
 * printed to stderr.
 */
size_t bench_check(const void *buf, size_t bytes, uint32_t seed, const char *what);

/* Combine a few integers into a pattern seed. */
uint32_t bench_seed(uint32_t a, uint32_t b, uint32_t c);

/*
 * Collective verdict of the verification: every rank passes its local count
 * of errors; returns the global count. Rank 0 prints a summary line.
 */
long bench_verify_report(const struct bench_opts *opts, long local_errors, const char *bench);

/* Abort the whole job with a message (used when MPI calls report errors). */
void bench_die(const char *fmt, ...);

/*
 * What the program is doing, for error messages ("MPI_Win_create",
 * "put_lat 4096 B", ...). Programs update it at interesting points.
 */
extern const char *bench_where;

/*
 * Error handlers that print "rank N: MPI error in <bench_where>: <error
 * string>" straight to stderr and abort. Open MPI's own fatal-error message
 * travels through mpirun's help relay, which Open MPI 4.1 often loses.
 * bench_install_errhandlers() covers MPI_COMM_WORLD (call it right after
 * MPI_Init); bench_win_errhandler() a window.
 */
void bench_install_errhandlers(void);
void bench_win_errhandler(MPI_Win win);

/*
 * The end of one size's measurement: the row rank 0 printed is out
 * (flushed), and every rank is done with this size before the next starts.
 */
void bench_size_done(void);

/*
 * The start every benchmark program shares: MPI_Init, rank and size,
 * MPI_COMM_WORLD's error handler, the command line, the number of processes
 * the program needs; bench_where is then the mode (-t).
 */
void bench_start(int *argc, char ***argv, const struct bench_prog *prog, struct bench_opts *opts,
                 int *rank, int *np);

#endif /* BENCH_COMMON_H */
