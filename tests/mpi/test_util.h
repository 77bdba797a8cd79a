/*
 * Shared helpers for the MPI test programs in tests/mpi.
 *
 * Every program includes this header first. It provides:
 *   - start-up/shutdown (tu_init, tu_init_thread, tu_ok) with an error
 *     handler on MPI_COMM_WORLD that turns any MPI error into a FAIL line,
 *   - tu_fail()/TU_ASSERT() which print "FAIL <name>: <what> (rank R)" and
 *     call MPI_Abort,
 *   - a watchdog (SIGALRM) so that every program is bounded in time,
 *   - deterministic data patterns (tu_fill/tu_verify) keyed by a seed so
 *     that stale or misplaced data is detected,
 *   - small utilities: size and option parsing, sleeping, allocation.
 *
 * The watchdog length comes from the environment variable MPI_TEST_TIMEOUT
 * (seconds, 0 disables); the default is TU_DEFAULT_TIMEOUT. It is armed
 * before MPI initialization and re-armed (full length) right after it.
 */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#define _POSIX_C_SOURCE 200809L

#include <mpi.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TU_DEFAULT_TIMEOUT 300

#if defined(__GNUC__)
#define TU_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TU_NORETURN __attribute__((noreturn))
#define TU_UNUSED __attribute__((unused))
#else
#define TU_PRINTF(a, b)
#define TU_NORETURN
#define TU_UNUSED
#endif
/* Filling and checking message buffers is not seen by ThreadSanitizer
 * (tests/run-tsan-tests.sh): a buffer reaches the test again through MPI's
 * request completion, whose atomics TSan cannot see, so every word would
 * read as a race with the thread that progressed the transfer.  Suppressed
 * reports are no answer: TSan still rebuilds both stacks of each before it
 * checks the suppression, and for a 256 KiB buffer that took minutes. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)
#define TU_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define TU_NO_TSAN
#endif
/* A message buffer the test touches again after the MPI call that used it
 * returned: mtl_efa's ThreadSanitizer build releases the caller's buffer
 * as it hands the request back (mtl_efa_module.c), and acquiring it here
 * orders the test's next write (a memset poisoning a receive buffer) after
 * the copy that filled it in another thread's progress. */
#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif
#ifdef TU_TSAN
void __tsan_acquire(void *addr);
#define tu_tsan_acquire(p) __tsan_acquire((void *)(p))
#else
#define tu_tsan_acquire(p) ((void)(p))
#endif

static const char *tu_name = "test";
static int tu_rank = -1;
static int tu_size = 0;
static char tu_alarm_msg[256];
static size_t tu_alarm_len;

/* Print "FAIL <name>: <message> (rank R)" and abort the whole job. */
static TU_PRINTF(1, 2) TU_NORETURN TU_UNUSED void tu_fail(const char *fmt, ...) {
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("FAIL %s: %s (rank %d)\n", tu_name, msg, tu_rank);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1); /* not reached */
}

#define TU_ASSERT(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            tu_fail(__VA_ARGS__);                                                                  \
    } while (0)

/* Error handler installed on MPI_COMM_WORLD (inherited by dup/split). */
static void tu_errhandler(MPI_Comm *comm, int *code, ...) {
    char str[MPI_MAX_ERROR_STRING];
    int len = 0;

    (void)comm;
    if (MPI_Error_string(*code, str, &len) != MPI_SUCCESS)
        snprintf(str, sizeof(str), "unknown");
    tu_fail("MPI call returned error %d: %s", *code, str);
}

static void tu_alarm_handler(int sig) {
    struct timespec ts = {0, 500000000L};
    ssize_t rc;

    (void)sig;
    rc = write(STDOUT_FILENO, tu_alarm_msg, tu_alarm_len);
    (void)rc;
    nanosleep(&ts, NULL); /* let the launcher forward the message before we exit */
    _exit(1);
}

static TU_UNUSED void tu_watchdog_start(void) {
    const char *env = getenv("MPI_TEST_TIMEOUT");
    long secs = TU_DEFAULT_TIMEOUT;
    struct sigaction sa;

    if (env && *env)
        secs = strtol(env, NULL, 10);
    if (secs <= 0)
        return;
    if (tu_rank < 0)
        snprintf(tu_alarm_msg, sizeof(tu_alarm_msg),
                 "FAIL %s: watchdog timeout after %ld s in MPI initialization (pid %ld)\n", tu_name,
                 secs, (long)getpid());
    else
        snprintf(tu_alarm_msg, sizeof(tu_alarm_msg),
                 "FAIL %s: watchdog timeout after %ld s, test hung (rank %d)\n", tu_name, secs,
                 tu_rank);
    tu_alarm_len = strlen(tu_alarm_msg);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = tu_alarm_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)secs);
}

