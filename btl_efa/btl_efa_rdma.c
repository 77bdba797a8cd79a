/*
 * btl_efa one-sided operations, carried as requests the target executes
 * (the emulated path; btl_efa_native.c has the provider's RDMA), and the
 * entry points and registrations both paths share.
 *
 * Initiator: a put or get is split into chunks of at most rma_chunk bytes,
 * one request message each.  Only rma_window chunks of an operation are in
 * flight at a time; each answer lets the next chunk go, so a large transfer
 * never floods the provider (or the peer) with all of its chunks at once.
 * The operation completes (callback) when every chunk has been answered,
 * i.e. once the target has executed it, so local completion implies remote
 * completion.  Atomics are one request.
 *
 * Target: every request names a registration key of this process; the
 * range and access rights are checked against this process's own table
 * (never against anything the request claims), and a request that fails
 * the check is answered with an error and writes nothing.  Atomics use CPU
 * atomic instructions, so they are coherent with this process's own CPU
 * atomics and with each other whatever their origin.
 */
#include "btl_efa.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_errno.h>

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "opal/util/show_help.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- target side ---- */

static const char *type_name(int type) {
    switch (type) {
    case EFA_BTL_MSG_PUT:
        return "put";
    case EFA_BTL_MSG_GET:
        return "get";
    default:
        return "atomic";
    }
}

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
    char *text =
        opal_show_help_string("help-btl-efa.txt", "rma-refused", false, opal_process_info.nodename,
                              type_name(type), OPAL_NAME_PRINT(name), range, keystr, why);
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

/* Execute one request against this process's memory.  put: copy 'in' to
 * the target; get: copy the target to 'out'; atomic: *result = old value.
 * Returns an OPAL status; nothing is touched unless the check passed. */
