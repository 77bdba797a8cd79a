/*
 * Answers from another process than the target: run on 3 ranks with
 * --mca btl_efa_debug_lose_answers 4 on a configuration whose put/get the
 * target executes (emulated).  Each target then also answers, before its
 * own answer, the few request ids below the one it got, as a process of
 * the job that guessed them would (ids are sequential).  Rank 0 gets from
 * rank 1, which is busy for two seconds, then puts to rank 2: rank 2's forged
 * answer names the get still in flight, and must be dropped, so the get
 * completes with rank 1's bytes, not early, not failed.  Prints
 * "OK foreign" from rank 0.
 */
#include "osc_util.h"

#include <unistd.h>

#define N 64

int main(int argc, char **argv) {
    ou_init(&argc, &argv);
    ou_test = "foreign";
    OU_CHECK(ou_size >= 3, "needs 3 ranks");
    uint8_t *mem = malloc(N);
    OU_CHECK(mem, "out of memory");
    memset(mem, 0x10 + ou_rank, N);
    MPI_Win win;
    OU_MPI(MPI_Win_create(mem, N, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == ou_rank) {
        uint8_t got[N], put[N];
        memset(got, 0, sizeof(got));
        memset(put, 0xee, sizeof(put));
        MPI_Request get_req, put_req;
        MPI_Status st;
        /* NOCHECK: no lock traffic between the get and the put. */
        OU_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
        OU_MPI(MPI_Rget(got, N, MPI_BYTE, 1, 0, N, MPI_BYTE, win, &get_req));
        OU_MPI(MPI_Rput(put, N, MPI_BYTE, 2, 0, N, MPI_BYTE, win, &put_req));
        OU_MPI(MPI_Wait(&put_req, &st));
        int done = 0;
        OU_MPI(MPI_Test(&get_req, &done, &st));
        OU_CHECK(!done, "the get to rank 1 (busy) completed before rank 1 answered");
        OU_MPI(MPI_Wait(&get_req, &st));
        OU_CHECK(MPI_SUCCESS == st.MPI_ERROR, "the get failed (error %d)", st.MPI_ERROR);
        for (int i = 0; i < N; ++i) {
            OU_CHECK(got[i] == 0x11, "byte %d of the get is 0x%02x, not rank 1's 0x11", i, got[i]);
        }
        OU_MPI(MPI_Win_unlock_all(win));
    } else if (1 == ou_rank) {
        sleep(2); /* busy: no progress, so no answer, for two seconds */
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (2 == ou_rank) {
        for (int i = 0; i < N; ++i) {
            OU_CHECK(mem[i] == 0xee, "byte %d of rank 2's window is 0x%02x, not the put's", i,
                     mem[i]);
        }
    }
    MPI_Win_free(&win);
    free(mem);
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == ou_rank) {
        printf("OK foreign\n");
    }
    MPI_Finalize();
    return 0;
}
