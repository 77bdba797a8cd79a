/*
 * datatypes: non-contiguous derived datatypes on the wire.
 *
 * In each even/odd pair the even rank sends and the odd rank receives. Every
 * case describes the send and receive layouts as lists of byte segments
 * (computed here by hand, independently of MPI's datatype engine): the
 * receiver expects the bytes of the sender's segments, in order, at its own
 * segments, and its poisoned buffer untouched everywhere else (gaps, struct
 * padding, beyond the end).
 *   vector->vector, contig->vector, vector->contig (ints),
 *   indexed->indexed, indexed->contig (doubles, irregular blocks),
 *   struct->struct (char/double/int[3]/short with padding, resized extent),
 *   large vector (several MiB, rendezvous/pipelined paths).
 * Each case runs with MPI_Send/MPI_Recv and with MPI_Isend/MPI_Irecv.
 *
 * Options: -s LARGE bytes of payload for the large vector (default 4M).
 */
#include "test_util.h"

#include <stddef.h>

struct seg {
    size_t off, len;
};

struct layout {
    MPI_Datatype type; /* committed type, or a basic type */
    int count;         /* count passed to send/recv */
    struct seg *segs;  /* byte segments in type-map order (for all count elements) */
    int nsegs;
    size_t extent; /* bytes of buffer needed */
};

struct rec {
    char c;
    double d;
    int i[3];
    short s;
};

static size_t large = 4u << 20;

static struct seg *seg_alloc(int n) {
    return tu_malloc(sizeof(struct seg) * (size_t)n);
}

static void contig(struct layout *l, MPI_Datatype basic, int n, size_t elsize) {
    l->type = basic;
    l->count = n;
    l->segs = seg_alloc(1);
    l->segs[0].off = 0;
    l->segs[0].len = (size_t)n * elsize;
    l->nsegs = 1;
    l->extent = (size_t)n * elsize;
}

static void vector(struct layout *l, MPI_Datatype basic, size_t elsize, int n, int blen,
                   int stride) {
    int i;

    MPI_Type_vector(n, blen, stride, basic, &l->type);
    MPI_Type_commit(&l->type);
    l->count = 1;
    l->segs = seg_alloc(n);
    for (i = 0; i < n; i++) {
        l->segs[i].off = (size_t)i * stride * elsize;
        l->segs[i].len = (size_t)blen * elsize;
    }
    l->nsegs = n;
    l->extent = ((size_t)(n - 1) * stride + blen) * elsize;
}

/* Irregular blocks: block i has length i%5+1 and a gap of i%3 elements before it. */
static void indexed(struct layout *l, int n) {
    int *lens = tu_malloc(sizeof(int) * n), *disps = tu_malloc(sizeof(int) * n), i, pos = 0;

    l->segs = seg_alloc(n);
    for (i = 0; i < n; i++) {
        pos += i % 3;
        lens[i] = i % 5 + 1;
        disps[i] = pos;
        l->segs[i].off = (size_t)pos * sizeof(double);
        l->segs[i].len = (size_t)lens[i] * sizeof(double);
        pos += lens[i];
    }
    MPI_Type_indexed(n, lens, disps, MPI_DOUBLE, &l->type);
    MPI_Type_commit(&l->type);
    l->count = 1;
    l->nsegs = n;
    l->extent = (size_t)pos * sizeof(double);
    free(lens);
    free(disps);
}

static size_t indexed_elems(int n) {
    size_t e = 0;
    int i;

    for (i = 0; i < n; i++)
        e += (size_t)(i % 5 + 1);
    return e;
}

static void structure(struct layout *l, int n) {
    int blens[4] = {1, 1, 3, 1}, i;
    MPI_Aint disps[4] = {offsetof(struct rec, c), offsetof(struct rec, d), offsetof(struct rec, i),
                         offsetof(struct rec, s)};
    MPI_Datatype types[4] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_SHORT}, t;
    size_t lens[4] = {1, sizeof(double), 3 * sizeof(int), sizeof(short)};

    MPI_Type_create_struct(4, blens, disps, types, &t);
    MPI_Type_create_resized(t, 0, sizeof(struct rec), &l->type);
    MPI_Type_free(&t);
    MPI_Type_commit(&l->type);
    l->count = n;
    l->segs = seg_alloc(4 * n);
    for (i = 0; i < 4 * n; i++) {
        l->segs[i].off = (size_t)(i / 4) * sizeof(struct rec) + (size_t)disps[i % 4];
        l->segs[i].len = lens[i % 4];
    }
    l->nsegs = 4 * n;
    l->extent = (size_t)n * sizeof(struct rec);
}

static void layout_free(struct layout *l) {
    int combiner, ni, na, nd;

    MPI_Type_get_envelope(l->type, &ni, &na, &nd, &combiner);
    if (combiner != MPI_COMBINER_NAMED)
        MPI_Type_free(&l->type);
    free(l->segs);
}

static size_t payload(const struct layout *l) {
    size_t n = 0;
    int i;

    for (i = 0; i < l->nsegs; i++)
        n += l->segs[i].len;
    return n;
}

