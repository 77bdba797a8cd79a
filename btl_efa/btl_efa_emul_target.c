/*
 * btl_efa's emulated one-sided operations, the target's side (the
 * protocol: btl_efa_emul.h): a peer's put, get or atomic request goes to
 * common's target (efa_emul_target.h: the check against this process's own
 * table of registrations, and the execution), and is answered.  A refused
 * request is answered with an error and writes nothing.  The answer is a
 * message (EFA_BTL_MSG_RESP): the target never calls into the initiator's
 * code, even for its own requests.  The initiator's side: btl_efa_emul.c.
 */
#include "btl_efa_emul.h"
#include "btl_efa_ring.h"

#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"
#include "opal/util/show_help.h"

static void report_refusal(mca_btl_efa_module_t *btl, int type, uint64_t src, uint64_t addr,
                           uint64_t len, uint64_t key, const char *why) {
    if (btl->refused++ >= 10) {
        return;
    }
    opal_process_name_t name;
    memcpy(&name, &src, sizeof(name));
    char range[128], keystr[32];
    snprintf(range, sizeof(range), "0x%llx (%llu bytes)", (unsigned long long)addr,
             (unsigned long long)len);
    snprintf(keystr, sizeof(keystr), "%llu", (unsigned long long)key);
    char *text = opal_show_help_string("help-btl-efa.txt", "rma-refused", false,
                                       opal_process_info.nodename, mca_btl_efa_emul_type_name(type),
                                       OPAL_NAME_PRINT(name), range, keystr, why);
    if (text) {
        fputs(text, stderr);
        fflush(stderr);
        free(text);
    }
}

/* The codes as the core (common/include/efa_btl_wire.h) reads them. */
_Static_assert(EFA_BTL_WIRE_ATOMIC_32BIT == MCA_BTL_ATOMIC_FLAG_32BIT, "32-bit atomic flag");
_Static_assert(EFA_BTL_WIRE_ATOMIC_FLOAT == MCA_BTL_ATOMIC_FLAG_FLOAT, "float atomic flag");
_Static_assert(EFA_BTL_WIRE_OP_ADD == MCA_BTL_ATOMIC_ADD &&
                   EFA_BTL_WIRE_OP_AND == MCA_BTL_ATOMIC_AND &&
                   EFA_BTL_WIRE_OP_OR == MCA_BTL_ATOMIC_OR &&
                   EFA_BTL_WIRE_OP_XOR == MCA_BTL_ATOMIC_XOR,
               "atomic op codes");
_Static_assert(EFA_BTL_WIRE_OP_LAND == MCA_BTL_ATOMIC_LAND &&
                   EFA_BTL_WIRE_OP_LOR == MCA_BTL_ATOMIC_LOR &&
                   EFA_BTL_WIRE_OP_LXOR == MCA_BTL_ATOMIC_LXOR &&
                   EFA_BTL_WIRE_OP_SWAP == MCA_BTL_ATOMIC_SWAP,
               "atomic op codes");
_Static_assert(EFA_BTL_WIRE_OP_MIN == MCA_BTL_ATOMIC_MIN &&
                   EFA_BTL_WIRE_OP_MAX == MCA_BTL_ATOMIC_MAX,
               "atomic op codes");
_Static_assert(EFA_BTL_WIRE_ACCESS_REMOTE_READ == MCA_BTL_REG_FLAG_REMOTE_READ &&
                   EFA_BTL_WIRE_ACCESS_REMOTE_WRITE == MCA_BTL_REG_FLAG_REMOTE_WRITE &&
                   EFA_BTL_WIRE_ACCESS_REMOTE_ATOMIC == MCA_BTL_REG_FLAG_REMOTE_ATOMIC,
               "remote access flags");

static int status_of(efa_emul_verdict_t v) {
    switch (v) {
    case EFA_EMUL_DONE:
        return OPAL_SUCCESS;
    case EFA_EMUL_UNSUPPORTED_OP:
    case EFA_EMUL_DEVICE_ATOMIC:
        return OPAL_ERR_NOT_SUPPORTED;
    case EFA_EMUL_DEVICE_COPY_FAILED:
        return OPAL_ERROR;
    case EFA_EMUL_MISALIGNED:
        return OPAL_ERR_BAD_PARAM;
    default:
        return OPAL_ERR_PERM;
    }
}

