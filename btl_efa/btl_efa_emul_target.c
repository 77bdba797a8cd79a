/*
 * btl_efa's emulated one-sided protocol, target side: execute a peer's
 * put, get or atomic request against this process's memory and answer it
 * (the initiator's side: btl_efa_emul_initiator.c; the protocol:
 * btl_efa_emul.h).
 *
 * Every request names a registration key of this process; the range and
 * access rights are checked against this process's own table (never
 * against anything the request claims), and a request that fails the
 * check is answered with an error and writes nothing.  Atomics use CPU
 * atomic instructions, so they are coherent with this process's own CPU
 * atomics and with each other whatever their origin.
 *
 * The answer is a message (EFA_BTL_MSG_RESP) through the send path: the
 * target never calls into the initiator's code, even for its own requests.
 */
#include "btl_efa_emul.h"

#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"
#include "opal/util/show_help.h"

static void report_refusal(mca_btl_efa_module_t *btl, int type, uint64_t src, uint64_t addr,
                           uint64_t len, uint64_t key, const char *why) {
    if (btl->refused++ >= 10) {
        return;
    }
    opal_process_name_t name;
    memcpy(&name, &src, sizeof(name));
    char range[128], keystr[32];
    snprintf(range, sizeof(range), "0x%llx (%llu bytes)", (unsigned long long)addr,
             (unsigned long long)len);
    snprintf(keystr, sizeof(keystr), "%llu", (unsigned long long)key);
    char *text = opal_show_help_string("help-btl-efa.txt", "rma-refused", false,
                                       opal_process_info.nodename, mca_btl_efa_emul_type_name(type),
                                       OPAL_NAME_PRINT(name), range, keystr, why);
    if (text) {
        fputs(text, stderr);
        fflush(stderr);
        free(text);
    }
}

static bool covers(const efa_btl_reg_t *reg, uint64_t addr, uint64_t len, uint32_t access) {
    return efa_rma_in_range(&reg->handle.rma, addr, len) &&
           (reg->handle.rma.access & access) == access;
}

/* Any live registration of this process that covers [addr, addr+len) with
 * the access; the lock is held by the caller. */
static const efa_btl_reg_t *find_covering(mca_btl_efa_module_t *btl, uint64_t addr, uint64_t len,
                                          uint32_t access) {
    uint64_t key;
    void *value, *node;
    int rc = opal_hash_table_get_first_key_uint64(&btl->regs, &key, &value, &node);
    while (OPAL_SUCCESS == rc) {
        if (covers(value, addr, len, access)) {
            return value;
        }
        rc = opal_hash_table_get_next_key_uint64(&btl->regs, &key, &value, node, &node);
    }
    return NULL;
}

/* Check [addr, addr+len) and the access against this process's own table;
 * the lock is held by the caller.  Returns NULL (and *why) when refused.
 * The registration the key names is tried first; when it does not cover
 * the range, any other live registration that does is accepted.  The key
 * is only the initiator's hint: osc/rdma on a dynamic window reads a
 * peer's table of attached regions from shared memory without the table's
 * lock, so while the peer attaches (and shifts the table) it can pair a
 * region's range with its neighbour's handle.  The operation is still
 * legitimate when the memory is registered here, and this table alone
 * says what is. */
static const efa_btl_reg_t *check(mca_btl_efa_module_t *btl, uint64_t key, uint64_t addr,
                                  uint64_t len, uint32_t access, const char **why) {
    void *value = NULL;
    const bool known = OPAL_SUCCESS == opal_hash_table_get_value_uint64(&btl->regs, key, &value);
    if (known && covers(value, addr, len, access)) {
        return value;
    }
    const efa_btl_reg_t *other = find_covering(btl, addr, len, access);
    if (NULL != other) {
        return other;
    }
    if (!known) {
        *why = "no such registration";
    } else if (!efa_rma_in_range(&((const efa_btl_reg_t *)value)->handle.rma, addr, len)) {
        *why = "outside the registered range";
    } else {
        *why = "the registration does not grant this access";
    }
    return NULL;
}

