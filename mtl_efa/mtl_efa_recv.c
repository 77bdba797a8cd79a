/*
 * mtl_efa receives: posted receives, probes, matched probes and cancel
 * (their end: mtl_efa_recv_done.c).
 */
#include "mtl_efa.h"
#include "mtl_efa_device.h"

#include "ompi/mca/mtl/base/mtl_base_datatype.h"
#include "ompi/message/message.h"
#include "opal/runtime/opal_progress.h"

static int post_recv(mca_mtl_efa_request_t *req, fi_addr_t addr, uint64_t bits, uint64_t ignore);

/* Was the receive withdrawn: MPI_Cancel, or the watch's cancel for a lost
 * peer (mtl_efa_any.c)? */
static bool withdrawn(mca_mtl_efa_request_t *req) {
    return __atomic_load_n(&req->cancelled, __ATOMIC_SEQ_CST) ||
           0 != __atomic_load_n(&req->any_lost, __ATOMIC_SEQ_CST);
}

static void recv_complete(efa_op_t *op, const efa_cqe_t *cqe_in);

/* The completion of a receive posted again while post_again may still
 * look at the request: held for it, unless it is through. */
static void reposted_recv_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    mca_mtl_efa_request_t *req = MTL_EFA_REQ_OF(op, op);
    int under_way = MTL_EFA_REPOST_UNDER_WAY;
    req->repost_cqe = *cqe;
    if (__atomic_compare_exchange_n(&req->repost_state, &under_way, MTL_EFA_REPOST_HELD, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        return; /* post_again finishes it */
    }
    recv_complete(op, cqe);
}

/* A receive whose post the provider refused from the backlog: a device
 * buffer is posted again with a host buffer (true; an ANY_SOURCE one stays
 * on the watch's list); else the failure stands.  A cancel that came
 * while the receive was neither the provider's nor in a backlog found
 * nothing: such a receive is not posted again but ends cancelled (*err
 * -FI_ECANCELED), and one that came while it was posted again is asked
 * again once it is (then the provider holds it).  Until this function is
 * through with the request, its completion cannot finish it (another
 * thread may hear it at once): reposted_recv_complete holds it, and it is
 * finished here. */
static bool post_again(mca_mtl_efa_request_t *req, const efa_cqe_t *cqe, int *err) {
    if (!cqe->unposted ||
        !ompi_mtl_efa_device_post_refused(req, "mtl_efa fi_trecv (from the backlog)", cqe->err)) {
        return false;
    }
    if (withdrawn(req)) {
        efa_core_device_refusal_taken(); /* (it ends cancelled: no failed post) */
        *err = -FI_ECANCELED;
        return false;
    }
    __atomic_store_n(&req->repost_state, MTL_EFA_REPOST_UNDER_WAY, __ATOMIC_RELEASE);
    req->op.complete = reposted_recv_complete;
    const int rc = post_recv(req, req->post_addr, req->post_bits, req->post_ignore);
    if (OMPI_SUCCESS != rc) {
        req->op.complete = recv_complete;
        __atomic_store_n(&req->repost_state, MTL_EFA_REPOST_NONE, __ATOMIC_RELEASE);
        req->error = rc;
        return false;
    }
    efa_core_device_refusal_taken(); /* (no failed post to say) */
    if (withdrawn(req) &&
        MTL_EFA_REPOST_UNDER_WAY == __atomic_load_n(&req->repost_state, __ATOMIC_ACQUIRE)) {
        (void)efa_ctx_cancel(req->ctx, &req->op);
    }
    int under_way = MTL_EFA_REPOST_UNDER_WAY;
    if (!__atomic_compare_exchange_n(&req->repost_state, &under_way, MTL_EFA_REPOST_NONE, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        /* (completed meanwhile, here or in another thread) */
        req->repost_state = MTL_EFA_REPOST_NONE;
        req->op.complete = recv_complete;
        recv_complete(&req->op, &req->repost_cqe);
    }
    return true;
}

static void recv_complete(efa_op_t *op, const efa_cqe_t *cqe_in) {
    mca_mtl_efa_request_t *req = MTL_EFA_REQ_OF(op, op);
    const efa_cqe_t *cqe = cqe_in;
    efa_cqe_t withdrawn_cqe;
    if (OPAL_UNLIKELY(cqe->err) && NULL != req->mr) {
        int err = cqe->err;
        if (post_again(req, cqe, &err)) {
            return;
        }
        if (err != cqe->err) { /* (cancelled while it was posted again) */
            withdrawn_cqe = *cqe;
            withdrawn_cqe.err = err;
            cqe = &withdrawn_cqe;
        }
    }
    ompi_mtl_efa_any_done(req);
    if (ompi_mtl_efa_is_rdv(cqe)) {
        ompi_mtl_efa_rdv_recv(req, cqe, ompi_mtl_efa_recv_finish); /* the bytes are read next */
        return;
    }
    ompi_mtl_efa_recv_finish(req, cqe);
}

/* The provider's half of a dual (ANY_SOURCE, mixed communicator) receive
 * ended.  Cancelled: either the rings matched first and asked for it (the
 * engine now delivers the message it held) or MPI_Cancel did (the rings'
 * half is withdrawn too).  Matched: the rings' half is withdrawn, and a
 * message the engine held for it goes back to matching. */
static void dual_recv_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    mca_mtl_efa_request_t *req = MTL_EFA_REQ_OF(op, op);
    ompi_mtl_efa_any_done(req);
    if (-FI_ECANCELED == cqe->err) {
        if (1 == efa_engine_partner_done(ompi_mtl_efa.engine, &req->on, false)) {
            return;
        }
    } else {
        (void)efa_engine_partner_done(ompi_mtl_efa.engine, &req->on, true);
    }
    if (ompi_mtl_efa_is_rdv(cqe)) {
        ompi_mtl_efa_rdv_recv(req, cqe, ompi_mtl_efa_recv_finish);
        return;
    }
    ompi_mtl_efa_recv_finish(req, cqe);
}

