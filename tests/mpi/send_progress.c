/*
 * send_progress: a send that its receiver has matched completes, whatever
 * else the sender has outstanding.
 *
 * In each even/odd pair the even rank sends A (tag 1), B (tag 2) and a
 * small C (tag 3), posting A nonblocking and B and C blocking; the odd rank
 * receives B, then C, then A.  MPI_Send(B) must return once B is matched,
 * although A is still waiting for its receive: a transport that completes
 * sends only in posting order (libfabric's shm provider) deadlocks here
 * unless it works around that.  Then the same with A synchronous
 * (MPI_Issend), and with several sends held at once (A1..An before B).
 * Sizes 64 KiB and MAXSIZE: above every provider's inject size.
 *
 * With 3 or more ranks, also a wait that must drive every path: A (rank
 * 0) posts Irecv(C, 64 KiB) and then Ssend(B); C (rank 1) sends 64 KiB to
 * A, then a message to B; B (rank 2) receives C's message, then A's.  A's
 * Ssend completes only after B has received C's message, which C sends
 * only once A has taken its 64 KiB: A must keep receiving while it waits
 * in Ssend.  With the ranks on pretend nodes of two slots (cm-efa-mixed)
 * A and C share a node (their message takes mtl_efa's rings) and B is on
 * the other (the Ssend takes the provider).
 *
 * Options: -i ITERS (default 20), -n HELD (default 8), -s MAXSIZE
 *          (default 1M), -y: standard sends only (no MPI_Issend; shm never
 *          matches a synchronous message that waits unexpected, see
 *          tests/provider-defects/shm_wildcard_unexpected.c).
 */
#include "test_util.h"

#define MAX_HELD 64

/* held: sends A1..A(held) wait for their receives while B and C go. */
static void step(int peer, int even, size_t size, int held, int sync, int it, char **abuf,
                 char *bbuf, char *rbuf) {
    char what[128];
    MPI_Request req[MAX_HELD];
    uint64_t seed = tu_seed(size, (uint64_t)held, (uint64_t)sync, (uint64_t)it);
    char cbuf[8], crecv[8];

    snprintf(what, sizeof(what), "size %zu held %d %s iter %d", size, held,
             sync ? "issend" : "isend", it);
    if (even) {
        for (int i = 0; i < held; i++) {
            tu_fill(abuf[i], size, seed + 10 + (uint64_t)i);
            if (sync) {
                MPI_Issend(abuf[i], (int)size, MPI_BYTE, peer, 100 + i, MPI_COMM_WORLD, &req[i]);
            } else {
                MPI_Isend(abuf[i], (int)size, MPI_BYTE, peer, 100 + i, MPI_COMM_WORLD, &req[i]);
            }
        }
        tu_fill(bbuf, size, seed + 1);
        MPI_Send(bbuf, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
        tu_fill(cbuf, sizeof(cbuf), seed + 2);
        MPI_Send(cbuf, (int)sizeof(cbuf), MPI_BYTE, peer, 3, MPI_COMM_WORLD);
        MPI_Waitall(held, req, MPI_STATUSES_IGNORE);
    } else {
        tu_recv_verify(rbuf, size, peer, 2, seed + 1, what);
        tu_recv_verify(crecv, sizeof(crecv), peer, 3, seed + 2, what);
        for (int i = held - 1; i >= 0; i--) { /* last posted first */
            tu_recv_verify(rbuf, size, peer, 100 + i, seed + 10 + (uint64_t)i, what);
        }
    }
}

/* A = rank 0, C = rank 1, B = rank 2 (see the top of the file). */
static void three_way(int it) {
    const size_t big = 65536;
    char small[8], small_in[8];
    char *buf = tu_malloc(big);
    uint64_t seed = tu_seed(3, (uint64_t)it, 0, 0);
    char what[64];

    snprintf(what, sizeof(what), "three-way iter %d", it);
    if (0 == tu_rank) {
        MPI_Request req;
        MPI_Status st;
        int count;

        memset(buf, TU_POISON, big);
        MPI_Irecv(buf, (int)big, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &req);
        tu_fill(small, sizeof(small), seed + 1);
        MPI_Ssend(small, (int)sizeof(small), MPI_BYTE, 2, 8, MPI_COMM_WORLD);
        MPI_Wait(&req, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        TU_ASSERT((size_t)count == big, "%s: A got %d bytes from C, expected %zu", what, count,
                  big);
        tu_verify(buf, big, seed, what);
    } else if (1 == tu_rank) {
        tu_fill(buf, big, seed);
        MPI_Send(buf, (int)big, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
        tu_fill(small, sizeof(small), seed + 2);
        MPI_Send(small, (int)sizeof(small), MPI_BYTE, 2, 9, MPI_COMM_WORLD);
    } else if (2 == tu_rank) {
        tu_recv_verify(small_in, sizeof(small_in), 1, 9, seed + 2, what);
        tu_recv_verify(small_in, sizeof(small_in), 0, 8, seed + 1, what);
    }
    free(buf);
}

int main(int argc, char **argv) {
    int iters = 20, held = 8, opt, with_sync = 1;
    size_t max_size = 1u << 20;

    tu_init(&argc, &argv, "send_progress");
    while ((opt = getopt(argc, argv, "i:n:s:yh")) != -1) {
        switch (opt) {
        case 'i':
            iters = (int)tu_parse_long(optarg);
            break;
        case 'n':
            held = (int)tu_parse_long(optarg);
            break;
        case 's':
            max_size = tu_parse_size(optarg);
            break;
        case 'y':
            with_sync = 0;
            break;
        case 'h':
            tu_usage("[-i ITERS] [-n HELD] [-s MAXSIZE] [-y]", 0);
        default:
            tu_usage("[-i ITERS] [-n HELD] [-s MAXSIZE] [-y]", 1);
        }
    }
    TU_ASSERT(held >= 1 && held <= MAX_HELD, "HELD must be 1..%d", MAX_HELD);
    TU_ASSERT(max_size >= 65536 && max_size <= (1u << 30), "MAXSIZE must be 64K..1G");
    int peer = tu_pair_partner();
    int even = tu_rank % 2 == 0;
    const size_t sizes[] = {65536, max_size};
    char *abuf[MAX_HELD], *bbuf = tu_malloc(max_size), *rbuf = tu_malloc(max_size);
    for (int i = 0; i < held; i++) {
        abuf[i] = tu_malloc(max_size);
    }
    if (peer >= 0) {
        for (int s = 0; s < 2; s++) {
            for (int sync = 0; sync <= with_sync; sync++) {
                for (int it = 0; it < iters; it++) {
                    step(peer, even, sizes[s], 1, sync, it, abuf, bbuf, rbuf);
                    step(peer, even, sizes[s], held, sync, it, abuf, bbuf, rbuf);
                }
            }
        }
    }
    if (tu_size >= 3) {
        for (int it = 0; it < iters; it++) {
            three_way(it);
        }
    }
    for (int i = 0; i < held; i++) {
        free(abuf[i]);
    }
    free(bbuf);
    free(rbuf);
    tu_ok("np=%d iters=%d held=%d sizes=64K,%zu isend%s%s", tu_size, iters, held, max_size,
          with_sync ? ",issend" : "", tu_size >= 3 ? ",three-way" : "");
    return 0;
}
