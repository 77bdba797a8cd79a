/*
 * mtl_efa sends: standard, buffered and ready modes go out as one tagged
 * message; synchronous mode also waits for the receiver's acknowledgement
 * of the match.
 */
#include "mtl_efa.h"

#include "efa_core_rdv.h"
#include "mtl_efa_device.h"

#include "ompi/mca/mtl/base/mtl_base_datatype.h"
#include "opal/runtime/opal_progress.h"

#include <pthread.h>
#include <sched.h>

static void send_finish_one(mca_mtl_efa_request_t *req) {
    /* A synchronous send's two completions race only when threads may
     * progress at once; otherwise a plain decrement (no locked instruction). */
    const int left =
        ompi_mtl_efa.mt ? __atomic_sub_fetch(&req->pending, 1, __ATOMIC_ACQ_REL) : --req->pending;
    if (left > 0) {
        return;
    }
    if (req->free_buffer) {
        /* (a failed send's buffer may still be the provider's) */
        if (OPAL_LIKELY(OMPI_SUCCESS == req->error)) {
            efa_stage_free(req->buffer);
        } else {
            efa_stage_drop(req->buffer);
        }
    }
    if (req->mr) {
        efa_core_mr_release(ompi_mtl_efa.core, req->mr);
    }
    if (OPAL_UNLIKELY(NULL != req->rdv)) {
        free(req->rdv);
    }
    if (req->super.ompi_req) {
        if (req->withdrawn) {
            /* The receiver took the message away: nobody will get it. */
            req->super.ompi_req->req_status._cancelled = true;
            req->error = OMPI_SUCCESS;
        }
        req->super.ompi_req->req_status.MPI_ERROR = ompi_mtl_efa_status_error(req->error);
    }
    req->super.completion_callback(&req->super);
}

static void note_error(mca_mtl_efa_request_t *req, const efa_cqe_t *cqe) {
    /* A receiver that truncates the message is its own error; some
     * providers (tcp;ofi_rxm rendezvous) report it to the sender too. */
    if (cqe->err && -FI_ETRUNC != cqe->err && OMPI_SUCCESS == req->error) {
        req->error = ompi_mtl_efa_error(cqe->err);
        if (OMPI_SUCCESS == req->error) {
            req->error = OMPI_ERROR;
        }
    }
}

static mca_mtl_efa_request_t *detach_ack(mca_mtl_efa_request_t *req);
static bool drop_ack(mca_mtl_efa_request_t *req);

static int post_message(mca_mtl_efa_request_t *req, fi_addr_t addr, uint64_t bits);

/* A message whose post the provider refused from the backlog: a device
 * buffer goes again through the host (true); else the failure stands. */
static bool post_again(mca_mtl_efa_request_t *req, const efa_cqe_t *cqe) {
    if (!cqe->unposted ||
        !ompi_mtl_efa_device_post_refused(req, "mtl_efa fi_tsend (from the backlog)", cqe->err)) {
        return false;
    }
    const int rc = post_message(req, req->post_addr, req->post_bits);
    if (OMPI_SUCCESS != rc) {
        req->error = rc;
        return false;
    }
    efa_core_device_refusal_taken(); /* (no failed post to say) */
    return true;
}

static void send_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    mca_mtl_efa_request_t *req = MTL_EFA_REQ_OF(op, op);
    if (OPAL_UNLIKELY(cqe->err) && NULL != req->mr && post_again(req, cqe)) {
        return;
    }
    note_error(req, cqe);
    if (OPAL_UNLIKELY(NULL != req->rdv) && cqe->err) {
        ompi_mtl_efa_rdv_send_failed(req, cqe->err);
    }
    /* A synchronous send cancelled before its message left: it stops
     * waiting for the acknowledgement now (ompi_mtl_efa_cancel_send).  The
     * flags are written and read in opposite orders here and there, with
     * full fences, so that one of the two sees both. */
    bool stop_waiting = false;
    if (NULL != req->ack) {
        __atomic_store_n(&req->data_done, true, __ATOMIC_SEQ_CST);
        /* A message that failed (a truncation is the receiver's, which
         * answers) will not be acknowledged either: the error is the
         * request's now, not a wait for ever. */
        stop_waiting =
            cqe->err && -FI_ETRUNC != cqe->err
                ? drop_ack(req)
                : __atomic_load_n(&req->cancelled, __ATOMIC_SEQ_CST) && NULL != detach_ack(req);
    }
    if (stop_waiting) {
        send_finish_one(req); /* for the acknowledgement: the request stays until the next */
    }
    send_finish_one(req);
}

