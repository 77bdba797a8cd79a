/*
 * btl_efa's receive side of messages over several NICs (btl_efa_spread.h):
 * a numbered message's sender checked on the NIC it came in on, a second
 * copy dropped by its number, a gap the watch ends the job on, a receive
 * failed on a NIC beside the first.
 */
#include "btl_efa_spread.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "opal/util/output.h"

#include "efa_seq_window.h"

/* What this process saw of a peer's numbered messages, and since when
 * (gap_since, 0: no gap) the lowest one missing (gap_base) has been
 * missing while later ones came. */
struct efa_btl_seen {
    efa_seq_window_t window;
    double gap_since;
    uint64_t gap_base;
    bool gap_said; /* the job was told (once) */
};

/* Did src, a source the provider reported on NIC 'rail' (> 0) of the set,
 * come from ep?  Its addresses on that NIC, in that NIC's own table, are
 * the ones to compare (the core's check knows the first NIC's table
 * alone). */
static bool rail_source_ok(const mca_btl_efa_module_t *btl, const mca_btl_efa_endpoint_t *ep,
                           int rail, fi_addr_t src) {
    if (FI_ADDR_NOTAVAIL == src) {
        return true; /* the provider does not say: nothing to check */
    }
    if (rail < ep->peer->num_rails) {
        for (int i = 0; i < ep->peer->num_addrs; ++i) {
            if (ep->peer->addr[rail * btl->spread.nctx + i] == src) {
                return true;
            }
        }
    }
    return false;
}

/* A message over NIC 'rail' not from the process it names, or without a
 * number there: dropped, counted, said once. */
static bool drop_forged(mca_btl_efa_module_t *btl, int rail) {
    OPAL_THREAD_LOCK(&btl->lock);
    const bool first = 0 == btl->spread.forged++;
    OPAL_THREAD_UNLOCK(&btl->lock);
    if (first) {
        opal_output_verbose(0, mca_common_efa_output,
                            "btl:efa: a message over NIC %d of the set did not come from an "
                            "address of the process it names, or came unnumbered: dropped (said "
                            "once)",
                            rail);
    }
    return false;
}

bool mca_btl_efa_spread_arrival(mca_btl_efa_module_t *btl, efa_ctx_t *ctx, uint8_t *buf,
                                size_t *len, fi_addr_t src) {
    const int rail = efa_ctx_rail(ctx);
    if (0 == *len || 0 == (buf[0] & EFA_BTL_MSG_SEQ)) {
        /* Unnumbered over a NIC beside the first: no sender of ours sends
         * that; its source cannot be checked against the first NIC's. */
        return 0 == rail || drop_forged(btl, rail);
    }
    if (*len < sizeof(efa_btl_hdr_t) + EFA_BTL_SEQ_BYTES) {
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: short message dropped");
        return false;
    }
    efa_btl_hdr_t hdr;
    uint64_t seq;
    memcpy(&hdr, buf, sizeof(hdr));
    memcpy(&seq, buf + *len - EFA_BTL_SEQ_BYTES, sizeof(seq));
    mca_btl_efa_endpoint_t *ep = mca_btl_efa_endpoint_by_name(btl, hdr.src, NULL);
    if (NULL == ep) {
        return false;
    }
    if (0 == rail ? !efa_core_source_ok(btl->core, src, ep->addr, "a btl_efa message")
                  : !rail_source_ok(btl, ep, rail, src) && !drop_forged(btl, rail)) {
        return false;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    bool copy = true;
    if (NULL == ep->seen && NULL != (ep->seen = malloc(sizeof(*ep->seen)))) {
        efa_seq_window_init(&ep->seen->window);
        ep->seen->gap_since = 0;
        ep->seen->gap_said = false;
    }
    if (ep->seen) {
        const uint64_t skipped = ep->seen->window.skipped;
        copy = efa_seq_window_seen(&ep->seen->window, seq);
        if (OPAL_UNLIKELY(ep->seen->window.skipped != skipped)) {
            /* The one given up is lost (its copy, should it come, would be
             * taken for one): the watch's next sweep ends the job. */
            opal_output_verbose(1, mca_common_efa_output,
                                "btl:efa: a peer's message came %d numbers past one not "
                                "arrived yet, which is taken as lost",
                                EFA_SEQ_WINDOW_BITS);
        }
    } else {
        /* No memory to remember it: nothing can say whether it is a
         * copy, and a copy taken twice by ob1 would be worse than one
         * lost (ob1 waits; the peer timeout does not end that). */
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: no memory for a peer's record of messages over several "
                            "NICs: its message dropped");
    }
    if (copy && ep->seen) {
        ++btl->spread.duplicates;
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    if (copy) {
        return false;
    }
    buf[0] &= (uint8_t)~EFA_BTL_MSG_SEQ;
    *len -= EFA_BTL_SEQ_BYTES;
    return true;
}

/* A message that left a gap is sent again over another NIC once its
 * sender's send fails, which the sender's peer deadline bounds: a gap
 * that outlives two deadlines is a message lost (a receive that failed on
 * a NIC beside the first, or one that completed into a dying link's
 * socket), and ob1 would wait for it for ever. */
bool mca_btl_efa_spread_gap_expired(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                    double now, double timeout) {
    struct efa_btl_seen *seen = ep->seen;
    (void)btl;
    if (NULL == seen || seen->gap_said) {
        return false;
    }
    /* A number the window gave up on (4096 later ones came) is lost too. */
    bool lost = 0 != seen->window.skipped;
    if (!lost && !efa_seq_window_gap(&seen->window)) {
        seen->gap_since = 0;
        return false;
    }
    if (!lost && (0 == seen->gap_since || seen->gap_base != seen->window.base)) {
        seen->gap_since = now;
        seen->gap_base = seen->window.base;
        return false;
    }
    lost = lost || now - seen->gap_since > 2 * timeout;
    seen->gap_said = lost;
    return lost;
}

/* May a receive failed on the first NIC be that NIC's flush?  Where every
 * message there is numbered (every process of the job numbers, no peer of
 * another job), the first NIC can be left for a peer (the core's rule:
 * several NICs, rail failover, nothing pinned to it) and the watch finds
 * gaps.  Its senders' sends fail too and go again over another NIC; one
 * it lost although sent leaves a gap. */
static bool first_flush_survivable(const mca_btl_efa_module_t *btl) {
    return btl->mode.job_numbers && 0 == btl->spread.foreign && btl->watch.period > 0 &&
           efa_core_rail0_fails_over(btl->core);
}

bool mca_btl_efa_spread_recv_failed(mca_btl_efa_module_t *btl, efa_ctx_t *ctx, int err) {
    if (NULL == ctx || -FI_ETRUNC == err || -FI_ECANCELED == err) {
        return false;
    }
    const bool first = 0 == efa_ctx_rail(ctx);
    if (first && !first_flush_survivable(btl)) {
        return false;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    ++btl->spread.recv_failed;
    btl->spread.recv_failed_first += first ? 1 : 0;
    btl->spread.ask_due = true;
    OPAL_THREAD_UNLOCK(&btl->lock);
    if (first) {
        efa_core_rail0_flushed(btl->core, "btl:efa", err);
    }
    return true;
}

void mca_btl_efa_spread_fini_ep(mca_btl_efa_endpoint_t *ep) {
    free(ep->seen);
    ep->seen = NULL;
}
