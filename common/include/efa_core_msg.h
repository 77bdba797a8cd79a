/*
 * Untagged messaging of the shared core, for btl_efa.
 *
 * The MTL owns the tagged queue of the shared endpoint; the BTL's messages
 * travel untagged (FI_MSG), so the two never match each other's traffic.
 * While a handler is installed the core keeps a pool of pre-posted untagged
 * receive buffers on every context and hands each arrived message to the
 * handler; the buffer is posted again when the handler returns, so the
 * handler must copy whatever it keeps.  Without a handler nothing is posted:
 * the receive queue (which some providers share between tagged and
 * untagged receives) is left entirely to the MTL.
 *
 * Nothing here spins on a full provider queue: a receive buffer that
 * cannot be posted again waits for efa_core_msg_progress(), and a send
 * that finds the queue full is returned to the caller to queue.
 *
 * Same conventions as efa_core.h: 0 or a negative libfabric error.
 */
#ifndef EFA_CORE_MSG_H
#define EFA_CORE_MSG_H

#include <sys/uio.h>

#include "efa_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Channels: two owners share the untagged receive pool (btl_efa's active
 * and one-sided messages, and the matching engine's frames to and from
 * other nodes when mtl_efa matches messages itself).  A message's first
 * byte says whose it is: below 0x80 the BTL's (its message types), from
 * 0x80 the engine's.  A message for a channel nobody listens on in this
 * process is dropped. */
#define EFA_MSG_CHANNEL_BTL 0
#define EFA_MSG_CHANNEL_ENGINE 1
#define EFA_MSG_CHANNELS 2
static inline int efa_msg_channel_of(const void *buf, size_t len) {
    return len > 0 && ((const uint8_t *)buf)[0] >= 0x80 ? EFA_MSG_CHANNEL_ENGINE
                                                        : EFA_MSG_CHANNEL_BTL;
}

/* Called from progress for every untagged message that arrived (len bytes
 * at buf, valid until the handler returns), or with err < 0 and len 0 when
 * a receive failed.  src: the sending endpoint's AV entry as the provider
 * reports it, for the check of the sender the message names
 * (efa_core_source_ok); FI_ADDR_NOTAVAIL where it does not say.  May post
 * sends and drive progress. */
typedef void (*efa_msg_handler_fn)(void *arg, efa_ctx_t *ctx, void *buf, size_t len, int err,
                                   fi_addr_t src);

/* Install a channel's handler and post the receive pool (the first install
 * of any channel), or with fn NULL remove it (and cancel and free the pool
 * when no channel is left).  Returns 0 or a negative libfabric error (the
 * pool could not be set up; no handler is installed then). */
int efa_core_msg_set_channel(efa_core_t *core, int channel, efa_msg_handler_fn fn, void *arg);
/* The BTL's channel. */
int efa_core_msg_set_handler(efa_core_t *core, efa_msg_handler_fn fn, void *arg);

/* The number of receive buffers each context keeps posted while a handler
 * is installed (what a sender's per-peer window should be sized against). */
size_t efa_core_msg_recv_count(const efa_core_t *core);

/* Receive buffers posted now on a rail (0: the first NIC); and, for
 * tests, every one posted there cancelled (as a failing NIC would fail
 * them: they rest, core_msg.cpp). */
size_t efa_core_msg_posted(const efa_core_t *core, int rail);
void efa_core_msg_cancel_rail(efa_core_t *core, int rail);

/* Re-post receive buffers that found the provider's queue full, and a
 * rail's failed ones once they have rested.  Cheap when there are none;
 * the handler's owner calls it from its progress. */
int efa_core_msg_progress(efa_core_t *core);

/* The largest message a receive buffer holds; larger sends are refused. */
size_t efa_core_msg_max_size(const efa_core_t *core);

/* Untagged send; op completes when buf may be reused.  Never waits: a full
 * provider queue returns -FI_EAGAIN (also for providers that say
 * -FI_ENOMEM) and the caller queues the send and retries it from
 * progress. */
int efa_ctx_try_send(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                     efa_op_t *op);

/* An untagged inject: buf is copied before the call returns and no
 * completion is written.  -FI_EAGAIN when the provider queue is full;
 * -FI_EMSGSIZE, with nothing posted, when len is over
 * efa_core_info_t.inject_size (or efa_core_msg_max_size): send it with
 * efa_ctx_try_send instead. */
int efa_ctx_try_inject(efa_ctx_t *ctx, const void *buf, size_t len, fi_addr_t dest);

/* The same as efa_ctx_try_send, gathering count buffers (at most efa_core_info_t.tx_iov_limit)
 * into one message; desc holds one descriptor per buffer (or is NULL). */
int efa_ctx_try_sendv(efa_ctx_t *ctx, const struct iovec *iov, void **desc, size_t count,
                      fi_addr_t dest, efa_op_t *op);

/* Used by core.cpp only: set up the (empty) pool when the core opens;
 * cancel its buffers and free it before the endpoints close (close), or,
 * where the provider kept some buffers, free it once they are closed (free:
 * the provider may write into them until then). */
int efa_core_msg_open(efa_core_t *core);
void efa_core_msg_close(efa_core_t *core);
void efa_core_msg_free(efa_core_t *core);

#ifdef __cplusplus
}
#endif
#endif /* EFA_CORE_MSG_H */
