/*
 * btl_efa's atomics by the provider (fi_atomic, fi_fetch_atomic,
 * fi_compare_atomic), one element of 4 or 8 bytes against the target's MR,
 * always over the first NIC: atomics on one location through two NICs of
 * the target would not be atomic with each other.  Operands and results
 * sit in the rop's scratch words (registered where the provider wants
 * descriptors); completion is
 * btl_efa_native.c's (a fetched result copied out there).
 */
#include "btl_efa_native.h"

#include <string.h>

#include <rdma/fi_atomic.h>

/* The provider's operation for a BTL atomic op (false: none). */
static bool fi_op_of(uint32_t op, enum fi_op *out) {
    switch (op) {
    case MCA_BTL_ATOMIC_ADD:
        *out = FI_SUM;
        break;
    case MCA_BTL_ATOMIC_AND:
        *out = FI_BAND;
        break;
    case MCA_BTL_ATOMIC_OR:
        *out = FI_BOR;
        break;
    case MCA_BTL_ATOMIC_XOR:
        *out = FI_BXOR;
        break;
    case MCA_BTL_ATOMIC_LAND:
        *out = FI_LAND;
        break;
    case MCA_BTL_ATOMIC_LOR:
        *out = FI_LOR;
        break;
    case MCA_BTL_ATOMIC_LXOR:
        *out = FI_LXOR;
        break;
    case MCA_BTL_ATOMIC_SWAP:
        *out = FI_ATOMIC_WRITE; /* fetching: the old value comes back */
        break;
    case MCA_BTL_ATOMIC_MIN:
        *out = FI_MIN;
        break;
    case MCA_BTL_ATOMIC_MAX:
        *out = FI_MAX;
        break;
    case EFA_BTL_OP_CSWAP:
        *out = FI_CSWAP;
        break;
    default:
        return false;
    }
    return true;
}

/* Scratch word w holds v in the operation's width (4 bytes at its start
 * for 32-bit atomics). */
static void put_word(efa_btl_rop_t *rop, int w, uint64_t v, size_t size) {
    if (4 == size) {
        uint32_t v32 = (uint32_t)v;
        memcpy(&rop->scratch[w], &v32, 4);
    } else {
        rop->scratch[w] = v;
    }
}

int mca_btl_efa_native_atomic(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                              const efa_btl_rdma_args_t *a) {
    const size_t size = a->size; /* 4 or 8 (MCA_BTL_ATOMIC_FLAG_32BIT) */
    const uint64_t operand = a->operand;
    const enum fi_datatype dt = 4 == size ? FI_INT32 : FI_INT64;
    enum fi_op aop;
    if ((a->aflags & MCA_BTL_ATOMIC_FLAG_FLOAT) || !fi_op_of(a->op, &aop)) {
        return OPAL_ERR_NOT_SUPPORTED;
    }
    uint64_t raddr;
    /* A torn handle (see efa_rma_handle_t) cannot go to the target's CPU
     * instead as put and get do: native atomics must not mix with its. */
    if (a->remote_address % size || !efa_rma_handle_intact(&a->remote_handle->rma) ||
        !efa_rma_remote_addr(&a->remote_handle->rma, btl->native.mr_virt_addr, a->remote_address,
                             size, &raddr)) {
        return mca_btl_efa_refuse(btl, ep, "atomic", a);
    }
    efa_btl_rop_t *rop = mca_btl_efa_rop_get(btl);
    if (NULL == rop) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    rop->endpoint = ep;
    rop->cb = a->cb;
    const uint64_t rkey = a->remote_handle->rma.fi_key;
    const fi_addr_t dest = ep->addr;
    uint64_t *w = rop->scratch;
    void *d = rop->scratch_desc;
    int rc;
    OPAL_THREAD_ADD_FETCH32(&ep->outstanding, 1);
    OPAL_THREAD_ADD_FETCH32(&btl->outstanding, 1);
    rop->posted = true; /* see post_piece */
    if (FI_CSWAP == aop) {
        /* operand is the value compared, operand2 the one swapped in */
        put_word(rop, 0, a->operand2, size);
        put_word(rop, 1, operand, size);
        rop->result_size = (uint32_t)size;
        rc = efa_ctx_compare_atomic(btl->ctx, dt, &w[0], d, &w[1], d, &w[2], d, dest, raddr, rkey,
                                    &rop->op);
    } else if (a->cb.local_address) {
        put_word(rop, 0, operand, size);
        rop->result_size = (uint32_t)size;
        rc = efa_ctx_fetch_atomic(btl->ctx, aop, dt, &w[0], d, &w[2], d, dest, raddr, rkey,
                                  &rop->op);
    } else {
        put_word(rop, 0, operand, size);
        rc = efa_ctx_atomic(btl->ctx, aop, dt, &w[0], d, dest, raddr, rkey, &rop->op);
    }
    if (0 != rc) {
        rop->posted = false;
        OPAL_THREAD_ADD_FETCH32(&ep->outstanding, -1);
        OPAL_THREAD_ADD_FETCH32(&btl->outstanding, -1);
        mca_btl_efa_rop_return(btl, rop);
        return mca_common_efa_fi_to_opal(rc);
    }
    return OPAL_SUCCESS;
}
