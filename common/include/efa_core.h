/*
 * The C interface of the shared EFA core.
 *
 * The core is C++ and knows nothing of Open MPI; the components' glue is C
 * and knows Open MPI.  This header is the seam: plain C types only, so the
 * glue (which includes Open MPI headers that do not compile as C++) can use
 * it, and the core can be unit-tested without Open MPI.
 *
 * Conventions: functions return 0 on success or a negative libfabric error
 * (-FI_EAGAIN, -FI_ENOMEM, ...); the glue maps them to OPAL/OMPI codes.
 */
#ifndef EFA_CORE_H
#define EFA_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "efa_tag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct efa_core efa_core_t;

/* One endpoint with its completion queue.  Contexts let threads (or
 * communicators) drive separate queue pairs: EFA has no scalable
 * endpoints, so a context is a whole endpoint. */
typedef struct efa_ctx efa_ctx_t;

/* A registration of the core's cache (efa_core_mr_acquire). */
typedef struct efa_mr efa_mr_t;

/* A completion as the core reports it to an operation's owner. */
typedef struct efa_cqe {
    int err;        /* 0, or a negative libfabric error (-FI_ECANCELED, -FI_ETRUNC, ...) */
    uint64_t flags; /* FI_SEND, FI_RECV, FI_TAGGED, FI_REMOTE_CQ_DATA, ... */
    uint64_t tag;   /* matched tag (receives and peeks) */
    uint64_t data;  /* remote CQ data when flags has FI_REMOTE_CQ_DATA */
    size_t len;     /* bytes placed (receives) or message length (peeks) */
    size_t olen;    /* bytes that did not fit (truncation) */
    /* Receives without error: the sending endpoint's address as the
     * provider reports it (FI_SOURCE), the AV entry this process inserted
     * for it.  FI_ADDR_NOTAVAIL where nobody can say: a provider without
     * FI_SOURCE, a sender not in the AV, sends and failed operations. */
    fi_addr_t src;
    /* The operation never reached the provider: its post, waiting in the
     * backlog, failed when progress made it (err says why).  Nothing of it
     * was sent or matched, so its owner may post it again. */
    bool unposted;
    /* A failure the core reports (a lost peer) while the provider still
     * holds the operation: the provider may read (a send) or write (a
     * receive) its buffer until it hands the operation back or the
     * endpoint closes.  Its owner must not give the buffer to anything
     * else (a fresh one for what comes next). */
    bool orphaned;
} efa_cqe_t;

/* What a receive's completion means for the message it was posted for.
 * A truncation fills the posted buffer (len == posted) and says how much
 * did not fit (olen).  ofi_rxd also reports FI_ETRUNC when it lost part of
 * a message that fitted: fewer bytes than posted and nothing over.  That
 * is lost data, not the sender's mistake, and must not read as
 * MPI_ERR_TRUNCATE.  (A length of 0 stays a truncation: some providers
 * leave len unset in error entries.) */
typedef enum {
    EFA_RECV_DONE,      /* no error */
    EFA_RECV_TRUNCATED, /* the message was longer than the receive */
    EFA_RECV_SHORT,     /* the provider delivered part of a message that fitted */
    EFA_RECV_FAILED,    /* any other error, cancel included */
} efa_recv_outcome_t;

static inline efa_recv_outcome_t efa_recv_outcome(const efa_cqe_t *cqe, size_t posted) {
    if (0 == cqe->err) {
        return EFA_RECV_DONE;
    }
    if (-FI_ETRUNC != cqe->err) {
        return EFA_RECV_FAILED;
    }
    return (0 == cqe->olen && cqe->len > 0 && cqe->len < posted) ? EFA_RECV_SHORT
                                                                 : EFA_RECV_TRUNCATED;
}

/* Every operation the core posts carries one of these as its libfabric
 * context.  Owners embed it first in their own request/fragment and get
 * the callback from the progress engine. */
typedef struct efa_op {
    struct fi_context2 fi_ctx; /* must be first: libfabric hands it back */
    void (*complete)(struct efa_op *op, const efa_cqe_t *cqe);
    uint8_t rx_class;    /* receives: EFA_RX_USER or EFA_RX_INTERNAL, set by the owner */
    uint8_t rx_counted;  /* core-private: this receive holds a provider queue slot */
    uint8_t net_counted; /* core-private: counted in its context's in-flight operations */
    uint8_t peek;        /* core-private: a peek (FI_PEEK), whose completion is no receive */
    /* core-private: the core's stand-in for this operation at the provider
     * while the peer deadline watches it (common/core_deadline.cpp), or
     * NULL; set at every post. */
    struct efa_op *tracker;
} efa_op_t;

