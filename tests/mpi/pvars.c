/*
 * The core's MPI_T performance variables (common/common_efa_pvars.c): each
 * common_efa_* variable is found by name with the class and type it is
 * documented with, reads through a session handle, and never goes down
 * while the ranks exchange messages.  Options ask that the ranks' traffic
 * shows where it went:
 *   -p  the messages cross the provider: completions, provider sends and
 *       receives (and their bytes) rise with them
 *   -r  they go through the on-node rings: ring frames and bytes rise
 *   -c  a 1 MiB message each way too, by single copy: single copies rise
 *   -u  NUM messages sent before their receives are posted: the engine's
 *       unexpected count rises by NUM and its peak reaches NUM
 *   -k  (with -u) some of those frames were packed behind another
 *   -b  (with -p) each receive after an MPI_Probe: a probe is no receive,
 *       so the provider receives still rise once per message
 *   -w  puts into the partner's window (emulated one-sided): the requests
 *       served rise, none refused
 *   -s  1 MiB each way striped over the NICs (btl_efa's gets, own
 *       matching's reads, read rendezvous; several NICs): the striped and rail counts must
 *       rise in every rank; one receive is posted before its message
 *       arrives, the other after
 * Always: the per-NIC arrays (common_efa_nic_rma, _nic_rma_bytes) have 4
 * values that add up to the provider's one-sided counts, those beside the
 * first to the rails' (with -s the second NIC's bytes rise), and no rail
 * was lost or brought back in a healthy job.
 *
 *   -l  list every common_efa_* variable with its class and help, and stop
 *
 *   pvars [-p] [-r] [-c] [-u NUM [-k]] [-w] [-s] [-i ITERS] | pvars -l
 */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_NAME 256

struct want {
    const char *name;
    int var_class;
    int index; /* found: its MPI_T index */
    MPI_T_pvar_handle handle;
};

enum {
    COMPLETIONS,
    DEFERRED,
    WAITING,
    MR_HITS,
    MR_MISSES,
    MR_EVICTIONS,
    PEERS_LOST,
    PROVIDER_SENDS,
    PROVIDER_SEND_BYTES,
    PROVIDER_RECVS,
    PROVIDER_RECV_BYTES,
    PROVIDER_RMA,
    PROVIDER_RMA_BYTES,
    RING_FRAMES,
    RING_BYTES,
    SINGLE_COPIES,
    SINGLE_COPY_BYTES,
    UNEXPECTED,
    UNEXPECTED_PEAK,
    COALESCED,
    EMUL_SERVED,
    EMUL_REFUSED,
    RAIL_RMA,
    RAIL_RMA_BYTES,
    STRIPED,
    STRIPED_BYTES,
    RAILS_LOST,
    FAILED_OVER,
    RAILS_BACK,
    RAIL_OUT_NOTICES,
    NWANTED
};

#define COUNTER(n)                                                                                 \
    { "common_efa_" n, MPI_T_PVAR_CLASS_COUNTER, -1, 0 }