/* The receive's match bits and, for a directed receive, the source address. */
static inline __opal_attribute_always_inline__ int recv_match(struct ompi_communicator_t *comm,
                                                              int src, int tag, int ci,
                                                              fi_addr_t *addr, uint64_t *bits,
                                                              uint64_t *ignore) {
    const efa_tag_codec_t *codec = &ompi_mtl_efa.codec;
    const bool any_src = MPI_ANY_SOURCE == src;
    const bool any_tag = MPI_ANY_TAG == tag;
    /* Packed, such a tag would match another one's messages. */
    if (OPAL_UNLIKELY(!efa_tag_codec_fits(codec, tag))) {
        ompi_mtl_efa_tag_unfit(tag);
        return OMPI_ERR_BAD_PARAM;
    }
    *addr = FI_ADDR_UNSPEC;
    if (!any_src && !codec->source_in_tag) {
        efa_peer_t *peer = ompi_mtl_efa_peer(comm, src);
        if (OPAL_UNLIKELY(NULL == peer)) {
            return OMPI_ERR_UNREACH;
        }
        *addr = peer->addr[ci];
    }
    *bits = efa_tag_codec_pack(codec, EFA_PROTO_MSG, mtl_efa_comm_cid(comm),
                               any_src ? 0 : (uint32_t)src, any_tag ? 0 : tag);
    *ignore = ompi_mtl_efa.recv_ignore[(int)any_src | (int)any_tag << 1];
    return OMPI_SUCCESS;
}

#if OMPI_MAJOR_VERSION < 5
/* 4.1's ompi_mtl_datatype_recv_buf does not check its malloc of a packing
 * buffer: a NULL one is refused.  Out of line, so that the receive path
 * around it stays inlined. */
