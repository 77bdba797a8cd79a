/*
 * btl_efa's defaults that depend on the provider, the job and the peer
 * deadline (btl_efa_defaults.h).
 */
#include "btl_efa_defaults.h"

#include <string.h>

bool mca_btl_efa_param_is_default(const char *name) {
    const mca_base_var_t *var = NULL;
    int idx = mca_base_var_find("opal", "btl", "efa", name);
    return idx < 0 || OPAL_SUCCESS != mca_base_var_get(idx, &var) || NULL == var ||
           MCA_BASE_VAR_SOURCE_DEFAULT == var->mbv_source;
}

/* Two-sided defaults that depend on the provider, each left alone when
 * the user set the parameter.  Measured on the stand-ins (commands and
 * figures in docs/PERFORMANCE.md, "ob1 + btl_efa per message"):
 *  - in-place sends (MCA_BTL_FLAGS_SEND_INPLACE) pay where the provider
 *    moves a message above its inject size without a bounce buffer: shm
 *    reads it from the sender's memory by CMA.  tcp;ofi_rxm copies every
 *    message into its own buffers, so there the in-place path would only
 *    replace ob1's immediate completion (sendi) by a completion callback
 *    (+6% instructions per message); it is off there.
 *  - shm without single copy: 16 KiB messages go eager, in place (one
 *    CMA copy into the receive buffer, one copy out) rather than by the
 *    provider's RDMA read (two more messages and a registration on each
 *    side).  With single copy (btl_efa_single_copy, on one node) ob1's
 *    read of a 16 KiB message is one process_vm_readv, which beats the
 *    eager send (8.7 against 5.7 GB/s, window 64): 16 KiB stays.  tcp;ofi_rxm
 *    on one node keeps 16 KiB (the 16 KiB payload goes by RDMA read): rxm
 *    cuts a message above its 16 KiB eager buffers into segments through
 *    bounce buffers, which costs more instructions and copies than the
 *    read.
 *  - between nodes on udp;ofi_rxd the round trips of the rendezvous
 *    outweigh the copies: eager up to max_send_size (below). */
const char *mca_btl_efa_choose_send_path(mca_btl_efa_module_t *btl, efa_core_t *core,
                                         bool spans_nodes) {
    const efa_core_info_t *info = efa_core_get_info(core);
    const bool shm = 0 == strcmp(info->provider, "shm");
    const char *eager_why =
        mca_btl_efa_param_is_default("eager_limit") ? "default" : "set by the user";
    if (!shm && mca_btl_efa_param_is_default("flags")) {
        btl->super.btl_flags &= ~MCA_BTL_FLAGS_SEND_INPLACE;
    }
#ifdef EFA_HAVE_CMA
    const bool single_copy = EFA_SINGLE_COPY_NONE != btl->cma.mode;
#else
    const bool single_copy = false;
#endif
    if (shm && !single_copy && mca_btl_efa_param_is_default("eager_limit")) {
        btl->super.btl_eager_limit = 17 * 1024;
    }
    if (shm && !single_copy && mca_btl_efa_param_is_default("rndv_eager_limit")) {
        btl->super.btl_rndv_eager_limit = 17 * 1024;
    }
    if (shm && !single_copy && mca_btl_efa_param_is_default("eager_limit")) {
        eager_why = "17 KiB: shm without single copy";
    }
    /* Between nodes on udp;ofi_rxd every message up to the largest
     * fragment (max_send_size, 60 KiB; the peer's receive buffers hold 64
     * KiB, kBufSize in common/core/core_msg.cpp) goes eager: one provider
     * message, which rxd cuts into datagrams without a handshake, where
     * ob1's rendezvous takes its header, an RDMA read that rxd emulates
     * (request and answer) and a FIN: 16 KiB 68 -> 48 us, 32 KiB 109 -> 90
     * between pretend nodes (docs/PERFORMANCE.md, "ob1 + btl_efa at 16 KiB").
     * tcp;ofi_rxm keeps 16 KiB: a message above its 16 KiB eager buffer
     * takes rxm's own rendezvous, so eager measured the same as ob1's
     * (36 against 35 us at 16 KiB).  The efa provider keeps 16 KiB until
     * measured on the device.  One node keeps 16 KiB: the read is one CMA
     * copy there, and on-node fragments above a ring slot take the
     * provider; in a job spanning nodes the peers on this node normally go
     * by vader (more exclusive), so the limit is for the other nodes'. */
    const bool rxd = 0 == strcmp(info->provider, "udp;ofi_rxd");
    if (rxd && spans_nodes && mca_btl_efa_param_is_default("eager_limit")) {
        btl->super.btl_eager_limit = btl->super.btl_max_send_size;
        eager_why = "max send size: udp;ofi_rxd and the job spans nodes";
    }
    if (rxd && spans_nodes && mca_btl_efa_param_is_default("rndv_eager_limit")) {
        /* never above the eager limit (module init clamps it) */
        btl->super.btl_rndv_eager_limit = btl->super.btl_max_send_size;
    }
    return eager_why;
}

void mca_btl_efa_choose_rma_timeout(efa_core_t *core) {
    if (!mca_btl_efa_param_is_default("rma_timeout")) {
        return;
    }
    /* Only the target's CPU answers a request it executes, and a live
     * target may compute outside MPI as long as the peer deadline lets it
     * (600 s by default): failing sooner would fail a passive-target lock
     * or atomic on a rank that is merely busy. */
    const int peer_timeout = efa_core_peer_timeout(core);
    mca_btl_efa_component.rma_timeout = peer_timeout > 0 ? peer_timeout : 86400;
}
