/*
 * An atomic outside the handle it came with, to a process whose device
 * memory the initiator has met (tests/run-device-tests.sh, under osc/rdma
 * + btl_efa with --mca common_efa_debug_fake_device 1 and --mca
 * btl_efa_debug_corrupt_offset W: every put and atomic names an address W
 * bytes past the one osc/rdma computed).  Rank 0 first gets from rank 1's
 * window over device memory (btl_efa meets a handle of rank 1's device
 * memory), then issues a fetch-and-op on rank 1's window over host memory
 * (the middle third of 3 W bytes, as tests/osc/osc_hostile.c): btl_efa
 * refuses it at once, since such an address could be device memory the
 * handle does not show, and osc/rdma does it by a get and a put, the put
 * refused by rank 1 (outside its window).  Rank 1's host memory must be
 * unchanged; its device window reads back as it was filled.
 * Prints "ok device_hostile".
 */
#define _GNU_SOURCE
#include "test_util.h"

#include "fake_device.h"

#define W 4096

int main(int argc, char **argv) {
    tu_init(&argc, &argv, "device_hostile");
    TU_ASSERT(tu_size >= 2, "needs 2 ranks");
    open_fake();
    /* A window over device memory, filled by its owner with the fake's copy. */
    void *wd = dalloc(W);
    dfill(wd, W, 7);
    MPI_Win dwin;
    TU_ASSERT(MPI_SUCCESS == MPI_Win_create(wd, W, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &dwin),
              "MPI_Win_create over device memory failed");
    MPI_Win_set_errhandler(dwin, MPI_ERRORS_RETURN);
    /* A window over host memory: the middle third. */
    uint8_t *mem = tu_malloc(3 * W);
    memset(mem, 0x5a, 3 * W);
    MPI_Win hwin;
    TU_ASSERT(MPI_SUCCESS == MPI_Win_create(mem + W, W, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &hwin),
              "MPI_Win_create over host memory failed");
    MPI_Win_set_errhandler(hwin, MPI_ERRORS_RETURN);
    if (0 == tu_rank) {
        unsigned char got[64];
        TU_ASSERT(MPI_SUCCESS == MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, dwin), "lock failed");
        TU_ASSERT(MPI_SUCCESS ==
                      MPI_Get(got, sizeof(got), MPI_BYTE, 1, 0, sizeof(got), MPI_BYTE, dwin),
                  "MPI_Get from the device window failed");
        TU_ASSERT(MPI_SUCCESS == MPI_Win_unlock(1, dwin), "unlock failed");
        tu_verify(got, sizeof(got), 7, "bytes got from the device window");
        int64_t one = 1, res = 0;
        TU_ASSERT(MPI_SUCCESS == MPI_Win_lock_all(MPI_MODE_NOCHECK, hwin), "lock_all failed");
        /* (its error, if any, is the refused put's: not looked at) */
        (void)MPI_Fetch_and_op(&one, &res, MPI_INT64_T, 1, 128, MPI_SUM, hwin);
        (void)MPI_Win_flush(1, hwin);
        TU_ASSERT(MPI_SUCCESS == MPI_Win_unlock_all(hwin), "unlock_all failed");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (1 == tu_rank) {
        for (size_t i = 0; i < 3 * W; ++i) {
            TU_ASSERT(mem[i] == 0x5a, "host byte %zu (the window starts at %d) was written", i, W);
        }
        dverify(wd, W, W, 7, "the device window");
    }
    MPI_Win_free(&hwin);
    MPI_Win_free(&dwin);
    free(mem);
    dev_free(wd);
    MPI_Barrier(MPI_COMM_WORLD);
    tu_ok("an atomic outside its handle, to a process whose device memory was met");
    return 0;
}