static __opal_attribute_noinline__ int packing_buffer_checked(mca_mtl_efa_request_t *req, int rc) {
    if (OMPI_SUCCESS == rc && NULL == req->buffer && 0 != req->length) {
        req->free_buffer = false;
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    return rc;
}
#endif

/* provider_only: no ring and no engine can match it (a device buffer may
 * then go to the provider as it is). */
static inline __opal_attribute_always_inline__ int prepare_recv(mca_mtl_efa_request_t *req,
                                                                struct opal_convertor_t *convertor,
                                                                struct ompi_communicator_t *comm,
                                                                bool provider_only) {
    req->is_send = false;
    req->cancelled = false;
    req->by_engine = false;
    req->dual = false;
    req->mr = NULL;
    req->convertor = convertor;
    req->comm = comm;
    req->pending = 1;
    req->error = OMPI_SUCCESS;
    req->any_linked = false;
    req->any_swept = false;
    req->any_lost = 0;
    req->op.complete = recv_complete;
    req->device_buf = NULL;
    int rc = ompi_mtl_datatype_recv_buf(convertor, &req->buffer, &req->length, &req->free_buffer);
#if OMPI_MAJOR_VERSION < 5
    if (OPAL_UNLIKELY(req->free_buffer)) {
        rc = packing_buffer_checked(req, rc);
    }
#endif
    if (OPAL_UNLIKELY(ompi_mtl_efa.device_staging) && OMPI_SUCCESS == rc) {
        rc = provider_only ? ompi_mtl_efa_device_provider_recv(req)
                           : ompi_mtl_efa_device_stage_recv(req);
    }
    return rc;
}

/* A receive prepared (prepare_recv) but never posted: what it allocated
 * goes (a packing or device staging buffer, a registration); rc back. */
static int unposted(mca_mtl_efa_request_t *req, int rc) {
    if (req->mr) {
        efa_core_mr_release(ompi_mtl_efa.core, req->mr);
        req->mr = NULL;
    }
    ompi_mtl_efa_recv_buffer_done(req, 0, false);
    return rc;
}

/* A receive for the provider: with its buffer's descriptor where one is
 * needed (FI_MR_LOCAL's, a device buffer's registration).  A device
 * buffer the provider refuses is copied through the host and posted
 * again, here or from its completion (recv_complete). */
static int post_recv(mca_mtl_efa_request_t *req, fi_addr_t addr, uint64_t bits, uint64_t ignore) {
    void *desc;
    const int reg = ompi_mtl_efa_post_desc(req, addr, bits, ignore, &desc);
    if (OPAL_UNLIKELY(OMPI_SUCCESS != reg)) {
        return reg;
    }
    const int rc =
        efa_ctx_trecv(req->ctx, req->buffer, req->length, desc, addr, bits, ignore, &req->op);
    if (OPAL_UNLIKELY(rc) && ompi_mtl_efa_device_post_refused(req, "mtl_efa fi_trecv", rc)) {
        return post_recv(req, addr, bits, ignore); /* (req->mr is a host one now, or none) */
    }
    return ompi_mtl_efa_rc(rc);
}

int ompi_mtl_efa_irecv(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm, int src,
                       int tag, struct opal_convertor_t *convertor,
                       mca_mtl_request_t *mtl_request) {
    (void)mtl;
    mca_mtl_efa_request_t *req = (mca_mtl_efa_request_t *)mtl_request;
    const int path = ompi_mtl_efa_comm_path(comm);
    if (MTL_EFA_PATH_ENGINE == path || (MTL_EFA_PATH_MIXED == path && MPI_ANY_SOURCE != src &&
                                        ompi_mtl_efa_ring_peer(comm, src))) {
        int rc = prepare_recv(req, convertor, comm, false);
        if (OPAL_LIKELY(OMPI_SUCCESS == rc)) {
            rc = ompi_mtl_efa_engine_irecv(comm, src, tag, req);
            if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
                return unposted(req, rc);
            }
        }
        return rc;
    }
    const int ci = ompi_mtl_efa_ctx_index(comm);
    fi_addr_t addr;
    uint64_t bits, ignore;
    int rc = recv_match(comm, src, tag, ci, &addr, &bits, &ignore);
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        return rc;
    }
    /* (any source of a communicator spanning nodes: the rings too) */
    rc = prepare_recv(req, convertor, comm, !(MTL_EFA_PATH_MIXED == path && MPI_ANY_SOURCE == src));
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        return rc;
    }
    /* Negative tags are Open MPI's own traffic (collectives): they never
     * match user receives, so they may bypass them for queue space. */
    req->op.rx_class = (tag < 0 && MPI_ANY_TAG != tag) ? EFA_RX_INTERNAL : EFA_RX_USER;
    req->ctx = ompi_mtl_efa.ctxs[ci];
    if (MTL_EFA_PATH_MIXED == path && MPI_ANY_SOURCE == src) {
        /* Any source of a communicator spanning nodes: the rings first (a
         * message already waiting there is taken now), then the provider. */
        rc = ompi_mtl_efa_engine_irecv_partnered(comm, tag, req);
        if (OPAL_UNLIKELY(rc < 0)) {
            return unposted(req, rc);
        }
        if (0 != rc) {
            return OMPI_SUCCESS;
        }
        req->dual = true;
        req->op.complete = dual_recv_complete;
    }
    const bool listed = MPI_ANY_SOURCE == src && ompi_mtl_efa.any_watch;
    if (listed) {
        ompi_mtl_efa_any_link(req); /* before the post: it may complete at once */
    }
    /* Read before the post: a receive that is not dual may complete in
     * another thread's progress as soon as it is posted, and pml/cm hand
     * the request to another receive. */
    const bool dual = req->dual;
    rc = post_recv(req, addr, bits, ignore);
    if (listed) {
        ompi_mtl_efa_any_posted(); /* (the watch's lock, held since the link) */
    }
    if (OMPI_SUCCESS == rc && dual) {
        efa_engine_partner_armed(ompi_mtl_efa.engine, &req->on);
    }
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        ompi_mtl_efa_any_done(req);
        if (req->dual) {
            (void)efa_engine_partner_done(ompi_mtl_efa.engine, &req->on, true); /* withdraw */
        }
        (void)unposted(req, rc);
    }
    return rc;
}

