/*
 * What the core does for a message beyond one provider call (efa_core.h's
 * types and conventions): a tagged send withdrawn from its receiver
 * (MPI_Cancel), the read rendezvous of a large message under the
 * provider's matching, and a read of a peer's buffer striped over the
 * rails (own matching's and the rendezvous' reads).
 */
#ifndef EFA_CORE_RDV_H
#define EFA_CORE_RDV_H

#include "efa_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Withdrawing a tagged message this process sent and the receiver has not
 * matched (MPI_Cancel of a send the provider holds until the receiver
 * posts).  The receiver's core claims the unexpected message with exactly
 * 'tag' (its seq included, efa_tag.h) from this process and takes it into
 * scratch memory: no receive can match it any more, and the provider
 * completes the send.  Or it finds none: the message has matched. */
typedef struct efa_withdraw {
    efa_op_t send;  /* the request to the receiver */
    efa_op_t watch; /* the receiver, while the answer is due */
    /* Called once, from progress, after the request's send has completed:
     * 1 withdrawn, 0 not there (matched already, or the receiver could not
     * look), negative: the receiver was lost or the request failed. */
    void (*done)(struct efa_withdraw *w, int result);
    efa_core_t *core;
    fi_addr_t dest; /* the receiver asked: only it may answer */
    uint64_t id;
    int parts, result;
    uint8_t wire[24];
    /* The copy the provider sends (the core's): left to the process's end
     * where the provider still held it as its receiver was lost. */
    uint8_t *sent;
} efa_withdraw_t;
/* Whether this core can withdraw messages: tags with a seq field, and
 * receives into memory the core allocates (no FI_MR_LOCAL). */
bool efa_core_can_withdraw(const efa_core_t *core);
/* Asks the process at 'dest' (ctx's address for it, the context the
 * message went out on) to withdraw the message of 'len' bytes with 'tag'.
 * 0: done will be called (perhaps before this returns), and w is the
 * core's until then; else the request was not made (done will not be
 * called). */
int efa_ctx_withdraw(efa_ctx_t *ctx, fi_addr_t dest, uint64_t tag, size_t len, efa_withdraw_t *w);

/* Read rendezvous under the provider's matching (core_rdv.cpp): a large
 * message to a peer reached over several rails goes as a note, one of the
 * core's control messages that names the sender's registered buffer, and
 * right after it a tagged message of no bytes that carries the rendezvous
 * bit and a seq (efa_tag.h).  The receive that matches the
 * tagged message reads the bytes, striped over the rails
 * (efa_core_rail_read), and answers; the send completes with the answer.
 * The provider's matching still orders the messages, and a probe learns
 * the length from the note. */
typedef struct efa_rdv_offer {
    efa_op_t note;  /* the note's send */
    efa_op_t watch; /* the receiver, while its answer is due */
    /* Called once when the offer is over (from progress, or inside
     * efa_ctx_rdv_offer when a post fails): 0 the receiver read the bytes;
     * else why not (efa_rdv_offer_end's error, the receiver's loss, its
     * failed read, the note's failure). */
    void (*done)(struct efa_rdv_offer *o, int result);
    efa_core_t *core;
    efa_ctx_t *ctx;
    fi_addr_t dest;
    uint64_t id;
    int parts, result;
    int note_tries; /* the note's sends that failed */
    uint8_t wire[72];
    /* The copy of the note the provider sends (the core's): left to the
     * process's end where the provider still held it as its receiver was
     * lost, the offer's memory being its owner's again once it is over. */
    uint8_t *sent;
} efa_rdv_offer_t;
/* Can this core send and receive rendezvous messages: tags with a seq,
 * FI_RMA, no FI_MR_LOCAL.  The same on every process of a job, whatever
 * its NICs, so that any peer can receive what a process with rails sends
 * (a process whose receives for notes cannot be posted does not open). */
bool efa_core_can_rdv(const efa_core_t *core);
/* Offers len bytes at buf, registered for remote reads (mr), to the
 * process at dest (ctx's address for it) as the message with 'tag' (its
 * seq and rendezvous bit set) and remote CQ data 'data': sends the note,
 * then at once the tagged message through the owner's 'tagged' (which
 * completes as any send; a post that fails completes it with the error).
 * 0: done will be called; else nothing was sent (-FI_EALREADY: an older
 * offer of this tag to dest still waits for its answer, the seq having
 * wrapped; the message must go another way). */
