/*
 * Point-to-point benchmarks.
 *
 *   -t latency  ping-pong between ranks 0 and 1; value = half round trip (us)
 *   -t bw       rank 0 posts a window of isends, rank 1 acknowledges each
 *               window; value = MB/s (10^6 bytes per second)
 *   -t bibw     both ranks send and receive a window at once; value = MB/s
 *   -t msgrate  like bw; value = messages per second (second column MB/s)
 *   -t mpairs   np/2 pairs (rank r sends to r + np/2) stream windows at the
 *               same time; value = aggregate messages per second
 *   -t fanout   every even rank streams a window to every odd rank at once
 *               (with --map-by node on two hosts: to every rank of the
 *               other host), each odd rank acknowledges each sender's
 *               window; value = aggregate messages per second
 *
 * Ranks beyond those a test uses only take part in the barriers.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_DATA 1
#define TAG_ACK 2

/* Upper bound of buffer memory per rank outside verification mode. */
#define SLOT_BYTES_CAP ((size_t)64 * 1024 * 1024)
/* Upper bound in verification mode, where every window slot needs its own buffer. */
#define VERIFY_BYTES_CAP ((size_t)1024 * 1024 * 1024)

static const char *const modes[] = {"latency", "bw", "bibw", "msgrate", "mpairs", "fanout", NULL};

static const struct bench_prog prog = {
    .name = "bench_pt2pt",
    .min_ranks = 2,
    .modes = modes,
    .default_mode = "latency",
    .default_min = 1,
    .default_max = (size_t)4 * 1024 * 1024,
    .default_iters = 1000,
    .default_warmup = 100,
    .default_window = 64,
};

struct ctx {
    struct bench_opts o;
    int rank;
    int np;
    long errors;
    /* per-slot buffers: slot k lives at sbuf + k * max_size */
    unsigned char *sbuf;
    unsigned char *rbuf;
    long nslots;
    MPI_Request *reqs;
};

static unsigned char *slot(unsigned char *base, const struct ctx *c, long w) {
    return base + (size_t)(w % c->nslots) * c->o.max_size;
}

/* How many distinct message buffers to keep per side. */
static long slots_for(const struct bench_opts *o, long window) {
    size_t per = o->max_size > 0 ? o->max_size : 1;
    if (o->verify) {
        if ((size_t)window > VERIFY_BYTES_CAP / per) {
            bench_die("verification needs window * max size <= %zu bytes", VERIFY_BYTES_CAP);
        }
        return window;
    }
    size_t n = SLOT_BYTES_CAP / per;
    if (n < 1) {
        n = 1;
    }
    return (size_t)window < n ? window : (long)n;
}

/* ---------------------------------------------------------------- latency */

