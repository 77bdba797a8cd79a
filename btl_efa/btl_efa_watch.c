/*
 * btl_efa's watch on the peers pml ob1 may be waiting on.
 *
 * ob1 waits on a peer (a rendezvous acknowledgement, a receive it posted
 * for that peer) with nothing of it at the BTL: btl_efa's receives take any
 * source.  A peer whose host dropped off the data network while the
 * runtime still reaches it would leave ob1 waiting for ever.  So every peer
 * this process exchanged provider messages with lately is watched through
 * the core's peer deadline (efa_core_peer_watch): silent for half the
 * deadline it is probed, and an unanswered probe calls ob1's error
 * handler, naming the peer (help topic peer-unreachable): it ends the job,
 * or under ULFM (Open MPI 5, mpi_ft_enable) marks the peer failed.
 *
 * "Lately": a sweep every half deadline (from the core's deadline check)
 * starts a watch on a peer with traffic since the last sweep and ends one
 * after EFA_BTL_WATCH_QUIET_SWEEPS sweeps without, two deadlines: longer
 * than a probe takes to expire (half a deadline of silence, then a
 * deadline), so a peer lost right after its last message is still caught.
 * The cost (docs/RELIABILITY.md): a peer must enter MPI at least once per
 * deadline while a process it talked to lately is inside MPI.  Only where
 * an upper layer registered an error handler (ob1 does; under pml cm
 * nobody would hear of the loss).
 *
 * Only peers of this job: a process of another job (spawned, connected)
 * may disconnect and exit, or stay out of MPI, whenever it likes, and
 * neither is a loss; operations to one that is gone still fail through
 * the deadline on what is outstanding.
 *
 * Peers of this node: ob1 waits on them through the rings, which no
 * deadline sees, and one that dies (a crash, a kill that mpirun
 * --enable-recovery lets the job survive) would leave those waits for
 * ever.  Each peer this process attached a ring of, and each peer that
 * attached its ring in this process's inbox (one this process only
 * receives from: a gather's root, a master waiting on its workers), has a
 * watch on its exit (efa_cma_exit_watch, at attach or by the first sweep
 * that finds the peer's ring attached, tried once: only a pid proven to
 * be its process here), and every sweep call (about once a second) polls
 * them all, ob1's waits being none of the BTL's to see: one gone without
 * having ended in order, once its frames here are read, is declared lost
 * in the core (peer-unreachable) and ob1's handler told, as for a silent
 * peer on another node.  In order: it closed its inbox (seen through our
 * outbox to it), or it let go of its ring in ours (its outbox's leave
 * mark, efa_node_ring_sender, stored before its process exits): a process
 * that finalized has done both of what applies, and is never taken for
 * lost (without recovery that would end the job).
 */
#include "btl_efa_lost.h"
#include "btl_efa_ring.h"
#include "btl_efa_spread.h"

#include <rdma/fi_errno.h>

#include "efa_cma.h"

#define EFA_BTL_WATCH_QUIET_SWEEPS 4

static mca_btl_efa_endpoint_t *endpoint_of(efa_op_t *watch) {
    return (mca_btl_efa_endpoint_t *)((char *)watch - offsetof(mca_btl_efa_endpoint_t, watch));
}

/* The core declared the watched peer lost (the message naming it is out). */
static void watch_lost(efa_op_t *op, const efa_cqe_t *cqe) {
    mca_btl_efa_endpoint_t *ep = endpoint_of(op);
    OPAL_THREAD_LOCK(&mca_btl_efa_module.lock);
    ep->watching = false;
    OPAL_THREAD_UNLOCK(&mca_btl_efa_module.lock);
    /* As for any operation to it that failed so (once per peer; nothing
     * for a detached one): the error handler, and its queue failed. */
    mca_btl_efa_peer_failed_later(&mca_btl_efa_module, ep,
                                  efa_path_error(cqe->err) ? cqe->err : -FI_EHOSTUNREACH);
}

