/*
 * The stack's progress (common_efa_progress.c): one opal_progress
 * callback drives the core and the components' functions
 * (mca_common_efa_progress_add, common_efa.h).
 */
#ifndef MCA_COMMON_EFA_PROGRESS_H
#define MCA_COMMON_EFA_PROGRESS_H

#include "common_efa.h"

/* The core the callback drives (NULL: none, the callback unregistered
 * unless a component's function is left); with its provider's FI_HMEM the
 * callback first gives a thread without a CUDA context the process's. */
void mca_common_efa_progress_drive(efa_core_t *core);

#endif