/* ---- probes ---------------------------------------------------------- */

/* The receive of a claimed message into its mrecv's buffer.  A device
 * buffer the provider refuses is copied through the host and posted
 * again, here or from its completion (claim_complete): the message stays
 * claimed meanwhile. */
static int post_claimed(mca_mtl_efa_claim_t *claim) {
    mca_mtl_efa_request_t *req = claim->mrecv;
    void *desc;
    const int reg = ompi_mtl_efa_reg_buffer(req, &desc);
    if (OPAL_UNLIKELY(OMPI_SUCCESS != reg)) {
        return reg;
    }
    const int rc = efa_ctx_trecv_claimed(claim->ctx, req->buffer, req->length, desc, claim->tag,
                                         claim->ignore, &claim->op);
    if (OPAL_UNLIKELY(rc) &&
        ompi_mtl_efa_device_post_refused(req, "mtl_efa fi_trecvmsg(FI_CLAIM)", rc)) {
        return post_claimed(claim);
    }
    return ompi_mtl_efa_rc(rc);
}

/* A claimed message nobody will receive (its improbe failed once it was
 * claimed: a sender outside the communicator, or lost before its length
 * came): taken off the provider into nothing, the claim freed when that
 * completes.  Freed at once, the claim would leave the message claimed for
 * ever, with the provider holding a pointer into freed memory. */
static void discard_done(efa_op_t *op, const efa_cqe_t *cqe) {
    (void)cqe; /* (a truncation: the message had bytes) */
    free((mca_mtl_efa_claim_t *)op);
}

static void discard_claimed(mca_mtl_efa_claim_t *claim) {
    claim->op.complete = discard_done;
    claim->mrecv = NULL;
    if (0 !=
        efa_ctx_trecv_claimed(claim->ctx, NULL, 0, NULL, claim->tag, claim->ignore, &claim->op)) {
        /* Refused at once: the claim stays, as the provider may still name
         * it (a few bytes kept; the message is lost with its sender). */
        opal_output_verbose(1, mca_common_efa_output,
                            "mtl:efa: a claimed message could not be discarded");
    }
}

static void claim_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    mca_mtl_efa_claim_t *claim = (mca_mtl_efa_claim_t *)op;
    if (NULL == claim->mrecv) {
        claim->cqe = *cqe; /* the peek's answer */
        /* Release: the waiter reads cqe next and may pop the claim off its
         * stack (as ompi_mtl_efa_blocking_send_done). */
        __atomic_store_n(&claim->done, true, __ATOMIC_RELEASE);
        return;
    }
    /* The claimed message has been received into the mrecv's buffer (a
     * rendezvous message: its bytes are read next). */
    mca_mtl_efa_request_t *req = claim->mrecv;
    if (OPAL_UNLIKELY(cqe->err) && cqe->unposted && NULL != req->mr &&
        ompi_mtl_efa_device_post_refused(req, "mtl_efa fi_trecvmsg(FI_CLAIM) (from the backlog)",
                                         cqe->err)) {
        const int rc = post_claimed(claim);
        if (OMPI_SUCCESS == rc) {
            efa_core_device_refusal_taken(); /* (no failed post to say) */
            return;
        }
        req->error = rc;
    }
    free(claim);
    if (ompi_mtl_efa_is_rdv(cqe)) {
        ompi_mtl_efa_rdv_recv(req, cqe, ompi_mtl_efa_recv_finish);
        return;
    }
    ompi_mtl_efa_recv_finish(req, cqe);
}

