/*
 * Software overhead probe for bench/callgrind.sh.
 *
 * Rank 0 is the measured client. Per iteration it posts an MPI_Irecv for the
 * reply and sends one small message with MPI_Isend, then waits until rank 1
 * has answered and completes both requests with MPI_Waitall. Rank 1 (run
 * natively, not under valgrind) answers each message at once with a blocking
 * MPI_Recv + MPI_Send.
 *
 * How rank 0 waits decides whether its instruction count depends on the
 * machine's load. Spinning in MPI would count every empty poll while rank 1
 * was descheduled. Instead:
 *   -F FIFO  rank 1 writes one byte into the named pipe FIFO after each reply
 *            and rank 0 blocks in poll() on it; every INTERVAL us without
 *            that byte rank 0 calls MPI_Testall once, in case the transport
 *            needs rank 0's progress to deliver its message.
 *   no -F    rank 0 sleeps INTERVAL us and hopes the reply has arrived.
 * Either way MPI_Waitall finds the reply already there in the usual case,
 * and the count per iteration is a property of the software stack.
 *
 * With -b (blocking) rank 0 does what the latency benchmark does instead:
 * MPI_Send, then (after the same wait) MPI_Recv, so the count covers the
 * blocking paths (an MTL's send, which may inject, and pml/cm's blocking
 * receive). Rank 0 then has no request to test while it waits; if the
 * signal is late it goes on into MPI_Recv, which spins: such a run counts
 * more, and callgrind.sh keeps the minimum of its repetitions.
 *
 * Only bench_overhead_measured() is meant to be counted on rank 0
 * (mpirun -np 1 valgrind --tool=callgrind --collect-atstart=no
 *  --toggle-collect=bench_overhead_measured ./bench_overhead ... : -np 1
 *  ./bench_overhead ...); with --dump-before=bench_overhead_iteration
 * callgrind writes one profile part per iteration: one send and one
 * receive of rank 0 (bench/callgrind.sh).
 *
 * Options: -n iterations (default 1000), -x warm-up (default 100),
 *          -F fifo (default none), -s INTERVAL in microseconds (default
 *          10000 with -F, rounded up to milliseconds; 1000 without),
 *          -m size (default 1), -b blocking send and receive
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void pause_us(long us) {
    if (us <= 0) {
        return;
    }
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

struct probe {
    char *sbuf;
    char *rbuf;
    int size;
    int rank;
    int fifo;      /* -1: sleep instead */
    long interval; /* us */
    int blocking;  /* -b: MPI_Send + MPI_Recv on rank 0 */
};

/* Rank 0: wait until rank 1 signals through the FIFO, driving MPI progress
 * only when the signal is late (req NULL: give up instead, the caller's
 * blocking receive progresses). Returns 1 when the byte was read, 0 when
 * given up. */
static int wait_for_peer(const struct probe *p, MPI_Request *req) {
    struct pollfd pfd = {.fd = p->fifo, .events = POLLIN};
    int timeout_ms = (int)((p->interval + 999) / 1000);
    for (;;) {
        int n = poll(&pfd, 1, timeout_ms);
        if (n > 0) {
            char c;
            ssize_t r = read(p->fifo, &c, 1);
            if (r == 1) {
                return 1;
            }
            if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
                fprintf(stderr, "bench_overhead: peer closed the fifo\n");
                MPI_Abort(MPI_COMM_WORLD, 4);
            }
        } else if (n == 0) {
            if (req == NULL) {
                return 0;
            }
            int flag = 0;
            MPI_Testall(2, req, &flag, MPI_STATUSES_IGNORE);
        }
    }
}