static int execute(mca_btl_efa_module_t *btl, int type, uint64_t src, const efa_btl_rma_t *rma,
                   const void *in, void *out, uint64_t *result) {
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

void mca_btl_efa_rdma_on_request(mca_btl_efa_module_t *btl, const efa_btl_hdr_t *hdr,
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
        status = execute(btl, hdr->type, hdr->src, rma, payload, data, &result);
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

/* ---- initiator side ---- */

static void req_done(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req) {
    mca_btl_efa_endpoint_t *ep = req->endpoint;
    OPAL_THREAD_LOCK(&btl->lock);
    opal_hash_table_remove_value_uint64(&btl->reqs, req->id);
    OPAL_THREAD_UNLOCK(&btl->lock);
    OPAL_THREAD_ADD_FETCH32(&ep->outstanding, -1);
    OPAL_THREAD_ADD_FETCH32(&btl->outstanding, -1);
    /* osc/rdma may pass no callback and rely on flush; nor is the upper
     * layer called once it has gone (see frag_finish). */
    if (req->cbfunc && mca_btl_efa_upper_alive(btl, ep)) {
        req->cbfunc(&btl->super, ep, req->local_address, req->local_handle, req->cbcontext,
                    req->cbdata, req->status);
    }
    free(req);
}

static int issue_chunk(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, int index);

/* Account for 'answered' chunks (with status), then send the chunks the
 * window allows; completes the request when everything is answered.  A
 * chunk that cannot be sent counts as answered with its error and stops
 * the rest from being sent. */
static void rdma_advance(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, int status,
                         int answered) {
    for (;;) {
        OPAL_THREAD_LOCK(&btl->lock);
        req->answered += answered;
        if (OPAL_SUCCESS != status && OPAL_SUCCESS == req->status) {
            req->status = status;
        }
        if (OPAL_SUCCESS != req->status) {
            req->nchunks = req->issued;
        }
        int first = req->issued;
        int n = req->nchunks - req->issued;
        int room = btl->rma_window - (req->issued - req->answered);
        if (n > room) {
            n = room > 0 ? room : 0;
        }
        req->issued += n;
        bool done = req->answered == req->nchunks;
        OPAL_THREAD_UNLOCK(&btl->lock);
        if (done) {
            req_done(btl, req);
            return;
        }
        int failed = 0, err = OPAL_SUCCESS;
        for (int i = 0; i < n; ++i) {
            int rc = issue_chunk(btl, req, first + i);
            if (OPAL_SUCCESS != rc) {
                ++failed;
                err = rc;
            }
        }
        if (0 == failed) {
            return;
        }
        status = err;
        answered = failed;
    }
}

static void chunk_answered(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, int status) {
    rdma_advance(btl, req, status, 1);
}

static efa_btl_rdma_req_t *req_lookup(mca_btl_efa_module_t *btl, uint64_t id) {
    void *value = NULL;
    OPAL_THREAD_LOCK(&btl->lock);
    const int found = opal_hash_table_get_value_uint64(&btl->reqs, id, &value);
    OPAL_THREAD_UNLOCK(&btl->lock);
    return OPAL_SUCCESS == found ? value : NULL;
}

/* A chunk's send failed.  Its request may have timed out meanwhile: looked
 * up by id, like an answer. */
void mca_btl_efa_rdma_fail_chunk(mca_btl_efa_module_t *btl, uint64_t req_id, int status) {
    efa_btl_rdma_req_t *req = req_lookup(btl, req_id);
    if (NULL != req) {
        chunk_answered(btl, req, status);
    }
}

/* Requests failed per call at most (the rest on the next one). */
#define EXPIRE_BATCH 16

int mca_btl_efa_rdma_expire(mca_btl_efa_module_t *btl) {
    static int reported = 0;
    const double now = now_seconds();
    const double limit = (double)mca_btl_efa_component.rma_timeout;
    efa_btl_rdma_req_t *expired[EXPIRE_BATCH];
    int n = 0;
    uint64_t key;
    void *value, *node;
    OPAL_THREAD_LOCK(&btl->lock);
    int rc = opal_hash_table_get_first_key_uint64(&btl->reqs, &key, &value, &node);
    while (OPAL_SUCCESS == rc && n < EXPIRE_BATCH) {
        efa_btl_rdma_req_t *req = value;
        if (now - req->last > limit) {
            expired[n++] = req;
        }
        rc = opal_hash_table_get_next_key_uint64(&btl->reqs, &key, &value, node, &node);
    }
    /* Out of the table first: a late answer or chunk failure finds nothing. */
    for (int i = 0; i < n; ++i) {
        opal_hash_table_remove_value_uint64(&btl->reqs, expired[i]->id);
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    for (int i = 0; i < n; ++i) {
        efa_btl_rdma_req_t *req = expired[i];
        if (reported++ < 10) {
            opal_output(0,
                        "btl:efa: a one-sided %s of %zu bytes to %s got no answer for %d s "
                        "(btl_efa_rma_timeout): it fails; the target's answers were lost or it "
                        "stopped progressing",
                        type_name(req->type), req->size, OPAL_NAME_PRINT(req->endpoint->name),
                        mca_btl_efa_component.rma_timeout);
        }
        req->status = OPAL_ERR_TIMEOUT;
        req_done(btl, req);
    }
    return n;
}

void mca_btl_efa_rdma_on_response(mca_btl_efa_module_t *btl, const efa_btl_rma_t *rma,
                                  const void *payload, size_t len) {
    /* The answer comes from another process: its request id is looked up,
     * never taken for an address. */
    void *value = NULL;
    OPAL_THREAD_LOCK(&btl->lock);
    const int found = opal_hash_table_get_value_uint64(&btl->reqs, rma->req, &value);
    OPAL_THREAD_UNLOCK(&btl->lock);
    if (OPAL_SUCCESS != found) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: an answer for no request in flight (id 0x%llx) dropped",
                            (unsigned long long)rma->req);
        return;
    }
    efa_btl_rdma_req_t *req = value;
    req->last = now_seconds();
    int status = rma->status;
    if (OPAL_SUCCESS == status) {
        if (EFA_BTL_MSG_GET == req->type) {
            if (!efa_btl_wire_get_answer_fits(len, rma->len, rma->offset, req->size)) {
                status = OPAL_ERR_BAD_PARAM;
            } else if (len) {
                memcpy((uint8_t *)req->local_address + rma->offset, payload, len);
            }
        } else if (EFA_BTL_MSG_ATOMIC == req->type && req->local_address) {
            if (4 == req->size) {
                uint32_t v = (uint32_t)rma->operand;
                memcpy(req->local_address, &v, 4);
            } else {
                memcpy(req->local_address, &rma->operand, 8);
            }
        }
    }
    chunk_answered(btl, req, status);
}

void mca_btl_efa_note_one_sided(void) {
    static bool announced = false;
    if (!announced) {
        announced = true; /* the test harness looks for this line */
        opal_output_verbose(1, mca_common_efa_output, "btl:efa: one-sided operations in use");
    }
}

int mca_btl_efa_emulated_rdma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, int type,
                              void *local_address, uint64_t remote_address,
                              struct mca_btl_base_registration_handle_t *local_handle,
                              struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
                              uint32_t op, uint64_t operand, uint64_t operand2, uint32_t aflags,
                              mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                              void *cbdata) {
    efa_btl_rma_t rma;
    memset(&rma, 0, sizeof(rma));
    rma.key = remote_handle->rma.key;
    rma.op = op;
    rma.operand = operand;
    rma.operand2 = operand2;
    rma.flags = aflags;

    if (ep->is_self) {
        /* Own memory: the same checked execution, at once. */
        uint64_t result = 0;
        int status = OPAL_SUCCESS;
        size_t done = 0;
        do {
            size_t n = size - done;
            rma.addr = remote_address + done;
            rma.len = n;
            if (EFA_BTL_MSG_ATOMIC == type) {
                status = execute(btl, type, btl->my_name, &rma, NULL, NULL, &result);
                if (OPAL_SUCCESS == status && local_address) {
                    if (aflags & MCA_BTL_ATOMIC_FLAG_32BIT) {
                        uint32_t v = (uint32_t)result;
                        memcpy(local_address, &v, 4);
                    } else {
                        memcpy(local_address, &result, 8);
                    }
                }
            } else {
                status =
                    execute(btl, type, btl->my_name, &rma, local_address, local_address, &result);
            }
            done += n;
        } while (done < size && OPAL_SUCCESS == status);
        if (cbfunc) {
            cbfunc(&btl->super, ep, local_address, local_handle, cbcontext, cbdata, status);
        }
        return OPAL_SUCCESS;
    }

    size_t chunk = btl->rma_chunk;
    const size_t count =
        (EFA_BTL_MSG_ATOMIC == type || 0 == size) ? 1 : size / chunk + (0 != size % chunk);
    if (count > INT32_MAX) { /* beyond what the chunk counters hold: never truncated */
        return OPAL_ERR_BAD_PARAM;
    }
    const int nchunks = (int)count;
    efa_btl_rdma_req_t *req = calloc(1, sizeof(*req));
    if (NULL == req) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    req->endpoint = ep;
    req->local_address = local_address;
    req->local_handle = local_handle;
    req->cbfunc = cbfunc;
    req->cbcontext = cbcontext;
    req->cbdata = cbdata;
    req->type = type;
    req->size = size;
    req->status = OPAL_SUCCESS;
    req->remote_address = remote_address;
    req->rma = rma;
    req->nchunks = nchunks;
    req->last = now_seconds();
    OPAL_THREAD_LOCK(&btl->lock);
    req->id = ++btl->next_req_id;
    int rc = opal_hash_table_set_value_uint64(&btl->reqs, req->id, req);
    OPAL_THREAD_UNLOCK(&btl->lock);
    if (OPAL_SUCCESS != rc) {
        free(req);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    OPAL_THREAD_ADD_FETCH32(&ep->outstanding, 1);
    OPAL_THREAD_ADD_FETCH32(&btl->outstanding, 1);
    (void)mca_btl_efa_drain_pending(btl);
    rdma_advance(btl, req, OPAL_SUCCESS, 0);
    return OPAL_SUCCESS;
}

/* Build and send chunk 'index' of req. */
static int issue_chunk(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, int index) {
    mca_btl_efa_endpoint_t *ep = req->endpoint;
    const int type = req->type;
    const size_t chunk = btl->rma_chunk;
    const size_t off = (size_t)index * chunk;
    const size_t n =
        (EFA_BTL_MSG_ATOMIC == type) ? 0 : ((req->size - off < chunk) ? req->size - off : chunk);
    efa_btl_frag_t *frag = mca_btl_efa_frag_get(btl);
    if (NULL == frag) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    efa_btl_hdr_t *hdr = (efa_btl_hdr_t *)frag->buf;
    efa_btl_rma_t *r = (efa_btl_rma_t *)(hdr + 1);
    memset(hdr, 0, sizeof(*hdr));
    hdr->type = (uint8_t)type;
    hdr->src = btl->my_name;
    *r = req->rma;
    r->req = req->id;
    r->addr = req->remote_address + off;
    r->len = n;
    r->offset = off;
    size_t payload = 0;
    if (EFA_BTL_MSG_PUT == type) {
        payload = n;
        if (n) {
            memcpy(r + 1, (const uint8_t *)req->local_address + off, n);
        }
    }
    hdr->len = (uint32_t)payload;
    frag->send_len = sizeof(*hdr) + sizeof(*r) + payload;
    frag->dest = ep->addr;
    frag->endpoint = ep;
    frag->req_id = req->id;
    int rc = mca_btl_efa_frag_post(btl, frag);
    if (OPAL_SUCCESS != rc) {
        mca_btl_efa_frag_return(btl, frag);
    }
    return rc;
}

/* ---- entry points: native or emulated, decided once per job ---- */

/* Testing only (btl_efa_debug_corrupt_offset): shift the remote address of
 * puts and atomics, so that the target's check can be seen refusing them. */
static uint64_t corrupt(uint64_t remote_address) {
    return remote_address + (uint64_t)(int64_t)mca_btl_efa_component.debug_corrupt_offset;
}

/* Said once at verbosity 10: how often it happens is of no interest, that
 * it happens explains the emulated requests of a native configuration. */
static void note_uncovered(int type, uint64_t remote_address, size_t size) {
    static bool said = false;
    if (!said) {
        said = true;
        opal_output_verbose(10, mca_common_efa_output,
                            "btl:efa: a %s of %zu bytes at 0x%llx lies outside the handle it came "
                            "with: the target checks it against its own registrations",
                            type_name(type), size, (unsigned long long)remote_address);
    }
}

static int rdma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, int type,
                void *local_address, uint64_t remote_address,
                struct mca_btl_base_registration_handle_t *local_handle,
                struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
                mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
    if (NULL == remote_handle) {
        return OPAL_ERR_BAD_PARAM;
    }
    mca_btl_efa_mode_ready(btl);
    mca_btl_efa_note_one_sided();
    if (EFA_BTL_MSG_PUT == type) {
        remote_address = corrupt(remote_address);
    }
    /* The handle may sit in memory its owner rewrites meanwhile (osc/rdma's
     * shared region table): checked and used as one copy, read once. */
    struct mca_btl_base_registration_handle_t snap = *remote_handle;
    remote_handle = &snap;
    /* A handle that does not cover the range, or a torn one, is not
     * necessarily a wrong operation: osc/rdma can hand out a neighbouring
     * region's handle, or a mixture of two, for attached memory of a
     * dynamic window (see check() in the target side).  The direct paths trust the handle, so such
     * an operation goes to the target, which executes it if its own table covers the range and
     * refuses it otherwise. */
    const bool covered = efa_rma_handle_intact(&remote_handle->rma) &&
                         efa_rma_in_range(&remote_handle->rma, remote_address, size);
    if (!covered) {
        note_uncovered(type, remote_address, size);
    }
    /* Another process of this node: one copy by CMA where possible. */
    if (covered && btl->single_copy && !ep->is_self && 0 != size) {
        int rc = mca_btl_efa_cma_rdma(btl, ep, type, local_address, remote_address, local_handle,
                                      remote_handle, size, cbfunc, cbcontext, cbdata);
        if (OPAL_ERR_NOT_AVAILABLE != rc) {
            return rc;
        }
    }
    /* Own memory: a checked copy is all either path would amount to.  A
     * process of another job may have no provider registration. */
    if (covered && (EFA_BTL_MSG_PUT == type ? btl->native_put : btl->native_get) && !ep->is_self &&
        !ep->foreign_mode) {
        return mca_btl_efa_native_rdma(btl, ep, type, local_address, remote_address, local_handle,
                                       remote_handle, size, cbfunc, cbcontext, cbdata);
    }
    return mca_btl_efa_emulated_rdma(btl, ep, type, local_address, remote_address, local_handle,
                                     remote_handle, size, 0, 0, 0, 0, cbfunc, cbcontext, cbdata);
}

