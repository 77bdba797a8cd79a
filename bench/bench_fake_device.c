/*
 * bench_fake_device: ping-pong latency between buffers of the core's fake
 * device (common_efa_debug_fake_device: memory the CPU cannot touch, moved
 * by the fake's copy), or host buffers (-H) for comparison, so that the
 * cost of carrying device buffers through the host can be measured where
 * there is no GPU.  Run under pml cm + mtl_efa, which loads the core.
 *
 * usage: mpirun -np 2 ... --mca pml cm --mca mtl efa \
 *            --mca common_efa_debug_fake_device 1 bench_fake_device [-H] [-s SIZE[K|M]] [-i ITERS]
 * Output (rank 0): "size half_round_trip_us" for the one size.  It finds the
 * fake through libmca_common_efa loaded as a library of its own (the
 * components as built here), not a core linked into Open MPI.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int find_core(struct dl_phdr_info *info, size_t size, void *out) {
    (void)size;
    if (NULL != strstr(info->dlpi_name, "libmca_common_efa")) {
        snprintf(out, 4096, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

static void (*device_free)(void *);

/* A buffer of the fake device (host memory with -H); NULL with a reason. */
static void *device_alloc(size_t len, int host, const char **why) {
    if (host) {
        device_free = free;
        return malloc(len);
    }
    char path[4096] = "";
    dl_iterate_phdr(find_core, path);
    void *lib = path[0] ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void *(*alloc)(size_t) = lib ? (void *(*)(size_t))dlsym(lib, "efa_fake_device_alloc") : NULL;
    const char *(*name)(void) = lib ? (const char *(*)(void))dlsym(lib, "efa_device_name") : NULL;
    device_free = lib ? (void (*)(void *))dlsym(lib, "efa_fake_device_free") : NULL;
    if (NULL == alloc || NULL == name || NULL == device_free) {
        *why = "libmca_common_efa is not loaded (run under pml cm + mtl_efa)";
        return NULL;
    }
    if (NULL == name() || 0 != strcmp(name(), "fake")) {
        *why = "the core's device is not the fake (--mca common_efa_debug_fake_device 1)";
        return NULL;
    }
    return alloc(len);
}

/* "4194304", "64K", "4M": bytes; 0 where it is none of these. */
static size_t parse_size(const char *s) {
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) {
        return 0;
    }
    const int shift = 'K' == *end || 'k' == *end ? 10 : 'M' == *end || 'm' == *end ? 20 : 0;
    end += shift ? 1 : 0;
    if ('\0' != *end || v > (1ull << 30) >> shift) {
        return 0; /* (above 1 GiB: refused by the caller anyway) */
    }
    return (size_t)(v << shift);
}

static double pingpong(void *buf, size_t len, int rank, long iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (long i = 0; i < iters; ++i) {
        if (0 == rank) {
            MPI_Send(buf, (int)len, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)len, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (1 == rank) {
            MPI_Recv(buf, (int)len, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)len, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) / (double)iters / 2 * 1e6;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, np, host = 0, opt;
    long iters = 200;
    size_t len = 4u << 20;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    while ((opt = getopt(argc, argv, "Hs:i:")) != -1) {
        if ('H' == opt) {
            host = 1;
        } else if ('s' == opt) {
            len = parse_size(optarg);
        } else if ('i' == opt) {
            iters = strtol(optarg, NULL, 0);
        } else {
            iters = 0;
        }
    }
    if (np < 2 || len < 1 || len > (1u << 30) || iters < 1) {
        if (0 == rank) {
            fprintf(stderr, "usage: bench_fake_device [-H] [-s SIZE] [-i ITERS], 2 ranks\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *why = "out of memory";
    void *buf = device_alloc(len, host, &why);
    if (NULL == buf) {
        fprintf(stderr, "bench_fake_device: %s\n", why);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    pingpong(buf, len, rank, iters / 10 + 1); /* warm-up: buffers and registrations */
    const double us = pingpong(buf, len, rank, iters);
    if (0 == rank) {
        printf("# bench=fake_device buffers=%s iters=%ld\n%zu %.1f\n", host ? "host" : "device",
               iters, len, us);
    }
    device_free(buf);
    MPI_Finalize();
    return 0;
}