/* A request the target's table did not execute (verdict v): said, and its
 * status for the answer. */
static int refused(mca_btl_efa_module_t *btl, int type, uint64_t src, const efa_btl_rma_t *rma,
                   efa_emul_verdict_t v) {
    const bool atomic = EFA_BTL_MSG_PUT != type && EFA_BTL_MSG_GET != type;
    if (EFA_EMUL_DEVICE_ATOMIC == v || EFA_EMUL_DEVICE_COPY_FAILED == v) {
        /* Not a wrong request: a limit of this path, or the device's
         * error (the range's bytes are then the device's to say). */
        static bool said[2] = {false, false};
        const int k = EFA_EMUL_DEVICE_COPY_FAILED == v;
        if (!__atomic_exchange_n(&said[k], true, __ATOMIC_RELAXED)) {
            opal_output(0, "btl:efa: a %s of %llu bytes at 0x%llx in device memory fails: %s",
                        mca_btl_efa_emul_type_name(type), (unsigned long long)rma->len,
                        (unsigned long long)rma->addr, efa_emul_verdict_text(v));
        }
    } else {
        uint64_t len = rma->len;
        if (atomic) {
            (void)efa_btl_wire_atomic_extent(rma->addr, rma->flags, &len);
        }
        report_refusal(btl, type, src, rma->addr, len, rma->key, efa_emul_verdict_text(v));
    }
    return status_of(v);
}

/* See btl_efa_emul.h. */
int mca_btl_efa_emul_execute(mca_btl_efa_module_t *btl, int type, uint64_t src,
                             const efa_btl_rma_t *rma, const void *in, void *out,
                             uint64_t *result) {
    const bool atomic = EFA_BTL_MSG_PUT != type && EFA_BTL_MSG_GET != type;
    if (atomic && btl->mode.native_atomics) {
        /* This job's atomics go through the provider, which need not be
         * atomic with respect to this CPU's: only a process that did not
         * agree with the job (another job's) sends these. */
        report_refusal(btl, type, src, rma->addr, rma->len, rma->key,
                       "this job executes atomics by the provider (btl_efa_atomic_mode)");
        return OPAL_ERR_NOT_SUPPORTED;
    }
    const efa_emul_verdict_t v =
        efa_emul_execute(btl->reg.table, (uint8_t)type, rma, in, out, result);
    return EFA_EMUL_DONE == v ? OPAL_SUCCESS : refused(btl, type, src, rma, v);
}

/* An answer without data (to a put, an atomic, or a refusal), or with a
 * small get's data_len bytes in rr->operand, straight into the ring to ep
 * in one cache line (efa_btl_ring_resp_t), when it goes by ring and
 * nothing waits for ep before it: false otherwise (the caller sends it as
 * a fragment). */
