/*
 * btl_efa's defaults that depend on the provider, the job and the peer
 * deadline, each left alone where the user set the parameter
 * (btl_efa_defaults.c): what the component's init calls.
 */
#ifndef MCA_BTL_EFA_DEFAULTS_H
#define MCA_BTL_EFA_DEFAULTS_H

#include "btl_efa.h"

BEGIN_C_DECLS

/* Was this btl_efa_* parameter left at its default (not set by the user)? */
bool mca_btl_efa_param_is_default(const char *name);

/* The two-sided limits and flags for the provider and the job; returns why
 * the eager limit is what it is, for the report. */
const char *mca_btl_efa_choose_send_path(mca_btl_efa_module_t *btl, efa_core_t *core,
                                         bool spans_nodes);

/* How long a request the target executes waits for its answer. */
void mca_btl_efa_choose_rma_timeout(efa_core_t *core);

END_C_DECLS

#endif
