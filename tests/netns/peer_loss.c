/*
 * peer_loss: what the other ranks see when a peer dies or its host drops
 * off the network in the middle of transfers (tests/netns/peer-loss.sh).
 *
 * The last rank is the victim; the others (survivors) loop over the
 * operations that can wait on one peer for ever: a blocking MPI_Send large
 * enough for a rendezvous, an MPI_Ssend, an MPI_Irecv + MPI_Wait, and an
 * MPI_Put + MPI_Win_flush (passive target), each with the victim, which
 * serves them in turn.  Once every rank has been through a few rounds,
 * rank 0 prints "peer_loss: transferring" (the runner cuts the victim's
 * host then).  With -k the victim kills itself (SIGKILL) a few rounds
 * later, while a large message to it is under way, or, where its transfers
 * stall before that round, PL_KILL_AFTER_MS after "transferring" (a
 * thread's timer): the run tests what the survivors see of a dead peer,
 * not a stall of the provider's (ofi_rxd stops completing at times on a
 * loaded machine: docs/RELIABILITY.md), and the line the victim prints
 * says which came.  With -a the survivors
 * wait in MPI_Recv(MPI_ANY_SOURCE) alone, which the victim serves with a
 * small MPI_Isend to each in turn: what ends such a wait when the victim's
 * host is lost is mtl_efa's ANY_SOURCE rule (a receive on ANY_SOURCE fails
 * when a member of its communicator is lost), or under pml ob1 btl_efa's
 * watch.  With -p they wait in MPI_Probe on the victim (with -a on
 * MPI_ANY_SOURCE) before each receive: a blocking probe waits on a peer
 * as a receive does.  With -r the survivors only ever receive from the
 * victim (MPI_Recv from it, which its small MPI_Isends serve): no window,
 * no barrier, nothing a survivor sends to it, so that on one host a
 * survivor never attaches to the victim's on-node inbox (a gather's root,
 * a master waiting on its workers); rank 0 says "transferring" after its
 * first rounds, and with -k the victim kills itself PL_KILL_AFTER_MS after
 * its own (long enough for the survivors' once-a-second watch to see it
 * attached to their inboxes).
 *
 * MPI errors return (MPI_ERRORS_RETURN on the communicator and the
 * window): a survivor whose operation fails prints
 *   "peer_loss: rank R: OP with rank V failed T s after the last success: ...
 *    [class C: a lost peer's]"
 * where the class is what this Open MPI's point-to-point calls give for a
 * lost peer (MPI_ERR_PROC_FAILED where mpi.h has it, Open MPI 5; else
 * MPI_ERR_INTERN, 4.1's ob1's for an unreachable peer), or
 *   "[class C: not a lost peer's (EXPECTED)]"
 * which the runner fails for point-to-point calls under pml cm (mtl_efa
 * says which error ended them).
 * and aborts the job, which is one of the two endings the runner accepts
 * (the other is Open MPI's runtime ending the job with a message that
 * names the peer).  A run that goes on for -t seconds without either
 * (neither a kill nor a cut came) prints FAIL: the runner's setup failed.
 *
 * usage: peer_loss [-k] [-a] [-p] [-r] [-t SECONDS] [-s SIZE]
 *   -k  the victim kills itself mid-transfer
 *   -a  the survivors only wait on MPI_ANY_SOURCE
 *   -p  the survivors wait in MPI_Probe (on the victim; with -a on
 *       MPI_ANY_SOURCE) before each receive
 *   -r  the survivors only receive from the victim (never send to it)
 *   -t  give up after this long (default 600)
 *   -s  size of the blocking sends (default 4M: a rendezvous on every path)
 */
#include "test_util.h"

#include <pthread.h>

#define PL_WARM_ROUNDS 3
#define PL_PUT_BYTES 65536
/* far beyond the few milliseconds two rounds take, well inside the
 * runner's deadline */
#define PL_KILL_AFTER_MS 3000

static double last_ok;

#ifdef MPI_ERR_PROC_FAILED
#define PL_LOST_CLASS MPI_ERR_PROC_FAILED
#define PL_LOST_CLASS_NAME "MPI_ERR_PROC_FAILED"
#else
#define PL_LOST_CLASS MPI_ERR_INTERN
#define PL_LOST_CLASS_NAME "MPI_ERR_INTERN"
#endif

static const char *class_name(int cls) {
    switch (cls) {
    case MPI_ERR_INTERN:
        return "MPI_ERR_INTERN";
    case MPI_ERR_UNKNOWN:
        return "MPI_ERR_UNKNOWN";
    case MPI_ERR_OTHER:
        return "MPI_ERR_OTHER";
    case MPI_ERR_ARG:
        return "MPI_ERR_ARG";
    case MPI_ERR_TRUNCATE:
        return "MPI_ERR_TRUNCATE";
    case MPI_ERR_IN_STATUS:
        return "MPI_ERR_IN_STATUS";
#ifdef MPI_ERR_PROC_FAILED
    case MPI_ERR_PROC_FAILED:
        return "MPI_ERR_PROC_FAILED";
#endif
    default:
        return "another";
    }
}

