/*
 * mtl_efa: an MTL (Open MPI 4.1 MTL API 2.0.0) over the shared EFA core.
 * Thin C glue: it turns MPI envelopes into tags, convertors into buffers,
 * and core completions into MPI request completions.
 */
#ifndef MTL_EFA_H
#define MTL_EFA_H

#include "ompi_config.h"

#include "ompi/communicator/communicator.h"
#include "ompi/errhandler/errcode-internal.h"
#include "ompi/mca/mtl/base/base.h"
#include "ompi/mca/mtl/mtl.h"
#include "ompi/proc/proc.h"

/* The shared core's headers, by file name alone: the directory holding them
 * is common/ in this repository and opal/mca/common/efa/ inside an Open MPI
 * tree, and both Makefile.am's put it on the include path. */
#include "common_efa.h"
#include "mtl_efa_compat.h"
#include "efa_core.h"
#include "efa_engine.h"
#include "efa_path_error.h"
#include "efa_tsan.h"
#include "efa_tag.h"

BEGIN_C_DECLS

/* Each communicator's path (MTL_EFA_PATH_*) by communicator id.  Senders
 * read it without a lock while other threads create communicators
 * (MPI_THREAD_MULTIPLE), so a table is never moved or freed under them:
 * growing publishes a larger copy and keeps the older tables, linked from
 * it, until finalize (a few KiB at most: ids are dense). */
typedef struct mtl_efa_path_table {
    size_t len;
    struct mtl_efa_path_table *older;
    uint8_t path[];
} mtl_efa_path_table_t;

typedef struct mca_mtl_efa_module_t {
    mca_mtl_base_module_t base;
    efa_core_t *core;
    efa_tag_layout_t layout;
    efa_tag_codec_t codec;   /* the layout's shifts and masks, for the hot paths */
    uint64_t recv_ignore[4]; /* efa_tag_recv_ignore by any_src | any_tag << 1 */
    size_t inject_size;      /* 0: never inject */
    int num_contexts;
    efa_ctx_t **ctxs; /* by context index, looked up once at init */
    bool mr_local;    /* pass registered descriptors with every buffer */
    bool mt;          /* MPI_THREAD_MULTIPLE: completions may race */
    /* The matching engine (mtl_efa_engine.c): the rings to this node's
     * processes and, under own matching, the net link to other nodes; NULL
     * when off. */
    efa_engine_t *engine;
    efa_node_t *node; /* the process's shared on-node stack, while the engine serves a channel */
    struct mtl_efa_path_table *comm_paths; /* by communicator id: MTL_EFA_PATH_* */
    uint8_t *peer_onnode;                  /* by vpid: 0 unknown, 1 has an inbox, 2 has none */
    bool own_matching; /* the engine carries every peer of this job (mtl_efa_own.c) */
    bool any_watch;    /* ANY_SOURCE receives at the provider are listed (mtl_efa_any.c) */
    bool withdraw;     /* large provider sends carry a seq and can be withdrawn */
    size_t rdv_min;    /* provider sends from this size to a peer on several rails are read
                          by the receiver (mtl_efa_rdv.c); SIZE_MAX: never */
    /* Device (GPU) buffers are copied through the host here, before any
     * path sees them (mtl_efa_device.c); read on every message. */
    bool device_staging;
    /* How: the fake's memory (asked of the fake), Open MPI's (the
     * convertor says; own mode), or 4.1's CUDA (contiguous sends only). */
    enum { MTL_EFA_DEVICE_FAKE, MTL_EFA_DEVICE_OWN, MTL_EFA_DEVICE_CUDA41 } device_how;
    /* Device sends to processes of this node go uncopied to the engine,
     * which carries them by the device's IPC (mtl_efa_device.c). */
    bool device_ipc;
    /* Device buffers to and from peers reached through the provider go to
     * it as they are, registered with their interface (FI_HMEM granted:
     * mtl_efa_device.c); counted for the finalize line. */
    bool device_hmem;
    /* ... and, under own matching, device sends to other nodes from
     * mtl_efa_net_read_min go to the engine registered, for the receiver
     * to read (the engine's read rendezvous). */
    bool device_read;
    uint64_t device_hmem_sent, device_hmem_received;
} mca_mtl_efa_module_t;