static int peek(struct ompi_communicator_t *comm, int src, int tag, bool claim_it,
                mca_mtl_efa_claim_t *claim) {
    const int ci = ompi_mtl_efa_ctx_index(comm);
    fi_addr_t addr;
    int rc = recv_match(comm, src, tag, ci, &addr, &claim->tag, &claim->ignore);
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        return rc;
    }
    claim->op.complete = claim_complete;
    claim->op.rx_class = EFA_RX_INTERNAL;
    claim->done = false;
    claim->mrecv = NULL;
    claim->ctx = ompi_mtl_efa.ctxs[ci];
    rc = efa_ctx_tpeek(claim->ctx, addr, claim->tag, claim->ignore, claim_it, &claim->op);
    if (OPAL_UNLIKELY(rc)) {
        return ompi_mtl_efa_error(rc);
    }
    /* Every path moves meanwhile (see ompi_mtl_efa_send): a provider may
     * take its time to answer a peek. */
    while (!__atomic_load_n(&claim->done, __ATOMIC_ACQUIRE)) {
        opal_progress();
    }
    if (-FI_ENOMSG == claim->cqe.err) {
        return OMPI_ERR_NOT_FOUND;
    }
    return claim->cqe.err ? ompi_mtl_efa_error(claim->cqe.err) : OMPI_SUCCESS;
}

int ompi_mtl_efa_iprobe(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm,
                        int src, int tag, int *flag, struct ompi_status_public_t *status) {
    (void)mtl;
    const int path = ompi_mtl_efa_comm_path(comm);
    if (MTL_EFA_PATH_PROVIDER != path) {
        /* Any source of a mixed communicator: the rings, then the provider. */
        const bool any = MTL_EFA_PATH_MIXED == path && MPI_ANY_SOURCE == src;
        if (any || ompi_mtl_efa_use_engine(comm, src)) {
            int rc = ompi_mtl_efa_engine_iprobe(comm, src, tag, false, flag, NULL, status);
            if (!any || OMPI_SUCCESS != rc || *flag) {
                return rc;
            }
        }
    }
    mca_mtl_efa_claim_t probe;
    int rc = peek(comm, src, tag, false, &probe);
    *flag = 0;
    if (OMPI_ERR_NOT_FOUND == rc) {
        return ompi_mtl_efa.any_watch ? ompi_mtl_efa_any_probe_missed(comm, src) : OMPI_SUCCESS;
    }
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    if (ompi_mtl_efa_is_rdv(&probe.cqe)) {
        rc = ompi_mtl_efa_rdv_probed(comm, probe.ctx, &probe.cqe, false); /* its length */
        if (OMPI_ERR_NOT_FOUND == rc) {
            return OMPI_SUCCESS; /* its note is not here yet: not found either */
        }
        if (OMPI_SUCCESS != rc) {
            return rc;
        }
    }
    *flag = 1;
    if (MPI_STATUS_IGNORE != status) {
        ompi_mtl_efa_fill_status(status, &probe.cqe);
        status->_cancelled = 0; /* (the user's status: a cancelled receive's before) */
    }
    return OMPI_SUCCESS;
}

