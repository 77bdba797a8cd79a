/*
 * btl_efa's emulated one-sided protocol: what its two halves and the entry
 * points share (the declarations the rest of the BTL calls are in
 * btl_efa.h).
 *
 * A put, get or atomic travels as request messages that the target's
 * progress executes against its own table of registrations, and answers
 * that complete the operation at the initiator:
 *
 *   btl_efa_rdma.c         entry points: choose this path (or native, or CMA)
 *        |
 *        v
 *   btl_efa_emul_initiator.c   requests, the table of those in flight,
 *        |                     their answers and their expiry
 *        v
 *   btl_efa_emul_target.c      check and execute a request, send its answer
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

/* btl_efa_emul_initiator.c: start an operation on the emulated path (type
 * EFA_BTL_MSG_PUT, _GET or _ATOMIC; op, operand, operand2 and aflags for
 * atomics only).  Completes through cbfunc, at once for the process's own
 * memory. */
int mca_btl_efa_emul_rdma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                          const efa_btl_rdma_args_t *a);

/* btl_efa_emul_target.c: execute one request of process src against this
 * process's memory, after checking it against this process's own table of
 * registrations.  put: copy 'in' to the target; get: copy the target to
 * 'out'; atomic: *result = the old value.  Returns an OPAL status; nothing
 * is touched unless the check passed. */
int mca_btl_efa_emul_execute(mca_btl_efa_module_t *btl, int type, uint64_t src,
                             const efa_btl_rma_t *rma, const void *in, void *out, uint64_t *result);

END_C_DECLS
#endif
