/*
 * btl_efa: the byte transfer layer over the shared EFA core.
 *
 * Two-sided fragments travel as untagged messages of the core (the MTL owns
 * the tagged queue), carrying the active-message tag.  One-sided operations
 * take one of two paths, chosen once per job (btl_efa_rma_mode and
 * btl_efa_atomic_mode):
 *
 *  - native (btl_efa_native.c, btl_efa_native_atomic.c): put and get are
 *    the provider's RDMA write and read, atomics its fi_atomic calls,
 *    against the peer's libfabric registration named in the handle;
 *  - emulated (btl_efa_emul.h, btl_efa_emul.c): requests executed by the
 *    target's progress against its own table of registrations
 *    (btl_efa_reg.c), which refuses anything outside a registered range or
 *    its access rights.  Works on any provider.
 * btl_efa_rdma.c holds the entry points, which choose the path.
 *
 * Put and get on the process's own memory are copies after the same table
 * check in both modes; to another process of the same node, where the
 * kernel allows it, one copy by cross-memory attach (btl_efa_cma.c).
 * Emulated atomics use CPU atomics at the target (MCA_BTL_ATOMIC_SUPPORTS_GLOB);
 * native atomics, own memory included, all go through the provider.
 */
#ifndef MCA_BTL_EFA_H
#define MCA_BTL_EFA_H

#include "opal_config.h"

#include <time.h>

#include "opal/class/opal_hash_table.h"
#include "opal/class/opal_list.h"
#include "opal/mca/btl/btl.h"
#include "opal/mca/btl/base/base.h"

/* The shared core's headers, by file name alone (see mtl_efa.h). */
#include "btl_efa_compat.h"
#include "common_efa.h"
#include "efa_btl_wire.h"
#include "efa_core_msg.h"
#include "efa_emul_target.h"
#include "efa_inflight.h"
#include "efa_msg_flow.h"
#include "efa_path_error.h"
#include "efa_pool.h"
#include "efa_rma.h"
#include "efa_ring_inline.h"
#include "efa_shm_ring.h"

BEGIN_C_DECLS

/* The smallest btl_efa_rma_max_transfer accepted (besides 0). */
#define EFA_BTL_MIN_RMA_TRANSFER 4096

/* Requests through the rings that may be taken back, in flight at once
 * (btl_efa_ring_rma.c; more go by single copy meanwhile), and atomics
 * (btl_efa_ring_atomic.c). */
#define EFA_BTL_RING_RMA_RECS 64
#define EFA_BTL_RING_ATOMIC_RECS 64

/* Self-contained registration handle: osc/rdma copies it to the peers
 * (layout and meaning in common/efa_rma.h). */
struct mca_btl_base_registration_handle_t {
    efa_rma_handle_t rma;
};

/* Target-side record of a registration, keyed by handle.key. */
typedef struct efa_btl_reg {
    struct mca_btl_base_registration_handle_t handle; /* what was handed out */
    efa_mr_t *mr;
} efa_btl_reg_t;

/* Flow control (credits, the endpoint's queue of sends that wait): the
 * core's message flow, common/efa_msg_flow.h.  The fields below
 * 'outstanding' are protected by the module lock. */
