/*
 * device_buffers: point-to-point with device (GPU) buffers, checked on the
 * core's fake device: memory the CPU cannot touch (mapped PROT_NONE, its
 * bytes reachable only through the fake's copy; common/include/efa_device.h).
 * Any path of the MTL that reads or writes device memory with the CPU (a
 * ring's memcpy, the single copy, an eager copy, a provider without
 * FI_HMEM) crashes this test; what arrives is compared byte for byte.
 *
 * Run under pml cm + mtl_efa with --mca common_efa_debug_fake_device 1 (the
 * runner adds it).  pml ob1 is not run: its convertor packs with the CPU,
 * which it never does for a real GPU's memory (Open MPI knows that memory,
 * not the fake's).
 *
 * In each even/odd pair, for every size (0 B to -s, crossing the eager,
 * ring slot, single-copy and rendezvous thresholds):
 *   - device to device both ways (MPI_Send/MPI_Recv, then MPI_Isend/
 *     MPI_Irecv back), host to device and device to host,
 *   - MPI_Ssend into MPI_ANY_SOURCE, MPI_Mprobe + MPI_Mrecv,
 *   - a message longer than the device buffer: MPI_ERR_TRUNCATE, its first
 *     bytes delivered and nothing of the fake's memory past the buffer
 *     written,
 *   - a device receive cancelled (MPI_Cancel) is reported cancelled,
 *   - device to device to the process itself (MPI_Isend/MPI_Irecv on its
 *     own rank), small and large,
 *   - small device messages sent (MPI_Send) before their receives, to
 *     itself and both ways in a pair: they must not wait for the receive,

 * and at the end every fake allocation is freed (none left behind).
 *
 * Options: -s MAX (default 4M); -P: no MPI_Mprobe (ofi_rxd claims another
 * message than the one its probe saw, shm's probe of a message not there
 * yet never completes: the runner passes it there); -X: pairs of rank
 * and rank^2 (4 processes on 2 pretend nodes of 2: each pair across
 * them, while ANY_SOURCE receives also watch the rings); -w:
 * instead of all that, under osc/rdma + btl_efa, a window over host memory
 * reached from device buffers, then a window over device memory: puts and
 * gets of it, atomics (tests/run-device-tests.sh); -m MIN: with -w, only
 * the sizes from MIN (a first operation large enough to go in pieces); -o:
 * with -w, each rank's operations on its own device window too (a job over
 * several nodes: tests/pretend-nodes.sh).
 */
#define _GNU_SOURCE
#include "test_util.h"

#include "fake_device.h"

static int no_mprobe;     /* -P */
static size_t window_min; /* -m */

static void self_sizes(size_t len) {
    for (int posted_first = 1; posted_first >= 0; --posted_first) {
        const uint64_t seed = tu_seed(0x5e1f, (uint64_t)tu_rank, len, (uint64_t)posted_first);
        void *src = dalloc(len), *dst = dalloc(len);
        dfill(src, len, seed);
        dfill(dst, len, seed ^ 1);
        MPI_Request req[2];
        MPI_Status st;
        if (posted_first) {
            MPI_Irecv(dst, (int)len, MPI_BYTE, tu_rank, 31, MPI_COMM_WORLD, &req[0]);
        }
        MPI_Isend(src, (int)len, MPI_BYTE, tu_rank, 31, MPI_COMM_WORLD, &req[1]);
        if (!posted_first) {
            MPI_Irecv(dst, (int)len, MPI_BYTE, tu_rank, 31, MPI_COMM_WORLD, &req[0]);
        }
        MPI_Wait(&req[0], &st);
        MPI_Wait(&req[1], MPI_STATUS_IGNORE);
        int count = -1;
        MPI_Get_count(&st, MPI_BYTE, &count);
        TU_ASSERT((size_t)count == len && st.MPI_SOURCE == tu_rank, "to itself: count %d source %d",
                  count, st.MPI_SOURCE);
        dverify(dst, len, len, seed, "device message to itself");
        dev_free(src);
        dev_free(dst);
    }
}

/* Small device messages sent before their receives are posted, blocking:
 * to itself, then both of a pair to each other.  Host buffers of these
 * sizes go eager (MPI calls it unsafe, programs do it); device ones must
 * too, never waiting for their receive. */