/* The module lock is held. */
static void watch_start(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    ep->watch.complete = watch_lost;
    const int rc = efa_core_peer_watch(btl->core, ep->peer, &ep->watch);
    ep->watching = 0 == rc;
    if (-FI_EHOSTUNREACH == rc) {
        /* Declared lost already, by a failure that told nobody here (a
         * one-sided operation's, the MTL's): the upper layer may wait on
         * the peer all the same.  Told from the next progress, once the
         * sweep let go of the lock. */
        mca_btl_efa_peer_failed_later_locked(btl, ep, rc);
    }
}

/* The module lock is held. */
static void watch_stop(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    if (ep->watching) {
        efa_core_peer_unwatch(btl->core, &ep->watch);
        ep->watching = false;
    }
}

static void sweep(void *arg);

/* Peers of this node declared lost by one sweep at most (the rest: the
 * next). */
#define EFA_BTL_EXITED_MAX 8

/* The module lock is held: ep is a peer of this node (of the job: its
 * ring_state is not NONE) with no watch on its exit yet.  Once it attached
 * its ring in this process's inbox (it sent here through the rings), the
 * watch is taken, once: a process that only receives from it (a gather's
 * root, a master waiting on its workers) never attached to its inbox, so
 * ring_attach never took one. */
static void watch_sender(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    efa_node_card_t card;
    if (0 == ep->ring_in) { /* (one modex lookup per peer) */
        mca_btl_efa_ring_note_in(btl, ep, mca_btl_efa_ring_peer_serves(ep, &card) ? &card : NULL);
    }
    if (ep->ring_in > 0 &&
        efa_node_ring_sender_present(btl->ring.node, (uint32_t)ep->ring_in - 1)) {
        if (mca_btl_efa_ring_peer_serves(ep, &card)) {
            mca_btl_efa_ring_watch_exit(btl, ep, &card);
        }
        ep->exit_tried = true;
    }
}

/* The peers of this node whose process is gone (above); no lock held.  A
 * process that ended in order is never declared lost (under ob1 without
 * recovery the loss would end the job): one that closed its inbox (seen
 * through our outbox to it) or let go of its ring in ours (its outbox's
 * leave mark, stored before it exited and read here after its exit was
 * seen) has its watch released instead. */
