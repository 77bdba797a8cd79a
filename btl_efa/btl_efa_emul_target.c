/*
 * btl_efa's emulated one-sided protocol, target side: hand a peer's put,
 * get or atomic request to common's target (efa_emul_target.h: the check
 * against this process's own table of registrations, and the execution),
 * and answer it (the initiator's side: btl_efa_emul_initiator.c; the
 * protocol: btl_efa_emul.h).  A refused request is answered with an error
 * and writes nothing.
 *
 * The answer is a message (EFA_BTL_MSG_RESP) through the send path: the
 * target never calls into the initiator's code, even for its own requests.
 */
#include "btl_efa_emul.h"

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
        return OPAL_ERR_NOT_SUPPORTED;
    case EFA_EMUL_MISALIGNED:
        return OPAL_ERR_BAD_PARAM;
    default:
        return OPAL_ERR_PERM;
    }
}

/* See btl_efa_emul.h.  Also the initiator's path for its own memory.  The
 * checks and the execution are common's (efa_emul_target.h); this adds
 * the job's atomic mode and the words to the user. */
int mca_btl_efa_emul_execute(mca_btl_efa_module_t *btl, int type, uint64_t src,
                             const efa_btl_rma_t *rma, const void *in, void *out,
                             uint64_t *result) {
    const bool atomic = EFA_BTL_MSG_PUT != type && EFA_BTL_MSG_GET != type;
    if (atomic && btl->native_atomics) {
        /* This job's atomics go through the provider, which need not be
         * atomic with respect to this CPU's: only a process that did not
         * agree with the job (another job's) sends these. */
        report_refusal(btl, type, src, rma->addr, rma->len, rma->key,
                       "this job executes atomics by the provider (btl_efa_atomic_mode)");
        return OPAL_ERR_NOT_SUPPORTED;
    }
    const efa_emul_verdict_t v = efa_emul_execute(btl->regs, (uint8_t)type, rma, in, out, result);
    if (EFA_EMUL_DONE != v) {
        uint64_t len = rma->len;
        if (atomic) {
            (void)efa_btl_wire_atomic_extent(rma->addr, rma->flags, &len);
        }
        report_refusal(btl, type, src, rma->addr, len, rma->key, efa_emul_verdict_text(v));
    }
    return status_of(v);
}

/* A peer's request (from btl_efa_recv.c): executed unless refused, and
 * answered either way, so the initiator's operation completes. */
void mca_btl_efa_emul_on_request(mca_btl_efa_module_t *btl, const efa_btl_hdr_t *hdr,
                                 const efa_btl_rma_t *rma, const void *payload) {
    mca_btl_efa_endpoint_t *ep = mca_btl_efa_endpoint_by_name(btl, hdr->src, NULL);
    if (NULL == ep) {
        opal_output(0, "btl:efa: a request from an unknown process cannot be answered");
        return;
    }
    efa_btl_frag_t *frag = mca_btl_efa_frag_get(btl);
    if (NULL == frag) {
        opal_output(0, "btl:efa: out of memory answering a request");
        return;
    }
    efa_btl_hdr_t *rh = (efa_btl_hdr_t *)frag->buf;
    efa_btl_rma_t *rr = (efa_btl_rma_t *)(rh + 1);
    uint8_t *data = (uint8_t *)(rr + 1);
    uint64_t result = 0;
    int status;
    size_t data_len = 0;
    if (btl->finalizing) {
        /* The layers that registered this process's memory are closed:
         * what they left registered may be freed memory by now. */
        status = OPAL_ERR_UNREACH;
    } else if (!efa_btl_wire_request_len_ok(hdr->type, hdr->len, rma->len, btl->rma_chunk)) {
        /* A put carries what it names; a get asks for no more than the
         * answer's fragment holds. */
        status = OPAL_ERR_BAD_PARAM;
    } else {
        status = mca_btl_efa_emul_execute(btl, hdr->type, hdr->src, rma, payload, data, &result);
        if (EFA_BTL_MSG_GET == hdr->type && OPAL_SUCCESS == status) {
            data_len = rma->len;
        }
    }
    memset(rh, 0, sizeof(*rh));
    memset(rr, 0, sizeof(*rr));
    rh->type = EFA_BTL_MSG_RESP;
    rh->len = (uint32_t)data_len;
    rh->src = btl->my_name;
    rr->req = rma->req;
    rr->offset = rma->offset;
    rr->len = rma->len;
    rr->operand = result;
    rr->status = status;
    frag->send_len = sizeof(*rh) + sizeof(*rr) + data_len;
    frag->dest = ep->addr;
    frag->endpoint = ep;
    if (OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on)) {
        if (1 == mca_btl_efa_component.test.lose_answers) {
            mca_btl_efa_frag_return(btl, frag); /* testing: the answer is lost */
            return;
        }
        if (2 == mca_btl_efa_component.test.lose_answers) {
            rr->req = ~rma->req; /* testing: names a request never issued */
        }
    }
    if (OPAL_SUCCESS != mca_btl_efa_frag_post(btl, frag)) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: an answer to a one-sided request cannot be sent; the "
                            "initiator's operation will time out");
        mca_btl_efa_frag_return(btl, frag);
    }
}
