/*
 * many_outstanding: thousands of simultaneously outstanding isend/irecv
 * requests between even/odd rank pairs, in both directions at once, with
 * message sizes varying from 0 to MAXMSG bytes. Everything is completed with
 * a single MPI_Waitall and then verified (status source/tag/count and data).
 *
 * Rounds (each with COUNT messages per direction):
 *   0 "preposted":   all receives are posted, barrier, then all sends.
 *   1 "unexpected":  all sends are started, then all receives are posted
 *                    (most messages arrive unexpected).
 *   2 "interleaved": receive/send posted alternately.
 * Receives are posted with the maximum size so that a message matched to the
 * wrong receive shows up as a wrong count or wrong data, not a truncation.
 * Meant to be run with tiny provider queues to exercise resource-exhaustion
 * (retry) paths.
 *
 * Options: -n COUNT (default 10000), -s MAXMSG (default 8192).
 */
#include "test_util.h"

#define NTAGS 16

static const char *round_name[] = {"preposted", "unexpected", "interleaved"};

static size_t msg_size(int i, size_t max) {
    if (i % 97 == 0)
        return 0;
    return (size_t)(((uint64_t)i * 2654435761u) % (max + 1));
}

static void run_round(int round, int count, size_t max, int partner, char *sbuf, char *rbuf,
                      size_t *soff, MPI_Request *reqs, MPI_Status *st) {
    MPI_Request *rreq = reqs, *sreq = reqs + count;
    MPI_Status *rst = st;
    int i;

    /* sbuf holds all send messages back to back; rbuf has max bytes per slot */
    for (i = 0; i < count; i++)
        tu_fill(sbuf + soff[i], msg_size(i, max), tu_seed(round, i, tu_rank, 7));
    memset(rbuf, TU_POISON, (size_t)count * max);

#define POST_RECV(i)                                                                               \
    MPI_Irecv(rbuf + (size_t)(i)*max, (int)max, MPI_BYTE, partner, (i) % NTAGS, MPI_COMM_WORLD,    \
              &rreq[i])
#define POST_SEND(i)                                                                               \
    MPI_Isend(sbuf + soff[i], (int)msg_size(i, max), MPI_BYTE, partner, (i) % NTAGS,               \
              MPI_COMM_WORLD, &sreq[i])

    if (round == 0) {
        for (i = 0; i < count; i++)
            POST_RECV(i);
        MPI_Barrier(MPI_COMM_WORLD);
        for (i = 0; i < count; i++)
            POST_SEND(i);
    } else if (round == 1) {
        /*
         * No barrier here: a collective must not have to get through a
         * connection that is congested with unexpected data.
         */
        for (i = 0; i < count; i++)
            POST_SEND(i);
        for (i = 0; i < count; i++)
            POST_RECV(i);
    } else {
        for (i = 0; i < count; i++) {
            if (tu_rank % 2) {
                POST_SEND(i);
                POST_RECV(i);
            } else {
                POST_RECV(i);
                POST_SEND(i);
            }
        }
    }
#undef POST_RECV
#undef POST_SEND

    MPI_Waitall(2 * count, reqs, st);

    for (i = 0; i < count; i++) {
        size_t size = msg_size(i, max);
        int got;
        char what[128];

        snprintf(what, sizeof(what), "round %s message %d (size %zu) from rank %d",
                 round_name[round], i, size, partner);
        MPI_Get_count(&rst[i], MPI_BYTE, &got);
        TU_ASSERT(rst[i].MPI_SOURCE == partner, "%s: source expected %d got %d", what, partner,
                  rst[i].MPI_SOURCE);
        TU_ASSERT(rst[i].MPI_TAG == i % NTAGS, "%s: tag expected %d got %d", what, i % NTAGS,
                  rst[i].MPI_TAG);
        TU_ASSERT((size_t)got == size, "%s: count expected %zu got %d (matched out of order?)",
                  what, size, got);
        tu_verify(rbuf + (size_t)i * max, size, tu_seed(round, i, partner, 7), what);
        strncat(what, ": bytes past the message end", sizeof(what) - strlen(what) - 1);
        tu_verify_const(rbuf + (size_t)i * max + size, max - size, TU_POISON, what);
    }
}

int main(int argc, char **argv) {
    int count = 10000, partner, round, i;
    size_t max = 8192, total = 0, *soff;
    char *sbuf = NULL, *rbuf = NULL, tmp[32];
    MPI_Request *reqs;
    MPI_Status *st;
    double t0;

    tu_init(&argc, &argv, "many_outstanding");
    tu_parse_count_size(argc, argv, "[-n COUNT] [-s MAXMSG]", &count, &max);
    TU_ASSERT(tu_size >= 2, "needs at least 2 ranks, got %d", tu_size);
    TU_ASSERT(count >= 1 && max >= 1 && max <= (64u << 20), "bad COUNT/MAXMSG");

    partner = tu_pair_partner();
    soff = tu_malloc(sizeof(*soff) * count);
    for (i = 0; i < count; i++) {
        soff[i] = total;
        total += msg_size(i, max);
    }
    reqs = tu_malloc(sizeof(*reqs) * 2 * count);
    st = tu_malloc(sizeof(*st) * 2 * count);
    if (partner >= 0) {
        sbuf = tu_malloc(total);
        rbuf = tu_malloc((size_t)count * max);
    }
    t0 = MPI_Wtime();

    for (round = 0; round < 3; round++) {
        if (partner >= 0) {
            run_round(round, count, max, partner, sbuf, rbuf, soff, reqs, st);
        } else if (round == 0) {
            MPI_Barrier(MPI_COMM_WORLD); /* the idle rank joins the barrier */
        }
    }

    free(sbuf);
    free(rbuf);
    free(soff);
    free(reqs);
    free(st);
    tu_ok("np=%d count=%d per direction sizes=0..%s rounds=preposted,unexpected,interleaved "
          "time=%.2fs",
          tu_size, count, tu_fmt_size(max, tmp, sizeof(tmp)), MPI_Wtime() - t0);
    return 0;
}
