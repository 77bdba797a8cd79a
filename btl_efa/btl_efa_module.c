/*
 * btl_efa module: its setup and finalize, and the function table Open MPI
 * calls through.  The paths themselves: btl_efa_am.c (two-sided entry
 * points), btl_efa_send.c (credits, queues, completions), btl_efa_recv.c,
 * btl_efa_endpoint.c, btl_efa_frag.c (the fragment pool); btl_efa_rdma.c
 * (one-sided entry points), btl_efa_reg.c (registrations),
 * btl_efa_emul.c (the emulated protocol), btl_efa_native.c (the provider's
 * RDMA).
 */
#include "btl_efa_lost.h"
#include "btl_efa_batch.h"
#include "btl_efa_rdma.h"
#include "btl_efa_spread.h"
#include "btl_efa_emul.h"
#include "btl_efa_ring.h"

#include <stdlib.h>

#include <rdma/fi_errno.h>

#include "opal/util/output.h"

/* How long finalize waits for the provider to give back the fragments it
 * holds.  Only a peer that died or stopped progressing makes it wait that
 * long; normally the last completions arrive within milliseconds. */
#define EFA_BTL_FINALIZE_WAIT 2.0

static int efa_finalize(struct mca_btl_base_module_t *base) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    uint64_t key;
    void *value, *node;
    if (NULL == btl->core) {
        return OPAL_SUCCESS;
    }
    /* The pml and osc are closed, and their code may be unloaded: from now
     * on nothing is handed to them (mca_btl_efa_upper_alive). */
    btl->finalizing = true;
    opal_atomic_wmb();
    /* Let queued sends go, and let the provider complete what it holds:
     * a completion must not arrive once the fragment is freed.  Sends the
     * peer has long received may still be reported late (shm). */
    const double t0 = mca_btl_efa_now();
    const int posted0 = btl->send.posted;
    while (btl->send.flow.num_waiting > 0 || btl->outstanding > 0 || btl->send.posted > 0 ||
           btl->send.done_head || btl->spread.resend) {
        if (mca_btl_efa_now() - t0 > EFA_BTL_FINALIZE_WAIT) {
            break;
        }
        mca_btl_efa_run_done(btl);
        mca_btl_efa_drain_pending(btl);
        if (NULL != btl->ring.node) {
            (void)mca_btl_efa_ring_poll(btl);
        }
        efa_core_progress(btl->core);
    }
    mca_btl_efa_batch_report(btl);
    /* Off the common progress callback before its state goes. */
    mca_common_efa_progress_remove(mca_btl_efa_component_progress);
    btl->procs.progress_added = false;
    /* The watch's sweeps read the rings (a dead peer's frames first):
     * stopped before the rings go. */
    mca_btl_efa_watch_stop_sweeps(btl);
    /* Peers' frames from now on land in a file nobody reads. */
    mca_btl_efa_ring_fini(btl);
    /* Cancels the receive pool (and drives progress once more). */
    efa_core_msg_set_handler(btl->core, NULL, NULL);
    opal_output_verbose(10, mca_common_efa_output,
                        "btl:efa: finalize: %d send(s) in flight at the start; after %.3f s %d "
                        "endpoint(s) with sends queued, %d one-sided operation(s) and %d "
                        "send(s) unfinished",
                        posted0, mca_btl_efa_now() - t0, (int)btl->send.flow.num_waiting,
                        (int)btl->outstanding, (int)btl->send.posted);
    mca_btl_efa_cma_fini(btl);
    mca_btl_efa_ring_rma_fini(btl);
    mca_btl_efa_ring_atomic_fini(btl);
    mca_btl_efa_reg_fini(btl);
    mca_btl_efa_emul_fini(btl);
    mca_btl_efa_native_fini(btl);
    mca_btl_efa_spread_report(btl);
    mca_btl_efa_rail_back_fini(btl);
    if (OPAL_SUCCESS ==
        opal_hash_table_get_first_key_uint64(&btl->endpoints, &key, &value, &node)) {
        do {
            mca_btl_efa_endpoint_t *ep = value;
            mca_btl_efa_watch_fini(btl, ep);
            mca_btl_efa_ring_detach(ep);
            mca_btl_efa_spread_fini_ep(ep);
            efa_core_peer_put(btl->core, ep->peer);
            free(ep);
        } while (OPAL_SUCCESS ==
                 opal_hash_table_get_next_key_uint64(&btl->endpoints, &key, &value, node, &node));
    }
    OBJ_DESTRUCT(&btl->endpoints);
    mca_btl_efa_frag_slabs_fini(btl);
    /* The core may stay open for the MTL: it polls at its own pace again. */
    efa_core_net_interest(btl->core, -btl->procs.net_interest);
    btl->procs.net_interest = 0;
    mca_common_efa_release(btl->core);
    btl->core = NULL;
    mca_btl_efa_native_fini_released(btl);
    mca_btl_efa_frag_slabs_fini_released(btl);
    OBJ_DESTRUCT(&btl->lock);
    return OPAL_SUCCESS;
}