/* A completion that does nothing.  An owner that goes away while the
 * provider still holds some of its operations (a component finalized while
 * the core stays open for another one) points their 'complete' here and
 * leaves their memory allocated: this function lives in the core's
 * library, which stays loaded as long as the core is open, whereas the
 * owner's code may be unloaded. */
void efa_op_complete_nothing(efa_op_t *op, const efa_cqe_t *cqe);

/* Receive classes.  The provider's receive queue is finite (shm: 1024).
 * A program may post more receives than that and then block in a
 * collective: the collective's receives (negative tags) and synchronous-send
 * acknowledgements never match user receives, so they may bypass them, and
 * a share of the queue is kept for them.  Without that reserve they would
 * wait behind user receives that wait for them: a deadlock. */
enum { EFA_RX_USER = 0, EFA_RX_INTERNAL = 1 };

/* The addresses of one remote process: one per (rail, context).  Rail r
 * is this process's NIC r (0: the one every message takes) paired with
 * one of the peer's NICs on the same fabric (peer_blob.hpp, pair_rails);
 * a rail with no NIC of the peer on its fabric holds FI_ADDR_NOTAVAIL. */
typedef struct efa_peer {
    int num_addrs;     /* rail 0's addresses (one per context): addr[0 .. num_addrs) */
    uint32_t send_seq; /* the MTL's last seq to this process (efa_tag.h) */
    int num_rails;     /* this process's NICs (efa_core_info_t.num_nics) */
    int rails_up;      /* of them, the rails that reach this peer (rail 0 always) */
    /* Rails taken out for this peer (bit r: rail r, 0 included, stopped completing or
     * failed; the core sets it, atomically): owners send over the others. */
    uint32_t rails_down;
    /* Rails put back since (set by the core, taken by exchange: NetLink, btl_efa) */
    uint32_t rails_back, rails_back_btl;
    /* The peer's NIC each rail reaches (its registration keys are per NIC:
     * efa_rma_handle_t.rail_key[nic - 1]); 0 for rail 0. */
    uint8_t rail_nic[4];
    /* Bit r: the peer's NIC on rail r pairs back with this process's NIC
     * r (pair_rails from its side): a ping over rail r is answered over it. */
    uint8_t rails_mutual;
    fi_addr_t addr[]; /* index: rail * contexts + context (num_rails * num_addrs in all) */
} efa_peer_t;

/* The peer's address on rail 'rail' for context 'index' of 'nctx', or
 * FI_ADDR_NOTAVAIL where that rail does not reach it. */
static inline fi_addr_t efa_peer_rail_addr(const efa_peer_t *peer, int rail, int index, int nctx) {
    if (rail >= peer->num_rails ||
        (__atomic_load_n(&peer->rails_down, __ATOMIC_RELAXED) & (1u << rail))) {
        return FI_ADDR_NOTAVAIL;
    }
    return peer->addr[rail * nctx + index];
}