/* Atomics: with native atomics even the process's own memory goes through
 * the provider, so every atomic on a location is executed by the same
 * agent whatever its origin. */
static int atomic(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, void *local_address,
                  uint64_t remote_address, struct mca_btl_base_registration_handle_t *local_handle,
                  struct mca_btl_base_registration_handle_t *remote_handle, uint32_t op,
                  uint64_t operand, uint64_t operand2, int flags,
                  mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
    if (NULL == remote_handle) {
        return OPAL_ERR_BAD_PARAM;
    }
    mca_btl_efa_mode_ready(btl);
    if (OPAL_UNLIKELY(ep->foreign_atomics)) {
        return OPAL_ERR_NOT_SUPPORTED; /* said at add_procs (btl_efa_mode.c) */
    }
    mca_btl_efa_note_one_sided();
    remote_address = corrupt(remote_address);
    struct mca_btl_base_registration_handle_t snap = *remote_handle; /* read once, see rdma() */
    remote_handle = &snap;
    if (btl->native_atomics) {
        return mca_btl_efa_native_atomic(btl, ep, local_address, remote_address, local_handle,
                                         remote_handle, op, operand, operand2, (uint32_t)flags,
                                         cbfunc, cbcontext, cbdata);
    }
    size_t size = (flags & MCA_BTL_ATOMIC_FLAG_32BIT) ? 4 : 8;
    return mca_btl_efa_emulated_rdma(btl, ep, EFA_BTL_MSG_ATOMIC, local_address, remote_address,
                                     local_handle, remote_handle, size, op, operand, operand2,
                                     (uint32_t)flags, cbfunc, cbcontext, cbdata);
}

