/*
 * comms: messages on different communicators never mix.
 *
 *   dup:       the same (source, tag) sent on two dup'ed communicators is
 *              received on the right one only, with the receives posted in
 *              the opposite order of the sends, both pre-posted and
 *              unexpected, small and large.
 *   split:     a split communicator with reversed rank order (so the same
 *              numeric source means a different process) and, with 4 or more
 *              ranks, an even/odd split, against MPI_COMM_WORLD traffic with
 *              the same source number and tag.
 *   anysource: an MPI_ANY_SOURCE/MPI_ANY_TAG receive on one communicator
 *              does not see messages sent on another one.
 *   coll:      collectives (barrier, bcast, allreduce, alltoall) run while an
 *              MPI_ANY_SOURCE/MPI_ANY_TAG receive is pending on the same
 *              communicator; the collectives give the right results and the
 *              pending receive gets only the user message sent afterwards.
 *   churn:     communicators are created and freed repeatedly with traffic
 *              on each, so reused context ids do not confuse matching.
 *
 * Options: -n CHURN iterations (default 50), -s LARGE (default 256K).
 */
#include "test_util.h"

#define TAG 7

static size_t large = 256u << 10;

/* Payload: pattern seeded by (step, comm id, world source, index). */
static void send_pat(MPI_Comm comm, int dest, int tag, size_t size, uint64_t seed) {
    char *buf = tu_malloc(size);

    tu_fill(buf, size, seed);
    MPI_Send(buf, (int)size, MPI_BYTE, dest, tag, comm);
    free(buf);
}

/* Communicator used only for synchronising the pair outside the tested ones. */
static MPI_Comm sync_comm;

static void pair_sync(void) {
    int p = tu_pair_partner();

    MPI_Sendrecv(NULL, 0, MPI_BYTE, p, 0, NULL, 0, MPI_BYTE, p, 0, sync_comm, MPI_STATUS_IGNORE);
}

/*
 * Pair step on two communicators: the even rank sends on c1 then c2 (same
 * tag, same peer rank), the odd rank receives c2 first. Peer ranks are given
 * per communicator (they may differ after a split).
 */
