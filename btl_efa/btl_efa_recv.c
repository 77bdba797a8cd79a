/*
 * btl_efa's receive path: every message (from the provider's receive pool
 * or an on-node ring) is checked (common/efa_btl_wire.h) and handed to its
 * handler: ob1's active-message callbacks, the emulated one-sided target
 * or initiator, the credit count.
 */
#include "btl_efa_lost.h"
#include "btl_efa_emul.h"
#include "btl_efa_ring.h"
#include "btl_efa_spread.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "opal/util/output.h"

/* A receive of the provider's pool failed: whatever it was to carry (an
 * active message, a one-sided request or answer, credits) is lost, and
 * nothing above retransmits it: ob1 would wait for ever for it.  Said
 * once, and the upper layer is told (ob1 ends the job; under ULFM it marks
 * the peer failed).  A cancelled
 * receive is the pool closing, nothing lost. */
static void receive_failed(mca_btl_efa_module_t *btl, int err) {
    static bool said = false;
    if (-FI_ECANCELED == err || btl->finalizing) {
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: receive failed: %s",
                            fi_strerror(-err));
        return;
    }
    if (!said) {
        said = true;
        mca_common_efa_show_help("help-btl-efa.txt", "message-lost", false,
                                 opal_process_info.nodename, fi_strerror(-err), err);
    }
    mca_btl_efa_fatal(btl, NULL, "btl_efa: a message through the provider was lost");
}

static inline void deliver_from(mca_btl_efa_module_t *btl, const void *buf, size_t len,
                                bool via_ring, fi_addr_t src, int32_t ring_in);

/* The receive hooks of the tests (btl_efa_debug_lose_recv, _flush_first)
 * on an arrival: the error it is to be taken as (0: none). */
static __attribute__((noinline)) int arrival_hooks(void *arg, efa_ctx_t *ctx) {
    static int arrivals = 0, first_arrivals = 0;
    const mca_btl_efa_test_hooks_t *t = &mca_btl_efa_component.test;
    if (t->flush_first > 0 && 0 == efa_ctx_rail(ctx) && ++first_arrivals == t->flush_first) {
        if (t->flush_lost) {
            return -FI_EIO; /* the flushed buffer held it */
        }
        /* as a NIC flushing its queue fails a posted buffer: nothing in it */
        mca_btl_efa_on_message(arg, ctx, NULL, 0, -FI_EIO, FI_ADDR_NOTAVAIL);
    }
    if (t->lose_recv > 0 && ++arrivals == t->lose_recv) {
        /* as ofi_rxd reports a message it lost part of; on a NIC beside
         * the first, as a NIC flushing its queue would (not a loss by
         * itself: the watch must find the gap) */
        return 0 == efa_ctx_rail(ctx) ? -FI_ETRUNC : -FI_EIO;
    }
    return 0;
}

void mca_btl_efa_on_message(void *arg, efa_ctx_t *ctx, void *buf, size_t len, int err,
                            fi_addr_t src) {
    mca_btl_efa_module_t *btl = arg;
    if (OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on) && 0 == err) {
        err = arrival_hooks(arg, ctx);
    }
    if (OPAL_UNLIKELY(err)) {
        if (!mca_btl_efa_spread_recv_failed(btl, ctx, err)) {
            receive_failed(btl, err);
        }
        return;
    }
    if (OPAL_UNLIKELY((len > 0 && (((uint8_t *)buf)[0] & EFA_BTL_MSG_SEQ)) ||
                      (ctx != btl->ctx && 0 != efa_ctx_rail(ctx)))) {
        /* Over a NIC beside the first, or failed over from one: the sender
         * is checked there, against its addresses on that NIC. */
        if (!mca_btl_efa_spread_arrival(btl, ctx, buf, &len, src)) {
            return;
        }
        src = FI_ADDR_NOTAVAIL;
    }
    deliver_from(btl, buf, len, false, src, 0);
}

