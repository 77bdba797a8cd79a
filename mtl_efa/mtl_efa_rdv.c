/*
 * mtl_efa's large messages under the provider's matching to a peer that
 * several NICs reach: read rendezvous (common/core/core_rdv.cpp).  The
 * provider's tagged path carries a message over one NIC; here the message
 * goes as a note and a tagged message of no bytes, and the receive that
 * matches it reads the bytes striped over every rail, then answers.  The
 * send completes with the answer, so a synchronous send needs no
 * acknowledgement of its own.
 */
#include "mtl_efa.h"

#include "efa_core_rdv.h"

#include "ompi/mca/mtl/base/mtl_base_datatype.h"
#include "opal/runtime/opal_progress.h"

/* A send's offer, apart from the request (only large sends pay for it). */
typedef struct {
    efa_rdv_offer_t offer; /* first */
    mca_mtl_efa_request_t *req;
    void (*finish_one)(mca_mtl_efa_request_t *req);
} mtl_efa_rdv_send_t;

void ompi_mtl_efa_rdv_init(const efa_core_info_t *info) {
    ompi_mtl_efa.rdv_min = SIZE_MAX;
    if (efa_core_can_rdv(ompi_mtl_efa.core) && info->num_nics > 1 && info->stripe_min > 0) {
        ompi_mtl_efa.rdv_min = info->stripe_min;
        mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                                  "under the provider's matching, messages from %zu bytes to "
                                  "peers with several NICs are read by the receiver, striped "
                                  "over up to %d NICs",
                                  ompi_mtl_efa.rdv_min, info->num_nics);
    }
}

bool ompi_mtl_efa_rdv_peer(const efa_peer_t *peer) {
    /* A rail that reaches another NIC of the peer than its first: else the
     * receiver, reading over its own rails, would read over one NIC. */
    for (int r = 1; r < peer->num_rails; ++r) {
        if (0 != peer->rail_nic[r] &&
            FI_ADDR_NOTAVAIL != efa_peer_rail_addr(peer, r, 0, peer->num_addrs)) {
            return true;
        }
    }
    return false;
}

static void offer_done(efa_rdv_offer_t *o, int result) {
    mtl_efa_rdv_send_t *s = (mtl_efa_rdv_send_t *)o;
    mca_mtl_efa_request_t *req = s->req;
    /* (-FI_ECANCELED: this process ended it, withdrawn or failed; the
     * tagged message's completion carries any error of its own.) */
    if (result && -FI_ECANCELED != result && OMPI_SUCCESS == req->error) {
        req->error = ompi_mtl_efa_error(result);
        if (OMPI_SUCCESS == req->error) {
            req->error = OMPI_ERROR;
        }
    }
    s->finish_one(req); /* (may free s: the request's end frees its offer) */
}

int ompi_mtl_efa_rdv_send(mca_mtl_efa_request_t *req, fi_addr_t addr, uint64_t bits, uint32_t seq,
                          uint32_t me, void (*finish_one)(mca_mtl_efa_request_t *req)) {
    int err = 0;
    efa_mr_t *mr =
        efa_core_mr_acquire(ompi_mtl_efa.core, req->buffer, req->length, FI_REMOTE_READ, &err);
    mtl_efa_rdv_send_t *s = NULL == mr ? NULL : malloc(sizeof(*s));
    if (NULL == s) {
        if (NULL != mr) {
            efa_core_mr_release(ompi_mtl_efa.core, mr);
        }
        return OMPI_ERR_NOT_AVAILABLE; /* the caller sends it the plain way */
    }
    req->mr = mr;
    s->req = req;
    s->finish_one = finish_one;
    s->offer.done = offer_done;
    req->rdv = s;
    req->pending = 2; /* the tagged message's send, and the answer */
    bits = efa_tag_codec_with_seq(&ompi_mtl_efa.codec, bits, seq) | ompi_mtl_efa.codec.rdv_bit;
    req->seq_tag = bits;
    req->seq_addr = addr;
    int rc = efa_ctx_rdv_offer(req->ctx, addr, bits, me, mr, req->buffer, req->length, &req->op,
                               &s->offer);
    if (OPAL_UNLIKELY(rc)) {
        req->rdv = NULL;
        req->seq_tag = 0;
        free(s);
        efa_core_mr_release(ompi_mtl_efa.core, mr);
        req->mr = NULL;
        /* (-FI_EALREADY: an older message of this seq still unanswered;
         * -FI_ENOMEM: no memory to watch the receiver: this one goes the
         * plain way) */
        return -FI_EALREADY == rc || -FI_ENOMEM == rc ? OMPI_ERR_NOT_AVAILABLE
                                                      : ompi_mtl_efa_error(rc);
    }
    return OMPI_SUCCESS;
}