int ompi_mtl_efa_improbe(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm,
                         int src, int tag, int *matched, struct ompi_message_t **message,
                         struct ompi_status_public_t *status) {
    (void)mtl;
    *matched = 0;
    const int path = ompi_mtl_efa_comm_path(comm);
    if (MTL_EFA_PATH_PROVIDER != path) {
        const bool any = MTL_EFA_PATH_MIXED == path && MPI_ANY_SOURCE == src;
        if (any || ompi_mtl_efa_use_engine(comm, src)) {
            int rc = ompi_mtl_efa_engine_iprobe(comm, src, tag, true, matched, message, status);
            if (!any || OMPI_SUCCESS != rc || *matched) {
                return rc;
            }
        }
    }
    /* The handle first: a message claimed at the provider must never be
     * left without one (nobody could receive it, and a rendezvous sender
     * would wait for its answer for ever). */
    mca_mtl_efa_claim_t *claim = malloc(sizeof(*claim));
    ompi_message_t *msg = NULL == claim ? NULL : ompi_message_alloc();
    if (NULL == msg) {
        free(claim);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    int rc = peek(comm, src, tag, true, claim);
    if (OMPI_SUCCESS != rc) {
        free(claim);
        ompi_message_return(msg);
        if (OMPI_ERR_NOT_FOUND == rc && ompi_mtl_efa.any_watch) {
            return ompi_mtl_efa_any_probe_missed(comm, src); /* MPI_Mprobe loops too */
        }
        return OMPI_ERR_NOT_FOUND == rc ? OMPI_SUCCESS : rc;
    }
    if (ompi_mtl_efa_is_rdv(&claim->cqe)) {
        /* Claimed: only the sender's loss (or a sender outside the
         * communicator) keeps its length from coming; the message is then
         * lost anyway, and taken off the provider. */
        rc = ompi_mtl_efa_rdv_probed(comm, claim->ctx, &claim->cqe, true);
        if (OMPI_SUCCESS != rc) {
            discard_claimed(claim);
            ompi_message_return(msg);
            return rc;
        }
    }
    ompi_status_public_t st;
    ompi_mtl_efa_fill_status(&st, &claim->cqe);
    *message = msg;
    (*message)->comm = comm;
    (*message)->req_ptr = ompi_mtl_efa_claim_handle(claim);
    (*message)->peer = st.MPI_SOURCE;
    (*message)->count = st._ucount;
    if (MPI_STATUS_IGNORE != status) {
        ompi_mtl_efa_fill_status(status, &claim->cqe); /* MPI_ERROR stays the caller's */
        status->_cancelled = 0;
    }
    *matched = 1;
    return OMPI_SUCCESS;
}

int ompi_mtl_efa_imrecv(struct mca_mtl_base_module_t *mtl, struct opal_convertor_t *convertor,
                        struct ompi_message_t **message, mca_mtl_request_t *mtl_request) {
    (void)mtl;
    mca_mtl_efa_request_t *req = (mca_mtl_efa_request_t *)mtl_request;
    mca_mtl_efa_claim_t *claim = ompi_mtl_efa_handle_claim((*message)->req_ptr);
    if (NULL == claim) { /* claimed from the rings */
        int rc = prepare_recv(req, convertor, (*message)->comm, false);
        if (OPAL_LIKELY(OMPI_SUCCESS == rc)) {
            rc = ompi_mtl_efa_engine_imrecv(*message, req);
            if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
                return unposted(req, rc);
            }
            ompi_message_return(*message);
            *message = MPI_MESSAGE_NULL;
        }
        return rc;
    }
    int rc = prepare_recv(req, convertor, (*message)->comm, true); /* (claimed from the provider) */
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        return rc;
    }
    req->ctx = claim->ctx;
    claim->mrecv = req;
    rc = post_claimed(claim);
    if (OPAL_UNLIKELY(OMPI_SUCCESS != rc)) {
        claim->mrecv = NULL;
        return unposted(req, rc);
    }
    ompi_message_return(*message);
    *message = MPI_MESSAGE_NULL;
    return OMPI_SUCCESS;
}

int ompi_mtl_efa_cancel(struct mca_mtl_base_module_t *mtl, mca_mtl_request_t *mtl_request,
                        int flag) {
    (void)mtl;
    (void)flag;
    mca_mtl_efa_request_t *req = (mca_mtl_efa_request_t *)mtl_request;
    if (req->by_engine) {
        ompi_mtl_efa_engine_cancel(req); /* a send or a receive */
        return OMPI_SUCCESS;
    }
    if (req->is_send) {
        ompi_mtl_efa_cancel_send(req);
        return OMPI_SUCCESS;
    }
    /* Drain first: a receive that already matched must not be cancelled.
     * (Marked first: a device receive the provider refused from the
     * backlog, being posted again, is found by neither, and looks.) */
    __atomic_store_n(&req->cancelled, true, __ATOMIC_SEQ_CST);
    efa_core_progress(ompi_mtl_efa.core);
    if (!req->super.ompi_req->req_complete) {
        /* If the provider found it, an -FI_ECANCELED completion follows and
         * marks the request cancelled; otherwise it completes normally. */
        efa_ctx_cancel(req->ctx, &req->op);
    }
    return OMPI_SUCCESS;
}
