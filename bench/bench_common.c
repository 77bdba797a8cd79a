#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(const struct bench_prog *prog) {
    fprintf(stderr,
            "usage: %s [-t mode] [-m min] [-M max] [-f factor] [-i iters] [-x warmup]\n"
            "          [-w window] [-L large] [-v] [-q] [-h]\n"
            "  -t mode    test to run:",
            prog->name);
    for (const char *const *m = prog->modes; *m != NULL; m++) {
        fprintf(stderr, " %s", *m);
    }
    fprintf(stderr,
            " (default %s)\n"
            "  -m min     smallest message size in bytes, K/M suffix allowed (default %zu)\n"
            "  -M max     largest message size (default %zu)\n"
            "  -f factor  size multiplier between rows (default 2)\n"
            "  -i iters   timed iterations per size (default %ld)\n"
            "  -x warmup  untimed warm-up iterations per size (default %ld; the first\n"
            "             size's warm-up moves at least %d messages unless -x 0)\n"
            "  -w window  operations in flight per window (default %ld)\n"
            "  -L large   above this size iterations and warm-up are divided by %d\n"
            "             (default 8K, 0 = never)\n"
            "  -v         verify the data moved; exit non-zero on mismatch\n"
            "  -q         do not print the header line\n"
            "Output: '# bench=... unit=...' header, then one 'size value ...' row per size.\n",
            prog->default_mode, prog->default_min, prog->default_max, prog->default_iters,
            prog->default_warmup, BENCH_FIRST_WARMUP, prog->default_window, BENCH_LARGE_DIVISOR);
}

static int parse_size(const char *text, size_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || text[0] == '-') {
        return -1;
    }
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        v *= 1024ULL;
        end++;
        break;
    case 'm':
    case 'M':
        v *= 1024ULL * 1024ULL;
        end++;
        break;
    case 'g':
    case 'G':
        v *= 1024ULL * 1024ULL * 1024ULL;
        end++;
        break;
    default:
        return -1;
    }
    if (*end != '\0') {
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static int parse_long(const char *text, long min, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min) {
        return -1;
    }
    *out = v;
    return 0;
}

static void fail_usage(const struct bench_prog *prog, int rank, const char *msg, const char *arg) {
    if (rank == 0) {
        if (msg != NULL) {
            fprintf(stderr, "%s: %s%s%s\n", prog->name, msg, arg ? ": " : "", arg ? arg : "");
        }
        usage(prog);
    }
    MPI_Finalize();
    exit(msg != NULL ? 2 : 0);
}

