/*
 * btl_efa's messages by peer over the NICs of the set (btl_efa_spread.h):
 * which NIC a peer takes, the send there, its failover to another NIC,
 * the report (the receive side: btl_efa_spread_recv.c).
 */
#include "btl_efa_lost.h"
#include "btl_efa_spread.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "opal/util/output.h"

void mca_btl_efa_spread_setup(mca_btl_efa_module_t *btl) {
    const efa_core_info_t *info = efa_core_get_info(btl->core);
    memset(&btl->spread, 0, sizeof(btl->spread));
    btl->spread.rails = info->num_nics < EFA_MAX_RAILS ? (int)info->num_nics : EFA_MAX_RAILS;
    btl->spread.nctx = (int)info->num_contexts;
    btl->spread.failover = info->rail_failover;
    btl->spread.next = (uint32_t)mca_btl_efa_component.test.first_rail;
    for (int r = 1; r < btl->spread.rails; ++r) {
        btl->spread.ctx[r] = efa_core_rail_ctx(btl->core, r, 0);
    }
    btl->spread.ctx[0] = btl->ctx;
}

/* Does NIC r (> 0) of the set reach ep's process, pairing back with it? */
static bool rail_reaches(const mca_btl_efa_module_t *btl, const mca_btl_efa_endpoint_t *ep, int r) {
    return NULL != btl->spread.ctx[r] && (ep->peer->rails_mutual & (1u << r)) &&
           FI_ADDR_NOTAVAIL != efa_peer_rail_addr(ep->peer, r, 0, btl->spread.nctx);
}

/* A NIC that does not reach the peer, or whose peer NIC does not pair back
 * with it (the answers would come in elsewhere, from an address this NIC's
 * table does not know: efa_peer_t.rails_mutual), leaves the peer on the
 * first, and out of its turns. */