struct mca_btl_base_endpoint_t {
    opal_process_name_t name;
    opal_proc_t *proc;
    efa_peer_t *peer;
    fi_addr_t addr;
    bool is_self;
    /* The upper layer let go of this endpoint (del_procs; add_procs takes
     * it back): nothing concerning it is delivered upwards any more. */
    bool detached;
    volatile int32_t outstanding; /* one-sided operations not yet completed */
    efa_flow_peer_t flow;         /* credits and the sends waiting (efa_btl_frag_t, by next) */
    /* On-node channel (btl_efa_ring.c): what fits the peer's slots goes to its inbox. */
    int8_t ring_state;                  /* EFA_BTL_RING_* */
    uint32_t ring_max_frame;            /* the most its slots take (theirs or this one's, less) */
    uint32_t vpid;                      /* names the peer's inbox */
    efa_shm_outbox_t *outbox;           /* attached on the first send */
    struct efa_ring_producer *ring_out; /* its sender state (efa_ring_reserve, efa_ring_commit) */
    int exit_watch;  /* its process's exit (btl_efa_watch.c): efa_cma_exit_watch + 1, 0: none */
    bool exit_tried; /* that watch was tried, taken or not: never again */
    int32_t ring_in; /* its ring in this inbox + 1 (btl_efa_watch.c); 0 unread, -1 none */
    /* Single copy (btl_efa_cma.c): EFA_BTL_CMA_*, decided at the first
     * put or get to the peer; cma_pid is the peer's pid once verified,
     * published by the release store of EFA_BTL_CMA_ON. */
    volatile int32_t cma;
    uint32_t cma_pid;
    /* Small put and get through the ring (btl_efa_ring_rma.c): after the
     * peer left one unanswered long enough to be taken back, this many
     * go by single copy before the ring is tried again (atomic). */
    volatile int32_t ring_rma_skip;
    /* A process of another job (btl_efa_mode.c): its job agreed its own one-sided mode (put
     * and get emulated; atomics refused where the two jobs' kinds could mix).  device_met: a
     * handle of the peer's device memory was met (btl_efa_rdma.c: see atomic()). */
    bool foreign_mode, foreign_atomics, device_met;
    /* The peer's messages reach this process through the provider only (not
     * on this node, or no on-node channel between us): the core polls the
     * provider on every progress call while such a peer is known. */
    bool net_interest;
    /* The watch on this peer (btl_efa_watch.c): provider traffic since the
     * last sweep, sweeps without, and the watch itself while it is on. */
    bool exchanged, watching;
    uint8_t quiet_sweeps;
    efa_op_t watch;
    /* Declared lost, the upper layer told (mca_btl_efa_tell_lost_due): sends
     * fail at once, not wait for credits that never come (module lock). */
    bool lost;
    /* A path error seen: progress asks the core whether the peer is lost
     * (send.lost_due, by next_lost; module lock). */
    int lost_err;
    struct mca_btl_base_endpoint_t *next_lost;
    /* Its messages up to the eager limit over NIC 'rail' of the set
     * (btl_efa_spread.c; 0: the first; rail_own: the one it was given),
     * that NIC's context (NULL: not decided yet), its last message's number
     * and those of the peer's seen (lock); numbered: every message to it
     * is, the first NIC's too (several NICs reach it), so that the first
     * NIC can fail over.  rail_mask: the NICs (bit r: NIC r) that its
     * fragments and put/get beyond the eager limit (below stripe_min) take
     * in turn (rail_turn: the next; 0 where it has one NIC: ob1 needs no
     * order from a BTL, so one peer's stream fills every NIC); rails_left:
     * those its messages left, rails_retaken: those taken again once the
     * core put them back (btl_efa_rail_back.c). */
    int8_t rail, rail_own;
    bool numbered;
    uint8_t rail_mask, rail_turn, rails_left, rails_retaken;
    efa_ctx_t *rail_ctx;
    uint64_t rail_seq;
    struct efa_btl_seen *seen;
};

enum {
    EFA_BTL_RING_NONE = 0, /* not on this node (or the channel is off): provider */
    EFA_BTL_RING_UNTRIED,  /* on this node: attach on the first send */
    EFA_BTL_RING_ATTACHED, /* outbox attached */
    EFA_BTL_RING_FAILED,   /* the peer's inbox could not be attached: provider */
};
typedef struct mca_btl_base_endpoint_t mca_btl_efa_endpoint_t;

enum {
    EFA_BTL_CMA_UNKNOWN = 0, /* not tried yet */
    EFA_BTL_CMA_ON,          /* verified: put and get copy directly */
    EFA_BTL_CMA_OFF,         /* not on this node, or the kernel refused: the provider's path */
    EFA_BTL_CMA_PROBING,     /* one thread is deciding: the others take the other paths */
};

/* A send fragment: the buffer begins with efa_btl_hdr_t.  An in-place
 * fragment (prepare_src of contiguous data, see inplace_min) has a second
 * segment pointing into the caller's memory, sent without a copy as the
 * message's second buffer (gathered into the slot on the on-node channel). */
