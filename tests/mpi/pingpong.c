/*
 * pingpong: data-verified ping-pong between even/odd rank pairs.
 *
 * Sizes: 0, every power of two up to the maximum, and a few odd sizes around
 * protocol boundaries. Each message carries a pattern that depends on the
 * size, iteration, direction and variant, and receive buffers are poisoned
 * before every receive, so stale or misplaced data is detected.
 * Variants: blocking MPI_Send/MPI_Recv and MPI_Isend/MPI_Irecv.
 * With an odd number of ranks the last rank only joins the barriers.
 *
 * Options: -s MAXSIZE (default 64M), -i ITERS for small sizes (default 10;
 *          sizes above 64K use fewer, 2 up to 8M and 1 above), -t SECONDS:
 *          repeat the whole sweep until that much time has passed (a
 *          stream long enough for a fault in its middle; rank 0 decides).
 */
#include "test_util.h"

#define TAG_PING 101
#define TAG_PONG 102

static const size_t odd_sizes[] = {3,     7,      4095,    4097,    65535,
                                   65537, 262143, 1048577, 4194303, 16777217};

static const char *variant_name[] = {"send/recv", "isend/irecv"};

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static int build_sizes(size_t max, size_t *sizes) {
    int n = 0;
    size_t s;
    unsigned i;

    sizes[n++] = 0;
    for (s = 1; s <= max; s *= 2)
        sizes[n++] = s;
    for (i = 0; i < sizeof(odd_sizes) / sizeof(odd_sizes[0]); i++)
        if (odd_sizes[i] <= max)
            sizes[n++] = odd_sizes[i];
    qsort(sizes, n, sizeof(sizes[0]), cmp_size);
    return n;
}

static int iters_for(size_t size, int iters) {
    if (size <= 65536)
        return iters;
    if (size <= (1u << 20))
        return iters / 2 > 2 ? iters / 2 : 2;
    if (size <= (8u << 20))
        return 2;
    return 1; /* the pattern also depends on the size: stale data still shows */
}

static void check_status(MPI_Status *st, int src, int tag, size_t size, const char *what) {
    int count;

    MPI_Get_count(st, MPI_BYTE, &count);
    TU_ASSERT(st->MPI_SOURCE == src, "%s: status source expected %d got %d", what, src,
              st->MPI_SOURCE);
    TU_ASSERT(st->MPI_TAG == tag, "%s: status tag expected %d got %d", what, tag, st->MPI_TAG);
    TU_ASSERT((size_t)count == size, "%s: count expected %zu got %d", what, size, count);
}

static void one_round(int variant, size_t size, int iter, int partner, char *sbuf, char *rbuf) {
    int even = (tu_rank % 2) == 0;
    uint64_t ping_seed = tu_seed(size, iter, variant, 1);
    uint64_t pong_seed = tu_seed(size, iter, variant, 2);
    MPI_Request req[2];
    MPI_Status st[2];
    char what[128];

    memset(rbuf, TU_POISON, size);
    if (even) {
        tu_fill(sbuf, size, ping_seed);
        if (variant == 0) {
            MPI_Send(sbuf, (int)size, MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)size, MPI_BYTE, partner, TAG_PONG, MPI_COMM_WORLD, &st[1]);
        } else {
            MPI_Irecv(rbuf, (int)size, MPI_BYTE, partner, TAG_PONG, MPI_COMM_WORLD, &req[1]);
            MPI_Isend(sbuf, (int)size, MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD, &req[0]);
            MPI_Waitall(2, req, st);
        }
        snprintf(what, sizeof(what), "%s pong size %zu iter %d from rank %d", variant_name[variant],
                 size, iter, partner);
        check_status(&st[1], partner, TAG_PONG, size, what);
        tu_verify(rbuf, size, pong_seed, what);
    } else {
        if (variant == 0) {
            MPI_Recv(rbuf, (int)size, MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD, &st[0]);
        } else {
            MPI_Irecv(rbuf, (int)size, MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD, &req[0]);
            MPI_Wait(&req[0], &st[0]);
        }
        snprintf(what, sizeof(what), "%s ping size %zu iter %d from rank %d", variant_name[variant],
                 size, iter, partner);
        check_status(&st[0], partner, TAG_PING, size, what);
        tu_verify(rbuf, size, ping_seed, what);
        tu_fill(sbuf, size, pong_seed);
        if (variant == 0) {
            MPI_Send(sbuf, (int)size, MPI_BYTE, partner, TAG_PONG, MPI_COMM_WORLD);
        } else {
            MPI_Isend(sbuf, (int)size, MPI_BYTE, partner, TAG_PONG, MPI_COMM_WORLD, &req[1]);
            MPI_Wait(&req[1], MPI_STATUS_IGNORE);
        }
    }
}

int main(int argc, char **argv) {
    size_t max_size = 64u << 20;
    int iters = 10, opt, nsizes, i, it, v, partner, sweeps = 0, more;
    double seconds = 0;
    size_t sizes[128];
    char *sbuf, *rbuf, tmp[32];
    double t0;

    tu_init(&argc, &argv, "pingpong");
    while ((opt = getopt(argc, argv, "s:i:t:h")) != -1) {
        switch (opt) {
        case 's':
            max_size = tu_parse_size(optarg);
            break;
        case 'i':
            iters = (int)tu_parse_long(optarg);
            break;
        case 't':
            seconds = (double)tu_parse_long(optarg);
            break;
        case 'h':
            tu_usage("[-s MAXSIZE] [-i ITERS] [-t SECONDS]", 0);
        default:
            tu_usage("[-s MAXSIZE] [-i ITERS] [-t SECONDS]", 1);
        }
    }
    TU_ASSERT(max_size <= INT32_MAX, "max size %zu too large", max_size);
    TU_ASSERT(tu_size >= 2, "needs at least 2 ranks, got %d", tu_size);
    if (iters < 1)
        iters = 1;

    nsizes = build_sizes(max_size, sizes);
    partner = tu_pair_partner();
    sbuf = tu_malloc(max_size);
    rbuf = tu_malloc(max_size);
    t0 = MPI_Wtime();

    do {
        if (partner >= 0) {
            for (v = 0; v < 2; v++)
                for (i = 0; i < nsizes; i++)
                    for (it = 0; it < iters_for(sizes[i], iters); it++)
                        one_round(v, sizes[i], it, partner, sbuf, rbuf);
        }
        ++sweeps;
        more = MPI_Wtime() - t0 < seconds;
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
    } while (more);

    free(sbuf);
    free(rbuf);
    tu_ok("np=%d pairs=%d sizes=0..%s (%d sizes) iters=%d variants=send/recv,isend/irecv "
          "sweeps=%d time=%.2fs",
          tu_size, tu_size / 2, tu_fmt_size(max_size, tmp, sizeof(tmp)), nsizes, iters, sweeps,
          MPI_Wtime() - t0);
    return 0;
}