/* Between an acknowledgement's completion and a cancel that detaches the
 * send from it (synchronous sends only: not on the hot path). */
static pthread_mutex_t ack_lock = PTHREAD_MUTEX_INITIALIZER;

/* Drops one reference to an acknowledgement's receive. */
static void ack_put(mca_mtl_efa_ack_recv_t *ack) {
    pthread_mutex_lock(&ack_lock);
    const bool last = 0 == --ack->refs;
    pthread_mutex_unlock(&ack_lock);
    if (last) {
        free(ack);
    }
}

static void ack_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    mca_mtl_efa_ack_recv_t *ack = (mca_mtl_efa_ack_recv_t *)op;
    ompi_mtl_efa_ack_unkeep(ack);
    pthread_mutex_lock(&ack_lock);
    mca_mtl_efa_request_t *req = ack->req;
    if (NULL != req) {
        req->ack = NULL;
    }
    ack->done = true;
    const bool last = 0 == --ack->refs;
    pthread_mutex_unlock(&ack_lock);
    if (last) {
        free(ack);
    }
    if (NULL != req) {
        note_error(req, cqe);
        send_finish_one(req);
    }
}

/* The send no longer waits for its acknowledgement: the receive stays
 * posted (a receiver that matches the message later still answers, and
 * that answer must not be left to a later synchronous send of the same
 * envelope) and frees itself when it completes. */
static mca_mtl_efa_request_t *detach_ack(mca_mtl_efa_request_t *req) {
    pthread_mutex_lock(&ack_lock);
    mca_mtl_efa_ack_recv_t *ack = req->ack;
    if (NULL != ack) {
        ack->req = NULL;
        req->ack = NULL;
    }
    pthread_mutex_unlock(&ack_lock);
    return NULL != ack ? req : NULL;
}

/* A withdrawal in progress, allocated by MPI_Cancel (rare) rather than
 * carried in every request. */
typedef struct {
    efa_withdraw_t w; /* first */
    mca_mtl_efa_request_t *req;
    /* A synchronous send's acknowledgement receive, referenced (refs) so
     * that it can still be cancelled after the send stopped waiting for it
     * (detach_ack), which happens first when the receiver's claim completes
     * the send before its answer arrives. */
    mca_mtl_efa_ack_recv_t *ack;
} mtl_efa_withdrawal_t;

/* A withdrawn message is never matched, so its acknowledgement never
 * comes: the receive is cancelled.  Left posted, it would keep the peer
 * watched and the context busy (and, without a seq in the layout, take
 * the acknowledgement of the next synchronous send of the same envelope,
 * which would then wait for ever). */
static void cancel_unanswered_ack(efa_ctx_t *ctx, mca_mtl_efa_ack_recv_t *ack) {
    pthread_mutex_lock(&ack_lock);
    const bool live = !ack->done;
    pthread_mutex_unlock(&ack_lock);
    if (live) {
        /* Not under ack_lock: a receive still in the backlog completes
         * inside the call.  The reference keeps the memory. */
        (void)efa_ctx_cancel(ctx, &ack->op);
    }
}

/* The send stops waiting for an acknowledgement that will not come (its
 * message failed, or was never posted): the receive is detached and
 * cancelled.  (An acknowledgement that comes after all names this
 * message's seq: no later receive takes it.)  True: it was waiting. */
static bool drop_ack(mca_mtl_efa_request_t *req) {
    pthread_mutex_lock(&ack_lock);
    mca_mtl_efa_ack_recv_t *ack = req->ack;
    if (NULL != ack) {
        ack->req = NULL;
        req->ack = NULL;
        ++ack->refs; /* (held across the cancel) */
    }
    pthread_mutex_unlock(&ack_lock);
    if (NULL == ack) {
        return false;
    }
    cancel_unanswered_ack(req->ctx, ack);
    ack_put(ack);
    return true;
}