static struct want wanted[NWANTED] = {
    [COMPLETIONS] = COUNTER("completions"),
    [DEFERRED] = COUNTER("posts_deferred"),
    [WAITING] = {"common_efa_posts_waiting", MPI_T_PVAR_CLASS_LEVEL, -1, 0},
    [MR_HITS] = COUNTER("mr_cache_hits"),
    [MR_MISSES] = COUNTER("mr_cache_misses"),
    [MR_EVICTIONS] = COUNTER("mr_cache_evictions"),
    [PEERS_LOST] = COUNTER("peers_lost"),
    [PROVIDER_SENDS] = COUNTER("provider_sends"),
    [PROVIDER_SEND_BYTES] = COUNTER("provider_send_bytes"),
    [PROVIDER_RECVS] = COUNTER("provider_recvs"),
    [PROVIDER_RECV_BYTES] = COUNTER("provider_recv_bytes"),
    [PROVIDER_RMA] = COUNTER("provider_rma"),
    [PROVIDER_RMA_BYTES] = COUNTER("provider_rma_bytes"),
    [RING_FRAMES] = COUNTER("ring_frames"),
    [RING_BYTES] = COUNTER("ring_bytes"),
    [SINGLE_COPIES] = COUNTER("single_copies"),
    [SINGLE_COPY_BYTES] = COUNTER("single_copy_bytes"),
    [UNEXPECTED] = COUNTER("unexpected_msgs"),
    [UNEXPECTED_PEAK] = {"common_efa_unexpected_peak", MPI_T_PVAR_CLASS_HIGHWATERMARK, -1, 0},
    [COALESCED] = COUNTER("coalesced_frames"),
    [EMUL_SERVED] = COUNTER("emul_served"),
    [EMUL_REFUSED] = COUNTER("emul_refused"),
    [RAIL_RMA] = COUNTER("rail_rma"),
    [RAIL_RMA_BYTES] = COUNTER("rail_rma_bytes"),
    [STRIPED] = COUNTER("striped"),
    [STRIPED_BYTES] = COUNTER("striped_bytes"),
    [RAILS_LOST] = COUNTER("rails_lost"),
    [FAILED_OVER] = COUNTER("failed_over"),
    [RAILS_BACK] = COUNTER("rails_back"),
    [RAIL_OUT_NOTICES] = COUNTER("rail_out_notices"),
};
#undef COUNTER

/* The arrays, one value per NIC of the process's set (4: the most rails). */
#define NIC_VALUES 4
enum { NIC_RMA, NIC_RMA_BYTES, NARRAYS };
static struct want arrays[NARRAYS] = {
    [NIC_RMA] = {"common_efa_nic_rma", MPI_T_PVAR_CLASS_COUNTER, -1, 0},
    [NIC_RMA_BYTES] = {"common_efa_nic_rma_bytes", MPI_T_PVAR_CLASS_COUNTER, -1, 0},
};

/* Variable i as MPI_T describes it; 0 when it cannot be read. */
struct info {
    char name[MAX_NAME], desc[1024];
    int var_class, bind, readonly, continuous, desc_len;
    MPI_Datatype type;
};
static int pvar_info(int i, struct info *v) {
    int name_len = MAX_NAME, verbosity, atomic;
    MPI_T_enum enumtype;
    v->desc_len = sizeof(v->desc);
    return MPI_T_pvar_get_info(i, v->name, &name_len, &verbosity, &v->var_class, &v->type,
                               &enumtype, v->desc, &v->desc_len, &v->bind, &v->readonly,
                               &v->continuous, &atomic) == MPI_SUCCESS;
}

static void find_all(void) {
    int n = 0;
    struct info v;
    TU_ASSERT(MPI_T_pvar_get_num(&n) == MPI_SUCCESS, "MPI_T_pvar_get_num failed");
    for (int i = 0; i < n; ++i) {
        if (!pvar_info(i, &v))
            continue;
        for (int w = 0; w < NWANTED; ++w) {
            if (strcmp(v.name, wanted[w].name) != 0)
                continue;
            TU_ASSERT(v.var_class == wanted[w].var_class, "%s: class %d, expected %d", v.name,
                      v.var_class, wanted[w].var_class);
            TU_ASSERT(v.type == MPI_UNSIGNED_LONG_LONG, "%s: not MPI_UNSIGNED_LONG_LONG", v.name);
            TU_ASSERT(v.readonly && v.continuous, "%s: not read-only and continuous", v.name);
            TU_ASSERT(v.bind == MPI_T_BIND_NO_OBJECT, "%s: bound to an object (%d)", v.name,
                      v.bind);
            TU_ASSERT(v.desc_len > 1, "%s: no description", v.name);
            wanted[w].index = i;
        }
    }
    for (int w = 0; w < NWANTED; ++w)
        TU_ASSERT(wanted[w].index >= 0, "performance variable %s not found", wanted[w].name);
    for (int i = 0; i < n; ++i)
        for (int a = 0; a < NARRAYS && pvar_info(i, &v); ++a)
            if (strcmp(v.name, arrays[a].name) == 0)
                arrays[a].index = i;
    for (int a = 0; a < NARRAYS; ++a)
        TU_ASSERT(arrays[a].index >= 0, "performance variable %s not found", arrays[a].name);
}