static bool answer_in_ring(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                           const efa_btl_rma_t *rr, size_t data_len) {
    const efa_btl_ring_resp_t ans = {.type = EFA_BTL_MSG_RING_RESP,
                                     .data = (uint8_t)data_len,
                                     .status = rr->status,
                                     .req = rr->req,
                                     .operand = rr->operand,
                                     .offset = rr->offset,
                                     .len = rr->len};
    if (!mca_btl_efa_via_ring(btl, ep, sizeof(ans))) {
        return false;
    }
    bool done = false;
    OPAL_THREAD_LOCK(&btl->lock);
    uint8_t *f = NULL == ep->flow.head ? efa_ring_reserve(ep->ring_out, sizeof(ans)) : NULL;
    if (NULL != f) {
        memcpy(f, &ans, sizeof(ans));
        efa_ring_commit(ep->ring_out, sizeof(ans));
        ++btl->ring.sent;
        done = true;
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    return done;
}

static void send_answer(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, efa_btl_frag_t *frag,
                        const efa_btl_hdr_t *rh, const efa_btl_rma_t *rr, size_t data_len);

_Static_assert(EFA_RING_SLOT_HEADER + sizeof(efa_btl_ring_resp_t) <= EFA_RING_LINE,
               "an answer through a ring fits one cache line with its slot's header");

_Static_assert(EFA_RING_SLOT_HEADER + sizeof(efa_btl_ring_req_t) <= EFA_RING_LINE,
               "a request in one line fits one cache line with its slot's header");

/* See btl_efa_emul.h.  An atomic is taken, executed and answered straight
 * into ep's ring here; a put, and an atomic this path does not serve, go
 * to the general target as the header and rma block they stand for. */
void mca_btl_efa_emul_ring_request(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                   const efa_btl_ring_req_t *q, uint32_t *claim) {
    efa_btl_hdr_t hdr;
    efa_btl_rma_t rma;
    if (!efa_btl_wire_ring_req_unpack(q, &hdr, &rma)) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: malformed request (type %d, length %d) dropped", q->type,
                            q->flags);
        return;
    }
    /* (native atomics: the general path refuses it, and says so) */
    if (EFA_BTL_MSG_ATOMIC != hdr.type ||
        OPAL_UNLIKELY(NULL == ep || btl->finalizing || ep->lost ||
                      mca_btl_efa_component.test_hooks_on) ||
        btl->mode.native_atomics || EFA_BTL_RING_ATTACHED != ep->ring_state) {
        mca_btl_efa_emul_on_request(btl, ep, &hdr, &rma, &q->operand, claim);
        return;
    }
    if (!efa_btl_wire_claim_move(claim, EFA_BTL_CLAIM_TAKEN)) {
        return; /* taken back by its initiator: dropped */
    }
    uint64_t result = 0;
    const efa_emul_verdict_t v =
        efa_emul_execute(btl->reg.table, EFA_BTL_MSG_ATOMIC, &rma, NULL, NULL, &result);
    const int status = OPAL_LIKELY(EFA_EMUL_DONE == v)
                           ? OPAL_SUCCESS
                           : refused(btl, EFA_BTL_MSG_ATOMIC, hdr.src, &rma, v);
    efa_emul_count_request(OPAL_SUCCESS == status);
    const efa_btl_hdr_t rh = {.type = EFA_BTL_MSG_RESP, .src = btl->my_name};
    const efa_btl_rma_t rr = {.req = rma.req, .len = rma.len, .operand = result, .status = status};
    send_answer(btl, ep, NULL, &rh, &rr, 0);
}

/* The test setting debug_lose_answers 4: before its own answer, answers
 * (without data) to the few ids below the request's, as a process of the
 * job guessing the initiator's other operations would.  The initiator
 * must drop each that names an operation sent to another process. */
static void forge_answers(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                          const efa_btl_hdr_t *rh, const efa_btl_rma_t *rr) {
    efa_btl_hdr_t fh = *rh;
    fh.len = 0;
    for (uint64_t k = 1; k <= 4 && k < rr->req; ++k) {
        efa_btl_rma_t fr = *rr;
        fr.req = rr->req - k;
        fr.operand = 0;
        send_answer(btl, ep, NULL, &fh, &fr, 0);
    }
}

/* A peer's request (from btl_efa_recv.c): executed unless refused, and
 * answered either way, so the initiator's operation completes.  A get's
 * data is executed into the answer's fragment, or for a get of a few
 * bytes into the answer's operand; the answers without a fragment go
 * straight into the ring where they can (the answer to an on-node atomic
 * is most of its latency). */