void bench_parse_args(int argc, char **argv, const struct bench_prog *prog,
                      struct bench_opts *opts) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    opts->mode = prog->default_mode;
    opts->min_size = prog->default_min;
    opts->max_size = prog->default_max;
    opts->factor = 2;
    opts->iters = prog->default_iters;
    opts->warmup = prog->default_warmup;
    opts->window = prog->default_window;
    opts->large_thresh = 8192;
    opts->verify = 0;
    opts->quiet = 0;

    int c;
    opterr = 0;
    while ((c = getopt(argc, argv, "t:m:M:f:i:x:w:L:vqh")) != -1) {
        switch (c) {
        case 't':
            opts->mode = optarg;
            break;
        case 'm':
            if (parse_size(optarg, &opts->min_size) != 0) {
                fail_usage(prog, rank, "bad -m", optarg);
            }
            break;
        case 'M':
            if (parse_size(optarg, &opts->max_size) != 0) {
                fail_usage(prog, rank, "bad -M", optarg);
            }
            break;
        case 'f':
            if (parse_size(optarg, &opts->factor) != 0 || opts->factor < 2) {
                fail_usage(prog, rank, "bad -f (must be >= 2)", optarg);
            }
            break;
        case 'i':
            if (parse_long(optarg, 1, &opts->iters) != 0) {
                fail_usage(prog, rank, "bad -i", optarg);
            }
            break;
        case 'x':
            if (parse_long(optarg, 0, &opts->warmup) != 0) {
                fail_usage(prog, rank, "bad -x", optarg);
            }
            break;
        case 'w':
            if (parse_long(optarg, 1, &opts->window) != 0) {
                fail_usage(prog, rank, "bad -w", optarg);
            }
            break;
        case 'L':
            if (parse_size(optarg, &opts->large_thresh) != 0) {
                fail_usage(prog, rank, "bad -L", optarg);
            }
            break;
        case 'v':
            opts->verify = 1;
            break;
        case 'q':
            opts->quiet = 1;
            break;
        case 'h':
            fail_usage(prog, rank, NULL, NULL);
            break;
        default:
            fail_usage(prog, rank, "unknown option or missing argument", argv[optind - 1]);
        }
    }
    if (optind < argc) {
        fail_usage(prog, rank, "unexpected argument", argv[optind]);
    }
    int known = 0;
    for (const char *const *m = prog->modes; *m != NULL; m++) {
        if (strcmp(*m, opts->mode) == 0) {
            known = 1;
        }
    }
    if (!known) {
        fail_usage(prog, rank, "unknown mode", opts->mode);
    }
    if (opts->min_size > opts->max_size) {
        fail_usage(prog, rank, "min size larger than max size", NULL);
    }
}

long bench_iters_for(const struct bench_opts *opts, size_t size) {
    if (opts->large_thresh > 0 && size > opts->large_thresh) {
        long n = opts->iters / BENCH_LARGE_DIVISOR;
        return n > 0 ? n : 1;
    }
    return opts->iters;
}

long bench_warmup_for(const struct bench_opts *opts, size_t size, long per_iter) {
    if (opts->large_thresh > 0 && size > opts->large_thresh) {
        return opts->warmup / BENCH_LARGE_DIVISOR;
    }
    /* The first size of a sweep also pays for what a transport sets up or
     * touches for the first time.  libfabric's shm provider, for one, walks
     * a ring of 1024 commands per direction and a completion ring: their
     * pages fault in over the first thousand messages (about 150 minor
     * faults per process), which a warm-up of 50 leaves inside the timed
     * loop (0.3-0.4 us more per message at the first size only).  The
     * floor counts messages: a windowed stream's iteration moves a window
     * of them (a fanout's, one per peer), and 2048 windows of 64 to two
     * peers took a stream over a slow provider most of a minute. */
    if (per_iter < 1) {
        per_iter = 1;
    }
    const long floor = (BENCH_FIRST_WARMUP + per_iter - 1) / per_iter;
    if (size == opts->min_size && opts->warmup > 0 && opts->warmup < floor) {
        return floor;
    }
    return opts->warmup;
}

size_t bench_next_size(const struct bench_opts *opts, size_t size) {
    size_t next = size == 0 ? 1 : size * opts->factor;
    if (next <= size || next > opts->max_size) {
        return 0;
    }
    return next;
}

void bench_print_header(const struct bench_opts *opts, const char *bench, const char *unit,
                        const char *columns, const char *extra) {
    int rank = 0;
    int np = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (rank != 0 || opts->quiet) {
        return;
    }
    printf("# bench=%s unit=%s np=%d iters=%ld warmup=%ld window=%ld verify=%d%s%s\n", bench, unit,
           np, opts->iters, opts->warmup, opts->window, opts->verify, extra ? " " : "",
           extra ? extra : "");
    printf("# columns=%s\n", columns);
    fflush(stdout);
}

void *bench_malloc(size_t bytes) {
    void *p = NULL;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) {
        page = 4096;
    }
    if (posix_memalign(&p, (size_t)page, bytes > 0 ? bytes : 1) != 0) {
        bench_die("cannot allocate %zu bytes", bytes);
    }
    memset(p, 0, bytes > 0 ? bytes : 1);
    return p;
}

