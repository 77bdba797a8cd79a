/*
 * cancel: cancelling receive requests.
 *
 * In each even/odd pair the odd rank receives and the even rank sends.
 *   unmatched: Irecv that can never match (specific tag, ANY_SOURCE/ANY_TAG,
 *              large buffer, a batch of 100) -> MPI_Cancel -> MPI_Wait (or a
 *              bounded MPI_Test loop) -> MPI_Test_cancelled must be true.
 *   no steal:  messages sent after those cancels, with the tags the cancelled
 *              receives would have matched, go to new receives intact.
 *   matched:   a receive that has completed (MPI_Request_get_status) and is
 *              then cancelled is not cancelled and has the right data.
 *   race:      cancel right after posting while the message may be in flight
 *              (after no, a short or a long wait, or after Iprobe saw it):
 *              either the receive is cancelled and the message is still
 *              received by the next receive, or it completed with the right
 *              data -- never lost, duplicated or both.
 *   after:     ping-pong in both directions still works.
 *   sends (-x, -X): the even rank posts sends nobody has matched yet
 *              (-x: a small MPI_Issend; -X also a large MPI_Isend, a large
 *              MPI_Issend and a large MPI_Ibsend, which pml cm completes
 *              at its start), cancels each and waits for it, which must
 *              return (bounded MPI_Test loop); then it tells the odd rank
 *              which ones MPI_Test_cancelled reported.  A cancelled message
 *              must never arrive (Iprobe finds nothing), any other one must
 *              arrive intact.  Not every transport completes such sends
 *              (pml ob1 cancels none): the runner passes -X to mtl_efa,
 *              whose on-node rings and own matching cancel them, and whose
 *              provider path has the receiver withdraw a large one
 *              (docs/RELIABILITY.md, "Cancelling sends"), and -X -P where
 *              nothing can be withdrawn (no seq in the tag layout).
 *              Then each case's envelope is sent again as an MPI_Issend,
 *              which must complete and arrive intact (nothing a cancel
 *              left posted may take its acknowledgement).
 *   held (-P, with -X): mtl_efa's provider path without withdrawal: a
 *              large send the provider holds until the receiver matches
 *              it cannot be cancelled, and completes only once the receive
 *              is posted.  A large case not complete after HOLD_WAIT
 *              seconds is "held": the receiver then posts its receive,
 *              which must get the message intact, and the sender's
 *              MPI_Wait must then return with the send not cancelled.
 *   unexpected (-U): the even rank sends messages of every mode and
 *              size (Isend, Issend, Ibsend, Irsend of 100 bytes; Isend of 0
 *              and 4000 bytes; Isend, Issend, Ibsend of LARGE); the odd rank
 *              Iprobes until each waits in its unexpected queue, then lets
 *              the sender cancel them all: each must be reported cancelled,
 *              a standard-mode one complete before MPI_Cancel included
 *              (MPICH's scancel and scancel_unmatch).  The receiver must
 *              then find none of them (Iprobe), and a later message with
 *              the same tag must arrive intact.  The runner passes -U where
 *              mtl_efa's engine matches the pair's messages (its rings, its
 *              own matching), which withdraws any unmatched message.
 *
 * Options: -n RACE_ITERS (default 200), -s LARGE (default 1M), -x, -X, -P, -U.
 */
#include "test_util.h"

#define TAG_GO 98
#define TAG_NEVER 77
#define POLL_LIMIT 30.0

static size_t large = 1u << 20;

static void check_cancelled(MPI_Status *st, int expect, const char *what) {
    int flag = -1;

    MPI_Test_cancelled(st, &flag);
    TU_ASSERT(flag == expect, "%s: MPI_Test_cancelled expected %s got %s", what,
              expect ? "true" : "false", flag ? "true" : "false");
}

static void send_go(int peer) {
    MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_GO, MPI_COMM_WORLD);
}