void mca_btl_efa_spread_assign(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep) {
    if (btl->spread.rails < 2 || ep->is_self || NULL == ep->peer || NULL == ep->proc) {
        return;
    }
    if (btl->mode.job_numbers && !ep->foreign_mode && !ep->numbered) {
        /* Every process of the job numbers what it sends through the
         * provider, to peers of its node (fragments larger than a ring
         * slot) and to peers one NIC reaches too: no message on a
         * receiver's first NIC is then unnumbered, and a receive failed
         * there can be taken as the NIC's flush (recv_failed). */
        OPAL_THREAD_LOCK(&btl->lock);
        ep->numbered = true;
        OPAL_THREAD_UNLOCK(&btl->lock);
    }
    if (OPAL_PROC_ON_LOCAL_NODE(ep->proc->proc_flags)) {
        return;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    if (NULL == ep->rail_ctx) { /* once (add_procs may come again): rail_ctx says it was */
        const int r = (int)(btl->spread.next++ % (uint32_t)btl->spread.rails);
        ep->rail_ctx = btl->ctx;
        uint8_t mask = 1;
        for (int i = 1; i < btl->spread.rails; ++i) {
            mask |= rail_reaches(btl, ep, i) ? (uint8_t)(1u << i) : 0;
        }
        if (r > 0 && (mask & (1u << r))) {
            ep->rail = ep->rail_own = (int8_t)r;
            ep->rail_ctx = btl->spread.ctx[r];
            ++btl->spread.peers;
        }
        if (mask > 1) {
            ep->rail_mask = mask;
            ep->rail_turn = (uint8_t)r; /* peers start their turns apart */
            ++btl->spread.turn_peers;
            /* Its messages on the first NIC numbered too: a copy sent over
             * another once the first failed can then be told by. */
            ep->numbered = ep->numbered || btl->spread.failover;
        }
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
}

int mca_btl_efa_spread_turn(mca_btl_efa_endpoint_t *ep) {
    const unsigned mask = __atomic_load_n(&ep->rail_mask, __ATOMIC_RELAXED);
    if (0 == mask) {
        return ep->rail;
    }
    unsigned r;
    do { /* (put/get take turns without the module lock: relaxed) */
        r = __atomic_fetch_add(&ep->rail_turn, 1, __ATOMIC_RELAXED) % EFA_MAX_RAILS;
    } while (0 == (mask & (1u << r)));
    return (int)r;
}

/* (the target's NIC on rail r: its key there) */
bool mca_btl_efa_spread_rail_key(const mca_btl_efa_endpoint_t *ep, const efa_rma_handle_t *h,
                                 int rail, uint64_t *key) {
    const int nic = 0 == rail || NULL == ep->peer ? 0 : ep->peer->rail_nic[rail];
    if (nic >= (int)h->rails) {
        return false;
    }
    *key = 0 == nic ? h->fi_key : h->rail_key[nic - 1];
    return true;
}

/* Rail r to ep for a transfer: it reaches the peer, the target registered
 * the range on the NIC it reaches (its handle's keys) and, where the
 * provider wants local descriptors, this process on r too. */
static bool rail_usable(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, int r,
                        const efa_rma_handle_t *h, efa_mr_t *local_mr, efa_btl_rail_t *out) {
    const fi_addr_t addr = efa_peer_rail_addr(ep->peer, r, 0, btl->native.nctx);
    uint64_t key;
    if (FI_ADDR_NOTAVAIL == addr || !mca_btl_efa_spread_rail_key(ep, h, r, &key) ||
        (local_mr && r >= efa_mr_rails(local_mr))) {
        return false;
    }
    *out = (efa_btl_rail_t){r, btl->native.rail_ctx[r], addr,
                            local_mr ? efa_mr_rail_desc(local_mr, r) : NULL, key};
    return true;
}

int mca_btl_efa_spread_plan_rdma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                 const efa_btl_rdma_args_t *a, efa_mr_t *local_mr, void *desc,
                                 efa_btl_rail_t *out) {
    out[0] = (efa_btl_rail_t){0, btl->ctx, ep->addr, desc, a->remote_handle->rma.fi_key};
    const efa_rma_handle_t *h = &a->remote_handle->rma;
    if (OPAL_LIKELY(0 == btl->native.stripe_min || a->size < btl->native.stripe_min ||
                    NULL == ep->peer)) {
        if (OPAL_UNLIKELY(ep->rail_mask > 1 || ep->rail > 0) && NULL != ep->peer) {
            const bool turn = ep->rail_mask > 1 && a->size > btl->super.btl_eager_limit;
            const int r = turn ? mca_btl_efa_spread_turn(ep) : ep->rail;
            if (r > 0 && r < btl->native.rails && rail_usable(btl, ep, r, h, local_mr, &out[0]) &&
                turn && r != ep->rail) {
                __atomic_fetch_add(&btl->spread.turns, 1, __ATOMIC_RELAXED);
            }
        }
        return 1;
    }
    /* The first NIC left for the peer (its numbered messages moved):
     * the others alone, or the first after all where none can. */
    int n = OPAL_UNLIKELY(ep->rail_mask && !(ep->rail_mask & 1u)) ? 0 : 1;
    for (int r = 1; r < btl->native.rails; ++r) {
        n += rail_usable(btl, ep, r, h, local_mr, &out[n]) ? 1 : 0;
    }
    return n ? n : 1;
}

/* ep's messages leave NIC 'rail' for good: those that were its own go over
 * its home from now on (the lowest NIC left: the first, unless that is
 * the one left), and its turns skip that NIC (module lock held).  The
 * first NIC is left only by a numbered peer with another NIC: false
 * where nothing was left. */
static bool leave_rail(mca_btl_efa_endpoint_t *ep, int rail, int err) {
    const uint8_t bit = (uint8_t)(1u << rail);
    const uint8_t rest = (uint8_t)(ep->rail_mask & ~bit);
    if (0 == rail ? !ep->numbered || 0 == (ep->rail_mask & bit) || 0 == rest
                  : ep->rail != rail && 0 == (ep->rail_mask & bit)) {
        return false;
    }
    __atomic_store_n(&ep->rail_mask, rest, __ATOMIC_RELAXED);
    ep->rails_left = (uint8_t)(ep->rails_left | bit);
    ep->rails_retaken = (uint8_t)(ep->rails_retaken & ~bit);
    __atomic_fetch_add(&mca_btl_efa_module.spread.left, 1, __ATOMIC_RELAXED);
    if (ep->rail == rail) {
        /* the lowest NIC left (the first where the peer has no mask) */
        ep->rail = (int8_t)(0 == rest ? 0 : __builtin_ctz(rest));
    }
    if (0 == rail) {
        ++mca_btl_efa_module.spread.first_left;
    }
    opal_output_verbose(1, mca_common_efa_output,
                        "btl:efa: a peer's messages leave NIC %d of the set (%s): over the "
                        "others from now on",
                        rail, fi_strerror(err < 0 ? -err : err));
    return true;
}

/* The test setting debug_forge_src over a NIC beside the first: the Nth
 * message sent there that fits an inject goes again, numbered anew, its
 * header naming the destination itself as the sender; the receiver's
 * check against the sender's addresses on that NIC must drop it. */
static void forge_over_rail(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                            const efa_btl_frag_t *frag, size_t len, int rail, fi_addr_t addr) {
    static int sent = 0;
    const size_t inject = efa_core_get_info(btl->core)->inject_size;
    if (len > inject || ++sent != mca_btl_efa_component.test.forge_src) {
        return;
    }
    uint8_t *copy = malloc(len);
    if (NULL == copy) {
        return;
    }
    memcpy(copy, frag->buf, len);
    efa_btl_hdr_t hdr;
    memcpy(&hdr, copy, sizeof(hdr));
    hdr.src = mca_btl_efa_name_key(&ep->name);
    hdr.credits = 0;
    memcpy(copy, &hdr, sizeof(hdr));
    const uint64_t seq = UINT64_C(1) << 40; /* never one of the sender's */
    memcpy(copy + len - EFA_BTL_SEQ_BYTES, &seq, sizeof(seq));
    if (-FI_EAGAIN == efa_ctx_try_inject(btl->spread.ctx[rail], copy, len, addr)) {
        --sent; /* the next one */
    }
    free(copy);
}

/* The descriptor of frag's buffer on NIC 'rail' where the provider wants
 * one (NULL: not registered there), or NULL where it wants none. */
static void *rail_desc(const mca_btl_efa_module_t *btl, const efa_btl_frag_t *frag, int rail,
                       bool *ok) {
    *ok = true;
    if (!btl->native.mr_local) {
        return NULL;
    }
    if (0 == rail) {
        return frag->desc;
    }
    void *desc =
        frag->mr && rail < efa_mr_rails(frag->mr) ? efa_mr_rail_desc(frag->mr, rail) : NULL;
    *ok = NULL != desc;
    return desc;
}

/* One try of frag, numbered already, over NIC 'rail': 0, a negative
 * libfabric error (-FI_EHOSTUNREACH where the core took that NIC out for
 * the peer), or EFA_BTL_SPREAD_FIRST (not registered there). */
static int post_numbered(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                         efa_btl_frag_t *frag, int rail) {
    const fi_addr_t addr = efa_peer_rail_addr(ep->peer, rail, 0, btl->spread.nctx);
    if (FI_ADDR_NOTAVAIL == addr) {
        return -FI_EHOSTUNREACH;
    }
    bool ok;
    void *desc = rail_desc(btl, frag, rail, &ok);
    if (!ok) {
        return EFA_BTL_SPREAD_FIRST;
    }
    frag->rail = (int8_t)rail;
    frag->posted = true;
    OPAL_THREAD_ADD_FETCH32(&btl->send.posted, 1);
    const int rc = efa_ctx_try_send(btl->spread.ctx[rail], frag->buf,
                                    frag->send_len + EFA_BTL_SEQ_BYTES, desc, addr, &frag->op);
    if (0 != rc) {
        frag->posted = false;
        OPAL_THREAD_ADD_FETCH32(&btl->send.posted, -1);
        frag->rail = 0;
    }
    return rc;
}

/* After frag's post over 'rail' failed with rc (neither 0 nor
 * -FI_EAGAIN): the NIC to try next, or -1 where the failure stands.  Not
 * registered there: the first, numbered (a numbered peer's).  Refused: the
 * peer leaves that NIC for its home, the first NIC only where the core
 * took it out for the peer (any other failure there is the message's). */
static int next_rail(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, int rail, int rc) {
    if (EFA_BTL_SPREAD_FIRST == rc) {
        return rail > 0 && ep->numbered ? 0 : -1;
    }
    if (-FI_EHOSTUNREACH != rc && (0 == rail || !btl->spread.failover)) {
        return -1;
    }
    return leave_rail(ep, rail, rc) ? ep->rail : -1;
}

int mca_btl_efa_spread_send_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                   efa_btl_frag_t *frag, int rail) {
    const size_t len = frag->send_len;
    if (len + EFA_BTL_SEQ_BYTES > btl->frag.size) {
        return EFA_BTL_SPREAD_FIRST; /* no room for the number */
    }
    if (frag->base.des_segment_count > 1) {
        /* In place: the caller's data joins the headers in the fragment's
         * buffer, which a failover sends again as it is. */
        const size_t data_len = frag->segments[1].seg_len;
        memcpy(frag->buf + (len - data_len), frag->segments[1].seg_addr.pval, data_len);
    }
    const uint64_t seq = ++ep->rail_seq;
    memcpy(frag->buf + len, &seq, sizeof(seq));
    frag->buf[0] |= EFA_BTL_MSG_SEQ;
    frag->inject = false; /* a failed send must be seen to go again */
    int rc = -FI_EHOSTUNREACH;
    /* A NIC the core took out for the peer (a failed put or get, the peer
     * deadline) or one that refuses it: the peer's home takes its
     * messages now (each NIC left once: a bounded walk). */
    for (int tries = 0; tries <= EFA_MAX_RAILS; ++tries) {
        if (0 == rail && !ep->numbered) {
            rc = EFA_BTL_SPREAD_FIRST;
            break;
        }
        rc = post_numbered(btl, ep, frag, rail);
        const int next = 0 == rc || -FI_EAGAIN == rc ? -1 : next_rail(btl, ep, rail, rc);
        if (next < 0) {
            break;
        }
        rail = next;
    }
    if (0 == rc) {
        /* (rail, not frag->rail: the fragment may have completed in
         * another thread and gone to its next message already) */
        if (rail > 0) {
            ++btl->spread.sent;
        } else {
            ++btl->spread.numbered_first;
        }
        btl->spread.sent_back += (ep->rails_retaken >> rail) & 1u;
        if (OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on) &&
            mca_btl_efa_component.test.forge_src > 0 && rail > 0) {
            forge_over_rail(btl, ep, frag, len + EFA_BTL_SEQ_BYTES, rail,
                            efa_peer_rail_addr(ep->peer, rail, 0, btl->spread.nctx));
        }
        return 0;
    }
    frag->buf[0] &= (uint8_t)~EFA_BTL_MSG_SEQ;
    --ep->rail_seq;
    if (-FI_EAGAIN == rc ||
        (rc < 0 && -FI_EHOSTUNREACH != rc && (0 == rail || !btl->spread.failover))) {
        return rc; /* (the first NIC's failure is the message's, as before) */
    }
    /* Nothing left to move to: the first NIC has it, as it had every
     * message before (its refusal there is the peer's). */
    return EFA_BTL_SPREAD_FIRST;
}