void ompi_mtl_efa_rdv_send_failed(mca_mtl_efa_request_t *req, int err) {
    efa_rdv_offer_end(req->rdv, err); /* no answer can come for a message that failed */
}

/* ---- receives ---------------------------------------------------------- */

/* A receive that matched a rendezvous message, while its bytes are read. */
typedef struct {
    mca_mtl_efa_request_t *req;
    efa_cqe_t cqe; /* the tagged message's completion: the envelope */
    void (*finish)(mca_mtl_efa_request_t *req, const efa_cqe_t *cqe);
} mtl_efa_rdv_recv_t;

static void take_done(void *arg, int err, size_t msg_len) {
    mtl_efa_rdv_recv_t *r = arg;
    mca_mtl_efa_request_t *req = r->req;
    void (*finish)(mca_mtl_efa_request_t *, const efa_cqe_t *) = r->finish;
    efa_cqe_t cqe = r->cqe;
    free(r);
    cqe.err = err;
    cqe.olen = 0;
    /* Longer than the buffer: len bytes were read, and recv_finish reports
     * the truncation from the length. */
    cqe.len = err ? 0 : msg_len;
    finish(req, &cqe);
}

static efa_peer_t *sender_of(struct ompi_communicator_t *comm, const efa_cqe_t *cqe) {
    const efa_tag_codec_t *codec = &ompi_mtl_efa.codec;
    const int src =
        codec->source_in_tag ? (int)efa_tag_codec_src(codec, cqe->tag) : (int)(uint32_t)cqe->data;
    return ompi_mtl_efa_sender_peer(comm, src);
}

void ompi_mtl_efa_rdv_recv(mca_mtl_efa_request_t *req, const efa_cqe_t *cqe,
                           void (*finish)(mca_mtl_efa_request_t *req, const efa_cqe_t *cqe)) {
    efa_peer_t *peer = sender_of(req->comm, cqe);
    mtl_efa_rdv_recv_t *r = NULL == peer ? NULL : malloc(sizeof(*r));
    int rc = NULL == peer ? -FI_EHOSTUNREACH : NULL == r ? -FI_ENOMEM : 0;
    if (0 == rc) {
        r->req = req;
        r->cqe = *cqe;
        r->finish = finish;
        /* (req->mr: a device buffer's registration, read into over the
         * rails it is on; FI_MR_LOCAL's never, which has no rendezvous) */
        rc = efa_ctx_rdv_take_mr(req->ctx, peer, cqe->tag, req->buffer, req->length, req->mr,
                                 take_done, r);
    } else if (NULL != peer) {
        efa_ctx_rdv_decline(req->ctx, peer, cqe->tag, rc); /* its sender waits for an answer */
    }
    if (rc) {
        free(r);
        efa_cqe_t failed = *cqe;
        failed.err = rc;
        failed.len = 0;
        finish(req, &failed);
    }
}

/* A probe's wait for the note of a message it claimed: the sender is
 * watched meanwhile (its loss ends the wait). */
typedef struct {
    efa_op_t op;
    volatile bool lost;
} mtl_efa_rdv_watch_t;

static void sender_lost(efa_op_t *op, const efa_cqe_t *cqe) {
    (void)cqe;
    ((mtl_efa_rdv_watch_t *)op)->lost = true;
}

int ompi_mtl_efa_rdv_probed(struct ompi_communicator_t *comm, efa_ctx_t *ctx, efa_cqe_t *cqe,
                            bool claimed) {
    efa_peer_t *peer = sender_of(comm, cqe);
    if (NULL == peer) {
        return OMPI_ERR_UNREACH;
    }
    size_t len = 0;
    int rc = efa_ctx_rdv_len(ctx, peer, cqe->tag, &len);
    if (-FI_EAGAIN == rc && !claimed) {
        return OMPI_ERR_NOT_FOUND; /* its note is on its way: not yet */
    }
    if (-FI_EAGAIN == rc) {
        /* Claimed: the note left before the message and is on its way. */
        mtl_efa_rdv_watch_t w = {.op = {.complete = sender_lost}, .lost = false};
        const bool watched = 0 == efa_core_peer_watch(ompi_mtl_efa.core, peer, &w.op);
        while (-FI_EAGAIN == (rc = efa_ctx_rdv_len(ctx, peer, cqe->tag, &len)) && !w.lost) {
            opal_progress();
        }
        if (watched && !efa_core_peer_unwatch(ompi_mtl_efa.core, &w.op)) {
            while (!w.lost) { /* its call is due: w lives until it came */
                opal_progress();
            }
        }
        if (-FI_EAGAIN == rc) {
            rc = -FI_EHOSTUNREACH;
        }
    }
    if (rc) {
        return ompi_mtl_efa_error(rc);
    }
    cqe->len = len;
    return OMPI_SUCCESS;
}