#define EFA_BTL_ATOMIC_BODY(T, ST)                                                                 \
    do {                                                                                           \
        T *p = (T *)(uintptr_t)addr;                                                               \
        T a = (T)operand, b = (T)operand2, old;                                                    \
        switch (op) {                                                                              \
        case MCA_BTL_ATOMIC_ADD:                                                                   \
            old = __atomic_fetch_add(p, a, __ATOMIC_SEQ_CST);                                      \
            break;                                                                                 \
        case MCA_BTL_ATOMIC_AND:                                                                   \
            old = __atomic_fetch_and(p, a, __ATOMIC_SEQ_CST);                                      \
            break;                                                                                 \
        case MCA_BTL_ATOMIC_OR:                                                                    \
            old = __atomic_fetch_or(p, a, __ATOMIC_SEQ_CST);                                       \
            break;                                                                                 \
        case MCA_BTL_ATOMIC_XOR:                                                                   \
            old = __atomic_fetch_xor(p, a, __ATOMIC_SEQ_CST);                                      \
            break;                                                                                 \
        case MCA_BTL_ATOMIC_SWAP:                                                                  \
            old = __atomic_exchange_n(p, a, __ATOMIC_SEQ_CST);                                     \
            break;                                                                                 \
        case EFA_BTL_OP_CSWAP:                                                                     \
            old = a;                                                                               \
            (void)__atomic_compare_exchange_n(p, &old, b, false, __ATOMIC_SEQ_CST,                 \
                                              __ATOMIC_SEQ_CST);                                   \
            break;                                                                                 \
        default: {                                                                                 \
            T cur = __atomic_load_n(p, __ATOMIC_SEQ_CST), next;                                    \
            do {                                                                                   \
                switch (op) {                                                                      \
                case MCA_BTL_ATOMIC_MIN:                                                           \
                    next = ((ST)a < (ST)cur) ? a : cur;                                            \
                    break;                                                                         \
                case MCA_BTL_ATOMIC_MAX:                                                           \
                    next = ((ST)a > (ST)cur) ? a : cur;                                            \
                    break;                                                                         \
                case MCA_BTL_ATOMIC_LAND:                                                          \
                    next = (T)(cur && a);                                                          \
                    break;                                                                         \
                case MCA_BTL_ATOMIC_LOR:                                                           \
                    next = (T)(cur || a);                                                          \
                    break;                                                                         \
                default: /* LXOR */                                                                \
                    next = (T)(!cur != !a);                                                        \
                    break;                                                                         \
                }                                                                                  \
            } while (!__atomic_compare_exchange_n(p, &cur, next, false, __ATOMIC_SEQ_CST,          \
                                                  __ATOMIC_SEQ_CST));                              \
            old = cur;                                                                             \
        }                                                                                          \
        }                                                                                          \
        *result = (uint64_t)old;                                                                   \
    } while (0)

/* The atomic flags travel as efa_btl_wire_atomic_extent reads them. */
_Static_assert(EFA_BTL_WIRE_ATOMIC_32BIT == MCA_BTL_ATOMIC_FLAG_32BIT, "32-bit atomic flag");
_Static_assert(EFA_BTL_WIRE_ATOMIC_FLOAT == MCA_BTL_ATOMIC_FLAG_FLOAT, "float atomic flag");

static bool known_op(uint32_t op) {
    switch (op) {
    case MCA_BTL_ATOMIC_ADD:
    case MCA_BTL_ATOMIC_AND:
    case MCA_BTL_ATOMIC_OR:
    case MCA_BTL_ATOMIC_XOR:
    case MCA_BTL_ATOMIC_LAND:
    case MCA_BTL_ATOMIC_LOR:
    case MCA_BTL_ATOMIC_LXOR:
    case MCA_BTL_ATOMIC_SWAP:
    case MCA_BTL_ATOMIC_MIN:
    case MCA_BTL_ATOMIC_MAX:
    case EFA_BTL_OP_CSWAP:
        return true;
    default:
        return false;
    }
}