static void withdraw_done(efa_withdraw_t *w, int result) {
    mtl_efa_withdrawal_t *wd = (mtl_efa_withdrawal_t *)w;
    mca_mtl_efa_request_t *req = wd->req;
    mca_mtl_efa_ack_recv_t *ack = wd->ack;
    efa_ctx_t *ctx = req->ctx;
    free(wd); /* the core holds it no more */
    if (1 == result) {
        req->withdrawn = true;
        if (NULL != req->rdv) {
            efa_rdv_offer_end(req->rdv, -FI_ECANCELED); /* no answer will come */
        }
        if (NULL != detach_ack(req)) {
            send_finish_one(req); /* a synchronous send: no acknowledgement will come */
        }
        if (NULL != ack) {
            cancel_unanswered_ack(ctx, ack);
        }
    }
    if (NULL != ack) {
        ack_put(ack);
    }
    send_finish_one(req); /* the withdrawal's own share */
}

/* Asks the receiver to withdraw a send that carries a seq: the request
 * then waits for the answer too (one more pending completion), and is
 * reported cancelled if the receiver took the message.  false: not asked
 * (no seq, asked already, complete already, or the request failed). */
static bool withdraw(mca_mtl_efa_request_t *req) {
    if (0 == req->seq_tag || __atomic_exchange_n(&req->withdrawing, true, __ATOMIC_ACQ_REL)) {
        return false;
    }
    int left = __atomic_load_n(&req->pending, __ATOMIC_ACQUIRE);
    do {
        if (left <= 0) {
            return false; /* completed meanwhile */
        }
    } while (!__atomic_compare_exchange_n(&req->pending, &left, left + 1, false, __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE));
    mtl_efa_withdrawal_t *wd = calloc(1, sizeof(*wd));
    if (NULL != wd) {
        wd->w.done = withdraw_done;
        wd->req = req;
        pthread_mutex_lock(&ack_lock);
        wd->ack = req->ack;
        if (NULL != wd->ack) {
            wd->ack->refs++;
        }
        pthread_mutex_unlock(&ack_lock);
        /* (A rendezvous message carries no bytes itself.) */
        const size_t len = NULL != req->rdv ? 0 : req->length;
        if (0 == efa_ctx_withdraw(req->ctx, req->seq_addr, req->seq_tag, len, &wd->w)) {
            return true;
        }
        if (NULL != wd->ack) {
            ack_put(wd->ack);
        }
        free(wd);
    }
    send_finish_one(req); /* gives back the share taken above */
    return false;
}

/* MPI_Cancel of a send through the provider.  A send may be reported
 * cancelled only if no receiver can ever match it, and the provider cannot
 * withdraw a message it has taken (fi_cancel covers receives only).  A
 * large send carries a seq, and the receiver's core withdraws it if no
 * receive has matched it yet (core_withdraw.cpp).  Otherwise,
 * a synchronous send whose message the provider has already delivered
 * (only the receiver's acknowledgement is missing) completes now, not
 * cancelled: the message stays receivable and will be received as MPI asks
 * of a send that completes normally; it must not make MPI_Wait wait for a
 * receiver that may never post.  Any other send completes when the
 * provider completes it (as it would have), again not cancelled.
 * A send already complete for MPI (a buffered one: pml cm completes it at
 * its start) is never withdrawn: MPI_Wait has nothing left to wait for,
 * so it reports the send not cancelled, and the message must then arrive
 * (waiting here for the receiver's answer instead would make MPI_Cancel
 * wait on a receiver that may never answer). */
void ompi_mtl_efa_cancel_send(mca_mtl_efa_request_t *req) {
    if (NULL == req->super.ompi_req || !REQUEST_COMPLETE(req->super.ompi_req)) {
        (void)withdraw(req);
    }
    __atomic_store_n(&req->cancelled, true, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&req->data_done, __ATOMIC_SEQ_CST) && NULL != detach_ack(req)) {
        send_finish_one(req);
    } /* else send_complete looks at 'cancelled' */
}

/* The peer a send to (comm, dest) with this tag goes to: OMPI_SUCCESS, or
 * why the send cannot be made (the tag does not fit the provider's tag
 * layout, the peer is unreachable). */