/* Settings the glue collects from MCA parameters and the runtime. */
typedef struct efa_core_params {
    const char *provider_include; /* comma-separated; NULL or "" means the default ("efa") */
    const char *provider_exclude; /* comma-separated; NULL or "" means none */
    const char *nic_include;      /* NIC (domain) names, comma-separated; NULL or "": all */
    const char *nic_exclude;      /* NIC (domain) names, comma-separated; NULL or "": none */
    int nics_per_proc;            /* most NICs in a process's set; 0: its whole share */
    const char *gpu;              /* the process's GPU, whose switch's NICs it takes: "auto",
                                     "none", an index or a PCI address (gpu_nics.hpp) */
    int stripe_min;               /* bytes from which one-sided transfers are striped over
                                     the rails (0: never) */
    bool rail_failover;           /* a failed rail beside the first is taken out for the peer
                                     (false: its failure is the peer's loss) */
    int rail_retry;               /* seconds after a rail's loss before it is tried again
                                     (doubling per failed try, to 8 times; 0: never) */
    int num_contexts;             /* endpoints per NIC */
    int tx_size;                  /* provider tx queue depth; 0 = provider default */
    int rx_size;                  /* provider rx queue depth; 0 = provider default */
    int mr_cache_size;            /* unreferenced registrations kept */
    int progress_batch;           /* completions read per CQ per progress call */
    int net_poll_interval_us;     /* efa_core_progress_paced: how long a provider that has just
                                     gone quiet goes unpolled (0: polled on every call) */
    int net_poll_interval_max_us; /* ... the longest once it has stayed quiet (the wait doubles
                                     per empty poll up to it; at or below the above: fixed) */
    bool force_mr_local;          /* behave as if the provider required FI_MR_LOCAL */
    bool force_no_cq_data;        /* use the tag layout that carries the source in the tag */
    bool need_remote_comm;        /* the job spans nodes: FI_REMOTE_COMM is required */
    bool thread_multiple;         /* MPI_THREAD_MULTIPLE: ask for FI_THREAD_SAFE */
    int local_rank, local_size;   /* for NIC selection */
    /* The cpusets of this job's processes on this node, by local rank, as
     * lists ("0-3,8-11"), from the runtime before the modex: NULL or ""
     * for one it gave none of.  NULL and 0 when it told none.  NIC
     * selection counts who shares a pool of NICs from them (select_nic_set,
     * nic_select.hpp).  The glue keeps them for the process's life. */
    const char *const *node_cpusets;
    int num_node_cpusets;
    int verbose;
    /* The efa provider's own switches (provider_options.hpp). */
    int provider_shm; /* EFA_SWITCH_ON/OFF: FI_OPT_SHARED_MEMORY_PERMITTED; AUTO: untouched */
    int rnr_retry;    /* FI_OPT_EFA_RNR_RETRY (0-7); -1: the provider's default */
    /* FI_OPT_CUDA_API_PERMITTED: EFA_SWITCH_OFF: the provider reaches device
     * memory by the NIC alone and calls no CUDA (so libfabric 1.19.1 and later
     * never set CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, whose refusal fails their
     * posts of VMM and pool memory); ON: it may; AUTO: untouched */
    int provider_cuda_calls;
    bool force_efa_options;     /* apply them on any provider, not only efa (test path) */
    const char *force_emulated; /* "read,write,atomics": treat as emulated whatever the provider
                                   says (test path); NULL or "": as reported */
    int peer_timeout;           /* seconds a peer may leave operations to it without any
                                   completion before it is declared dead (0: never) */
    bool mem_release_hooks;     /* the runtime reports free() and munmap() (efa_core_mem_release);
                                   false: registrations are never reused, as a freed and
                                   remapped address could meet its old registration */
    /* Behave as on libfabric's efa-direct fabric (test path on the
     * stand-ins, and what admits efa-direct itself): no FI_TAGGED, no
     * message ordering asked for, FI_MR_LOCAL, every message at most
     * direct_mode_mtu bytes, and untagged arrivals swapped in pairs. */
    bool force_direct_mode;
    int direct_mode_mtu;           /* bytes; the largest message in the forced mode */
    bool debug_swap_messages;      /* hand untagged arrivals on in swapped pairs (test path) */
    bool debug_fake_device;        /* the fake device of the tests is the device (efa_device.h) */
    bool debug_fake_device_no_ipc; /* ... and it refuses every import */
    /* ... and its memory is visible to the CPU and to a provider with
     * FI_HMEM as FI_HMEM_SYSTEM memory (efa_fake_device_visible) */
    bool debug_fake_device_hmem;
    /* Device buffers may come (the glue found an accelerator): ask the
     * provider for FI_HMEM first, so that it carries them (hmem: the
     * user's switch, true by default). */
    bool want_hmem;
    bool hmem;
    bool dmabuf; /* device allocations registered through a dmabuf first (FI_MR_DMABUF) */
    /* EFA_SWITCH_*: device allocations without synchronous memory
     * operations (CUDA VMM and pool memory) go to the provider too (on),
     * never (off), or where the provider takes them (auto, the default:
     * not libfabric's efa fabric; efa_core_hmem_vmm_allowed) */
    int hmem_vmm;
    /* the fake's visible memory is described as such memory (test path) */
    bool debug_fake_device_vmm;
    /* Test path: the fake's allocations of more bytes than this are pieces
     * of this many bytes side by side, as CUDA VMM memory grown a piece at
     * a time (efa_fake_device_pieces); 0: one allocation each. */
    int debug_fake_device_piece;
    /* Test path: posts of device registrations are refused as a provider
     * would refuse them (-FI_EINVAL): 1 at the post, 2 when progress posts
     * them from the backlog (their completion then says so). */
    int debug_fake_device_refuse_post;
} efa_core_params_t;

