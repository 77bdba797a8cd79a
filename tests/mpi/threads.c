/*
 * threads: concurrent communication from several threads per process.
 *
 * Requires MPI_THREAD_MULTIPLE (fails clearly when not provided). Each rank
 * runs NTHREADS pthreads paired with the same thread index on the partner
 * rank (even/odd pairs):
 *   own comm:    every thread has its own dup'ed communicator and they all
 *                use the same tag: blocking ping-pong, then isend/irecv
 *                exchanges in both directions; with -a their receives name
 *                MPI_ANY_SOURCE (only the partner sends there; the status
 *                must name it).  Where MPI_COMM_WORLD spans nodes, mtl_efa
 *                posts such a receive to its on-node rings and to the
 *                provider at once.
 *   shared comm: all threads share one communicator and are kept apart by
 *                tag only.
 *   churn (-c):  meanwhile one more thread per rank creates communicators
 *                (COMMS dups held at once, twice over) and sends a message
 *                round the ring on each new one, so mtl_efa's table of
 *                communicator paths grows while the other threads' sends
 *                read it (from 64 entries, doubled: 130 grow it twice).
 * All data is verified (pattern seeded by thread, iteration, size, sender).
 *
 * Options: -t NTHREADS (default 4), -i ITERS (default 20), -s MAXSIZE
 *          (default 1M), -a (MPI_ANY_SOURCE in the own-comm exchange),
 *          -c (the churn thread), -C COMMS (its communicators, 1 to 999,
 *          default 300; implies -c).
 */
#include "test_util.h"

#include <pthread.h>

#define MAX_THREADS 64

struct targ {
    int id;
    MPI_Comm own;
    MPI_Comm shared;
};

static int iters = 20;
static int any_source = 0;
static size_t max_size = 1u << 20;
static int partner;
static int churn = 0;
static int churn_comms = 300;

static const size_t base_sizes[] = {0, 1, 7, 1024, 4097, 65537, 262144, 1048576};

static void run_phase(struct targ *a, MPI_Comm comm, int tag, int phase, char *sbuf, char *rbuf) {
    int even = tu_rank % 2 == 0, it;
    unsigned i;
    char what[160];
    MPI_Status st[2];
    MPI_Request req[2];

    for (i = 0; i < sizeof(base_sizes) / sizeof(base_sizes[0]); i++) {
        size_t size = base_sizes[i];

        if (size > max_size)
            break;
        for (it = 0; it < iters; it++) {
            uint64_t mine = tu_seed(a->id, phase * 1000 + it, size, tu_rank);
            uint64_t theirs = tu_seed(a->id, phase * 1000 + it, size, partner);

            /* blocking ping-pong */
            snprintf(what, sizeof(what), "thread %d %s ping-pong size %zu iter %d", a->id,
                     phase ? "shared-comm" : "own-comm", size, it);
            tu_fill(sbuf, size, mine);
            memset(rbuf, TU_POISON, size);
            if (even) {
                MPI_Send(sbuf, (int)size, MPI_BYTE, partner, tag, comm);
                MPI_Recv(rbuf, (int)size, MPI_BYTE, partner, tag, comm, &st[0]);
            } else {
                MPI_Recv(rbuf, (int)size, MPI_BYTE, partner, tag, comm, &st[0]);
                MPI_Send(sbuf, (int)size, MPI_BYTE, partner, tag, comm);
            }
            tu_tsan_acquire(rbuf);
            tu_verify_recv(rbuf, &st[0], partner, tag, size, theirs, what);

            /* simultaneous exchange */
            snprintf(what, sizeof(what), "thread %d %s isend/irecv size %zu iter %d", a->id,
                     phase ? "shared-comm" : "own-comm", size, it);
            tu_fill(sbuf, size, mine + 1);
            memset(rbuf, TU_POISON, size);
            MPI_Irecv(rbuf, (int)size, MPI_BYTE, any_source && !phase ? MPI_ANY_SOURCE : partner,
                      tag, comm, &req[0]);
            MPI_Isend(sbuf, (int)size, MPI_BYTE, partner, tag, comm, &req[1]);
            MPI_Waitall(2, req, st);
            tu_tsan_acquire(rbuf);
            tu_verify_recv(rbuf, &st[0], partner, tag, size, theirs + 1, what);
        }
    }
}

static void *thread_main(void *p) {
    struct targ *a = p;
    char *sbuf = tu_malloc(max_size), *rbuf = tu_malloc(max_size);

    run_phase(a, a->own, 5, 0, sbuf, rbuf);
    run_phase(a, a->shared, 100 + a->id, 1, sbuf, rbuf);
    free(sbuf);
    free(rbuf);
    return NULL;
}

