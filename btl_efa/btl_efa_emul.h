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
#include "btl_efa_ring.h"

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

/* An initiator's one-sided operation (split into chunks). */
typedef struct efa_btl_rdma_req {
    struct efa_btl_rdma_req *next;
    uint64_t id; /* names it in requests and answers (emul.reqs) */
    mca_btl_efa_endpoint_t *endpoint;
    efa_btl_rdma_cb_t cb;
    int type;
    int status;
    size_t size;
    uint64_t remote_address;
    efa_btl_rma_t rma; /* template of the chunks' requests */
    /* A bounded window of chunks is in flight; each answer lets the next go.
     * Protected by the module lock. */
    int nchunks;  /* chunks to send (cut short by a failure) */
    int issued;   /* chunks handed to the send path */
    int answered; /* chunks answered (or failed) */
    /* Of an operation of several chunks, those (bit i: chunk i) whose
     * answer came: a target sends an answer again when its send failed,
     * though it may have arrived, and a second count would complete the
     * operation before its last chunks (NULL: one chunk, answered_one). */
    uint8_t *answered_bits;
    int nbits;
    /* One chunk's: its answer and its send's failure (taken as failed,
     * though it may have arrived) come in two threads at once: one counts. */
    uint8_t answered_one;
    /* Told once the operation is over, before its callback (NULL: nobody):
     * btl_efa_ring_rma.c frees its record of the request (rec). */
    void (*on_over)(mca_btl_efa_module_t *btl, struct efa_btl_rdma_req *req);
    int rec;
} efa_btl_rdma_req_t;

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
/* btl_efa_emul_target.c: execute one request of process src against this
 * process's memory, after checking it against this process's own table of
 * registrations (also the initiator's path for its own memory).  put: copy
 * 'in' to the target; get: copy the target to 'out'; atomic: *result = the
 * old value.  Returns an OPAL status; nothing is touched unless the check
 * passed.  The checks and the execution are common's (efa_emul_target.h);
 * this adds the job's atomic mode and the words to the user. */
int mca_btl_efa_emul_execute(mca_btl_efa_module_t *btl, int type, uint64_t src,
                             const efa_btl_rma_t *rma, const void *in, void *out, uint64_t *result);
/* What btl_efa_recv.c hands over: a peer's request (ep: its sender, NULL
 * when unknown; executed unless refused, and answered either way; claim:
 * its claim word in a ring slot, NULL when it cannot be taken back), an
 * answer to one of ours. */
void mca_btl_efa_emul_on_request(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                 const efa_btl_hdr_t *hdr, const efa_btl_rma_t *rma,
                                 const void *payload, uint32_t *claim);
/* A request in one line that came by ring (efa_btl_ring_req_t) from ep
 * (NULL: a sender this process does not know), copied out of the slot
 * (claim: the slot's claim word): an atomic is taken, executed and
 * answered straight into ep's ring; a put, or an atomic when finalizing,
 * with test hooks on, with native atomics or without ep's ring, goes to
 * mca_btl_efa_emul_on_request.  A malformed one is dropped. */
void mca_btl_efa_emul_ring_request(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                   const efa_btl_ring_req_t *q, uint32_t *claim);
/* An answer from 'from' (btl_efa_ring.h): taken only from the process the
 * operation it names was sent to. */
void mca_btl_efa_emul_on_response(mca_btl_efa_module_t *btl, const mca_btl_efa_answer_from_t *from,
                                  const efa_btl_rma_t *rma, const void *payload, size_t len);

/* For btl_efa_ring_rma.c, which writes a put's or get's one request itself:
 * req_one makes the operation (entered in the table, claimed by the
 * caller, counted outstanding; NULL when out of memory), req_sent drops
 * the caller's claim once the request is in the ring, req_unsent takes
 * back one that could not be written (nothing is called); req_claim finds
 * one by id (NULL: over or expired) for req_answered, which completes it
 * with status and drops that claim (a cancelled request done here). */
efa_btl_rdma_req_t *mca_btl_efa_emul_req_one(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                             const efa_btl_rdma_args_t *a);
void mca_btl_efa_emul_req_sent(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req);
/* A claimed request of req_one's whose single copy failed: sent again as
 * an ordinary request the target executes (the claim is dropped). */
void mca_btl_efa_emul_req_resend(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req);
void mca_btl_efa_emul_req_unsent(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req);
efa_btl_rdma_req_t *mca_btl_efa_emul_req_claim(mca_btl_efa_module_t *btl, uint64_t id);
void mca_btl_efa_emul_req_answered(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, int status);

END_C_DECLS
#endif
