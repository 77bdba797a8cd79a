/*
 * Reproducer: libfabric's udp;ofi_rxd (1.17, Debian 12) stops completing
 * untagged messages when its queues are made small (tx_attr->size and
 * rx_attr->size 16 or 32: every run; 64: at times, with 20000 messages),
 * where the same traffic goes through with 128, with its default (1024),
 * and on tcp;ofi_rxm with queues of 16 (or 4).  Under Open MPI (own
 * matching, cm-efa-own-rxd-noring) it also failed a receive with FI_ETRUNC,
 * never returned from an fi_recv (looping over an unexpected message's
 * segments) and crashed there.  With 16 receives posted instead of 4 (few
 * unexpected messages), 64 passed.
 *
 * The traffic is that of mtl_efa's own matching between two nodes
 * (common/engine/net_link.cpp, common/core/core_msg.cpp), without Open MPI
 * or our components: two processes, one endpoint each, send each other
 * COUNT messages of 16 bytes to 16 KiB at once, at most 16 posted sends in
 * flight per process (a send the provider refuses with -FI_EAGAIN is tried
 * again after the next completion poll), and each keeps 4 receive buffers
 * of 64 KiB posted (a quarter of the receive queue, as the core's pool
 * does), posted again as soon as their message is checked.  Every message
 * carries its number and length: a receive must complete without error,
 * with the length its number says, once each.
 *
 * Prints "defect present" and exits 1 when a receive fails (rxd reported
 * FI_ETRUNC for a 64 KiB buffer and a message of at most 16 KiB), a message
 * comes with a wrong length or twice, or nothing completes for 10 s while
 * messages are missing (the provider stopped); 0 when every message came.
 *   cc rxd_tiny_queues.c -lfabric && ./a.out "udp;ofi_rxd" [QUEUE [COUNT]]
 * QUEUE 0 leaves the provider's default sizes; defaults 16 and 2000.
 * -DNRECV=16 posts 16 receives instead of 4.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define WINDOW 16
#ifndef NRECV
#define NRECV 4
#endif
#define RBUF (64 * 1024)
#define MAXMSG (16 * 1024)

struct hdr {
    uint32_t seq, len;
};

static size_t msg_len(uint32_t i) {
    return sizeof(struct hdr) + ((uint64_t)i * 2654435761u) % (MAXMSG - sizeof(struct hdr) + 1);
}

static long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* One side: returns 0 (all came), 1 (defect), 2 (setup failed). */
static int run(int sock, const char *prov, size_t q, uint32_t count, int rank) {
    struct fi_info *hints = fi_allocinfo(), *info;
    hints->caps = FI_MSG;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->fabric_attr->prov_name = strdup(prov);
    if (q) {
        hints->tx_attr->size = q;
        hints->rx_attr->size = q;
    }
    if (fi_getinfo(FI_VERSION(1, 14), NULL, NULL, 0, hints, &info)) {
        printf("provider %s not available\n", prov);
        return 2;
    }
    struct fid_fabric *fab;
    struct fid_domain *dom;
    struct fid_ep *ep;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_MSG};
    if (fi_fabric(info->fabric_attr, &fab, NULL) || fi_domain(fab, info, &dom, NULL) ||
        fi_av_open(dom, &av_attr, &av, NULL) || fi_cq_open(dom, &cq_attr, &cq, NULL) ||
        fi_endpoint(dom, info, &ep, NULL) || fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) ||
        fi_ep_bind(ep, &av->fid, 0) || fi_enable(ep)) {
        printf("could not open the endpoint\n");
        return 2;
    }
    char name[256], peer_name[256];
    size_t len = sizeof(name);
    fi_addr_t peer;
    fi_getname(&ep->fid, name, &len);
    if (write(sock, name, len) != (ssize_t)len || read(sock, peer_name, len) != (ssize_t)len ||
        fi_av_insert(av, peer_name, 1, &peer, 0, NULL) != 1) {
        printf("could not exchange addresses\n");
        return 2;
    }
    char *rbuf = malloc((size_t)NRECV * RBUF), *sbuf = malloc((size_t)WINDOW * MAXMSG);
    struct fi_context2 rctx[NRECV], sctx[WINDOW];
    int sfree[WINDOW], nfree = WINDOW, unposted[NRECV], nunposted = 0;
    unsigned char *seen = calloc(count, 1);
    for (int i = 0; i < WINDOW; i++) {
        sfree[i] = i;
    }
    for (int i = 0; i < NRECV; i++) {
        if (fi_recv(ep, rbuf + (size_t)i * RBUF, RBUF, NULL, FI_ADDR_UNSPEC, &rctx[i])) {
            printf("fi_recv failed\n");
            return 2;
        }
    }
    uint32_t sent = 0, done = 0, got = 0;
    int defect = 0, eagain = 0;
    long last = now_ms();
    char ch = 0;
    while ((got < count || done < count) && !defect) {
        if (sent < count && nfree > 0) {
            int s = sfree[nfree - 1];
            struct hdr h = {sent, (uint32_t)msg_len(sent)};
            char *b = sbuf + (size_t)s * MAXMSG;
            memcpy(b, &h, sizeof(h));
            memset(b + sizeof(h), (int)(sent & 0xff), h.len - sizeof(h));
            ssize_t rc = fi_send(ep, b, h.len, NULL, peer, &sctx[s]);
            if (rc == 0) {
                nfree--;
                sent++;
            } else if (rc == -FI_EAGAIN) {
                eagain++;
            } else {
                printf("%s rank %d: fi_send: %s\n", prov, rank, fi_strerror((int)-rc));
                return 2;
            }
        }
        struct fi_cq_msg_entry e[16];
        ssize_t n = fi_cq_read(cq, e, 16);
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry err = {0};
            fi_cq_readerr(cq, &err, 0);
            printf("%s rank %d: defect present: a completion failed: %s (len %zu, flags 0x%llx) "
                   "after %u of %u messages came\n",
                   prov, rank, fi_strerror(err.err), err.len, (unsigned long long)err.flags, got,
                   count);
            defect = 1;
            break;
        }
        for (ssize_t k = 0; k < n; k++) {
            last = now_ms();
            if (e[k].flags & FI_SEND) {
                sfree[nfree++] = (int)((struct fi_context2 *)e[k].op_context - sctx);
                done++;
                continue;
            }
            int r = (int)((struct fi_context2 *)e[k].op_context - rctx);
            struct hdr h;
            memcpy(&h, rbuf + (size_t)r * RBUF, sizeof(h));
            if (e[k].len < sizeof(h) || h.seq >= count || e[k].len != msg_len(h.seq) ||
                h.len != e[k].len || seen[h.seq]) {
                printf("%s rank %d: defect present: message %u came with %zu bytes (expected "
                       "%zu%s)\n",
                       prov, rank, h.seq, e[k].len, h.seq < count ? msg_len(h.seq) : 0,
                       h.seq < count && seen[h.seq] ? ", and twice" : "");
                defect = 1;
                break;
            }
            seen[h.seq] = 1;
            got++;
            unposted[nunposted++] = r;
        }
        /* A receive the provider refuses waits for the next round. */
        for (int k = nunposted; k-- > 0;) {
            int r = unposted[k];
            if (fi_recv(ep, rbuf + (size_t)r * RBUF, RBUF, NULL, FI_ADDR_UNSPEC, &rctx[r]) == 0) {
                unposted[k] = unposted[--nunposted];
            }
        }
        if (now_ms() - last > 10000) {
            printf("%s rank %d: defect present: nothing completed for 10 s; %u of %u messages "
                   "came, %u of %u sends completed (%u posted)\n",
                   prov, rank, got, count, done, count, sent);
            defect = 1;
        }
    }
    if (!defect) {
        printf("%s rank %d: all %u messages came, every send completed (%d sends refused with "
               "-FI_EAGAIN and tried again)\n",
               prov, rank, count, eagain);
    }
    /* Keep the provider going until the peer is done too: its sends may
     * still wait for this side's acknowledgements. */
    if (write(sock, &ch, 1) == 1) {
        fcntl(sock, F_SETFL, O_NONBLOCK);
        for (long t0 = now_ms(); read(sock, &ch, 1) != 1 && now_ms() - t0 < 10000;) {
            fi_cq_read(cq, NULL, 0);
        }
    }
    return defect;
}

