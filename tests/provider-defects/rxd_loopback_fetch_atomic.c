/*
 * Reproducer: libfabric's udp;ofi_rxd provider (1.17, Debian 12) crashes
 * (SIGSEGV inside its progress) when a process posts a fetching or
 * compare-and-swap atomic to its own address; plain atomics, writes and
 * reads to itself work, and fetching atomics to another process work.
 * btl_efa's native atomics send the process's own atomics through the
 * provider too (so no location mixes provider and CPU atomics), which is
 * why native atomics are not used on ofi_rxd (efa_rma_atomics_defect).
 *
 * One process, one endpoint whose own address is in its AV.  Each atomic
 * runs in a child process, so the crash is observed rather than suffered.
 * Prints "defect present" (exit 1) when a child dies by a signal, "no
 * defect" (exit 0) otherwise (shm and tcp;ofi_rxm pass).
 *   cc rxd_loopback_fetch_atomic.c -lfabric && ./a.out "udp;ofi_rxd"
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

static struct fid_cq *cq;

/* Post with retries while the provider says "not yet" (connection setup). */
#define POST(call)                                                                                 \
    do {                                                                                           \
        int rc_;                                                                                   \
        while (-FI_EAGAIN == (rc_ = (call))) {                                                     \
            struct fi_cq_tagged_entry e_;                                                          \
            (void)fi_cq_read(cq, &e_, 0);                                                          \
        }                                                                                          \
        if (rc_) {                                                                                 \
            fprintf(stderr, "%s: %s\n", #call, fi_strerror(-rc_));                                 \
            return 2;                                                                              \
        }                                                                                          \
    } while (0)

/* Runs one atomic to the process's own address; 0 when it completes. */
static int run(const char *prov, int kind) {
    struct fi_info *hints = fi_allocinfo(), *info;
    hints->caps = FI_MSG | FI_RMA | FI_ATOMIC;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->fabric_attr->prov_name = strdup(prov);
    if (fi_getinfo(FI_VERSION(1, 14), NULL, NULL, 0, hints, &info)) {
        fprintf(stderr, "no provider %s with atomics\n", prov);
        return 2;
    }
    struct fid_fabric *fab;
    struct fid_domain *dom;
    struct fid_av *av;
    struct fid_ep *ep;
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
    if (fi_fabric(info->fabric_attr, &fab, NULL) || fi_domain(fab, info, &dom, NULL) ||
        fi_av_open(dom, &av_attr, &av, NULL) || fi_cq_open(dom, &cq_attr, &cq, NULL) ||
        fi_endpoint(dom, info, &ep, NULL) || fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) ||
        fi_ep_bind(ep, &av->fid, 0) || fi_enable(ep)) {
        fprintf(stderr, "cannot open an endpoint\n");
        return 2;
    }
    char name[256];
    size_t len = sizeof(name);
    fi_addr_t self;
    if (fi_getname(&ep->fid, name, &len) || 1 != fi_av_insert(av, name, 1, &self, 0, NULL)) {
        fprintf(stderr, "cannot insert the own address\n");
        return 2;
    }
    static uint64_t target[512] __attribute__((aligned(4096)));
    static uint64_t operand = 5, compare = 10, result;
    struct fid_mr *mr;
    if (fi_mr_reg(dom, target, sizeof(target), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, 0, &mr,
                  NULL)) {
        fprintf(stderr, "cannot register\n");
        return 2;
    }
    uint64_t raddr = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)target : 0;
    uint64_t key = fi_mr_key(mr);
    struct fi_context2 ctx;
    target[0] = 10;
    if (0 == kind) {
        POST(fi_atomic(ep, &operand, 1, NULL, self, raddr, key, FI_INT64, FI_SUM, &ctx));
    } else if (1 == kind) {
        POST(fi_fetch_atomic(ep, &operand, 1, NULL, &result, NULL, self, raddr, key, FI_INT64,
                             FI_SUM, &ctx));
    } else {
        POST(fi_compare_atomic(ep, &operand, 1, NULL, &compare, NULL, &result, NULL, self, raddr,
                               key, FI_INT64, FI_CSWAP, &ctx));
    }
    for (long i = 0; i < 100000000; ++i) {
        struct fi_cq_tagged_entry e;
        ssize_t n = fi_cq_read(cq, &e, 1);
        if (1 == n) {
            return 0;
        }
        if (-FI_EAVAIL == n) {
            fprintf(stderr, "completion error\n");
            return 2;
        }
    }
    fprintf(stderr, "no completion\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *prov = argc > 1 ? argv[1] : "udp;ofi_rxd";
    static const char *const kinds[] = {"atomic", "fetching atomic", "compare-and-swap"};
    int defect = 0;
    for (int kind = 0; kind < 3; ++kind) {
        fflush(stdout);
        pid_t pid = fork();
        if (0 == pid) {
            /* the provider's crash handler writes a backtrace: not wanted */
            if (!freopen("/dev/null", "w", stderr)) {
                _exit(2);
            }
            _exit(run(prov, kind));
        }
        int st = 0;
        waitpid(pid, &st, 0);
        /* libfabric installs a handler that prints a backtrace and exits
         * with its own status, so a crash is either a signal or an exit
         * status other than run()'s 0 and 2. */
        if (WIFSIGNALED(st)) {
            printf("%s: %s to the own address: killed by signal %d\n", prov, kinds[kind],
                   WTERMSIG(st));
            defect = 1;
        } else if (0 != WEXITSTATUS(st) && 2 != WEXITSTATUS(st)) {
            printf("%s: %s to the own address: crashed (exit status %d)\n", prov, kinds[kind],
                   WEXITSTATUS(st));
            defect = 1;
        } else {
            printf("%s: %s to the own address: %s\n", prov, kinds[kind],
                   0 == WEXITSTATUS(st) ? "completed" : "could not be run");
        }
    }
    printf("%s\n", defect ? "defect present" : "no defect");
    return defect;
}
