/*
 * spawn: processes of another job, reached after MPI_Init.
 *
 * The parent job spawns one child (this program with argument "child"),
 * and each parent rank exchanges messages with it over the
 * intercommunicator both ways, eager and large (rendezvous), checked
 * byte for byte: the child is a peer of another job, added late, whose
 * address comes from the runtime after the spawn.  Then both sides call
 * MPI_Comm_disconnect and the child finalizes and exits, while the parent
 * stays in MPI, progressing, for -w seconds: long enough for a watch on
 * the child (common_efa_peer_timeout, set small by the caller) to probe
 * it and give up.  A process of another job that left after a disconnect
 * is no loss: the parent must end with "ok", not be aborted for it.
 *
 * Usage: spawn [-s bytes] [-w seconds]
 */
#include "test_util.h"

#define TAG_TO_CHILD 11
#define TAG_TO_PARENT 12

static void exchange(MPI_Comm inter, int me, int peer, size_t size, int child_side) {
    char *out = tu_malloc(size), *in = tu_malloc(size);
    const uint64_t out_seed = tu_seed(child_side, (uint64_t)me, (uint64_t)peer, size);
    const uint64_t in_seed = tu_seed(!child_side, (uint64_t)peer, (uint64_t)me, size);
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st[2];
    tu_fill(out, size, out_seed);
    memset(in, 0, size);
    /* (errors returned: a peer the components refuse fails here, and a
     * request that failed to start is no request to wait for) */
    int rc = MPI_Irecv(in, (int)size, MPI_BYTE, peer, child_side ? TAG_TO_CHILD : TAG_TO_PARENT,
                       inter, &req[0]);
    TU_ASSERT(MPI_SUCCESS == rc, "MPI_Irecv from %s %d failed (%d)",
              child_side ? "parent" : "child", peer, rc);
    rc = MPI_Isend(out, (int)size, MPI_BYTE, peer, child_side ? TAG_TO_PARENT : TAG_TO_CHILD, inter,
                   &req[1]);
    TU_ASSERT(MPI_SUCCESS == rc, "MPI_Isend to %s %d failed (%d)", child_side ? "parent" : "child",
              peer, rc);
    rc = MPI_Waitall(2, req, st);
    TU_ASSERT(MPI_SUCCESS == rc, "MPI_Waitall with %s %d failed (%d)",
              child_side ? "parent" : "child", peer, rc);
    tu_verify_recv(in, &st[0], peer, child_side ? TAG_TO_CHILD : TAG_TO_PARENT, size, in_seed,
                   child_side ? "message from the parent" : "message from the child");
    free(out);
    free(in);
}

static void run_child(size_t size) {
    MPI_Comm parent;
    int nparents = 0;
    MPI_Comm_get_parent(&parent);
    TU_ASSERT(MPI_COMM_NULL != parent, "the child has no parent");
    MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
    MPI_Comm_remote_size(parent, &nparents);
    for (int p = 0; p < nparents; ++p) {
        exchange(parent, 0, p, 64, 1);
        exchange(parent, 0, p, size, 1);
    }
    MPI_Comm_disconnect(&parent);
    MPI_Finalize();
}

int main(int argc, char **argv) {
    size_t size = 1 << 20;
    long wait_s = 0;
    for (int i = 1; i < argc; ++i) {
        if (0 == strcmp(argv[i], "child")) {
            /* No watchdog output from a child: the parent's says it. */
            MPI_Init(&argc, &argv);
            for (int j = 1; j < argc; ++j) {
                if (0 == strcmp(argv[j], "-s") && j + 1 < argc) {
                    size = tu_parse_size(argv[j + 1]);
                }
            }
            tu_setup("spawn-child");
            run_child(size);
            return 0;
        }
    }
    tu_init(&argc, &argv, "spawn");
    for (int i = 1; i < argc; ++i) {
        if (0 == strcmp(argv[i], "-s") && i + 1 < argc) {
            size = tu_parse_size(argv[++i]);
        } else if (0 == strcmp(argv[i], "-w") && i + 1 < argc) {
            wait_s = tu_parse_long(argv[++i]);
        } else {
            tu_usage("spawn [-s bytes] [-w seconds]", 1);
        }
    }
    char size_arg[32];
    snprintf(size_arg, sizeof(size_arg), "%zu", size);
    char *child_argv[] = {"child", "-s", size_arg, NULL};
    MPI_Comm inter;
    int errcode = MPI_SUCCESS;
    int rc =
        MPI_Comm_spawn(argv[0], child_argv, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, &errcode);
    TU_ASSERT(MPI_SUCCESS == rc && MPI_SUCCESS == errcode, "MPI_Comm_spawn failed (%d, %d)", rc,
              errcode);
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    /* One parent at a time, so that the child's fixed order is kept. */
    for (int p = 0; p < tu_size; ++p) {
        if (p == tu_rank) {
            exchange(inter, tu_rank, 0, 64, 0);
            exchange(inter, tu_rank, 0, size, 0);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    rc = MPI_Comm_disconnect(&inter);
    TU_ASSERT(MPI_SUCCESS == rc, "MPI_Comm_disconnect failed (%d)", rc);
    /* In MPI, progressing, while the child exits: a receive from self
     * tested until the time is up (each test runs the progress loop). */
    const double end = MPI_Wtime() + (double)wait_s;
    int flag = 0;
    MPI_Request req;
    int dummy = 0;
    MPI_Irecv(&dummy, 1, MPI_INT, tu_rank, 99, MPI_COMM_WORLD, &req);
    while (MPI_Wtime() < end) {
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        TU_ASSERT(!flag, "a receive nobody sent to completed");
        tu_sleep_ms(1);
    }
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    tu_ok("%d parent(s) and 1 child, %zu bytes each way, %ld s in MPI after the disconnect",
          tu_size, size, wait_s);
    return 0;
}