static void two_comms(int step, MPI_Comm c1, int peer1, MPI_Comm c2, int peer2, int sending,
                      int preposted, size_t size, const char *name) {
    char what[128];

    if (sending) {
        char *b1 = tu_malloc(size), *b2 = tu_malloc(size + 1);
        MPI_Request req[2];

        if (preposted)
            pair_sync(); /* receives are posted */
        /* nonblocking: the receiver takes them in the opposite order */
        tu_fill(b1, size, tu_seed(step, 1, size, 0));
        tu_fill(b2, size + 1, tu_seed(step, 2, size, 0));
        MPI_Isend(b1, (int)size, MPI_BYTE, peer1, TAG, c1, &req[0]);
        MPI_Isend(b2, (int)size + 1, MPI_BYTE, peer2, TAG, c2, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        free(b1);
        free(b2);
    } else {
        char *b1 = tu_malloc(size + 1), *b2 = tu_malloc(size + 1);
        MPI_Request req[2];
        MPI_Status st[2];

        memset(b1, TU_POISON, size + 1);
        memset(b2, TU_POISON, size + 1);
        if (preposted) {
            MPI_Irecv(b2, (int)size + 1, MPI_BYTE, peer2, TAG, c2, &req[1]);
            MPI_Irecv(b1, (int)size + 1, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, c1, &req[0]);
            pair_sync();
            MPI_Waitall(2, req, st);
        } else {
            MPI_Recv(b2, (int)size + 1, MPI_BYTE, peer2, TAG, c2, &st[1]);
            MPI_Recv(b1, (int)size + 1, MPI_BYTE, peer1, TAG, c1, &st[0]);
        }
        snprintf(what, sizeof(what), "%s %s size %zu: first communicator", name,
                 preposted ? "preposted" : "unexpected", size);
        tu_verify_recv(b1, &st[0], peer1, TAG, size, tu_seed(step, 1, size, 0), what);
        snprintf(what, sizeof(what), "%s %s size %zu: second communicator", name,
                 preposted ? "preposted" : "unexpected", size);
        tu_verify_recv(b2, &st[1], peer2, TAG, size + 1, tu_seed(step, 2, size, 0), what);
        free(b1);
        free(b2);
    }
}

static void pair_steps(int step, MPI_Comm c1, MPI_Comm c2, const char *name) {
    int p = tu_pair_partner(), peer1, peer2;
    MPI_Group g1, g2, gw;
    size_t sizes[3] = {0, 100, large};
    int i, pre;

    if (p < 0)
        return;
    /* translate the partner's world rank into each communicator */
    MPI_Comm_group(MPI_COMM_WORLD, &gw);
    MPI_Comm_group(c1, &g1);
    MPI_Comm_group(c2, &g2);
    MPI_Group_translate_ranks(gw, 1, &p, g1, &peer1);
    MPI_Group_translate_ranks(gw, 1, &p, g2, &peer2);
    MPI_Group_free(&gw);
    MPI_Group_free(&g1);
    MPI_Group_free(&g2);
    TU_ASSERT(peer1 != MPI_UNDEFINED && peer2 != MPI_UNDEFINED, "%s: partner not in comm", name);
    for (pre = 0; pre < 2; pre++)
        for (i = 0; i < 3; i++)
            two_comms(step * 10 + pre * 3 + i, c1, peer1, c2, peer2, tu_rank % 2 == 0, pre,
                      sizes[i], name);
}

/* Every rank: messages on world and on the split communicator with the same numbers. */
static void split_same_numbers(MPI_Comm split, const char *name) {
    int srank, ssize, wsrc = (tu_rank - 1 + tu_size) % tu_size;
    char buf[2][64], what[128];
    MPI_Status st;
    MPI_Request req[2];

    MPI_Comm_rank(split, &srank);
    MPI_Comm_size(split, &ssize);
    /* pre-post wildcard-source receives with the same tag on both comms */
    memset(buf, TU_POISON, sizeof(buf));
    MPI_Irecv(buf[0], 64, MPI_BYTE, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, &req[0]);
    if (ssize > 1)
        MPI_Irecv(buf[1], 64, MPI_BYTE, MPI_ANY_SOURCE, TAG, split, &req[1]);
    MPI_Barrier(sync_comm);
    /* each rank sends to rank+1 in world and to srank+1 in the split comm */
    send_pat(MPI_COMM_WORLD, (tu_rank + 1) % tu_size, TAG, 31, tu_seed(100, tu_rank, 1, 0));
    if (ssize > 1)
        send_pat(split, (srank + 1) % ssize, TAG, 33, tu_seed(100, srank, 2, 0));
    MPI_Wait(&req[0], &st);
    snprintf(what, sizeof(what), "%s: world message", name);
    tu_verify_recv(buf[0], &st, wsrc, TAG, 31, tu_seed(100, wsrc, 1, 0), what);
    if (ssize > 1) {
        int ssrc = (srank - 1 + ssize) % ssize;

        MPI_Wait(&req[1], &st);
        snprintf(what, sizeof(what), "%s: split-communicator message", name);
        tu_verify_recv(buf[1], &st, ssrc, TAG, 33, tu_seed(100, ssrc, 2, 0), what);
    }
}

/* ANY_SOURCE/ANY_TAG on c1 must not see messages sent on c2. */
static void anysource(MPI_Comm c1, MPI_Comm c2) {
    char buf[64], what[96];
    MPI_Request req;
    MPI_Status st;
    int flag = 0, i, me1, me2, n;

    MPI_Comm_rank(c1, &me1);
    MPI_Comm_rank(c2, &me2);
    MPI_Comm_size(c1, &n);
    memset(buf, TU_POISON, sizeof(buf));
    MPI_Irecv(buf, 64, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, c1, &req);
    MPI_Barrier(MPI_COMM_WORLD);
    /* everybody sends one message to everybody else on c2 */
    for (i = 0; i < n; i++)
        if (i != me2)
            send_pat(c2, i, i % 5, 10, tu_seed(200, me2, i, 0));
    /* wait until all of them have arrived (probe does not consume) */
    for (i = 0; i < n; i++)
        if (i != me2)
            MPI_Probe(i, MPI_ANY_TAG, c2, &st);
    MPI_Test(&req, &flag, &st);
    TU_ASSERT(!flag,
              "ANY_SOURCE/ANY_TAG receive on one communicator matched a message (source %d "
              "tag %d) sent on another",
              st.MPI_SOURCE, st.MPI_TAG);
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c1, &flag, &st);
    TU_ASSERT(!flag,
              "Iprobe(ANY_SOURCE, ANY_TAG) on one communicator found a message (source "
              "%d tag %d) sent on another",
              st.MPI_SOURCE, st.MPI_TAG);
    MPI_Barrier(sync_comm); /* everybody has checked before the real message is sent */
    /* now the real message for c1, from the previous rank in c1 */
    send_pat(c1, (me1 + 1) % n, 42, 20, tu_seed(201, me1, 0, 0));
    MPI_Wait(&req, &st);
    {
        int src = (me1 - 1 + n) % n;

        tu_verify_recv(buf, &st, src, 42, 20, tu_seed(201, src, 0, 0), "anysource: c1 message");
    }
    for (i = 0; i < n; i++) {
        if (i != me2) {
            MPI_Recv(buf, 64, MPI_BYTE, i, MPI_ANY_TAG, c2, &st);
            snprintf(what, sizeof(what), "anysource: c2 message from %d", i);
            tu_verify_recv(buf, &st, i, me2 % 5, 10, tu_seed(200, i, me2, 0), what);
        }
    }
}

