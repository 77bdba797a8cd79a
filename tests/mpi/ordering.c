/*
 * ordering: MPI's non-overtaking rule with several senders and wildcards.
 *
 * Every rank other than 0 sends COUNT messages to rank 0 in each phase. Each
 * message starts with a header (sender, sequence number, phase) followed by a
 * verified pattern; sizes vary, and every 50th message is large (>64 KiB)
 * so that eager and rendezvous protocols are mixed. Rank 0 checks every
 * match against an oracle: the message a receive gets must be the earliest
 * not yet received message from that sender whose tag fits the receive.
 *
 *   phase 0 "anysource":  blocking MPI_ANY_SOURCE/MPI_ANY_TAG receives;
 *                          senders mix MPI_Send and MPI_Isend.
 *   phase 1 "preposted":   rank 0 pre-posts all ANY_SOURCE/ANY_TAG receives
 *                          before the senders start (at most 250 messages
 *                          per sender, as each receive needs a full buffer).
 *   phase 2 "mixed":       receives with a pseudo-random mix of specific and
 *                          wildcard source and tag (senders use MPI_Isend).
 *
 * Options: -n COUNT messages per sender per phase (default 1000).
 */
#include "test_util.h"

#define NTAGS 3
#define LARGE 65536
#define HDR 16
#define PREPOSTED_MAX 250

struct hdr {
    int32_t sender;
    int32_t seq;
    int32_t phase;
    int32_t pad;
};

static const char *phase_name[] = {"anysource", "preposted", "mixed"};

static size_t msg_size(int k) {
    if (k % 50 == 49)
        return HDR + LARGE + (size_t)k;
    return HDR + (size_t)(k * 13 % 200);
}

static int msg_tag(int sender, int k) {
    return 1 + (k * 7 + sender) % NTAGS;
}

/* The pre-posted phase needs a full-size buffer per receive: fewer messages. */
static int phase_count(int phase, int count) {
    return phase == 1 && count > PREPOSTED_MAX ? PREPOSTED_MAX : count;
}

static uint64_t msg_seed(int phase, int sender, int k) {
    return tu_seed(phase, sender, k, 3);
}

/* Sender side: send COUNT messages to rank 0. */
static void send_phase(int phase, int count, char **bufs, MPI_Request *reqs) {
    int k, nreq = 0;

    for (k = 0; k < count; k++) {
        size_t size = msg_size(k);
        struct hdr h = {tu_rank, k, phase, 0};

        memcpy(bufs[k], &h, sizeof(h));
        tu_fill(bufs[k] + HDR, size - HDR, msg_seed(phase, tu_rank, k));
    }
    if (phase == 1)
        MPI_Barrier(MPI_COMM_WORLD); /* rank 0 has pre-posted everything */
    for (k = 0; k < count; k++) {
        int tag = msg_tag(tu_rank, k);
        int size = (int)msg_size(k);

        if (phase == 0 && k % 2 == 0)
            MPI_Send(bufs[k], size, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
        else
            MPI_Isend(bufs[k], size, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &reqs[nreq++]);
    }
    MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE);
}

/* Receiver-side bookkeeping: which messages of each sender were received. */
struct oracle {
    int count;
    char *done;  /* [sender][k] */
    int *low;    /* first not-yet-received k per sender */
    int *remain; /* [sender][tag] messages left */
};

static void oracle_reset(struct oracle *o) {
    int s, t;

    memset(o->done, 0, (size_t)tu_size * o->count);
    for (s = 0; s < tu_size; s++) {
        o->low[s] = 0;
        for (t = 0; t <= NTAGS; t++)
            o->remain[s * (NTAGS + 1) + t] = 0;
    }
    for (s = 1; s < tu_size; s++)
        for (t = 0; t < o->count; t++)
            o->remain[s * (NTAGS + 1) + msg_tag(s, t)]++;
}

/* Check one received message against the oracle and mark it received. */
static void oracle_check(struct oracle *o, int phase, const char *buf, MPI_Status *st, int want_src,
                         int want_tag) {
    struct hdr h;
    int s = st->MPI_SOURCE, k, expect = -1, got_count;
    char what[160];

    TU_ASSERT(s >= 1 && s < tu_size, "phase %s: bad status source %d", phase_name[phase], s);
    TU_ASSERT(want_src == MPI_ANY_SOURCE || s == want_src,
              "phase %s: receive for source %d matched source %d", phase_name[phase], want_src, s);
    TU_ASSERT(want_tag == MPI_ANY_TAG || st->MPI_TAG == want_tag,
              "phase %s: receive for tag %d matched tag %d", phase_name[phase], want_tag,
              st->MPI_TAG);
    MPI_Get_count(st, MPI_BYTE, &got_count);
    TU_ASSERT(got_count >= HDR, "phase %s: message from %d too short (%d bytes)", phase_name[phase],
              s, got_count);
    memcpy(&h, buf, sizeof(h));
    TU_ASSERT(h.sender == s && h.phase == phase,
              "phase %s: header says sender %d phase %d, status says source %d", phase_name[phase],
              h.sender, h.phase, s);
    for (k = o->low[s]; k < o->count; k++) {
        if (!o->done[s * o->count + k] && (want_tag == MPI_ANY_TAG || msg_tag(s, k) == want_tag)) {
            expect = k;
            break;
        }
    }
    TU_ASSERT(h.seq == expect,
              "phase %s: from sender %d (receive tag %d) expected seq %d got seq %d: message "
              "overtaken",
              phase_name[phase], s, want_tag, expect, h.seq);
    k = h.seq;
    snprintf(what, sizeof(what), "phase %s message %d from %d", phase_name[phase], k, s);
    TU_ASSERT(st->MPI_TAG == msg_tag(s, k), "%s: tag expected %d got %d", what, msg_tag(s, k),
              st->MPI_TAG);
    TU_ASSERT((size_t)got_count == msg_size(k), "%s: count expected %zu got %d", what, msg_size(k),
              got_count);
    tu_verify(buf + HDR, msg_size(k) - HDR, msg_seed(phase, s, k), what);
    o->done[s * o->count + k] = 1;
    o->remain[s * (NTAGS + 1) + st->MPI_TAG]--;
    while (o->low[s] < o->count && o->done[s * o->count + o->low[s]])
        o->low[s]++;
}