/* Sends from this size carry a seq in their tag, so that MPI_Cancel can
 * withdraw them at the receiver (mtl_efa_send.c).  Smaller ones complete
 * without the receiver on every provider: eager (rxm: up to 16 KiB; efa:
 * one packet, medium up to 64 KiB). */
#define MTL_EFA_WITHDRAW_MIN 8192

/* Test-only parameters (docs/RELIABILITY.md, "Test-only parameters"),
 * read at init only. */
typedef struct mtl_efa_test_hooks {
    bool no_inject;     /* debug_no_inject: act as if the provider's inject size were 0 */
    bool swap_net;      /* debug_swap_net: provider messages handed on in swapped pairs */
    int lose_net;       /* debug_lose_net: the Nth provider message to arrive is lost (0: none) */
    int flush_first;    /* debug_flush_first: before the Nth on NIC 0, a receive there fails */
    bool flush_lost;    /* debug_flush_lost: ... that held the Nth (lost) */
    int net_first_rail; /* debug_net_first_rail: the NIC of the first peer on another node */
    int fail_rail_send; /* debug_fail_rail_send: the Nth send on such a NIC taken as failed */
    bool device_blind;  /* debug_device_blind: device buffers handed on uncopied (a control) */
} mtl_efa_test_hooks_t;

/* mtl_efa's own MCA parameters (their table: mtl_efa_params.c). */
typedef struct mtl_efa_params {
    int priority;
    char *channel, *single_copy;
    char *matching;
    size_t net_eager;
    size_t net_read_min; /* own matching: rendezvous by RMA read from this size (0: never) */
    int net_window, net_small_window;
    size_t coalesce_bytes;
    int coalesce_max;
    char *device_buffers; /* who copies device buffers through the host (mtl_efa_device.c) */
    bool device_ipc;      /* ... and whether those to this node go by the device's IPC */
    size_t device_piece;  /* ... and read or streamed in pieces of this, each copied on */
    mtl_efa_test_hooks_t test;
} mtl_efa_params_t;
extern mtl_efa_params_t ompi_mtl_efa_params;
void ompi_mtl_efa_params_register(const mca_base_component_t *c);
/* Checks every value (a message for a bad one): OMPI_SUCCESS or
 * OMPI_ERR_BAD_PARAM. */
int ompi_mtl_efa_params_check(void);

/* A tag outside the provider's tag layout (efa_tag_codec_fits: 24 bits
 * without remote CQ data, where Open MPI's own collectives may go below):
 * said once; the caller fails with OMPI_ERR_BAD_PARAM, nothing posted. */
void ompi_mtl_efa_tag_unfit(int tag);
/* Was this mtl_efa_ parameter given by the user (not left at its default)? */
bool ompi_mtl_efa_param_set_by_user(const char *name);
/* A choice parameter's value: an empty one (Open MPI keeps "" as NULL)
 * is its default, "auto" (the table's unset_is_default). */
static inline const char *ompi_mtl_efa_choice(const char *value) {
    return NULL == value || '\0' == value[0] ? "auto" : value;
}

extern mca_mtl_efa_module_t ompi_mtl_efa;
/* Open MPI finds the component structure by name with dlsym: keep it
 * exported even where symbols are hidden by default. */
OMPI_MODULE_DECLSPEC extern mca_mtl_base_component_2_0_0_t mca_mtl_efa_component;

/* A synchronous send's acknowledgement receive, apart from the request: a
 * cancelled send may complete before it (mtl_efa_send.c). */
typedef struct mca_mtl_efa_ack_recv_t {
    efa_op_t op;                       /* first: the completion hands it back */
    struct mca_mtl_efa_request_t *req; /* NULL once the send no longer waits for it */
    int refs;  /* the provider's completion, and a withdrawal that may cancel it */
    bool done; /* completed: nothing left to cancel */
    /* listed from its post to its completion (mtl_efa_ack_kept.c) */
    struct mca_mtl_efa_ack_recv_t *kept_prev, *kept_next;
    bool kept;
} mca_mtl_efa_ack_recv_t;

/* mtl_efa_ack_kept.c: acknowledgement receives listed while the provider
 * has them; at finalize those left complete into the core's nothing (the
 * number left is returned). */