/* Post frag (failed over, number and all) over ep's home NIC, or queue it
 * while that queue is full; module lock held.  false: it failed for good. */
static bool post_home_locked(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag) {
    mca_btl_efa_endpoint_t *ep = frag->endpoint;
    int rc = -FI_EHOSTUNREACH;
    int rail = ep->rail;
    for (int tries = 0; tries <= EFA_MAX_RAILS; ++tries) {
        rc = post_numbered(btl, ep, frag, rail);
        if (0 == rc) {
            return true;
        }
        if (-FI_EAGAIN == rc) {
            frag->next = btl->spread.resend;
            btl->spread.resend = frag;
            return true;
        }
        const int next = next_rail(btl, ep, rail, rc);
        if (next < 0) {
            break;
        }
        rail = next;
    }
    if (EFA_BTL_SPREAD_FIRST == rc) {
        rc = -FI_EHOSTUNREACH; /* not registered on the NIC left to it */
    }
    opal_output_verbose(1, mca_common_efa_output,
                        "btl:efa: a message failed over to another NIC cannot be posted: %s",
                        fi_strerror(-rc));
    frag->err = rc;
    frag->buf[0] &= (uint8_t)~EFA_BTL_MSG_SEQ; /* done: its type as written */
    return false;
}

/* The bytes go again from a buffer of their own: a send the core gave up
 * on (the peer deadline, or another send's failure on that rail) is still
 * the provider's, which may read the old one until
 * the endpoint closes, so that one is never written again (it stays with
 * a fragment taken out of the pool for good, and every slab stays until
 * the endpoints close: frag_busy).  Without a spare fragment the buffer
 * itself goes again. */
