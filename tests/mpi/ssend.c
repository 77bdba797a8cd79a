/*
 * ssend: synchronous sends complete only once the receive has matched.
 *
 * In each even/odd pair the even rank sends and the odd rank receives. The
 * pair synchronises with a zero-byte MPI_Sendrecv before each timed step.
 *   ssend wait:  the receiver sleeps DELAY ms before posting its receive;
 *                MPI_Ssend must take at least DELAY - 50 ms.
 *   issend test: MPI_Issend then MPI_Test in a loop for DELAY - 100 ms: the
 *                request must stay incomplete; then MPI_Wait.
 *   preposted:   MPI_Ssend to a receive that was posted before the send.
 *   in order:    many MPI_Ssend / MPI_Issend with the same tag arrive in
 *                order (sizes k * 53 mod 3000, or with -f FIRST every size
 *                from FIRST on: the sizes around a transport's limits).
 *   burst:       BURST MPI_Issend (0 to 3000 bytes, one tag) in flight at
 *                once to one peer whose receives are posted only after
 *                DELAY ms, all together: none may complete before (MPI_Testsome
 *                in a loop), all must complete after, with their data in
 *                order.  The receiver then answers BURST matches at once
 *                (mtl_efa: BURST acknowledgements in flight together; with
 *                mtl_efa_debug_no_inject each is posted with a context of its
 *                own instead of injected).
 * Sizes 0, 64 bytes and LARGE for the timed steps.
 *
 * Options: -d DELAY ms (default 300), -n COUNT for the in-order step
 *          (default 200), -f FIRST size of the in-order step (default:
 *          spread), -s LARGE (default 1M), -b BURST (default 64).
 */
#include "test_util.h"

#define TAG_SYNC 90