typedef struct efa_btl_frag {
    efa_op_t op; /* first: the core hands it back */
    mca_btl_base_descriptor_t base;
    mca_btl_base_segment_t segments[2];
    struct efa_btl_frag *next; /* free list or an endpoint's queue */
    mca_btl_efa_endpoint_t *endpoint;
    fi_addr_t dest;
    void *desc;
    size_t send_len;
    int err;         /* a send that failed for good, until it is finished */
    bool user;       /* a two-sided descriptor handed to the upper layer */
    bool posted;     /* the provider holds it: its completion is still to come */
    bool inject;     /* post with fi_inject (no completion; recycled at once) */
    uint64_t req_id; /* a one-sided request chunk (its id, 0: none): fails the request on error */
    uint8_t retries; /* an answer (RESP) sent again after its send failed */
    uint8_t *buf;
    efa_mr_t *data_mr; /* in place with FI_MR_LOCAL: the caller's memory, held until done */
    void *data_desc;
    /* A batch (btl_efa_batch.c): the fragments packed in it, chained by
     * next, finished with it. */
    struct efa_btl_frag *inner, *inner_last;
    int inner_count;
    efa_mr_t *mr; /* its buffer's registration (descriptors on the other NICs) */
    int8_t rail;  /* posted over this NIC of the set (btl_efa_spread.c) */
} efa_btl_frag_t;

/* What ending a one-sided operation hands back to its caller, kept whole
 * from the entry point (btl_efa_rdma.c) to whichever path finishes it. */
typedef struct efa_btl_rdma_cb {
    void *local_address;
    struct mca_btl_base_registration_handle_t *local_handle;
    mca_btl_base_rdma_completion_fn_t cbfunc; /* osc/rdma may pass none and rely on flush */
    void *cbcontext, *cbdata;
    bool local_device; /* local_address is device memory (decided once, in rdma()) */
    /* cbfunc is btl_efa's own (a piece's parent hears of it): called
     * even once the upper layer has gone */
    bool internal;
} efa_btl_rdma_cb_t;

/* One one-sided operation as the entry points received it: the paths
 * (single copy, native, emulated) take it whole, never field by field. */
typedef struct efa_btl_rdma_args {
    int type; /* EFA_BTL_MSG_PUT, _GET or _ATOMIC */
    uint64_t remote_address;
    struct mca_btl_base_registration_handle_t *remote_handle; /* a copy, read once */
    size_t size;
    uint32_t op, aflags;        /* atomics: the operation and MCA_BTL_ATOMIC_FLAG_* */
    uint64_t operand, operand2; /* atomics; compare-and-swap: compared, swapped in */
    efa_btl_rdma_cb_t cb;
} efa_btl_rdma_args_t;

/* The module, one struct per concern, each naming its owner: the one file
 * that writes it after open (readers may be anywhere; open is the component's
 * init with mca_btl_efa_module_init, before Open MPI sees the module), and
 * what guards it (DESIGN.md, "Structs with one owner per field"). */