int mca_btl_efa_put(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                    void *local_address, uint64_t remote_address,
                    struct mca_btl_base_registration_handle_t *local_handle,
                    struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
                    int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                    void *cbdata) {
    (void)flags;
    (void)order;
    return rdma((mca_btl_efa_module_t *)base, ep, EFA_BTL_MSG_PUT, local_address, remote_address,
                local_handle, remote_handle, size, cbfunc, cbcontext, cbdata);
}

int mca_btl_efa_get(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                    void *local_address, uint64_t remote_address,
                    struct mca_btl_base_registration_handle_t *local_handle,
                    struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
                    int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                    void *cbdata) {
    (void)flags;
    (void)order;
    return rdma((mca_btl_efa_module_t *)base, ep, EFA_BTL_MSG_GET, local_address, remote_address,
                local_handle, remote_handle, size, cbfunc, cbcontext, cbdata);
}

int mca_btl_efa_aop(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                    uint64_t remote_address,
                    struct mca_btl_base_registration_handle_t *remote_handle,
                    mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                    mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
    (void)order;
    return atomic((mca_btl_efa_module_t *)base, ep, NULL, remote_address, NULL, remote_handle,
                  (uint32_t)op, operand, 0, flags, cbfunc, cbcontext, cbdata);
}

