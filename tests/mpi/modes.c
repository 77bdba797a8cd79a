/*
 * modes: send modes and special cases.
 *
 *   bsend:      MPI_Buffer_attach, then many MPI_Bsend (0 B .. LARGE) that
 *               must complete before the receiver posts anything; the send
 *               buffer is scribbled over right after each Bsend;
 *               MPI_Buffer_detach returns the attached buffer.
 *   rsend:      MPI_Rsend and MPI_Irsend to receives pre-posted before a
 *               pair synchronisation.
 *   persistent: MPI_Send_init/MPI_Ssend_init/MPI_Recv_init with MPI_Start and
 *               MPI_Startall over many iterations with new data each time.
 *   sendrecv:   MPI_Sendrecv and MPI_Sendrecv_replace around a ring of all
 *               ranks, small to LARGE.
 *   zero:       zero-byte messages (NULL buffer, blocking and nonblocking,
 *               matched by ANY_TAG) have count 0.
 *   proc_null:  every operation on MPI_PROC_NULL completes at once with
 *               source MPI_PROC_NULL, tag MPI_ANY_TAG, count 0 and does not
 *               touch the buffer.
 * Pair steps use even/odd pairs (even sends); the ring uses all ranks.
 *
 * Options: -s LARGE (default 1M), -i persistent iterations (default 50).
 */
#include "test_util.h"

#define TAG_SYNC 90

static size_t large = 1u << 20;
static int iters = 50;