/* Tri-state answers and requests for the efa provider's switches. */
enum { EFA_SWITCH_AUTO = 0, EFA_SWITCH_OFF = 1, EFA_SWITCH_ON = 2 };
/* How the provider carries a one-sided operation (efa_core_info_t). */
typedef enum {
    EFA_RMA_BY_UNKNOWN = 0, /* the provider does not say (stand-ins, libfabric < 1.18) */
    EFA_RMA_BY_DEVICE,      /* the device does it */
    EFA_RMA_BY_EMULATION    /* the provider emulates it with messages (the target CPU works) */
} efa_rma_by_t;

/* What the opened core offers (read-only after open). */
typedef struct efa_core_info {
    const char *provider; /* e.g. "efa", "tcp;ofi_rxm" */
    const char *fabric;   /* fabric name */
    const char *domain;   /* the chosen NIC */
    const char *nic_reason;
    int num_nics;        /* NICs opened: the rails (at most EFA_MAX_RAILS, efa_rma.h) */
    int node_rails;      /* the most rails a process of this node opens: the admitted NICs
                            and the stand-ins' other subnets, at most common_efa_nics_per_proc
                            and EFA_MAX_RAILS, 1 with striping off; unlike num_nics the same
                            for every process of the node whatever their number */
    size_t stripe_min;   /* one-sided transfers from this size are striped over the rails
                            (0: never; always 0 with one NIC) */
    bool rail_failover;  /* a part whose rail failed goes again over the first rail */
    int num_contexts;    /* endpoints per NIC */
    size_t inject_size;  /* 0: no inject */
    size_t tx_iov_limit; /* buffers one send may gather */
    size_t max_msg_size;
    size_t cq_data_size;         /* bytes of remote CQ data (0: none used) */
    size_t max_rma_size;         /* largest single RMA transfer the provider takes */
    bool has_rma;                /* FI_RMA granted */
    bool has_atomic;             /* FI_ATOMIC granted */
    bool mr_local;               /* local descriptors needed (required or forced) */
    bool has_tagged;             /* FI_TAGGED granted (false on efa-direct and in the forced
                                    direct mode: only untagged messages and RMA) */
    bool ordered;                /* send-after-send order granted for messages */
    bool swaps_messages;         /* untagged arrivals are handed on in swapped pairs */
    bool mr_virt_addr;           /* remote addresses are virtual addresses, else MR offsets */
    bool mr_prov_key;            /* the provider chooses keys (else the core numbers them) */
    bool mr_endpoint;            /* registrations are bound to the endpoints and enabled */
    efa_tag_layout_t tag_layout; /* see efa_tag.h */
    uint32_t api_version;        /* FI_VERSION asked of fi_getinfo */
    uint32_t lib_version;        /* fi_version() of the loaded library */
    efa_rma_by_t rma_read_by, rma_write_by, atomics_by;
    int provider_shm;        /* EFA_SWITCH_*: the provider's own shared memory (AUTO: unknown) */
    int provider_cuda_calls; /* EFA_SWITCH_*: what the endpoint took of
                                FI_OPT_CUDA_API_PERMITTED (AUTO: untouched or refused) */
    bool has_source;         /* FI_SOURCE granted: receives say who sent them (efa_cqe_t.src) */
    /* FI_HMEM granted: device buffers registered with
     * efa_core_mr_acquire_device (where the device backend describes its
     * memory) go to the provider as they are (messages on the first NIC,
     * RMA on every NIC they are registered on). */
    bool hmem;
} efa_core_info_t;

/* Diagnostics reach the user through the glue's opal_show_help; the core
 * calls this with a topic of help-common-efa.txt and up to three strings. */
typedef void (*efa_core_show_help_fn)(const char *topic, const char *a1, const char *a2,
                                      const char *a3);
typedef void (*efa_core_verbose_fn)(int level, const char *msg);
void efa_core_set_reporters(efa_core_show_help_fn show_help, efa_core_verbose_fn verbose);

/* Check the parameters and whether a provider matches, without opening
 * anything (cheap enough for a component's query).  Returns 0 when usable;
 * -FI_ENODATA when no provider matched; -FI_EINVAL for bad parameters.
 * 'explain' says whether failures are shown to the user. */