static void pair_sync(int peer) {
    MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, TAG_SYNC, NULL, 0, MPI_BYTE, peer, TAG_SYNC,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

#define TAG_BURST 5
#define BURST_SLOT 3000

static long first_size = -1; /* -f: the in-order step's sizes FIRST, FIRST+1, ... */

static size_t in_order_size(int k) {
    return first_size >= 0 ? (size_t)first_size + (size_t)k : (size_t)(k * 53) % 3000;
}

static size_t burst_size(int k) {
    return (size_t)(k * 131) % BURST_SLOT; /* k = 0: 0 bytes */
}

/* The burst step's sender: see the header. */
static void burst_send(int peer, int burst, int delay) {
    char *bufs = tu_malloc((size_t)burst * BURST_SLOT);
    MPI_Request *reqs = tu_malloc(sizeof(*reqs) * (size_t)burst);
    int *idx = tu_malloc(sizeof(*idx) * (size_t)burst);
    int k, n;
    double t0, dt;

    for (k = 0; k < burst; k++)
        tu_fill(bufs + (size_t)k * BURST_SLOT, burst_size(k), tu_seed(4, k, 0, 0));
    pair_sync(peer);
    t0 = MPI_Wtime();
    for (k = 0; k < burst; k++)
        MPI_Issend(bufs + (size_t)k * BURST_SLOT, (int)burst_size(k), MPI_BYTE, peer, TAG_BURST,
                   MPI_COMM_WORLD, &reqs[k]);
    do {
        MPI_Testsome(burst, reqs, &n, idx, MPI_STATUSES_IGNORE);
        dt = MPI_Wtime() - t0;
        TU_ASSERT(n == 0,
                  "burst: %d of %d MPI_Issend completed after %.0f ms (first: number %d of %zu "
                  "bytes), but the receives are posted only after %d ms",
                  n, burst, dt * 1000, idx[0], burst_size(idx[0]), delay);
    } while (dt * 1000 < delay - 100);
    MPI_Waitall(burst, reqs, MPI_STATUSES_IGNORE);
    dt = MPI_Wtime() - t0;
    TU_ASSERT(dt * 1000 >= delay - 50,
              "burst: %d MPI_Issend completed (MPI_Waitall) after %.0f ms, receives posted after "
              "%d ms",
              burst, dt * 1000, delay);
    free(bufs);
    free(reqs);
    free(idx);
}

/* The burst step's receiver: every receive posted at once, late. */
static void burst_recv(int peer, int burst, int delay) {
    char *bufs = tu_malloc((size_t)burst * BURST_SLOT);
    MPI_Request *reqs = tu_malloc(sizeof(*reqs) * (size_t)burst);
    MPI_Status *sts = tu_malloc(sizeof(*sts) * (size_t)burst);
    char what[96];
    int k, count;

    memset(bufs, TU_POISON, (size_t)burst * BURST_SLOT);
    pair_sync(peer);
    tu_sleep_ms(delay);
    for (k = 0; k < burst; k++)
        MPI_Irecv(bufs + (size_t)k * BURST_SLOT, BURST_SLOT, MPI_BYTE, peer, TAG_BURST,
                  MPI_COMM_WORLD, &reqs[k]);
    MPI_Waitall(burst, reqs, sts);
    for (k = 0; k < burst; k++) {
        snprintf(what, sizeof(what), "burst issend number %d of %d", k, burst);
        MPI_Get_count(&sts[k], MPI_BYTE, &count);
        TU_ASSERT((size_t)count == burst_size(k) && sts[k].MPI_SOURCE == peer &&
                      sts[k].MPI_TAG == TAG_BURST,
                  "%s: expected count %zu source %d tag %d, got count %d source %d tag %d", what,
                  burst_size(k), peer, TAG_BURST, count, sts[k].MPI_SOURCE, sts[k].MPI_TAG);
        tu_verify(bufs + (size_t)k * BURST_SLOT, burst_size(k), tu_seed(4, k, 0, 0), what);
    }
    free(bufs);
    free(reqs);
    free(sts);
}

int main(int argc, char **argv) {
    int delay = 300, count = 200, burst = 64, opt, peer, i, k, flag;
    size_t large = 1u << 20, sizes[3];
    double min_ssend = 1e9, t0, dt;
    char *buf, what[128];
    MPI_Request req;

    tu_init(&argc, &argv, "ssend");
    while ((opt = getopt(argc, argv, "d:n:f:s:b:h")) != -1) {
        switch (opt) {
        case 'd':
            delay = (int)tu_parse_long(optarg);
            break;
        case 'n':
            count = (int)tu_parse_long(optarg);
            break;
        case 'f':
            first_size = tu_parse_long(optarg);
            break;
        case 's':
            large = tu_parse_size(optarg);
            break;
        case 'b':
            burst = (int)tu_parse_long(optarg);
            break;
        case 'h':
            tu_usage("[-d DELAY_MS] [-n COUNT] [-f FIRST] [-s LARGE] [-b BURST]", 0);
        default:
            tu_usage("[-d DELAY_MS] [-n COUNT] [-f FIRST] [-s LARGE] [-b BURST]", 1);
        }
    }
    TU_ASSERT(tu_size >= 2, "needs at least 2 ranks, got %d", tu_size);
    TU_ASSERT(delay >= 150, "DELAY must be at least 150 ms");
    TU_ASSERT(burst >= 1 && burst <= 100000, "BURST must be in [1, 100000]");
    TU_ASSERT(first_size < 0 || first_size + count <= 3000,
              "FIRST + COUNT must be at most 3000 (the in-order step's slots)");
    sizes[0] = 0;
    sizes[1] = 64;
    sizes[2] = large;
    buf = tu_malloc(large);
    peer = tu_pair_partner();

    if (peer >= 0 && tu_rank % 2 == 0) {
        /* sender */
        for (i = 0; i < 3; i++) {
            uint64_t seed = tu_seed(1, i, 0, 0);

            /* ssend wait */
            tu_fill(buf, sizes[i], seed);
            pair_sync(peer);
            t0 = MPI_Wtime();
            MPI_Ssend(buf, (int)sizes[i], MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            dt = MPI_Wtime() - t0;
            min_ssend = dt < min_ssend ? dt : min_ssend;
            TU_ASSERT(dt * 1000 >= delay - 50,
                      "MPI_Ssend of %zu bytes returned after %.0f ms, but the receive was "
                      "posted only after %d ms",
                      sizes[i], dt * 1000, delay);

            /* issend + test */
            tu_fill(buf, sizes[i], seed + 1);
            pair_sync(peer);
            t0 = MPI_Wtime();
            MPI_Issend(buf, (int)sizes[i], MPI_BYTE, peer, 2, MPI_COMM_WORLD, &req);
            do {
                MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
                dt = MPI_Wtime() - t0;
                TU_ASSERT(!flag,
                          "MPI_Issend of %zu bytes completed (MPI_Test) after %.0f ms, but the "
                          "receive is posted only after %d ms",
                          sizes[i], dt * 1000, delay);
            } while (dt * 1000 < delay - 100);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            dt = MPI_Wtime() - t0;
            TU_ASSERT(dt * 1000 >= delay - 50,
                      "MPI_Issend of %zu bytes completed (MPI_Wait) after %.0f ms, receive "
                      "posted after %d ms",
                      sizes[i], dt * 1000, delay);

            /* preposted */
            tu_fill(buf, sizes[i], seed + 2);
            pair_sync(peer);
            MPI_Ssend(buf, (int)sizes[i], MPI_BYTE, peer, 3, MPI_COMM_WORLD);
        }
        /* in order: blocking, then nonblocking */
        for (k = 0; k < count; k++) {
            size_t size = in_order_size(k);

            tu_fill(buf, size, tu_seed(2, k, 0, 0));
            MPI_Ssend(buf, (int)size, MPI_BYTE, peer, 4, MPI_COMM_WORLD);
        }
        {
            char *bufs = tu_malloc((size_t)count * 3000);
            MPI_Request *reqs = tu_malloc(sizeof(*reqs) * count);

            for (k = 0; k < count; k++) {
                size_t size = in_order_size(k);

                tu_fill(bufs + (size_t)k * 3000, size, tu_seed(3, k, 0, 0));
                MPI_Issend(bufs + (size_t)k * 3000, (int)size, MPI_BYTE, peer, 4, MPI_COMM_WORLD,
                           &reqs[k]);
            }
            MPI_Waitall(count, reqs, MPI_STATUSES_IGNORE);
            free(bufs);
            free(reqs);
        }
        burst_send(peer, burst, delay);
    } else if (peer >= 0) {
        /* receiver */
        for (i = 0; i < 3; i++) {
            uint64_t seed = tu_seed(1, i, 0, 0);

            snprintf(what, sizeof(what), "ssend of %zu bytes", sizes[i]);
            pair_sync(peer);
            tu_sleep_ms(delay);
            tu_recv_verify(buf, sizes[i], peer, 1, seed, what);

            snprintf(what, sizeof(what), "issend of %zu bytes", sizes[i]);
            pair_sync(peer);
            tu_sleep_ms(delay);
            tu_recv_verify(buf, sizes[i], peer, 2, seed + 1, what);

            snprintf(what, sizeof(what), "ssend of %zu bytes to a preposted receive", sizes[i]);
            memset(buf, TU_POISON, sizes[i]);
            MPI_Irecv(buf, (int)sizes[i], MPI_BYTE, peer, 3, MPI_COMM_WORLD, &req);
            pair_sync(peer);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            tu_verify(buf, sizes[i], seed + 2, what);
        }
        for (i = 2; i <= 3; i++) {
            for (k = 0; k < count; k++) {
                snprintf(what, sizeof(what), "%s number %d with the same tag",
                         i == 2 ? "ssend" : "issend", k);
                tu_recv_verify(buf, in_order_size(k), peer, 4, tu_seed(i, k, 0, 0), what);
            }
        }
        burst_recv(peer, burst, delay);
    }

    free(buf);
    if (tu_rank == 0 && peer >= 0)
        tu_ok("np=%d delay=%dms shortest ssend=%.0fms sizes=0,64,%zu in-order=%d burst=%d", tu_size,
              delay, min_ssend * 1000, large, count, burst);
    else
        tu_ok("np=%d", tu_size);
    return 0;
}