void ompi_mtl_efa_ack_keep(mca_mtl_efa_ack_recv_t *ack);
void ompi_mtl_efa_ack_unkeep(mca_mtl_efa_ack_recv_t *ack);
size_t ompi_mtl_efa_acks_fini(void);

typedef struct mca_mtl_efa_request_t {
    mca_mtl_request_t super;            /* pml/cm's view; must be first */
    efa_op_t op;                        /* the send or the receive */
    struct mca_mtl_efa_ack_recv_t *ack; /* synchronous send: its acknowledgement's receive */
    bool data_done; /* synchronous send: the provider completed the message itself */
    int pending;    /* completions still expected */
    int error;      /* first OMPI error seen */
    bool is_send;
    bool free_buffer; /* the buffer was allocated to pack a datatype */
    bool cancelled;
    bool by_engine; /* travels by the matching engine (on, not op) */
    bool on_sent;   /* on-node send: its completion ran (MPI_Cancel of a buffered one waits) */
    bool dual;      /* ANY_SOURCE receive posted to the provider (op) and the rings (on) */
    void *buffer;
    size_t length;
    struct opal_convertor_t *convertor;
    struct ompi_communicator_t *comm;
    efa_ctx_t *ctx;
    efa_mr_t *mr; /* the buffer's registration: FI_MR_LOCAL's, or a device buffer's (FI_HMEM) */
    efa_engine_req_t on; /* the engine's request */
    /* An ANY_SOURCE receive the provider holds, on mtl_efa_any.c's list
     * (under its lock) until the provider hands it back. */
    struct mca_mtl_efa_request_t *any_prev, *any_next;
    bool any_linked;
    bool any_swept; /* a sweep saw it posted */
    int any_lost;   /* cancelled as a member of its communicator was lost: the error */
    /* A provider send with a seq: its tag and address, and whether
     * MPI_Cancel asked the receiver to withdraw it (mtl_efa_send.c). */
    uint64_t seq_tag; /* 0: no seq, cannot be withdrawn */
    fi_addr_t seq_addr;
    bool withdrawing, withdrawn;
    void *rdv; /* a send by read rendezvous: its offer (mtl_efa_rdv.c), freed at the end */
    /* A receive into device memory: the device buffer (buffer is its host
     * copy, free_buffer set), and whether it is Open MPI's packed copy of a
     * non-contiguous one (unpacked, then given back).  NULL: host memory. */
    void *device_buf;
    bool device_temp;
    /* A provider send or receive of a registered buffer (FI_MR_LOCAL's, a
     * device buffer's): what it was posted with, so that a device buffer
     * whose post the provider refuses is posted again through the host
     * from its completion (mtl_efa_device.c). */
    fi_addr_t post_addr;
    uint64_t post_bits, post_ignore;
    /* A receive being posted again (mtl_efa_recv.c's post_again): its
     * completion, should another thread hear it before the repost is
     * through, is held here and finished by the reposting thread, which
     * may still look at the request until then. */
    int repost_state; /* MTL_EFA_REPOST_* */
    efa_cqe_t repost_cqe;
#if EFA_TSAN
    /* pml/cm's completion callback, called through mtl_efa_module.c's
     * annotation. */
    void (*tsan_callback)(struct mca_mtl_request_t *mtl_request);
    const void *tsan_stack_convertor; /* a heap request's convertor on its caller's stack */
#endif
} mca_mtl_efa_request_t;

enum { MTL_EFA_REPOST_NONE, MTL_EFA_REPOST_UNDER_WAY, MTL_EFA_REPOST_HELD };

/* A send MPI_Send waits for inside the MTL: the request lives on the
 * caller's stack and completion only raises the flag. */
typedef struct {
    mca_mtl_efa_request_t req; /* first: the callback gets &req.super */
    volatile bool done;
} mca_mtl_efa_blocking_send_t;

/* Release: the waiter, which reads 'done' with acquire, then reads what
 * the completion wrote (the request's error) and pops the request off its
 * stack.  A plain (volatile) flag orders neither on a weakly ordered CPU
 * (aarch64). */
static inline void ompi_mtl_efa_blocking_send_done(mca_mtl_request_t *mtl_request) {
    __atomic_store_n(&((mca_mtl_efa_blocking_send_t *)mtl_request)->done, true, __ATOMIC_RELEASE);
}