static void recv_phase(int phase, struct oracle *o, char *rbuf, size_t max, MPI_Request *reqs) {
    int total = (tu_size - 1) * o->count, i;
    MPI_Status st;
    uint64_t rnd = 12345;

    oracle_reset(o);
    if (phase == 0) {
        for (i = 0; i < total; i++) {
            MPI_Recv(rbuf, (int)max, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            oracle_check(o, phase, rbuf, &st, MPI_ANY_SOURCE, MPI_ANY_TAG);
        }
    } else if (phase == 1) {
        MPI_Status *sts = tu_malloc(sizeof(*sts) * total);

        for (i = 0; i < total; i++)
            MPI_Irecv(rbuf + (size_t)i * max, (int)max, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                      MPI_COMM_WORLD, &reqs[i]);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Waitall(total, reqs, sts);
        /* receives are matched in the order they were posted */
        for (i = 0; i < total; i++)
            oracle_check(o, phase, rbuf + (size_t)i * max, &sts[i], MPI_ANY_SOURCE, MPI_ANY_TAG);
        free(sts);
    } else {
        for (i = 0; i < total; i++) {
            int src = MPI_ANY_SOURCE, tag = MPI_ANY_TAG, s, t, tries;

            rnd = tu_mix64(rnd);
            if (rnd % 3 == 0) {
                /* specific source, only if it still has messages */
                for (tries = 0; tries < tu_size; tries++) {
                    s = 1 + (int)(((rnd >> 8) + (uint64_t)tries) % (uint64_t)(tu_size - 1));
                    if (o->low[s] < o->count) {
                        src = s;
                        break;
                    }
                }
            }
            if ((rnd >> 4) % 3 != 0) {
                /* specific tag, only if a matching message is left */
                for (t = 1 + (int)((rnd >> 16) % NTAGS), tries = 0; tries < NTAGS; tries++) {
                    int left = 0;

                    for (s = 1; s < tu_size; s++)
                        if (src == MPI_ANY_SOURCE || s == src)
                            left += o->remain[s * (NTAGS + 1) + t];
                    if (left > 0) {
                        tag = t;
                        break;
                    }
                    t = t % NTAGS + 1;
                }
            }
            MPI_Recv(rbuf, (int)max, MPI_BYTE, src, tag, MPI_COMM_WORLD, &st);
            oracle_check(o, phase, rbuf, &st, src, tag);
        }
    }
}

int main(int argc, char **argv) {
    int count = 1000, phase, k;
    size_t max;
    double t0;

    tu_init(&argc, &argv, "ordering");
    tu_parse_count_size(argc, argv, "[-n COUNT]", &count, NULL);
    TU_ASSERT(tu_size >= 2, "needs at least 2 ranks, got %d", tu_size);
    TU_ASSERT(count >= 1, "COUNT must be positive");
    max = 0;
    for (k = 0; k < count; k++)
        max = msg_size(k) > max ? msg_size(k) : max;
    t0 = MPI_Wtime();

    if (tu_rank == 0) {
        int total = (tu_size - 1) * count;
        struct oracle o;
        MPI_Request *reqs = tu_malloc(sizeof(*reqs) * total);
        /* phase 1 needs a maximum-size buffer per pre-posted receive */
        char *rbuf = tu_malloc(max * (size_t)(tu_size - 1) * phase_count(1, count));

        o.count = count;
        o.done = tu_malloc((size_t)tu_size * count);
        o.low = tu_malloc(sizeof(int) * tu_size);
        o.remain = tu_malloc(sizeof(int) * tu_size * (NTAGS + 1));
        for (phase = 0; phase < 3; phase++) {
            o.count = phase_count(phase, count);
            recv_phase(phase, &o, rbuf, max, reqs);
            MPI_Barrier(MPI_COMM_WORLD);
        }
        free(o.done);
        free(o.low);
        free(o.remain);
        free(rbuf);
        free(reqs);
    } else {
        char **bufs = tu_malloc(sizeof(*bufs) * count);
        MPI_Request *reqs = tu_malloc(sizeof(*reqs) * count);

        for (k = 0; k < count; k++)
            bufs[k] = tu_malloc(msg_size(k));
        for (phase = 0; phase < 3; phase++) {
            send_phase(phase, phase_count(phase, count), bufs, reqs);
            MPI_Barrier(MPI_COMM_WORLD);
        }
        for (k = 0; k < count; k++)
            free(bufs[k]);
        free(bufs);
        free(reqs);
    }

    tu_ok("np=%d senders=%d count=%d per sender per phase phases=anysource,preposted,mixed "
          "time=%.2fs",
          tu_size, tu_size - 1, count, MPI_Wtime() - t0);
    return 0;
}