/* A side that never comes back out of the provider (or keeps getting a
 * completion now and then without finishing) ends here. */
static void on_alarm(int sig) {
    static const char m[] = "defect present: still not done after 60 s\n";
    (void)sig;
    if (write(1, m, sizeof(m) - 1) < 0) {
        _exit(1);
    }
    _exit(1);
}

int main(int argc, char **argv) {
    const char *prov = argc > 1 ? argv[1] : "udp;ofi_rxd";
    size_t q = argc > 2 ? strtoul(argv[2], NULL, 0) : 16;
    uint32_t count = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 0) : 2000;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    pid_t child = fork();
    if (child == 0) {
        alarm(60);
        exit(run(sv[1], prov, q, count, 1));
    }
    alarm(60);
    int rc = run(sv[0], prov, q, count, 0), st = 0;
    alarm(0);
    /* A side that stopped leaves the other waiting: it gives up after its
     * own 10 s without completions, or is ended. */
    for (long t0 = now_ms(); waitpid(child, &st, WNOHANG) == 0;) {
        if (now_ms() - t0 > 75000) {
            kill(child, SIGKILL);
            waitpid(child, &st, 0);
            break;
        }
        usleep(10000);
    }
    int crc = WIFEXITED(st) ? WEXITSTATUS(st) : rc ? 1 : 2;
    if (WIFSIGNALED(st) && !rc) {
        printf("%s rank 1: died of signal %d\n", prov, WTERMSIG(st));
        crc = 1;
    }
    rc = rc > crc ? rc : crc;
    printf("%s, queues %s, %u messages each way: %s\n", prov, q ? argv[2] : "default", count,
           rc == 0   ? "passed"
           : rc == 1 ? "defect present"
                     : "setup failed");
    return rc;
}