/* Build the receive buffer the receiver should see: poison + sender's segment bytes. */
static void expected(const struct layout *s, const char *sbuf, const struct layout *r, char *exp) {
    int si = 0, ri = 0;
    size_t so = 0, ro = 0;

    memset(exp, TU_POISON, r->extent);
    while (si < s->nsegs && ri < r->nsegs) {
        size_t n = s->segs[si].len - so;

        if (r->segs[ri].len - ro < n)
            n = r->segs[ri].len - ro;
        memcpy(exp + r->segs[ri].off + ro, sbuf + s->segs[si].off + so, n);
        so += n;
        ro += n;
        if (so == s->segs[si].len) {
            si++;
            so = 0;
        }
        if (ro == r->segs[ri].len) {
            ri++;
            ro = 0;
        }
    }
}

static void run_case(const char *name, struct layout *s, struct layout *r, int nonblocking,
                     int peer, int tag) {
    char what[160];
    uint64_t seed = tu_seed(tag, nonblocking, 0, 0);

    snprintf(what, sizeof(what), "%s (%s, %zu bytes payload)", name,
             nonblocking ? "isend/irecv" : "send/recv", payload(s));
    TU_ASSERT(payload(s) == payload(r), "%s: test bug, payload sizes differ", what);
    if (tu_rank % 2 == 0) {
        char *sbuf = tu_malloc(s->extent);
        MPI_Request req;

        tu_fill(sbuf, s->extent, seed);
        if (nonblocking) {
            MPI_Isend(sbuf, s->count, s->type, peer, tag, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Send(sbuf, s->count, s->type, peer, tag, MPI_COMM_WORLD);
        }
        free(sbuf);
    } else {
        char *sbuf = tu_malloc(s->extent), *rbuf = tu_malloc(r->extent + 64);
        char *exp = tu_malloc(r->extent);
        MPI_Status st;
        MPI_Request req;
        int count;
        size_t i;

        tu_fill(sbuf, s->extent, seed); /* what the sender has */
        expected(s, sbuf, r, exp);
        memset(rbuf, TU_POISON, r->extent + 64);
        if (nonblocking) {
            MPI_Irecv(rbuf, r->count, r->type, peer, tag, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, &st);
        } else {
            MPI_Recv(rbuf, r->count, r->type, peer, tag, MPI_COMM_WORLD, &st);
        }
        MPI_Get_count(&st, r->type, &count);
        TU_ASSERT(count == r->count, "%s: MPI_Get_count expected %d got %d", what, r->count, count);
        for (i = 0; i < r->extent; i++) {
            if (rbuf[i] != exp[i]) {
                int k;
                const char *kind = "a gap (must be untouched)";

                for (k = 0; k < r->nsegs; k++)
                    if (i >= r->segs[k].off && i < r->segs[k].off + r->segs[k].len)
                        kind = "data";
                tu_fail("%s: byte %zu of the receive buffer (%s) expected 0x%02x got 0x%02x", what,
                        i, kind, (unsigned char)exp[i], (unsigned char)rbuf[i]);
            }
        }
        tu_verify_const(rbuf + r->extent, 64, TU_POISON, "bytes past the receive extent");
        free(sbuf);
        free(rbuf);
        free(exp);
    }
}

int main(int argc, char **argv) {
    int peer, nb, ncases = 0;
    struct layout s, r;

    tu_init(&argc, &argv, "datatypes");
    tu_parse_count_size(argc, argv, "[-s LARGE]", NULL, &large);
    TU_ASSERT(tu_size >= 2, "needs at least 2 ranks, got %d", tu_size);
    TU_ASSERT(large >= 16 && large <= (256u << 20), "bad LARGE");
    peer = tu_pair_partner();

    for (nb = 0; nb < 2 && peer >= 0; nb++) {
        vector(&s, MPI_INT, sizeof(int), 100, 3, 7);
        vector(&r, MPI_INT, sizeof(int), 100, 3, 5);
        run_case("vector(100x3 stride 7)->vector(100x3 stride 5)", &s, &r, nb, peer, 1);
        layout_free(&r);
        contig(&r, MPI_INT, 300, sizeof(int));
        run_case("vector->contig(300 int)", &s, &r, nb, peer, 2);
        run_case("contig(300 int)->vector", &r, &s, nb, peer, 3);
        layout_free(&s);
        layout_free(&r);

        indexed(&s, 500);
        indexed(&r, 500);
        run_case("indexed(500 irregular blocks)->indexed", &s, &r, nb, peer, 4);
        layout_free(&r);
        contig(&r, MPI_DOUBLE, (int)indexed_elems(500), sizeof(double));
        run_case("indexed->contig(double)", &s, &r, nb, peer, 5);
        layout_free(&s);
        layout_free(&r);

        structure(&s, 1000);
        structure(&r, 1000);
        run_case("struct{char,double,int[3],short}x1000->struct", &s, &r, nb, peer, 6);
        layout_free(&s);
        layout_free(&r);

        /* large: 2 doubles out of every 3 */
        vector(&s, MPI_DOUBLE, sizeof(double), (int)(large / 16), 2, 3);
        vector(&r, MPI_DOUBLE, sizeof(double), (int)(large / 16), 2, 5);
        run_case("large vector(2 of 3 doubles)->vector(2 of 5)", &s, &r, nb, peer, 7);
        layout_free(&r);
        contig(&r, MPI_DOUBLE, (int)(large / 16) * 2, sizeof(double));
        run_case("contig(large)->vector(2 of 3 doubles)", &r, &s, nb, peer, 8);
        layout_free(&s);
        layout_free(&r);
        ncases = 8;
    }

    tu_ok("np=%d cases=%d vector,contig,indexed,struct,large(%zu bytes) send/recv,isend/irecv",
          tu_size, ncases, large / 16 * 16);
    return 0;
}
