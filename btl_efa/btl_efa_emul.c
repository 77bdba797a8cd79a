/*
 * btl_efa's emulated one-sided operations, the initiator's side (the
 * protocol: btl_efa_emul.h; the target's side: btl_efa_emul_target.c):
 * an operation's requests, the table of operations in flight, the
 * target's answers and the expiry of operations that get none.  A put
 * or get is split into chunks of at most emul.chunk bytes, one request
 * message each.  Only emul.window chunks of an operation are in flight at a
 * time; each answer lets the next chunk go, so a large transfer never
 * floods the provider (or the peer) with all of its chunks at once.  The
 * operation completes (its callback) when every chunk has been answered,
 * i.e. once the target has executed it, so local completion implies remote
 * completion.  Atomics are one request.
 *
 * Operations in flight are found by id (emul.reqs, efa_inflight.h): an
 * answer comes from another process, so its id is looked up, never taken
 * for an address, and an operation that expired is simply no longer found.
 * Whoever touches an operation holds a claim on it (the initiator while it
 * issues chunks, an answer or a send failure while it writes into it): the
 * expiry, in another thread, takes only operations nobody holds, and
 * exactly one caller completes each.
 */
#include "btl_efa_emul.h"
#include "btl_efa_rdma.h"
#include "btl_efa_ring.h"

#include <stdlib.h>
#include <string.h>

#include "opal/util/error.h"
#include "opal/util/output.h"

/* The initiator's buffer may be device memory (cb.local_device, decided
 * by rdma(), which sends every such operation here): then only the
 * device's copy touches it. */
static int copy_local(bool device, void *dst, const void *src, size_t n) {
    if (OPAL_UNLIKELY(device)) {
        return 0 == efa_device_copy(dst, src, n) ? OPAL_SUCCESS : OPAL_ERROR;
    }
    memcpy(dst, src, n);
    return OPAL_SUCCESS;
}

/* A put or get of this process's own memory from or into a device
 * buffer: through a host buffer of one chunk, the window being host or
 * device memory. */
static int self_from_device(mca_btl_efa_module_t *btl, int type, const efa_btl_rma_t *whole,
                            uint8_t *local) {
    const size_t chunk = btl->emul.chunk;
    uint8_t *bounce = malloc(chunk);
    if (NULL == bounce) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    efa_btl_rma_t rma = *whole;
    uint64_t result = 0;
    int status = OPAL_SUCCESS;
    uint64_t off = 0;
    do { /* (once for 0 bytes: the table still checks the key and range) */
        rma.addr = whole->addr + off;
        rma.len = whole->len - off < chunk ? whole->len - off : chunk;
        if (EFA_BTL_MSG_PUT == type) {
            status = copy_local(true, bounce, local + off, rma.len);
        }
        if (OPAL_SUCCESS == status) {
            status =
                mca_btl_efa_emul_execute(btl, type, btl->my_name, &rma, bounce, bounce, &result);
        }
        if (OPAL_SUCCESS == status && EFA_BTL_MSG_GET == type) {
            status = copy_local(true, local + off, bounce, rma.len);
        }
        off += rma.len;
    } while (off < whole->len && OPAL_SUCCESS == status);
    free(bounce);
    return status;
}

/* Requests kept for the next operations (emul.free_reqs, under the module
 * lock): an atomic or small put/get of one node is a few hundred
 * instructions, and malloc and free took as many again. */
#define EFA_BTL_FREE_REQS_MAX 64

static void req_put(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req) {
    free(req->answered_bits);
    req->answered_bits = NULL;
    OPAL_THREAD_LOCK(&btl->lock);
    if (btl->emul.num_free_reqs < EFA_BTL_FREE_REQS_MAX) {
        req->next = btl->emul.free_reqs;
        btl->emul.free_reqs = req;
        ++btl->emul.num_free_reqs;
        req = NULL;
    }
    OPAL_THREAD_UNLOCK(&btl->lock);
    free(req);
}

