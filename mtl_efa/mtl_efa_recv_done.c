/*
 * mtl_efa receives that ended: a request's status, its buffer (a device
 * buffer's host copy, a packed datatype's) and a synchronous sender's
 * answer, then pml cm's completion callback.
 */
#include "mtl_efa.h"
#include "mtl_efa_device.h"

/* Fill an MPI status's envelope and count from a receive or peek
 * completion.  Not MPI_ERROR: probes write straight into the user's status,
 * and single-completion calls must leave that field alone (MPI sets it only
 * in calls that complete several requests); a request's own status gets it
 * in ompi_mtl_efa_recv_finish. */
void ompi_mtl_efa_fill_status(ompi_status_public_t *status, const efa_cqe_t *cqe) {
    const efa_tag_codec_t *codec = &ompi_mtl_efa.codec;
    status->MPI_SOURCE =
        codec->source_in_tag ? (int)efa_tag_codec_src(codec, cqe->tag) : (int)(uint32_t)cqe->data;
    status->MPI_TAG = efa_tag_codec_tag(codec, cqe->tag);
    status->_ucount = cqe->len;
}

/* The provider delivered part of a message that fitted (ofi_rxd under
 * loss): the data is lost, so the receive fails; say why once per process
 * rather than let it read as the sender's truncation. */
static void short_delivery(const mca_mtl_efa_request_t *req, const efa_cqe_t *cqe) {
    static bool said = false;
    if (!said) {
        said = true;
        mca_common_efa_show_help("help-mtl-efa.txt", "short-delivery", false,
                                 opal_process_info.nodename, cqe->len, req->length);
    }
}

void ompi_mtl_efa_recv_finish(mca_mtl_efa_request_t *req, const efa_cqe_t *cqe) {
    ompi_status_public_t *status = &req->super.ompi_req->req_status;
    if (req->mr) { /* before its buffer goes (a staging or packing one) */
        efa_core_mr_release(ompi_mtl_efa.core, req->mr);
        req->mr = NULL;
    }
    if (-FI_ECANCELED == cqe->err && req->any_lost) {
        /* Withdrawn as a member of its communicator was lost
         * (mtl_efa_any.c): an error, not a cancel. */
        status->MPI_ERROR = ompi_mtl_efa_status_error(ompi_mtl_efa_error(req->any_lost));
        if (OMPI_SUCCESS == status->MPI_ERROR) {
            status->MPI_ERROR = MPI_ERR_OTHER;
        }
        status->_ucount = 0;
        ompi_mtl_efa_recv_buffer_done(req, 0, false);
    } else if (-FI_ECANCELED == cqe->err) {
        status->_cancelled = true;
        status->_ucount = 0;
        ompi_mtl_efa_recv_buffer_done(req, 0, false);
    } else {
        ompi_mtl_efa_fill_status(status, cqe);
        status->MPI_ERROR = OMPI_SUCCESS;
        /* Truncation shows either as the provider's error or, where the
         * core posted an overflow area, as a length beyond the buffer. */
        efa_recv_outcome_t outcome = efa_recv_outcome(cqe, req->length);
        if (EFA_RECV_SHORT == outcome) {
            short_delivery(req, cqe);
            status->MPI_ERROR = MPI_ERR_INTERN;
        } else if (EFA_RECV_TRUNCATED == outcome || (0 == cqe->err && cqe->len > req->length)) {
            status->MPI_ERROR = MPI_ERR_TRUNCATE;
            status->_ucount = req->length; /* what the buffer held */
        } else if (cqe->err) {
            status->MPI_ERROR = ompi_mtl_efa_status_error(ompi_mtl_efa_error(cqe->err));
            if (OMPI_SUCCESS == status->MPI_ERROR) {
                status->MPI_ERROR = MPI_ERR_OTHER;
            }
        }
        const bool failed =
            OMPI_SUCCESS != status->MPI_ERROR && MPI_ERR_TRUNCATE != status->MPI_ERROR;
        /* (a message delivered in part matched all the same: its
         * synchronous sender is answered, and this receive fails) */
        if (EFA_PROTO_SYNC == efa_tag_codec_proto(&ompi_mtl_efa.codec, cqe->tag) &&
            (!failed || EFA_RECV_SHORT == outcome)) {
            /* The data is here, but the sender's MPI_Ssend would wait for
             * ever: say so on this receive rather than nowhere. */
            int rc = ompi_mtl_efa_send_sync_ack(req->comm, status->MPI_SOURCE, status->MPI_TAG,
                                                efa_tag_codec_seq(&ompi_mtl_efa.codec, cqe->tag));
            if (OPAL_UNLIKELY(OMPI_SUCCESS != rc) && OMPI_SUCCESS == status->MPI_ERROR) {
                status->MPI_ERROR = ompi_mtl_efa_status_error(rc);
            }
        }
        if (OPAL_UNLIKELY(failed)) {
            ompi_mtl_efa_recv_buffer_failed(req);
        } else {
            ompi_mtl_efa_recv_buffer_done(req, status->_ucount, true);
        }
    }
    req->super.completion_callback(&req->super);
}