void mca_btl_efa_emul_on_request(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                 const efa_btl_hdr_t *hdr, const efa_btl_rma_t *rma,
                                 const void *payload, uint32_t *claim) {
    if (NULL == ep) {
        opal_output(0, "btl:efa: a request from an unknown process cannot be answered");
        return;
    }
    const bool get = EFA_BTL_MSG_GET == hdr->type;
    /* (its bytes in the answer's operand: efa_btl_ring_resp_t) */
    const bool small_get = get && rma->len <= EFA_BTL_RING_INLINE_MAX;
    uint64_t small = 0;
    efa_btl_frag_t *frag = NULL;
    bool no_frag = false;
    if (get && !small_get) {
        frag = mca_btl_efa_frag_get(btl);
        /* Out of memory: one its initiator can take back stays so (it
         * will, and do it by single copy); any other is refused, by an
         * answer without data (which needs no fragment where it goes by
         * ring), not left to time out. */
        if (NULL == frag && NULL != claim) {
            return;
        }
        no_frag = NULL == frag;
    }
    /* Taken back by its initiator, which did it itself: dropped. */
    if (NULL != claim && !efa_btl_wire_claim_move(claim, EFA_BTL_CLAIM_TAKEN)) {
        if (NULL != frag) {
            mca_btl_efa_frag_return(btl, frag);
        }
        return;
    }
    uint8_t *data = NULL != frag
                        ? (uint8_t *)frag->buf + sizeof(efa_btl_hdr_t) + sizeof(efa_btl_rma_t)
                    : small_get ? (uint8_t *)&small
                                : NULL;
    uint64_t result = 0;
    int status;
    size_t data_len = 0;
    if (btl->finalizing || ep->lost) {
        /* The layers that registered this process's memory are closed:
         * what they left registered may be freed memory by now.  Or the
         * peer is lost to this process (its operations here were failed
         * to the upper layer): its requests still queued write nothing. */
        status = OPAL_ERR_UNREACH;
    } else if (OPAL_UNLIKELY(no_frag)) {
        status = OPAL_ERR_OUT_OF_RESOURCE;
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: out of memory answering a get: refused");
    } else if (!efa_btl_wire_request_len_ok(hdr->type, hdr->len, rma->len, btl->emul.chunk)) {
        /* A put carries what it names; a get asks for no more than the
         * answer's fragment holds. */
        status = OPAL_ERR_BAD_PARAM;
    } else {
        status = mca_btl_efa_emul_execute(btl, hdr->type, hdr->src, rma, payload, data, &result);
        if (get && OPAL_SUCCESS == status) {
            data_len = rma->len;
        }
    }
    efa_emul_count_request(OPAL_SUCCESS == status);
    efa_btl_hdr_t rh;
    efa_btl_rma_t rr;
    memset(&rh, 0, sizeof(rh));
    memset(&rr, 0, sizeof(rr));
    rh.type = EFA_BTL_MSG_RESP;
    rh.len = (uint32_t)data_len;
    rh.src = btl->my_name;
    rr.req = rma->req;
    rr.offset = rma->offset;
    rr.len = rma->len;
    rr.operand = small_get ? small : result;
    rr.status = status;
    if (OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on)) {
        if (1 == mca_btl_efa_component.test.lose_answers) {
            if (NULL != frag) {
                mca_btl_efa_frag_return(btl, frag); /* testing: the answer is lost */
            }
            return;
        }
        if (2 == mca_btl_efa_component.test.lose_answers) {
            rr.req = ~rma->req; /* testing: names a request never issued */
        }
        if (3 == mca_btl_efa_component.test.lose_answers) {
            /* testing: sent twice, as after a send that failed though it
             * arrived (frag_finish sends an answer again) */
            efa_btl_frag_t *copy = NULL != frag ? mca_btl_efa_frag_get(btl) : NULL;
            if (NULL != copy && data_len) {
                const size_t at = sizeof(rh) + sizeof(rr);
                memcpy((uint8_t *)copy->buf + at, (const uint8_t *)frag->buf + at, data_len);
            }
            if (NULL == frag || NULL != copy) {
                send_answer(btl, ep, copy, &rh, &rr, data_len);
            }
        }
        if (4 == mca_btl_efa_component.test.lose_answers) {
            forge_answers(btl, ep, &rh, &rr);
        }
    }
    send_answer(btl, ep, frag, &rh, &rr, data_len);
}

/* The answer rh + rr (+ data_len bytes of a get: after them in frag, or
 * without frag in rr->operand): into the ring where it can go, else as a
 * fragment. */
static void send_answer(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, efa_btl_frag_t *frag,
                        const efa_btl_hdr_t *rh, const efa_btl_rma_t *rr, size_t data_len) {
    if (NULL == frag) {
        if (answer_in_ring(btl, ep, rr, data_len)) {
            return;
        }
        frag = mca_btl_efa_frag_get(btl);
        if (NULL == frag) {
            opal_output(0, "btl:efa: out of memory answering a request: the initiator's operation "
                           "will time out");
            return;
        }
        memcpy((uint8_t *)frag->buf + sizeof(*rh) + sizeof(*rr), &rr->operand, data_len);
    }
    memcpy(frag->buf, rh, sizeof(*rh));
    memcpy((uint8_t *)frag->buf + sizeof(*rh), rr, sizeof(*rr));
    frag->send_len = sizeof(*rh) + sizeof(*rr) + data_len;
    frag->dest = ep->addr;
    frag->endpoint = ep;
    if (OPAL_SUCCESS != mca_btl_efa_frag_post(btl, frag)) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: an answer to a one-sided request cannot be sent; the "
                            "initiator's operation will time out");
        mca_btl_efa_frag_return(btl, frag);
    }
}