/* See btl_efa_emul.h.  Also the initiator's path for its own memory. */
int mca_btl_efa_emul_execute(mca_btl_efa_module_t *btl, int type, uint64_t src,
                             const efa_btl_rma_t *rma, const void *in, void *out,
                             uint64_t *result) {
    const char *why = NULL;
    uint32_t access;
    uint64_t len = rma->len, addr = rma->addr;
    uint32_t op = rma->op;
    uint64_t operand = rma->operand, operand2 = rma->operand2;
    switch (type) {
    case EFA_BTL_MSG_PUT:
        access = MCA_BTL_REG_FLAG_REMOTE_WRITE;
        break;
    case EFA_BTL_MSG_GET:
        access = MCA_BTL_REG_FLAG_REMOTE_READ;
        break;
    default: {
        access = MCA_BTL_REG_FLAG_REMOTE_ATOMIC;
        const efa_btl_wire_atomic_t extent = efa_btl_wire_atomic_extent(addr, rma->flags, &len);
        if (!known_op(op) || EFA_BTL_WIRE_ATOMIC_UNSUPPORTED == extent) {
            report_refusal(btl, type, src, addr, len, rma->key, "unsupported atomic operation");
            return OPAL_ERR_NOT_SUPPORTED;
        }
        if (EFA_BTL_WIRE_ATOMIC_MISALIGNED == extent) {
            report_refusal(btl, type, src, addr, len, rma->key, "misaligned atomic");
            return OPAL_ERR_BAD_PARAM;
        }
        if (btl->native_atomics) {
            /* This job's atomics go through the provider, which need not be
             * atomic with respect to this CPU's: only a process that did
             * not agree with the job (another job's) sends these. */
            report_refusal(btl, type, src, addr, len, rma->key,
                           "this job executes atomics by the provider (btl_efa_atomic_mode)");
            return OPAL_ERR_NOT_SUPPORTED;
        }
    }
    }
    OPAL_THREAD_LOCK(&btl->lock);
    if (NULL == check(btl, rma->key, addr, len, access, &why)) {
        OPAL_THREAD_UNLOCK(&btl->lock);
        report_refusal(btl, type, src, addr, len, rma->key, why);
        return OPAL_ERR_PERM;
    }
    /* The lock stays held: a concurrent deregistration waits for the copy. */
    switch (type) {
    case EFA_BTL_MSG_PUT:
        if (len) {
            memcpy((void *)(uintptr_t)addr, in, len);
        }
        break;
    case EFA_BTL_MSG_GET:
        if (len) {
            memcpy(out, (const void *)(uintptr_t)addr, len);
        }
        break;
    default:
        if (4 == len) {
            EFA_BTL_ATOMIC_BODY(uint32_t, int32_t);
        } else {
            EFA_BTL_ATOMIC_BODY(uint64_t, int64_t);
        }
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    return OPAL_SUCCESS;
}

/* A peer's request (from btl_efa_recv.c): executed unless refused, and
 * answered either way, so the initiator's operation completes. */
void mca_btl_efa_emul_on_request(mca_btl_efa_module_t *btl, const efa_btl_hdr_t *hdr,
                                 const efa_btl_rma_t *rma, const void *payload) {
    mca_btl_efa_endpoint_t *ep = mca_btl_efa_endpoint_by_name(btl, hdr->src, NULL);
    if (NULL == ep) {
        opal_output(0, "btl:efa: a request from an unknown process cannot be answered");
        return;
    }
    efa_btl_frag_t *frag = mca_btl_efa_frag_get(btl);
    if (NULL == frag) {
        opal_output(0, "btl:efa: out of memory answering a request");
        return;
    }
    efa_btl_hdr_t *rh = (efa_btl_hdr_t *)frag->buf;
    efa_btl_rma_t *rr = (efa_btl_rma_t *)(rh + 1);
    uint8_t *data = (uint8_t *)(rr + 1);
    uint64_t result = 0;
    int status;
    size_t data_len = 0;
    if (btl->finalizing) {
        /* The layers that registered this process's memory are closed:
         * what they left registered may be freed memory by now. */
        status = OPAL_ERR_UNREACH;
    } else if (!efa_btl_wire_request_len_ok(hdr->type, hdr->len, rma->len, btl->rma_chunk)) {
        /* A put carries what it names; a get asks for no more than the
         * answer's fragment holds. */
        status = OPAL_ERR_BAD_PARAM;
    } else {
        status = mca_btl_efa_emul_execute(btl, hdr->type, hdr->src, rma, payload, data, &result);
        if (EFA_BTL_MSG_GET == hdr->type && OPAL_SUCCESS == status) {
            data_len = rma->len;
        }
    }
    memset(rh, 0, sizeof(*rh));
    memset(rr, 0, sizeof(*rr));
    rh->type = EFA_BTL_MSG_RESP;
    rh->len = (uint32_t)data_len;
    rh->src = btl->my_name;
    rr->req = rma->req;
    rr->offset = rma->offset;
    rr->len = rma->len;
    rr->operand = result;
    rr->status = status;
    frag->send_len = sizeof(*rh) + sizeof(*rr) + data_len;
    frag->dest = ep->addr;
    frag->endpoint = ep;
    if (1 == mca_btl_efa_component.debug_lose_answers) {
        mca_btl_efa_frag_return(btl, frag); /* testing: the answer is lost */
        return;
    }
    if (2 == mca_btl_efa_component.debug_lose_answers) {
        rr->req = ~rma->req; /* testing: names a request never issued */
    }
    if (OPAL_SUCCESS != mca_btl_efa_frag_post(btl, frag)) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: an answer to a one-sided request cannot be sent; the "
                            "initiator's operation will time out");
        mca_btl_efa_frag_return(btl, frag);
    }
}