/* The operation is over (answered, failed or expired) and out of the
 * table, its last claim dropped: its caller is told through the
 * completion callback it gave. */
static void req_done(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req) {
    mca_btl_efa_endpoint_t *ep = req->endpoint;
    if (NULL != req->on_over) { /* its maker keeps a record of it */
        req->on_over(btl, req);
    }
    OPAL_THREAD_ADD_FETCH32(&ep->outstanding, -1);
    OPAL_THREAD_ADD_FETCH32(&btl->outstanding, -1);
    /* Said here too: Open MPI 4.1's osc/rdma drops a failed put's or
     * get's status (the program would see wrong bytes and no error).  (A
     * timeout was said as it expired.) */
    static int said = 0;
    if (OPAL_UNLIKELY(OPAL_SUCCESS != req->status) && OPAL_ERR_TIMEOUT != req->status &&
        !req->cb.internal && __atomic_fetch_add(&said, 1, __ATOMIC_RELAXED) < 10) {
        opal_output(0, "btl:efa: a one-sided %s of %zu bytes to %s failed: %s",
                    mca_btl_efa_emul_type_name(req->type), req->size, OPAL_NAME_PRINT(ep->name),
                    opal_strerror(req->status));
    }
    /* osc/rdma may pass no callback and rely on flush; nor is the upper
     * layer called once it has gone (see frag_finish); btl_efa's own
     * callback is (a piece's parent must hear of every piece). */
    if (req->cb.internal || mca_btl_efa_upper_alive(btl, ep)) {
        mca_btl_efa_rdma_cb_call(btl, ep, &req->cb, req->status);
    }
    req_put(btl, req);
}

static int issue_chunk(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, int index);

/* Drop the caller's claim on req (over: every chunk is answered); the
 * caller that drops the last claim of an operation that is over completes
 * it. */
static void drop_claim(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, bool over) {
    const uint64_t id = req->id;
    if (efa_inflight_release(btl->emul.reqs, id, over)) {
        req_done(btl, req);
    }
}

/* Account for 'answered' chunks (with status), then send the chunks the
 * window allows.  A chunk that cannot be sent counts as answered with its
 * error and stops the rest from being sent.  The caller holds a claim on
 * req; true when everything is answered (the operation is over). */
static bool rdma_advance(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, int status,
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
        int room = btl->emul.window - (req->issued - req->answered);
        if (n > room) {
            n = room > 0 ? room : 0;
        }
        req->issued += n;
        bool done = req->answered == req->nchunks;
        OPAL_THREAD_UNLOCK(&btl->lock);
        if (done) {
            return true;
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
            return false;
        }
        status = err;
        answered = failed;
    }
}

/* One chunk of req (claimed by the caller) answered with status; the
 * claim is dropped. */
static void chunk_answered(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, int status) {
    drop_claim(btl, req, rdma_advance(btl, req, status, 1));
}

static bool first_answer(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, uint64_t offset);

/* A chunk's send failed (the send path, through btl->emul.chunk_send_failed;
 * msg: the chunk's request as sent).  Its request may have timed out
 * meanwhile: claimed by id, like an answer.  A send taken as failed may
 * have arrived all the same (a NIC's failure without numbered messages, a
 * send the peer deadline failed while the provider held it): the target's
 * answer and the failure count as one, whichever comes first, or the
 * operation would be over with a chunk still in flight. */
static void fail_chunk(mca_btl_efa_module_t *btl, const void *msg, int status) {
    efa_btl_rma_t r;
    memcpy(&r, (const efa_btl_hdr_t *)msg + 1, sizeof(r));
    efa_btl_rdma_req_t *req = efa_inflight_claim(btl->emul.reqs, r.req, mca_btl_efa_now());
    if (NULL == req) {
        return;
    }
    if (!first_answer(btl, req, r.offset)) {
        drop_claim(btl, req, false); /* answered already */
        return;
    }
    chunk_answered(btl, req, status);
}

