/*
 * probe: MPI_Probe, MPI_Iprobe, MPI_Mprobe/MPI_Mrecv, MPI_Improbe/MPI_Imrecv.
 *
 * In each even/odd pair the even rank sends and the odd rank probes. The
 * sender waits for a "go" token before each step, so the receiver also knows
 * when nothing can have arrived yet (Iprobe/Improbe must then report no
 * message). Steps, for small, zero-byte and large (rendezvous) messages:
 *   probe:    Probe(ANY_SOURCE, ANY_TAG) then Probe and Iprobe again: the
 *             message is still there (probing does not consume it); Recv;
 *             afterwards Iprobe finds nothing.
 *   iprobe:   the sender sleeps, the receiver polls Iprobe until found.
 *   mprobe:   two messages with the same envelope: two Mprobes get them in
 *             send order, Iprobe then sees neither, Mrecv in reverse order
 *             still gives each handle its own message.
 *   improbe:  poll Improbe, then Imrecv + Wait.
 *   proc_null: Probe/Mprobe with MPI_PROC_NULL.
 * Every call that fills one status (Probe, Iprobe, Mprobe, Improbe, Recv,
 * Mrecv, Wait) must leave its MPI_ERROR field as it was: MPI sets that
 * field only in calls that complete several requests (MPI_ERR_IN_STATUS).
 * Finally every rank sends two messages to rank 0, which discovers them with
 * Probe or Mprobe on MPI_ANY_SOURCE/MPI_ANY_TAG and receives by envelope.
 *
 * Options: -s LARGE message size (default 1M).
 */
#include "test_util.h"

#define TAG_GO 99
#define POLL_LIMIT 30.0 /* seconds */

static size_t large = 1u << 20;

/* What MPI_ERROR holds before each single-completion call (kept by it). */
#define ERR_UNTOUCHED 0x5eed

static MPI_Status *arm(MPI_Status *st) {
    st->MPI_ERROR = ERR_UNTOUCHED;
    return st;
}

static void check_status(MPI_Status *st, int src, int tag, int count, const char *what) {
    int got;

    TU_ASSERT(st->MPI_ERROR == ERR_UNTOUCHED,
              "%s: a single-completion call changed status.MPI_ERROR (from %d to %d)", what,
              ERR_UNTOUCHED, st->MPI_ERROR);
    MPI_Get_count(st, MPI_BYTE, &got);
    TU_ASSERT(st->MPI_SOURCE == src, "%s: status source expected %d got %d", what, src,
              st->MPI_SOURCE);
    TU_ASSERT(st->MPI_TAG == tag, "%s: status tag expected %d got %d", what, tag, st->MPI_TAG);
    TU_ASSERT(got == count, "%s: count expected %d got %d", what, count, got);
}

static void send_go(int peer) {
    MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_GO, MPI_COMM_WORLD);
}

