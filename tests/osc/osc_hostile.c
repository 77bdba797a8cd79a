/*
 * Hostile input: run with --mca btl_efa_debug_corrupt_offset W (W = the
 * window size, see below), so every put and atomic the initiator sends
 * names an address W bytes past the one osc/rdma computed, i.e. outside
 * the target's window (but inside memory the target owns, so a write
 * would be seen).  The target must refuse them: the put request completes
 * with an error at the initiator and the target's memory is unchanged.
 * Rank 0 is the initiator, rank 1 the target.  Prints "OK hostile".
 */
#include "osc_util.h"

#define W 4096

int main(int argc, char **argv) {
    ou_init(&argc, &argv);
    ou_test = "hostile";
    OU_CHECK(ou_size >= 2, "needs 2 ranks");
    uint8_t *mem = malloc(3 * W);
    memset(mem, 0x5a, 3 * W);
    MPI_Win win;
    /* the window is the middle third */
    OU_MPI(MPI_Win_create(mem + W, W, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    int put_err = MPI_SUCCESS;
    if (0 == ou_rank) {
        uint8_t src[64];
        memset(src, 0xff, sizeof(src));
        MPI_Request req;
        MPI_Status st;
        OU_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
        OU_MPI(MPI_Rput(src, sizeof(src), MPI_BYTE, 1, 0, sizeof(src), MPI_BYTE, win, &req));
        put_err = MPI_Wait(&req, &st);
        if (MPI_SUCCESS == put_err) {
            put_err = st.MPI_ERROR;
        }
        int64_t one = 1, res = 0;
        (void)MPI_Fetch_and_op(&one, &res, MPI_INT64_T, 1, 128, MPI_SUM, win);
        (void)MPI_Accumulate(&one, 1, MPI_INT64_T, 1, 256, 1, MPI_INT64_T, MPI_BOR, win);
        (void)MPI_Win_flush(1, win);
        OU_MPI(MPI_Win_unlock_all(win));
        printf("hostile: put completed with %s\n", MPI_SUCCESS == put_err ? "success" : "an error");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (1 == ou_rank) {
        for (size_t i = 0; i < 3 * W; ++i) {
            OU_CHECK(mem[i] == 0x5a, "target byte %zu (window starts at %d) was written", i, W);
        }
    }
    int err_flag = (MPI_SUCCESS != put_err);
    MPI_Bcast(&err_flag, 1, MPI_INT, 0, MPI_COMM_WORLD);
    OU_CHECK(err_flag, "the refused put completed without an error at the initiator");
    MPI_Win_free(&win);
    free(mem);
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == ou_rank) {
        printf("OK hostile\n");
    }
    MPI_Finalize();
    return 0;
}