int mca_btl_efa_afop(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                     void *local_address, uint64_t remote_address,
                     struct mca_btl_base_registration_handle_t *local_handle,
                     struct mca_btl_base_registration_handle_t *remote_handle,
                     mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                     mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
    (void)order;
    return atomic((mca_btl_efa_module_t *)base, ep, local_address, remote_address, local_handle,
                  remote_handle, (uint32_t)op, operand, 0, flags, cbfunc, cbcontext, cbdata);
}

int mca_btl_efa_acswap(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep,
                       void *local_address, uint64_t remote_address,
                       struct mca_btl_base_registration_handle_t *local_handle,
                       struct mca_btl_base_registration_handle_t *remote_handle, uint64_t compare,
                       uint64_t value, int flags, int order,
                       mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata) {
    (void)order;
    return atomic((mca_btl_efa_module_t *)base, ep, local_address, remote_address, local_handle,
                  remote_handle, EFA_BTL_OP_CSWAP, compare, value, flags, cbfunc, cbcontext,
                  cbdata);
}

int mca_btl_efa_flush(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *ep) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    volatile int32_t *count = ep ? &ep->outstanding : &btl->outstanding;
    /* Progress at least once, even with nothing outstanding: a process
     * that flushes in a loop (a spin lock on its own window) must still
     * execute the requests its peers wait for, as the target of the
     * emulated path and of software providers' RMA. */
    /* Bounded: emulated requests fail after btl_efa_rma_timeout without an
     * answer (checked here too); what the provider holds (native) gets the
     * same time again before flush gives up on it with a message. */
    const double deadline = now_seconds() + 2.0 * mca_btl_efa_component.rma_timeout;
    unsigned spins = 0;
    do {
        mca_btl_efa_drain_pending(btl);
        opal_progress();
        if (*count > 0 && 0 == (++spins & 1023)) {
            (void)mca_btl_efa_rdma_expire(btl);
            if (*count > 0 && now_seconds() > deadline) {
                opal_output(0,
                            "btl:efa: flush gives up after %d s with %d one-sided operation(s) "
                            "still outstanding (the provider has not completed them)",
                            2 * mca_btl_efa_component.rma_timeout, (int)*count);
                return OPAL_ERR_TIMEOUT;
            }
        }
    } while (*count > 0);
    return OPAL_SUCCESS;
}