static void pair_sync(int peer) {
    MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, TAG_SYNC, NULL, 0, MPI_BYTE, peer, TAG_SYNC,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static size_t bsend_size(int k) {
    static const size_t s[] = {0, 1, 100, 4097, 65537};

    return k == 9 ? large : s[k % 5];
}

#define NBSEND 10

static void bsend(int peer, char *buf, char *rbuf) {
    char what[96];
    int k;

    if (tu_rank % 2 == 0) {
        int total = 0, ps, dsize;
        char *att, *det;

        for (k = 0; k < NBSEND; k++) {
            MPI_Pack_size((int)bsend_size(k), MPI_BYTE, MPI_COMM_WORLD, &ps);
            total += ps + MPI_BSEND_OVERHEAD;
        }
        att = tu_malloc((size_t)total);
        MPI_Buffer_attach(att, total);
        for (k = 0; k < NBSEND; k++) {
            tu_fill(buf, bsend_size(k), tu_seed(1, k, 0, 0));
            MPI_Bsend(buf, (int)bsend_size(k), MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            memset(buf, 0x5a, bsend_size(k)); /* the data must have been copied */
        }
        /* all Bsends completed although nothing is posted yet: tell the receiver */
        MPI_Send(NULL, 0, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
        MPI_Buffer_detach(&det, &dsize);
        TU_ASSERT(det == att && dsize == total, "MPI_Buffer_detach returned %p/%d, attached %p/%d",
                  (void *)det, dsize, (void *)att, total);
        free(att);
    } else {
        MPI_Status st;

        MPI_Recv(NULL, 0, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (k = 0; k < NBSEND; k++) {
            snprintf(what, sizeof(what), "bsend message %d (%zu bytes)", k, bsend_size(k));
            memset(rbuf, TU_POISON, bsend_size(k));
            MPI_Recv(rbuf, (int)large, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st);
            tu_verify_recv(rbuf, &st, peer, 1, bsend_size(k), tu_seed(1, k, 0, 0), what);
        }
    }
}

static void rsend(int peer, char *buf, char *rbuf) {
    size_t sizes[3] = {0, 100, large};
    int i;

    for (i = 0; i < 3; i++) {
        uint64_t seed = tu_seed(2, i, 0, 0);
        char what[64];

        if (tu_rank % 2 == 0) {
            MPI_Request req;

            tu_fill(buf, sizes[i], seed);
            pair_sync(peer); /* the receives are posted */
            MPI_Rsend(buf, (int)sizes[i], MPI_BYTE, peer, 3, MPI_COMM_WORLD);
            MPI_Irsend(buf, (int)sizes[i], MPI_BYTE, peer, 4, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Request req[2];
            MPI_Status st[2];

            memset(rbuf, TU_POISON, 2 * sizes[i]);
            MPI_Irecv(rbuf, (int)sizes[i], MPI_BYTE, peer, 3, MPI_COMM_WORLD, &req[0]);
            MPI_Irecv(rbuf + sizes[i], (int)sizes[i], MPI_BYTE, peer, 4, MPI_COMM_WORLD, &req[1]);
            pair_sync(peer);
            MPI_Waitall(2, req, st);
            snprintf(what, sizeof(what), "rsend of %zu bytes", sizes[i]);
            tu_verify_recv(rbuf, &st[0], peer, 3, sizes[i], seed, what);
            snprintf(what, sizeof(what), "irsend of %zu bytes", sizes[i]);
            tu_verify_recv(rbuf + sizes[i], &st[1], peer, 4, sizes[i], seed, what);
        }
    }
}

/* One round of the two persistent requests: started and completed
 * together, or one after the other (both ways must work). */
static void run_both(MPI_Request req[2], MPI_Status st[2], int together) {
    if (together) {
        MPI_Startall(2, req);
        MPI_Waitall(2, req, st);
    } else {
        MPI_Start(&req[0]);
        MPI_Wait(&req[0], &st[0]);
        MPI_Start(&req[1]);
        MPI_Wait(&req[1], &st[1]);
    }
}

static void persistent(int peer, char *buf, char *rbuf) {
    size_t size = 5000;
    MPI_Request req[2];
    MPI_Status st[2];
    char what[80];
    int it;

    if (tu_rank % 2 == 0) {
        MPI_Send_init(buf, (int)size, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &req[0]);
        MPI_Ssend_init(buf + size, (int)size, MPI_BYTE, peer, 6, MPI_COMM_WORLD, &req[1]);
        for (it = 0; it < iters; it++) {
            tu_fill(buf, size, tu_seed(3, it, 0, 0));
            tu_fill(buf + size, size, tu_seed(3, it, 1, 0));
            run_both(req, st, it % 2);
            TU_ASSERT(req[0] != MPI_REQUEST_NULL, "persistent request freed by MPI_Wait");
        }
    } else {
        MPI_Recv_init(rbuf, (int)size, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &req[0]);
        MPI_Recv_init(rbuf + size, (int)size, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                      &req[1]);
        for (it = 0; it < iters; it++) {
            memset(rbuf, TU_POISON, 2 * size);
            run_both(req, st, it % 2);
            snprintf(what, sizeof(what), "persistent send iteration %d", it);
            tu_verify_recv(rbuf, &st[0], peer, 5, size, tu_seed(3, it, 0, 0), what);
            snprintf(what, sizeof(what), "persistent ssend iteration %d", it);
            tu_verify_recv(rbuf + size, &st[1], peer, 6, size, tu_seed(3, it, 1, 0), what);
        }
    }
    MPI_Request_free(&req[0]);
    MPI_Request_free(&req[1]);
}

static void ring(char *buf, char *rbuf) {
    size_t sizes[4] = {0, 3, 70000, large};
    int next = (tu_rank + 1) % tu_size, prev = (tu_rank - 1 + tu_size) % tu_size, i;
    MPI_Status st;
    char what[80];

    for (i = 0; i < 4; i++) {
        tu_fill(buf, sizes[i], tu_seed(4, i, tu_rank, 0));
        memset(rbuf, TU_POISON, sizes[i]);
        MPI_Sendrecv(buf, (int)sizes[i], MPI_BYTE, next, 7, rbuf, (int)sizes[i], MPI_BYTE, prev, 7,
                     MPI_COMM_WORLD, &st);
        snprintf(what, sizeof(what), "sendrecv of %zu bytes around the ring", sizes[i]);
        tu_verify_recv(rbuf, &st, prev, 7, sizes[i], tu_seed(4, i, prev, 0), what);

        tu_fill(buf, sizes[i], tu_seed(5, i, tu_rank, 0));
        MPI_Sendrecv_replace(buf, (int)sizes[i], MPI_BYTE, next, 8, prev, 8, MPI_COMM_WORLD, &st);
        snprintf(what, sizeof(what), "sendrecv_replace of %zu bytes around the ring", sizes[i]);
        tu_verify_recv(buf, &st, prev, 8, sizes[i], tu_seed(5, i, prev, 0), what);
    }
}

static void zero(int peer) {
    MPI_Request req[3];
    MPI_Status st[3];
    int i;

    if (tu_rank % 2 == 0) {
        MPI_Send(NULL, 0, MPI_BYTE, peer, 10, MPI_COMM_WORLD);
        MPI_Isend(NULL, 0, MPI_INT, peer, 11, MPI_COMM_WORLD, &req[0]);
        MPI_Ssend(NULL, 0, MPI_DOUBLE, peer, 12, MPI_COMM_WORLD);
        MPI_Wait(&req[0], MPI_STATUS_IGNORE);
    } else {
        char buf[16];

        memset(buf, TU_POISON, sizeof(buf));
        MPI_Irecv(buf, 16, MPI_BYTE, peer, MPI_ANY_TAG, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(NULL, 0, MPI_INT, MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &req[1]);
        MPI_Irecv(buf + 8, 8, MPI_BYTE, peer, 12, MPI_COMM_WORLD, &req[2]);
        MPI_Waitall(3, req, st);
        for (i = 0; i < 3; i++) {
            int count = -1;

            MPI_Get_count(&st[i], MPI_BYTE, &count);
            TU_ASSERT(count == 0 && st[i].MPI_SOURCE == peer && st[i].MPI_TAG == 10 + i,
                      "zero-byte message %d: expected count 0 source %d tag %d, got count %d "
                      "source %d tag %d",
                      i, peer, 10 + i, count, st[i].MPI_SOURCE, st[i].MPI_TAG);
        }
        tu_verify_const(buf, sizeof(buf), TU_POISON, "buffer of zero-byte receives");
    }
}

static void check_null(MPI_Status *st, const char *what) {
    int count = -1;

    MPI_Get_count(st, MPI_BYTE, &count);
    TU_ASSERT(st->MPI_SOURCE == MPI_PROC_NULL && st->MPI_TAG == MPI_ANY_TAG && count == 0,
              "%s with MPI_PROC_NULL: expected source MPI_PROC_NULL tag MPI_ANY_TAG count 0, got "
              "source %d tag %d count %d",
              what, st->MPI_SOURCE, st->MPI_TAG, count);
}

static void proc_null(void) {
    char buf[64];
    MPI_Status st;
    MPI_Request req;

    memset(buf, TU_POISON, sizeof(buf));
    MPI_Send(buf, 64, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
    MPI_Ssend(buf, 64, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
    MPI_Isend(buf, 64, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Recv(buf, 64, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st);
    check_null(&st, "MPI_Recv");
    MPI_Irecv(buf, 64, MPI_BYTE, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, &st);
    check_null(&st, "MPI_Irecv");
    MPI_Sendrecv(buf, 32, MPI_BYTE, MPI_PROC_NULL, 1, buf + 32, 32, MPI_BYTE, MPI_PROC_NULL, 1,
                 MPI_COMM_WORLD, &st);
    check_null(&st, "MPI_Sendrecv");
    tu_verify_const(buf, sizeof(buf), TU_POISON, "buffer of MPI_PROC_NULL operations");
}

int main(int argc, char **argv) {
    int opt, peer;
    char *buf, *rbuf;

    tu_init(&argc, &argv, "modes");
    while ((opt = getopt(argc, argv, "s:i:h")) != -1) {
        switch (opt) {
        case 's':
            large = tu_parse_size(optarg);
            break;
        case 'i':
            iters = (int)tu_parse_long(optarg);
            break;
        case 'h':
            tu_usage("[-s LARGE] [-i ITERS]", 0);
        default:
            tu_usage("[-s LARGE] [-i ITERS]", 1);
        }
    }
    TU_ASSERT(tu_size >= 2, "needs at least 2 ranks, got %d", tu_size);
    TU_ASSERT(large >= 70000 && large <= (256u << 20), "LARGE must be in [70000, 256M]");
    buf = tu_malloc(2 * large);
    rbuf = tu_malloc(2 * large);
    peer = tu_pair_partner();

    if (peer >= 0) {
        bsend(peer, buf, rbuf);
        rsend(peer, buf, rbuf);
        persistent(peer, buf, rbuf);
        zero(peer);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ring(buf, rbuf);
    proc_null();

    free(buf);
    free(rbuf);
    tu_ok("np=%d bsend,rsend,irsend,persistent(%d),sendrecv,sendrecv_replace,zero,proc_null",
          tu_size, iters);
    return 0;
}