/* An improbe'd message waiting for its mrecv: the claimed context. */
typedef struct mca_mtl_efa_claim_t {
    efa_op_t op;
    bool done; /* release / acquire: another thread's progress may write cqe */
    efa_cqe_t cqe;
    efa_ctx_t *ctx;
    uint64_t tag, ignore;
    mca_mtl_efa_request_t *mrecv; /* set by imrecv */
} mca_mtl_efa_claim_t;

#define MTL_EFA_REQ_OF(op_ptr, member)                                                             \
    ((mca_mtl_efa_request_t *)((char *)(op_ptr)-offsetof(mca_mtl_efa_request_t, member)))

/* The OMPI code for a provider's or the core's error.  Whatever the
 * provider called a failed path to the peer (efa_path_error.h: a reset
 * connection, the peer deadline's FI_ETIMEDOUT), it is MTL_EFA_ERR_LOST
 * inside this MTL, so that every way of losing a peer ends the same.  Out
 * of line (mtl_efa_error.c): only error paths call it, and inlined it
 * would weigh on the hot functions around them. */
int ompi_mtl_efa_error(int fi_err);

static inline int ompi_mtl_efa_rc(int fi_err) {
    return OPAL_LIKELY(0 == fi_err) ? OMPI_SUCCESS : ompi_mtl_efa_error(fi_err);
}

/* What the program sees of an OMPI code, in a request's status or from a
 * call: a lost peer's class (MTL_EFA_ERR_PEER_LOST), the code itself
 * otherwise. */
static inline int ompi_mtl_efa_mpi_error(int rc) {
    return OPAL_UNLIKELY(MTL_EFA_ERR_LOST == rc) ? MTL_EFA_ERR_PEER_LOST : rc;
}

/* The same in a request's status, an MPI error class: MPI_Waitall's
 * statuses show the value as it is, and MPI_Error_class and
 * MPI_Error_string take classes, not Open MPI's internal codes. */
static inline int ompi_mtl_efa_status_error(int rc) {
    return OPAL_UNLIKELY(MTL_EFA_ERR_LOST == rc) ? MTL_EFA_ERR_PEER_LOST
                                                 : ompi_errcode_get_mpi_code(rc);
}

/* A communicator maps to the same context index on both sides.  One
 * context (the default) needs no division. */
static inline int ompi_mtl_efa_ctx_index(struct ompi_communicator_t *comm) {
    return OPAL_LIKELY(1 == ompi_mtl_efa.num_contexts)
               ? 0
               : (int)(mtl_efa_comm_cid(comm) % (uint32_t)ompi_mtl_efa.num_contexts);
}

/* A process met for the first time (dynamic processes): add it. */
efa_peer_t *ompi_mtl_efa_peer_slow(struct ompi_proc_t *proc);

/* The peer's addresses; NULL when it cannot be reached.  Inline: every
 * send and directed receive looks its peer up. */
static inline efa_peer_t *ompi_mtl_efa_peer(struct ompi_communicator_t *comm, int rank) {
    ompi_proc_t *proc = ompi_comm_peer_lookup(comm, rank);
    efa_peer_t *peer = (efa_peer_t *)proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL];
    return OPAL_LIKELY(NULL != peer) ? peer : ompi_mtl_efa_peer_slow(proc);
}

/* The peer a received message names as its sender (a rank the sender
 * wrote, which may name nobody): NULL where no rank of the communicator
 * has it. */
static inline efa_peer_t *ompi_mtl_efa_sender_peer(struct ompi_communicator_t *comm, int src) {
    const int size = OMPI_COMM_IS_INTER(comm) ? ompi_comm_remote_size(comm) : ompi_comm_size(comm);
    return src >= 0 && src < size ? ompi_mtl_efa_peer(comm, src) : NULL;
}

/* A message MPI_Mprobe claimed is the provider's (a claim) or the rings'
 * (the engine's): told apart by the handle's low bit (both are at least
 * 8-byte aligned), never by the source, which the sender wrote.  A sender
 * naming a rank of the other path made MPI_Mrecv take one for the other. */
static inline void *ompi_mtl_efa_claim_handle(mca_mtl_efa_claim_t *claim) {
    return (void *)((uintptr_t)claim | 1);
}
static inline mca_mtl_efa_claim_t *ompi_mtl_efa_handle_claim(void *handle) {
    return ((uintptr_t)handle & 1) ? (mca_mtl_efa_claim_t *)((uintptr_t)handle & ~(uintptr_t)1)
                                   : NULL;
}