static void wait_go(int peer) {
    MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void send_msg(int peer, int tag, size_t size, uint64_t seed) {
    char *buf = tu_malloc(size);

    tu_fill(buf, size, seed);
    MPI_Send(buf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
    free(buf);
}

/*
 * Two messages of sizes size+1 and size+2 with the same envelope. Nonblocking:
 * a matched (Mprobe'd) large message may not let a blocking send complete
 * before it is actually received.
 */
static void send_two(int peer, int tag, size_t size, uint64_t seed1, uint64_t seed2) {
    char *b1 = tu_malloc(size + 1), *b2 = tu_malloc(size + 2);
    MPI_Request req[2];

    tu_fill(b1, size + 1, seed1);
    tu_fill(b2, size + 2, seed2);
    MPI_Isend(b1, (int)size + 1, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[0]);
    MPI_Isend(b2, (int)size + 2, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    free(b1);
    free(b2);
}

/* Iprobe must report no message now. */
static void expect_nothing(int src, int tag, const char *what) {
    int flag = 1;
    MPI_Message msg;
    MPI_Status st;

    MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, &st);
    TU_ASSERT(!flag, "%s: Iprobe found a message (source %d tag %d) where none should be", what,
              st.MPI_SOURCE, st.MPI_TAG);
    MPI_Improbe(src, tag, MPI_COMM_WORLD, &flag, &msg, &st);
    TU_ASSERT(!flag, "%s: Improbe found a message (source %d tag %d) where none should be", what,
              st.MPI_SOURCE, st.MPI_TAG);
}

static void sender(int peer) {
    size_t sizes[3] = {0, 100, large};
    int i;

    for (i = 0; i < 3; i++) {
        wait_go(peer); /* probe */
        send_msg(peer, 10 + i, sizes[i], tu_seed(1, i, 0, 0));
        wait_go(peer); /* iprobe */
        tu_sleep_ms(100);
        send_msg(peer, 20 + i, sizes[i], tu_seed(2, i, 0, 0));
        wait_go(peer); /* mprobe: two messages with the same envelope */
        send_two(peer, 30, sizes[i], tu_seed(3, i, 1, 0), tu_seed(3, i, 2, 0));
        wait_go(peer); /* improbe */
        send_msg(peer, 40 + i, sizes[i] + 3, tu_seed(4, i, 0, 0));
    }
}

static void recv_verify(int src, int tag, size_t size, uint64_t seed, const char *what) {
    char *buf = tu_malloc(size + 16);
    MPI_Status st;

    memset(buf, TU_POISON, size + 16);
    MPI_Recv(buf, (int)size + 16, MPI_BYTE, src, tag, MPI_COMM_WORLD, arm(&st));
    check_status(&st, src, tag, (int)size, what);
    tu_verify(buf, size, seed, what);
    free(buf);
}

static void receiver(int peer) {
    size_t sizes[3] = {0, 100, large};
    char what[128];
    int i, flag;
    MPI_Status st;
    MPI_Message m1, m2;
    MPI_Request req;
    double t0;

    for (i = 0; i < 3; i++) {
        int n = (int)sizes[i];

        /* probe */
        snprintf(what, sizeof(what), "probe size %d", n);
        expect_nothing(MPI_ANY_SOURCE, MPI_ANY_TAG, what);
        send_go(peer);
        MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, arm(&st));
        check_status(&st, peer, 10 + i, n, what);
        MPI_Probe(peer, 10 + i, MPI_COMM_WORLD, arm(&st));
        check_status(&st, peer, 10 + i, n, "second probe (must not consume)");
        MPI_Iprobe(MPI_ANY_SOURCE, 10 + i, MPI_COMM_WORLD, &flag, arm(&st));
        TU_ASSERT(flag, "%s: Iprobe after Probe did not find the message", what);
        check_status(&st, peer, 10 + i, n, "Iprobe after Probe");
        recv_verify(peer, 10 + i, sizes[i], tu_seed(1, i, 0, 0), what);
        expect_nothing(MPI_ANY_SOURCE, MPI_ANY_TAG, "after receiving the probed message");

        /* iprobe poll */
        snprintf(what, sizeof(what), "iprobe poll size %d", n);
        send_go(peer);
        t0 = MPI_Wtime();
        do {
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, arm(&st));
            TU_ASSERT(flag || MPI_Wtime() - t0 < POLL_LIMIT, "%s: nothing found after %.0f s", what,
                      POLL_LIMIT);
        } while (!flag);
        check_status(&st, peer, 20 + i, n, what);
        recv_verify(peer, 20 + i, sizes[i], tu_seed(2, i, 0, 0), what);

        /* mprobe: same envelope twice */
        snprintf(what, sizeof(what), "mprobe size %d", n);
        send_go(peer);
        MPI_Mprobe(MPI_ANY_SOURCE, 30, MPI_COMM_WORLD, &m1, arm(&st));
        check_status(&st, peer, 30, n + 1, "first Mprobe (must get the first message)");
        MPI_Mprobe(peer, MPI_ANY_TAG, MPI_COMM_WORLD, &m2, arm(&st));
        check_status(&st, peer, 30, n + 2, "second Mprobe (must get the second message)");
        expect_nothing(MPI_ANY_SOURCE, MPI_ANY_TAG, "after two Mprobes");
        {
            char *b1 = tu_malloc(sizes[i] + 1), *b2 = tu_malloc(sizes[i] + 2);

            MPI_Mrecv(b2, n + 2, MPI_BYTE, &m2, arm(&st));
            check_status(&st, peer, 30, n + 2, "Mrecv of second message");
            TU_ASSERT(m2 == MPI_MESSAGE_NULL, "Mrecv did not set the handle to MPI_MESSAGE_NULL");
            MPI_Mrecv(b1, n + 1, MPI_BYTE, &m1, arm(&st));
            check_status(&st, peer, 30, n + 1, "Mrecv of first message");
            tu_verify(b1, sizes[i] + 1, tu_seed(3, i, 1, 0), "Mrecv first message");
            tu_verify(b2, sizes[i] + 2, tu_seed(3, i, 2, 0), "Mrecv second message");
            free(b1);
            free(b2);
        }

        /* improbe + imrecv */
        snprintf(what, sizeof(what), "improbe size %d", n + 3);
        send_go(peer);
        t0 = MPI_Wtime();
        do {
            MPI_Improbe(peer, 40 + i, MPI_COMM_WORLD, &flag, &m1, arm(&st));
            TU_ASSERT(flag || MPI_Wtime() - t0 < POLL_LIMIT, "%s: nothing found after %.0f s", what,
                      POLL_LIMIT);
        } while (!flag);
        check_status(&st, peer, 40 + i, n + 3, what);
        {
            char *b = tu_malloc(sizes[i] + 3);

            memset(b, TU_POISON, sizes[i] + 3);
            MPI_Imrecv(b, n + 3, MPI_BYTE, &m1, &req);
            MPI_Wait(&req, arm(&st));
            check_status(&st, peer, 40 + i, n + 3, "Imrecv");
            tu_verify(b, sizes[i] + 3, tu_seed(4, i, 0, 0), "Imrecv");
            free(b);
        }
    }
}