typedef struct mca_btl_efa_module {
    mca_btl_base_module_t super;
    /* btl_efa_module.c (open and finalize); fixed after open but for finalizing. */
    efa_core_t *core;
    efa_ctx_t *ctx;
    opal_mutex_t lock;           /* the "module lock" of the structs below */
    opal_hash_table_t endpoints; /* name (uint64) -> endpoint: btl_efa_endpoint.c adds (lock) */
    uint64_t my_name;
    /* Finalize has begun: the upper layers (pml, osc) are closed and their
     * code may be unloaded, so no callback, active message or one-sided
     * request reaches them or their memory any more. */
    volatile bool finalizing;
    /* One-sided operations in flight, all endpoints (atomic): each path
     * (native, emul, ring_atomic) counts its own. */
    volatile int32_t outstanding;
    /* Requests refused (the first few warned of): btl_efa_emul_target.c and
     * btl_efa_native.c count them in one, so that both stop warning alike. */
    int refused;
    /* Calls of the component's progress (btl_efa_progress.c), and their
     * count when the last flush returned (btl_efa_rdma.c); relaxed atomics. */
    unsigned progress_calls, flush_calls;
    /* btl_efa_procs.c (module lock); btl_efa_module.c clears it at finalize */
    struct {
        int net_interest;    /* endpoints holding an interest in the core (net_interest) */
        bool progress_added; /* component progress on the common callback (first add_procs) */
    } procs;
    /* btl_efa_frag.c: the fragment pool (module lock) */
    struct {
        efa_pool_t *pool; /* efa_btl_frag_t, each with a buffer of size bytes */
        /* What a fragment's provider completion calls (the send path's, given
         * at init: the pool calls nothing of the layers above). */
        void (*complete)(efa_op_t *op, const efa_cqe_t *cqe);
        size_t size;
    } frag;
    /* btl_efa_send.c: credits, queues, completions (module lock).  flow
     * (efa_msg_flow.h) also by btl_efa_am.c (a sendi into a ring),
     * btl_efa_batch.c (a posted batch leaves the queue), btl_efa_endpoint.c
     * (a new peer); ring_done and num_ring_done are cleared by
     * btl_efa_ring.c's setup, at open. */
    struct {
        efa_flow_t flow;         /* credits per peer; the endpoints with sends waiting */
        volatile int32_t posted; /* fragments the provider holds (atomic) */
        size_t inplace_min;      /* contiguous sends from this size on: no copy (0: auto) */
        size_t inject_max;       /* messages up to this size may be injected */
        efa_btl_frag_t *done_head, *done_tail; /* injected upper-layer descriptors, callback due */
        efa_btl_frag_t *ring_done;             /* sent through a ring: finished from progress */
        volatile int32_t num_ring_done;
        /* Peers an operation failed to for a path error: the next progress
         * asks the core whether they are lost (mca_btl_efa_tell_lost_due). */
        struct mca_btl_base_endpoint_t *lost_due;
    } send;
    /* btl_efa_batch.c: coalescing (module lock) */
    struct {
        size_t bytes;        /* a batch's bytes at most (0: off) */
        int max;             /* and messages */
        uint64_t sent, msgs; /* what it did */
    } batch;
    /* btl_efa_recv.c: what hands the ring's active messages up, used by the
     * thread holding the inbox's poll (one at a time; a poll inside an
     * upcall returns at once); last_src, the endpoint the last message came
     * from (a hint: endpoints live until finalize), without lock. */
    struct {
        mca_btl_efa_recv_des_t ring_des;
        mca_btl_base_segment_t ring_seg;
        mca_btl_efa_endpoint_t *last_src;
    } recv;
    /* btl_efa_ring.c: the on-node channel, EFA_NODE_CHANNEL_BTL of the
     * process's shared node (NULL: off), set at open.  Its counters: by the
     * senders (btl_efa_am.c, btl_efa_send.c, module lock) and btl_efa_recv.c
     * (the inbox's poll), reported by btl_efa_ring.c at close. */
    struct {
        efa_node_t *node;
        /* The inbox's poll state and this channel's rings in it
         * (efa_node_consumer), polled by recv.c's mca_btl_efa_ring_poll. */
        struct efa_ring_consumer *consumer;
        uint32_t first, count;
        size_t max_frame;              /* largest message (header included) a slot carries */
        uint64_t sent, received, full; /* frames; sends that found a ring full */
    } ring;
    /* btl_efa_mode.c (module lock; agreed is read without): what this
     * process could do alone (the component's choose_one_sided, published),
     * then the job's agreement (first add_procs; registrations and
     * operations wait for it). */
    struct {
        bool native_put;     /* put by fi_write */
        bool native_get;     /* get by fi_read */
        bool native_atomics; /* atomics by fi_atomic & co. */
        volatile bool agreed;
        uint8_t own;             /* EFA_BTL_CAN_* this process published */
        uint8_t why[3];          /* EFA_BTL_WHY_* of put, get, atomics where not native */
        bool rma_insisted;       /* btl_efa_rma_mode native */
        bool atomics_insisted;   /* btl_efa_atomic_mode native */
        bool pipeline_raised;    /* btl_min_rdma_pipeline_size raised for native reads */
        size_t pipeline_default; /* its value before */
        /* This process numbers its messages through the provider to every
         * process of its job where every one does (several NICs and
         * common_efa_rail_failover: EFA_BTL_CAN_NUMBER); job_numbers: every
         * process published that (the agreement). */
        bool numbers, job_numbers;
    } mode;
    /* btl_efa_native.c: the provider's RMA, set at open (rops: module lock) */
    struct {
        bool mr_virt_addr; /* the provider addresses remote memory virtually */
        bool mr_local;     /* local buffers need descriptors */
        bool hmem;         /* FI_HMEM granted: device memory registered is reached by RDMA */
        size_t rma_max;    /* largest transfer handed to the provider at once */
        efa_pool_t *rops;  /* efa_btl_rop_t, each with its scratch words */
        /* Put and get from stripe_min bytes (0: never) go out in equal parts
         * over the rails that reach the peer (rail_ctx[r]: NIC r's context). */
        int rails;
        int nctx; /* contexts per NIC: the stride of a peer's addresses */
        size_t stripe_min;
        bool failover; /* a failed part goes again over another rail */
        efa_ctx_t *rail_ctx[EFA_MAX_RAILS];
        /* statistics: transfers striped, parts sent again over rail 0, puts
         * and gets with device memory by RDMA (FI_HMEM) and as requests,
         * posts of device memory the provider refused (done as requests) */
        volatile int64_t striped, failed_over, device_native, device_requests, device_refused;
    } native;
    /* btl_efa_reg.c: registrations (next_key: module lock) */
    struct {
        efa_emul_table_t *table; /* key -> efa_btl_reg_t, checked by the emulated target */
        uint64_t next_key;
    } reg;
    /* btl_efa_emul.c: the emulated requests in flight, by id (an answer
     * names its request by id, never by address: it comes from another
     * process; claims decide who may touch and who completes one:
     * efa_inflight.h, its own lock).  The rest: module lock. */
    struct {
        efa_inflight_t *reqs; /* id -> efa_btl_rdma_req_t */
        uint64_t next_id;
        uint64_t away_seen;                 /* efa_core_away_ms that reqs' idle times left out */
        struct efa_btl_rdma_req *free_reqs; /* finished requests kept for reuse */
        int num_free_reqs;
        int window;   /* chunks of one put/get in flight (set at open) */
        size_t chunk; /* payload bytes per put/get chunk (set at open) */
        /* A request chunk's send (msg: its header and efa_btl_rma_t) failed for
         * good: the send path calls the initiator through here. */
        void (*chunk_send_failed)(struct mca_btl_efa_module *btl, const void *msg, int status);
    } emul;
    /* btl_efa_cma.c: single copy to processes of this node, set at open;
     * the counters atomic (any thread that does an operation). */
    struct {
        bool allowed; /* for this job (mode and build) */
        efa_single_copy_mode_t mode;
        uint32_t my_pid;             /* put in every handle while allowed */
        volatile int64_t puts, gets; /* operations done by CMA (atomic) */
        volatile int32_t fallbacks;  /* peers the kernel refused (atomic) */
    } cma;
    /* btl_efa_ring_rma.c: small puts and gets written into peers' rings as
     * requests that may be taken back; a record per request until it is
     * answered or taken back (module lock; active also read without it). */
    struct {
        size_t max;  /* largest put or get sent this way (0: none; set at open) */
        double wait; /* seconds before a request not yet started is taken back */
        volatile int32_t active;
        int free_head; /* first free record (-1: none) */
        struct efa_btl_ring_rma_rec {
            uint64_t id;     /* the operation's id; 0: free */
            uint32_t *claim; /* its claim word in the peer's ring slot */
            uint64_t pos;    /* the outbox's committed count after it */
            mca_btl_efa_endpoint_t *endpoint;
            double first_seen; /* 0 until a check sees it open */
            int next_free;
        } recs[EFA_BTL_RING_RMA_RECS];
        volatile int64_t sent, taken_back; /* counters (atomic) */
    } ring_rma;
    /* btl_efa_ring_atomic.c: a record per atomic in peers' rings (lock). */
    struct {
        int active, free_head; /* records in use; the first free one (-1: none) */
        uint64_t seq;          /* of the records' ids */
        struct efa_btl_ring_atomic_rec {
            uint64_t id;     /* the operation's id; 0: free */
            uint32_t *claim; /* its claim word in the peer's ring slot */
            uint64_t pos;    /* the outbox's committed count after it */
            mca_btl_efa_endpoint_t *endpoint;
            efa_btl_rdma_cb_t cb;
            double first_seen;   /* 0 until an expiry check sees it */
            int size, next_free; /* 4 or 8 bytes; the next free record */
            bool taken_late;     /* the target took it after its limit */
        } recs[EFA_BTL_RING_ATOMIC_RECS];
        int64_t sent;
    } ring_atomic;
    /* btl_efa_watch.c: the sweeps, every period s (0: no peer deadline),
     * from the core's deadline tick (one thread at a time, no lock). */
    struct {
        double period, next;
    } watch;
    /* btl_efa_spread.c: peers' messages over the NICs of the set (lock) */
    struct {
        int rails, nctx; /* NICs of the set (1: none to spread over); contexts per NIC */
        bool failover;   /* common_efa_rail_failover */
        uint32_t next;   /* the NIC the next peer on another node takes */
        uint32_t completed, completed_first; /* for test.fail_rail_send, fail_first_send */
        efa_ctx_t *ctx[EFA_MAX_RAILS];       /* NIC r's context (index 0 on every NIC) */
        efa_btl_frag_t *resend; /* failed over, waiting for room in the home NIC's queue */
        uint64_t peers, sent, failed_over, duplicates, recv_failed, retired, forged;
        uint64_t recv_failed_first; /* ... of those receives, failed on the first NIC */
        bool ask_due;               /* a NIC flushed: the next sweep asks (btl_efa_spread_ask.c) */
        uint64_t asked, told;       /* asks sent, answered (atomic) */
        uint32_t foreign;           /* peers of other jobs: they may send unnumbered */
        uint64_t numbered_first, first_left;  /* numbered there; times a peer left it */
        uint64_t left, taken_back, sent_back; /* NICs left, taken again; messages there since */
        uint64_t turn_peers;                  /* peers whose transfers take several NICs in turn */
        uint64_t turns; /* ... transfers sent over a NIC beside the first in turn (atomic) */
    } spread;
} mca_btl_efa_module_t;