/* Requests failed per call at most (the rest on the next one). */
#define EXPIRE_BATCH 16

/* Also from flush (btl_efa_rdma.c), which waits for these operations, and
 * from the component's progress. */
int mca_btl_efa_emul_expire(mca_btl_efa_module_t *btl) {
    static int reported = 0;
    const double now = mca_btl_efa_now();
    const double limit = (double)mca_btl_efa_component.rma_timeout;
    void *expired[EXPIRE_BATCH];
    /* Time this process spent away from progress (a compute phase between
     * a put and its flush) is no silence of the target's: the answers may
     * be waiting in the provider. */
    const uint64_t away = efa_core_away_ms(btl->core);
    const uint64_t seen = __atomic_exchange_n(&btl->emul.away_seen, away, __ATOMIC_RELAXED);
    const double paused = away > seen ? (double)(away - seen) / 1000.0 : 0.0;
    if (OPAL_UNLIKELY(paused > 0.0)) {
        efa_inflight_pause(btl->emul.reqs, paused, now);
    }
    /* Out of the table, and held by nobody: a late answer or chunk failure
     * finds nothing, and none is writing into them now. */
    const int n = (int)efa_inflight_expire(btl->emul.reqs, now, limit, expired, EXPIRE_BATCH);
    for (int i = 0; i < n; ++i) {
        efa_btl_rdma_req_t *req = expired[i];
        if (reported++ < 10) {
            opal_output(0,
                        "btl:efa: a one-sided %s of %zu bytes to %s got no answer for %d s "
                        "(btl_efa_rma_timeout): it fails; the target's answers were lost or it "
                        "stopped progressing",
                        mca_btl_efa_emul_type_name(req->type), req->size,
                        OPAL_NAME_PRINT(req->endpoint->name), mca_btl_efa_component.rma_timeout);
        }
        req->status = OPAL_ERR_TIMEOUT;
        req_done(btl, req);
    }
    return n + mca_btl_efa_ring_atomic_expire(btl, now, limit, paused);
}

/* Is this the first answer to req's chunk at offset (a chunk it sent)? */
static bool first_answer(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, uint64_t offset) {
    if (NULL == req->answered_bits) { /* one chunk */
        return 0 == __atomic_exchange_n(&req->answered_one, 1, __ATOMIC_RELAXED);
    }
    const uint64_t i = offset / btl->emul.chunk;
    if (i >= (uint64_t)req->nbits) {
        return false; /* (a chunk never sent: answer_names_a_chunk refuses it first) */
    }
    const uint8_t bit = (uint8_t)(1u << (i % 8));
    return 0 == (__atomic_fetch_or(&req->answered_bits[i / 8], bit, __ATOMIC_RELAXED) & bit);
}

/* Does an answer name a chunk the operation sent, with the offset and
 * length the chunk's request had (its target echoes both)?  Any other
 * would count as one of its chunks: the operation over with a chunk never
 * answered, or a get's bytes never written. */
static bool answer_names_a_chunk(const mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req,
                                 const efa_btl_rma_t *rma) {
    if (EFA_BTL_MSG_ATOMIC == req->type) {
        return 0 == rma->offset;
    }
    if (0 == req->size) {
        return 0 == rma->offset && 0 == rma->len;
    }
    const size_t chunk = btl->emul.chunk;
    if (rma->offset >= req->size || 0 != rma->offset % chunk) {
        return false;
    }
    const size_t left = req->size - rma->offset;
    /* (issued: the module lock's; an answer comes after its chunk went) */
    return rma->len == (left < chunk ? left : chunk) &&
           rma->offset / chunk < (uint64_t)__atomic_load_n(&req->issued, __ATOMIC_RELAXED);
}

/* An answer from a target (from btl_efa_recv.c): the chunk it answers is
 * accounted for, which sends the next ones or completes the operation. */
