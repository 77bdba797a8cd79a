/*
 * Reproducer: libfabric's shm provider (1.17, Debian 12) holds back the
 * completion of a send that its receiver has already taken until every
 * earlier send of the same endpoint has been taken as well.  Sends above
 * the inject size (4 KiB) complete through a response queue that shm
 * reads strictly in posting order and stops at the first entry still
 * waiting for its receiver.  So a send's completion depends on unrelated
 * receives, to any peer, on any tag: MPI requires a matched send to
 * complete whatever else is outstanding, and two processes whose threads
 * share an endpoint (or one thread that receives out of order) can wait
 * for each other forever.
 *
 * One process, two endpoints.  Endpoint 0 sends A (tag 1) and then B
 * (tag 2), 64 KiB each, to endpoint 1, which receives B only.  Prints
 * "defect present" (exit 1) if B's send completion does not come within a
 * second of B being received; then receives A, after which both sends
 * complete.  tcp;ofi_rxm completes B at once (exit 0).  With
 * FI_SHM_DISABLE_CMA=1 shm even refuses to post B until A is received.
 *   cc shm_send_completion_order.c -lfabric && ./a.out shm
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define LEN (64 * 1024)

static struct fid_ep *ep[2];
static struct fid_cq *cq[2];
static struct fid_av *av[2];
static struct fi_context2 sctx[2], rctx[2];

static int open_ep(struct fi_info *info, struct fid_domain *dom, int k) {
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
    if (fi_av_open(dom, &av_attr, &av[k], NULL) || fi_cq_open(dom, &cq_attr, &cq[k], NULL) ||
        fi_endpoint(dom, info, &ep[k], NULL) ||
        fi_ep_bind(ep[k], &cq[k]->fid, FI_TRANSMIT | FI_RECV) ||
        fi_ep_bind(ep[k], &av[k]->fid, 0) || fi_enable(ep[k])) {
        return -1;
    }
    return 0;
}

static long elapsed_ns(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* Progress both endpoints for up to a second; set seen[] for the contexts
 * that complete.  Returns 0 once 'want' has completed, -1 on timeout. */
static int wait_for(void *want, int *seen_a, int *seen_b) {
    struct fi_cq_tagged_entry e;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int k = 0; k < 2; k++) {
            if (fi_cq_read(cq[k], &e, 1) != 1) {
                continue;
            }
            if (e.op_context == &sctx[0]) {
                *seen_a = 1;
            }
            if (e.op_context == &sctx[1]) {
                *seen_b = 1;
            }
            if (e.op_context == want) {
                return 0;
            }
        }
    } while (elapsed_ns(&t0) < 1000000000L);
    return -1;
}

int main(int argc, char **argv) {
    struct fi_info *hints = fi_allocinfo(), *info;
    hints->caps = FI_TAGGED | FI_DIRECTED_RECV;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->fabric_attr->prov_name = strdup(argc > 1 ? argv[1] : "shm");
    if (fi_getinfo(FI_VERSION(1, 14), NULL, NULL, 0, hints, &info)) {
        printf("provider %s not available\n", hints->fabric_attr->prov_name);
        return 2;
    }
    struct fid_fabric *fab;
    struct fid_domain *dom;
    if (fi_fabric(info->fabric_attr, &fab, NULL) || fi_domain(fab, info, &dom, NULL) ||
        open_ep(info, dom, 0) || open_ep(info, dom, 1)) {
        printf("could not open endpoints\n");
        return 2;
    }
    const char *prov = info->fabric_attr->prov_name;
    char name[256];
    size_t len = sizeof(name);
    fi_addr_t to_1;
    fi_getname(&ep[1]->fid, name, &len);
    if (fi_av_insert(av[0], name, 1, &to_1, 0, NULL) != 1) {
        printf("could not insert the address\n");
        return 2;
    }
    char *sbuf[2] = {calloc(1, LEN), calloc(1, LEN)}, *rbuf[2] = {calloc(1, LEN), calloc(1, LEN)};
    int seen_a = 0, seen_b = 0;
    for (int i = 0; i < 2; i++) {
        ssize_t rc;
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while ((rc = fi_tsend(ep[0], sbuf[i], LEN, NULL, to_1, 1 + i, &sctx[i])) == -FI_EAGAIN &&
               elapsed_ns(&t0) < 1000000000L) {
            struct fi_cq_tagged_entry e;
            fi_cq_read(cq[0], &e, 0);
            fi_cq_read(cq[1], &e, 0);
        }
        if (rc == -FI_EAGAIN) {
            /* Without cross-memory attach (FI_SHM_DISABLE_CMA=1, or ptrace
             * not permitted) shm sends through bounce buffers, and while
             * one such send is unreceived every other send to that peer
             * is refused: worse, and not worked around. */
            printf("%s: defect present, worse: send B is refused until A is received\n", prov);
            return 1;
        }
        if (rc) {
            printf("fi_tsend: %s\n", fi_strerror((int)-rc));
            return 2;
        }
    }
    /* B is received; A waits, unexpected. */
    fi_trecv(ep[1], rbuf[1], LEN, NULL, FI_ADDR_UNSPEC, 2, 0, &rctx[1]);
    if (wait_for(&rctx[1], &seen_a, &seen_b)) {
        printf("%s: the receive of B did not complete\n", prov);
        return 2;
    }
    int defect = !seen_b && wait_for(&sctx[1], &seen_a, &seen_b) != 0;
    if (defect) {
        printf("%s: defect present: send B was received, but its completion waits for the "
               "earlier send A\n",
               prov);
    }
    /* Now A: both sends complete (if B was held, it comes now). */
    fi_trecv(ep[1], rbuf[0], LEN, NULL, FI_ADDR_UNSPEC, 1, 0, &rctx[0]);
    if (wait_for(&rctx[0], &seen_a, &seen_b)) {
        printf("%s: the receive of A did not complete\n", prov);
        return 2;
    }
    if (!seen_a || !seen_b) {
        wait_for(NULL, &seen_a, &seen_b); /* a second to collect them */
    }
    if (!seen_a || !seen_b) {
        printf("%s: send completions missing after both receives (A %d, B %d)\n", prov, seen_a,
               seen_b);
        return 2;
    }
    if (!defect) {
        printf("%s: send B completed once received, before A was\n", prov);
    } else {
        printf("%s: B's completion came once A was received\n", prov);
    }
    return defect;
}