/* Test-only parameters (btl_efa_debug_*; docs/RELIABILITY.md, "Test-only
 * parameters"): on the data path read only where the component's
 * test_hooks_on is set; at setup (the inbox, CMA's check) read directly. */
typedef struct mca_btl_efa_test_hooks {
    int corrupt_offset; /* added to the remote address of every put and atomic */
    int lose_answers;  /* the target's answers: 1 dropped, 2 misnamed, 3 twice, 4 forged (0: off) */
    int lose_recv;     /* the Nth arrival through the provider fails (0: off) */
    int forge_src;     /* the Nth injected fragment goes again, forged (0: off) */
    int forge_unknown; /* ... naming a process of no job rather than its destination */
    int fail_module_init; /* module init fails after its deadline ticks are added */
    int fail_inbox_rank;  /* this rank's on-node inbox is not created (-1: none) */
    int cma_refuse;       /* act as if the kernel refused CMA (EPERM) to every peer */
    int takeback_refuse;  /* the single copy of a request taken back fails as on EPERM */
    int first_rail;       /* the NIC whose turn it is first (btl_efa_spread.c) */
    int fail_rail_send, fail_first_send, fail_first_rma; /* Nth send, put/get piece: failed */
    int flush_first; /* before the Nth arrival on the first NIC, a failed receive there */
    bool flush_lost; /* ... that held the Nth arrival (lost) */
} mca_btl_efa_test_hooks_t;