int efa_core_probe(const efa_core_params_t *params, bool explain);

/* Open (first caller) or share (later callers) the process-wide core.
 * Refcounted: the MTL and the BTL each acquire and release it. */
efa_core_t *efa_core_acquire(const efa_core_params_t *params, int *err);
void efa_core_release(efa_core_t *core);
efa_core_t *efa_core_current(void);

/* What the core counted since it opened: the MPI_T performance variables
 * common_efa_* (common_efa_glue.c).  Counts of the contexts are read
 * without their owners' locks: a read may miss an increment in flight. */
typedef struct efa_core_counters {
    uint64_t completions;    /* read from the provider's completion queues */
    uint64_t posts_deferred; /* posts that found a provider queue full and waited */
    uint64_t posts_waiting;  /* posts waiting for queue space now */
    uint64_t mr_hits;        /* registrations served by the cache */
    uint64_t mr_misses;      /* registrations made with the provider */
    uint64_t mr_evictions;   /* idle registrations dropped for the cache's bound */
    uint64_t peers_lost;     /* processes declared unreachable */
    uint64_t rails_lost;     /* rails to a peer taken out (its transfers moved to others) */
    /* What the process moved by which path (efa_core_get_current_counters
     * only: process-wide, core/path_counts.hpp). */
    uint64_t provider_sends, provider_send_bytes; /* messages posted to the provider */
    uint64_t provider_recvs, provider_recv_bytes; /* receive completions from it */
    uint64_t provider_rma, provider_rma_bytes;    /* one-sided operations posted to it */
    uint64_t ring_frames, ring_bytes;             /* frames through the on-node rings */
    uint64_t single_copies, single_copy_bytes;    /* CMA copies to or from a peer */
    uint64_t unexpected, unexpected_peak;         /* arrived before their receive; most at once */
    uint64_t coalesced;                           /* frames packed behind another */
    uint64_t emul_served, emul_refused;           /* emulated one-sided requests of peers */
    uint64_t rail_rma, rail_rma_bytes; /* one-sided operations on rails beside the first */
    /* One-sided operations and bytes posted on each NIC of the set (index:
     * the rail; rail 0's atomics included, no bytes for them). */
    uint64_t nic_rma[4], nic_rma_bytes[4];
    uint64_t rails_back;             /* lost rails found reaching their peer again and put back */
    uint64_t rail_out_notices;       /* peers' notices that they took out a NIC reaching this one */
    uint64_t striped, striped_bytes; /* transfers striped over several rails */
    uint64_t failed_over;            /* striped parts sent again over the first rail */
} efa_core_counters_t;
void efa_core_get_counters(efa_core_t *core, efa_core_counters_t *out);
/* The process's counts: the open core's plus those of every core released
 * before it, so that a counter never goes down, not even after finalize
 * (posts_waiting, a level, is the open core's alone).  Safe from any
 * thread at any time: it waits for a core being opened or released. */
void efa_core_get_current_counters(efa_core_counters_t *out);
const efa_core_info_t *efa_core_get_info(const efa_core_t *core);

/* The verbose-1 report (core_report.hpp): a component adds its line
 * ("who" is its name); the first efa_core_report() says it all, once per
 * process (node-wide lines only where node_leader). */
void efa_core_note(efa_core_t *core, const char *who, const char *text);
void efa_core_report(efa_core_t *core, bool node_leader);

/* The process's address blob for the modex (every NIC and context). */
int efa_core_local_blob(efa_core_t *core, const void **blob, size_t *len);

/* Insert a remote process from its blob; the same blob returns the same
 * peer (the MTL and BTL share AV entries).  Refcounted. */
efa_peer_t *efa_core_peer_get(efa_core_t *core, const void *blob, size_t len, int *err);
void efa_core_peer_put(efa_core_t *core, efa_peer_t *peer);
/* The provider's name where it reaches the processes of this host alone
 * (it does not grant FI_REMOTE_COMM: libfabric's shm), else NULL.  Its
 * fi_av_insert takes a process of another host all the same, and every
 * send to that one then waits for ever: the owners check a peer's host
 * (the runtime knows it) before efa_core_peer_get.  The first call where
 * the job did not need remote peers at selection asks libfabric once
 * (fi_getinfo): ask only for a peer that is not on this host. */
