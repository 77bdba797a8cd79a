/*
 * btl_efa's messages take a NIC again once the core put it back for the
 * peer.
 *
 * A peer's messages leave a NIC that fails for it (btl_efa_spread.c,
 * leave_rail), the first NIC included where another reaches the peer.
 * The core pings a NIC it took out for a peer, common_efa_rail_retry
 * seconds after the loss, and puts it back when the peer answers over it
 * (core_rail_back.cpp), setting the NIC's bit in the peer's
 * rails_back_btl.  Once a second, from the core's deadline tick, a peer
 * whose messages left a NIC the core put back takes it again: back in its
 * turns, and the NIC it was given at the start its home again, so that
 * peers stay spread over the NICs after a link flaps.  Every message to
 * such a peer is numbered, so it may take any NIC: the receiver drops a
 * second copy by its number, and ob1 needs no order from a BTL.
 *
 * A NIC left for a failure the core never saw (a send on the first NIC
 * that failed with an error other than the peer being unreachable, a
 * post beside the first that failed with an error other than -FI_EAGAIN
 * or the core's refusal) is never pinged, so it stays left, unless the
 * core had put back an earlier loss of it.
 */
#include "btl_efa_spread.h"

#include "opal/util/output.h"

/* ep's messages take 'rails' again (module lock held). */
static void take_back_locked(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, uint8_t rails) {
    const uint8_t mask = (uint8_t)(ep->rail_mask | rails);
    __atomic_store_n(&ep->rail_mask, mask, __ATOMIC_RELAXED);
    ep->rails_left = (uint8_t)(ep->rails_left & ~rails);
    ep->rails_retaken = (uint8_t)(ep->rails_retaken | rails);
    ep->rail = (int8_t)(mask & (1u << ep->rail_own) ? ep->rail_own : __builtin_ctz(mask));
    __atomic_fetch_add(&btl->spread.taken_back, (uint64_t)__builtin_popcount(rails),
                       __ATOMIC_RELAXED);
    opal_output_verbose(1, mca_common_efa_output,
                        "btl:efa: a peer's messages take NIC(s) 0x%x of the set again (the core "
                        "found they reach it again); its home is NIC %d",
                        (unsigned)rails, (int)ep->rail);
}

/* About once a second, from the core's deadline check (no lock held). */
static void rail_back_tick(void *arg) {
    mca_btl_efa_module_t *btl = arg;
    if (btl->finalizing) {
        return; /* (its endpoints go) */
    }
    /* Nothing left now (every NIC left was taken again): nothing to look
     * for (a racy read: the next tick sees a late leave). */
    if (__atomic_load_n(&btl->spread.left, __ATOMIC_RELAXED) ==
        __atomic_load_n(&btl->spread.taken_back, __ATOMIC_RELAXED)) {
        return;
    }
    uint64_t key;
    void *value, *node;
    OPAL_THREAD_LOCK(&btl->lock);
    int rc = opal_hash_table_get_first_key_uint64(&btl->endpoints, &key, &value, &node);
    while (OPAL_SUCCESS == rc) {
        mca_btl_efa_endpoint_t *ep = value;
        if (ep->rails_left && NULL != ep->peer && !ep->detached && !btl->finalizing) {
            /* Only the bits of NICs it left are taken, and dropped where
             * the NIC is out again (the core asks it again and sets the
             * bit anew): a NIC the core put back before a late failure
             * that the core never saw moved the peer off it is taken
             * again at the next tick. */
            const uint32_t back =
                __atomic_load_n(&ep->peer->rails_back_btl, __ATOMIC_RELAXED) & ep->rails_left;
            const uint32_t down = __atomic_load_n(&ep->peer->rails_down, __ATOMIC_RELAXED);
            if (back) {
                __atomic_fetch_and(&ep->peer->rails_back_btl, ~back, __ATOMIC_RELAXED);
            }
            if (back & ~down) {
                take_back_locked(btl, ep, (uint8_t)(back & ~down));
            }
        }
        rc = opal_hash_table_get_next_key_uint64(&btl->endpoints, &key, &value, node, &node);
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
}

void mca_btl_efa_rail_back_init(mca_btl_efa_module_t *btl) {
    if (btl->spread.rails > 1 && btl->spread.failover) {
        /* (out of memory: the NICs left stay left, as before) */
        (void)efa_core_add_deadline_tick(btl->core, rail_back_tick, btl);
    }
}

void mca_btl_efa_rail_back_fini(mca_btl_efa_module_t *btl) {
    /* (nothing where it was never added) */
    efa_core_remove_deadline_tick(btl->core, rail_back_tick, btl);
}