uint32_t bench_seed(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t h = 2166136261u;
    uint32_t parts[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        h ^= parts[i];
        h *= 16777619u;
        h ^= h >> 15;
    }
    return h;
}

/* One byte of the pattern: a cheap mix of the seed and the offset. */
static inline unsigned char pattern_byte(uint32_t seed, size_t i) {
    uint32_t x = seed + (uint32_t)i * 2654435761u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return (unsigned char)x;
}

void bench_fill(void *buf, size_t bytes, uint32_t seed) {
    unsigned char *p = buf;
    for (size_t i = 0; i < bytes; i++) {
        p[i] = pattern_byte(seed, i);
    }
}

/*
 * Self-test of the verification: with BENCH_VERIFY_INJECT set in the
 * environment, every check expects a different first byte, so that
 * bench/tests/run-bench-tests.sh can see that a mismatch is reported and
 * makes the program exit non-zero.
 */
static int inject_mismatch(void) {
    static int cached = -1;
    if (cached < 0) {
        const char *v = getenv("BENCH_VERIFY_INJECT");
        cached = v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
    }
    return cached;
}

size_t bench_check(const void *buf, size_t bytes, uint32_t seed, const char *what) {
    const unsigned char *p = buf;
    size_t bad = 0;
    size_t first = 0;
    int inject = inject_mismatch();
    for (size_t i = 0; i < bytes; i++) {
        unsigned char want = pattern_byte(seed, i);
        if (inject && i == 0) {
            want ^= 0x01;
        }
        if (p[i] != want) {
            if (bad == 0) {
                first = i;
            }
            bad++;
        }
    }
    if (bad > 0) {
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        fprintf(stderr,
                "rank %d: verification failed: %s: %zu of %zu bytes wrong, first at offset %zu "
                "(got 0x%02x)%s\n",
                rank, what, bad, bytes, first, p[first], inject ? " [BENCH_VERIFY_INJECT]" : "");
    }
    return bad;
}

long bench_verify_report(const struct bench_opts *opts, long local_errors, const char *bench) {
    long total = 0;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&local_errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && opts->verify) {
        if (total == 0) {
            printf("# verify=ok bench=%s\n", bench);
        } else {
            printf("# verify=FAILED bench=%s errors=%ld\n", bench, total);
        }
        fflush(stdout);
    }
    return total;
}

void bench_die(const char *fmt, ...) {
    int rank = -1;
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rank %d: error: ", rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    if (initialized) {
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    exit(3);
}

const char *bench_where = "MPI call";

static void report_mpi_error(int code) {
    char msg[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    int rank = -1;
    if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS) {
        snprintf(msg, sizeof msg, "error code %d", code);
    }
    msg[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING] = '\0';
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "rank %d: MPI error in %s: %s\n", rank, bench_where, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 5);
}

static void comm_error(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    report_mpi_error(*code);
}

static void win_error(MPI_Win *win, int *code, ...) {
    (void)win;
    report_mpi_error(*code);
}

void bench_install_errhandlers(void) {
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(comm_error, &eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    MPI_Errhandler_free(&eh);
}

void bench_win_errhandler(MPI_Win win) {
    MPI_Errhandler eh;
    MPI_Win_create_errhandler(win_error, &eh);
    MPI_Win_set_errhandler(win, eh);
    MPI_Errhandler_free(&eh);
}

void bench_size_done(void) {
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
}

void bench_start(int *argc, char ***argv, const struct bench_prog *prog, struct bench_opts *opts,
                 int *rank, int *np) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, np);
    bench_install_errhandlers();
    bench_parse_args(*argc, *argv, prog, opts);
    if (*np < prog->min_ranks) {
        bench_die("%s needs at least %d ranks", prog->name, prog->min_ranks);
    }
    bench_where = opts->mode; /* what an MPI error is said to have happened in from here on */
}