static inline __opal_attribute_always_inline__ int send_peer(struct ompi_communicator_t *comm,
                                                             int dest, int tag, efa_peer_t **peer) {
    if (OPAL_UNLIKELY(!efa_tag_codec_fits(&ompi_mtl_efa.codec, tag))) {
        ompi_mtl_efa_tag_unfit(tag);
        return OMPI_ERR_BAD_PARAM;
    }
    *peer = ompi_mtl_efa_peer(comm, dest);
    return OPAL_UNLIKELY(NULL == *peer) ? OMPI_ERR_UNREACH : OMPI_SUCCESS;
}

/* The next seq of a large send to this peer, 1 to the layout's largest:
 * it names the message at the receiver should the send be cancelled.  It
 * wraps: a withdrawal could take an older unexpected message of the same
 * envelope and seq only after that many large sends to one peer. */
static inline uint32_t next_seq(efa_peer_t *peer) {
    const uint32_t n = ompi_mtl_efa.mt ? __atomic_add_fetch(&peer->send_seq, 1, __ATOMIC_RELAXED)
                                       : ++peer->send_seq;
    return n % efa_tag_max_seq(&ompi_mtl_efa.layout) + 1;
}

/* The message of a send: with its buffer's descriptor where one is
 * needed (FI_MR_LOCAL's, a device buffer's registration).  A device
 * buffer the provider refuses is copied through the host and posted
 * again, here or from its completion (send_complete). */
static int post_message(mca_mtl_efa_request_t *req, fi_addr_t addr, uint64_t bits) {
    void *desc;
    const int reg = ompi_mtl_efa_post_desc(req, addr, bits, 0, &desc);
    if (OPAL_UNLIKELY(OMPI_SUCCESS != reg)) {
        return reg;
    }
    const int rc = efa_ctx_tsend(req->ctx, req->buffer, req->length, desc, addr, bits,
                                 (uint32_t)req->comm->c_my_rank, &req->op);
    if (OPAL_UNLIKELY(rc) && ompi_mtl_efa_device_post_refused(req, "mtl_efa fi_tsend", rc)) {
        return post_message(req, addr, bits); /* (req->mr is a host one now, or none) */
    }
    return ompi_mtl_efa_rc(rc);
}