int mca_btl_efa_module_init(mca_btl_efa_module_t *btl, efa_core_t *core) {
    btl->core = core;
    btl->ctx = efa_core_ctx(core, 0);
    OBJ_CONSTRUCT(&btl->lock, opal_mutex_t);
    OBJ_CONSTRUCT(&btl->endpoints, opal_hash_table_t);
    opal_hash_table_init(&btl->endpoints, 256);
    btl->my_name = mca_btl_efa_name_key(&OPAL_PROC_MY_NAME);
    btl->frag.size = efa_core_msg_max_size(core);
    /* (room for a number, btl_efa_spread.h, whatever this process's
     * NICs: a target checks a get against its own chunk, and every
     * process of a job must agree on it, one NIC or several) */
    btl->emul.chunk =
        btl->frag.size - sizeof(efa_btl_hdr_t) - sizeof(efa_btl_rma_t) - EFA_BTL_SEQ_BYTES;
    btl->frag.pool = NULL;
    mca_btl_efa_recv_des_init(&btl->recv.ring_des, &btl->recv.ring_seg);
    btl->outstanding = 0;
    btl->send.posted = 0;
    btl->finalizing = false;
    /* A window as deep as the peer's receive pool, but never so small that
     * the pipeline stalls on every credit round trip. */
    int32_t window = mca_btl_efa_component.send_window;
    if (window <= 0) {
        size_t bufs = efa_core_msg_recv_count(core);
        window = bufs < 8 ? 8 : (int32_t)bufs;
    }
    efa_flow_init(&btl->send.flow, window, offsetof(efa_btl_frag_t, next));
    mca_btl_efa_watch_init(btl);
    btl->emul.window = mca_btl_efa_component.rma_window > 0 ? mca_btl_efa_component.rma_window : 1;
    /* (With several NICs a message may carry 8 bytes more: btl_efa_spread.h.) */
    size_t max_send = btl->frag.size - sizeof(efa_btl_hdr_t) -
                      (efa_core_get_info(core)->num_nics > 1 ? EFA_BTL_SEQ_BYTES : 0);
    if (btl->super.btl_max_send_size > max_send || 0 == btl->super.btl_max_send_size) {
        btl->super.btl_max_send_size = max_send;
    }
    if (btl->super.btl_eager_limit > btl->super.btl_max_send_size) {
        btl->super.btl_eager_limit = btl->super.btl_max_send_size;
    }
    if (btl->super.btl_rndv_eager_limit > btl->super.btl_eager_limit) {
        btl->super.btl_rndv_eager_limit = btl->super.btl_eager_limit;
    }
    if (OPAL_SUCCESS != mca_btl_efa_reg_setup(btl)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    mca_btl_efa_emul_setup(btl);
    mca_btl_efa_ring_rma_setup(btl);
    mca_btl_efa_ring_atomic_setup(btl);
    mca_btl_efa_native_setup(btl);
    mca_btl_efa_spread_setup(btl);
    mca_btl_efa_rail_back_init(btl);
    btl->send.inject_max = efa_core_get_info(core)->inject_size;
    /* In-place sends gather two buffers; below the provider's inject size
     * the provider copies the message anyway, so a copy of ours costs
     * little and the request completes at once (sendi). */
    const efa_core_info_t *info = efa_core_get_info(core);
    if (info->tx_iov_limit < 2) {
        btl->super.btl_flags &= ~MCA_BTL_FLAGS_SEND_INPLACE;
    }
    btl->send.inplace_min = mca_btl_efa_component.inplace_min; /* 0: message above inject_max */
    btl->batch.bytes = mca_btl_efa_component.coalesce_bytes;
    btl->batch.max = mca_btl_efa_component.coalesce_max;
    btl->batch.sent = btl->batch.msgs = 0;
    btl->recv.last_src = NULL;
    btl->send.done_head = btl->send.done_tail = NULL;
    btl->send.lost_due = NULL;
    if (OPAL_UNLIKELY(mca_btl_efa_component.test_hooks_on) &&
        mca_btl_efa_component.test.fail_module_init) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: module init fails here (btl_efa_debug_fail_module_init, a "
                            "test setting)");
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (OPAL_SUCCESS != mca_btl_efa_frag_pool_init(btl, mca_btl_efa_frag_complete)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    int rc = efa_core_msg_set_handler(core, mca_btl_efa_on_message, btl);
    if (0 != rc) {
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: cannot post receives: %s",
                            fi_strerror(-rc));
        return mca_common_efa_fi_to_opal(rc);
    }
    return OPAL_SUCCESS;
}

/* The component's init failed after mca_btl_efa_module_init began (it,
 * or what follows it): the core stays open for the MTL, whose progress
 * would call this component's deadline ticks and message handler once
 * its code is unloaded.  They go, and the fragments' registered slabs
 * with them; mca_btl_efa_module_init_failed_released once the core is
 * released. */
void mca_btl_efa_module_init_failed(mca_btl_efa_module_t *btl) {
    if (NULL == btl->core) {
        return; /* (module init never began) */
    }
    btl->finalizing = true;
    (void)efa_core_msg_set_handler(btl->core, NULL, NULL);
    mca_btl_efa_watch_stop_sweeps(btl);
    mca_btl_efa_rail_back_fini(btl);
    mca_btl_efa_frag_slabs_fini(btl);
    /* (empty: no operation began; NULL where init stopped before them) */
    mca_btl_efa_emul_fini(btl);
    mca_btl_efa_reg_fini(btl);
}

void mca_btl_efa_module_init_failed_released(mca_btl_efa_module_t *btl) {
    if (NULL == btl->core) {
        return;
    }
    mca_btl_efa_frag_slabs_fini_released(btl);
    OBJ_DESTRUCT(&btl->endpoints);
    OBJ_DESTRUCT(&btl->lock);
    btl->core = NULL;
}

/* The function table (its functions declared in btl_efa.h); the limits are
 * set by the component. */
mca_btl_efa_module_t mca_btl_efa_module = {
    .super =
        {
            .btl_component = &mca_btl_efa_component.super,
            .btl_add_procs = mca_btl_efa_add_procs,
            .btl_del_procs = mca_btl_efa_del_procs,
            .btl_finalize = efa_finalize,
            .btl_alloc = mca_btl_efa_alloc,
            .btl_free = mca_btl_efa_free,
            .btl_prepare_src = mca_btl_efa_prepare_src,
            .btl_send = mca_btl_efa_send,
            .btl_sendi = mca_btl_efa_sendi,
            .btl_put = mca_btl_efa_put,
            .btl_get = mca_btl_efa_get,
            .btl_atomic_op = mca_btl_efa_aop,
            .btl_atomic_fop = mca_btl_efa_afop,
            .btl_atomic_cswap = mca_btl_efa_acswap,
            .btl_register_mem = mca_btl_efa_register_mem,
            .btl_deregister_mem = mca_btl_efa_deregister_mem,
            .btl_flush = mca_btl_efa_flush,
            .btl_register_error = mca_btl_efa_register_error,
        },
};
