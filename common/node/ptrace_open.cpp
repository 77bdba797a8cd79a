// Yama's ptrace_scope and the node's processes (efa_cma.h has the
// contract): under scope 1 a process lets others read its memory only when
// it says so, and the ranks of a node are siblings, not descendants of
// each other. Without this, on a distribution with scope 1 by default,
// every large on-node message would stream through the rings and a dead
// peer of the node would go unseen (its pid cannot be proven).
#include <cerrno>
#include <cstdio>
#include <mutex>

#include <sys/prctl.h>

#include "efa_cma.h"

namespace {
constexpr const char *kScopeFile = "/proc/sys/kernel/yama/ptrace_scope";

// -1: no Yama (or unreadable: then Yama cannot be told apart from none,
// and the copies themselves say what the kernel allows).
int read_scope(const char *path) {
    FILE *f = fopen(path, "re");
    if (!f) {
        return -1;
    }
    int scope = -1;
    if (1 != fscanf(f, "%d", &scope) || scope < 0) {
        scope = -1;
    }
    fclose(f);
    return scope;
}

std::once_flag g_once;
efa_cma_open_t g_how = EFA_CMA_OPEN_NOT_NEEDED;
int g_scope = -1;
int g_err = 0;
} // namespace

extern "C" {

efa_cma_open_t efa_cma_open_to_node_at(const char *path, int *scope, int *err) {
    const int s = read_scope(path);
    int e = 0;
    efa_cma_open_t how = EFA_CMA_OPEN_NOT_NEEDED;
    if (s >= 2) {
        how = EFA_CMA_OPEN_REFUSED; // no process may open itself past 1
    } else if (1 == s) {
#ifdef PR_SET_PTRACER
        how = 0 == prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) ? EFA_CMA_OPEN_DONE
                                                                      : EFA_CMA_OPEN_REFUSED;
        e = EFA_CMA_OPEN_DONE == how ? 0 : errno;
#else
        how = EFA_CMA_OPEN_REFUSED;
        e = ENOSYS;
#endif
    }
    if (scope) {
        *scope = s;
    }
    if (err) {
        *err = e;
    }
    return how;
}

efa_cma_open_t efa_cma_open_to_node(int *scope, int *err) {
    std::call_once(g_once, [] { g_how = efa_cma_open_to_node_at(kScopeFile, &g_scope, &g_err); });
    if (scope) {
        *scope = g_scope;
    }
    if (err) {
        *err = g_err;
    }
    return g_how;
}

const char *efa_cma_open_said(efa_cma_open_t how, int scope) {
    switch (how) {
    case EFA_CMA_OPEN_DONE:
        return "Yama's ptrace_scope 1: this process lets the processes of its user read it "
               "(PR_SET_PTRACER_ANY, as Open MPI's shared-memory transport does)";
    case EFA_CMA_OPEN_REFUSED:
        return scope >= 2 ? "Yama's ptrace_scope 2 or more: only administrators may read "
                            "another process; large on-node messages stream through the rings"
                          : "Yama's ptrace_scope 1 and PR_SET_PTRACER refused: large on-node "
                            "messages stream through the rings";
    case EFA_CMA_OPEN_NOT_NEEDED:
    default:
        return scope < 0 ? "no Yama" : "Yama's ptrace_scope 0";
    }
}

} // extern "C"