int ompi_mtl_efa_module_init(efa_core_t *core, bool thread_multiple);

int ompi_mtl_efa_add_procs(struct mca_mtl_base_module_t *mtl, size_t nprocs,
                           struct ompi_proc_t **procs);
/* The peers del_procs kept for the engine, released once it is gone. */
void ompi_mtl_efa_put_kept_peers(void);
int ompi_mtl_efa_del_procs(struct mca_mtl_base_module_t *mtl, size_t nprocs,
                           struct ompi_proc_t **procs);
int ompi_mtl_efa_finalize(struct mca_mtl_base_module_t *mtl);
int ompi_mtl_efa_add_comm(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm);
int ompi_mtl_efa_del_comm(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm);

int ompi_mtl_efa_send(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm, int dest,
                      int tag, struct opal_convertor_t *convertor, mca_pml_base_send_mode_t mode);
int ompi_mtl_efa_isend(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm,
                       int dest, int tag, struct opal_convertor_t *convertor,
                       mca_pml_base_send_mode_t mode, bool blocking,
                       mca_mtl_request_t *mtl_request);
int ompi_mtl_efa_irecv(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm, int src,
                       int tag, struct opal_convertor_t *convertor, mca_mtl_request_t *mtl_request);
int ompi_mtl_efa_iprobe(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm,
                        int src, int tag, int *flag, struct ompi_status_public_t *status);
int ompi_mtl_efa_improbe(struct mca_mtl_base_module_t *mtl, struct ompi_communicator_t *comm,
                         int src, int tag, int *matched, struct ompi_message_t **message,
                         struct ompi_status_public_t *status);
int ompi_mtl_efa_imrecv(struct mca_mtl_base_module_t *mtl, struct opal_convertor_t *convertor,
                        struct ompi_message_t **message, mca_mtl_request_t *mtl_request);
int ompi_mtl_efa_cancel(struct mca_mtl_base_module_t *mtl, mca_mtl_request_t *mtl_request,
                        int flag);
/* MPI_Cancel of a send through the provider (mtl_efa_send.c). */
void ompi_mtl_efa_cancel_send(mca_mtl_efa_request_t *req);
/* The receiver's acknowledgement of a synchronous send from src of comm
 * (seq: the message's, efa_tag_codec_seq, which the sender's
 * acknowledgement receive names): OMPI_SUCCESS, or an OMPI error where it
 * could not be posted (a full queue is not one: the core keeps it in its
 * backlog).  mtl_efa_sync_ack.c. */
int ompi_mtl_efa_send_sync_ack(struct ompi_communicator_t *comm, int src, int32_t tag,
                               uint32_t seq);

/* How a communicator's messages travel, decided in add_comm. */
#define MTL_EFA_PATH_PROVIDER 0 /* every peer through the provider */
#define MTL_EFA_PATH_ENGINE                                                                        \
    1 /* every peer by the engine: rings here, under own matching its net link */
#define MTL_EFA_PATH_MIXED 2 /* peers on this node by the rings, the others by the provider */
/* A bit beside the path: every process of the communicator is reached by
 * the rings (under own matching the engine also carries peers on
 * other nodes, and only this tells the two apart). */
#define MTL_EFA_PATH_ALL_HERE 0x10

static inline int ompi_mtl_efa_comm_path_bits(const struct ompi_communicator_t *comm) {
    /* Acquire: a table published by another thread is seen filled in. */
    const mtl_efa_path_table_t *t = __atomic_load_n(&ompi_mtl_efa.comm_paths, __ATOMIC_ACQUIRE);
    const uint32_t cid = mtl_efa_comm_cid(comm);
    return NULL != t && cid < t->len ? __atomic_load_n(&t->path[cid], __ATOMIC_RELAXED)
                                     : MTL_EFA_PATH_PROVIDER;
}

static inline int ompi_mtl_efa_comm_path(const struct ompi_communicator_t *comm) {
    return ompi_mtl_efa_comm_path_bits(comm) & ~MTL_EFA_PATH_ALL_HERE;
}