static void check(int rc, const char *op, int peer) {
    char str[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (rc == MPI_SUCCESS) {
        last_ok = MPI_Wtime();
        return;
    }
    int cls = -1;
    if (MPI_Error_string(rc, str, &len) != MPI_SUCCESS)
        snprintf(str, sizeof(str), "error %d", rc);
    MPI_Error_class(rc, &cls);
    printf("peer_loss: rank %d: %s with rank %d failed %.1f s after the last success: %s "
           "[class %s: %s]\n",
           tu_rank, op, peer, MPI_Wtime() - last_ok, str, class_name(cls),
           cls == PL_LOST_CLASS ? "a lost peer's" : "not a lost peer's (" PL_LOST_CLASS_NAME ")");
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

/* The victim's timer (-k): its transfers did not reach the kill's round
 * in time.  (write: the main thread may be anywhere, stdio's lock
 * included.) */
static void *kill_on_timer(void *arg) {
    static const char msg[] = "peer_loss: the victim's transfers stalled before its kill's round: "
                              "it kills itself (SIGKILL) on its timer\n";
    ssize_t rc;

    (void)arg;
    tu_sleep_ms(PL_KILL_AFTER_MS);
    rc = write(STDOUT_FILENO, msg, sizeof(msg) - 1);
    (void)rc;
    kill(getpid(), SIGKILL);
    return NULL;
}

/* One round of -a or -p: each survivor waits for a message that only the
 * victim sends: in MPI_Recv(MPI_ANY_SOURCE) (-a), in MPI_Probe on the
 * victim (-p) or on MPI_ANY_SOURCE (-p -a), then receives it.  The
 * victim's sends are freed unwaited, so that nothing of the victim's sees
 * the loss (its own deadline would end the job as soon as the survivors'
 * waits could, which would leave these untested); its pause keeps it from
 * running far ahead. */
static void serve_waits(unsigned char *buf, int len, int victim, int any, int probe) {
    MPI_Request req;
    MPI_Status st;

    if (tu_rank != victim) {
        const int from = any ? MPI_ANY_SOURCE : victim;
        if (probe) {
            check(MPI_Probe(from, 3, MPI_COMM_WORLD, &st),
                  any ? "MPI_Probe (ANY_SOURCE)" : "MPI_Probe", victim);
        }
        check(MPI_Recv(buf, len, MPI_BYTE, from, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              any ? "MPI_Recv (ANY_SOURCE)" : "MPI_Recv", victim);
        return;
    }
    for (int s = 0; s < victim; s++) {
        check(MPI_Isend(buf, len, MPI_BYTE, s, 3, MPI_COMM_WORLD, &req), "MPI_Isend", s);
        check(MPI_Request_free(&req), "MPI_Request_free", s);
    }
    tu_sleep_ms(2);
}

/* PEER_LOSS_VICTIM_TIMEOUT (seconds): the victim's own peer deadline,
 * set before MPI_Init from the runtime's rank (the last one is the
 * victim).  In a partition both sides stop hearing each other: with the
 * same deadline the victim may give up first and its abort end the job
 * before any survivor says what it saw.  A longer one leaves the
 * detection to the survivors, which is what the runs check. */
static void victim_timeout(void) {
    const char *t = getenv("PEER_LOSS_VICTIM_TIMEOUT");
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (NULL != t && NULL != rank && NULL != size && atoi(rank) == atoi(size) - 1) {
        setenv("OMPI_MCA_common_efa_peer_timeout", t, 1);
    }
}

/* -r: the survivors only receive from the victim, which serves them as in
 * serve_waits; with -k it kills itself PL_KILL_AFTER_MS after its warm
 * rounds.  Returns when the limit passed. */
static void receive_only(unsigned char *buf, int len, int victim, int kill_victim, long limit) {
    const double t_start = MPI_Wtime();
    double t_warm = 0;

    for (long round = 0; MPI_Wtime() - t_start <= (double)limit; round++) {
        if (round == PL_WARM_ROUNDS) {
            t_warm = MPI_Wtime();
            if (tu_rank == 0)
                printf("peer_loss: transferring (%d processes, victim rank %d, the survivors "
                       "only receive)\n",
                       tu_size, victim);
            fflush(stdout);
        }
        if (kill_victim && tu_rank == victim && round > PL_WARM_ROUNDS &&
            (MPI_Wtime() - t_warm) * 1000 >= PL_KILL_AFTER_MS) {
            printf("peer_loss: victim rank %d kills itself (SIGKILL) between its sends\n", tu_rank);
            fflush(stdout);
            raise(SIGKILL);
        }
        serve_waits(buf, len, victim, 0, 0);
        if (tu_rank == victim)
            tu_sleep_ms(20); /* (a round every 20 ms or so) */
    }
}

int main(int argc, char **argv) {
    size_t size = 4u << 20;
    long limit = 600, round;
    double t_start;
    int kill_victim = 0, any_source = 0, probe = 0, recv_only = 0, opt, victim;
    unsigned char *big, small[64], *winbase;
    MPI_Win win;
    MPI_Request req;

    victim_timeout();
    tu_init(&argc, &argv, "peer_loss");
    while ((opt = getopt(argc, argv, "kaprt:s:h")) != -1) {
        switch (opt) {
        case 'k':
            kill_victim = 1;
            break;
        case 'a':
            any_source = 1;
            break;
        case 'p':
            probe = 1;
            break;
        case 'r':
            recv_only = 1;
            break;
        case 't':
            limit = tu_parse_long(optarg);
            break;
        case 's':
            size = tu_parse_size(optarg);
            break;
        case 'h':
            tu_usage("[-k] [-a] [-p] [-r] [-t SECONDS] [-s SIZE]", 0);
        default:
            tu_usage("[-k] [-a] [-p] [-r] [-t SECONDS] [-s SIZE]", 1);
        }
    }
    TU_ASSERT(tu_size >= 2 && size > 0 && size <= (1u << 30), "needs 2 processes and -s 1..1G");
    victim = tu_size - 1;
    big = tu_malloc(size);
    memset(big, 1, size);
    memset(small, 2, sizeof(small));
    if (recv_only) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        last_ok = MPI_Wtime();
        receive_only(small, sizeof(small), victim, kill_victim, limit);
        printf("FAIL peer_loss: the victim was still there after %ld s (rank %d)\n", limit,
               tu_rank);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    MPI_Win_allocate(PL_PUT_BYTES * tu_size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &winbase, &win);
    /* from here on, errors come back to us instead of ending the job */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    check(MPI_Win_lock_all(0, win), "MPI_Win_lock_all", victim);
    last_ok = t_start = MPI_Wtime();
    for (round = 0;; round++) {
        if (round == PL_WARM_ROUNDS) {
            check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", victim);
            if (tu_rank == 0)
                printf("peer_loss: transferring (%d processes, victim rank %d)\n", tu_size, victim);
            fflush(stdout);
            if (kill_victim && tu_rank == victim) {
                pthread_t timer;
                TU_ASSERT(pthread_create(&timer, NULL, kill_on_timer, NULL) == 0 &&
                              pthread_detach(timer) == 0,
                          "the kill's timer thread");
            }
        }
        if (MPI_Wtime() - t_start > (double)limit)
            break;
        if (any_source || probe) {
            serve_waits(small, sizeof(small), victim, any_source, probe);
            continue;
        }
        if (tu_rank != victim) {
            check(MPI_Send(big, (int)size, MPI_BYTE, victim, 1, MPI_COMM_WORLD), "MPI_Send",
                  victim);
            check(MPI_Ssend(small, sizeof(small), MPI_BYTE, victim, 2, MPI_COMM_WORLD), "MPI_Ssend",
                  victim);
            check(MPI_Irecv(small, sizeof(small), MPI_BYTE, victim, 3, MPI_COMM_WORLD, &req),
                  "MPI_Irecv", victim);
            check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait (receive)", victim);
            check(MPI_Put(big, PL_PUT_BYTES, MPI_BYTE, victim, (MPI_Aint)tu_rank * PL_PUT_BYTES,
                          PL_PUT_BYTES, MPI_BYTE, win),
                  "MPI_Put", victim);
            check(MPI_Win_flush(victim, win), "MPI_Win_flush", victim);
            continue;
        }
        for (int s = 0; s < victim; s++) {
            if (kill_victim && round == PL_WARM_ROUNDS + 2 && s == 0) {
                /* mid-transfer: the sender's rendezvous is under way */
                MPI_Irecv(big, (int)size, MPI_BYTE, s, 1, MPI_COMM_WORLD, &req);
                tu_sleep_ms(20);
                printf("peer_loss: victim rank %d kills itself (SIGKILL) mid-transfer\n", tu_rank);
                fflush(stdout);
                raise(SIGKILL);
            }
            check(MPI_Recv(big, (int)size, MPI_BYTE, s, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                  "MPI_Recv", s);
            check(MPI_Recv(small, sizeof(small), MPI_BYTE, s, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                  "MPI_Recv (synchronous)", s);
            check(MPI_Send(small, sizeof(small), MPI_BYTE, s, 3, MPI_COMM_WORLD), "MPI_Send", s);
        }
    }
    /* no kill and no cut came: the runner did not do its part */
    printf("FAIL peer_loss: the victim was still there after %ld s (rank %d)\n", limit, tu_rank);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}
