/*
 * Lost answers: run with --mca btl_efa_debug_lose_answers 1 (the target
 * drops its answers) or 2 (it sends them naming a request never issued)
 * and a short --mca btl_efa_rma_timeout T, on a configuration whose
 * put/get the target executes (emulated).  An atomic, a put and a get of
 * rank 0 to rank 1 must then fail (not hang, not crash) within a few T
 * (the atomic's failure is said, osc/rdma does not return it), and a
 * later flush must return.  Prints "OK lost <seconds>" from rank 0.
 */
#include "osc_util.h"

#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for req; returns its error (MPI_SUCCESS if it completed). */
static int wait_err(MPI_Request *req) {
    MPI_Status st;
    int rc = MPI_Wait(req, &st);
    return MPI_SUCCESS != rc ? rc : st.MPI_ERROR;
}

int main(int argc, char **argv) {
    ou_init(&argc, &argv);
    ou_test = "lost";
    OU_CHECK(ou_size >= 2, "needs 2 ranks");
    uint8_t *mem = calloc(4096, 1);
    OU_CHECK(mem, "out of memory");
    MPI_Win win;
    OU_MPI(MPI_Win_create(mem, 4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    if (0 == ou_rank) {
        uint8_t buf[64];
        memset(buf, 0xab, sizeof(buf));
        const double t0 = now();
        MPI_Request req;
        /* NOCHECK: no lock traffic, whose atomics would be lost too. */
        OU_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
        /* First an atomic (on one node straight through the target's
         * ring, btl_efa_ring_atomic.c): osc/rdma does not pass its failure
         * on, but it must come back, not hang. */
        int64_t one = 1, old = -1;
        (void)MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 1, 0, MPI_SUM, win);
        (void)MPI_Win_flush(1, win);
        OU_MPI(MPI_Rput(buf, sizeof(buf), MPI_BYTE, 1, 0, sizeof(buf), MPI_BYTE, win, &req));
        OU_CHECK(MPI_SUCCESS != wait_err(&req), "a put whose answer was lost succeeded");
        OU_MPI(MPI_Rget(buf, sizeof(buf), MPI_BYTE, 1, 0, sizeof(buf), MPI_BYTE, win, &req));
        OU_CHECK(MPI_SUCCESS != wait_err(&req), "a get whose answer was lost succeeded");
        (void)MPI_Win_flush(1, win); /* must return, whatever it says */
        (void)MPI_Win_unlock_all(win);
        printf("OK lost %.1f\n", now() - t0);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    free(mem);
    MPI_Finalize();
    return 0;
}