/* -l: the components' variables as MPI_T describes them. */
static void list_all(void) {
    static const char *const classes[] = {
        [MPI_T_PVAR_CLASS_STATE] = "state",
        [MPI_T_PVAR_CLASS_LEVEL] = "level",
        [MPI_T_PVAR_CLASS_SIZE] = "size",
        [MPI_T_PVAR_CLASS_PERCENTAGE] = "percentage",
        [MPI_T_PVAR_CLASS_HIGHWATERMARK] = "high-watermark",
        [MPI_T_PVAR_CLASS_LOWWATERMARK] = "low-watermark",
        [MPI_T_PVAR_CLASS_COUNTER] = "counter",
        [MPI_T_PVAR_CLASS_AGGREGATE] = "aggregate",
        [MPI_T_PVAR_CLASS_TIMER] = "timer",
        [MPI_T_PVAR_CLASS_GENERIC] = "generic",
    };
    int n = 0;
    struct info v;
    TU_ASSERT(MPI_T_pvar_get_num(&n) == MPI_SUCCESS, "MPI_T_pvar_get_num failed");
    for (int i = 0; i < n; ++i) {
        if (!pvar_info(i, &v) || strncmp(v.name, "common_efa_", 11) != 0)
            continue;
        const int known =
            v.var_class >= 0 && v.var_class < (int)(sizeof(classes) / sizeof(*classes));
        printf("%-32s %-14s %s\n", v.name,
               known && classes[v.var_class] ? classes[v.var_class] : "?", v.desc);
    }
}

static void read_all(MPI_T_pvar_session s, unsigned long long *v,
                     unsigned long long (*nic)[NIC_VALUES]) {
    for (int w = 0; w < NWANTED; ++w)
        TU_ASSERT(MPI_T_pvar_read(s, wanted[w].handle, &v[w]) == MPI_SUCCESS, "reading %s failed",
                  wanted[w].name);
    for (int a = 0; a < NARRAYS; ++a)
        TU_ASSERT(MPI_T_pvar_read(s, arrays[a].handle, nic[a]) == MPI_SUCCESS, "reading %s failed",
                  arrays[a].name);
}

/* A check of the counts that does not stop the others: each failed one is
 * said, and the test fails after all ran. */
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL pvars: ");                                                       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " (rank %d)\n", tu_rank);                                              \
            ++failed;                                                                              \
        }                                                                                          \
    } while (0)

/* RISE(w): how much variable w rose between the two reads */
#define RISE(w) (after[w] - before[w])

/* NUM small messages from the lower rank before the higher posts a receive:
 * they wait unexpected at the receiver, all at once (the barrier's message
 * follows them in the same stream). */
