/*
 * mtl_efa's acknowledgement of a synchronous send (EFA_PROTO_SYNC_ACK),
 * sent by the receive that took the message.
 */
#include "mtl_efa.h"

/* Synchronous-send acknowledgements carry no payload.  Where the provider
 * injects, they need no context.  Otherwise each one gets its own (a
 * provider may use an operation's fi_context2 as scratch space until it
 * completes, so two acknowledgements in flight can never share one), freed
 * by its completion. */
typedef struct {
    efa_op_t op; /* first: the completion hands it back */
} mtl_efa_ack_send_t;

static void ack_send_complete(efa_op_t *op, const efa_cqe_t *cqe) {
    (void)cqe; /* a lost acknowledgement shows at the sender, as an error or a wait */
    free(op);
}

/* 0, or an OMPI error: the acknowledgement could not be posted (a full
 * queue is not an error: the core keeps the post in its backlog). */
/* seq: the message's (efa_tag_codec_seq), which the sender's
 * acknowledgement receive names. */
int ompi_mtl_efa_send_sync_ack(struct ompi_communicator_t *comm, int src, int32_t tag,
                               uint32_t seq) {
    efa_peer_t *peer = ompi_mtl_efa_sender_peer(comm, src); /* (the sender wrote src) */
    if (OPAL_UNLIKELY(NULL == peer)) {
        return OMPI_ERR_UNREACH;
    }
    const int ci = ompi_mtl_efa_ctx_index(comm);
    efa_ctx_t *ctx = ompi_mtl_efa.ctxs[ci];
    const uint32_t me = (uint32_t)comm->c_my_rank;
    const uint64_t bits =
        efa_tag_codec_with_seq(&ompi_mtl_efa.codec,
                               efa_tag_codec_pack(&ompi_mtl_efa.codec, EFA_PROTO_SYNC_ACK,
                                                  mtl_efa_comm_cid(comm), me, tag),
                               seq);
    if (ompi_mtl_efa.inject_size > 0) {
        return ompi_mtl_efa_rc(efa_ctx_tinject(ctx, NULL, 0, peer->addr[ci], bits, me));
    }
    mtl_efa_ack_send_t *ack = malloc(sizeof(*ack));
    if (OPAL_UNLIKELY(NULL == ack)) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    ack->op.complete = ack_send_complete;
    int rc = efa_ctx_tsend(ctx, NULL, 0, NULL, peer->addr[ci], bits, me, &ack->op);
    if (OPAL_UNLIKELY(rc)) {
        free(ack); /* never reached the provider */
        return ompi_mtl_efa_error(rc);
    }
    return OMPI_SUCCESS;
}
