/*
 * bench_floor: the provider's own latency floor, measured with the options
 * mtl_efa uses (tagged RDM endpoint, one CQ for both directions,
 * FI_THREAD_DOMAIN, AV table, remote CQ data carrying the source, inject
 * up to the provider's inject size, directed receives; not the RMA and
 * atomics the core also asks for where offered).  MPI only exchanges the
 * endpoint names; the timed loop calls libfabric alone.  Each receive is
 * posted before the message it waits for is sent, the most favourable
 * order: posted after a send that waits for its completion (as MPI_Send +
 * MPI_Recv do) it read 5.9-6.9 us instead of 4.6-5.7 us on tcp;ofi_rxm at
 * 256 B, most likely because the reply then often arrives before its receive.
 *
 * fi_pingpong -e rdm -m tagged reads slower than this on this machine
 * (medians of 10 interleaved runs, 1-16 B: 0.61-0.73 us against 0.56-0.66 us
 * on shm, 6.9-7.2 us against 4.3-4.6 us on tcp;ofi_rxm), so its figures are
 * no floor for an MTL.
 *
 * usage: mpirun -np 2 --bind-to core --mca pml ob1 --mca btl self,vader \
 *            bench_floor -p PROVIDER [-m MIN] [-M MAX] [-f FACTOR] [-i ITERS] [-x WARMUP]
 * Output (rank 0): the benchmarks' header, then "size half_round_trip_us" per
 * size, as bench_pt2pt -t latency prints them.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int rc_ = (int)(call);                                                                     \
        if (rc_) {                                                                                 \
            fprintf(stderr, "%s: %s\n", #call, fi_strerror(-rc_));                                 \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

static struct fid_ep *ep;
static struct fid_cq *cq;
static fi_addr_t peer;
static size_t inject_size;
static struct fi_context2 rx_ctx, tx_ctx;

static void post_recv(void *buf, size_t len) {
    ssize_t rc;
    while ((rc = fi_trecv(ep, buf, len, NULL, peer, 7, 0, &rx_ctx)) == -FI_EAGAIN) {
        struct fi_cq_tagged_entry e;
        (void)fi_cq_read(cq, &e, 0);
    }
    CHECK(rc);
}

/* Completions seen but not yet waited for. */
static int rx_done, tx_done;

/* Wait for the completion of 'ctx' (notes every completion on the way). */
static void wait_for(void *ctx) {
    int *done = ctx == (void *)&rx_ctx ? &rx_done : &tx_done;
    struct fi_cq_tagged_entry e[4];
    while (!*done) {
        ssize_t n = fi_cq_read(cq, e, 4);
        if (n == -FI_EAGAIN) {
            continue;
        }
        if (n < 0) {
            struct fi_cq_err_entry err = {0};
            fi_cq_readerr(cq, &err, 0);
            fprintf(stderr, "cq error: %s\n", fi_strerror(err.err));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (ssize_t i = 0; i < n; i++) {
            if (e[i].op_context == (void *)&rx_ctx) {
                rx_done = 1;
            } else if (e[i].op_context == (void *)&tx_ctx) {
                tx_done = 1;
            }
        }
    }
    *done = 0;
}

static void send_msg(void *buf, size_t len, uint64_t me) {
    ssize_t rc;
    if (len <= inject_size) {
        while ((rc = fi_tinjectdata(ep, buf, len, me, peer, 7)) == -FI_EAGAIN) {
            struct fi_cq_tagged_entry e;
            (void)fi_cq_read(cq, &e, 0);
        }
        CHECK(rc);
        return;
    }
    while ((rc = fi_tsenddata(ep, buf, len, NULL, me, peer, 7, &tx_ctx)) == -FI_EAGAIN) {
        struct fi_cq_tagged_entry e;
        (void)fi_cq_read(cq, &e, 0);
    }
    CHECK(rc);
    wait_for(&tx_ctx);
}

int main(int argc, char **argv) {
    const char *prov = "shm";
    size_t min = 1, max = 4096, factor = 4;
    long iters = 10000, warmup = 2000;
    int rank, c;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    while ((c = getopt(argc, argv, "p:m:M:f:i:x:")) != -1) {
        switch (c) {
        case 'p':
            prov = optarg;
            break;
        case 'm':
            min = strtoul(optarg, NULL, 10);
            break;
        case 'M':
            max = strtoul(optarg, NULL, 10);
            break;
        case 'f':
            factor = strtoul(optarg, NULL, 10);
            break;
        case 'i':
            iters = atol(optarg);
            break;
        case 'x':
            warmup = atol(optarg);
            break;
        default:
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }

    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    hints->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->tx_attr->msg_order = FI_ORDER_SAS;
    hints->rx_attr->msg_order = FI_ORDER_SAS;
    hints->fabric_attr->prov_name = strdup(prov);
    CHECK(fi_getinfo(FI_VERSION(1, 14), NULL, NULL, 0, hints, &info));
    inject_size = info->tx_attr->inject_size;

    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
    CHECK(fi_domain(fabric, info, &domain, NULL));
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    CHECK(fi_av_open(domain, &av_attr, &av, NULL));
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
    CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
    CHECK(fi_endpoint(domain, info, &ep, NULL));
    CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    CHECK(fi_ep_bind(ep, &av->fid, 0));
    CHECK(fi_enable(ep));

    char name[256], names[2][256];
    size_t len = sizeof(name);
    CHECK(fi_getname(&ep->fid, name, &len));
    MPI_Allgather(name, sizeof(name), MPI_BYTE, names, sizeof(name), MPI_BYTE, MPI_COMM_WORLD);
    if (fi_av_insert(av, names[1 - rank], 1, &peer, 0, NULL) != 1) {
        fprintf(stderr, "fi_av_insert failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    char *sbuf = calloc(1, max + 1), *rbuf = calloc(1, max + 1);
    if (rank == 0) {
        printf("# bench=latency unit=us np=2 iters=%ld warmup=%ld provider=%s inject_size=%zu\n",
               iters, warmup, info->fabric_attr->prov_name, inject_size);
        printf("# columns=size,latency_us\n");
    }
    for (size_t size = min; size <= max; size *= factor) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = 0;
        for (long i = 0; i < warmup + iters; i++) {
            if (i == warmup) {
                t0 = MPI_Wtime();
            }
            if (rank == 0) {
                post_recv(rbuf, size);
                send_msg(sbuf, size, 0);
                wait_for(&rx_ctx);
            } else {
                post_recv(rbuf, size);
                wait_for(&rx_ctx);
                send_msg(sbuf, size, 1);
            }
        }
        double t = MPI_Wtime() - t0;
        if (rank == 0) {
            printf("%zu %.3f\n", size, t * 1e6 / (2.0 * (double)iters));
            fflush(stdout);
        }
        if (factor < 2) {
            break;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    fi_close(&ep->fid);
    fi_close(&cq->fid);
    fi_close(&av->fid);
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
    fi_freeinfo(hints);
    MPI_Finalize();
    return 0;
}
