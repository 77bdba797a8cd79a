/*
 * Helpers of the one-sided tests: failure reporting and data patterns.
 * Every failure prints "FAIL <test>: <what> (rank R)" and aborts the job.
 */
#ifndef OSC_UTIL_H
#define OSC_UTIL_H

#include <mpi.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ou_rank, ou_size;
static const char *ou_test = "?";

__attribute__((format(printf, 1, 2), noreturn)) static void ou_fail(const char *fmt, ...) {
    va_list ap;
    char msg[512];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL %s: %s (rank %d)\n", ou_test, msg, ou_rank);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define OU_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            ou_fail(__VA_ARGS__);                                                                  \
        }                                                                                          \
    } while (0)

#define OU_MPI(call)                                                                               \
    do {                                                                                           \
        int ou_rc_ = (call);                                                                       \
        if (MPI_SUCCESS != ou_rc_) {                                                               \
            char ou_s_[MPI_MAX_ERROR_STRING];                                                      \
            int ou_l_ = 0;                                                                         \
            MPI_Error_string(ou_rc_, ou_s_, &ou_l_);                                               \
            ou_fail("%s failed: %s", #call, ou_s_);                                                \
        }                                                                                          \
    } while (0)

/* Byte i of the pattern of (seed) */
static inline uint8_t ou_byte(unsigned seed, size_t i) {
    return (uint8_t)((i * 131u) ^ (seed * 29u) ^ (i >> 8));
}

static inline void ou_fill(void *buf, size_t n, unsigned seed) {
    uint8_t *b = buf;
    for (size_t i = 0; i < n; ++i) {
        b[i] = ou_byte(seed, i);
    }
}

/* Returns the first wrong index, or n. */
static inline size_t ou_verify(const void *buf, size_t n, unsigned seed) {
    const uint8_t *b = buf;
    for (size_t i = 0; i < n; ++i) {
        if (b[i] != ou_byte(seed, i)) {
            return i;
        }
    }
    return n;
}

static void ou_init(int *argc, char ***argv) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &ou_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ou_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

#endif