static TU_UNUSED void tu_setup(const char *name) {
    MPI_Errhandler eh;

    tu_name = name;
    MPI_Comm_rank(MPI_COMM_WORLD, &tu_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &tu_size);
    MPI_Comm_create_errhandler(tu_errhandler, &eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    MPI_Errhandler_free(&eh);
    setvbuf(stdout, NULL, _IOLBF, 0);
    tu_watchdog_start();
}

static TU_UNUSED void tu_init(int *argc, char ***argv, const char *name) {
    tu_name = name;
    tu_watchdog_start(); /* MPI_Init itself may hang */
    MPI_Init(argc, argv);
    tu_setup(name);
}

/* Returns the provided thread level. */
static TU_UNUSED int tu_init_thread(int *argc, char ***argv, const char *name, int required) {
    int provided = MPI_THREAD_SINGLE;

    tu_name = name;
    tu_watchdog_start(); /* MPI_Init_thread itself may hang */
    MPI_Init_thread(argc, argv, required, &provided);
    tu_setup(name);
    return provided;
}

/* All ranks call this on success: rank 0 prints "ok <name> <details>". */
static TU_PRINTF(1, 2) TU_UNUSED void tu_ok(const char *fmt, ...) {
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    MPI_Barrier(MPI_COMM_WORLD);
    alarm(0);
    if (tu_rank == 0)
        printf("ok %s %s\n", tu_name, msg);
    fflush(stdout);
    MPI_Finalize();
}

/* ---- data patterns ---------------------------------------------------- */

static inline uint64_t tu_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Combine up to four values into a pattern seed. */
static inline uint64_t tu_seed(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    return tu_mix64(tu_mix64(tu_mix64(tu_mix64(a) ^ b) ^ c) ^ d);
}

/* The 8-byte word at word index w of the pattern for seed. */
static inline uint64_t tu_word(uint64_t seed, size_t w) {
    return tu_mix64(seed ^ ((uint64_t)w * 0xd6e8feb86659fd93ULL));
}

static inline uint8_t tu_byte(uint64_t seed, size_t i) {
    uint64_t w = tu_word(seed, i / 8);
    return (uint8_t)(w >> (8 * (i % 8)));
}

static TU_UNUSED TU_NO_TSAN void tu_fill(void *buf, size_t len, uint64_t seed) {
    unsigned char *p = buf;
    size_t nw = len / 8, i;

    for (i = 0; i < nw; i++) {
        uint64_t w = tu_word(seed, i);
        memcpy(p + 8 * i, &w, 8);
    }
    for (i = nw * 8; i < len; i++)
        p[i] = tu_byte(seed, i);
}

/* Returns the offset of the first byte that differs from the pattern, or len. */
static TU_UNUSED TU_NO_TSAN size_t tu_check(const void *buf, size_t len, uint64_t seed) {
    const unsigned char *p = buf;
    size_t nw = len / 8, i;

    for (i = 0; i < nw; i++) {
        uint64_t w = tu_word(seed, i), got;
        memcpy(&got, p + 8 * i, 8);
        if (got != w)
            break;
    }
    for (i *= 8; i < len; i++) {
        if (p[i] != tu_byte(seed, i))
            return i;
    }
    return len;
}

/* Check buf against the pattern; on mismatch fail with a description. */
static TU_UNUSED void tu_verify(const void *buf, size_t len, uint64_t seed, const char *what) {
    size_t bad = tu_check(buf, len, seed);

    if (bad != len)
        tu_fail("%s: data mismatch at byte %zu of %zu: expected 0x%02x got 0x%02x", what, bad, len,
                tu_byte(seed, bad), ((const unsigned char *)buf)[bad]);
}

/* Check a completed receive: its status names the expected source, tag and
 * byte count, and the buffer holds the pattern. */
static TU_UNUSED void tu_verify_recv(const void *buf, const MPI_Status *st, int src, int tag,
                                     size_t size, uint64_t seed, const char *what) {
    int count;

    MPI_Get_count(st, MPI_BYTE, &count);
    TU_ASSERT(st->MPI_SOURCE == src && st->MPI_TAG == tag && (size_t)count == size,
              "%s: expected source %d tag %d count %zu, got source %d tag %d count %d", what, src,
              tag, size, st->MPI_SOURCE, st->MPI_TAG, count);
    tu_verify(buf, size, seed, what);
}

/* Poison value written to receive buffers before a receive. */
#define TU_POISON 0xa5

/* Fail unless len bytes at buf all equal val (untouched guard area). */
static TU_UNUSED void tu_verify_const(const void *buf, size_t len, unsigned char val,
                                      const char *what) {
    const unsigned char *p = buf;
    size_t i;

    for (i = 0; i < len; i++) {
        if (p[i] != val)
            tu_fail("%s: byte %zu of %zu was modified: expected 0x%02x got 0x%02x", what, i, len,
                    val, p[i]);
    }
}

/* Receive size bytes from peer with tag on MPI_COMM_WORLD into buf, poisoned
 * first so that bytes the receive did not write are seen, then check the
 * status and the pattern. */
static TU_UNUSED void tu_recv_verify(void *buf, size_t size, int peer, int tag, uint64_t seed,
                                     const char *what) {
    MPI_Status st;

    memset(buf, TU_POISON, size);
    MPI_Recv(buf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
    tu_verify_recv(buf, &st, peer, tag, size, seed, what);
}

/* ---- misc ------------------------------------------------------------- */

static TU_UNUSED void *tu_malloc(size_t len) {
    void *p = malloc(len ? len : 1);

    if (!p)
        tu_fail("out of memory allocating %zu bytes", len);
    return p;
}

static TU_UNUSED void tu_sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Parse "123", "4k", "64M", "1G" (binary multiples). Exits on bad input. */
static TU_UNUSED size_t tu_parse_size(const char *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 0);

    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        end++;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    if (end == s || *end != '\0') {
        if (tu_rank <= 0)
            fprintf(stderr, "%s: bad size '%s'\n", tu_name, s);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return (size_t)v;
}

static TU_UNUSED long tu_parse_long(const char *s) {
    char *end;
    long v = strtol(s, &end, 0);

    if (end == s || *end != '\0' || v < 0) {
        if (tu_rank <= 0)
            fprintf(stderr, "%s: bad number '%s'\n", tu_name, s);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return v;
}

/* Print usage at rank 0 and leave cleanly (for -h) or with an error. */
static TU_UNUSED TU_NORETURN void tu_usage(const char *usage, int bad) {
    if (tu_rank == 0)
        fprintf(bad ? stderr : stdout, "usage: %s %s\n", tu_name, usage);
    if (bad)
        MPI_Abort(MPI_COMM_WORLD, 2);
    alarm(0);
    MPI_Finalize();
    exit(0);
}

/* The command line of the programs whose options are at most -n COUNT and
 * -s SIZE (pass NULL for the one a program does not take), and -h. */
static TU_UNUSED void tu_parse_count_size(int argc, char **argv, const char *usage, int *count,
                                          size_t *size) {
    const char *optstring = count ? (size ? "n:s:h" : "n:h") : (size ? "s:h" : "h");
    int opt;

    while ((opt = getopt(argc, argv, optstring)) != -1) {
        switch (opt) {
        case 'n':
            *count = (int)tu_parse_long(optarg);
            break;
        case 's':
            *size = tu_parse_size(optarg);
            break;
        case 'h':
            tu_usage(usage, 0);
        default:
            tu_usage(usage, 1);
        }
    }
}

/* Partner in the even/odd pairing (0<->1, 2<->3, ...), or -1 for the odd one out. */
static TU_UNUSED int tu_pair_partner(void) {
    int p = tu_rank ^ 1;

    return p < tu_size ? p : -1;
}

/* Human-readable size for messages. */
static TU_UNUSED const char *tu_fmt_size(size_t n, char *buf, size_t len) {
    if (n >= (1u << 20) && n % (1u << 20) == 0)
        snprintf(buf, len, "%zuM", n >> 20);
    else if (n >= 1024 && n % 1024 == 0)
        snprintf(buf, len, "%zuK", n >> 10);
    else
        snprintf(buf, len, "%zu", n);
    return buf;
}

#endif /* TEST_UTIL_H */