static void proc_null(void) {
    MPI_Status st;
    MPI_Message msg;
    int flag = 0, count = -1;

    MPI_Probe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_BYTE, &count);
    TU_ASSERT(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count == 0,
              "Probe(MPI_PROC_NULL): got source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG,
              count);
    MPI_Iprobe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &flag, &st);
    TU_ASSERT(flag && st.MPI_SOURCE == MPI_PROC_NULL, "Iprobe(MPI_PROC_NULL): flag %d source %d",
              flag, st.MPI_SOURCE);
    MPI_Mprobe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &msg, &st);
    TU_ASSERT(msg == MPI_MESSAGE_NO_PROC, "Mprobe(MPI_PROC_NULL) did not give MPI_MESSAGE_NO_PROC");
    MPI_Mrecv(NULL, 0, MPI_BYTE, &msg, &st);
    TU_ASSERT(st.MPI_SOURCE == MPI_PROC_NULL, "Mrecv(MPI_MESSAGE_NO_PROC): source %d",
              st.MPI_SOURCE);
}

/* Every rank but 0 sends two messages; rank 0 finds them by wildcard probes. */
static void gather_by_probe(void) {
    if (tu_rank != 0) {
        send_msg(0, 50 + tu_rank % 7, 10 + (size_t)tu_rank, tu_seed(5, tu_rank, 0, 0));
        send_msg(0, 60 + tu_rank % 7, large / 2 + (size_t)tu_rank, tu_seed(5, tu_rank, 1, 0));
        return;
    }
    {
        int left = 2 * (tu_size - 1), i;
        int *seen = calloc((size_t)tu_size, sizeof(int));

        for (i = 0; i < left; i++) {
            MPI_Status st;
            MPI_Message msg = MPI_MESSAGE_NULL;
            int count, src, second;
            char *buf, what[96];

            if (i % 2)
                MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, arm(&st));
            else
                MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, arm(&st));
            src = st.MPI_SOURCE;
            TU_ASSERT(src > 0 && src < tu_size, "wildcard probe: bad source %d", src);
            second = seen[src]++;
            TU_ASSERT(second <= 1, "wildcard probe: third message from %d", src);
            snprintf(what, sizeof(what), "wildcard %s message %d from %d",
                     i % 2 ? "Mprobe" : "Probe", second, src);
            MPI_Get_count(&st, MPI_BYTE, &count);
            check_status(&st, src, (second ? 60 : 50) + src % 7,
                         (int)(second ? large / 2 : 10) + src, what);
            buf = tu_malloc((size_t)count);
            if (i % 2)
                MPI_Mrecv(buf, count, MPI_BYTE, &msg, arm(&st));
            else
                MPI_Recv(buf, count, MPI_BYTE, src, st.MPI_TAG, MPI_COMM_WORLD, arm(&st));
            check_status(&st, src, (second ? 60 : 50) + src % 7, count, what);
            tu_verify(buf, (size_t)count, tu_seed(5, src, second, 0), what);
            free(buf);
        }
        free(seen);
    }
}

int main(int argc, char **argv) {
    int partner;

    tu_init(&argc, &argv, "probe");
    tu_parse_count_size(argc, argv, "[-s LARGE]", NULL, &large);
    TU_ASSERT(tu_size >= 2, "needs at least 2 ranks, got %d", tu_size);
    TU_ASSERT(large >= 2 && large < (1u << 30), "bad LARGE size");

    partner = tu_pair_partner();
    if (partner >= 0) {
        if (tu_rank % 2 == 0)
            sender(partner);
        else
            receiver(partner);
    }
    proc_null();
    MPI_Barrier(MPI_COMM_WORLD);
    gather_by_probe();

    tu_ok("np=%d probe,iprobe,mprobe,improbe,proc_null,wildcard sizes=0,100,%zu", tu_size, large);
    return 0;
}