/* Post a send of an already packed buffer. */
static int start_send(mca_mtl_efa_request_t *req, struct ompi_communicator_t *comm, int dest,
                      int tag, mca_pml_base_send_mode_t mode) {
    efa_peer_t *peer;
    int rc = send_peer(comm, dest, tag, &peer);
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        return rc;
    }
    const efa_tag_codec_t *codec = &ompi_mtl_efa.codec;
    const int ci = ompi_mtl_efa_ctx_index(comm);
    efa_ctx_t *ctx = ompi_mtl_efa.ctxs[ci];
    const fi_addr_t addr = peer->addr[ci];
    const uint32_t me = (uint32_t)comm->c_my_rank;
    const uint32_t cid = mtl_efa_comm_cid(comm);
    uint32_t proto = EFA_PROTO_MSG;

    req->is_send = true;
    req->error = OMPI_SUCCESS;
    req->comm = comm;
    req->ctx = ctx;
    req->pending = 1;
    req->op.complete = send_complete;
    req->ack = NULL;
    req->data_done = false;
    req->seq_tag = 0;
    req->withdrawing = false;
    req->withdrawn = false;
    req->rdv = NULL;
    /* (a device buffer the provider takes as it is, req->mr: its own
     * protocol carries it, read from the device) */
    if (OPAL_UNLIKELY(req->length >= ompi_mtl_efa.rdv_min) && ompi_mtl_efa_rdv_peer(peer) &&
        NULL == req->mr) {
        /* Read by the receiver over every rail; its answer also tells a
         * synchronous send of the match. */
        rc = ompi_mtl_efa_rdv_send(req, addr, efa_tag_codec_pack(codec, proto, cid, me, tag),
                                   next_seq(peer), me, send_finish_one);
        if (OMPI_ERR_NOT_AVAILABLE != rc) {
            return rc;
        }
        req->pending = 1; /* not registered: sent the plain way */
    }
    /* A seq names the message: to withdraw it, and in a synchronous
     * send's acknowledgement, which then answers this message alone (not
     * a later one of the same envelope whose acknowledgement receive is
     * posted too, nor one a cancel or a failure left behind). */
    const bool withdrawable = ompi_mtl_efa.withdraw && req->length >= MTL_EFA_WITHDRAW_MIN;
    const uint32_t seq =
        withdrawable || (MCA_PML_BASE_SEND_SYNCHRONOUS == mode && ompi_mtl_efa.layout.seq_bits > 1)
            ? next_seq(peer)
            : 0;
    if (MCA_PML_BASE_SEND_SYNCHRONOUS == mode) {
        /* Post the acknowledgement's receive before the send, so it can
         * never arrive unexpected. */
        proto = EFA_PROTO_SYNC;
        mca_mtl_efa_ack_recv_t *ack = malloc(sizeof(*ack));
        if (OPAL_UNLIKELY(NULL == ack)) {
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        req->pending = 2;
        ack->op.complete = ack_complete;
        ack->op.rx_class = EFA_RX_INTERNAL; /* never matches a user receive */
        ack->req = req;
        ack->refs = 1; /* the provider's completion */
        ack->done = false;
        req->ack = ack;
        ompi_mtl_efa_ack_keep(ack);
        rc = efa_ctx_trecv(ctx, NULL, 0, NULL, addr,
                           efa_tag_codec_with_seq(codec,
                                                  efa_tag_codec_pack(codec, EFA_PROTO_SYNC_ACK, cid,
                                                                     (uint32_t)dest, tag),
                                                  seq),
                           0, &ack->op);
        if (OPAL_UNLIKELY(rc)) {
            req->ack = NULL;
            ompi_mtl_efa_ack_unkeep(ack);
            free(ack);
            return ompi_mtl_efa_error(rc);
        }
    }
    uint64_t bits = efa_tag_codec_pack(codec, proto, cid, me, tag);
    if (seq) {
        bits = efa_tag_codec_with_seq(codec, bits, seq);
    }
    if (withdrawable) {
        req->seq_tag = bits;
        req->seq_addr = addr;
    }
    rc = post_message(req, addr, bits);
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        if (req->mr) {
            efa_core_mr_release(ompi_mtl_efa.core, req->mr);
            req->mr = NULL;
        }
        if (!drop_ack(req) && MCA_PML_BASE_SEND_SYNCHRONOUS == mode) {
            /* The acknowledgement's receive completed meanwhile (failed, a
             * lost peer) in another thread, which now finishes its share
             * of the request: the request (on the caller's stack for a
             * blocking send) must outlive that before the error returns. */
            while (__atomic_load_n(&req->pending, __ATOMIC_ACQUIRE) > 1) {
                sched_yield();
            }
        }
    }
    return rc;
}

/* A small send is injected: the buffer is reusable as soon as the call
 * returns and the provider reports no completion, so the send is complete
 * at once.  Kept apart from the general path so that the common case sets
 * up no request state at all. */
static inline __opal_attribute_always_inline__ int
inject_send(struct ompi_communicator_t *comm, int dest, int tag, const void *buf, size_t len) {
    efa_peer_t *peer;
    const int rc = send_peer(comm, dest, tag, &peer);
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        return rc;
    }
    const int ci = ompi_mtl_efa_ctx_index(comm);
    const uint32_t me = (uint32_t)comm->c_my_rank;
    return ompi_mtl_efa_rc(efa_ctx_tinject(
        ompi_mtl_efa.ctxs[ci], buf, len, peer->addr[ci],
        efa_tag_codec_pack(&ompi_mtl_efa.codec, EFA_PROTO_MSG, mtl_efa_comm_cid(comm), me, tag),
        me));
}