const char *efa_core_host_only(efa_core_t *core);
/* How messages name the peer ("rank 2 on host-3"); the glue knows it. */
void efa_core_peer_set_name(efa_core_t *core, efa_peer_t *peer, const char *name);
/* The process at addr can no longer be talked to correctly (a message of
 * its stream was lost, 'why' says how): said once (help topic
 * peer-unreachable), its tracked operations fail with err, later ones at
 * once, as when the peer deadline expires.  A receive the provider holds
 * fails when the provider gives it back (its cancel), or a further
 * peer_timeout later: until then the provider may write its buffer. */
void efa_core_peer_lost(efa_core_t *core, fi_addr_t addr, int err, const char *why);
/* The common_efa_peer_timeout in effect, in seconds (0: never). */
int efa_core_peer_timeout(const efa_core_t *core);
/* Has the core declared the process behind peer lost?  1: lost (its
 * deadline, a path error on its last rail, efa_core_peer_lost); 0: not (a
 * rail alone out for it, and its operations moved to others, counts as
 * not); -1: the core cannot say (the peer deadline is off, so it declares
 * nothing: a path error is then the operation's owner's to judge).  An
 * operation's completion comes before the core's verdict on its error:
 * ask from a later progress call. */
int efa_core_peer_state(efa_core_t *core, const efa_peer_t *peer);
/* Watch a peer the owner may be waiting on with nothing posted to it (pml
 * ob1 over btl_efa: its receives take any source).  For the peer deadline
 * a watched peer is waited on: silent for half the deadline, it is probed,
 * and when the probe goes unanswered it is declared lost and the watch's
 * 'complete' is called, once, with the error.  0 (nothing to do when the
 * deadline is off), or -FI_EHOSTUNREACH when the peer is already lost. */
int efa_core_peer_watch(efa_core_t *core, efa_peer_t *peer, efa_op_t *watch);
/* The same for the peer at addr as context ctx reaches it (the on-node
 * engine knows its peers on other nodes by address). */
int efa_core_addr_watch(efa_core_t *core, efa_ctx_t *ctx, fi_addr_t addr, efa_op_t *watch);
/* End a watch without a call; nothing when it ended already.  false: its
 * call is due (the peer was declared lost) and still comes, so the watch's
 * memory must stay until it does. */
bool efa_core_peer_unwatch(efa_core_t *core, efa_op_t *watch);
/* fn(arg) about once a second from progress while the peer deadline is
 * on (where an owner of watches sweeps them; btl_efa and mtl_efa each
 * add theirs).  0 or -FI_ENOMEM.  Remove takes the pair added. */
int efa_core_add_deadline_tick(efa_core_t *core, void (*fn)(void *arg), void *arg);
void efa_core_remove_deadline_tick(efa_core_t *core, void (*fn)(void *arg), void *arg);

/* Who sent it.  A message names its sender itself (btl_efa's header, the
 * matching engine's, a withdrawal's or probe's id); where the provider
 * reports the source (efa_cqe_t.src), that claim is checked against the
 * AV entry of the claimed sender: a message from an endpoint of another
 * process is forged (or misrouted), and its owner drops it.  'claimed' is
 * any address of the claimed process (the one its messages are expected
 * from costs one compare; another of its contexts a table lookup).  true
 * when the claim holds or cannot be checked (src FI_ADDR_NOTAVAIL: the
 * provider does not say, or the sender is not in the AV; claimed
 * FI_ADDR_NOTAVAIL: the owner does not know the claimed process's
 * address).  false: the message is to be dropped; the core has counted it
 * and said so once (help topic forged-sender), 'what' naming the kind of
 * message. */
bool efa_core_source_differs(efa_core_t *core, fi_addr_t src, fi_addr_t claimed, const char *what);
static inline bool efa_core_source_ok(efa_core_t *core, fi_addr_t src, fi_addr_t claimed,
                                      const char *what) {
    return src == claimed || src == FI_ADDR_NOTAVAIL || claimed == FI_ADDR_NOTAVAIL ||
           !efa_core_source_differs(core, src, claimed, what);
}
static inline bool efa_core_source_is(efa_core_t *core, const efa_cqe_t *cqe, fi_addr_t claimed,
                                      const char *what) {
    return efa_core_source_ok(core, cqe->src, claimed, what);
}
/* Messages dropped so far because their claimed sender was not their
 * source, and receives whose source could not be checked although the
 * provider reports sources (a sender not in the AV). */