/* ---- registration ---- */

/* The libfabric access a registration needs for the BTL flags it was
 * asked with.  Every registration may be the local source of a write (and
 * of the two-sided sends the BTL never does from it); only asked-for rights
 * beyond that are added, so read-only memory (a constant send buffer) can
 * still be registered for RDMA read. */
static uint64_t fi_access_of(uint32_t flags) {
    uint64_t access = FI_WRITE | FI_SEND;
    if (flags & MCA_BTL_REG_FLAG_LOCAL_WRITE) {
        access |= FI_READ | FI_RECV;
    }
    if (flags & MCA_BTL_REG_FLAG_REMOTE_READ) {
        access |= FI_REMOTE_READ;
    }
    if (flags & MCA_BTL_REG_FLAG_REMOTE_WRITE) {
        access |= FI_REMOTE_WRITE;
    }
    if (flags & MCA_BTL_REG_FLAG_REMOTE_ATOMIC) {
        access |= FI_REMOTE_READ | FI_REMOTE_WRITE;
    }
    return access;
}

struct mca_btl_base_registration_handle_t *
mca_btl_efa_register_mem(struct mca_btl_base_module_t *base,
                         struct mca_btl_base_endpoint_t *endpoint, void *addr, size_t size,
                         uint32_t flags) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    (void)endpoint;
    mca_btl_efa_mode_ready(btl); /* whether peers will need a provider MR */
    efa_btl_reg_t *reg = calloc(1, sizeof(*reg));
    if (NULL == reg) {
        return NULL;
    }
    /* The emulated path needs no MR (the target copies), the native one
     * does: peers name it by key. */
    if ((btl->native_put || btl->native_get || btl->native_atomics) && size > 0) {
        int err = 0;
        reg->mr = efa_core_mr_acquire(btl->core, addr, size, fi_access_of(flags), &err);
        if (NULL == reg->mr) {
            opal_output_verbose(10, mca_common_efa_output,
                                "btl:efa: cannot register %zu bytes at %p: %s", size, addr,
                                fi_strerror(-err));
            free(reg);
            return NULL;
        }
        reg->handle.rma.fi_key = efa_mr_key(reg->mr);
        reg->handle.rma.mr_base = (uint64_t)efa_mr_base(reg->mr);
        reg->handle.rma.flags |= EFA_RMA_HANDLE_HAS_MR;
    }
    reg->handle.rma.base = (uint64_t)(uintptr_t)addr;
    reg->handle.rma.len = size;
    reg->handle.rma.access = flags;
    reg->handle.rma.owner_pid = btl->my_pid; /* 0 unless single copy is on */
    OPAL_THREAD_LOCK(&btl->lock);
    reg->handle.rma.key = ++btl->next_key;
    efa_rma_handle_seal(&reg->handle.rma);
    opal_hash_table_set_value_uint64(&btl->regs, reg->handle.rma.key, reg);
    OPAL_THREAD_UNLOCK(&btl->lock);
    return &reg->handle;
}

