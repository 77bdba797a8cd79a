/*
 * The core's MPI_T performance variables (common/common_efa_pvars.c): each
 * common_efa_* variable is found by name with the class and type it is
 * documented with, reads through a session handle, never goes down while
 * the ranks exchange messages, and (-p: the job's messages cross the
 * provider) common_efa_completions goes up with them.
 *
 *   pvars [-p] [-i ITERS]
 */
#include "test_util.h"

#include <string.h>
#include <unistd.h>

#define MAX_NAME 256

struct want {
    const char *name;
    int var_class;
    int index; /* found: its MPI_T index */
    MPI_T_pvar_handle handle;
};

static struct want wanted[] = {
    {"common_efa_completions", MPI_T_PVAR_CLASS_COUNTER, -1, 0},
    {"common_efa_posts_deferred", MPI_T_PVAR_CLASS_COUNTER, -1, 0},
    {"common_efa_posts_waiting", MPI_T_PVAR_CLASS_LEVEL, -1, 0},
    {"common_efa_mr_cache_hits", MPI_T_PVAR_CLASS_COUNTER, -1, 0},
    {"common_efa_mr_cache_misses", MPI_T_PVAR_CLASS_COUNTER, -1, 0},
    {"common_efa_mr_cache_evictions", MPI_T_PVAR_CLASS_COUNTER, -1, 0},
    {"common_efa_peers_lost", MPI_T_PVAR_CLASS_COUNTER, -1, 0},
};
#define NWANTED ((int)(sizeof(wanted) / sizeof(wanted[0])))

static void find_all(void) {
    int n = 0;
    TU_ASSERT(MPI_T_pvar_get_num(&n) == MPI_SUCCESS, "MPI_T_pvar_get_num failed");
    for (int i = 0; i < n; ++i) {
        char name[MAX_NAME], desc[1024];
        int name_len = MAX_NAME, desc_len = sizeof(desc), verbosity, var_class, bind, readonly,
            continuous, atomic;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        if (MPI_T_pvar_get_info(i, name, &name_len, &verbosity, &var_class, &type, &enumtype, desc,
                                &desc_len, &bind, &readonly, &continuous, &atomic) != MPI_SUCCESS)
            continue;
        for (int w = 0; w < NWANTED; ++w) {
            if (strcmp(name, wanted[w].name) != 0)
                continue;
            TU_ASSERT(var_class == wanted[w].var_class, "%s: class %d, expected %d", name,
                      var_class, wanted[w].var_class);
            TU_ASSERT(type == MPI_UNSIGNED_LONG_LONG, "%s: not MPI_UNSIGNED_LONG_LONG", name);
            TU_ASSERT(readonly && continuous, "%s: not read-only and continuous", name);
            TU_ASSERT(bind == MPI_T_BIND_NO_OBJECT, "%s: bound to an object (%d)", name, bind);
            TU_ASSERT(desc_len > 1, "%s: no description", name);
            wanted[w].index = i;
        }
    }
    for (int w = 0; w < NWANTED; ++w)
        TU_ASSERT(wanted[w].index >= 0, "performance variable %s not found", wanted[w].name);
}

static void read_all(MPI_T_pvar_session s, unsigned long long *v) {
    for (int w = 0; w < NWANTED; ++w)
        TU_ASSERT(MPI_T_pvar_read(s, wanted[w].handle, &v[w]) == MPI_SUCCESS, "reading %s failed",
                  wanted[w].name);
}

int main(int argc, char **argv) {
    int provided, opt, iters = 200, through_provider = 0;
    MPI_T_pvar_session session;
    unsigned long long before[NWANTED], after[NWANTED];
    char buf[64] = {0};

    tu_init(&argc, &argv, "pvars");
    while ((opt = getopt(argc, argv, "pi:h")) != -1) {
        switch (opt) {
        case 'p':
            through_provider = 1;
            break;
        case 'i':
            iters = (int)tu_parse_long(optarg);
            break;
        default:
            tu_usage("[-p] [-i ITERS]", opt == 'h' ? 0 : 1);
        }
    }
    TU_ASSERT(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS,
              "MPI_T_init_thread failed");
    find_all();
    TU_ASSERT(MPI_T_pvar_session_create(&session) == MPI_SUCCESS, "no MPI_T session");
    for (int w = 0; w < NWANTED; ++w) {
        int count = 0;
        TU_ASSERT(MPI_T_pvar_handle_alloc(session, wanted[w].index, NULL, &wanted[w].handle,
                                          &count) == MPI_SUCCESS,
                  "no handle for %s", wanted[w].name);
        TU_ASSERT(count == 1, "%s: %d values, expected 1", wanted[w].name, count);
    }
    read_all(session, before);

    int partner = tu_pair_partner();
    if (partner >= 0) {
        for (int it = 0; it < iters; ++it) {
            if (tu_rank < partner) {
                MPI_Send(buf, sizeof(buf), MPI_BYTE, partner, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, sizeof(buf), MPI_BYTE, partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, sizeof(buf), MPI_BYTE, partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, sizeof(buf), MPI_BYTE, partner, 1, MPI_COMM_WORLD);
            }
        }
    }
    read_all(session, after);
    for (int w = 0; w < NWANTED; ++w) {
        /* (Open MPI reports a counter handle's sum of unsigned differences:
         * a counter that went down would show as a wrap) */
        if (wanted[w].var_class == MPI_T_PVAR_CLASS_COUNTER)
            TU_ASSERT(after[w] >= before[w] && after[w] - before[w] < (1ULL << 40),
                      "%s went down: %llu -> %llu", wanted[w].name, before[w], after[w]);
    }
    if (through_provider && partner >= 0)
        TU_ASSERT(after[0] >= before[0] + (unsigned long long)iters,
                  "common_efa_completions rose by %llu over %d round trips through the provider",
                  after[0] - before[0], iters);
    TU_ASSERT(after[6] == 0, "common_efa_peers_lost is %llu in a healthy job", after[6]);

    for (int w = 0; w < NWANTED; ++w)
        MPI_T_pvar_handle_free(session, &wanted[w].handle);
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    tu_ok("np=%d completions %llu -> %llu, deferred %llu, mr hits %llu misses %llu", tu_size,
          before[0], after[0], after[1], after[3], after[4]);
    return 0;
}