static void latency_iter(struct ctx *c, size_t size, long i) {
    MPI_Status st;
    if (c->rank == 0) {
        if (c->o.verify) {
            bench_fill(c->sbuf, size, bench_seed((uint32_t)size, (uint32_t)i, 0));
            memset(c->rbuf, 0, size);
        }
        MPI_Send(c->sbuf, (int)size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
        MPI_Recv(c->rbuf, (int)size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, &st);
        if (c->o.verify) {
            c->errors += bench_check(c->rbuf, size, bench_seed((uint32_t)size, (uint32_t)i, 1),
                                     "latency pong") != 0;
        }
    } else if (c->rank == 1) {
        if (c->o.verify) {
            memset(c->rbuf, 0, size);
        }
        MPI_Recv(c->rbuf, (int)size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &st);
        if (c->o.verify) {
            c->errors += bench_check(c->rbuf, size, bench_seed((uint32_t)size, (uint32_t)i, 0),
                                     "latency ping") != 0;
            bench_fill(c->sbuf, size, bench_seed((uint32_t)size, (uint32_t)i, 1));
        }
        MPI_Send(c->sbuf, (int)size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD);
    }
}

static void run_latency(struct ctx *c) {
    bench_print_header(&c->o, "latency", "us", "size,latency_us", NULL);
    for (size_t size = c->o.min_size; size != 0; size = bench_next_size(&c->o, size)) {
        long iters = bench_iters_for(&c->o, size);
        long warm = bench_warmup_for(&c->o, size, 1);
        for (long i = 0; i < warm; i++) {
            latency_iter(c, size, i);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            latency_iter(c, size, warm + i);
        }
        double t = MPI_Wtime() - t0;
        if (c->rank == 0) {
            printf("%zu %.3f\n", size, t * 1e6 / (2.0 * (double)iters));
        }
        bench_size_done();
    }
}

/* ------------------------------------------------------- windowed streams */

/*
 * One window from sender to receiver followed by a zero-byte acknowledgement.
 * Every rank passes its role; ranks with no role return at once.
 */
static void stream_window(struct ctx *c, size_t size, long i, int is_sender, int peer) {
    long w;
    long window = c->o.window;
    if (is_sender) {
        for (w = 0; w < window; w++) {
            unsigned char *b = slot(c->sbuf, c, w);
            if (c->o.verify) {
                bench_fill(b, size, bench_seed((uint32_t)size, (uint32_t)i, (uint32_t)w));
            }
            MPI_Isend(b, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &c->reqs[w]);
        }
        MPI_Waitall((int)window, c->reqs, MPI_STATUSES_IGNORE);
        MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        for (w = 0; w < window; w++) {
            unsigned char *b = slot(c->rbuf, c, w);
            if (c->o.verify) {
                memset(b, 0, size);
            }
            MPI_Irecv(b, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &c->reqs[w]);
        }
        MPI_Waitall((int)window, c->reqs, MPI_STATUSES_IGNORE);
        if (c->o.verify) {
            for (w = 0; w < window; w++) {
                c->errors += bench_check(slot(c->rbuf, c, w), size,
                                         bench_seed((uint32_t)size, (uint32_t)i, (uint32_t)w),
                                         "stream window") != 0;
            }
        }
        MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
    }
}

/* Both ranks of a pair send and receive a window at the same time. */
static void bidir_window(struct ctx *c, size_t size, long i, int peer) {
    long window = c->o.window;
    for (long w = 0; w < window; w++) {
        unsigned char *b = slot(c->rbuf, c, w);
        if (c->o.verify) {
            memset(b, 0, size);
        }
        MPI_Irecv(b, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &c->reqs[w]);
    }
    for (long w = 0; w < window; w++) {
        unsigned char *b = slot(c->sbuf, c, w);
        if (c->o.verify) {
            bench_fill(b, size,
                       bench_seed((uint32_t)size, (uint32_t)i, (uint32_t)(w + c->rank * window)));
        }
        MPI_Isend(b, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &c->reqs[window + w]);
    }
    MPI_Waitall((int)(2 * window), c->reqs, MPI_STATUSES_IGNORE);
    if (c->o.verify) {
        for (long w = 0; w < window; w++) {
            c->errors +=
                bench_check(slot(c->rbuf, c, w), size,
                            bench_seed((uint32_t)size, (uint32_t)i, (uint32_t)(w + peer * window)),
                            "bidirectional window") != 0;
        }
    }
}

/* Every even rank sends its window to every odd rank, message w to each
 * odd rank in turn; the odd ranks acknowledge each sender's window. */
static void fanout_window(struct ctx *c, size_t size, long i) {
    long window = c->o.window;
    int n = 0;
    int first = c->rank % 2 == 0 ? 1 : 0; /* the peers: the ranks of the other parity */
    for (long w = 0; w < window; w++) {
        /* message w goes to every peer from one slot, filled once */
        if (first == 1 && c->o.verify) {
            bench_fill(slot(c->sbuf, c, w), size,
                       bench_seed((uint32_t)size, (uint32_t)i, (uint32_t)w));
        }
        for (int p = first; p < c->np; p += 2) {
            if (first == 1) {
                unsigned char *b = slot(c->sbuf, c, w);
                MPI_Isend(b, (int)size, MPI_BYTE, p, TAG_DATA, MPI_COMM_WORLD, &c->reqs[n++]);
            } else {
                /* one slot per (message, sender): a sender's window lands apart */
                unsigned char *b = c->rbuf + (size_t)(n % c->nslots) * c->o.max_size;
                if (c->o.verify) {
                    memset(b, 0, size);
                }
                MPI_Irecv(b, (int)size, MPI_BYTE, p, TAG_DATA, MPI_COMM_WORLD, &c->reqs[n++]);
            }
        }
    }
    MPI_Waitall(n, c->reqs, MPI_STATUSES_IGNORE);
    if (c->o.verify && first == 0) {
        for (int k = 0; k < n && k < c->nslots; k++) {
            c->errors += bench_check(c->rbuf + (size_t)k * c->o.max_size, size,
                                     bench_seed((uint32_t)size, (uint32_t)i,
                                                (uint32_t)(k / ((c->np + 1) / 2))),
                                     "fanout window") != 0;
        }
    }
    for (int p = first; p < c->np; p += 2) {
        if (first == 1) {
            MPI_Recv(NULL, 0, MPI_BYTE, p, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Send(NULL, 0, MPI_BYTE, p, TAG_ACK, MPI_COMM_WORLD);
        }
    }
}

enum stream_kind { STREAM_BW, STREAM_BIBW, STREAM_MSGRATE, STREAM_MPAIRS, STREAM_FANOUT };

static void run_stream(struct ctx *c, enum stream_kind kind) {
    int pairs = kind == STREAM_MPAIRS ? c->np / 2 : 1;
    int sender = 0;
    int receiver = 0;
    int peer = -1;
    if (c->rank < pairs) {
        sender = 1;
        peer = c->rank + pairs;
    } else if (c->rank < 2 * pairs) {
        receiver = 1;
        peer = c->rank - pairs;
    }
    double t0 = 0.0;
    char extra[64];
    snprintf(extra, sizeof extra, "pairs=%d", pairs);
    /* The peers that get each window: one, but in a fanout the ranks of the
     * other parity (the larger count, the same in every rank, which must
     * all run the same warm-up). */
    long window_peers = 1;
    if (kind == STREAM_FANOUT) { /* every rank takes part: the evens send to the odds */
        sender = c->rank % 2 == 0;
        window_peers = (c->np + 1) / 2;
        pairs = ((c->np + 1) / 2) * (c->np / 2); /* (sender, receiver) pairs */
        snprintf(extra, sizeof extra, "senders=%d receivers=%d", (c->np + 1) / 2, c->np / 2);
    }
    switch (kind) {
    case STREAM_BW:
        bench_print_header(&c->o, "bw", "MB/s", "size,mb_per_s", extra);
        break;
    case STREAM_BIBW:
        bench_print_header(&c->o, "bibw", "MB/s", "size,mb_per_s", extra);
        break;
    case STREAM_MSGRATE:
        bench_print_header(&c->o, "msgrate", "msg/s", "size,msg_per_s,mb_per_s", extra);
        break;
    case STREAM_MPAIRS:
        bench_print_header(&c->o, "mpairs", "msg/s", "size,msg_per_s,mb_per_s", extra);
        break;
    case STREAM_FANOUT:
        bench_print_header(&c->o, "fanout", "msg/s", "size,msg_per_s,mb_per_s", extra);
        break;
    }

    /* senders own the clock; in bibw both sides send */
    int timed = sender || (kind == STREAM_BIBW && receiver);
    for (size_t size = c->o.min_size; size != 0; size = bench_next_size(&c->o, size)) {
        long iters = bench_iters_for(&c->o, size);
        long warm = bench_warmup_for(&c->o, size, c->o.window * window_peers);
        for (long i = 0; i < warm + iters; i++) {
            if (i == warm) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            if (kind == STREAM_FANOUT) {
                fanout_window(c, size, i);
                continue;
            }
            if (peer < 0) {
                continue;
            }
            if (kind == STREAM_BIBW) {
                bidir_window(c, size, i, peer);
            } else {
                stream_window(c, size, i, sender, peer);
            }
        }
        double t = timed ? MPI_Wtime() - t0 : 0.0;
        double tmax = 0.0;
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (c->rank == 0) {
            double msgs = (double)iters * (double)c->o.window * pairs;
            if (kind == STREAM_BIBW) {
                msgs *= 2.0;
            }
            double mbs = msgs * (double)size / tmax / 1e6;
            if (kind == STREAM_BW || kind == STREAM_BIBW) {
                printf("%zu %.3f\n", size, mbs);
            } else {
                printf("%zu %.1f %.3f\n", size, msgs / tmax, mbs);
            }
        }
        bench_size_done();
    }
}

int main(int argc, char **argv) {
    struct ctx c;
    memset(&c, 0, sizeof c);
    bench_start(&argc, &argv, &prog, &c.o, &c.rank, &c.np);

    int is_latency = strcmp(c.o.mode, "latency") == 0;
    /* fanout: a window per peer of the other parity */
    long per_rank = strcmp(c.o.mode, "fanout") == 0 ? (long)((c.np + 1) / 2) : 1;
    c.nslots = is_latency ? 1 : slots_for(&c.o, c.o.window * per_rank);
    size_t bytes = (size_t)c.nslots * (c.o.max_size > 0 ? c.o.max_size : 1);
    c.sbuf = bench_malloc(bytes);
    c.rbuf = bench_malloc(bytes);
    c.reqs = malloc(sizeof(MPI_Request) * (size_t)(2 * c.o.window * per_rank));
    if (c.reqs == NULL) {
        bench_die("out of memory");
    }
    /* untouched buffers would make the first sizes pay for page faults */
    memset(c.sbuf, 'a', bytes);
    memset(c.rbuf, 'b', bytes);

    if (is_latency) {
        run_latency(&c);
    } else if (strcmp(c.o.mode, "bw") == 0) {
        run_stream(&c, STREAM_BW);
    } else if (strcmp(c.o.mode, "bibw") == 0) {
        run_stream(&c, STREAM_BIBW);
    } else if (strcmp(c.o.mode, "msgrate") == 0) {
        run_stream(&c, STREAM_MSGRATE);
    } else if (strcmp(c.o.mode, "mpairs") == 0) {
        run_stream(&c, STREAM_MPAIRS);
    } else {
        run_stream(&c, STREAM_FANOUT);
    }

    long errors = bench_verify_report(&c.o, c.errors, c.o.mode);
    free(c.reqs);
    free(c.sbuf);
    free(c.rbuf);
    MPI_Finalize();
    return errors == 0 ? 0 : 1;
}