void mca_btl_efa_emul_on_response(mca_btl_efa_module_t *btl, const mca_btl_efa_answer_from_t *from,
                                  const efa_btl_rma_t *rma, const void *payload, size_t len) {
    if (mca_btl_efa_ring_atomic_answered(btl, rma, from)) {
        return; /* an atomic through an on-node ring */
    }
    /* The answer comes from another process: its request id is looked up,
     * never taken for an address.  Claimed: the request cannot expire (be
     * completed and freed) while this writes into it and its buffer.  Its
     * idle time goes on until the answer is judged its target's. */
    efa_btl_rdma_req_t *req = efa_inflight_claim(btl->emul.reqs, rma->req, -1.0);
    if (NULL == req) {
        opal_output_verbose(1, mca_common_efa_output,
                            "btl:efa: an answer for no request in flight (id 0x%llx) dropped",
                            (unsigned long long)rma->req);
        return;
    }
    /* (ids are sequential: one is a guess away; only the target answers) */
    if (!mca_btl_efa_answer_from_target(btl, req->endpoint, from)) {
        drop_claim(btl, req, false);
        return;
    }
    if (!answer_names_a_chunk(btl, req, rma)) {
        static int bad = 0;
        if (bad++ < 10) {
            opal_output_verbose(1, mca_common_efa_output,
                                "btl:efa: an answer naming no chunk of its operation (offset "
                                "%llu, %llu bytes) dropped",
                                (unsigned long long)rma->offset, (unsigned long long)rma->len);
        }
        drop_claim(btl, req, false);
        return;
    }
    if (!first_answer(btl, req, rma->offset)) {
        static int said = 0; /* (the first few: a racy count is good enough) */
        if (said++ < 10) {
            opal_output_verbose(1, mca_common_efa_output,
                                "btl:efa: a second answer to one chunk of a one-sided operation "
                                "(offset %llu) dropped",
                                (unsigned long long)rma->offset);
        }
        drop_claim(btl, req, false);
        return;
    }
    efa_inflight_touch(btl->emul.reqs, rma->req, mca_btl_efa_now());
    int status = rma->status;
    if (OPAL_SUCCESS == status) {
        if (EFA_BTL_MSG_GET == req->type) {
            if (!efa_btl_wire_get_answer_fits(len, rma->len, rma->offset, req->size)) {
                status = OPAL_ERR_BAD_PARAM;
            } else if (len) {
                status = copy_local(req->cb.local_device,
                                    (uint8_t *)req->cb.local_address + rma->offset, payload, len);
            }
        } else if (EFA_BTL_MSG_ATOMIC == req->type && req->cb.local_address) {
            if (4 == req->size) {
                uint32_t v = (uint32_t)rma->operand;
                memcpy(req->cb.local_address, &v, 4);
            } else {
                memcpy(req->cb.local_address, &rma->operand, 8);
            }
        }
    }
    chunk_answered(btl, req, status);
}

/* A new operation of nchunks chunks on the template rma, entered in the
 * table claimed by its caller and counted outstanding; NULL when out of
 * memory. */
