/*
 * collectives: MPI_Bcast, MPI_Reduce, MPI_Allreduce and MPI_Alltoall with
 * exact verification, from small sizes up to MAXTOTAL bytes per rank.
 *
 *   bcast:     byte pattern keyed by size and root; roots 0, n/2 and n-1.
 *   reduce:    int64 sum to the same roots.
 *   allreduce: int64 sum (element i of rank r is (r+1)*(i+1) + r*r, so the
 *              expected result has a closed form), and an in-place int32 sum.
 *   alltoall:  MAXTOTAL/np bytes per peer at the largest size, each block
 *              keyed by (sender, receiver, size).
 *   neighbors: MPI_Neighbor_allgather on a periodic ring (a 1-D cart), whose
 *              tags Open MPI takes from far below the user's: it either
 *              delivers both neighbours' values or fails with MPI_ERR_ARG
 *              (mtl_efa through a provider without remote CQ data carries
 *              24-bit tags and refuses it), and after it the user's own
 *              messages on that communicator with tags 0 and 1 (what such
 *              a tag cut to 24 bits would read as) reach their receives.
 *
 * Options: -s MAXTOTAL bytes per rank (default 16M).
 */
#include "test_util.h"

static const size_t sizes[] = {1, 3, 1000, 65537, 1u << 20, 16u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int nroots(int *roots) {
    int n = 0, cand[3] = {0, tu_size / 2, tu_size - 1}, i, j;

    for (i = 0; i < 3; i++) {
        for (j = 0; j < n; j++)
            if (roots[j] == cand[i])
                break;
        if (j == n)
            roots[n++] = cand[i];
    }
    return n;
}

static int64_t elem(int r, size_t i) {
    return (int64_t)(r + 1) * (int64_t)(i + 1) + r * r;
}

static int64_t elem_sum(size_t i) {
    int64_t n = tu_size;

    return (int64_t)(i + 1) * n * (n + 1) / 2 + (n - 1) * n * (2 * n - 1) / 6;
}

static void check_sum(const int64_t *v, size_t count, const char *what) {
    size_t i;

    for (i = 0; i < count; i++)
        TU_ASSERT(v[i] == elem_sum(i), "%s: element %zu of %zu expected %" PRId64 " got %" PRId64,
                  what, i, count, elem_sum(i), v[i]);
}

/* The neighbors check (see the top); what the collective did. */
static const char *neighbor_ring(void) {
    MPI_Comm ring;
    int dims[1] = {tu_size}, periods[1] = {1};
    int left, right, got[2] = {-1, -1}, mine = 1000 + tu_rank, cls = MPI_SUCCESS;
    const char *outcome = "delivered";

    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
    MPI_Comm_set_errhandler(ring, MPI_ERRORS_RETURN);
    MPI_Cart_shift(ring, 0, 1, &left, &right);
    int rc = MPI_Neighbor_allgather(&mine, 1, MPI_INT, got, 1, MPI_INT, ring);
    if (rc == MPI_SUCCESS) {
        TU_ASSERT(got[0] == 1000 + left && got[1] == 1000 + right,
                  "neighbor allgather: got %d and %d, expected %d and %d", got[0], got[1],
                  1000 + left, 1000 + right);
    } else {
        MPI_Error_class(rc, &cls);
        TU_ASSERT(cls == MPI_ERR_ARG, "neighbor allgather failed with class %d, not MPI_ERR_ARG",
                  cls);
        outcome = "refused";
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int tag = 0; tag < 2; tag++) {
        int in = -1, out = 2000 + 10 * tu_rank + tag;
        rc = MPI_Sendrecv(&out, 1, MPI_INT, right, tag, &in, 1, MPI_INT, left, tag, ring,
                          MPI_STATUS_IGNORE);
        TU_ASSERT(rc == MPI_SUCCESS, "tag %d after the neighbor collective: error %d", tag, rc);
        TU_ASSERT(in == 2000 + 10 * left + tag,
                  "tag %d after the neighbor collective: got %d, expected %d", tag, in,
                  2000 + 10 * left + tag);
    }
    MPI_Comm_free(&ring);
    return outcome;
}

int main(int argc, char **argv) {
    size_t max_total = 16u << 20, s, i;
    int roots[3], nr, r, k;
    char *a, *b, what[128];
    double t0;

    tu_init(&argc, &argv, "collectives");
    tu_parse_count_size(argc, argv, "[-s MAXTOTAL]", NULL, &max_total);
    TU_ASSERT(max_total >= 8 && max_total <= (1u << 30), "bad MAXTOTAL");
    a = tu_malloc(max_total);
    b = tu_malloc(max_total);
    nr = nroots(roots);
    t0 = MPI_Wtime();

    for (s = 0; s < NSIZES; s++) {
        /* the listed sizes below MAXTOTAL, then MAXTOTAL itself */
        size_t size = sizes[s] < max_total ? sizes[s] : max_total;

        if (s > 0 && sizes[s - 1] >= max_total)
            break;
        /* bcast */
        for (r = 0; r < nr; r++) {
            uint64_t seed = tu_seed(1, size, roots[r], 0);

            if (tu_rank == roots[r])
                tu_fill(a, size, seed);
            else
                memset(a, TU_POISON, size);
            MPI_Bcast(a, (int)size, MPI_BYTE, roots[r], MPI_COMM_WORLD);
            snprintf(what, sizeof(what), "bcast of %zu bytes from root %d", size, roots[r]);
            tu_verify(a, size, seed, what);
        }

        /* reduce and allreduce on int64 */
        {
            size_t count = size / 8 ? size / 8 : 1;
            int64_t *sv = (int64_t *)a, *rv = (int64_t *)b;

            for (i = 0; i < count; i++)
                sv[i] = elem(tu_rank, i);
            for (r = 0; r < nr; r++) {
                memset(rv, TU_POISON, count * 8);
                MPI_Reduce(sv, rv, (int)count, MPI_INT64_T, MPI_SUM, roots[r], MPI_COMM_WORLD);
                if (tu_rank == roots[r]) {
                    snprintf(what, sizeof(what), "reduce(sum) of %zu int64 to root %d", count,
                             roots[r]);
                    check_sum(rv, count, what);
                }
            }
            memset(rv, TU_POISON, count * 8);
            MPI_Allreduce(sv, rv, (int)count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
            snprintf(what, sizeof(what), "allreduce(sum) of %zu int64", count);
            check_sum(rv, count, what);
        }

        /* in-place allreduce on int32 */
        {
            size_t count = size / 4 ? size / 4 : 1;
            int32_t *v = (int32_t *)a;

            for (i = 0; i < count; i++)
                v[i] = (int32_t)(tu_rank * 3 + (int)(i % 1000));
            MPI_Allreduce(MPI_IN_PLACE, v, (int)count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
            for (i = 0; i < count; i++) {
                int32_t expect =
                    (int32_t)(3 * (tu_size * (tu_size - 1) / 2) + tu_size * (int)(i % 1000));

                TU_ASSERT(v[i] == expect,
                          "in-place allreduce(sum) of %zu int32: element %zu expected %d got %d",
                          count, i, expect, v[i]);
            }
        }

        /* alltoall: size bytes in total per rank, size/np per peer */
        {
            size_t blk = size / (size_t)tu_size;

            for (k = 0; k < tu_size; k++)
                tu_fill(a + k * blk, blk, tu_seed(2, tu_rank, k, size));
            memset(b, TU_POISON, blk * tu_size);
            MPI_Alltoall(a, (int)blk, MPI_BYTE, b, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
            for (k = 0; k < tu_size; k++) {
                snprintf(what, sizeof(what), "alltoall of %zu bytes per peer: block from rank %d",
                         blk, k);
                tu_verify(b + k * blk, blk, tu_seed(2, k, tu_rank, size), what);
            }
        }
    }

    free(a);
    free(b);
    const char *neighbors = neighbor_ring();
    tu_ok("np=%d roots=%d sizes=1..%zu bcast,reduce,allreduce,allreduce(in-place),alltoall "
          "neighbors(%s) time=%.2fs",
          tu_size, nr, max_total, neighbors, MPI_Wtime() - t0);
    return 0;
}
