/*
 * Reproducer: libfabric's shm provider (1.17, Debian 12) never matches a
 * tagged receive whose ignore mask covers tag bits against a message that
 * is already waiting as unexpected; an exact receive does match it.
 * mtl_efa's MPI_ANY_TAG receives are such receives, which is why the
 * wildcard tests are listed as provider defects for shm.
 *
 * One process, two endpoints.  Sends three messages, lets them arrive
 * unexpected, then posts: an exact receive (matches), then a wildcard one.
 * Prints "defect present" (exit 1) if the wildcard receive finds nothing
 * within a second while tcp;ofi_rxm, say, matches it at once (exit 0).
 *   cc shm_wildcard_unexpected.c -lfabric && ./a.out shm
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

static struct fid_ep *ep[2];
static struct fid_cq *cq[2];
static struct fid_av *av[2];

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

static void poll_both(void) {
    struct fi_cq_tagged_entry e;
    fi_cq_read(cq[0], &e, 1);
    fi_cq_read(cq[1], &e, 0);
}

/* Wait up to a second for a receive completion on endpoint 1. */
static int wait_recv(uint64_t *tag) {
    struct fi_cq_tagged_entry e;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        fi_cq_read(cq[0], &e, 1);
        if (fi_cq_read(cq[1], &e, 1) == 1) {
            *tag = e.tag;
            return 0;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 1000000000L);
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
    char name[256];
    size_t len = sizeof(name);
    fi_addr_t to_1;
    fi_getname(&ep[1]->fid, name, &len);
    fi_av_insert(av[0], name, 1, &to_1, 0, NULL);

    /* Three messages: communicator 2 tag 5, communicator 1 tags 5 and 7. */
    const uint64_t sent[] = {0x0000000200000005ull, 0x0000000100000005ull, 0x0000000100000007ull};
    static struct fi_context2 sctx[3], rctx[2];
    char buf[8] = {0};
    for (int i = 0; i < 3; i++) {
        while (fi_tsend(ep[0], buf, sizeof(buf), NULL, to_1, sent[i], &sctx[i]) == -FI_EAGAIN) {
            poll_both();
        }
    }
    for (int i = 0; i < 100; i++) { /* let them arrive, unexpected */
        poll_both();
    }
    uint64_t tag = 0;
    fi_trecv(ep[1], buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, sent[0], 0, &rctx[0]);
    if (wait_recv(&tag) || tag != sent[0]) {
        printf("exact receive did not match\n");
        return 2;
    }
    /* Communicator 1, any tag: must match 0x0000000100000005. */
    fi_trecv(ep[1], buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x0000000100000000ull, 0x7fffffffull,
             &rctx[1]);
    if (wait_recv(&tag)) {
        printf("%s: defect present: a wildcard receive does not match a waiting message\n",
               info->fabric_attr->prov_name);
        return 1;
    }
    printf("%s: wildcard receive matched tag %016llx\n", info->fabric_attr->prov_name,
           (unsigned long long)tag);
    return tag == sent[1] ? 0 : 1;
}