static void wait_go(int peer) {
    MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void unmatched(int peer, char *buf) {
    MPI_Request req, reqs[100];
    MPI_Status st, sts[100];
    int i, flag = 0;
    double t0;

    MPI_Irecv(buf, 64, MPI_BYTE, peer, TAG_NEVER, MPI_COMM_WORLD, &req);
    MPI_Cancel(&req);
    MPI_Wait(&req, &st);
    check_cancelled(&st, 1, "unmatched Irecv(specific source and tag)");
    TU_ASSERT(req == MPI_REQUEST_NULL, "request not freed by MPI_Wait after cancel");

    MPI_Irecv(buf, 64, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &req);
    MPI_Cancel(&req);
    t0 = MPI_Wtime();
    do {
        MPI_Test(&req, &flag, &st);
        TU_ASSERT(flag || MPI_Wtime() - t0 < POLL_LIMIT,
                  "cancelled Irecv(ANY_SOURCE, ANY_TAG) not complete after %.0f s", POLL_LIMIT);
    } while (!flag);
    check_cancelled(&st, 1, "unmatched Irecv(ANY_SOURCE, ANY_TAG) completed by MPI_Test");

    MPI_Irecv(buf, (int)large, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &req);
    MPI_Cancel(&req);
    MPI_Wait(&req, &st);
    check_cancelled(&st, 1, "unmatched large Irecv(tag 5)");

    for (i = 0; i < 100; i++)
        MPI_Irecv(buf + (size_t)i * 64, 64, MPI_BYTE, i % 3 ? peer : MPI_ANY_SOURCE,
                  i % 2 ? 5 : MPI_ANY_TAG, MPI_COMM_WORLD, &reqs[i]);
    for (i = 99; i >= 0; i--)
        MPI_Cancel(&reqs[i]);
    MPI_Waitall(100, reqs, sts);
    for (i = 0; i < 100; i++)
        check_cancelled(&sts[i], 1, "batch of 100 cancelled Irecvs");
}

/* After the cancels the messages with tag 5 must reach new receives. */
static void no_steal_recv(int peer, char *buf) {
    MPI_Status st;

    memset(buf, TU_POISON, large);
    send_go(peer);
    MPI_Recv(buf, (int)large, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &st);
    tu_verify_recv(buf, &st, peer, 5, 1000, tu_seed(5, 0, 0, 0), "small message after cancels");
    MPI_Recv(buf, (int)large, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    tu_verify_recv(buf, &st, peer, 5, large, tu_seed(5, 1, 0, 0), "large message after cancels");
}

static void matched(int peer, char *buf) {
    size_t sizes[2] = {100, large};
    int i, flag;
    MPI_Request req;
    MPI_Status st;
    double t0;

    for (i = 0; i < 2; i++) {
        memset(buf, TU_POISON, sizes[i]);
        MPI_Irecv(buf, (int)sizes[i], MPI_BYTE, peer, 6, MPI_COMM_WORLD, &req);
        send_go(peer);
        t0 = MPI_Wtime();
        do {
            MPI_Request_get_status(req, &flag, &st);
            TU_ASSERT(flag || MPI_Wtime() - t0 < POLL_LIMIT,
                      "matched receive of %zu bytes not complete after %.0f s", sizes[i],
                      POLL_LIMIT);
        } while (!flag);
        MPI_Cancel(&req);
        MPI_Wait(&req, &st);
        check_cancelled(&st, 0, "completed receive then MPI_Cancel");
        tu_verify_recv(buf, &st, peer, 6, sizes[i], tu_seed(6, i, 0, 0),
                       "completed receive then MPI_Cancel");
    }
}

static int race(int peer, char *buf, int iters) {
    int i, ncancelled = 0;
    MPI_Request req;
    MPI_Status st;
    char what[96];

    for (i = 0; i < iters; i++) {
        size_t size = i % 5 == 4 ? large : (size_t)(i * 37) % 4000;
        uint64_t seed = tu_seed(8, i, 0, 0);
        double spin = (i % 4 == 1) ? 20e-6 : (i % 4 == 2) ? 200e-6 : 0, t0;
        int cancelled = 0, flag = 0;

        memset(buf, TU_POISON, size);
        send_go(peer);
        /* vary how far the message has got: spin in the progress engine */
        t0 = MPI_Wtime();
        while (MPI_Wtime() - t0 < spin)
            MPI_Iprobe(peer, TAG_NEVER, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        while (i % 4 == 3 && !flag) {
            MPI_Iprobe(peer, 8, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            TU_ASSERT(flag || MPI_Wtime() - t0 < POLL_LIMIT, "race message %d not seen", i);
        }
        MPI_Irecv(buf, (int)size, MPI_BYTE, peer, 8, MPI_COMM_WORLD, &req);
        MPI_Cancel(&req);
        MPI_Wait(&req, &st);
        MPI_Test_cancelled(&st, &cancelled);
        snprintf(what, sizeof(what), "race iteration %d (%zu bytes, %s)", i, size,
                 cancelled ? "cancelled" : "not cancelled");
        if (cancelled) {
            ncancelled++;
            tu_verify_const(buf, size, TU_POISON, "buffer of a cancelled receive");
            MPI_Recv(buf, (int)size, MPI_BYTE, peer, 8, MPI_COMM_WORLD, &st);
        }
        tu_verify_recv(buf, &st, peer, 8, size, seed, what);
    }
    return ncancelled;
}

static void sender(int peer, char *buf, int iters) {
    int i;

    /* no steal */
    wait_go(peer);
    tu_fill(buf, 1000, tu_seed(5, 0, 0, 0));
    MPI_Send(buf, 1000, MPI_BYTE, peer, 5, MPI_COMM_WORLD);
    tu_fill(buf, large, tu_seed(5, 1, 0, 0));
    MPI_Send(buf, (int)large, MPI_BYTE, peer, 5, MPI_COMM_WORLD);
    /* matched */
    for (i = 0; i < 2; i++) {
        size_t size = i ? large : 100;

        wait_go(peer);
        tu_fill(buf, size, tu_seed(6, i, 0, 0));
        MPI_Send(buf, (int)size, MPI_BYTE, peer, 6, MPI_COMM_WORLD);
    }
    /* race */
    for (i = 0; i < iters; i++) {
        size_t size = i % 5 == 4 ? large : (size_t)(i * 37) % 4000;

        wait_go(peer);
        tu_fill(buf, size, tu_seed(8, i, 0, 0));
        MPI_Send(buf, (int)size, MPI_BYTE, peer, 8, MPI_COMM_WORLD);
    }
}

#define TAG_SENDS 60
#define SEND_CASES 4
#define HOLD_WAIT 2.0 /* seconds before a large send counts as held (-P) */

static int allow_held; /* -P */

/* Case i of the send cancels: its size and its mode. */
static size_t send_case_size(int i) {
    return i == 0 ? 100 : large;
}
static const char *send_case_mode(int i) {
    return i == 1 ? "Isend" : i == 3 ? "Ibsend" : "Issend";
}

static void cancel_sends(int peer, char *buf, int ncases) {
    /* flags[i]: MPI_Test_cancelled of case i; flags[SEND_CASES + i]: held */
    int flags[2 * SEND_CASES] = {0};
    char *held_buf[SEND_CASES] = {NULL};
    MPI_Request held_req[SEND_CASES];
    int bsend_size = (int)large + MPI_BSEND_OVERHEAD; /* (MPI_BYTE packs as it is) */
    char *bsend = tu_malloc((size_t)bsend_size);

    MPI_Buffer_attach(bsend, bsend_size);
    for (int i = 0; i < ncases; i++) {
        size_t size = send_case_size(i);
        char *sbuf = tu_malloc(size);
        MPI_Request req;
        MPI_Status st;
        int done = 0;
        double t0, limit = allow_held && i > 0 ? HOLD_WAIT : POLL_LIMIT;

        tu_fill(sbuf, size, tu_seed(12, i, 0, 0));
        if (i == 1)
            MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, TAG_SENDS + i, MPI_COMM_WORLD, &req);
        else if (i == 3)
            MPI_Ibsend(sbuf, (int)size, MPI_BYTE, peer, TAG_SENDS + i, MPI_COMM_WORLD, &req);
        else
            MPI_Issend(sbuf, (int)size, MPI_BYTE, peer, TAG_SENDS + i, MPI_COMM_WORLD, &req);
        MPI_Cancel(&req);
        t0 = MPI_Wtime();
        do {
            MPI_Test(&req, &done, &st);
            /* Read once: with two reads, the limit could pass between the
             * held check and the assertion (a preempted rank), failing a
             * send that is merely held. */
            double waited = MPI_Wtime() - t0;
            if (!done && limit == HOLD_WAIT && waited >= limit)
                break; /* held: the receiver will post (see the header) */
            TU_ASSERT(done || waited < limit,
                      "send case %d (%zu bytes, %s): MPI_Test after MPI_Cancel not complete after "
                      "%.0f s (the receiver has posted nothing)",
                      i, size, send_case_mode(i), limit);
        } while (!done);
        if (!done) {
            flags[SEND_CASES + i] = 1;
            held_buf[i] = sbuf; /* the provider may still read it */
            held_req[i] = req;
            continue;
        }
        MPI_Test_cancelled(&st, &flags[i]);
        /* Cancelled or not, the buffer is the sender's again: scribble. */
        memset(sbuf, TU_POISON, size);
        free(sbuf);
    }
    (void)buf;
    MPI_Send(flags, 2 * SEND_CASES, MPI_INT, peer, TAG_GO, MPI_COMM_WORLD);
    for (int i = 0; i < ncases; i++) {
        MPI_Status st;
        int done = 0, cancelled = -1;
        double t0 = MPI_Wtime();

        if (!flags[SEND_CASES + i])
            continue;
        do {
            MPI_Test(&held_req[i], &done, &st);
            TU_ASSERT(done || MPI_Wtime() - t0 < POLL_LIMIT,
                      "held send case %d (%zu bytes): not complete %.0f s after the receiver was "
                      "told to post its receive",
                      i, send_case_size(i), POLL_LIMIT);
        } while (!done);
        MPI_Test_cancelled(&st, &cancelled);
        TU_ASSERT(!cancelled,
                  "held send case %d (%zu bytes): reported cancelled, but its receive was posted "
                  "and must have matched it",
                  i, send_case_size(i));
        free(held_buf[i]);
    }
    /* (waits for a buffered message the provider still carries) */
    MPI_Buffer_detach(&bsend, &bsend_size);
    free(bsend);
}

/* Returns how many sends were reported cancelled; *held how many were
 * held until this receiver posted. */
static int cancelled_sends_recv(int peer, char *buf, int ncases, int *held) {
    int flags[2 * SEND_CASES], n = 0;

    *held = 0;
    MPI_Recv(flags, 2 * SEND_CASES, MPI_INT, peer, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < ncases; i++) {
        size_t size = send_case_size(i);
        char what[96];
        MPI_Status st;

        snprintf(what, sizeof(what), "send case %d (%zu bytes, %s) %s", i, size, send_case_mode(i),
                 flags[SEND_CASES + i] ? "held until the receive was posted"
                 : flags[i]            ? "reported cancelled"
                                       : "reported not cancelled");
        TU_ASSERT(allow_held || !flags[SEND_CASES + i], "%s without -P", what);
        if (flags[i]) {
            int found = 1;

            /* The sender's cancel completed before it sent the flags. */
            MPI_Iprobe(peer, TAG_SENDS + i, MPI_COMM_WORLD, &found, &st);
            TU_ASSERT(!found, "%s: the message arrived all the same", what);
            n++;
        } else {
            /* Not cancelled (or held): the message must arrive. */
            *held += flags[SEND_CASES + i];
            memset(buf, TU_POISON, size);
            MPI_Recv(buf, (int)size, MPI_BYTE, peer, TAG_SENDS + i, MPI_COMM_WORLD, &st);
            tu_verify_recv(buf, &st, peer, TAG_SENDS + i, size, tu_seed(12, i, 0, 0), what);
        }
    }
    return n;
}

/* Then each case's envelope again, as a synchronous send: what a cancel
 * left behind (a withdrawn synchronous send's acknowledgement receive)
 * must not take the next one's acknowledgement, or its MPI_Wait never
 * returns. */
static void resend_sends(int peer, int ncases) {
    wait_go(peer); /* the receiver's checks that cancelled ones never arrive are done */
    for (int i = 0; i < ncases; i++) {
        size_t size = send_case_size(i);
        char *sbuf = tu_malloc(size);
        MPI_Request req;
        int done = 0;
        double t0 = MPI_Wtime();

        tu_fill(sbuf, size, tu_seed(13, i, 0, 0));
        MPI_Issend(sbuf, (int)size, MPI_BYTE, peer, TAG_SENDS + i, MPI_COMM_WORLD, &req);
        do {
            MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            TU_ASSERT(done || MPI_Wtime() - t0 < POLL_LIMIT,
                      "send case %d's envelope again (%zu bytes, Issend): not complete %.0f s "
                      "after it was sent (its receive is posted)",
                      i, size, POLL_LIMIT);
        } while (!done);
        free(sbuf);
    }
}

static void resend_recv(int peer, char *buf, int ncases) {
    send_go(peer);
    for (int i = 0; i < ncases; i++) {
        size_t size = send_case_size(i);
        MPI_Status st;

        memset(buf, TU_POISON, size);
        MPI_Recv(buf, (int)size, MPI_BYTE, peer, TAG_SENDS + i, MPI_COMM_WORLD, &st);
        tu_verify_recv(buf, &st, peer, TAG_SENDS + i, size, tu_seed(13, i, 0, 0),
                       "a send case's envelope again");
    }
}

#define TAG_UNEXP 70
#define UNEXP_CASES 9

/* Case i of the unexpected sends: its size and mode ('s' standard, 'y'
 * synchronous, 'b' buffered, 'r' ready).  A large buffered one is complete
 * for MPI at once (pml cm), before its message is. */
static size_t unexp_size(int i) {
    static const size_t small[] = {100, 100, 100, 100, 0, 4000};
    return i < 6 ? small[i] : large;
}
static char unexp_mode(int i) {
    return "sybrsssyb"[i];
}

static void unexp_send(int peer) {
    MPI_Request reqs[UNEXP_CASES];
    char *bufs[UNEXP_CASES];
    int flags[UNEXP_CASES], size, size2;
    char *bsend;

    MPI_Pack_size(100, MPI_BYTE, MPI_COMM_WORLD, &size);
    MPI_Pack_size((int)large, MPI_BYTE, MPI_COMM_WORLD, &size2);
    size += size2 + 2 * MPI_BSEND_OVERHEAD;
    bsend = tu_malloc((size_t)size);
    MPI_Buffer_attach(bsend, size);
    for (int i = 0; i < UNEXP_CASES; i++) {
        size_t n = unexp_size(i);
        int tag = TAG_UNEXP + i;

        bufs[i] = tu_malloc(n);
        tu_fill(bufs[i], n, tu_seed(14, i, 0, 0));
        switch (unexp_mode(i)) {
        case 'y':
            MPI_Issend(bufs[i], (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[i]);
            break;
        case 'b':
            MPI_Ibsend(bufs[i], (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[i]);
            break;
        case 'r': /* (no receive posted: erroneous, as in MPICH's scancel) */
            MPI_Irsend(bufs[i], (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[i]);
            break;
        default:
            MPI_Isend(bufs[i], (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[i]);
        }
    }
    wait_go(peer); /* every message waits unexpected at the receiver now */
    for (int i = 0; i < UNEXP_CASES; i++) {
        MPI_Status st;
        int done = 0;
        double t0 = MPI_Wtime();

        MPI_Cancel(&reqs[i]);
        do {
            MPI_Test(&reqs[i], &done, &st);
            TU_ASSERT(done || MPI_Wtime() - t0 < POLL_LIMIT,
                      "unexpected case %d (%zu bytes, mode %c): not complete %.0f s after "
                      "MPI_Cancel",
                      i, unexp_size(i), unexp_mode(i), POLL_LIMIT);
        } while (!done);
        MPI_Test_cancelled(&st, &flags[i]);
        TU_ASSERT(flags[i],
                  "unexpected case %d (%zu bytes, mode %c): waiting unmatched at the receiver, "
                  "reported not cancelled",
                  i, unexp_size(i), unexp_mode(i));
        free(bufs[i]);
    }
    MPI_Send(flags, UNEXP_CASES, MPI_INT, peer, TAG_GO, MPI_COMM_WORLD);
    /* The same tags again, once the receiver has looked for the cancelled
     * ones: these must arrive, and intact. */
    wait_go(peer);
    for (int i = 0; i < UNEXP_CASES; i++) {
        size_t n = unexp_size(i);
        char *b = tu_malloc(n);

        tu_fill(b, n, tu_seed(14, i, 1, 0));
        MPI_Send(b, (int)n, MPI_BYTE, peer, TAG_UNEXP + i, MPI_COMM_WORLD);
        free(b);
    }
    MPI_Buffer_detach(&bsend, &size);
    free(bsend);
}

static void unexp_recv(int peer, char *buf) {
    int flags[UNEXP_CASES];

    for (int i = 0; i < UNEXP_CASES; i++) {
        int found = 0;
        double t0 = MPI_Wtime();

        while (!found) {
            MPI_Iprobe(peer, TAG_UNEXP + i, MPI_COMM_WORLD, &found, MPI_STATUS_IGNORE);
            TU_ASSERT(found || MPI_Wtime() - t0 < POLL_LIMIT,
                      "unexpected case %d: the message did not arrive in %.0f s", i, POLL_LIMIT);
        }
    }
    send_go(peer);
    MPI_Recv(flags, UNEXP_CASES, MPI_INT, peer, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < UNEXP_CASES; i++) {
        int found = 1;

        /* Cancelled before the sender sent the flags: gone for good. */
        MPI_Iprobe(peer, TAG_UNEXP + i, MPI_COMM_WORLD, &found, MPI_STATUS_IGNORE);
        TU_ASSERT(!found, "unexpected case %d (%zu bytes, mode %c): cancelled, yet receivable", i,
                  unexp_size(i), unexp_mode(i));
    }
    send_go(peer);
    for (int i = 0; i < UNEXP_CASES; i++) {
        size_t n = unexp_size(i);
        char what[96];
        MPI_Status st;

        snprintf(what, sizeof(what), "unexpected case %d (%zu bytes, mode %c), the later message",
                 i, n, unexp_mode(i));
        memset(buf, TU_POISON, n);
        MPI_Recv(buf, (int)n, MPI_BYTE, peer, TAG_UNEXP + i, MPI_COMM_WORLD, &st);
        tu_verify_recv(buf, &st, peer, TAG_UNEXP + i, n, tu_seed(14, i, 1, 0), what);
    }
}

/* Verified exchange in both directions after all the cancelling. */
static void after(int peer, char *sbuf, char *rbuf) {
    size_t sizes[3] = {0, 3000, large};
    int i;
    MPI_Status st;

    for (i = 0; i < 3; i++) {
        tu_fill(sbuf, sizes[i], tu_seed(9, i, tu_rank, 0));
        memset(rbuf, TU_POISON, sizes[i]);
        MPI_Sendrecv(sbuf, (int)sizes[i], MPI_BYTE, peer, 9, rbuf, (int)sizes[i], MPI_BYTE, peer, 9,
                     MPI_COMM_WORLD, &st);
        tu_verify_recv(rbuf, &st, peer, 9, sizes[i], tu_seed(9, i, peer, 0),
                       "exchange after cancel tests");
    }
}

int main(int argc, char **argv) {
    int iters = 200, opt, partner, ncancelled = 0, send_cases = 0, nsends = 0, nheld = 0;
    int unexp = 0;
    char *buf, *buf2;

    tu_init(&argc, &argv, "cancel");
    while ((opt = getopt(argc, argv, "n:s:xXPUh")) != -1) {
        switch (opt) {
        case 'n':
            iters = (int)tu_parse_long(optarg);
            break;
        case 's':
            large = tu_parse_size(optarg);
            break;
        case 'x':
            send_cases = send_cases > 1 ? send_cases : 1;
            break;
        case 'X':
            send_cases = SEND_CASES;
            break;
        case 'P':
            allow_held = 1;
            break;
        case 'U':
            unexp = 1;
            break;
        case 'h':
            tu_usage("[-n RACE_ITERS] [-s LARGE] [-x|-X [-P]] [-U]", 0);
        default:
            tu_usage("[-n RACE_ITERS] [-s LARGE] [-x|-X [-P]] [-U]", 1);
        }
    }
    TU_ASSERT(tu_size >= 2, "needs at least 2 ranks, got %d", tu_size);
    TU_ASSERT(large >= 6400 && large < (1u << 30), "LARGE must be in [6400, 1G)");

    partner = tu_pair_partner();
    buf = tu_malloc(large);
    buf2 = tu_malloc(large);
    if (partner >= 0) {
        if (tu_rank % 2) {
            unmatched(partner, buf);
            no_steal_recv(partner, buf);
            matched(partner, buf);
            ncancelled = race(partner, buf, iters);
            if (send_cases) {
                nsends = cancelled_sends_recv(partner, buf, send_cases, &nheld);
                resend_recv(partner, buf, send_cases);
            }
            if (unexp)
                unexp_recv(partner, buf);
        } else {
            sender(partner, buf, iters);
            if (send_cases) {
                cancel_sends(partner, buf, send_cases);
                resend_sends(partner, send_cases);
            }
            if (unexp)
                unexp_send(partner);
        }
        after(partner, buf, buf2);
    }
    if (tu_rank == 0 && tu_size > 1)
        MPI_Recv(&ncancelled, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else if (tu_rank == 1)
        MPI_Send(&ncancelled, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
    free(buf);
    free(buf2);
    if (tu_rank == 0 && tu_size > 1) {
        MPI_Recv(&nsends, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(&nheld, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (tu_rank == 1) {
        MPI_Send(&nsends, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
        MPI_Send(&nheld, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
    }
    tu_ok("np=%d unmatched,no_steal,matched,race(%d iters, %d cancelled at rank 1),after%s%s "
          "(%d of %d cancelled at rank 0, %d held until the receive was posted)",
          tu_size, iters, ncancelled, send_cases ? ",sends" : "",
          unexp ? ",unexpected(9 of 9 cancelled)" : "", nsends, send_cases, nheld);
    return 0;
}
