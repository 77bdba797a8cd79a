/*
 * quiet_wake: a message between two processes of one node that goes by
 * the provider (larger than a ring slot) reaches a receiver whose provider
 * has been quiet for a while without waiting for its paced poll.
 *
 * Rank 1 sends rank 0 a message of each size, once untimed, then ITERS
 * times after sleeping QUIET ms each time (rank 0 waits in MPI_Recv meanwhile, its provider
 * quiet, so its paced poll waits as long as it may:
 * common_efa_net_poll_interval_max).  The message carries the sender's
 * CLOCK_MONOTONIC time (one clock on one node); rank 0 fails when one
 * arrives more than LIMIT ms after it was sent.  Run with a paced poll far
 * longer than LIMIT (run-wake-test.sh: 1 s), only the sender's doorbell
 * brings it in time; without it one arrival in ITERS coming within LIMIT
 * by chance is about LIMIT / 1 s.
 *
 * Options: -i ITERS (default 5), -q QUIET ms (default 30), -l LIMIT ms
 *          (default 200), -v: each arrival's delay.  2 processes.
 */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    int iters = 5, quiet_ms = 30, limit_ms = 200, verbose = 0, opt;
    tu_init(&argc, &argv, "quiet_wake");
    while ((opt = getopt(argc, argv, "i:q:l:v")) != -1) {
        switch (opt) {
        case 'i':
            iters = atoi(optarg);
            break;
        case 'q':
            quiet_ms = atoi(optarg);
            break;
        case 'l':
            limit_ms = atoi(optarg);
            break;
        case 'v':
            verbose = 1;
            break;
        default:
            tu_fail("usage: quiet_wake [-i ITERS] [-q QUIET_MS] [-l LIMIT_MS]");
        }
    }
    TU_ASSERT(tu_size == 2, "needs 2 processes, has %d", tu_size);
    /* Above a ring slot (8 KiB by default): eager by the provider; above the
     * eager limit: the rendezvous's first fragment by the provider. */
    static const size_t sizes[] = {12 * 1024, 64 * 1024};
    char *buf = malloc(64 * 1024);
    TU_ASSERT(buf != NULL, "malloc");
    double worst = 0;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        /* Untimed first: the provider's first message to a peer sets up
         * its connection (tcp;ofi_rxm: about 100 ms on one node). */
        if (tu_rank == 1) {
            MPI_Send(buf, (int)sizes[s], MPI_BYTE, 0, iters, MPI_COMM_WORLD);
        } else {
            MPI_Recv(buf, (int)sizes[s], MPI_BYTE, 1, iters, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        for (int it = 0; it < iters; ++it) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (tu_rank == 1) {
                tu_sleep_ms(quiet_ms);
                const double sent = now_ms();
                memset(buf, it, sizes[s]);
                memcpy(buf, &sent, sizeof(sent));
                MPI_Send(buf, (int)sizes[s], MPI_BYTE, 0, it, MPI_COMM_WORLD);
            } else {
                MPI_Recv(buf, (int)sizes[s], MPI_BYTE, 1, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                double sent;
                memcpy(&sent, buf, sizeof(sent));
                const double late = now_ms() - sent;
                if (verbose) {
                    printf("quiet_wake: %zu B, iteration %d: %.3f ms\n", sizes[s], it, late);
                }
                TU_ASSERT(late <= limit_ms,
                          "%zu B, iteration %d: arrived %.1f ms after it was sent (limit %d ms)",
                          sizes[s], it, late, limit_ms);
                TU_ASSERT((unsigned char)buf[sizes[s] - 1] == (unsigned char)it,
                          "%zu B, iteration %d: wrong data", sizes[s], it);
                worst = late > worst ? late : worst;
            }
        }
    }
    free(buf);
    tu_ok("%d quiet spells of %d ms per size, latest arrival %.2f ms after its send", iters,
          quiet_ms, worst);
    return 0;
}