typedef struct mca_btl_efa_component {
    mca_btl_base_component_3_0_0_t super;
    int send_window;         /* messages in flight per peer (0: from the receive pool) */
    int rma_window;          /* chunks of one put/get in flight */
    size_t rma_max_transfer; /* largest native transfer (0: the provider's limit) */
    size_t inplace_min;      /* btl_efa_inplace_min (0: messages above the inject size) */
    char *rma_mode;          /* btl_efa_rma_mode: auto, native, emulated */
    char *atomic_mode;       /* btl_efa_atomic_mode: auto, native, emulated */
    char *onnode_channel;    /* btl_efa_onnode_channel: auto, shm, none */
    char *single_copy;       /* btl_efa_single_copy: auto, cma, none */
    int rma_timeout;         /* seconds an emulated request may go unanswered */
    size_t onnode_rma_max;   /* btl_efa_onnode_rma_max (0: single copy only) */
    int onnode_rma_wait;     /* btl_efa_onnode_rma_wait, microseconds */
    bool peer_watch;         /* btl_efa_peer_watch (btl_efa_watch.c) */
    size_t coalesce_bytes;   /* btl_efa_coalesce_bytes (0: off) */
    int coalesce_max;        /* btl_efa_coalesce_max */
    bool test_hooks_on;      /* a test hook is set: the hot paths' one branch for all */
    mca_btl_efa_test_hooks_t test;
} mca_btl_efa_component_t;