/* Collectives while an ANY_SOURCE/ANY_TAG receive is pending on the same comm. */
static void coll_vs_anytag(MPI_Comm comm) {
    char buf[64];
    MPI_Request req;
    MPI_Status st;
    int flag = 0, i, root, me, n, src;
    long long v, sum, expect;
    int *a2a_s = tu_malloc(sizeof(int) * tu_size), *a2a_r = tu_malloc(sizeof(int) * tu_size);
    int bc[100];

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    src = (me - 1 + n) % n;
    memset(buf, TU_POISON, sizeof(buf));
    MPI_Irecv(buf, 64, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &req);

    MPI_Barrier(comm);
    for (root = 0; root < n; root++) {
        for (i = 0; i < 100; i++)
            bc[i] = me == root ? root * 1000 + i : -1;
        MPI_Bcast(bc, 100, MPI_INT, root, comm);
        for (i = 0; i < 100; i++)
            TU_ASSERT(bc[i] == root * 1000 + i,
                      "coll: bcast from root %d element %d expected %d got %d (with a pending "
                      "ANY_TAG receive)",
                      root, i, root * 1000 + i, bc[i]);
    }
    v = me + 1;
    MPI_Allreduce(&v, &sum, 1, MPI_LONG_LONG, MPI_SUM, comm);
    expect = (long long)n * (n + 1) / 2;
    TU_ASSERT(sum == expect, "coll: allreduce expected %lld got %lld", expect, sum);
    for (i = 0; i < n; i++)
        a2a_s[i] = me * 100 + i;
    MPI_Alltoall(a2a_s, 1, MPI_INT, a2a_r, 1, MPI_INT, comm);
    for (i = 0; i < n; i++)
        TU_ASSERT(a2a_r[i] == i * 100 + me, "coll: alltoall from %d expected %d got %d", i,
                  i * 100 + me, a2a_r[i]);
    MPI_Barrier(comm);

    MPI_Test(&req, &flag, &st);
    MPI_Barrier(sync_comm); /* everybody tests before the user message is sent */
    TU_ASSERT(!flag,
              "coll: pending ANY_SOURCE/ANY_TAG receive matched collective traffic "
              "(source %d tag %d)",
              st.MPI_SOURCE, st.MPI_TAG);
    send_pat(comm, (me + 1) % n, 3, 12, tu_seed(300, me, 0, 0));
    MPI_Wait(&req, &st);
    tu_verify_recv(buf, &st, src, 3, 12, tu_seed(300, src, 0, 0),
                   "coll: user message after collectives");
    free(a2a_s);
    free(a2a_r);
}

static void churn(int iters) {
    int it;

    for (it = 0; it < iters; it++) {
        MPI_Comm c;
        char buf[32];
        MPI_Status st;
        int src;

        if (it % 2)
            MPI_Comm_dup(MPI_COMM_WORLD, &c);
        else
            MPI_Comm_split(MPI_COMM_WORLD, 0, tu_size - tu_rank, &c);
        {
            int r, n;

            MPI_Comm_rank(c, &r);
            MPI_Comm_size(c, &n);
            src = (r - 1 + n) % n;
            send_pat(c, (r + 1) % n, it, 17, tu_seed(400, it, r, 0));
            MPI_Recv(buf, 32, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &st);
            tu_verify_recv(buf, &st, src, it, 17, tu_seed(400, it, src, 0), "churn: message");
        }
        MPI_Comm_free(&c);
    }
}

int main(int argc, char **argv) {
    int iters = 50;
    MPI_Comm d1, d2, rev, eo;

    tu_init(&argc, &argv, "comms");
    tu_parse_count_size(argc, argv, "[-n CHURN] [-s LARGE]", &iters, &large);
    TU_ASSERT(tu_size >= 2, "needs at least 2 ranks, got %d", tu_size);

    MPI_Comm_dup(MPI_COMM_WORLD, &sync_comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &d1);
    MPI_Comm_dup(MPI_COMM_WORLD, &d2);
    MPI_Comm_split(MPI_COMM_WORLD, 0, tu_size - 1 - tu_rank, &rev);
    MPI_Comm_split(MPI_COMM_WORLD, tu_rank % 2, tu_rank, &eo);

    pair_steps(1, d1, d2, "dup vs dup");
    pair_steps(2, MPI_COMM_WORLD, d1, "world vs dup");
    pair_steps(3, d2, rev, "dup vs reversed split");
    MPI_Barrier(MPI_COMM_WORLD);
    split_same_numbers(rev, "reversed split");
    MPI_Barrier(MPI_COMM_WORLD);
    split_same_numbers(eo, "even/odd split");
    MPI_Barrier(MPI_COMM_WORLD);

    anysource(d1, d2);
    MPI_Barrier(MPI_COMM_WORLD);
    anysource(rev, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);

    coll_vs_anytag(d1);
    coll_vs_anytag(MPI_COMM_WORLD);
    coll_vs_anytag(rev);

    churn(iters);

    MPI_Comm_free(&sync_comm);
    MPI_Comm_free(&d1);
    MPI_Comm_free(&d2);
    MPI_Comm_free(&rev);
    MPI_Comm_free(&eo);
    tu_ok("np=%d dup,split,anysource,coll,churn(%d)", tu_size, iters);
    return 0;
}