/* Communicators come and go while the workers send (see the top). */
static void *churn_main(void *p) {
    MPI_Comm parent = *(MPI_Comm *)p;
    MPI_Comm *comms = malloc((size_t)churn_comms * sizeof(*comms));
    int next = (tu_rank + 1) % tu_size, prev = (tu_rank + tu_size - 1) % tu_size;

    TU_ASSERT(comms != NULL, "out of memory");
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < churn_comms; i++) {
            int out = tu_rank * 100000 + round * 1000 + i, in = -1;
            MPI_Status st;

            MPI_Comm_dup(parent, &comms[i]);
            MPI_Sendrecv(&out, 1, MPI_INT, next, 3, &in, 1, MPI_INT, prev, 3, comms[i], &st);
            TU_ASSERT(in == prev * 100000 + round * 1000 + i,
                      "churn: communicator %d of round %d: got %d from rank %d, expected %d", i,
                      round, in, prev, prev * 100000 + round * 1000 + i);
        }
        for (int i = 0; i < churn_comms; i++)
            MPI_Comm_free(&comms[i]);
    }
    free(comms);
    return NULL;
}

static const char *level_name(int l) {
    return l == MPI_THREAD_SINGLE       ? "MPI_THREAD_SINGLE"
           : l == MPI_THREAD_FUNNELED   ? "MPI_THREAD_FUNNELED"
           : l == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
           : l == MPI_THREAD_MULTIPLE   ? "MPI_THREAD_MULTIPLE"
                                        : "unknown";
}

int main(int argc, char **argv) {
    int nthreads = 4, opt, provided, i;
    pthread_t tids[MAX_THREADS];
    struct targ args[MAX_THREADS];
    MPI_Comm shared, churn_parent = MPI_COMM_NULL;
    pthread_t churn_tid;
    double t0;

    provided = tu_init_thread(&argc, &argv, "threads", MPI_THREAD_MULTIPLE);
    while ((opt = getopt(argc, argv, "t:i:s:acC:h")) != -1) {
        switch (opt) {
        case 't':
            nthreads = (int)tu_parse_long(optarg);
            break;
        case 'i':
            iters = (int)tu_parse_long(optarg);
            break;
        case 's':
            max_size = tu_parse_size(optarg);
            break;
        case 'a':
            any_source = 1;
            break;
        case 'c':
            churn = 1;
            break;
        case 'C':
            churn = 1;
            churn_comms = (int)tu_parse_long(optarg);
            break;
        case 'h':
            tu_usage("[-t NTHREADS] [-i ITERS] [-s MAXSIZE] [-a] [-c] [-C COMMS]", 0);
        default:
            tu_usage("[-t NTHREADS] [-i ITERS] [-s MAXSIZE] [-a] [-c] [-C COMMS]", 1);
        }
    }
    TU_ASSERT(provided >= MPI_THREAD_MULTIPLE,
              "MPI_THREAD_MULTIPLE required but MPI_Init_thread provided only %s",
              level_name(provided));
    TU_ASSERT(tu_size >= 2, "needs at least 2 ranks, got %d", tu_size);
    TU_ASSERT(nthreads >= 1 && nthreads <= MAX_THREADS, "NTHREADS must be 1..%d", MAX_THREADS);
    TU_ASSERT(max_size <= (1u << 30), "MAXSIZE too large");
    /* (below 1000: the values sent round the ring tell rounds and ranks apart) */
    TU_ASSERT(churn_comms >= 1 && churn_comms <= 999, "COMMS must be 1..999");

    partner = tu_pair_partner();
    MPI_Comm_dup(MPI_COMM_WORLD, &shared);
    for (i = 0; i < nthreads; i++) {
        args[i].id = i;
        args[i].shared = shared;
        MPI_Comm_dup(MPI_COMM_WORLD, &args[i].own);
    }
    if (churn) {
        int rc;

        MPI_Comm_dup(MPI_COMM_WORLD, &churn_parent); /* its collectives are the churn's alone */
        rc = pthread_create(&churn_tid, NULL, churn_main, &churn_parent);
        TU_ASSERT(rc == 0, "pthread_create failed: %s", strerror(rc));
    }
    t0 = MPI_Wtime();
    if (partner >= 0) {
        for (i = 0; i < nthreads; i++) {
            int rc = pthread_create(&tids[i], NULL, thread_main, &args[i]);

            TU_ASSERT(rc == 0, "pthread_create failed: %s", strerror(rc));
        }
        for (i = 0; i < nthreads; i++)
            pthread_join(tids[i], NULL);
    }
    if (churn) {
        pthread_join(churn_tid, NULL);
        MPI_Comm_free(&churn_parent);
    }
    t0 = MPI_Wtime() - t0;
    for (i = 0; i < nthreads; i++)
        MPI_Comm_free(&args[i].own);
    MPI_Comm_free(&shared);
    tu_ok("np=%d threads=%d iters=%d sizes=0..%zu own-comm%s,shared-comm%s churn=%d time=%.2fs",
          tu_size, nthreads, iters, max_size, any_source ? "(any-source)" : "",
          churn ? ",churn" : "", churn ? churn_comms : 0, t0);
    return 0;
}