OPAL_MODULE_DECLSPEC extern mca_btl_efa_component_t mca_btl_efa_component;
extern mca_btl_efa_module_t mca_btl_efa_module;

/* Monotonic seconds, for timeouts (finalize's wait, btl_efa_rma_timeout). */
static inline double mca_btl_efa_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A process name as the BTL's 64-bit key (wire headers, endpoint table). */
static inline uint64_t mca_btl_efa_name_key(const opal_process_name_t *name) {
    uint64_t key;
    memcpy(&key, name, sizeof(key));
    return key;
}

/* btl_efa_module.c */
int mca_btl_efa_module_init(mca_btl_efa_module_t *btl, efa_core_t *core);
/* The component's init failed once module init began: before and after it
 * releases the core (btl_efa_module.c). */
void mca_btl_efa_module_init_failed(mca_btl_efa_module_t *btl);
void mca_btl_efa_module_init_failed_released(mca_btl_efa_module_t *btl);

/* btl_efa_frag.c: the fragment pool */
int mca_btl_efa_frag_pool_init(mca_btl_efa_module_t *btl,
                               void (*complete)(efa_op_t *op, const efa_cqe_t *cqe));
efa_btl_frag_t *mca_btl_efa_frag_get(mca_btl_efa_module_t *btl);
/* The same with the module lock held. */
efa_btl_frag_t *mca_btl_efa_frag_get_locked(mca_btl_efa_module_t *btl);
void mca_btl_efa_frag_return(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag);
/* Back to the pool as it is (no registration of its own); module lock held. */
static inline void mca_btl_efa_frag_return_locked(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag) {
    efa_pool_put(btl->frag.pool, frag);
}
/* frag's first len bytes move to a spare's buffer, and frag's old one is
 * the provider's for good (a send it may still read; false: no spare).
 * _orphan: a send failed while the provider held it (efa_cqe_t.orphaned).
 * Module lock held. */
bool mca_btl_efa_frag_fresh_buffer_locked(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag,
                                          size_t len);
void mca_btl_efa_frag_orphan_locked(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag);
/* Finalize, before the core is released: idle slabs freed, busy ones kept
 * (their completions pointed at the core); after: the kept ones freed
 * where the endpoints are closed. */
void mca_btl_efa_frag_slabs_fini(mca_btl_efa_module_t *btl);
void mca_btl_efa_frag_slabs_fini_released(mca_btl_efa_module_t *btl);

/* btl_efa_send.c: credits, queues, completions */
int mca_btl_efa_frag_post(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag);
/* The provider's completion of a fragment (its efa_op_t callback). */
void mca_btl_efa_frag_complete(efa_op_t *op, const efa_cqe_t *cqe);
/* Finish a fragment: the upper layer's callback (or the emulated path's
 * own), then back to the pool or sent again (an answer's retries). */
void mca_btl_efa_frag_finish(mca_btl_efa_module_t *btl, efa_btl_frag_t *frag, int status);
/* A message from ep arrived: take the credits it returns and count it
 * towards what this process owes back.  Inline for the on-node ring's
 * frames, which mostly carry no credit and so need nothing. */
void mca_btl_efa_note_received_slow(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                    const efa_btl_hdr_t *hdr, bool via_ring);
static inline void mca_btl_efa_note_received(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep,
                                             const efa_btl_hdr_t *hdr, bool via_ring) {
    if (!via_ring || 0 != hdr->credits) {
        mca_btl_efa_note_received_slow(btl, ep, hdr, via_ring);
    }
}
int mca_btl_efa_drain_pending(mca_btl_efa_module_t *btl);
/* Has drain_pending anything to do: fragments sent through a ring to
 * finish, or endpoints waiting?  Peeked without the lock (progress calls
 * drain_pending only then; it looks again under the lock). */
