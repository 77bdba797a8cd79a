/*
 * mtl_efa module: the module table, its setup and finalize, and the
 * communicators (peers: mtl_efa_peers.c).
 */
#include "mtl_efa.h"

#include "efa_core_rdv.h"
#include "mtl_efa_device.h"

#include "opal/datatype/opal_convertor.h"
#include "opal/util/show_help.h"

#if EFA_TSAN
/* pml/cm recycles its requests through free lists whose atomics TSan cannot
 * see: what one thread's completion wrote and the next user's
 * initialization then read as races.  A request is taken (acquire) as
 * pml/cm hands it to the MTL and handed back (release) just before its
 * completion callback, so any access of the MTL's after that is still
 * seen.
 * pml/cm's blocking calls keep the request and its convertor (or the
 * convertor alone) on the waiting thread's stack, which that thread reuses
 * once Open MPI's wait returns, with no call of ours in between to acquire
 * the request: each stack address involved is released at the hand-back
 * too, the thread notes its recent such addresses, and each entry into the
 * MTL acquires them all (tsan_enter).  All, and kept after the acquire: the
 * wait's own progress may enter the MTL (a communicator being made by
 * another thread posts its messages from an opal_progress callback) before
 * the request it waits for has been handed back, and the next entry after
 * the wait must still acquire that request.  Only addresses on this
 * thread's stack are noted, so what the notes order is this thread's own
 * requests' completions, never a recycled heap request's next user. */
#define TSAN_ON_STACK 4
static __thread const void *tsan_on_stack[TSAN_ON_STACK];
static __thread unsigned tsan_on_stack_next;

static void tsan_enter(void) {
    for (int i = 0; i < TSAN_ON_STACK; ++i) {
        if (NULL != tsan_on_stack[i]) {
            EFA_TSAN_ACQUIRE(tsan_on_stack[i]);
        }
    }
}

static void tsan_note_on_stack(const void *p) {
    for (int i = 0; i < TSAN_ON_STACK; ++i) {
        if (tsan_on_stack[i] == p) {
            return;
        }
    }
    tsan_on_stack[tsan_on_stack_next++ % TSAN_ON_STACK] = p;
}

static void tsan_handed_back(mca_mtl_request_t *r) {
    mca_mtl_efa_request_t *req = (mca_mtl_efa_request_t *)r;
    void (*callback)(struct mca_mtl_request_t *) = req->tsan_callback;
    if (NULL != req->tsan_stack_convertor) {
        EFA_TSAN_RELEASE(req->tsan_stack_convertor);
    }
    /* The caller's own buffer (not a packing copy): a program that reuses
     * it once its call returned acquires it (tests/mpi/test_util.h,
     * tu_tsan_acquire), as nothing of Open MPI's wait is seen. */
    if (!req->free_buffer && NULL != req->buffer) {
        EFA_TSAN_RELEASE(req->buffer);
    }
    EFA_TSAN_RELEASE(req); /* last: the request may be taken again from here on */
    callback(r);
}

static void tsan_take(mca_mtl_request_t *r, const struct opal_convertor_t *convertor) {
    mca_mtl_efa_request_t *req = (mca_mtl_efa_request_t *)r;
    char here;
    tsan_enter();
    EFA_TSAN_ACQUIRE(req);
    /* In a frame above this one, within 64 KiB: the caller's stack. */
    const bool req_on_stack = (char *)r > &here && (char *)r - &here < 65536;
    const bool conv_on_stack = (char *)convertor > &here && (char *)convertor - &here < 65536;
    req->tsan_stack_convertor = !req_on_stack && conv_on_stack ? convertor : NULL;
    if (req_on_stack) {
        tsan_note_on_stack(r);
    } else if (conv_on_stack) {
        tsan_note_on_stack(convertor);
    }
    if (r->completion_callback != tsan_handed_back) { /* pml/cm may set it once per request */
        req->tsan_callback = r->completion_callback;
        r->completion_callback = tsan_handed_back;
    }
}

/* A request refused at once goes back to pml/cm without a callback. */
static int tsan_refused(mca_mtl_request_t *r, int rc) {
    if (OMPI_SUCCESS != rc) {
        EFA_TSAN_RELEASE(r);
    }
    return rc;
}

static int tsan_send(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm, int dest,
                     int tag, struct opal_convertor_t *convertor, mca_pml_base_send_mode_t mode) {
    tsan_enter();
    return ompi_mtl_efa_send(mtl, comm, dest, tag, convertor, mode);
}

static int tsan_isend(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm, int dest,
                      int tag, struct opal_convertor_t *convertor, mca_pml_base_send_mode_t mode,
                      bool blocking, mca_mtl_request_t *r) {
    tsan_take(r, convertor);
    return tsan_refused(r, ompi_mtl_efa_isend(mtl, comm, dest, tag, convertor, mode, blocking, r));
}