static void node_sweep(mca_btl_efa_module_t *btl) {
    mca_btl_efa_endpoint_t *gone[EFA_BTL_EXITED_MAX];
    int n = 0;
    uint64_t key;
    void *value, *node;
    OPAL_THREAD_LOCK(&btl->lock);
    int rc = opal_hash_table_get_first_key_uint64(&btl->endpoints, &key, &value, &node);
    while (OPAL_SUCCESS == rc && n < EFA_BTL_EXITED_MAX) {
        mca_btl_efa_endpoint_t *ep = value;
        if (EFA_BTL_RING_NONE != ep->ring_state && !ep->is_self && !ep->lost && 0 == ep->lost_err &&
            !ep->detached) {
            if (0 == ep->exit_watch && !ep->exit_tried) {
                watch_sender(btl, ep);
            }
            if (0 != ep->exit_watch && efa_cma_exited(ep->exit_watch - 1)) {
                /* (its pid may be another process's soon: no single copy by it) */
                __atomic_store_n(&ep->cma, EFA_BTL_CMA_OFF, __ATOMIC_RELEASE);
                if ((NULL != ep->outbox && efa_shm_outbox_owner_closed(ep->outbox)) ||
                    (ep->ring_in > 0 &&
                     EFA_NODE_SENDER_LEFT ==
                         efa_node_ring_sender(btl->ring.node, (uint32_t)ep->ring_in - 1))) {
                    /* ended in order: nothing more to watch */
                    efa_cma_exit_unwatch(ep->exit_watch - 1);
                    ep->exit_watch = 0;
                } else if (ep->ring_in > 0) {
                    gone[n++] = ep;
                }
            }
        }
        rc = opal_hash_table_get_next_key_uint64(&btl->endpoints, &key, &value, node, &node);
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    for (int i = 0; i < n; ++i) {
        /* Its last frames first (its ring: its local rank's, from its card). */
        if (efa_ring_waiting(btl->ring.consumer, (uint32_t)gone[i]->ring_in - 1)) {
            continue;
        }
        efa_core_peer_lost(btl->core, gone[i]->addr, -FI_EHOSTUNREACH, EFA_CMA_EXITED_WHY);
        mca_btl_efa_peer_failed_later(btl, gone[i], -FI_EHOSTUNREACH);
    }
}

void mca_btl_efa_watch_init(mca_btl_efa_module_t *btl) {
    const int timeout = efa_core_peer_timeout(btl->core);
    btl->watch.period = timeout > 0 && mca_btl_efa_component.peer_watch ? timeout / 2.0 : 0;
    btl->watch.next = mca_btl_efa_now() + btl->watch.period;
    if (btl->watch.period > 0 && 0 != efa_core_add_deadline_tick(btl->core, sweep, btl)) {
        btl->watch.period = 0; /* out of memory: no watch (the deadline still bounds sends) */
    }
}

/* About once a second, from the core's deadline check (no lock held). */
static void sweep(void *arg) {
    mca_btl_efa_module_t *btl = arg;
    /* Only for an upper layer that hears of it (ob1): under pml cm the
     * MTL waits on its peers through operations the deadline tracks, and
     * osc/rdma's through btl_efa_rma_timeout. */
    if (btl->watch.period <= 0 || !mca_btl_efa_fatal_heard()) {
        return;
    }
    if (NULL != btl->ring.node) {
        node_sweep(btl);
    }
    const double now = mca_btl_efa_now();
    if (now < btl->watch.next) {
        return;
    }
    btl->watch.next = now + btl->watch.period;
    /* The gaps' clock leaves out the time this process spent away from
     * progress (a compute phase): a message sent again over another NIC
     * may be waiting in a CQ not read yet. */
    const double gap_now = now - (double)efa_core_away_ms(btl->core) / 1000.0;
    uint64_t key;
    void *value, *node;
    mca_btl_efa_endpoint_t *gap = NULL;
    OPAL_THREAD_LOCK(&btl->lock);
    int rc = opal_hash_table_get_first_key_uint64(&btl->endpoints, &key, &value, &node);
    while (OPAL_SUCCESS == rc) {
        mca_btl_efa_endpoint_t *ep = value;
        if (OPAL_UNLIKELY(NULL != ep->seen) && !ep->detached && NULL == gap &&
            mca_btl_efa_spread_gap_expired(btl, ep, gap_now, 2 * btl->watch.period)) {
            gap = ep;
        }
        if (ep->is_self || ep->detached || ep->name.jobid != OPAL_PROC_MY_NAME.jobid) {
            watch_stop(btl, ep);
        } else if (ep->exchanged) {
            ep->exchanged = false;
            ep->quiet_sweeps = 0;
            if (!ep->watching) {
                watch_start(btl, ep);
            }
        } else if (ep->watching && ++ep->quiet_sweeps >= EFA_BTL_WATCH_QUIET_SWEEPS) {
            watch_stop(btl, ep);
        }
        rc = opal_hash_table_get_next_key_uint64(&btl->endpoints, &key, &value, node, &node);
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    mca_btl_efa_spread_ask_peers(btl);
    if (gap) {
        mca_common_efa_show_help("help-btl-efa.txt", "message-gap", false,
                                 opal_process_info.nodename, OPAL_NAME_PRINT(gap->name));
        mca_btl_efa_fatal(btl, gap->proc, "btl_efa: a peer's message never arrived");
    }
}

void mca_btl_efa_watch_stop_sweeps(mca_btl_efa_module_t *btl) {
    if (btl->watch.period > 0) {
        efa_core_remove_deadline_tick(btl->core, sweep, btl);
    }
}

void mca_btl_efa_watch_fini(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    OPAL_THREAD_LOCK(&btl->lock);
    watch_stop(btl, ep);
    OPAL_THREAD_UNLOCK(&btl->lock);
}
