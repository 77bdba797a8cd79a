/*
 * Untagged messaging of the shared core, for btl_efa.
 *
 * The MTL owns the tagged queue of the shared endpoint; the BTL's messages
 * travel untagged (FI_MSG), so the two never match each other's traffic.
 * The core keeps a pool of pre-posted untagged receive buffers on every
 * context and hands each arrived message to one registered handler; the
 * buffer is posted again when the handler returns, so the handler must
 * copy whatever it keeps.
 *
 * Same conventions as efa_core.h: 0 or a negative libfabric error.
 */
#ifndef EFA_CORE_MSG_H
#define EFA_CORE_MSG_H

#include "efa_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called from progress for every untagged message that arrived (len bytes
 * at buf, valid until the handler returns), or with err < 0 and len 0 when
 * a receive failed.  May post sends and drive progress. */
typedef void (*efa_msg_handler_fn)(void *arg, efa_ctx_t *ctx, void *buf, size_t len, int err);

/* Install the handler (NULL to remove).  Messages that arrived while no
 * handler was installed are held and delivered here, in order. */
void efa_core_msg_set_handler(efa_core_t *core, efa_msg_handler_fn fn, void *arg);

/* The largest message a receive buffer holds; larger sends are refused. */
size_t efa_core_msg_max_size(const efa_core_t *core);

/* Untagged send; op completes when buf may be reused.  efa_ctx_send
 * retries -FI_EAGAIN while driving progress; efa_ctx_try_send returns it
 * (for callers inside a progress callback that queue instead). */
int efa_ctx_send(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                 efa_op_t *op);
int efa_ctx_try_send(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                     efa_op_t *op);

/* Used by core.cpp only: create the receive pool when the core opens and
 * cancel and free it before the endpoints close. */
int efa_core_msg_open(efa_core_t *core);
void efa_core_msg_close(efa_core_t *core);

#ifdef __cplusplus
}
#endif
#endif /* EFA_CORE_MSG_H */