static void fresh_buffer_locked(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag) {
    (void)mca_btl_efa_frag_fresh_buffer_locked(btl, frag, frag->send_len + EFA_BTL_SEQ_BYTES);
}

bool mca_btl_efa_spread_completed(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag, int *err) {
    const int rail = frag->rail;
    frag->rail = 0;
    if (OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on) && 0 == *err && rail > 0 &&
        ++btl->spread.completed == (uint32_t)mca_btl_efa_component.test.fail_rail_send) {
        *err = -FI_EIO; /* the test hook: as a failed send, though it arrived */
    }
    if (OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on) && 0 == *err && 0 == rail &&
        ++btl->spread.completed_first == (uint32_t)mca_btl_efa_component.test.fail_first_send) {
        *err = -FI_EIO; /* the same on the first NIC */
    }
    if (0 == *err || -FI_ECANCELED == *err || !btl->spread.failover || btl->finalizing ||
        NULL == frag->endpoint || (0 == rail && !frag->endpoint->numbered)) {
        /* Done: the type as its writer left it (frag_finish and the
         * batching read it; a fragment the upper layer keeps may go
         * again). */
        frag->buf[0] &= (uint8_t)~EFA_BTL_MSG_SEQ;
        return false;
    }
    OPAL_THREAD_LOCK(&btl->lock);
    /* A peer the core declared lost fails every operation on every NIC
     * (its verdict comes before it fails them, and before btl_efa tells
     * the upper layer): none of them is left (no "leave NIC" line,
     * spread.left and the rail-back tick's scan for each), nor is the
     * message sent again. */
    if (frag->endpoint->lost ||
        (NULL != frag->endpoint->peer &&
         1 == efa_core_peer_state(btl->core, frag->endpoint->peer)) ||
        (!leave_rail(frag->endpoint, rail, *err) && frag->endpoint->rail == rail)) {
        /* Its last NIC (or the first of an unnumbered peer): nowhere else
         * to go, the failure is the message's. */
        OPAL_THREAD_UNLOCK(&btl->lock);
        frag->buf[0] &= (uint8_t)~EFA_BTL_MSG_SEQ;
        return false;
    }
    /* The core fails every send in flight on a rail once one fails there
     * (efa_core_peer_lost), whatever the provider still does with them. */
    fresh_buffer_locked(btl, frag);
    const bool ok = post_home_locked(btl, frag);
    if (ok) {
        ++btl->spread.failed_over;
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    return ok;
}