static inline bool mca_btl_efa_send_work(mca_btl_efa_module_t *btl) {
    return 0 != __atomic_load_n(&btl->send.num_ring_done, __ATOMIC_RELAXED) ||
           0 != btl->send.flow.num_waiting || NULL != btl->spread.resend;
}
bool mca_btl_efa_can_send_now(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep, size_t len);
void mca_btl_efa_run_done(mca_btl_efa_module_t *btl);

/* btl_efa_endpoint.c */
mca_btl_efa_endpoint_t *mca_btl_efa_endpoint_by_name(mca_btl_efa_module_t *btl, uint64_t name,
                                                     opal_proc_t *proc);
int mca_btl_efa_add_procs(struct mca_btl_base_module_t *base, size_t nprocs,
                          struct opal_proc_t **procs, struct mca_btl_base_endpoint_t **endpoints,
                          struct opal_bitmap_t *reachable);
int mca_btl_efa_del_procs(struct mca_btl_base_module_t *base, size_t nprocs,
                          struct opal_proc_t **procs, struct mca_btl_base_endpoint_t **peers);

/* btl_efa_am.c: the two-sided entry points */
mca_btl_base_descriptor_t *mca_btl_efa_alloc(struct mca_btl_base_module_t *base,
                                             struct mca_btl_base_endpoint_t *endpoint,
                                             uint8_t order, size_t size, uint32_t flags);
int mca_btl_efa_free(struct mca_btl_base_module_t *base, mca_btl_base_descriptor_t *des);
mca_btl_base_descriptor_t *mca_btl_efa_prepare_src(struct mca_btl_base_module_t *base,
                                                   struct mca_btl_base_endpoint_t *endpoint,
                                                   struct opal_convertor_t *convertor,
                                                   uint8_t order, size_t reserve, size_t *size,
                                                   uint32_t flags);
int mca_btl_efa_send(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *endpoint,
                     struct mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag);
int mca_btl_efa_sendi(struct mca_btl_base_module_t *base, struct mca_btl_base_endpoint_t *endpoint,
                      struct opal_convertor_t *convertor, void *header, size_t header_size,
                      size_t payload_size, uint8_t order, uint32_t flags, mca_btl_base_tag_t tag,
                      mca_btl_base_descriptor_t **descriptor);
/* May something concerning ep (NULL: none in particular) still be handed to
 * the upper layer?  Not once finalize began, nor for a detached endpoint. */
static inline bool mca_btl_efa_upper_alive(const mca_btl_efa_module_t *btl,
                                           const mca_btl_efa_endpoint_t *ep) {
    return !btl->finalizing && (NULL == ep || !ep->detached);
}
void mca_btl_efa_on_message(void *arg, efa_ctx_t *ctx, void *buf, size_t len, int err,
                            fi_addr_t src);
/* Hand the on-node channel's waiting frames (btl->ring.node set) to the
 * same handlers as a provider's message; returns how many. */
int mca_btl_efa_ring_poll(mca_btl_efa_module_t *btl);

/* The component's progress (btl_efa_progress.c), run by the common
 * progress callback (btl_progress is NULL). */
int mca_btl_efa_component_progress(void);

/* btl_efa_watch.c: the peers ob1 may wait on, watched by the peer deadline */
void mca_btl_efa_watch_init(mca_btl_efa_module_t *btl);
/* At finalize, before the endpoints go: no sweep any more. */
void mca_btl_efa_watch_stop_sweeps(mca_btl_efa_module_t *btl);
void mca_btl_efa_watch_fini(mca_btl_efa_module_t *btl, mca_btl_efa_endpoint_t *ep);

/* btl_efa_reg.c: registrations and the table of them */
struct mca_btl_base_registration_handle_t *
mca_btl_efa_register_mem(struct mca_btl_base_module_t *base,
                         struct mca_btl_base_endpoint_t *endpoint, void *addr, size_t size,
                         uint32_t flags);
int mca_btl_efa_deregister_mem(struct mca_btl_base_module_t *base,
                               struct mca_btl_base_registration_handle_t *handle);
int mca_btl_efa_reg_setup(mca_btl_efa_module_t *btl);
void mca_btl_efa_reg_fini(mca_btl_efa_module_t *btl);

END_C_DECLS
#endif