/* Hand one active message up (kind: its parse; a truncated or mistagged
 * one is dropped here, with a word at verbose 1).  via_ring: from the
 * ring's poll, whose descriptor (btl->recv.ring_des) this thread holds. */
static inline __attribute__((always_inline)) void
deliver_am(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, efa_btl_wire_kind_t kind,
           const efa_btl_wire_msg_t *msg, bool via_ring) {
    if (!mca_btl_efa_upper_alive(btl, ep)) {
        return; /* nobody left to take it (see frag_finish) */
    }
    if (EFA_BTL_WIRE_AM_TRUNCATED == kind) {
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: truncated fragment dropped");
        return;
    }
    if (EFA_BTL_WIRE_AM_BAD_TAG == kind) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: fragment with tag %d (no such tag) dropped", msg->hdr.tag);
        return;
    }
    const mca_btl_active_message_callback_t *reg =
        &mca_btl_base_active_message_trigger[msg->hdr.tag];
    if (NULL == reg->cbfunc) {
        return;
    }
    if (via_ring) {
        btl->recv.ring_seg.seg_addr.pval = (void *)msg->payload;
        btl->recv.ring_seg.seg_len = msg->payload_len;
        mca_btl_efa_deliver_am_des(&btl->super, ep, msg->hdr.tag, &btl->recv.ring_des);
        return;
    }
    mca_btl_base_segment_t seg;
    seg.seg_addr.pval = (void *)msg->payload;
    seg.seg_len = msg->payload_len;
    mca_btl_efa_deliver_am(&btl->super, ep, msg->hdr.tag, &seg);
}

/* An answer through a ring (efa_btl_ring_resp_t: what a target writes
 * there, without data or with a small get's bytes), taken as the RESP it
 * stands for: a ring atomic's by its record, any other by the table of
 * operations in flight.  Each
 * field is read once from the slot.  false: not one (the general path
 * then drops a frame this short). */
static __attribute__((noinline)) bool ring_resp(mca_btl_efa_module_t *btl, const uint8_t *frame,
                                                int32_t ring_in) {
    efa_btl_ring_resp_t a;
    memcpy(&a, frame, sizeof(a));
    if (EFA_BTL_MSG_RING_RESP != a.type) {
        return false;
    }
    /* (it names no sender: the ring it came by says who wrote it) */
    const mca_btl_efa_answer_from_t from = {.ep = NULL, .ring_in = ring_in};
    if (mca_btl_efa_ring_atomic_id(a.req)) {
        mca_btl_efa_ring_atomic_answer(btl, a.req, a.status, a.operand, &from);
        return true;
    }
    /* A get's bytes are checked against its request by on_response; more
     * than operand holds fails the operation. */
    const bool data_ok = a.data <= sizeof(a.operand);
    const efa_btl_rma_t rma = {.req = a.req,
                               .offset = a.offset,
                               .len = a.len,
                               .operand = a.operand,
                               .status = data_ok ? a.status : OPAL_ERR_BAD_PARAM};
    mca_btl_efa_emul_on_response(btl, &from, &rma, data_ok && 0 != a.data ? &a.operand : NULL,
                                 data_ok ? a.data : 0);
    return true;
}

/* A request in one line through a ring (efa_btl_ring_req_t: an atomic
 * from btl_efa_ring_atomic.c, a small put or get from btl_efa_ring_rma.c),
 * taken before the general parse: the other half of an on-node atomic's,
 * put's or get's latency (the answer's is ring_resp).  Its fields are read once,
 * into a copy; the sender it names is looked up as the general path does;
 * the target's table checks the rest (efa_emul_execute).  false: not one
 * (the general path then parses the frame). */
static void unknown_sender(uint64_t name);

