/*
 * btl_efa's lost peers and the upper layer's error handler
 * (btl_efa_lost.c): who is told a peer is gone, when, and with which
 * status.
 */
#ifndef MCA_BTL_EFA_LOST_H
#define MCA_BTL_EFA_LOST_H

#include "btl_efa.h"

int mca_btl_efa_register_error(struct mca_btl_base_module_t *btl,
                               mca_btl_base_module_error_cb_fn_t cbfunc);
/* Tell the upper layer of an error it cannot recover from (ob1 ends the
 * job; under ULFM, Open MPI 5 with mpi_ft_enable, it marks proc failed and
 * goes on); proc may be NULL.  Nothing once finalize began. */
void mca_btl_efa_fatal(mca_btl_efa_module_t *btl, opal_proc_t *proc, char *why);
/* Is anyone listening (ob1 registers its handler; osc/rdma does not)? */
bool mca_btl_efa_fatal_heard(void);
/* A message to ep failed for good with err (a negative libfabric error;
 * not moved to another NIC).  Where err says the path failed
 * (efa_path_error), the next progress call, the first time per peer,
 * fails the sends waiting in ep's queue with OPAL_ERR_UNREACH and calls
 * the upper layer's error handler naming the peer, as btl_tcp does for a
 * peer whose connection failed: ob1 parks messages it cannot send and
 * retries them for ever (and aborts on a failed send's completion), so
 * without the call it would never end.  From progress only, never inside
 * a send call (drain_pending runs inside btl_send and btl_put too).  Any
 * other err: nothing.  _locked: the module lock is held; the others take
 * it.  _asking: a one-sided operation, which ob1 redoes by sending where
 * it fails: told only where the core declared the process lost (or cannot
 * say, the peer deadline off), not for a NIC alone out. */
void mca_btl_efa_peer_failed_later_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                          int err);
void mca_btl_efa_peer_failed_later(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, int err);
void mca_btl_efa_peer_failed_later_asking(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                          int err);
/* Those calls, from the component's progress (btl_efa_progress.c). */
void mca_btl_efa_tell_lost_due(mca_btl_efa_module_t *btl);
/* The status the upper layer gets for an operation that failed with err (a
 * negative libfabric error).  Every path error is OPAL_ERR_UNREACH: Open
 * MPI 5's ob1 turns only that one into MPI_ERR_PROC_FAILED under ULFM
 * (pml_ob1_sendreq.c, pml_ob1_recvreq.c) and passes any other code up as
 * it is (MPI_ERR_UNKNOWN), and FI_ETIMEDOUT here is the core's peer
 * deadline declaring the peer lost, not an operation's own timeout
 * (OPAL_ERR_TIMEOUT is kept for btl_efa_rma_timeout's expiry). */
static inline int mca_btl_efa_status_of(int err) {
    return efa_path_error(err) ? OPAL_ERR_UNREACH : mca_common_efa_fi_to_opal(err);
}

#endif