static efa_btl_rdma_req_t *req_new(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                   const efa_btl_rdma_args_t *a, const efa_btl_rma_t *rma,
                                   int nchunks) {
    OPAL_THREAD_LOCK(&btl->lock);
    efa_btl_rdma_req_t *req = btl->emul.free_reqs;
    if (NULL != req) {
        btl->emul.free_reqs = req->next;
        --btl->emul.num_free_reqs;
    }
    /* (never the top bit, the on-node atomics' ids: btl_efa_ring_atomic.c;
     * never 0) */
    btl->emul.next_id = (btl->emul.next_id + 1) & (UINT64_MAX >> 1);
    if (0 == btl->emul.next_id) {
        btl->emul.next_id = 1;
    }
    const uint64_t id = btl->emul.next_id;
    OPAL_THREAD_UNLOCK(&btl->lock);
    if (NULL == req && NULL == (req = malloc(sizeof(*req)))) {
        return NULL;
    }
    memset(req, 0, sizeof(*req));
    req->id = id;
    req->endpoint = ep;
    req->cb = a->cb;
    req->type = a->type;
    req->size = a->size;
    req->status = OPAL_SUCCESS;
    req->remote_address = a->remote_address;
    req->rma = *rma;
    req->nchunks = nchunks;
    req->on_over = NULL;
    if (nchunks > 1) {
        req->nbits = nchunks;
        if (NULL == (req->answered_bits = calloc(((size_t)nchunks + 7) / 8, 1))) {
            req_put(btl, req);
            return NULL;
        }
    }
    /* Entered claimed by this call: nothing expires it while its first
     * chunks go out. */
    if (0 != efa_inflight_add(btl->emul.reqs, req->id, req, mca_btl_efa_now())) {
        req_put(btl, req);
        return NULL;
    }
    OPAL_THREAD_ADD_FETCH32(&ep->outstanding, 1);
    OPAL_THREAD_ADD_FETCH32(&btl->outstanding, 1);
    return req;
}

/* See btl_efa_emul.h. */
efa_btl_rdma_req_t *mca_btl_efa_emul_req_one(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                             const efa_btl_rdma_args_t *a) {
    efa_btl_rma_t rma;
    memset(&rma, 0, sizeof(rma));
    rma.key = a->remote_handle->rma.key;
    efa_btl_rdma_req_t *req = req_new(btl, ep, a, &rma, 1);
    if (NULL != req) {
        req->issued = 1; /* the caller writes its one request */
    }
    return req;
}

/* See btl_efa_emul.h. */
void mca_btl_efa_emul_req_sent(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req) {
    drop_claim(btl, req, false);
}

/* See btl_efa_emul.h. */
void mca_btl_efa_emul_req_resend(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req) {
    OPAL_THREAD_LOCK(&btl->lock);
    req->issued = req->answered; /* its one chunk goes again */
    OPAL_THREAD_UNLOCK(&btl->lock);
    drop_claim(btl, req, rdma_advance(btl, req, OPAL_SUCCESS, 0));
}

/* See btl_efa_emul.h. */
void mca_btl_efa_emul_req_unsent(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req) {
    mca_btl_efa_endpoint_t *ep = req->endpoint;
    if (efa_inflight_release(btl->emul.reqs, req->id, true)) {
        OPAL_THREAD_ADD_FETCH32(&ep->outstanding, -1);
        OPAL_THREAD_ADD_FETCH32(&btl->outstanding, -1);
        req_put(btl, req);
    }
}

/* See btl_efa_emul.h. */
efa_btl_rdma_req_t *mca_btl_efa_emul_req_claim(mca_btl_efa_module_t *btl, uint64_t id) {
    return efa_inflight_claim(btl->emul.reqs, id, mca_btl_efa_now());
}

/* See btl_efa_emul.h. */
void mca_btl_efa_emul_req_answered(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, int status) {
    chunk_answered(btl, req, status);
}