static __attribute__((noinline)) bool ring_request(mca_btl_efa_module_t *btl, uint8_t *frame,
                                                   int32_t ring_in) {
    efa_btl_ring_req_t q;
    memcpy(&q, frame, sizeof(q));
    if (EFA_BTL_MSG_RING_ATOMIC != q.type && EFA_BTL_MSG_RING_PUT != q.type &&
        EFA_BTL_MSG_RING_GET != q.type) {
        return false;
    }
    mca_btl_efa_endpoint_t *ep = btl->recv.last_src;
    if (NULL == ep || mca_btl_efa_name_key(&ep->name) != q.src) {
        ep = mca_btl_efa_endpoint_by_name(btl, q.src, NULL);
        btl->recv.last_src = ep;
    }
    if (NULL == ep) {
        unknown_sender(q.src); /* (said once, as the general path's) */
        return true;
    }
    if (ep->ring_in != ring_in && !mca_btl_efa_ring_sender_ok(btl, ep, ring_in)) {
        return true; /* (taken: not parsed again as a message) */
    }
    mca_btl_efa_emul_ring_request(btl, ep, &q,
                                  (uint32_t *)(frame + offsetof(efa_btl_ring_req_t, claim)));
    return true;
}

/* A ring frame comes with no provider's word on who wrote it.  Called by
 * the inbox's poll below, one thread at a time. */
static inline __attribute__((always_inline)) bool ring_frame(void *arg, uint32_t ring, void *frame,
                                                             size_t len) {
    mca_btl_efa_module_t *btl = arg;
    const int32_t ring_in = (int32_t)(btl->ring.first + ring) + 1;
    ++btl->ring.received;
    /* (the length alone on the message path) */
    if (OPAL_UNLIKELY(sizeof(efa_btl_ring_resp_t) == len) && ring_resp(btl, frame, ring_in)) {
        return true;
    }
    if (OPAL_UNLIKELY(sizeof(efa_btl_ring_req_t) == len) && ring_request(btl, frame, ring_in)) {
        return true;
    }
    deliver_from(btl, frame, len, true, FI_ADDR_NOTAVAIL, ring_in);
    return true;
}

/* The inbox's poll loop itself runs here (efa_ring_consume, inlined), with
 * ring_frame and the whole dispatch inlined into it: no call into the
 * core and no indirect call per frame. */
int mca_btl_efa_ring_poll(mca_btl_efa_module_t *btl) {
    return efa_ring_consume(btl->ring.consumer, btl->ring.first, btl->ring.count, ring_frame, btl,
                            EFA_BTL_RING_BUDGET);
}

/* A message naming a sender no endpoint can be made for: dropped, said
 * once (a same-user process writing a ring, or one not of this job). */
static void unknown_sender(uint64_t name) {
    static bool said = false;
    if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED)) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: a message naming no process of this job (0x%" PRIx64
                            ") was dropped, and any more such",
                            name);
    }
}

/* src: the provider's source of the message (efa_cqe_t.src), checked
 * against the sender the header names before anything of it is believed:
 * its credits, its fragments, its one-sided requests and answers.  Inlined
 * into its two callers: the ring's copy, with via_ring and src constant,
 * loses the provider's checks and the stack descriptor (a third of the
 * BTL's own cost of an on-node message). */
