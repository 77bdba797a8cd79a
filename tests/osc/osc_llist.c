/*
 * A distributed linked list in a dynamic window (MPI_Win_create_dynamic):
 * every element lives in memory its owner attached on its own (a few
 * dozen bytes, many to a page, as applications allocate list nodes), and
 * every rank appends its elements to the one shared list.
 *
 *   osc_llist [N]   N elements per rank and phase (default 64)
 *
 * Phase 1, lock-free (MPI_Win_lock_all): a rank claims the tail's "next"
 * by compare-and-swap on its rank field; the winner publishes its
 * element's address with an atomic MPI_REPLACE accumulate, a loser reads
 * the winner's address with MPI_NO_OP fetch-and-op (waiting until it is
 * published) and moves on to that element.
 * Phase 2, exclusive locks: rank 0 holds the tail's location; a rank
 * locks rank 0 and the tail's owner exclusively and links its element with
 * plain MPI_Get and MPI_Put.
 * After each phase rank 0 walks the list with MPI_Get (4-byte values,
 * 8-byte links) and checks that it holds every element once, each rank's
 * in the order that rank appended them.  Prints "OK llist" from rank 0.
 *
 * Every rank attaches a phase's elements before the barrier that starts
 * the phase, not while the others append: osc/rdma (4.1 and 5.0) reads
 * the region table of a peer on its own node straight from shared memory,
 * without the lock its owner's MPI_Win_attach holds while it moves the
 * entries (osc_rdma_dynamic.c, ompi_osc_rdma_find_dynamic_region).  A
 * lookup that meets an attach in progress returns a neighbour's region
 * (btl_efa then refuses the operation: the handle does not cover the
 * address) or none (MPI_ERR_RMA_RANGE), whatever the BTL; see
 * docs/RELIABILITY.md, "Dynamic windows".
 */
#include "osc_util.h"

#include <stddef.h>

/* One list element; the links are 64-bit so that CAS and fetch-and-op
 * work on them directly. */
typedef struct elem {
    int32_t value; /* rank << 20 | sequence number */
    int32_t pad;
    int64_t next_rank; /* -1: end of the list */
    int64_t next_disp; /* absolute address at next_rank; 0 until published */
} elem_t;

#define NIL_RANK ((int64_t)-1)
#define OFF_RANK ((MPI_Aint)offsetof(elem_t, next_rank))
#define OFF_DISP ((MPI_Aint)offsetof(elem_t, next_disp))

typedef struct {
    int64_t rank;
    int64_t disp;
} ptr_t;

static MPI_Win win;
static elem_t **mine; /* this rank's elements, to detach and free */
static int nmine;

/* A new element of this rank, attached on its own. */
static ptr_t new_elem(int seq) {
    elem_t *e = malloc(sizeof(*e));
    OU_CHECK(e, "out of memory");
    e->value = (int32_t)((ou_rank << 20) | seq);
    e->pad = 0;
    e->next_rank = NIL_RANK;
    e->next_disp = 0;
    OU_MPI(MPI_Win_attach(win, e, sizeof(*e)));
    mine[nmine++] = e;
    MPI_Aint a;
    MPI_Get_address(e, &a);
    return (ptr_t){ou_rank, (int64_t)a};
}

/* Phase 1: append one element without locks (epoch of lock_all). */
static void append_cas(ptr_t *tail, ptr_t me) {
    for (;;) {
        int64_t nil = NIL_RANK, who = me.rank, old = 0;
        OU_MPI(MPI_Compare_and_swap(&who, &nil, &old, MPI_INT64_T, (int)tail->rank,
                                    (MPI_Aint)tail->disp + OFF_RANK, win));
        OU_MPI(MPI_Win_flush((int)tail->rank, win));
        if (NIL_RANK == old) {
            OU_MPI(MPI_Accumulate(&me.disp, 1, MPI_INT64_T, (int)tail->rank,
                                  (MPI_Aint)tail->disp + OFF_DISP, 1, MPI_INT64_T, MPI_REPLACE,
                                  win));
            OU_MPI(MPI_Win_flush((int)tail->rank, win));
            *tail = me;
            return;
        }
        OU_CHECK(old >= 0 && old < ou_size, "CAS returned rank %lld", (long long)old);
        /* Another rank won: follow it once its address is published. */
        int64_t disp = 0;
        long spins = 0;
        do {
            OU_MPI(MPI_Fetch_and_op(NULL, &disp, MPI_INT64_T, (int)tail->rank,
                                    (MPI_Aint)tail->disp + OFF_DISP, MPI_NO_OP, win));
            OU_MPI(MPI_Win_flush((int)tail->rank, win));
            OU_CHECK(++spins < 100000000L, "next pointer never published");
        } while (0 == disp);
        tail->rank = old;
        tail->disp = disp;
    }
}

/* Phase 2: append one element under exclusive locks; rank 0 keeps the
 * tail's location at tailrec. */
