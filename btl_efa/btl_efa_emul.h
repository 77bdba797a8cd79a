/*
 * btl_efa's emulated one-sided protocol (btl_efa_emul.c, both sides): what
 * the rest of the BTL calls.
 *
 * A put, get or atomic travels as request messages that the target's
 * progress executes against its own table of registrations, and answers
 * that complete the operation at the initiator:
 *
 *   btl_efa_rdma.c     entry points: choose this path (or native, or CMA)
 *        |
 *        v
 *   initiator          requests, the table of those in flight, their
 *        |             answers and their expiry
 *        v
 *   target             check and execute a request, send its answer
 *
 * Calls go down this picture only: the target answers by message (never by
 * calling the initiator), and the initiator completes an operation through
 * the completion callback its caller gave (never by calling the entry
 * points).  The initiator calls the target's execution directly for the
 * process's own memory, which needs no message.
 */
#ifndef MCA_BTL_EFA_EMUL_H
#define MCA_BTL_EFA_EMUL_H

#include "btl_efa.h"

BEGIN_C_DECLS

/* The operation a message type stands for, in messages to the user. */
static inline const char *mca_btl_efa_emul_type_name(int type) {
    switch (type) {
    case EFA_BTL_MSG_PUT:
        return "put";
    case EFA_BTL_MSG_GET:
        return "get";
    default:
        return "atomic";
    }
}

/* Start an operation on the emulated path (a->type EFA_BTL_MSG_PUT, _GET
 * or _ATOMIC).  Completes through the callback, at once for the process's
 * own memory. */
int mca_btl_efa_emul_rdma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                          const efa_btl_rdma_args_t *a);
/* After mca_btl_efa_reg_setup (request ids start from its random point). */
void mca_btl_efa_emul_setup(mca_btl_efa_module_t *btl);
void mca_btl_efa_emul_fini(mca_btl_efa_module_t *btl);
/* Fail the emulated requests that went unanswered for btl_efa_rma_timeout;
 * returns how many. */
int mca_btl_efa_emul_expire(mca_btl_efa_module_t *btl);
/* What btl_efa_recv.c hands over: a peer's request (executed unless
 * refused, and answered either way), an answer to one of ours. */
void mca_btl_efa_emul_on_request(mca_btl_efa_module_t *btl, const efa_btl_hdr_t *hdr,
                                 const efa_btl_rma_t *rma, const void *payload);
void mca_btl_efa_emul_on_response(mca_btl_efa_module_t *btl, const efa_btl_rma_t *rma,
                                  const void *payload, size_t len);

END_C_DECLS
#endif
