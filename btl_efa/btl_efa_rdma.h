/*
 * btl_efa's one-sided entry points (btl_efa_rdma.c), the module's function
 * table's (btl_efa_module.c): each chooses the path of its operation; and
 * two of those paths, the provider's RMA and atomics (btl_efa_native.c,
 * btl_efa_native_atomic.c) and single copy on the node (btl_efa_cma.c).
 */
#ifndef MCA_BTL_EFA_RDMA_H
#define MCA_BTL_EFA_RDMA_H

#include "btl_efa.h"

#include <errno.h>

#include "opal/util/output.h"

BEGIN_C_DECLS

int mca_btl_efa_put(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                    void *local_address, uint64_t remote_address,
                    struct mca_btl_base_registration_handle_t *local_handle,
                    struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
                    int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                    void *cbdata);
int mca_btl_efa_get(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                    void *local_address, uint64_t remote_address,
                    struct mca_btl_base_registration_handle_t *local_handle,
                    struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
                    int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                    void *cbdata);
int mca_btl_efa_aop(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                    uint64_t remote_address,
                    struct mca_btl_base_registration_handle_t *remote_handle,
                    mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                    mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);
int mca_btl_efa_afop(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                     void *local_address, uint64_t remote_address,
                     struct mca_btl_base_registration_handle_t *local_handle,
                     struct mca_btl_base_registration_handle_t *remote_handle,
                     mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                     mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);
int mca_btl_efa_acswap(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                       void *local_address, uint64_t remote_address,
                       struct mca_btl_base_registration_handle_t *local_handle,
                       struct mca_btl_base_registration_handle_t *remote_handle, uint64_t compare,
                       uint64_t value, int flags, int order,
                       mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);
int mca_btl_efa_flush(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep);

/* btl_efa_native.c (atomics: btl_efa_native_atomic.c) */
int mca_btl_efa_native_setup(mca_btl_efa_module_t *btl);
void mca_btl_efa_native_fini(mca_btl_efa_module_t *btl);
/* After the core reference is dropped: free what native_fini had to keep. */
void mca_btl_efa_native_fini_released(mca_btl_efa_module_t *btl);
int mca_btl_efa_native_rdma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                            const efa_btl_rdma_args_t *a);
int mca_btl_efa_native_atomic(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                              const efa_btl_rdma_args_t *a);
/* Tell the operation's caller (if it gave a callback) that it is over. */
static inline void mca_btl_efa_rdma_cb_call(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                            const efa_btl_rdma_cb_t *cb, int status) {
    if (cb->cbfunc) {
        cb->cbfunc(&btl->super, ep, cb->local_address, cb->local_handle, cb->cbcontext, cb->cbdata,
                   status);
    }
}
/* An operation outside what the peer's handle covers, refused before it
 * reaches the provider (shm checks no keys; the single-copy path writes
 * itself), as the emulated target refuses: reported (the first few) and
 * failed through the callback with OPAL_ERR_PERM, not as a return code,
 * which callers may retry; returns OPAL_SUCCESS. */
static inline int mca_btl_efa_refuse(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                     const char *what, const efa_btl_rdma_args_t *a) {
    if (btl->refused++ < 10) {
        opal_output(0,
                    "btl:efa: refused a one-sided %s of %zu bytes at 0x%llx: misaligned or "
                    "outside the registration the peer handed out",
                    what, a->size, (unsigned long long)a->remote_address);
    }
    mca_btl_efa_rdma_cb_call(btl, ep, &a->cb, OPAL_ERR_PERM);
    return OPAL_SUCCESS;
}

/* btl_efa_cma.c */
int mca_btl_efa_cma_init(mca_btl_efa_module_t *btl, efa_single_copy_mode_t mode);
/* Single copy to ep stops for good (the kernel refused, or the peer is
 * gone): said once, as the configured mode asks; why names the cause. */
void mca_btl_efa_cma_give_up(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                             const char *why);
void mca_btl_efa_cma_fini(mca_btl_efa_module_t *btl);
/* A failed copy that may pass (the kernel short of memory for it): that
 * operation goes another way, single copy stays for the next. */
static inline bool mca_btl_efa_cma_passing(int err) {
    return ENOMEM == err || EAGAIN == err || EINTR == err;
}
/* A put or get by a direct copy into or out of the peer's memory.  Returns
 * OPAL_ERR_NOT_AVAILABLE when the operation is not for this path (the
 * caller then takes the provider's); anything else means it was handled,
 * the callback already called (refusals included). */
int mca_btl_efa_cma_rdma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                         const efa_btl_rdma_args_t *a);

END_C_DECLS
#endif
