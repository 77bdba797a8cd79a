/*
 * Reproducer: libfabric's tcp;ofi_rxm (1.17, Debian 12) never completes a
 * rendezvous send whose unexpected message the receiver claims
 * (FI_PEEK | FI_CLAIM) and then discards (FI_CLAIM | FI_DISCARD): the
 * discard completes at the receiver, the sender's fi_tsend never does, and
 * the provider keeps the sender's buffer.  Receiving the claimed message
 * instead (FI_CLAIM with a buffer) completes the send.  libfabric 2.x's efa
 * provider discards the same way, without telling the sender
 * (efa_rdm_srx_discard releases the receiver's packets only).  That is why
 * the core's withdrawal (common/core/core_withdraw.cpp) takes a withdrawn
 * message into scratch memory rather than discarding it.
 *
 * One process, two endpoints.  Sends a small message, a large one (1 MiB,
 * rendezvous) with another tag, and a small one, all unexpected at the
 * receiver; claims the large one by its exact tag and discards it; waits
 * 3 s for the large send to complete.  Then the same with a receive of the
 * claimed message.  Prints "defect present" and exits 1 when the discarded
 * send stays incomplete while the received one completes; 0 when both
 * complete; 2 when the setup fails or the receive path fails too.
 *   cc rxm_discard_holds_send.c -lfabric && ./a.out "tcp;ofi_rxm"
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

#define LARGE (1u << 20)
#define TAG_SMALL 0x100000005ull
#define TAG_LARGE (TAG_SMALL | (5ull << 40)) /* the same envelope with a seq */

static struct fid_ep *ep[2];
static struct fid_cq *cq[2];
static struct fid_av *av[2];
static fi_addr_t to_receiver, to_sender;

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

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* One completion of endpoint k: 1 and its context and error, or 0. */
static int next_completion(int k, void **context, int *err) {
    struct fi_cq_tagged_entry e;
    ssize_t r = fi_cq_read(cq[k], &e, 1);
    if (r == 1) {
        *context = e.op_context;
        *err = 0;
        return 1;
    }
    if (r == -FI_EAVAIL) {
        struct fi_cq_err_entry ee = {0};
        fi_cq_readerr(cq[k], &ee, 0);
        *context = ee.op_context;
        *err = ee.err;
        return 1;
    }
    return 0;
}

/* Completions seen so far (contexts, with their errors): a wait may read
 * one that another wait is for. */
#define SEEN_MAX 64
static void *seen_ctx[SEEN_MAX];
static int seen_err[SEEN_MAX], nseen;

static int take_seen(void *want, int *err) {
    for (int i = 0; i < nseen; i++) {
        if (seen_ctx[i] == want) {
            *err = seen_err[i];
            seen_ctx[i] = seen_ctx[--nseen];
            seen_err[i] = seen_err[nseen];
            return 1;
        }
    }
    return 0;
}

/* Progress both endpoints for up to 'secs' or until 'want' completes;
 * returns its error (or -1 on time out). */
static int wait_for(void *want, double secs) {
    double t0 = now();
    int err;
    do {
        void *c;
        for (int j = 0; j < 2; j++) {
            while (nseen < SEEN_MAX && next_completion(j, &c, &err)) {
                seen_ctx[nseen] = c;
                seen_err[nseen++] = err;
            }
        }
        if (take_seen(want, &err)) {
            return err;
        }
    } while (now() - t0 < secs);
    return -1;
}

static void send_retrying(const void *buf, size_t len, uint64_t tag, void *context) {
    while (fi_tsend(ep[0], buf, len, NULL, to_receiver, tag, context) == -FI_EAGAIN) {
        (void)wait_for(NULL, 0); /* rxm connects in the background */
    }
}

/* Sends small, large, small; takes the large one away (discard or receive);
 * 1 if the large send completed within 3 s, 0 if not, -1 on a setup error. */
static int round_trip(char *sbuf, char *rbuf, int discard) {
    static struct fi_context2 s_small1, s_large, s_small2, peek, r_small;
    send_retrying(sbuf, 8, TAG_SMALL, &s_small1);
    send_retrying(sbuf, LARGE, TAG_LARGE, &s_large);
    send_retrying(sbuf, 8, TAG_SMALL, &s_small2);
    if (wait_for(&s_small2, 2.0) != 0) {
        printf("the small sends did not complete\n");
        return -1;
    }
    struct iovec iov = {rbuf, LARGE};
    void *desc = NULL;
    struct fi_msg_tagged m = {.msg_iov = &iov,
                              .desc = &desc,
                              .iov_count = 0,
                              .addr = to_sender,
                              .tag = TAG_LARGE,
                              .ignore = 0,
                              .context = &peek};
    if (fi_trecvmsg(ep[1], &m, FI_PEEK | FI_CLAIM | FI_COMPLETION) || wait_for(&peek, 2.0) != 0) {
        printf("the large message was not found by its tag\n");
        return -1;
    }
    m.iov_count = discard ? 0 : 1;
    if (fi_trecvmsg(ep[1], &m, FI_CLAIM | FI_COMPLETION | (discard ? FI_DISCARD : 0)) ||
        wait_for(&peek, 2.0) != 0) {
        printf("the claimed message was not %s\n", discard ? "discarded" : "received");
        return -1;
    }
    int done = wait_for(&s_large, 3.0) == 0;
    for (int i = 0; i < 2; i++) { /* the small ones stay receivable */
        if (fi_trecv(ep[1], rbuf, 8, NULL, to_sender, TAG_SMALL, 0, &r_small) ||
            wait_for(&r_small, 2.0) != 0) {
            printf("small message %d was lost\n", i);
            return -1;
        }
    }
    return done;
}

int main(int argc, char **argv) {
    struct fi_info *hints = fi_allocinfo(), *info;
    hints->caps = FI_TAGGED | FI_DIRECTED_RECV;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->fabric_attr->prov_name = strdup(argc > 1 ? argv[1] : "tcp;ofi_rxm");
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
    fi_getname(&ep[1]->fid, name, &len);
    fi_av_insert(av[0], name, 1, &to_receiver, 0, NULL);
    len = sizeof(name);
    fi_getname(&ep[0]->fid, name, &len);
    fi_av_insert(av[1], name, 1, &to_sender, 0, NULL);
    char *sbuf = malloc(LARGE), *rbuf = malloc(LARGE);
    memset(sbuf, 7, LARGE);

    const int received = round_trip(sbuf, rbuf, 0);
    const int discarded = round_trip(sbuf, rbuf, 1);
    const char *prov = info->fabric_attr->prov_name;
    if (received != 1) {
        printf("%s: a claimed and received large message did not complete its send\n", prov);
        return 2;
    }
    if (discarded == 1) {
        printf("%s: a discarded large message completes its send\n", prov);
        return 0;
    }
    printf("%s: defect present: the send of a claimed and discarded large message never "
           "completes\n",
           prov);
    return 1;
}