/* Does every process of the communicator take the rings? */
static inline bool ompi_mtl_efa_comm_all_here(const struct ompi_communicator_t *comm) {
    return 0 != (ompi_mtl_efa_comm_path_bits(comm) & MTL_EFA_PATH_ALL_HERE);
}

/* In a mixed communicator: is 'rank' a process the rings reach? */
bool ompi_mtl_efa_ring_peer(struct ompi_communicator_t *comm, int rank);

/* Do messages to or from 'rank' (not MPI_ANY_SOURCE) take the engine? */
static inline bool ompi_mtl_efa_use_engine(struct ompi_communicator_t *comm, int rank) {
    const int path = ompi_mtl_efa_comm_path(comm);
    return MTL_EFA_PATH_PROVIDER != path &&
           (MTL_EFA_PATH_ENGINE == path || ompi_mtl_efa_ring_peer(comm, rank));
}

/* Own matching (mtl_efa_own.c): fills the engine's parameters for peers
 * on other nodes; false when matching stays with the provider. */
struct efa_engine_params;
bool ompi_mtl_efa_own_setup(struct efa_engine_params *p);
void ompi_mtl_efa_own_report(efa_engine_t *engine);
/* ... and, own matching or not, what its watch on the processes of this
 * node needs (a peer that dies fails what waits on it). */
void ompi_mtl_efa_own_node_watch(struct efa_engine_params *p);
/* The matching every process of the job must share (mtl_efa_matching_card.c):
 * publish this process's at init; check a peer's in add_procs
 * (OMPI_ERR_NOT_SUPPORTED, said, when it differs). */
int ompi_mtl_efa_matching_publish(void);
int ompi_mtl_efa_matching_check(const struct ompi_proc_t *proc);
/* Does the engine carry this communicator whole (every process of it in
 * this job)? */
bool ompi_mtl_efa_own_comm(struct ompi_communicator_t *comm);
/* Is process vpid of this job on this node? */
bool ompi_mtl_efa_vpid_local(uint32_t vpid);

/* The matching engine's glue (mtl_efa_engine.c). */
int ompi_mtl_efa_engine_init(bool thread_multiple);
void ompi_mtl_efa_engine_fini(void);
int ompi_mtl_efa_engine_add_comm(struct ompi_communicator_t *comm);
void ompi_mtl_efa_engine_del_comm(struct ompi_communicator_t *comm);
/* device: buffer is device memory, to a process of this node
 * (ompi_mtl_efa_device_by_ipc), or, with its registration (req->mr;
 * device_mr), to one on another node that reads it; the engine takes the
 * registration, or it is released where the send is refused. */
int ompi_mtl_efa_engine_isend(struct ompi_communicator_t *comm, int dest, int tag,
                              mca_pml_base_send_mode_t mode, mca_mtl_efa_request_t *req,
                              bool device);
int ompi_mtl_efa_engine_send(struct ompi_communicator_t *comm, int dest, int tag,
                             mca_pml_base_send_mode_t mode, void *buffer, size_t length,
                             bool free_buffer, bool device, efa_mr_t *device_mr);
int ompi_mtl_efa_engine_irecv(struct ompi_communicator_t *comm, int src, int tag,
                              mca_mtl_efa_request_t *req);
int ompi_mtl_efa_engine_iprobe(struct ompi_communicator_t *comm, int src, int tag, bool claim,
                               int *flag, struct ompi_message_t **message,
                               struct ompi_status_public_t *status);
int ompi_mtl_efa_engine_imrecv(struct ompi_message_t *message, mca_mtl_efa_request_t *req);
void ompi_mtl_efa_engine_cancel(mca_mtl_efa_request_t *req);
/* The rings' half of a dual receive: 1 complete now, 2 taken (completes
 * later), 0 posted (post the provider's half next), or an error. */
int ompi_mtl_efa_engine_irecv_partnered(struct ompi_communicator_t *comm, int tag,
                                        mca_mtl_efa_request_t *req);

/* The watch on ANY_SOURCE receives at the provider (mtl_efa_any.c): on
 * while the peer deadline is.  Link before the post, and post before
 * ompi_mtl_efa_any_posted: the watch's lock is held between them, so that
 * the sweep never cancels a receive that is listed but not yet posted
 * (the cancel would find nothing, and the receive wait for ever on the
 * lost peer).  The provider's completion (or a failed post) unlinks. */