int ompi_mtl_efa_isend(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm,
                       int dest, int tag, struct opal_convertor_t *convertor,
                       mca_pml_base_send_mode_t mode, bool blocking,
                       mca_mtl_request_t *mtl_request) {
    (void)mtl;
    (void)blocking;
    mca_mtl_efa_request_t *req = (mca_mtl_efa_request_t *)mtl_request;
    req->mr = NULL;
    req->cancelled = false;
    req->ack = NULL; /* (MPI_Cancel looks at these whatever the path) */
    req->data_done = false;
    req->seq_tag = 0;
    req->withdrawing = false;
    req->withdrawn = false;
    req->rdv = NULL;
    req->convertor = convertor;
    int rc = ompi_mtl_datatype_pack(convertor, &req->buffer, &req->length, &req->free_buffer);
    bool device = false;
    if (OPAL_UNLIKELY(ompi_mtl_efa.device_staging) && OMPI_SUCCESS == rc) {
        rc = ompi_mtl_efa_device_send_prepare(comm, dest, convertor, &req->buffer, req->length,
                                              &req->free_buffer, &device, &req->mr);
    }
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        return rc;
    }
    if (ompi_mtl_efa_use_engine(comm, dest)) {
        return ompi_mtl_efa_engine_isend(comm, dest, tag, mode, req, device);
    }
    req->by_engine = false;
    /* Inject size 0 means no inject at all, not "zero-byte messages only".
     * (An inject has no descriptor: never a device buffer, req->mr.) */
    if (MCA_PML_BASE_SEND_SYNCHRONOUS != mode && req->length <= ompi_mtl_efa.inject_size &&
        0 != ompi_mtl_efa.inject_size && NULL == req->mr) {
        /* Completing inside isend is allowed: pml/cm expects the MTL may
         * have completed the request by the time isend returns.  This saves
         * the provider a completion entry and progress a dispatch. */
        rc = inject_send(comm, dest, tag, req->buffer, req->length);
        if (OPAL_UNLIKELY(req->free_buffer)) {
            efa_stage_free(req->buffer);
        }
        if (OPAL_LIKELY(OMPI_SUCCESS == rc)) {
            req->is_send = true;
            req->super.ompi_req->req_status.MPI_ERROR = OMPI_SUCCESS;
            req->super.completion_callback(&req->super);
        }
        return rc;
    }
    rc = start_send(req, comm, dest, tag, mode);
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        if (req->free_buffer) {
            efa_stage_free(req->buffer);
        }
        if (req->mr) {
            efa_core_mr_release(ompi_mtl_efa.core, req->mr);
            req->mr = NULL;
        }
    }
    return rc;
}

int ompi_mtl_efa_send(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm, int dest,
                      int tag, struct opal_convertor_t *convertor, mca_pml_base_send_mode_t mode) {
    (void)mtl;
    void *buffer;
    size_t length;
    bool free_buffer;
    int rc = ompi_mtl_datatype_pack(convertor, &buffer, &length, &free_buffer);
    bool device = false;
    efa_mr_t *hmem_mr = NULL;
    if (OPAL_UNLIKELY(ompi_mtl_efa.device_staging) && OMPI_SUCCESS == rc) {
        rc = ompi_mtl_efa_device_send_prepare(comm, dest, convertor, &buffer, length, &free_buffer,
                                              &device, &hmem_mr);
    }
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        return rc;
    }
    if (ompi_mtl_efa_use_engine(comm, dest)) {
        return ompi_mtl_efa_engine_send(comm, dest, tag, mode, buffer, length, free_buffer, device,
                                        hmem_mr);
    }
    if (MCA_PML_BASE_SEND_SYNCHRONOUS != mode && length <= ompi_mtl_efa.inject_size &&
        0 != ompi_mtl_efa.inject_size && NULL == hmem_mr) {
        rc = inject_send(comm, dest, tag, buffer, length);
        if (OPAL_UNLIKELY(free_buffer)) {
            efa_stage_free(buffer);
        }
        return rc;
    }
    mca_mtl_efa_blocking_send_t bs;
    mca_mtl_efa_request_t *req = &bs.req;
    req->super.ompi_req = NULL;
    req->super.completion_callback = ompi_mtl_efa_blocking_send_done;
    req->cancelled = false;
    req->by_engine = false;
    req->convertor = convertor;
    req->buffer = buffer;
    req->length = length;
    req->free_buffer = free_buffer;
    req->mr = hmem_mr;
    bs.done = false;
    rc = start_send(req, comm, dest, tag, mode);
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        if (req->free_buffer) {
            efa_stage_free(req->buffer);
        }
        if (req->mr) {
            efa_core_mr_release(ompi_mtl_efa.core, req->mr);
        }
        return rc;
    }
    /* All of Open MPI's progress, not the core's alone: while this send
     * waits (a synchronous one for its receiver's match), messages on the
     * other paths (the on-node rings, other components) must keep moving,
     * or a peer whose progress this send waits on may be waiting for us. */
    while (!__atomic_load_n(&bs.done, __ATOMIC_ACQUIRE)) {
        opal_progress();
    }
    return req->error;
}