static int tsan_irecv(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm, int src,
                      int tag, struct opal_convertor_t *convertor, mca_mtl_request_t *r) {
    tsan_take(r, convertor);
    return tsan_refused(r, ompi_mtl_efa_irecv(mtl, comm, src, tag, convertor, r));
}

static int tsan_imrecv(struct mca_mtl_base_module_t *mtl, struct opal_convertor_t *convertor,
                       struct ompi_message_t **message, mca_mtl_request_t *r) {
    tsan_take(r, convertor);
    return tsan_refused(r, ompi_mtl_efa_imrecv(mtl, convertor, message, r));
}
#define MTL_EFA_SEND_CALL tsan_send
#define MTL_EFA_ISEND_CALL tsan_isend
#define MTL_EFA_IRECV_CALL tsan_irecv
#define MTL_EFA_IMRECV_CALL tsan_imrecv
#else
#define MTL_EFA_SEND_CALL ompi_mtl_efa_send
#define MTL_EFA_ISEND_CALL ompi_mtl_efa_isend
#define MTL_EFA_IRECV_CALL ompi_mtl_efa_irecv
#define MTL_EFA_IMRECV_CALL ompi_mtl_efa_imrecv
#endif

#if MTL_EFA_PEER_LOST_IS_A_CLASS
/* A call that fails as its peer is lost returns the class a status would
 * hold (mtl_efa_compat.h's MTL_EFA_ERR_PEER_LOST), not the MTL's inner
 * code.  (4.1's inner code is OMPI_ERR_UNREACH, which Open MPI turns into
 * that class itself: its calls need no step between.) */
static int lost_send(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm, int dest,
                     int tag, struct opal_convertor_t *convertor, mca_pml_base_send_mode_t mode) {
    return ompi_mtl_efa_mpi_error(MTL_EFA_SEND_CALL(mtl, comm, dest, tag, convertor, mode));
}

static int lost_isend(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm, int dest,
                      int tag, struct opal_convertor_t *convertor, mca_pml_base_send_mode_t mode,
                      bool blocking, mca_mtl_request_t *r) {
    return ompi_mtl_efa_mpi_error(
        MTL_EFA_ISEND_CALL(mtl, comm, dest, tag, convertor, mode, blocking, r));
}

static int lost_irecv(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm, int src,
                      int tag, struct opal_convertor_t *convertor, mca_mtl_request_t *r) {
    return ompi_mtl_efa_mpi_error(MTL_EFA_IRECV_CALL(mtl, comm, src, tag, convertor, r));
}

static int lost_imrecv(struct mca_mtl_base_module_t *mtl, struct opal_convertor_t *convertor,
                       struct ompi_message_t **message, mca_mtl_request_t *r) {
    return ompi_mtl_efa_mpi_error(MTL_EFA_IMRECV_CALL(mtl, convertor, message, r));
}

static int lost_iprobe(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm, int src,
                       int tag, int *flag, struct ompi_status_public_t *status) {
    return ompi_mtl_efa_mpi_error(ompi_mtl_efa_iprobe(mtl, comm, src, tag, flag, status));
}

static int lost_improbe(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm,
                        int src, int tag, int *matched, struct ompi_message_t **message,
                        struct ompi_status_public_t *status) {
    return ompi_mtl_efa_mpi_error(
        ompi_mtl_efa_improbe(mtl, comm, src, tag, matched, message, status));
}
#define MTL_EFA_SEND lost_send
#define MTL_EFA_ISEND lost_isend
#define MTL_EFA_IRECV lost_irecv
#define MTL_EFA_IMRECV lost_imrecv
#define MTL_EFA_IPROBE lost_iprobe
#define MTL_EFA_IMPROBE lost_improbe
#else
#define MTL_EFA_SEND MTL_EFA_SEND_CALL
#define MTL_EFA_ISEND MTL_EFA_ISEND_CALL
#define MTL_EFA_IRECV MTL_EFA_IRECV_CALL
#define MTL_EFA_IMRECV MTL_EFA_IMRECV_CALL
#define MTL_EFA_IPROBE ompi_mtl_efa_iprobe
#define MTL_EFA_IMPROBE ompi_mtl_efa_improbe
#endif

mca_mtl_efa_module_t ompi_mtl_efa = {
    .base =
        {
            .mtl_max_contextid = 0, /* set from the tag layout at init */
            .mtl_max_tag = 0,
            .mtl_request_size = 0,
            .mtl_flags = 0,
            .mtl_add_procs = ompi_mtl_efa_add_procs,
            .mtl_del_procs = ompi_mtl_efa_del_procs,
            .mtl_finalize = ompi_mtl_efa_finalize,
            .mtl_send = MTL_EFA_SEND,
            .mtl_isend = MTL_EFA_ISEND,
            .mtl_irecv = MTL_EFA_IRECV,
            .mtl_iprobe = MTL_EFA_IPROBE,
            .mtl_imrecv = MTL_EFA_IMRECV,
            .mtl_improbe = MTL_EFA_IMPROBE,
            .mtl_cancel = ompi_mtl_efa_cancel,
            .mtl_add_comm = ompi_mtl_efa_add_comm,
            .mtl_del_comm = ompi_mtl_efa_del_comm,
        },
};

