/*
 * btl_efa's on-node channel (btl_efa_ring.c) and the small put and get
 * that travel through it (btl_efa_ring_rma.c): what the rest of the BTL
 * calls.
 */
#ifndef MCA_BTL_EFA_RING_H
#define MCA_BTL_EFA_RING_H

#include "btl_efa.h"

BEGIN_C_DECLS

/* btl_efa_ring.c: the on-node channel */
int mca_btl_efa_ring_setup(mca_btl_efa_module_t *btl, bool *wanted);
void mca_btl_efa_ring_fini(mca_btl_efa_module_t *btl);
void mca_btl_efa_ring_add_proc(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                               const opal_proc_t *proc);
bool mca_btl_efa_ring_attach(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep);
void mca_btl_efa_ring_detach(mca_btl_efa_endpoint_t *ep);
/* Frames handed up per progress call (mca_btl_efa_ring_poll, recv.c). */
#define EFA_BTL_RING_BUDGET 32
/* Say once that the inbox dropped corrupted frames (from progress, now and
 * then: the count only moves when another process wrote into the inbox). */
void mca_btl_efa_ring_check_dropped(mca_btl_efa_module_t *btl);

/* btl_efa_ring_rma.c: a put or get to a process of this node as a request
 * in its ring that the initiator can take back and do by single copy
 * (OPAL_ERR_NOT_AVAILABLE: not this way; the caller uses single copy). */
void mca_btl_efa_ring_rma_setup(mca_btl_efa_module_t *btl);
void mca_btl_efa_ring_rma_fini(mca_btl_efa_module_t *btl); /* its counts, said at verbosity 1 */
int mca_btl_efa_ring_rma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                         const efa_btl_rdma_args_t *a);
/* Take back the requests no target started within the wait (progress). */
void mca_btl_efa_ring_rma_check(mca_btl_efa_module_t *btl);
/* btl_efa_ring_atomic.c: an emulated atomic to a process of this node
 * written into its ring (OPAL_ERR_NOT_AVAILABLE: not this way; the caller
 * takes the general emulated path). */
void mca_btl_efa_ring_atomic_setup(mca_btl_efa_module_t *btl);
void mca_btl_efa_ring_atomic_fini(mca_btl_efa_module_t *btl); /* its count, said at verbosity 1 */
int mca_btl_efa_ring_atomic(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                            const efa_btl_rdma_args_t *a);
/* Where an answer came from: the endpoint a provider's or a ring's full
 * message was checked against (ep), or, for a ring's short answer, which
 * names no sender, the ring it came by (ep NULL; ring_in as ep->ring_in). */
typedef struct mca_btl_efa_answer_from {
    mca_btl_efa_endpoint_t *ep;
    int32_t ring_in;
} mca_btl_efa_answer_from_t;
/* A ring frame names its sender; only that sender's ring may carry it
 * (ring_in: btl->ring.first + the ring + 1, as ep->ring_in).  false: a
 * frame in another process's ring, or naming a process of another job
 * (which has no ring here), to be dropped (said once). */
bool mca_btl_efa_ring_sender_ok(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                int32_t ring_in);
/* Is 'from' the process an operation was sent to (target)?  An answer
 * from any other is dropped, said once. */
bool mca_btl_efa_answer_from_target(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *target,
                                    const mca_btl_efa_answer_from_t *from);
/* An answer: false when it is not for an atomic of this file (the general
 * path's); otherwise the atomic completes, or the answer is dropped when
 * it names no record in flight or comes from another process than the
 * atomic's target. */
bool mca_btl_efa_ring_atomic_answered(mca_btl_efa_module_t *btl, const efa_btl_rma_t *rma,
                                      const mca_btl_efa_answer_from_t *from);
/* The same with the answer's fields read already, for an id that is one of
 * this file's (mca_btl_efa_ring_atomic_id). */
void mca_btl_efa_ring_atomic_answer(mca_btl_efa_module_t *btl, uint64_t id, int status,
                                    uint64_t operand, const mca_btl_efa_answer_from_t *from);
/* Does the request id name an atomic of this file (its top bit; the
 * general path's ids never have it)? */
static inline bool mca_btl_efa_ring_atomic_id(uint64_t id) {
    return 0 != (id >> 63);
}
/* Fail the atomics unanswered for limit seconds (their requests cancelled
 * if not started); returns how many.  From mca_btl_efa_emul_expire.
 * paused: seconds this process spent away from progress since the last
 * check, which do not count. */
int mca_btl_efa_ring_atomic_expire(mca_btl_efa_module_t *btl, double now, double limit,
                                   double paused);
/* Does a message of len bytes (header included) to ep go through its ring?
 * Attaches the ring on first use. */
static inline bool mca_btl_efa_via_ring(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                        size_t len) {
    if (OPAL_LIKELY(EFA_BTL_RING_ATTACHED == ep->ring_state)) {
        return len <= ep->ring_max_frame;
    }
    return EFA_BTL_RING_UNTRIED == ep->ring_state && len <= btl->ring.max_frame &&
           mca_btl_efa_ring_attach(btl, ep) && len <= ep->ring_max_frame;
}

/* Something for ep went by the provider: if ep is a process of this node,
 * ring its doorbell (efa_ring_wake), so that its paced provider poll looks
 * now rather than at its interval (efa_core_set_doorbell).  Under the
 * module lock only an attached ring can be rung. */
static inline void mca_btl_efa_ring_wake_locked(mca_btl_efa_endpoint_t *ep) {
    if (EFA_BTL_RING_ATTACHED == ep->ring_state) {
        efa_ring_wake(ep->ring_out);
    }
}
/* The same without the lock held: a peer no frame has gone to yet is
 * attached first. */
static inline void mca_btl_efa_ring_wake(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    /* (acquire: ring_out is written before the state, ring_attach) */
    const int8_t state = __atomic_load_n(&ep->ring_state, __ATOMIC_ACQUIRE);
    if (EFA_BTL_RING_ATTACHED == state ||
        (EFA_BTL_RING_UNTRIED == state && mca_btl_efa_ring_attach(btl, ep))) {
        efa_ring_wake(ep->ring_out);
    }
}
/* Does the process of ep serve btl_efa's on-node channel (its card has
 * the channel's bit)?  One that does not sends here through the provider
 * only, and cannot ring this process's doorbell. */
bool mca_btl_efa_ring_peer_serves(const mca_btl_efa_endpoint_t *ep, efa_node_card_t *card);

/* Note ep's ring in this process's inbox (ep->ring_in) from its card
 * (NULL: it has none serving the channel), once.  Module lock held. */
void mca_btl_efa_ring_note_in(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                              const efa_node_card_t *card);

/* Take the watch on the exit of ep's process (btl_efa_watch.c) from its
 * card, once per endpoint whether it is taken or not, where the watch
 * runs (btl->watch.period > 0 and an upper layer hears of a loss).
 * Module lock held. */
void mca_btl_efa_ring_watch_exit(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                 const efa_node_card_t *card);

END_C_DECLS
#endif
