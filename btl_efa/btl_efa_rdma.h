/*
 * btl_efa's one-sided entry points (btl_efa_rdma.c), the module's function
 * table's (btl_efa_module.c): each chooses the path of its operation.
 */
#ifndef MCA_BTL_EFA_RDMA_H
#define MCA_BTL_EFA_RDMA_H

#include "btl_efa.h"

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

END_C_DECLS
#endif