void ompi_mtl_efa_any_init(void);
void ompi_mtl_efa_any_fini(void);
void ompi_mtl_efa_any_link(mca_mtl_efa_request_t *req);
void ompi_mtl_efa_any_posted(void);
void ompi_mtl_efa_any_unlink_slow(mca_mtl_efa_request_t *req);
/* A probe through the provider found nothing (pml cm's MPI_Probe calls
 * again): what it waits on is watched a while.  OMPI_SUCCESS, or the error
 * of a loss it waits on (the probe fails with it). */
int ompi_mtl_efa_any_probe_missed(struct ompi_communicator_t *comm, int src);
/* The communicator is freed: its probes' waits are forgotten. */
void ompi_mtl_efa_any_comm_freed(struct ompi_communicator_t *comm);
static inline void ompi_mtl_efa_any_done(mca_mtl_efa_request_t *req) {
    if (OPAL_UNLIKELY(req->any_linked)) {
        ompi_mtl_efa_any_unlink_slow(req);
    }
}

/* Read rendezvous (mtl_efa_rdv.c): whether and from which size it is
 * used; whether a peer is reached over rails to several of its NICs; a
 * send by it (the request's ctx set, its seq chosen; finish_one takes the
 * answer's share of the request's completions: OMPI_SUCCESS,
 * OMPI_ERR_NOT_AVAILABLE when the caller is to send it the plain way, or
 * an error: nothing was sent); its tagged message failed (no answer will
 * come); a receive that matched such a message (finish completes the
 * request, once its bytes are read); a probe's completion given the message's length from its note
 * (OMPI_ERR_NOT_FOUND: not here yet; a claimed message waits for it). */
/* mtl_efa_recv_done.c: a receive that ended (its status, its buffer, a
 * synchronous sender's answer, pml cm's callback); a status's envelope and
 * count from a receive's or a probe's completion (MPI_ERROR left alone). */
void ompi_mtl_efa_recv_finish(mca_mtl_efa_request_t *req, const efa_cqe_t *cqe);
void ompi_mtl_efa_fill_status(ompi_status_public_t *status, const efa_cqe_t *cqe);

void ompi_mtl_efa_rdv_init(const efa_core_info_t *info);
bool ompi_mtl_efa_rdv_peer(const efa_peer_t *peer);
int ompi_mtl_efa_rdv_send(mca_mtl_efa_request_t *req, fi_addr_t addr, uint64_t bits, uint32_t seq,
                          uint32_t me, void (*finish_one)(mca_mtl_efa_request_t *req));
void ompi_mtl_efa_rdv_send_failed(mca_mtl_efa_request_t *req, int err);
void ompi_mtl_efa_rdv_recv(mca_mtl_efa_request_t *req, const efa_cqe_t *cqe,
                           void (*finish)(mca_mtl_efa_request_t *req, const efa_cqe_t *cqe));
int ompi_mtl_efa_rdv_probed(struct ompi_communicator_t *comm, efa_ctx_t *ctx, efa_cqe_t *cqe,
                            bool claimed);
static inline bool ompi_mtl_efa_is_rdv(const efa_cqe_t *cqe) {
    return OPAL_UNLIKELY(0 != (cqe->tag & ompi_mtl_efa.codec.rdv_bit)) && 0 == cqe->err;
}

/* Register (or not, when the provider does not need it) a buffer. */
int ompi_mtl_efa_reg_buffer(mca_mtl_efa_request_t *req, void **desc);
/* The descriptor of a provider send or receive of req (NULL where none is
 * needed), and what it is posted with where it has one, so that a device
 * buffer whose post the provider refuses from the backlog is posted again
 * through the host (mtl_efa_device.c). */
static inline int ompi_mtl_efa_post_desc(mca_mtl_efa_request_t *req, fi_addr_t addr, uint64_t bits,
                                         uint64_t ignore, void **desc) {
    *desc = NULL;
    if (OPAL_LIKELY(!ompi_mtl_efa.mr_local && NULL == req->mr)) {
        return OMPI_SUCCESS;
    }
    req->post_addr = addr;
    req->post_bits = bits;
    req->post_ignore = ignore;
    return ompi_mtl_efa_reg_buffer(req, desc);
}

END_C_DECLS
#endif