uint64_t efa_core_source_forged(const efa_core_t *core);
uint64_t efa_core_source_unchecked(const efa_core_t *core);

/* Counts for the MPI_T variables (process-wide): a transfer of 'bytes'
 * striped over several rails, or (again) a part sent again after its rail failed. */
void efa_core_count_stripe(size_t bytes, bool again);
/* 'who' sends messages that must stay on NIC 0 (the provider's tagged
 * ones): NIC 0's loss to a peer is then the peer's (core_rail0.cpp). */
void efa_core_pin_rail0(efa_core_t *core, const char *who);
/* Can NIC 0 be left for a peer (several rails, common_efa_rail_failover,
 * nothing pinned to it)?  Then a receive that fails there, but for a
 * truncation, is that NIC flushing its queue, as on any other rail: its
 * senders move, and a channel whose every message there is numbered
 * finds what it lost by the gap (core_rail0.cpp). */
bool efa_core_rail0_fails_over(const efa_core_t *core);
/* Such a receive failed (err) on NIC 0 for 'who' (a component): said once
 * per process, naming the NIC. */
void efa_core_rail0_flushed(efa_core_t *core, const char *who, int err);
/* Contexts of NIC 0, the rail of every message but own matching's. */
efa_ctx_t *efa_core_ctx(efa_core_t *core, int index);
/* Context 'index' of rail 'rail' (0 <= rail < info.num_nics): the other
 * rails carry striped transfers and own matching's messages to some peers. */
efa_ctx_t *efa_core_rail_ctx(efa_core_t *core, int rail, int index);
/* A context's NIC (rail) and its index among that NIC's contexts. */
int efa_ctx_rail(const efa_ctx_t *ctx);
int efa_ctx_index(const efa_ctx_t *ctx);

/* Drive every context's completion queue once; bounded work per call.
 * Returns the number of completions handled. */
int efa_core_progress(efa_core_t *core);

/* What Open MPI's progress loop calls: efa_core_progress when the
 * provider can have something for this process, else nothing (a few
 * nanoseconds instead of a provider poll, which costs 0.3 to 0.5 us on
 * tcp;ofi_rxm and udp;ofi_rxd and is what on-node latency would pay).
 * The provider is polled on every call while an operation posted through
 * the core is in flight (a receive a remote peer can match, a send, a
 * one-sided operation), while a backlog waits, while a component holds an
 * interest (efa_core_net_interest), for a millisecond after a poll that
 * found completions, and from a ring of the doorbell (efa_core_set_doorbell)
 * on; otherwise at an interval that starts at net_poll_interval_us and
 * doubles with each poll that finds nothing, up to
 * net_poll_interval_max_us. */
int efa_core_progress_paced(efa_core_t *core);

/* A standing reason to poll the provider on every progress call, whatever
 * is in flight: btl_efa holds one per peer that reaches it through the
 * provider only (its messages arrive unannounced in the receive pool). */
void efa_core_net_interest(efa_core_t *core, int delta);

/* The word that processes of this node set after sending this one
 * something by the provider (efa_shm_outbox_wake: the process's inbox
 * holds it, efa_node_doorbell): the paced check then polls on every call
 * until a poll finds a completion (a second at most), then for the
 * millisecond after it.  NULL: none.  Set by the component that opens the
 * inbox's channel, and cleared by it before the node goes. */
void efa_core_set_doorbell(efa_core_t *core, uint32_t *bell);
/* The paced check's wait now, in microseconds (the report, tests). */
uint64_t efa_core_net_wait_us(const efa_core_t *core);
/* Milliseconds this process has spent away from progress so far (gaps
 * between calls beyond a grace of 2 s: compute phases), which no timeout
 * of an answer should count: the peer deadline leaves them out, and so
 * must a component's own timeouts.  Counted while the peer deadline is on. */
uint64_t efa_core_away_ms(const efa_core_t *core);

/* Tagged messaging.  All of them retry -FI_EAGAIN internally (driving
 * progress meanwhile): a full queue delays, it never drops. */
int efa_ctx_tsend(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                  uint64_t tag, uint64_t data, efa_op_t *op);
int efa_ctx_tinject(efa_ctx_t *ctx, const void *buf, size_t len, fi_addr_t dest, uint64_t tag,
                    uint64_t data);
int efa_ctx_trecv(efa_ctx_t *ctx, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
                  uint64_t ignore, efa_op_t *op);