int efa_ctx_rdv_offer(efa_ctx_t *ctx, fi_addr_t dest, uint64_t tag, uint64_t data, efa_mr_t *mr,
                      const void *buf, size_t len, efa_op_t *tagged, efa_rdv_offer_t *o);
/* No answer will come (the tagged message was withdrawn, -FI_ECANCELED,
 * or failed): done reports err, unless an answer came first. */
void efa_rdv_offer_end(efa_rdv_offer_t *o, int err);
/* A receive of ctx matched the rendezvous message with 'tag' of peer:
 * read up to len bytes of it into buf once its note is here, answer the
 * sender, and call done(arg, err, msg_len) once (msg_len: the message's
 * length; more than len is a truncation, of which len bytes were read).
 * 0: done will be called, from progress or inside this call; else not
 * (the sender is answered with the error all the same). */
int efa_ctx_rdv_take(efa_ctx_t *ctx, efa_peer_t *peer, uint64_t tag, void *buf, size_t len,
                     void (*done)(void *arg, int err, size_t msg_len), void *arg);
/* The same into a buffer that needs its registration for the read (mr: a
 * device buffer's, efa_core_mr_acquire_device; striped over the rails it is
 * registered on).  Where the provider refuses that memory (at the post,
 * which stops memory of its kind going to the provider, as
 * efa_core_mr_device_post_refused says, or in the read's completion) the
 * bytes are read again into a host buffer and copied on to buf with the
 * device's copy. */
int efa_ctx_rdv_take_mr(efa_ctx_t *ctx, efa_peer_t *peer, uint64_t tag, void *buf, size_t len,
                        efa_mr_t *mr, void (*done)(void *arg, int err, size_t msg_len), void *arg);
/* The receive that matched it failed before it could read: the sender is
 * answered with err once the note is here (so that its send ends). */
void efa_ctx_rdv_decline(efa_ctx_t *ctx, efa_peer_t *peer, uint64_t tag, int err);
/* A probe of ctx found the rendezvous message with 'tag' of peer: its
 * length (*len) when its note is here.  0, -FI_EAGAIN (not yet), or an
 * error (the peer is lost). */
int efa_ctx_rdv_len(efa_ctx_t *ctx, efa_peer_t *peer, uint64_t tag, size_t *len);

/* A read of len bytes of a peer's buffer (raddr as the provider expects
 * it; the owner's key on each of its NICs, rkey[nic], rkeys of them) into
 * buf: over ctx (to addr) on the first rail and, from stripe_min, over
 * context ctx_index of every other rail that reaches the peer (peer NULL:
 * the first alone), in pieces of at most piece_max bytes (0: the
 * provider's largest transfer); a piece whose rail fails goes again over
 * the first (rail_failover).  mr: the local buffer's registration where
 * the provider wants one (its descriptors on every rail), else NULL.  0:
 * done(arg, err) is called once, from progress, when every piece has
 * completed (the first error, or 0); *out (optional) names the read for
 * efa_rail_read_orphan.  Else nothing is in flight and done is not
 * called. */
typedef struct efa_rail_read efa_rail_read_t;
typedef struct efa_rail_read_req {
    efa_ctx_t *ctx;
    fi_addr_t addr;
    const efa_peer_t *peer;
    int ctx_index;
    int home; /* a read that is not striped goes over this rail (0: the first) */
    size_t piece_max;
    void *buf;
    size_t len;
    efa_mr_t *mr;
    uint64_t raddr;
    int rkeys;
    uint64_t rkey[4]; /* EFA_MAX_RAILS */
    void (*done)(void *arg, int err);
    void *arg;
    void (*landed)(void *arg, size_t off, size_t n); /* optional: a piece is in, from progress */
} efa_rail_read_req_t;
int efa_core_rail_read(efa_core_t *core, const efa_rail_read_req_t *r, efa_rail_read_t **out);
/* The owner goes before the read completes: done is no longer called. */
void efa_rail_read_orphan(efa_rail_read_t *rd);

#ifdef __cplusplus
}
#endif
#endif /* EFA_CORE_RDV_H */
