/*
 * btl_efa's messages by peer over the NICs of the process's set
 * (btl_efa_spread.c; the receive side btl_efa_spread_recv.c).
 *
 * Peers on other nodes take the NICs in turn, as add_procs meets them, so
 * that a process talking to many uses every NIC's queue pair.  A peer's
 * fragments and put/get beyond the eager limit (and below stripe_min)
 * take every NIC that reaches it in turn, so that one peer's stream of
 * rendezvous data has the bandwidth of them all; messages up to the eager
 * limit stay on the peer's NIC (their latency: a NIC's first message
 * waits for a poll of it, and the provider's injects).  A message
 * sent over a NIC beside the first, and every message to a peer that
 * several NICs reach (the first NIC's too: ep->numbered), is never
 * injected and ends with an 8-byte number, one sequence per peer
 * (EFA_BTL_MSG_SEQ in its type says so): if its send fails, the peer's
 * messages leave that NIC for the peer's home (the lowest NIC left) and
 * that message goes again there, number and all, and the receiver drops
 * whichever copy comes second.  ob1 does not rely on the BTL's order (the
 * provider's datagrams have none), so messages to one peer over two NICs
 * need nothing more.
 */
#ifndef MCA_BTL_EFA_SPREAD_H
#define MCA_BTL_EFA_SPREAD_H

#include "btl_efa.h"

BEGIN_C_DECLS

/* The type's flag of a message that ends with its sequence number. */
#define EFA_BTL_MSG_SEQ 0x40
#define EFA_BTL_SEQ_BYTES 8

/* post_locked's answer: send it over the first NIC after all. */
#define EFA_BTL_SPREAD_FIRST 1

/* One transfer on rail r: its context and the peer's address there, the
 * descriptor of the local buffer and the target's key on that rail. */
typedef struct {
    int rail;
    efa_ctx_t *ctx;
    fi_addr_t addr;
    void *desc;
    uint64_t rkey;
} efa_btl_rail_t;

/* At open, once the core and the fragment pool are there. */
void mca_btl_efa_spread_setup(mca_btl_efa_module_t *btl);
/* ep (a peer of another node, from add_procs) takes its NIC. */
void mca_btl_efa_spread_assign(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep);
/* The NIC of the next message or put/get of ep's (ep->rail_mask > 1) that
 * takes its turn. */
int mca_btl_efa_spread_turn(mca_btl_efa_endpoint_t *ep);
/* The rails a put or get of a->size bytes to ep goes over (out, at most
 * EFA_MAX_RAILS; desc: the local buffer's descriptor on the first NIC):
 * below stripe_min one, the peer's NIC in its turn (beyond the eager limit) or
 * its NIC for its messages, where it can, else the first; from stripe_min
 * the first and every other rail that can.  Returns how many. */
int mca_btl_efa_spread_plan_rdma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                 const efa_btl_rdma_args_t *a, efa_mr_t *local_mr, void *desc,
                                 efa_btl_rail_t *out);
/* The target's key for a transfer to ep over rail r under handle h (its
 * registration on the NIC r reaches): false where it has none there. */
bool mca_btl_efa_spread_rail_key(const mca_btl_efa_endpoint_t *ep, const efa_rma_handle_t *h,
                                 int rail, uint64_t *key);
/* frag to ep over NIC rail (> 0, or 0 for a numbered peer), numbered,
 * moving to the peer's home where that NIC is out or refuses it; module
 * lock held: 0, a negative libfabric error, or EFA_BTL_SPREAD_FIRST
 * (unnumbered over the first NIC after all). */
int mca_btl_efa_spread_send_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                   efa_btl_frag_t *frag, int rail);
/* A numbered frag's send completed with *err (0: it went; the test hooks
 * may make one fail).  true: it goes again over the peer's home NIC, and
 * its completion comes from there; false: it is done, its header as the
 * caller wrote it again. */
bool mca_btl_efa_spread_completed(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag, int *err);
/* Post the failed-over messages that found their NIC's queue full;
 * returns those that failed for good (chained by next, ->err set). */
efa_btl_frag_t *mca_btl_efa_spread_resend(mca_btl_efa_module_t *btl);
/* A message with EFA_BTL_MSG_SEQ, or any on a NIC beside the first,
 * arrived on ctx: the sender checked against its addresses on that NIC,
 * an unnumbered one there or a copy seen before dropped (false); else the
 * number taken off (*len) and the flag cleared. */
bool mca_btl_efa_spread_arrival(mca_btl_efa_module_t *btl, efa_ctx_t *ctx, uint8_t *buf,
                                size_t *len, fi_addr_t src);
/* A receive failed on ctx's NIC: true when it is that NIC's flush, no
 * loss by itself (a NIC beside the first; the first where every message
 * there is numbered): counted, and the peers asked at the next sweep. */
bool mca_btl_efa_spread_recv_failed(mca_btl_efa_module_t *btl, efa_ctx_t *ctx, int err);
/* A NIC flushed a receive (ask_due): each peer that numbers its messages
 * to this process is asked for one more, so that a lost last one leaves
 * a gap too (from the watch's sweep, no lock held). */
void mca_btl_efa_spread_ask_peers(mca_btl_efa_module_t *btl);
/* ep asked (EFA_BTL_CREDIT_ASK): a numbered CREDIT message through the
 * provider answers it. */
void mca_btl_efa_spread_tell(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep);
/* The watch's sweep (module lock held): has a message of ep's been
 * missing for more than two peer deadlines while later ones came? */
bool mca_btl_efa_spread_gap_expired(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                    double now, double timeout);
/* btl_efa_rail_back.c: a NIC the core put back for a peer is taken
 * again by its messages (the core's deadline tick, from setup to
 * finalize). */
void mca_btl_efa_rail_back_init(mca_btl_efa_module_t *btl);
void mca_btl_efa_rail_back_fini(mca_btl_efa_module_t *btl);
/* Finalize: the report (verbose 1) and each endpoint's record. */
void mca_btl_efa_spread_report(mca_btl_efa_module_t *btl);
void mca_btl_efa_spread_fini_ep(mca_btl_efa_endpoint_t *ep);

END_C_DECLS
#endif