/* Peek for an unexpected message; with claim the message is reserved for a
 * later efa_ctx_trecv_claimed() with the same op.  Completes through op
 * with err == -FI_ENOMSG when nothing matched. */
int efa_ctx_tpeek(efa_ctx_t *ctx, fi_addr_t src, uint64_t tag, uint64_t ignore, bool claim,
                  efa_op_t *op);
int efa_ctx_trecv_claimed(efa_ctx_t *ctx, void *buf, size_t len, void *desc, uint64_t tag,
                          uint64_t ignore, efa_op_t *op);
/* Cancel a posted receive; its op completes with -FI_ECANCELED if it was
 * still unmatched.  Returns 0 when the request was found. */
int efa_ctx_cancel(efa_ctx_t *ctx, efa_op_t *op);

/* One-sided operations, when the provider granted FI_RMA (and FI_ATOMIC
 * for the atomics).  They are posted like the tagged sends: a full
 * provider queue defers the post to the context's transmit backlog, which
 * progress posts in order; nothing is dropped or spun on.  'raddr' is what
 * the provider expects (virtual address or MR offset: efa_rma_remote_addr
 * in efa_rma.h), 'rkey' the key of the target's MR; desc arguments are the
 * local MRs' descriptors (NULL unless info.mr_local).  Writes and
 * non-fetching atomics ask for FI_DELIVERY_COMPLETE, so their completion
 * means the target's memory has been updated: osc/rdma's flush and ob1's
 * FIN after a put rely on exactly that.  op completes through progress. */
int efa_ctx_write(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                  uint64_t raddr, uint64_t rkey, efa_op_t *op);
int efa_ctx_read(efa_ctx_t *ctx, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t raddr,
                 uint64_t rkey, efa_op_t *op);
/* One element of type dt; operand, compare and result are that size. */
int efa_ctx_atomic(efa_ctx_t *ctx, enum fi_op aop, enum fi_datatype dt, const void *operand,
                   void *desc, fi_addr_t dest, uint64_t raddr, uint64_t rkey, efa_op_t *op);
int efa_ctx_fetch_atomic(efa_ctx_t *ctx, enum fi_op aop, enum fi_datatype dt, const void *operand,
                         void *desc, void *result, void *result_desc, fi_addr_t dest,
                         uint64_t raddr, uint64_t rkey, efa_op_t *op);
int efa_ctx_compare_atomic(efa_ctx_t *ctx, enum fi_datatype dt, const void *swap, void *desc,
                           const void *compare, void *compare_desc, void *result, void *result_desc,
                           fi_addr_t dest, uint64_t raddr, uint64_t rkey, efa_op_t *op);
/* Does the provider do this atomic (kind: EFA_RMA_ATOMIC_* of efa_rma.h)?
 * 0 when it does, else a negative libfabric error (-FI_EOPNOTSUPP, ...). */
int efa_core_query_atomic(efa_core_t *core, enum fi_datatype dt, enum fi_op aop, int kind);
/* Can btl_efa hand its atomics to this provider: FI_ATOMIC granted, no
 * known defect, and every operation and type osc/rdma asks for offered?
 * When not, *why (why_len bytes) says which fails. */
bool efa_core_atomics_usable(efa_core_t *core, char *why, size_t why_len);
/* mtl_efa_matching auto: which matching, and why. */
typedef enum {
    EFA_AUTO_MATCH_PROVIDER, /* the provider's: nothing measured pays more on it */
    EFA_AUTO_MATCH_MEASURED, /* own: measured to pay on this provider (docs/PERFORMANCE.md,
                                "Own matching in mtl_efa") */
    EFA_AUTO_MATCH_RAILS,    /* own: the node offers several rails, over which own matching
                                spreads messages and fails over, where the provider's tagged
                                messages stay on the first NIC */
    EFA_AUTO_MATCH_NO_TAGS   /* own: the provider has no tags */
} efa_auto_match_t;
/* From facts every process of a job on nodes of one kind sees alike: the
 * provider, whether it grants tags, and node_rails (efa_core_info_t). */
efa_auto_match_t efa_core_auto_matching(const char *provider, bool has_tagged, int node_rails);
/* Would the first NIC's provider grant FI_HMEM (efa-mpi-info)? */
bool efa_core_offers_hmem(const efa_core_t *core);

#ifdef __cplusplus
}
#endif

/* Memory registration. */
#include "efa_mr.h"

#endif /* EFA_CORE_H */