static void unexpected_burst(int partner, int num) {
    char b[64] = {0};
    if (tu_rank < partner) {
        for (int i = 0; i < num; ++i)
            MPI_Send(b, sizeof(b), MPI_BYTE, partner, 2, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < num; ++i)
            MPI_Recv(b, sizeof(b), MPI_BYTE, partner, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}

/* One 1 MiB message each way, checked. */
static void large_exchange(int partner) {
    const size_t n = 1 << 20;
    char *b = malloc(n);
    TU_ASSERT(b != NULL, "no memory");
    for (int round = 0; round < 2; ++round) {
        const int sender = round == 0 ? (tu_rank < partner) : (tu_rank > partner);
        if (sender) {
            tu_fill(b, n, (unsigned)tu_rank);
            MPI_Send(b, (int)n, MPI_BYTE, partner, 3, MPI_COMM_WORLD);
        } else {
            /* The second round's receiver waits until the message is
             * there, so that its rendezvous request arrived unexpected:
             * striped too (own matching keeps the sender's keys for it). */
            for (int there = 0; round == 1 && !there;)
                MPI_Iprobe(partner, 3, MPI_COMM_WORLD, &there, MPI_STATUS_IGNORE);
            MPI_Recv(b, (int)n, MPI_BYTE, partner, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            tu_verify(b, n, (unsigned)partner, "1 MiB message");
        }
    }
    free(b);
}

/* iters puts of 8 bytes into the partner's window, each fenced. */
static void window_puts(int iters) {
    /* MPI_Win_create: osc/rdma reaches memory of its own allocation on
     * this node directly, a user's buffer only through the BTL. */
    long *base = calloc(8, sizeof(long));
    MPI_Win win;
    TU_ASSERT(base != NULL, "no memory");
    TU_ASSERT(MPI_Win_create(base, 8 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
                             &win) == MPI_SUCCESS,
              "MPI_Win_create failed");
    const int partner = tu_pair_partner();
    long v = tu_rank + 1;
    MPI_Win_fence(0, win);
    for (int i = 0; i < iters; ++i) {
        if (partner >= 0)
            MPI_Put(&v, 1, MPI_LONG, partner, 0, 1, MPI_LONG, win);
        MPI_Win_fence(0, win);
    }
    if (partner >= 0)
        TU_ASSERT(base[0] == partner + 1, "window holds %ld, expected %d", base[0], partner + 1);
    MPI_Win_free(&win);
    free(base);
}

int main(int argc, char **argv) {
    int provided, opt, iters = 200, through_provider = 0, through_rings = 0, single_copy = 0,
                       unexpected = 0, coalesced = 0, puts = 0, list = 0, probe = 0, striped = 0;
    MPI_T_pvar_session session;
    unsigned long long before[NWANTED], after[NWANTED];
    unsigned long long nic_before[NARRAYS][NIC_VALUES], nic_after[NARRAYS][NIC_VALUES];
    char buf[64] = {0};

    tu_init(&argc, &argv, "pvars");
    while ((opt = getopt(argc, argv, "prcu:kwbsli:h")) != -1) {
        switch (opt) {
        case 'p':
            through_provider = 1;
            break;
        case 'r':
            through_rings = 1;
            break;
        case 'c':
            single_copy = 1;
            break;
        case 'u':
            unexpected = (int)tu_parse_long(optarg);
            break;
        case 'k':
            coalesced = 1;
            break;
        case 'w':
            puts = 1;
            break;
        case 'l':
            list = 1;
            break;
        case 'b':
            probe = 1;
            break;
        case 's':
            striped = 1;
            break;
        case 'i':
            iters = (int)tu_parse_long(optarg);
            break;
        default:
            tu_usage("[-p] [-r] [-c] [-u NUM [-k]] [-w] [-s] [-i ITERS] | -l", opt == 'h' ? 0 : 1);
        }
    }
    TU_ASSERT(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS,
              "MPI_T_init_thread failed");
    if (list) {
        if (tu_rank == 0)
            list_all();
        MPI_T_finalize();
        MPI_Finalize();
        return 0;
    }
    find_all();
    TU_ASSERT(MPI_T_pvar_session_create(&session) == MPI_SUCCESS, "no MPI_T session");
    for (int w = 0; w < NWANTED; ++w) {
        int count = 0;
        TU_ASSERT(MPI_T_pvar_handle_alloc(session, wanted[w].index, NULL, &wanted[w].handle,
                                          &count) == MPI_SUCCESS,
                  "no handle for %s", wanted[w].name);
        TU_ASSERT(count == 1, "%s: %d values, expected 1", wanted[w].name, count);
    }
    for (int a = 0; a < NARRAYS; ++a) {
        int count = 0;
        TU_ASSERT(MPI_T_pvar_handle_alloc(session, arrays[a].index, NULL, &arrays[a].handle,
                                          &count) == MPI_SUCCESS,
                  "no handle for %s", arrays[a].name);
        TU_ASSERT(count == NIC_VALUES, "%s: %d values, expected %d", arrays[a].name, count,
                  NIC_VALUES);
    }
    read_all(session, before, nic_before);

    int partner = tu_pair_partner();
    if (partner >= 0) {
        for (int it = 0; it < iters; ++it) {
            if (tu_rank < partner)
                MPI_Send(buf, sizeof(buf), MPI_BYTE, partner, 1, MPI_COMM_WORLD);
            if (probe)
                MPI_Probe(partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv(buf, sizeof(buf), MPI_BYTE, partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (tu_rank > partner)
                MPI_Send(buf, sizeof(buf), MPI_BYTE, partner, 1, MPI_COMM_WORLD);
        }
        if (single_copy || striped)
            large_exchange(partner);
        if (unexpected)
            unexpected_burst(partner, unexpected);
    }
    if (puts)
        window_puts(iters);
    read_all(session, after, nic_after);
    for (int w = 0; w < NWANTED; ++w) {
        /* (Open MPI reports a counter handle's sum of unsigned differences:
         * a counter that went down would show as a wrap) */
        if (wanted[w].var_class == MPI_T_PVAR_CLASS_COUNTER)
            TU_ASSERT(after[w] >= before[w] && after[w] - before[w] < (1ULL << 40),
                      "%s went down: %llu -> %llu", wanted[w].name, before[w], after[w]);
    }
    const unsigned long long n = (unsigned long long)iters;
    int failed = 0; /* every check says what failed (the controls look for each) */
    if (through_provider && partner >= 0) {
        EXPECT(RISE(COMPLETIONS) >= n,
               "common_efa_completions rose by %llu over %d round trips through the provider",
               RISE(COMPLETIONS), iters);
        EXPECT(RISE(PROVIDER_SENDS) >= n && RISE(PROVIDER_SEND_BYTES) >= n * sizeof(buf),
               "provider sends rose by %llu (%llu bytes) over %d messages of %zu bytes",
               RISE(PROVIDER_SENDS), RISE(PROVIDER_SEND_BYTES), iters, sizeof(buf));
        EXPECT(RISE(PROVIDER_RECVS) < n + n / 2,
               "provider receives rose by %llu over %d messages: counted more than once",
               RISE(PROVIDER_RECVS), iters);
        EXPECT(RISE(PROVIDER_RECVS) >= n && RISE(PROVIDER_RECV_BYTES) >= n * sizeof(buf),
               "provider receives rose by %llu (%llu bytes) over %d messages of %zu bytes",
               RISE(PROVIDER_RECVS), RISE(PROVIDER_RECV_BYTES), iters, sizeof(buf));
    }
    if (through_rings && partner >= 0)
        EXPECT(RISE(RING_FRAMES) >= n && RISE(RING_BYTES) >= n * sizeof(buf),
               "ring frames rose by %llu (%llu bytes) over %d messages of %zu bytes",
               RISE(RING_FRAMES), RISE(RING_BYTES), iters, sizeof(buf));
    if (single_copy && partner >= 0)
        EXPECT(RISE(SINGLE_COPIES) >= 1 && RISE(SINGLE_COPY_BYTES) >= (1u << 20),
               "single copies rose by %llu (%llu bytes) over a 1 MiB message each way",
               RISE(SINGLE_COPIES), RISE(SINGLE_COPY_BYTES));
    if (unexpected && partner >= 0 && tu_rank > partner) {
        EXPECT(RISE(UNEXPECTED) >= (unsigned long long)unexpected,
               "unexpected messages rose by %llu, %d were sent before their receives",
               RISE(UNEXPECTED), unexpected);
        EXPECT(after[UNEXPECTED_PEAK] >= (unsigned long long)unexpected,
               "unexpected peak %llu, %d waited at once", after[UNEXPECTED_PEAK], unexpected);
    }
    if (coalesced && partner >= 0 && tu_rank < partner)
        EXPECT(RISE(COALESCED) > 0, "no frame of %d sent back to back was coalesced", unexpected);
    if (puts && partner >= 0) {
        EXPECT(RISE(EMUL_SERVED) >= n, "emulated requests served rose by %llu over %d puts",
               RISE(EMUL_SERVED), iters);
        EXPECT(RISE(EMUL_REFUSED) == 0, "%llu emulated requests refused", RISE(EMUL_REFUSED));
    }
    if (striped && partner >= 0) {
        /* -s: each rank received 1 MiB, fetched by a get of ob1 that
         * btl_efa striped over its NICs, or by own matching's striped
         * reads (rank 0's after its request arrived unexpected), or by
         * the provider's matching's read rendezvous */
        EXPECT(RISE(STRIPED) >= 1 && RISE(STRIPED_BYTES) >= (1u << 20),
               "common_efa_striped rose by %llu (%llu bytes) over a 1 MiB message each way",
               RISE(STRIPED), RISE(STRIPED_BYTES));
        EXPECT(RISE(RAIL_RMA) >= 1 && RISE(RAIL_RMA_BYTES) >= (1u << 19) - 64,
               "common_efa_rail_rma rose by %llu (%llu bytes): nothing on the second NIC",
               RISE(RAIL_RMA), RISE(RAIL_RMA_BYTES));
    }
    /* By NIC: the values add up to the provider's one-sided count, and the
     * NICs beside the first to the rails' */
    unsigned long long nic_sum[NARRAYS] = {0, 0}, rail_sum[NARRAYS] = {0, 0};
    for (int a = 0; a < NARRAYS; ++a)
        for (int k = 0; k < NIC_VALUES; ++k) {
            nic_sum[a] += nic_after[a][k] - nic_before[a][k];
            rail_sum[a] += k ? nic_after[a][k] - nic_before[a][k] : 0;
        }
    EXPECT(nic_sum[NIC_RMA] == RISE(PROVIDER_RMA) &&
               nic_sum[NIC_RMA_BYTES] == RISE(PROVIDER_RMA_BYTES),
           "common_efa_nic_rma rose by %llu (%llu bytes) over the NICs, _provider_rma by %llu "
           "(%llu bytes)",
           nic_sum[NIC_RMA], nic_sum[NIC_RMA_BYTES], RISE(PROVIDER_RMA), RISE(PROVIDER_RMA_BYTES));
    EXPECT(rail_sum[NIC_RMA] == RISE(RAIL_RMA) && rail_sum[NIC_RMA_BYTES] == RISE(RAIL_RMA_BYTES),
           "common_efa_nic_rma rose by %llu (%llu bytes) beside the first NIC, _rail_rma by %llu "
           "(%llu bytes)",
           rail_sum[NIC_RMA], rail_sum[NIC_RMA_BYTES], RISE(RAIL_RMA), RISE(RAIL_RMA_BYTES));
    if (striped && partner >= 0)
        EXPECT(nic_after[NIC_RMA_BYTES][1] - nic_before[NIC_RMA_BYTES][1] >= (1u << 19) - 64,
               "common_efa_nic_rma_bytes[1] rose by %llu: nothing on the second NIC",
               nic_after[NIC_RMA_BYTES][1] - nic_before[NIC_RMA_BYTES][1]);
    EXPECT(after[RAILS_BACK] == 0 && after[RAIL_OUT_NOTICES] == 0,
           "common_efa_rails_back %llu, _rail_out_notices %llu in a healthy job", after[RAILS_BACK],
           after[RAIL_OUT_NOTICES]);
    EXPECT(after[RAILS_LOST] == 0 && after[FAILED_OVER] == 0,
           "common_efa_rails_lost %llu, _failed_over %llu in a healthy job", after[RAILS_LOST],
           after[FAILED_OVER]);
    EXPECT(after[PEERS_LOST] == 0, "common_efa_peers_lost is %llu in a healthy job",
           after[PEERS_LOST]);
    TU_ASSERT(failed == 0, "%d check(s) of the counts failed", failed);

    for (int w = 0; w < NWANTED; ++w)
        MPI_T_pvar_handle_free(session, &wanted[w].handle);
    for (int a = 0; a < NARRAYS; ++a)
        MPI_T_pvar_handle_free(session, &arrays[a].handle);
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    tu_ok("np=%d completions %llu -> %llu, provider sends %llu, ring frames %llu, single "
          "copies %llu, unexpected %llu (peak %llu), coalesced %llu, emulated served %llu",
          tu_size, before[COMPLETIONS], after[COMPLETIONS], after[PROVIDER_SENDS],
          after[RING_FRAMES], after[SINGLE_COPIES], after[UNEXPECTED], after[UNEXPECTED_PEAK],
          after[COALESCED], after[EMUL_SERVED]);
    return 0;
}