static inline __attribute__((always_inline)) void deliver_from(mca_btl_efa_module_t *btl,
                                                               const void *buf, size_t len,
                                                               bool via_ring, fi_addr_t src,
                                                               int32_t ring_in) {
    /* Lengths and type are checked by efa_btl_wire_parse (common/
     * efa_btl_wire.h, fuzzed), which reads each header once, into a copy:
     * a ring slot is the sender's memory too, and a length checked must be
     * the length used. */
    efa_btl_wire_msg_t msg;
    const efa_btl_wire_kind_t kind = efa_btl_wire_parse(buf, len, MCA_BTL_TAG_MAX, &msg);
    if (EFA_BTL_WIRE_SHORT == kind) {
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: short message dropped");
        return;
    }
    const efa_btl_hdr_t *hdr = &msg.hdr;
    mca_btl_efa_endpoint_t *ep = btl->recv.last_src;
    if (NULL == ep || mca_btl_efa_name_key(&ep->name) != hdr->src) {
        ep = mca_btl_efa_endpoint_by_name(btl, hdr->src, NULL);
        btl->recv.last_src = ep;
    }
    if (OPAL_UNLIKELY(NULL == ep)) {
        /* It names no process this one can reach (none of the job's, or
         * forged): ob1 would match it by its own header as a peer's. */
        unknown_sender(hdr->src);
        return;
    }
    if (via_ring) {
        if (OPAL_UNLIKELY(ep->ring_in != ring_in) &&
            !mca_btl_efa_ring_sender_ok(btl, ep, ring_in)) {
            return; /* written in another process's ring: dropped */
        }
    } else if (!efa_core_source_ok(btl->core, src, ep->addr, "a btl_efa message")) {
        return; /* another process wrote it: dropped (the core counts and says so) */
    }
    mca_btl_efa_note_received(btl, ep, hdr, via_ring);
    if (OPAL_LIKELY(EFA_BTL_WIRE_AM == kind)) { /* nearly every message: no jump table */
        deliver_am(btl, ep, kind, &msg, via_ring);
        return;
    }
    switch (kind) {
    case EFA_BTL_WIRE_AM:
    case EFA_BTL_WIRE_AM_TRUNCATED:
    case EFA_BTL_WIRE_AM_BAD_TAG:
        deliver_am(btl, ep, kind, &msg, via_ring);
        return;
    case EFA_BTL_WIRE_BATCH: {
        /* Messages packed by the sender's coalescing (btl_efa_batch.c),
         * handed up in the order they were sent. */
        size_t off = 0;
        efa_btl_wire_kind_t entry;
        efa_btl_wire_msg_t one;
        while (efa_btl_wire_batch_next(msg.payload, msg.payload_len, &off, MCA_BTL_TAG_MAX, &entry,
                                       &one)) {
            if (EFA_BTL_WIRE_BATCH_BAD_ENTRY == entry) {
                opal_output_verbose(1, mca_common_efa_output,
                                    "btl:efa: malformed entry in a batch: it and the rest of "
                                    "the batch dropped");
                return;
            }
            deliver_am(btl, ep, entry, &one, via_ring);
        }
        return;
    }
    case EFA_BTL_WIRE_BATCH_TRUNCATED:
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: truncated batch dropped");
        return;
    case EFA_BTL_WIRE_SHORT_REQUEST:
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: short request dropped");
        return;
    case EFA_BTL_WIRE_TRUNCATED_REQUEST:
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: truncated request dropped");
        return;
    case EFA_BTL_WIRE_REQUEST:
        /* A request its initiator may take back (btl_efa_ring_rma.c) is
         * started only once this side has taken it, in the slot itself. */
        mca_btl_efa_emul_on_request(btl, ep, hdr, &msg.rma, msg.payload,
                                    via_ring && EFA_BTL_CLAIM_NONE != msg.rma.claim
                                        ? efa_btl_wire_claim_word((void *)buf)
                                        : NULL);
        return;
    case EFA_BTL_WIRE_RESPONSE: {
        const mca_btl_efa_answer_from_t from = {.ep = ep, .ring_in = 0};
        mca_btl_efa_emul_on_response(btl, &from, &msg.rma, msg.payload, msg.payload_len);
        return;
    }
    case EFA_BTL_WIRE_UNKNOWN_TYPE:
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: unknown message type %d dropped",
                            hdr->type);
        return;
    case EFA_BTL_WIRE_CREDIT:
        if (OPAL_UNLIKELY(EFA_BTL_CREDIT_ASK == hdr->tag)) {
            mca_btl_efa_spread_tell(btl, ep); /* (a NIC of the peer's flushed) */
        }
        return;
    default: /* SHORT (above): nothing more to do */
        return;
    }
}
