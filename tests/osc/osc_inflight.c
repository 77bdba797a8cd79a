/*
 * btl_efa finalized with a native one-sided operation still posted, and the
 * core kept open by another user (pml cm's mtl_efa) that progresses after.
 * Run on 2 ranks under pml cm, native get, single copy off, on a provider
 * whose RMA needs the target's progress (tcp;ofi_rxm).
 *
 * Rank 0 stops progressing for a while; rank 1 posts a large get from it,
 * then calls btl_efa's finalize itself (as MPI_Finalize would, in an order
 * where the MTL outlives the BTL), which gives up waiting for the get after
 * its bounded wait.  Rank 0 then progresses again, the get completes at
 * rank 1, and its completion must find live memory: before the fix the
 * operation's slab was freed at finalize (heap use after free, under ASan a
 * report, without it a crash or a silent write into freed memory).
 *
 * osc/rdma still holds its window over the finalized BTL, so neither rank
 * frees it or calls MPI_Finalize: both print "OK inflight" (rank 1 after
 * its completion was reaped) and leave with _exit(0).  Test path only.
 */
#define _GNU_SOURCE
#include "osc_util.h"

#include <time.h>
#include <unistd.h>

#include "btl_efa_dl.h"
#include "opal_config.h"
#include "opal/mca/btl/btl.h"

#define GET_BYTES (64u << 20)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Progress (through the MTL, which keeps the core open) for 'seconds'. */
static void progress_for(double seconds) {
    int flag;
    double end = now() + seconds;
    while (now() < end) {
        MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
}

int main(int argc, char **argv) {
    ou_init(&argc, &argv);
    ou_test = "inflight";
    OU_CHECK(2 == ou_size, "needs 2 ranks");
    uint8_t *mem = calloc(GET_BYTES, 1);
    OU_CHECK(mem, "out of memory");
    MPI_Win win;
    OU_MPI(MPI_Win_create(mem, GET_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    OU_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == ou_rank) {
        /* No progress: rank 1's get stays with the provider beyond its
         * finalize's wait (2 s). */
        double end = now() + 5.0;
        while (now() < end) {
        }
        progress_for(3.0);
        printf("OK inflight (rank 0)\n");
        fflush(stdout);
        _exit(0);
    }
    OU_MPI(MPI_Get(mem, GET_BYTES, MPI_BYTE, 0, 0, GET_BYTES, MPI_BYTE, win));
    char why[4200];
    void *lib = efa_test_open_btl_efa(why, sizeof(why));
    OU_CHECK(lib, "%s", why);
    mca_btl_base_module_t *btl = dlsym(lib, "mca_btl_efa_module");
    OU_CHECK(btl && btl->btl_finalize, "no mca_btl_efa_module");
    OU_CHECK(OPAL_SUCCESS == btl->btl_finalize(btl), "btl_efa's finalize failed");
    /* The get completes now that rank 0 progresses again. */
    progress_for(6.0);
    printf("OK inflight (rank 1)\n");
    fflush(stdout);
    _exit(0);
}