static void exchange(const struct probe *p) {
    if (p->rank == 0 && p->blocking) {
        MPI_Send(p->sbuf, p->size, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
        int late = 0;
        if (p->fifo >= 0) {
            late = !wait_for_peer(p, NULL);
        } else {
            pause_us(p->interval);
        }
        MPI_Recv(p->rbuf, p->size, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (late) {
            /* rank 1 writes the byte right after its send: take it now */
            char c;
            while (read(p->fifo, &c, 1) != 1) {
                if (errno != EINTR && errno != EAGAIN) {
                    fprintf(stderr, "bench_overhead: peer closed the fifo\n");
                    MPI_Abort(MPI_COMM_WORLD, 4);
                }
            }
        }
    } else if (p->rank == 0) {
        MPI_Request req[2];
        MPI_Irecv(p->rbuf, p->size, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(p->sbuf, p->size, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &req[1]);
        if (p->fifo >= 0) {
            wait_for_peer(p, req);
        } else {
            pause_us(p->interval);
        }
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    } else {
        MPI_Recv(p->rbuf, p->size, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(p->sbuf, p->size, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
        if (p->fifo >= 0) {
            char c = 'r';
            while (write(p->fifo, &c, 1) != 1) {
                if (errno != EINTR) {
                    fprintf(stderr, "bench_overhead: cannot write the fifo\n");
                    MPI_Abort(MPI_COMM_WORLD, 4);
                }
            }
        }
    }
}

/* One counted iteration, out of line so that callgrind can dump a profile
 * part at each call (callgrind.sh: --dump-before=bench_overhead_iteration)
 * and every iteration is counted on its own. */
__attribute__((noinline)) void bench_overhead_iteration(const struct probe *p) {
    exchange(p);
}

/* The region callgrind counts; kept out of line so that its name survives. */
__attribute__((noinline)) void bench_overhead_measured(const struct probe *p, long iters) {
    for (long i = 0; i < iters; i++) {
        bench_overhead_iteration(p);
    }
    __asm__ volatile("" ::: "memory");
}

static long arg_long(const char *text, const char *what) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < 0) {
        fprintf(stderr, "bench_overhead: bad %s: %s\n", what, text);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return v;
}

int main(int argc, char **argv) {
    long iters = 1000;
    long warmup = 100;
    long interval = -1;
    long size = 1;
    const char *fifo_path = NULL;
    int rank = 0;
    int np = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int blocking = 0;
    int c;
    while ((c = getopt(argc, argv, "n:x:s:m:F:bh")) != -1) {
        switch (c) {
        case 'b':
            blocking = 1;
            break;
        case 'n':
            iters = arg_long(optarg, "-n");
            break;
        case 'x':
            warmup = arg_long(optarg, "-x");
            break;
        case 's':
            interval = arg_long(optarg, "-s");
            break;
        case 'm':
            size = arg_long(optarg, "-m");
            break;
        case 'F':
            fifo_path = optarg;
            break;
        default:
            if (rank == 0) {
                fprintf(stderr, "usage: bench_overhead [-n iters] [-x warmup] [-F fifo] "
                                "[-s interval_us] [-m size] [-b]\n");
            }
            MPI_Finalize();
            return c == 'h' ? 0 : 2;
        }
    }
    if (np != 2) {
        if (rank == 0) {
            fprintf(stderr, "bench_overhead: needs exactly 2 ranks\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (interval < 0) {
        interval = fifo_path != NULL ? 10000 : 1000;
    }
    if (fifo_path != NULL && interval == 0) {
        interval = 1;
    }

    struct probe p = {
        .size = (int)size, .rank = rank, .fifo = -1, .interval = interval, .blocking = blocking};
    p.sbuf = malloc((size_t)size + 1);
    p.rbuf = malloc((size_t)size + 1);
    if (p.sbuf == NULL || p.rbuf == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    memset(p.sbuf, 's', (size_t)size + 1);
    memset(p.rbuf, 0, (size_t)size + 1);
    if (fifo_path != NULL) {
        /* a reader that went away must not kill rank 1 silently */
        signal(SIGPIPE, SIG_IGN);
        /* opening blocks until both ranks have their end open */
        p.fifo = open(fifo_path, rank == 0 ? O_RDONLY : O_WRONLY);
        if (p.fifo < 0) {
            fprintf(stderr, "bench_overhead: cannot open %s: %s\n", fifo_path, strerror(errno));
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
    }

    for (long i = 0; i < warmup; i++) {
        exchange(&p);
    }
    /* Settle: transports finish lazy set-up (connections, buffer pools)
     * when they are progressed some time after first use; give them that
     * outside the counted region. Progress is driven by testing a receive
     * that the peer satisfies only afterwards (not MPI_Iprobe: a probe that
     * finds nothing never returns on some providers, shm among them). */
    MPI_Request settle;
    MPI_Irecv(NULL, 0, MPI_BYTE, 1 - rank, 8, MPI_COMM_WORLD, &settle);
    for (int i = 0; i < 50; i++) {
        int flag = 0;
        pause_us(2000);
        MPI_Test(&settle, &flag, MPI_STATUS_IGNORE);
    }
    MPI_Send(NULL, 0, MPI_BYTE, 1 - rank, 8, MPI_COMM_WORLD);
    MPI_Wait(&settle, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    bench_overhead_measured(&p, iters);
    double t = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# bench=overhead unit=us np=%d iters=%ld warmup=%ld interval_us=%ld fifo=%d\n", np,
               iters, warmup, interval, fifo_path != NULL);
        printf("# columns=size,us_per_iteration\n");
        printf("%ld %.3f\n", size, t * 1e6 / (double)(iters > 0 ? iters : 1));
    }
    if (p.fifo >= 0) {
        close(p.fifo);
    }
    free(p.sbuf);
    free(p.rbuf);
    MPI_Finalize();
    return 0;
}
