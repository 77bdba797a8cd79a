/*
 * One on-node inbox per process, whatever uses it: with pml cm + mtl_efa
 * and osc rdma + btl_efa on one node, both components' on-node channels
 * share each process's one inbox file (common/efa_node.h).  Run with the
 * inbox directory private to the job (common_efa_onnode_dir=DIR, DIR the
 * first argument): after MPI_Init, a window and a message over each path,
 * DIR must hold exactly one file per process, named efa_node.*.<vpid>.
 * (run-node-files-test.sh checks that DIR is empty once the job is over.)
 * With "removed", every process first removes every inbox file of DIR (as
 * systemd-logind's RemoveIPC does), before its first message: the job must
 * run as well, reaching the inboxes through their owners' descriptors, and
 * DIR must then hold no file.
 *   node_files DIR [removed]
 */
#include "test_util.h"

#include <dirent.h>

/* Files in dir: all of them, and those named efa_node.*.<rank> for each
 * rank below size (seen[rank] counts them). */
static int count_files(const char *dir, int size, int *seen) {
    DIR *d = opendir(dir);
    TU_ASSERT(NULL != d, "cannot open %s: %s", dir, strerror(errno));
    int n = 0;
    struct dirent *e;
    while (NULL != (e = readdir(d))) {
        if ('.' == e->d_name[0]) {
            continue;
        }
        ++n;
        const char *dot = strrchr(e->d_name, '.');
        if (0 == strncmp(e->d_name, "efa_node.", 9) && NULL != dot) {
            char *end;
            long r = strtol(dot + 1, &end, 10);
            if ('\0' == *end && r >= 0 && r < size) {
                ++seen[r];
            }
        }
    }
    closedir(d);
    return n;
}

/* Removes every efa_node.* file of dir (another process may have removed
 * one already). */
static void remove_inboxes(const char *dir) {
    DIR *d = opendir(dir);
    TU_ASSERT(NULL != d, "cannot open %s: %s", dir, strerror(errno));
    struct dirent *e;
    while (NULL != (e = readdir(d))) {
        if (0 == strncmp(e->d_name, "efa_node.", 9)) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            TU_ASSERT(0 == unlink(path) || ENOENT == errno, "cannot remove %s: %s", path,
                      strerror(errno));
        }
    }
    closedir(d);
}

int main(int argc, char **argv) {
    tu_init(&argc, &argv, "node_files");
    TU_ASSERT(argc > 1, "usage: node_files DIR [removed]");
    const char *dir = argv[1];
    const int removed = argc > 2 && 0 == strcmp(argv[2], "removed");
    if (removed) {
        remove_inboxes(dir);
    }

    /* A window (osc rdma over btl_efa) and a ring of messages (mtl_efa),
     * so that both components have set their channels up and used them. */
    /* MPI_Win_create on memory of the program's own: osc rdma cannot put
     * it in shared memory, so it reaches the peers through btl_efa. */
    int *base = malloc(sizeof(int));
    TU_ASSERT(NULL != base, "out of memory");
    MPI_Win win;
    MPI_Win_create(base, sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    *base = -1;
    MPI_Win_fence(0, win);
    const int right = (tu_rank + 1) % tu_size, left = (tu_rank + tu_size - 1) % tu_size;
    MPI_Put(&tu_rank, 1, MPI_INT, right, 0, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    TU_ASSERT(*base == left, "window holds %d, not %d", *base, left);
    MPI_Barrier(MPI_COMM_WORLD); /* every rank has looked before any atomic lands */
    /* An atomic on every peer: executed by the target over btl_efa's
     * channel where every peer has it (atomic_mode auto on one node). */
    for (int r = 0; r < tu_size; ++r) {
        int one = 1, old = 0;
        MPI_Win_lock(MPI_LOCK_SHARED, r, 0, win);
        MPI_Fetch_and_op(&one, &old, MPI_INT, r, 0, MPI_SUM, win);
        MPI_Win_unlock(r, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, tu_rank, 0, win);
    const int sum = *base;
    MPI_Win_unlock(tu_rank, win);
    TU_ASSERT(sum == left + tu_size, "window holds %d after the atomics, not %d", sum,
              left + tu_size);
    int got = -1;
    MPI_Sendrecv(&tu_rank, 1, MPI_INT, right, 7, &got, 1, MPI_INT, left, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    TU_ASSERT(got == left, "received %d, not %d", got, left);

    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == tu_rank) {
        int *seen = calloc((size_t)tu_size, sizeof(int));
        TU_ASSERT(NULL != seen, "out of memory");
        const int n = count_files(dir, tu_size, seen);
        const int each = removed ? 0 : 1;
        for (int r = 0; r < tu_size; ++r) {
            TU_ASSERT(each == seen[r], "%d inbox file(s) of rank %d in %s", seen[r], r, dir);
        }
        TU_ASSERT(n == each * tu_size, "%d files in %s for %d processes (%d inbox each expected)",
                  n, dir, tu_size, each);
        free(seen);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* nobody finalizes (unlinking) before rank 0 has looked */
    MPI_Win_free(&win);
    free(base);
    tu_ok("%d processes, %s", tu_size,
          removed ? "their inbox files removed, reached through their descriptors"
                  : "one inbox file each");
    return 0;
}
