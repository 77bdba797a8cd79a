/*
 * remap: memory freed and mapped again at the same address carries its new
 * content, never what a registration of the old memory pinned.
 *
 * A NIC reads and writes the physical pages a registration pinned.  A
 * registration cache that keeps a registration after its memory was freed
 * (because nobody told it: no memory hooks) hands that old registration to
 * the next buffer at the same address, and the NIC then sends the old
 * pages' bytes (or receives into them).  In each even/odd pair the even
 * rank sends and the odd rank receives, in rounds; after every round both
 * release their buffer and map a new one at the same address, with a new
 * pattern (sender) or poison (receiver).  The receiver checks each round's
 * pattern, so any stale registration on either side shows as a mismatch.
 *
 * Two ways of giving memory back, each with an eager (8 KiB) and a large
 * message (SIZE, moved by rendezvous or RDMA read):
 *   mmap:   munmap, then mmap with MAP_FIXED_NOREPLACE at the old address
 *           (the test fails if the address cannot be had again);
 *   malloc: free of a large malloc (glibc maps it), then malloc of the same
 *           size; the address usually repeats, and the rounds where it did
 *           are counted (the check holds either way).
 *
 * Software providers (the stand-ins) read by virtual address, so there a
 * stale registration shows no wrong data; on EFA it does.  The test harness
 * therefore also runs it without memory hooks (--mca memory ^patcher) and
 * checks that the components said they would not cache registrations.
 *
 * Options: -s SIZE (default 1M), -i ROUNDS (default 6).
 */
#define _GNU_SOURCE /* MAP_FIXED_NOREPLACE */
#include "test_util.h"

#include <sys/mman.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

enum { MODE_MMAP, MODE_MALLOC };
static const char *mode_name[] = {"mmap", "malloc"};

static size_t page_round(size_t n) {
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    return (n + ps - 1) / ps * ps;
}

/* A fresh buffer of len bytes, at 'want' if given (mmap mode must get it). */
static char *get_buffer(int mode, size_t len, char *want) {
    if (mode == MODE_MALLOC)
        return tu_malloc(len);
    void *p = mmap(want, page_round(len), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (want ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    if (p == MAP_FAILED)
        tu_fail("mmap of %zu bytes at %p: %s", len, (void *)want, strerror(errno));
    /* Kernels before 4.17 take the flag as a hint and may map elsewhere. */
    if (want && p != want)
        tu_fail("could not map %zu bytes at %p again (got %p): the test needs the same address",
                len, (void *)want, p);
    return p;
}

static void put_buffer(int mode, char *p, size_t len) {
    if (mode == MODE_MALLOC)
        free(p);
    else if (munmap(p, page_round(len)) != 0)
        tu_fail("munmap: %s", strerror(errno));
}

/* Returns the rounds whose buffer came back at the previous address. */
static int run(MPI_Comm comm, int peer, int sender, int mode, size_t len, int rounds) {
    char what[128];
    char *buf = get_buffer(mode, len, NULL);
    int same = 0;
    for (int r = 0; r < rounds; r++) {
        uint64_t seed = tu_seed((uint64_t)mode, len, (uint64_t)r, 0x5eed);
        snprintf(what, sizeof(what), "%s round %d, %zu bytes at %p", mode_name[mode], r, len,
                 (void *)buf);
        if (sender) {
            tu_fill(buf, len, seed);
            MPI_Send(buf, (int)len, MPI_BYTE, peer, r, comm);
        } else {
            MPI_Status st;
            memset(buf, TU_POISON, len);
            MPI_Recv(buf, (int)len, MPI_BYTE, peer, r, comm, &st);
            tu_verify_recv(buf, &st, peer, r, len, seed, what);
        }
        /* Both sides are done with the round's buffer before either gives
         * it back (a rendezvous or RDMA read may still read the sender's). */
        MPI_Barrier(comm);
        char *old = buf;
        put_buffer(mode, buf, len);
        buf = get_buffer(mode, len, mode == MODE_MMAP ? old : NULL);
        same += buf == old;
    }
    put_buffer(mode, buf, len);
    return same;
}

int main(int argc, char **argv) {
    size_t size = 1 << 20;
    int rounds = 6, opt;

    tu_init(&argc, &argv, "remap");
    while ((opt = getopt(argc, argv, "s:i:h")) != -1) {
        switch (opt) {
        case 's':
            size = tu_parse_size(optarg);
            break;
        case 'i':
            rounds = (int)tu_parse_long(optarg);
            break;
        case 'h':
            tu_usage("[-s SIZE] [-i ROUNDS]", 0);
        default:
            tu_usage("[-s SIZE] [-i ROUNDS]", 1);
        }
    }
    TU_ASSERT(size >= 8192 && rounds >= 2, "need -s 8K or more and -i 2 or more");

    int peer = tu_pair_partner();
    MPI_Comm pair;
    /* The odd one out (odd process counts) waits in its own communicator. */
    MPI_Comm_split(MPI_COMM_WORLD, peer < 0 ? MPI_UNDEFINED : tu_rank / 2, tu_rank, &pair);
    int malloc_same = 0;
    if (peer >= 0) {
        int local_peer = tu_rank % 2 ? 0 : 1;
        int sender = tu_rank % 2 == 0;
        const size_t sizes[] = {8192, size};
        for (int s = 0; s < 2; s++) {
            run(pair, local_peer, sender, MODE_MMAP, sizes[s], rounds);
            malloc_same += run(pair, local_peer, sender, MODE_MALLOC, sizes[s], rounds);
        }
        MPI_Comm_free(&pair);
    }
    char sz[32];
    tu_ok("(%d rounds of 8K and %s; malloc gave the same address back in %d of %d rounds)", rounds,
          tu_fmt_size(size, sz, sizeof(sz)), malloc_same, 2 * rounds);
    return 0;
}