/* See btl_efa_emul.h. */
int mca_btl_efa_emul_rdma(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                          const efa_btl_rdma_args_t *a) {
    const int type = a->type;
    const size_t size = a->size;
    void *local_address = a->cb.local_address;
    efa_btl_rma_t rma;
    memset(&rma, 0, sizeof(rma));
    rma.key = a->remote_handle->rma.key;
    rma.op = a->op;
    rma.operand = a->operand;
    rma.operand2 = a->operand2;
    rma.flags = a->aflags;

    if (ep->is_self) {
        /* Own memory: the same checked execution, at once, a chunk at a
         * time (each copy holds the table's lock, which peers' requests
         * and deregistrations wait for). */
        uint64_t result = 0;
        int status = OPAL_SUCCESS;
        size_t done = 0;
        do {
            /* (self_from_device goes by chunks itself) */
            const size_t n =
                EFA_BTL_MSG_ATOMIC == type || a->cb.local_device || size - done < btl->emul.chunk
                    ? size - done
                    : btl->emul.chunk;
            rma.addr = a->remote_address + done;
            rma.len = n;
            if (EFA_BTL_MSG_ATOMIC == type) {
                status =
                    mca_btl_efa_emul_execute(btl, type, btl->my_name, &rma, NULL, NULL, &result);
                if (OPAL_SUCCESS == status && local_address) {
                    if (a->aflags & MCA_BTL_ATOMIC_FLAG_32BIT) {
                        uint32_t v = (uint32_t)result;
                        memcpy(local_address, &v, 4);
                    } else {
                        memcpy(local_address, &result, 8);
                    }
                }
            } else if (OPAL_UNLIKELY(a->cb.local_device)) {
                status = self_from_device(btl, type, &rma, local_address);
            } else {
                status = mca_btl_efa_emul_execute(btl, type, btl->my_name, &rma,
                                                  (uint8_t *)local_address + done,
                                                  (uint8_t *)local_address + done, &result);
            }
            done += n;
        } while (done < size && OPAL_SUCCESS == status);
        mca_btl_efa_rdma_cb_call(btl, ep, &a->cb, status);
        return OPAL_SUCCESS;
    }

    size_t chunk = btl->emul.chunk;
    const size_t count =
        (EFA_BTL_MSG_ATOMIC == type || 0 == size) ? 1 : size / chunk + (0 != size % chunk);
    if (count > INT32_MAX) { /* beyond what the chunk counters hold: never truncated */
        return OPAL_ERR_BAD_PARAM;
    }
    efa_btl_rdma_req_t *req = req_new(btl, ep, a, &rma, (int)count);
    if (NULL == req) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (mca_btl_efa_send_work(btl)) {
        (void)mca_btl_efa_drain_pending(btl);
    }
    drop_claim(btl, req, rdma_advance(btl, req, OPAL_SUCCESS, 0));
    return OPAL_SUCCESS;
}

/* Build and send chunk 'index' of req. */
static int issue_chunk(mca_btl_efa_module_t *btl, efa_btl_rdma_req_t *req, int index) {
    mca_btl_efa_endpoint_t *ep = req->endpoint;
    const int type = req->type;
    const size_t chunk = btl->emul.chunk;
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
        if (n && OPAL_SUCCESS != copy_local(req->cb.local_device, r + 1,
                                            (const uint8_t *)req->cb.local_address + off, n)) {
            mca_btl_efa_frag_return(btl, frag);
            return OPAL_ERROR;
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

void mca_btl_efa_emul_setup(mca_btl_efa_module_t *btl) {
    /* Out of memory: every emulated operation fails to start (NULL finds
     * nothing and takes nothing). */
    btl->emul.reqs = efa_inflight_create();
    btl->emul.away_seen = efa_core_away_ms(btl->core);
    /* Like registration keys (mca_btl_efa_reg_setup, called first), ids
     * start at a random point: a late answer to an earlier run's request
     * is unlikely to name one in flight.  The top bit is the on-node
     * atomics' (btl_efa_ring_atomic.c). */
    btl->emul.next_id = (btl->reg.next_key << 16) & (UINT64_MAX >> 1);
    btl->emul.free_reqs = NULL;
    btl->emul.num_free_reqs = 0;
    btl->emul.chunk_send_failed = fail_chunk;
}

void mca_btl_efa_emul_fini(mca_btl_efa_module_t *btl) {
    /* Requests still in flight at finalize are abandoned (their answers
     * would be dropped), as before: their memory is left alone. */
    efa_inflight_destroy(btl->emul.reqs);
    btl->emul.reqs = NULL;
    while (NULL != btl->emul.free_reqs) {
        efa_btl_rdma_req_t *req = btl->emul.free_reqs;
        btl->emul.free_reqs = req->next;
        free(req);
    }
    btl->emul.num_free_reqs = 0;
}