int mca_btl_efa_deregister_mem(struct mca_btl_base_module_t *base,
                               struct mca_btl_base_registration_handle_t *handle) {
    mca_btl_efa_module_t *btl = (mca_btl_efa_module_t *)base;
    efa_btl_reg_t *reg = (efa_btl_reg_t *)handle; /* the handle is the first member */
    OPAL_THREAD_LOCK(&btl->lock);
    opal_hash_table_remove_value_uint64(&btl->regs, handle->rma.key);
    OPAL_THREAD_UNLOCK(&btl->lock);
    if (reg->mr) {
        efa_core_mr_release(btl->core, reg->mr);
    }
    free(reg);
    return OPAL_SUCCESS;
}

void mca_btl_efa_rdma_module_setup(mca_btl_efa_module_t *btl) {
    OBJ_CONSTRUCT(&btl->regs, opal_hash_table_t);
    opal_hash_table_init(&btl->regs, 256);
    /* Keys start at a random point so a stale key from an earlier run of a
     * component reload is unlikely to name a live registration. */
    btl->next_key = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)btl;
    OBJ_CONSTRUCT(&btl->reqs, opal_hash_table_t);
    opal_hash_table_init(&btl->reqs, 256);
    /* Likewise for request ids: a late answer to an earlier run's request
     * is unlikely to name one in flight. */
    btl->next_req_id = btl->next_key << 16;
}

void mca_btl_efa_rdma_module_fini(mca_btl_efa_module_t *btl) {
    uint64_t key;
    void *value, *node;
    if (OPAL_SUCCESS == opal_hash_table_get_first_key_uint64(&btl->regs, &key, &value, &node)) {
        do {
            efa_btl_reg_t *reg = value;
            if (reg->mr) {
                efa_core_mr_release(btl->core, reg->mr);
            }
            free(reg);
        } while (OPAL_SUCCESS ==
                 opal_hash_table_get_next_key_uint64(&btl->regs, &key, &value, node, &node));
    }
    OBJ_DESTRUCT(&btl->regs);
    /* Requests still in flight at finalize are abandoned (their answers
     * would be dropped), as before: their memory is left alone. */
    OBJ_DESTRUCT(&btl->reqs);
}