int ompi_mtl_efa_module_init(efa_core_t *core, bool thread_multiple) {
    const efa_core_info_t *info = efa_core_get_info(core);
    ompi_mtl_efa.core = core;
    ompi_mtl_efa.layout = info->tag_layout;
    ompi_mtl_efa.codec = efa_tag_codec_make(&info->tag_layout);
    for (int i = 0; i < 4; ++i) {
        ompi_mtl_efa.recv_ignore[i] =
            efa_tag_recv_ignore(&info->tag_layout, 0 != (i & 1), 0 != (i & 2));
    }
    ompi_mtl_efa.inject_size = info->inject_size;
    if (ompi_mtl_efa_params.test.no_inject) {
        /* The paths a provider without inject takes (its own context for
         * every acknowledgement) are otherwise never run on the stand-ins,
         * which all inject. */
        ompi_mtl_efa.inject_size = 0;
        mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                                  "inject off (mtl_efa_debug_no_inject, a test setting)");
    }
    ompi_mtl_efa.withdraw = efa_core_can_withdraw(core);
    mca_common_efa_say_choice("mtl:efa", "mtl_efa",
                              ompi_mtl_efa.withdraw
                                  ? "MPI_Cancel withdraws large provider sends at the receiver"
                                  : "MPI_Cancel cannot withdraw large provider sends here (no "
                                    "seq in the tag layout, no tags, local registration, or "
                                    "shm): they complete once matched");
    ompi_mtl_efa_rdv_init(info);
    ompi_mtl_efa.num_contexts = info->num_contexts;
    ompi_mtl_efa.mr_local = info->mr_local;
    ompi_mtl_efa.mt = thread_multiple;
    ompi_mtl_efa.ctxs = malloc(sizeof(efa_ctx_t *) * (size_t)info->num_contexts);
    if (NULL == ompi_mtl_efa.ctxs) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    for (int i = 0; i < info->num_contexts; ++i) {
        ompi_mtl_efa.ctxs[i] = efa_core_ctx(core, i);
    }
    /* Honest limits: what the tag layout can carry. */
    ompi_mtl_efa.base.mtl_max_contextid = (int)efa_tag_max_cid(&ompi_mtl_efa.layout);
    ompi_mtl_efa.base.mtl_max_tag = efa_tag_max_tag(&ompi_mtl_efa.layout);
    ompi_mtl_efa.base.mtl_request_size = sizeof(mca_mtl_efa_request_t) - sizeof(mca_mtl_request_t);
    ompi_mtl_efa_any_init();
    return OMPI_SUCCESS;
}

int ompi_mtl_efa_add_comm(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm) {
    (void)mtl;
    /* The tag layout bounds the communicator id and, when the source rides
     * in the tag, the communicator size. */
    if (mtl_efa_comm_cid(comm) > efa_tag_max_cid(&ompi_mtl_efa.layout)) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    if (efa_tag_source_in_tag(&ompi_mtl_efa.layout)) {
        int size = OMPI_COMM_IS_INTER(comm) ? ompi_comm_remote_size(comm) : ompi_comm_size(comm);
        int local = ompi_comm_size(comm);
        int largest = size > local ? size : local;
        if ((uint32_t)largest > efa_tag_max_src(&ompi_mtl_efa.layout) + 1) {
            opal_show_help("help-mtl-efa.txt", "comm-too-large", true, opal_process_info.nodename,
                           largest, (int)efa_tag_max_src(&ompi_mtl_efa.layout) + 1);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
    }
    return ompi_mtl_efa_engine_add_comm(comm);
}

int ompi_mtl_efa_del_comm(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm) {
    (void)mtl;
    ompi_mtl_efa_any_comm_freed(comm);
    ompi_mtl_efa_engine_del_comm(comm);
    return OMPI_SUCCESS;
}

int ompi_mtl_efa_finalize(struct mca_mtl_base_module_t *mtl) {
    (void)mtl;
    ompi_mtl_efa_any_fini();
    ompi_mtl_efa_engine_fini();
    ompi_mtl_efa_put_kept_peers(); /* (the engine read them until it ended) */
    ompi_mtl_efa_device_fini();
    const size_t acks_left = ompi_mtl_efa_acks_fini();
    if (acks_left > 0) {
        opal_output_verbose(10, mca_common_efa_output,
                            "mtl:efa: %zu acknowledgement receive(s) of synchronous sends left "
                            "at the provider, completed into nothing",
                            acks_left);
    }
    mca_common_efa_release(ompi_mtl_efa.core);
    ompi_mtl_efa.core = NULL;
    free(ompi_mtl_efa.ctxs);
    ompi_mtl_efa.ctxs = NULL;
    return OMPI_SUCCESS;
}
