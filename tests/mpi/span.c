/*
 * Which node each rank is on, as the components will see it, and a
 * message between every pair of ranks.  Each rank prints
 *   span: rank R on NODE: this node [ranks], other nodes [ranks]
 * from its host name (MPI_Get_processor_name), and checks it against Open
 * MPI's own locality (MPI_Comm_split_type SHARED, which reads the same
 * flags the components choose their paths by).  It fails when:
 *   - the job spans fewer nodes than -n asks (hosts meant to be separate
 *     nodes that the runtime placed or merged into one);
 *   - Open MPI's locality and the host names disagree about a peer (a
 *     runtime that marks processes of one host as not local, or the
 *     reverse);
 *   - a message between any two ranks arrives wrong, at 1 byte and at
 *     -s bytes (default 256 KiB: the large-message protocol).
 *   span [-n MIN_NODES] [-s BYTES]
 */
#include "test_util.h"

static int is_in(const int *ranks, int n, int r) {
    for (int i = 0; i < n; ++i) {
        if (ranks[i] == r) {
            return 1;
        }
    }
    return 0;
}

/* Append " r" for each rank r of the world whose membership (in the
 * shared-memory group) equals want, to buf. */
static void list_ranks(char *buf, size_t len, const int *shared, int nshared, int want) {
    size_t used = strlen(buf);
    for (int r = 0; r < tu_size && used + 12 < len; ++r) {
        if (is_in(shared, nshared, r) == want) {
            used += (size_t)snprintf(buf + used, len - used, "%s%d",
                                     '[' == buf[used - 1] ? "" : " ", r);
        }
    }
}

/* Every pair of ranks exchanges one message of len bytes each way,
 * filled with a pattern of the pair, checked on arrival. */
static void exchange_all(size_t len) {
    unsigned char *out = tu_malloc(len), *in = tu_malloc(len);
    for (int step = 1; step < tu_size; ++step) {
        const int to = (tu_rank + step) % tu_size, from = (tu_rank + tu_size - step) % tu_size;
        tu_fill(out, len, tu_seed((uint64_t)tu_rank, (uint64_t)to, len, 7));
        memset(in, TU_POISON, len);
        MPI_Status st;
        MPI_Sendrecv(out, (int)len, MPI_BYTE, to, 7, in, (int)len, MPI_BYTE, from, 7,
                     MPI_COMM_WORLD, &st);
        char what[64];
        snprintf(what, sizeof(what), "%zu bytes from rank %d", len, from);
        tu_verify_recv(in, &st, from, 7, len, tu_seed((uint64_t)from, (uint64_t)tu_rank, len, 7),
                       what);
    }
    free(out);
    free(in);
}

int main(int argc, char **argv) {
    tu_init(&argc, &argv, "span");
    int min_nodes = 1;
    size_t large = 256 * 1024;
    for (int i = 1; i < argc; ++i) {
        if (0 == strcmp(argv[i], "-n") && i + 1 < argc) {
            min_nodes = (int)tu_parse_long(argv[++i]);
        } else if (0 == strcmp(argv[i], "-s") && i + 1 < argc) {
            large = tu_parse_size(argv[++i]);
        } else {
            tu_fail("usage: span [-n MIN_NODES] [-s BYTES]");
        }
    }

    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int name_len = 0;
    MPI_Get_processor_name(name, &name_len);
    char *names = tu_malloc((size_t)tu_size * MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);

    /* Open MPI's locality: the world ranks in this rank's shared group. */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int nshared = 0;
    MPI_Comm_size(node, &nshared);
    int *local = tu_malloc((size_t)nshared * sizeof(int));
    int *shared = tu_malloc((size_t)nshared * sizeof(int));
    for (int i = 0; i < nshared; ++i) {
        local[i] = i;
    }
    MPI_Group node_group, world_group;
    MPI_Comm_group(node, &node_group);
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_translate_ranks(node_group, nshared, local, world_group, shared);

    char line[4096];
    snprintf(line, sizeof(line), "span: rank %d on %s: this node [", tu_rank, name);
    list_ranks(line, sizeof(line), shared, nshared, 1);
    strncat(line, "], other nodes [", sizeof(line) - strlen(line) - 1);
    list_ranks(line, sizeof(line), shared, nshared, 0);
    strncat(line, "]", sizeof(line) - strlen(line) - 1);
    printf("%s\n", line);
    fflush(stdout);

    for (int r = 0; r < tu_size; ++r) {
        const int same_host = 0 == strcmp(names + (size_t)r * MPI_MAX_PROCESSOR_NAME, name);
        TU_ASSERT(same_host == is_in(shared, nshared, r),
                  "Open MPI's locality and the host names disagree about rank %d (on %s): "
                  "%s by host name, %s by MPI_COMM_TYPE_SHARED",
                  r, names + (size_t)r * MPI_MAX_PROCESSOR_NAME, same_host ? "local" : "remote",
                  same_host ? "remote" : "local");
    }
    /* Distinct host names: a rank counts its node when it is the lowest
     * rank on it. */
    int lowest_here = 1;
    for (int i = 0; i < nshared; ++i) {
        lowest_here &= shared[i] >= tu_rank;
    }
    int nodes = 0;
    MPI_Allreduce(&lowest_here, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    TU_ASSERT(nodes >= min_nodes,
              "the job spans %d node(s), %d wanted: the hosts were placed or merged into "
              "fewer nodes than asked",
              nodes, min_nodes);

    exchange_all(1);
    exchange_all(large);

    MPI_Group_free(&node_group);
    MPI_Group_free(&world_group);
    MPI_Comm_free(&node);
    free(local);
    free(shared);
    free(names);
    tu_ok("np=%d nodes=%d", tu_size, nodes);
    return 0;
}
