/*
 * What differs for the BTL between Open MPI 4.1 (BTL 3.1) and 5.0 (BTL 3.3):
 * the threads header moved, the job size comes from OPAL in 5.0 (4.1: from
 * the runtime's key), and an active message reaches its receive callback as a
 * receive descriptor (5.0) instead of a descriptor plus tag and cbdata.
 */
#ifndef MCA_BTL_EFA_COMPAT_H
#define MCA_BTL_EFA_COMPAT_H

#include "opal_config.h"

#include <string.h>

#include "common_efa_compat.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/mca/btl/btl.h"

#if OPAL_MAJOR_VERSION >= 5
#include "opal/mca/threads/mutex.h"

/* 5.0's osc/rdma takes only a BTL whose put, get and atomics complete
 * at the target when their callback runs.  Ours do: writes and
 * non-fetching atomics ask for FI_DELIVERY_COMPLETE, fetching ones have the
 * data back, single copy is synchronous, and the emulated path completes on
 * the target's answer, sent after it executed the request. */
#define MCA_BTL_EFA_VERSION_FLAGS MCA_BTL_FLAGS_RDMA_REMOTE_COMPLETION
#define MCA_BTL_EFA_BASE_VERSION MCA_BTL_BASE_VERSION_3_3_0

/* Device memory behind a convertor (not sent in place): 5.0 says accelerator. */
#define MCA_BTL_EFA_CONVERTOR_DEVICE CONVERTOR_ACCELERATOR
/* btl_flags of device puts and gets, and of asynchronous device copies. */
#define MCA_BTL_EFA_FLAGS_DEVICE_RDMA MCA_BTL_FLAGS_ACCELERATOR_RDMA
#define MCA_BTL_EFA_FLAGS_DEVICE_ASYNC                                                             \
    (MCA_BTL_FLAGS_ACCELERATOR_COPY_ASYNC_SEND | MCA_BTL_FLAGS_ACCELERATOR_COPY_ASYNC_RECV)

/* 5.0 exports a component's structure with the plain DECLSPEC. */
#ifndef OPAL_MODULE_DECLSPEC
#define OPAL_MODULE_DECLSPEC OPAL_DECLSPEC
#endif

static inline uint32_t mca_btl_efa_job_size(void) {
    return opal_process_info.num_procs;
}

/* Hand one received fragment to the framework that registered its tag. */
static inline void mca_btl_efa_deliver_am(mca_btl_base_module_t *btl,
                                          struct mca_btl_base_endpoint_t *ep,
                                          mca_btl_base_tag_t tag, mca_btl_base_segment_t *seg) {
    const mca_btl_active_message_callback_t *reg = &mca_btl_base_active_message_trigger[tag];
    mca_btl_base_receive_descriptor_t desc = {.endpoint = ep,
                                              .des_segments = seg,
                                              .des_segment_count = 1,
                                              .tag = tag,
                                              .cbdata = reg->cbdata};
    reg->cbfunc(btl, &desc);
}

/* The on-node ring's own descriptor (see the 4.1 branch): 5.0's is small,
 * filled per message. */
typedef mca_btl_base_receive_descriptor_t mca_btl_efa_recv_des_t;
static inline void mca_btl_efa_recv_des_init(mca_btl_efa_recv_des_t *des,
                                             mca_btl_base_segment_t *seg) {
    memset(des, 0, sizeof(*des));
    des->des_segments = seg;
    des->des_segment_count = 1;
}
static inline void mca_btl_efa_deliver_am_des(mca_btl_base_module_t *btl,
                                              struct mca_btl_base_endpoint_t *ep,
                                              mca_btl_base_tag_t tag, mca_btl_efa_recv_des_t *des) {
    const mca_btl_active_message_callback_t *reg = &mca_btl_base_active_message_trigger[tag];
    des->endpoint = ep;
    des->tag = tag;
    des->cbdata = reg->cbdata;
    reg->cbfunc(btl, des);
}
#else
#include "opal/mca/pmix/pmix.h"
#include "opal/threads/mutex.h"

#define MCA_BTL_EFA_CONVERTOR_DEVICE CONVERTOR_CUDA
#define MCA_BTL_EFA_FLAGS_DEVICE_RDMA MCA_BTL_FLAGS_CUDA_RDMA
#define MCA_BTL_EFA_FLAGS_DEVICE_ASYNC                                                             \
    (MCA_BTL_FLAGS_CUDA_COPY_ASYNC_SEND | MCA_BTL_FLAGS_CUDA_COPY_ASYNC_RECV)
#define MCA_BTL_EFA_VERSION_FLAGS 0 /* 4.1 has no remote-completion flag */
#define MCA_BTL_EFA_BASE_VERSION MCA_BTL_BASE_VERSION_3_1_0

/* 4.1's OPAL keeps no job size (ORTE's ompi_process_info has it, out of a
 * BTL's reach in the opal layer): the runtime's own key, read once.  A
 * runtime without it: this process alone, so never "spans nodes" by
 * mistake for a singleton; mpirun and srun always set it. */
static inline uint32_t mca_btl_efa_job_size(void) {
    static uint32_t size;
    if (0 == size) {
        opal_process_name_t job = OPAL_PROC_MY_NAME;
        uint32_t got = 0, *ptr = &got;
        int rc;
        job.vpid = OPAL_VPID_WILDCARD;
        OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, OPAL_PMIX_JOB_SIZE, &job, &ptr, OPAL_UINT32);
        size = (OPAL_SUCCESS == rc && got > 0) ? got : 1;
    }
    return size;
}

static inline void mca_btl_efa_deliver_am(mca_btl_base_module_t *btl,
                                          struct mca_btl_base_endpoint_t *ep,
                                          mca_btl_base_tag_t tag, mca_btl_base_segment_t *seg) {
    const mca_btl_active_message_callback_t *reg = &mca_btl_base_active_message_trigger[tag];
    mca_btl_base_descriptor_t des;
    (void)ep;
    memset(&des, 0, sizeof(des));
    des.des_segments = seg;
    des.des_segment_count = 1;
    des.order = MCA_BTL_NO_ORDER;
    reg->cbfunc(btl, tag, &des, reg->cbdata);
}

/* A receive descriptor kept by its user and set up once (the on-node
 * ring's: one poller at a time), its segment the only thing that changes
 * per message: the zeroing of a whole descriptor on the stack cost more
 * than the rest of handing a message up. */
typedef mca_btl_base_descriptor_t mca_btl_efa_recv_des_t;
static inline void mca_btl_efa_recv_des_init(mca_btl_efa_recv_des_t *des,
                                             mca_btl_base_segment_t *seg) {
    memset(des, 0, sizeof(*des));
    des->des_segments = seg;
    des->des_segment_count = 1;
    des->order = MCA_BTL_NO_ORDER;
}
static inline void mca_btl_efa_deliver_am_des(mca_btl_base_module_t *btl,
                                              struct mca_btl_base_endpoint_t *ep,
                                              mca_btl_base_tag_t tag, mca_btl_efa_recv_des_t *des) {
    const mca_btl_active_message_callback_t *reg = &mca_btl_base_active_message_trigger[tag];
    (void)ep;
    reg->cbfunc(btl, tag, des, reg->cbdata);
}
#endif

#endif
