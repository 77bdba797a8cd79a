/*
 * btl_efa's one-sided mode, agreed by the job (btl_efa_mode.c): what the
 * component's init, add_procs and the one-sided entry points call.
 */
#ifndef MCA_BTL_EFA_MODE_H
#define MCA_BTL_EFA_MODE_H

#include "btl_efa.h"

BEGIN_C_DECLS

/* NUMBER: the process numbers its messages through the provider to every
 * process of its job once all of them do (btl_efa_spread.c), so that a
 * receive failed on its first NIC is that NIC's flush, not a loss nobody
 * could find. */
enum { EFA_BTL_CAN_PUT = 1, EFA_BTL_CAN_GET = 2, EFA_BTL_CAN_ATOMICS = 4, EFA_BTL_CAN_NUMBER = 8 };
enum {
    EFA_BTL_WHY_NONE = 0,
    EFA_BTL_WHY_PARAM,    /* the parameter says emulated */
    EFA_BTL_WHY_PROVIDER, /* the provider cannot (no FI_RMA/FI_ATOMIC, an op missing, a defect) */
    EFA_BTL_WHY_EMULATED, /* the provider would emulate it: auto prefers ours */
    EFA_BTL_WHY_RING,     /* atomics: the on-node channel carries them */
};
int mca_btl_efa_mode_publish(mca_btl_efa_module_t *btl);
/* Agree on the job's mode (once; every later call returns at once). */
void mca_btl_efa_mode_agree(mca_btl_efa_module_t *btl);
static inline void mca_btl_efa_mode_ready(mca_btl_efa_module_t *btl) {
    /* (acquire: the modes the agreement set are read after it) */
    if (OPAL_UNLIKELY(!__atomic_load_n(&btl->mode.agreed, __ATOMIC_ACQUIRE))) {
        mca_btl_efa_mode_agree(btl);
    }
}
void mca_btl_efa_mode_add_peer(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                               const opal_proc_t *proc);

END_C_DECLS
#endif