static void send_first(int peer) {
    static const size_t sizes[] = {1, 1000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        const size_t len = sizes[i];
        const uint64_t seed = tu_seed(0x5e2f, (uint64_t)tu_rank, len, 0);
        void *src = dalloc(len), *dst = dalloc(len);
        dfill(src, len, seed);
        dfill(dst, len, seed ^ 1); /* (and its guard) */
        MPI_Send(src, (int)len, MPI_BYTE, tu_rank, 41, MPI_COMM_WORLD);
        MPI_Recv(dst, (int)len, MPI_BYTE, tu_rank, 41, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        dverify(dst, len, len, seed, "device message to itself sent first");
        if (peer >= 0) {
            const uint64_t theirs = tu_seed(0x5e2f, (uint64_t)peer, len, 1);
            dfill(src, len, tu_seed(0x5e2f, (uint64_t)tu_rank, len, 1));
            MPI_Send(src, (int)len, MPI_BYTE, peer, 42, MPI_COMM_WORLD);
            MPI_Recv(dst, (int)len, MPI_BYTE, peer, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            dverify(dst, len, len, theirs, "device message sent first both ways");
        }
        dev_free(src);
        dev_free(dst);
    }
}

static void pair_sizes(int peer, size_t len, int round) {
    const int even = tu_rank < peer;
    const uint64_t s1 = tu_seed(1, (uint64_t)len, (uint64_t)round, 0);
    const uint64_t s2 = tu_seed(2, (uint64_t)len, (uint64_t)round, 0);
    void *d = dalloc(len);
    char what[128];
    MPI_Status st;
    int count;

    /* device -> device, blocking; then back, nonblocking */
    if (even) {
        dfill(d, len, s1);
        MPI_Send(d, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        dfill(d, len, 0); /* poison what comes back */
        MPI_Request r;
        MPI_Irecv(d, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        TU_ASSERT((size_t)count == len, "device Irecv of %zu bytes counted %d", len, count);
        snprintf(what, sizeof(what), "device Isend->Irecv of %zu bytes", len);
        dverify(d, len, len, s2, what);
    } else {
        dfill(d, len, 0);
        MPI_Recv(d, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        TU_ASSERT((size_t)count == len, "device Recv of %zu bytes counted %d", len, count);
        snprintf(what, sizeof(what), "device Send->Recv of %zu bytes", len);
        dverify(d, len, len, s1, what);
        dfill(d, len, s2);
        MPI_Request r;
        MPI_Isend(d, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }

    /* host -> device (even sends from the host), device -> host (back) */
    unsigned char *h = tu_malloc(len + 1);
    if (even) {
        tu_fill(h, len, s1);
        MPI_Send(h, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
        MPI_Recv(h, (int)len, MPI_BYTE, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        snprintf(what, sizeof(what), "device->host of %zu bytes", len);
        tu_verify(h, len, s2, what);
    } else {
        dfill(d, len, 0);
        MPI_Recv(d, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        snprintf(what, sizeof(what), "host->device of %zu bytes", len);
        dverify(d, len, len, s1, what);
        dfill(d, len, s2);
        MPI_Send(d, (int)len, MPI_BYTE, peer, 4, MPI_COMM_WORLD);
    }
    free(h);

    /* MPI_Ssend into MPI_ANY_SOURCE, then MPI_Mprobe + MPI_Mrecv back */
    if (even) {
        dfill(d, len, s1);
        MPI_Ssend(d, (int)len, MPI_BYTE, peer, 5, MPI_COMM_WORLD);
        dfill(d, len, 0);
        if (no_mprobe) {
            MPI_Recv(d, (int)len, MPI_BYTE, peer, 6, MPI_COMM_WORLD, &st);
        } else {
            MPI_Message m;
            MPI_Mprobe(peer, 6, MPI_COMM_WORLD, &m, &st);
            MPI_Mrecv(d, (int)len, MPI_BYTE, &m, &st);
        }
        snprintf(what, sizeof(what), "device Send->%s of %zu bytes",
                 no_mprobe ? "Recv" : "Mprobe+Mrecv", len);
        dverify(d, len, len, s2, what);
    } else {
        dfill(d, len, 0);
        MPI_Recv(d, (int)len, MPI_BYTE, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &st);
        TU_ASSERT(st.MPI_SOURCE == peer, "ANY_SOURCE device receive from %d, not %d", st.MPI_SOURCE,
                  peer);
        snprintf(what, sizeof(what), "device Ssend->Recv(ANY_SOURCE) of %zu bytes", len);
        dverify(d, len, len, s1, what);
        dfill(d, len, s2);
        MPI_Send(d, (int)len, MPI_BYTE, peer, 6, MPI_COMM_WORLD);
    }
    dev_free(d);
}

/* A message of len bytes into a device buffer of len/2: truncated, its
 * first len/2 bytes there, nothing past them written. */
static void pair_truncate(int peer, size_t len) {
    const size_t half = len / 2;
    const uint64_t seed = tu_seed(3, (uint64_t)len, 0, 0);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (tu_rank < peer) {
        void *d = dalloc(len);
        dfill(d, len, seed);
        TU_ASSERT(MPI_SUCCESS == MPI_Send(d, (int)len, MPI_BYTE, peer, 7, comm),
                  "send of a message to be truncated failed");
        dev_free(d);
    } else {
        void *d = dalloc(half);
        dfill(d, half, 0);
        MPI_Status st;
        int rc = MPI_Recv(d, (int)half, MPI_BYTE, peer, 7, comm, &st);
        int cls = rc;
        if (MPI_SUCCESS != rc) {
            MPI_Error_class(rc, &cls);
        }
        TU_ASSERT(MPI_ERR_TRUNCATE == cls, "%zu bytes into a %zu-byte device buffer: error %d", len,
                  half, rc);
        char what[128];
        snprintf(what, sizeof(what), "truncated device receive (%zu of %zu bytes)", half, len);
        dverify(d, half, half, seed, what);
        dev_free(d);
    }
    MPI_Comm_free(&comm);
}

/* A device receive nobody sends to, cancelled. */
static void cancel_recv(void) {
    void *d = dalloc(4096);
    MPI_Request r;
    MPI_Status st;
    int cancelled = 0;
    MPI_Irecv(d, 4096, MPI_BYTE, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &r);
    MPI_Cancel(&r);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &cancelled);
    TU_ASSERT(cancelled, "a cancelled device receive was not reported cancelled");
    dev_free(d);
}

/* A window (MPI_Win_create) over len bytes of zeroed device memory, at
 * *wd; its errors returned. */
static MPI_Win device_window(size_t len, void **wd) {
    *wd = dalloc(len);
    dfill(*wd, len, 0);
    MPI_Win win;
    TU_ASSERT(MPI_SUCCESS ==
                  MPI_Win_create(*wd, (MPI_Aint)len, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win),
              "MPI_Win_create over device memory failed");
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    return win;
}

/* The words of window_device's atomics, from OFF in the window. */
enum { W_FOP, W_ACC, W_CAS, W_GACC, W_FOP32 };

static int64_t device_word(const void *wd, size_t off, int which) {
    int64_t v = 0;
    const size_t size = W_FOP32 == which ? sizeof(int32_t) : sizeof(int64_t);
    TU_ASSERT(0 == dev->copy(&v, (const char *)wd + off + 8 * (size_t)which, size),
              "fake copy failed");
    return W_FOP32 == which ? (int64_t)(int32_t)v : v;
}

/* Five atomics on the words at OFF of the partner's device window (the
 * even rank of the pair issues them), each refused by btl_efa and done by
 * osc/rdma with a get and a put: what they fetch, and what the words hold
 * after them (read by the owner with the fake's copy). */
static void window_device_atomics(MPI_Win win, void *wd, size_t off, int peer, int even) {
    const int64_t word = 1234, one = 1, swap = 77;
    const int32_t word32 = -5, two32 = 2;
    if (!even) {
        const int64_t init[4] = {word, word, word, word};
        TU_ASSERT(0 == dev->copy((char *)wd + off, init, sizeof(init)) &&
                      0 == dev->copy((char *)wd + off + 8 * W_FOP32, &word32, sizeof(word32)),
                  "fake copy failed");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (even) {
        int64_t old = 0, cas_old = 0, gacc_old = 0;
        int32_t old32 = 0;
        const MPI_Aint at = (MPI_Aint)off;
        MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
        int rc = MPI_Fetch_and_op(&one, &old, MPI_INT64_T, peer, at + 8 * W_FOP, MPI_SUM, win);
        TU_ASSERT(MPI_SUCCESS == rc, "MPI_Fetch_and_op on a device window failed (%d)", rc);
        rc = MPI_Accumulate(&one, 1, MPI_INT64_T, peer, at + 8 * W_ACC, 1, MPI_INT64_T, MPI_SUM,
                            win);
        TU_ASSERT(MPI_SUCCESS == rc, "MPI_Accumulate on a device window failed (%d)", rc);
        rc = MPI_Compare_and_swap(&swap, &word, &cas_old, MPI_INT64_T, peer, at + 8 * W_CAS, win);
        TU_ASSERT(MPI_SUCCESS == rc, "MPI_Compare_and_swap on a device window failed (%d)", rc);
        rc = MPI_Get_accumulate(&one, 1, MPI_INT64_T, &gacc_old, 1, MPI_INT64_T, peer,
                                at + 8 * W_GACC, 1, MPI_INT64_T, MPI_SUM, win);
        TU_ASSERT(MPI_SUCCESS == rc, "MPI_Get_accumulate on a device window failed (%d)", rc);
        rc = MPI_Fetch_and_op(&two32, &old32, MPI_INT32_T, peer, at + 8 * W_FOP32, MPI_SUM, win);
        TU_ASSERT(MPI_SUCCESS == rc, "32-bit MPI_Fetch_and_op on a device window failed (%d)", rc);
        MPI_Win_unlock(peer, win);
        TU_ASSERT(word == old, "MPI_Fetch_and_op on a device window fetched %lld, not %lld",
                  (long long)old, (long long)word);
        TU_ASSERT(word == cas_old, "MPI_Compare_and_swap on a device window fetched %lld, not %lld",
                  (long long)cas_old, (long long)word);
        TU_ASSERT(word == gacc_old, "MPI_Get_accumulate on a device window fetched %lld, not %lld",
                  (long long)gacc_old, (long long)word);
        TU_ASSERT(word32 == old32, "32-bit MPI_Fetch_and_op on a device window fetched %d, not %d",
                  (int)old32, (int)word32);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (!even) {
        static const char *const names[] = {"MPI_Fetch_and_op", "MPI_Accumulate",
                                            "MPI_Compare_and_swap", "MPI_Get_accumulate",
                                            "32-bit MPI_Fetch_and_op"};
        const int64_t want[] = {word + one, word + one, swap, word + one, word32 + two32};
        for (int w = W_FOP; w <= W_FOP32; ++w) {
            const int64_t now = device_word(wd, off, w);
            TU_ASSERT(want[w] == now, "after %s the device window holds %lld, not %lld", names[w],
                      (long long)now, (long long)want[w]);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* -w: a window (MPI_Win_create) over device memory, under osc/rdma +
 * btl_efa.  For each size, the even rank of a pair puts into its partner's
 * window from a host buffer and from a device buffer, then gets both back,
 * into a device buffer and into a host buffer; the partner then reads its
 * window with the fake's copy.  Any path that touched the window or a
 * device buffer with the CPU or the kernel (the rings' copies, the single
 * copy) would crash the job.  Then atomics on the window (fetch-and-op,
 * accumulate, compare-and-swap, get-accumulate; 64 and 32 bits): btl_efa
 * refuses each (no CPU atomic on device memory), and osc/rdma does it
 * under its lock with a get and a put through btl_efa: the old values come
 * back and the words hold the results. */
static void window_device(int peer) {
    static const size_t sizes[] = {1, 100, 4096, 8193, 65536, 1u << 20};
    const size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
    const size_t max = sizes[nsizes - 1];
    const size_t win_len = 2 * max + 64;
    const int even = tu_rank < peer;
    void *wd = NULL;
    MPI_Win win = device_window(win_len, &wd);
    void *dbuf = dalloc(max);
    unsigned char *hbuf = tu_malloc(max);
    char what[128];
    for (size_t i = 0; i < nsizes; ++i) {
        const size_t len = sizes[i];
        if (len < window_min) {
            continue;
        }
        const uint64_t sh = tu_seed(11, (uint64_t)len, 0, 0), sd = tu_seed(12, (uint64_t)len, 0, 0);
        if (even) {
            /* host -> window [0, len), device -> window [max, max + len) */
            tu_fill(hbuf, len, sh);
            dfill(dbuf, len, sd);
            MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
            TU_ASSERT(MPI_SUCCESS ==
                          MPI_Put(hbuf, (int)len, MPI_BYTE, peer, 0, (int)len, MPI_BYTE, win),
                      "put of %zu host bytes into a device window failed", len);
            TU_ASSERT(MPI_SUCCESS == MPI_Put(dbuf, (int)len, MPI_BYTE, peer, (MPI_Aint)max,
                                             (int)len, MPI_BYTE, win),
                      "put of %zu device bytes into a device window failed", len);
            MPI_Win_unlock(peer, win);
            /* and back crosswise: the host part into the device buffer */
            dfill(dbuf, len, 0);
            memset(hbuf, 0, len);
            MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
            TU_ASSERT(MPI_SUCCESS ==
                          MPI_Get(dbuf, (int)len, MPI_BYTE, peer, 0, (int)len, MPI_BYTE, win),
                      "get of %zu bytes into a device buffer failed", len);
            TU_ASSERT(MPI_SUCCESS == MPI_Get(hbuf, (int)len, MPI_BYTE, peer, (MPI_Aint)max,
                                             (int)len, MPI_BYTE, win),
                      "get of %zu bytes into a host buffer failed", len);
            MPI_Win_unlock(peer, win);
            snprintf(what, sizeof(what), "get of %zu bytes into a device buffer", len);
            dverify(dbuf, len, len, sh, what);
            snprintf(what, sizeof(what), "get of %zu bytes into a host buffer", len);
            tu_verify(hbuf, len, sd, what);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (!even) {
            unsigned char *h = tu_malloc(win_len);
            TU_ASSERT(0 == dev->copy(h, wd, win_len), "fake copy from the window failed");
            snprintf(what, sizeof(what), "window after a %zu-byte put from host memory", len);
            tu_verify(h, len, sh, what);
            snprintf(what, sizeof(what), "window after a %zu-byte put from device memory", len);
            tu_verify(h + max, len, sd, what);
            free(h);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    /* Atomics on device memory: by get and put, each exactly once. */
    window_device_atomics(win, wd, 2 * max, peer, even);
    MPI_Win_free(&win);
    free(hbuf);
    dev_free(dbuf);
    dev_free(wd);
    MPI_Barrier(MPI_COMM_WORLD);
    TU_ASSERT(0 == dev_live(), "%zu fake device allocation(s) left behind", dev_live());
}

/* -w -o: operations of a rank on its own window in device memory, which
 * osc/rdma hands to the BTL only where the job spans several nodes (on one
 * node it does them itself, with the CPU for reductions: Open MPI's limit,
 * docs/DESIGN.md).  btl_efa's own-rank path must then copy with the
 * device's copy: a put from a host buffer, a get into a device buffer and
 * a fetch-and-op, checked with the fake's copy. */
static void window_device_self(void) {
    MPI_Comm node;
    int node_size = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    TU_ASSERT(node_size < tu_size,
              "-o needs a job over several nodes (%d of %d ranks on this one): on one node "
              "osc/rdma does a rank's operations on its own window itself",
              node_size, tu_size);
    enum { LEN = 8193 };
    const size_t win_len = LEN + 64;
    void *wd = NULL;
    MPI_Win win = device_window(win_len, &wd);
    unsigned char *h = tu_malloc(LEN);
    void *dbuf = dalloc(LEN);
    const uint64_t seed = tu_seed(17, LEN, (uint64_t)tu_rank, 0);
    tu_fill(h, LEN, seed);
    dfill(dbuf, LEN, seed ^ 1); /* (its guard too) */
    const int64_t word = 4321, three = 3;
    TU_ASSERT(0 == dev->copy((char *)wd + LEN, &word, sizeof(word)), "fake copy failed");
    int64_t old = 0;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, tu_rank, 0, win);
    int rc = MPI_Put(h, LEN, MPI_BYTE, tu_rank, 0, LEN, MPI_BYTE, win);
    TU_ASSERT(MPI_SUCCESS == rc, "a put to its own device window failed (%d)", rc);
    MPI_Win_flush(tu_rank, win);
    rc = MPI_Get(dbuf, LEN, MPI_BYTE, tu_rank, 0, LEN, MPI_BYTE, win);
    TU_ASSERT(MPI_SUCCESS == rc, "a get from its own device window failed (%d)", rc);
    rc = MPI_Fetch_and_op(&three, &old, MPI_INT64_T, tu_rank, LEN, MPI_SUM, win);
    TU_ASSERT(MPI_SUCCESS == rc, "a fetch-and-op on its own device window failed (%d)", rc);
    MPI_Win_unlock(tu_rank, win);
    dverify(dbuf, LEN, LEN, seed, "a get from its own device window");
    unsigned char *back = tu_malloc(LEN);
    TU_ASSERT(0 == dev->copy(back, wd, LEN), "fake copy failed");
    tu_verify(back, LEN, seed, "its own device window after a put");
    int64_t now = 0;
    TU_ASSERT(0 == dev->copy(&now, (char *)wd + LEN, sizeof(now)), "fake copy failed");
    TU_ASSERT(word == old && word + three == now,
              "a fetch-and-op on its own device window fetched %lld (not %lld) and left %lld "
              "(not %lld)",
              (long long)old, (long long)word, (long long)now, (long long)(word + three));
    MPI_Win_free(&win);
    free(back);
    free(h);
    dev_free(dbuf);
    dev_free(wd);
    MPI_Barrier(MPI_COMM_WORLD);
    TU_ASSERT(0 == dev_live(), "%zu fake device allocation(s) left behind", dev_live());
}

/* -w, then: a window in host memory, and device buffers at the origin
 * (puts from one, gets into one), which must take the same way as a
 * device window's operations: the window is then no hint. */
static void window_host_device_origin(int peer) {
    static const size_t sizes[] = {1, 100, 4096, 8193, 65536, 1u << 20};
    const size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
    const size_t max = sizes[nsizes - 1];
    const int even = tu_rank < peer;
    unsigned char *wh = tu_malloc(max);
    memset(wh, 0, max);
    MPI_Win win;
    TU_ASSERT(MPI_SUCCESS ==
                  MPI_Win_create(wh, (MPI_Aint)max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win),
              "MPI_Win_create over host memory failed");
    void *dbuf = dalloc(max);
    char what[128];
    for (size_t i = 0; i < nsizes; ++i) {
        const size_t len = sizes[i];
        if (len < window_min) {
            continue;
        }
        const uint64_t sp = tu_seed(13, (uint64_t)len, 0, 0);
        if (even) {
            dfill(dbuf, len, sp);
            MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
            MPI_Put(dbuf, (int)len, MPI_BYTE, peer, 0, (int)len, MPI_BYTE, win);
            MPI_Win_unlock(peer, win);
            dfill(dbuf, len, 0);
            MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
            MPI_Get(dbuf, (int)len, MPI_BYTE, peer, 0, (int)len, MPI_BYTE, win);
            MPI_Win_unlock(peer, win);
            snprintf(what, sizeof(what), "get of %zu bytes of a host window into a device buffer",
                     len);
            dverify(dbuf, len, len, sp, what);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (!even) {
            snprintf(what, sizeof(what), "host window after a %zu-byte put from device memory",
                     len);
            tu_verify(wh, len, sp, what);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Win_free(&win);
    dev_free(dbuf);
    free(wh);
}

int main(int argc, char **argv) {
    size_t max = 4u << 20;
    int opt, window = 0, across = 0, self_window = 0;
    while ((opt = getopt(argc, argv, "s:m:PwoX")) != -1) {
        if ('s' == opt) {
            max = tu_parse_size(optarg);
        } else if ('m' == opt) {
            window_min = tu_parse_size(optarg);
        } else if ('P' == opt) {
            no_mprobe = 1;
        } else if ('w' == opt) {
            window = 1;
        } else if ('X' == opt) {
            across = 1;
        } else if ('o' == opt) {
            self_window = 1;
        } else {
            tu_usage("[-s MAX] [-P] [-w [-m MIN] [-o]] [-X]", 1);
        }
    }
    tu_init(&argc, &argv, "device_buffers");
    open_fake();
    const int peer = !across ? tu_pair_partner() : (tu_rank ^ 2) < tu_size ? tu_rank ^ 2 : -1;
    if (window) {
        window_host_device_origin(peer);
        window_device(peer);
        if (self_window) {
            window_device_self();
        }
        tu_ok("a window over device memory: puts and gets from and into host and device "
              "buffers, atomics of five kinds%s",
              self_window ? "; its own window over device memory, the job over several "
                            "nodes: a put, a get, a fetch-and-op"
                          : "");
        return 0;
    }
    size_t tested = 0;
    if (peer >= 0) {
        static const size_t sizes[] = {0,     1,     8,      100,      4096,     8191,     8192,
                                       16384, 65536, 131072, 1u << 20, 4u << 20, 16u << 20};
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && sizes[i] <= max; ++i) {
            pair_sizes(peer, sizes[i], (int)i);
            ++tested;
        }
        pair_truncate(peer, 64);
        pair_truncate(peer, max < (1u << 20) ? max : (1u << 20));
    }
    cancel_recv();
    send_first(peer);
    self_sizes(1);
    self_sizes(max < (1u << 20) ? max : (1u << 20));
    MPI_Barrier(MPI_COMM_WORLD);
    TU_ASSERT(0 == dev_live(), "%zu fake device allocation(s) left behind", dev_live());
    tu_ok("%zu sizes up to %zu bytes, device and host buffers, truncation, cancel, to itself",
          tested, max);
    return 0;
}