static void append_locked(MPI_Aint tailrec, ptr_t me) {
    OU_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    ptr_t tail;
    OU_MPI(MPI_Get(&tail, 2, MPI_INT64_T, 0, tailrec, 2, MPI_INT64_T, win));
    OU_MPI(MPI_Win_flush(0, win));
    OU_CHECK(tail.rank >= 0 && tail.rank < ou_size && tail.disp != 0, "bad tail record");
    if (0 != tail.rank) {
        OU_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, (int)tail.rank, 0, win));
    }
    int64_t link[2];
    OU_MPI(MPI_Get(link, 2, MPI_INT64_T, (int)tail.rank, (MPI_Aint)tail.disp + OFF_RANK, 2,
                   MPI_INT64_T, win));
    OU_MPI(MPI_Win_flush((int)tail.rank, win));
    OU_CHECK(NIL_RANK == link[0] && 0 == link[1], "the tail record names a non-tail element");
    link[0] = me.rank;
    link[1] = me.disp;
    OU_MPI(MPI_Put(link, 2, MPI_INT64_T, (int)tail.rank, (MPI_Aint)tail.disp + OFF_RANK, 2,
                   MPI_INT64_T, win));
    OU_MPI(MPI_Put(&me, 2, MPI_INT64_T, 0, tailrec, 2, MPI_INT64_T, win));
    if (0 != tail.rank) {
        OU_MPI(MPI_Win_unlock((int)tail.rank, win));
    }
    OU_MPI(MPI_Win_unlock(0, win));
}

/* Rank 0: walk the list from head; every rank must appear with sequence
 * numbers 0..expect-1 in order.  Returns the tail. */
static ptr_t walk(ptr_t head, int expect) {
    int *next_seq = calloc((size_t)ou_size, sizeof(int));
    OU_CHECK(next_seq, "out of memory");
    ptr_t p = head, last = head;
    long count = 0;
    OU_MPI(MPI_Win_lock_all(0, win));
    for (;;) {
        int32_t value;
        int64_t link[2];
        OU_MPI(MPI_Get(&value, 1, MPI_INT32_T, (int)p.rank, (MPI_Aint)p.disp, 1, MPI_INT32_T, win));
        OU_MPI(MPI_Get(link, 2, MPI_INT64_T, (int)p.rank, (MPI_Aint)p.disp + OFF_RANK, 2,
                       MPI_INT64_T, win));
        OU_MPI(MPI_Win_flush((int)p.rank, win));
        if (count > 0) { /* the head is rank 0's sentinel */
            int r = value >> 20, seq = value & 0xfffff;
            OU_CHECK(r == p.rank, "element at rank %lld holds value of rank %d", (long long)p.rank,
                     r);
            OU_CHECK(seq == next_seq[r], "rank %d: element %d where %d was due", r, seq,
                     next_seq[r]);
            ++next_seq[r];
        }
        ++count;
        OU_CHECK(count <= (long)expect * ou_size + 1, "list longer than expected (a cycle?)");
        last = p;
        if (NIL_RANK == link[0]) {
            break;
        }
        OU_CHECK(link[0] >= 0 && link[0] < ou_size && link[1] != 0, "bad link %lld:%llx",
                 (long long)link[0], (unsigned long long)link[1]);
        p.rank = link[0];
        p.disp = link[1];
    }
    OU_MPI(MPI_Win_unlock_all(win));
    for (int r = 0; r < ou_size; ++r) {
        OU_CHECK(next_seq[r] == expect, "rank %d has %d elements in the list, not %d", r,
                 next_seq[r], expect);
    }
    free(next_seq);
    return last;
}

int main(int argc, char **argv) {
    ou_init(&argc, &argv);
    ou_test = "llist";
    int n = argc > 1 ? atoi(argv[1]) : 64;
    OU_CHECK(n > 0 && n < (1 << 20), "bad element count %d", n);
    OU_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    mine = calloc((size_t)(2 * n + 1), sizeof(*mine));
    OU_CHECK(mine, "out of memory");

    /* The head (rank 0's sentinel) and rank 0's tail record. */
    ptr_t head = {0, 0};
    ptr_t *tailrec = calloc(1, sizeof(*tailrec));
    OU_CHECK(tailrec, "out of memory");
    MPI_Aint tailrec_addr = 0;
    if (0 == ou_rank) {
        head = new_elem(0);
        head.rank = 0;
        OU_MPI(MPI_Win_attach(win, tailrec, sizeof(*tailrec)));
        MPI_Get_address(tailrec, &tailrec_addr);
    }
    MPI_Bcast(&head, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
    MPI_Bcast(&tailrec_addr, 1, MPI_AINT, 0, MPI_COMM_WORLD);

    ptr_t *fresh = calloc((size_t)n, sizeof(*fresh));
    OU_CHECK(fresh, "out of memory");

    /* Phase 1: lock-free appends. */
    for (int i = 0; i < n; ++i) {
        fresh[i] = new_elem(i);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ptr_t tail = head;
    OU_MPI(MPI_Win_lock_all(0, win));
    for (int i = 0; i < n; ++i) {
        append_cas(&tail, fresh[i]);
    }
    OU_MPI(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == ou_rank) {
        *tailrec = walk(head, n);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Phase 2: appends under exclusive locks. */
    for (int i = 0; i < n; ++i) {
        fresh[i] = new_elem(n + i);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i) {
        append_locked(tailrec_addr, fresh[i]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == ou_rank) {
        (void)walk(head, 2 * n);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    for (int i = 0; i < nmine; ++i) {
        OU_MPI(MPI_Win_detach(win, mine[i]));
        free(mine[i]);
    }
    if (0 == ou_rank) {
        OU_MPI(MPI_Win_detach(win, tailrec));
    }
    free(tailrec);
    free(fresh);
    free(mine);
    OU_MPI(MPI_Win_free(&win));
    if (0 == ou_rank) {
        printf("OK llist\n");
    }
    MPI_Finalize();
    return 0;
}