efa_btl_frag_t *mca_btl_efa_spread_resend(mca_btl_efa_module_t *btl) {
    OPAL_THREAD_LOCK(&btl->lock);
    efa_btl_frag_t *list = btl->spread.resend;
    btl->spread.resend = NULL;
    efa_btl_frag_t *failed = NULL;
    while (list) {
        efa_btl_frag_t *frag = list;
        list = frag->next;
        if (!post_home_locked(btl, frag)) {
            frag->next = failed;
            failed = frag;
        }
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    return failed;
}

void mca_btl_efa_spread_report(mca_btl_efa_module_t *btl) {
    if (btl->spread.rails < 2) {
        return;
    }
    opal_output_verbose(
        1, mca_common_efa_output,
        "btl:efa: messages over several NICs: %llu peer(s) on a NIC beside the first, %llu "
        "message(s) sent there, %llu sent again over another NIC after theirs failed; %llu "
        "copies dropped, %llu not from the process they name; %llu receive(s) failed on a NIC "
        "and taken as its flush (%llu on the first), %llu peer(s) asked since for a numbered "
        "message, %llu asks answered; %llu peer(s) whose transfers beyond the eager "
        "limit take the NICs in turn, %llu "
        "of them sent over a NIC beside the first in turn; %llu message(s) numbered over the "
        "first NIC, %llu time(s) a peer's messages left it; %llu NIC(s) left by a peer's "
        "messages, %llu NIC(s) taken again once back, %llu message(s) sent over them since",
        (unsigned long long)btl->spread.peers, (unsigned long long)btl->spread.sent,
        (unsigned long long)btl->spread.failed_over, (unsigned long long)btl->spread.duplicates,
        (unsigned long long)btl->spread.forged, (unsigned long long)btl->spread.recv_failed,
        (unsigned long long)btl->spread.recv_failed_first, (unsigned long long)btl->spread.asked,
        (unsigned long long)btl->spread.told, (unsigned long long)btl->spread.turn_peers,
        (unsigned long long)btl->spread.turns, (unsigned long long)btl->spread.numbered_first,
        (unsigned long long)btl->spread.first_left, (unsigned long long)btl->spread.left,
        (unsigned long long)btl->spread.taken_back, (unsigned long long)btl->spread.sent_back);
}
