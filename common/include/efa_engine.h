/*
 * The matching engine of the shared core (mtl_efa's engine path):
 * MPI-style tagged messages with matching of its own, over the
 * shared-memory rings of efa_shm_ring.h to processes of this node and,
 * under own matching, over the provider to the other nodes (the net link).
 * common/engine/engine.hpp has the design.
 *
 * The caller speaks in envelopes (communicator id, source rank, tag) and
 * buffers; it embeds an efa_engine_req_t in each of its requests.  A
 * receive or a send that does not finish inside the call finishes later
 * from efa_engine_progress(), which calls req->complete once.
 *
 * Same conventions as efa_core.h: 0 or a negative libfabric error code.
 */
#ifndef EFA_ENGINE_H
#define EFA_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "efa_core.h"
#include "efa_node.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A wildcard source or tag in a receive or probe. */
#define EFA_ENGINE_ANY (-1)

typedef struct efa_engine efa_engine_t;

typedef struct efa_engine_link {
    struct efa_engine_link *prev, *next;
} efa_engine_link_t;

typedef struct efa_engine_req efa_engine_req_t;
typedef void (*efa_engine_complete_fn)(efa_engine_req_t *req);

struct efa_engine_req {
    /* Set by the caller. */
    efa_engine_complete_fn complete;
    void *buf;
    size_t buflen;
    /* Device memory (efa_device.h), of a receive: device_buf (NULL: none)
     * is a device buffer of buflen bytes.  Bytes land in buf, except those
     * of this node's device messages copied by the device's IPC, which land
     * in device_buf directly; a read from another node, and a message
     * streamed as DATA frames, are copied on to it piece by piece
     * (net_device_piece).  device_landed (the caller clears it before
     * posting): device_buf holds the whole message, buf not.
     * device_by_provider (read only with a device_buf): the provider
     * takes device_buf (FI_HMEM): a read
     * from another node goes straight into it, registered
     * (efa_core_mr_acquire_device, FI_READ), where that registration
     * works; its bytes never pass through buf. */
    void *device_buf;
    bool device_landed;
    bool device_by_provider;
    bool device; /* the engine's: a send from device memory (efa_engine_send_device*) */
    /* Set when a receive completes: the message's envelope and full
     * length, and 0, -FI_ETRUNC (len > buflen: buflen bytes were stored)
     * or -FI_ECANCELED. */
    int32_t msg_src;
    int32_t msg_tag;
    size_t msg_len;
    int err;
    /* Set by the caller of efa_engine_recv_partnered. */
    efa_engine_complete_fn partner_cancel;
    /* The engine's own. */
    efa_engine_link_t link;
    uint32_t cid;
    int32_t src, tag;
    uint32_t peer;      /* the other side's vpid */
    uint8_t state;      /* engine's state machine */
    uint8_t flags;      /* engine's flags */
    uint64_t remote;    /* the peer's id for this message */
    uint64_t local_id;  /* this side's id for it in the peer's answers (0: none) */
    uint64_t seq;       /* send: its number among this side's messages to peer (0: not written) */
    size_t done;        /* bytes moved so far (streamed transfers) */
    size_t device_done; /* ... of them copied on to device_buf (SIZE_MAX: a copy failed) */
    void *net_mr;       /* send: the registration a receiver on another node reads */
    uint64_t ipc_held; /* device send: what its export holds for the peer (efa_device_ipc_t.held) */
    /* A device send streamed as DATA frames: the host buffer its bytes are
     * copied into a piece (net_device_piece) at a time as the frames reach
     * them; device_done is then the end of the bytes copied so far. */
    void *stage;
};

/* What each process publishes to the processes of its node (the modex):
 * its inbox's cookie, which a sender checks before writing into the file
 * of that name, and its local rank, the ring its frames come in by; its
 * pid and where its single-copy cookie is (efa_cma.h), the only process a
 * receiver reads its large messages from, checked once by that cookie
 * (pid 0: none, no single copy from it). */
typedef struct efa_engine_card {
    uint64_t cookie;
    uint32_t local_rank;
    uint32_t pid;
    uint64_t cma_cookie_addr, cma_cookie;
    uint32_t inbox_fd; /* efa_node_card_t.inbox_fd: 0 or the descriptor + 1 */
    uint32_t pad;
} efa_engine_card_t;
/* The card process vpid published: 0, -FI_ENOENT when it published none
 * (another node, or no inbox: then it is reached through the provider if
 * the engine has the core), or another negative error. */
typedef int (*efa_engine_card_fn)(void *arg, uint32_t vpid, efa_engine_card_t *card);
/* How process vpid is reached through the provider: its address and the
 * context to send by.  0 or a negative error. */
typedef int (*efa_engine_addr_fn)(void *arg, uint32_t vpid, fi_addr_t *addr, efa_ctx_t **ctx);
/* Process vpid's addresses on every rail (efa_peer_t), for reads striped
 * over the NICs; NULL when not known. */
typedef const efa_peer_t *(*efa_engine_rails_fn)(void *arg, uint32_t vpid);
/* The process that source 'src' of communicator 'cid' is, or
 * EFA_ENGINE_NO_VPID when that is not known. */
#define EFA_ENGINE_NO_VPID UINT32_MAX
typedef uint32_t (*efa_engine_vpid_fn)(void *arg, uint32_t cid, int32_t src);
/* The processes an MPI_ANY_SOURCE receive of communicator 'cid' may hear
 * from (its remote group for an inter-communicator): their number, 0 when
 * cid is not known; the first min(number, max) are written to vpids, by
 * rank (EFA_ENGINE_NO_VPID for a process of another job). */
typedef size_t (*efa_engine_members_fn)(void *arg, uint32_t cid, uint32_t *vpids, size_t max);
/* A message from another node was lost by the provider (why says how):
 * MPI's order and data cannot be kept any more; the MTL ends the job. */
typedef void (*efa_engine_lost_fn)(void *arg, const char *why);
/* Process vpid of this node died while a request here waited on it (its
 * exit seen through a pidfd, never guessed: efa_cma_exit_watch): what
 * waited on it has failed, as for a lost peer on another node; the owner
 * declares it lost (efa_core_peer_lost, EFA_CMA_EXITED_WHY).  Called once
 * per process, from progress, the engine's lock not held. */
typedef void (*efa_engine_exited_fn)(void *arg, uint32_t vpid);

typedef struct efa_engine_params {
    /* The process's shared on-node stack (efa_node.h): the engine serves
     * its channel 'channel' (rings channel * nlocal + local rank of every
     * inbox), which it opens (reserving its rings) and closes; the node's
     * geometry replaces slots and slot_size, its files inbox_dir's.  NULL:
     * the engine makes an inbox of its own in inbox_dir (tests). */
    efa_node_t *node;
    uint32_t channel;
    const char *inbox_dir; /* where inbox files live */
    const char *job_tag;   /* unique per job and user: part of the file names */
    uint32_t my_vpid;
    uint32_t local_rank;          /* my ring in every inbox of the node */
    uint32_t nlocal;              /* processes of the job on this node (rings per inbox) */
    uint32_t nprocs;              /* processes of the job: every vpid is below */
    uint32_t slots;               /* per ring, a power of two */
    uint32_t slot_size;           /* bytes, multiple of 64 */
    bool single_copy;             /* allow reading large messages by process_vm_readv */
    bool thread_safe;             /* several threads call in at once */
    efa_engine_card_fn peer_card; /* looks a peer's card up, once per peer */
    void *peer_card_arg;
    /* Peers without a card (other nodes): through the provider's untagged
     * messages (net_link.hpp), when core is set; else unreachable. */
    efa_core_t *core;
    bool no_rings;                  /* no inbox: every peer through the provider */
    efa_engine_addr_fn peer_addr;   /* with core: a peer's address, once per peer */
    efa_engine_rails_fn peer_rails; /* with core: its rails (NULL: reads on the first NIC) */
    efa_engine_lost_fn lost; /* with core: called once a message is lost (NULL: the peer fails) */
    /* With core or peer_exited: which process a posted receive's source
     * is (asked about once a second per receive for one source, never per
     * message), so that a peer a receive waits on is watched and the
     * receive fails when that peer is lost.  NULL: such receives are not
     * watched. */
    efa_engine_vpid_fn source_vpid;
    /* With core or peer_exited: the processes of a communicator (asked
     * about once a second per communicator with an MPI_ANY_SOURCE receive
     * posted that long, and when a peer is lost), so that such a receive
     * watches the peers it may hear from and fails when one of them is
     * lost (ULFM's rule).  NULL: such receives are neither watched nor
     * failed. */
    efa_engine_members_fn comm_members;
    /* With rings: watch the processes of this node that requests wait on
     * (engine_watch.cpp), and call this for each one that died.  NULL:
     * they are not watched (the owner leaves it so with the peer deadline
     * off: nothing is declared lost then). */
    efa_engine_exited_fn peer_exited;
    size_t net_eager; /* larger messages to other nodes go by rendezvous */
    /* Rendezvous messages to other nodes of at least this many bytes are
     * offered to the receiver for an RMA read of the sender's buffer, where
     * the provider has FI_RMA (0: never; they stream as DATA frames). */
    size_t net_read_min;
    /* ... and one read into a receive in device memory goes in pieces of at
     * most this many bytes, each copied to the device once in; a message
     * streamed into one as DATA frames (from any peer, the rings' too) is
     * copied on a piece at a time as its frames come in (0: the owner
     * copies the whole message after; engine_read.cpp, engine_device.cpp);
     * a device send streamed through the rings is copied to the host a
     * piece at a time as its frames go (0: whole, before the first). */
    size_t net_device_piece;
    uint32_t net_window;            /* provider messages in flight per peer before packing */
    uint32_t net_small_window;      /* ... before a frame that can be packed is (0: 4) */
    size_t net_coalesce_bytes;      /* a provider message packs frames up to this (0: one each) */
    uint32_t net_coalesce_max;      /* ... and at most this many */
    bool net_debug_swap;            /* test hook: hand provider messages on in swapped pairs */
    uint32_t net_debug_lose;        /* test hook: the Nth provider message to arrive is lost */
    uint32_t net_debug_delay;       /* test hook: ... handed on late (after many progress calls) */
    uint32_t net_debug_flush_first; /* test hook: before the Nth to arrive on NIC 0, a receive
                                       there fails carrying nothing (a NIC's flush) */
    bool net_debug_flush_lost;      /* test hook: ... the failed receive held the Nth (lost) */
    bool net_no_inject;             /* every provider message posted with a completion (tests) */
    size_t net_debug_read_piece;    /* tests: reads in pieces of at most this (0: the provider's) */
    bool net_debug_fail_reads;      /* tests: every read is taken as one the provider failed */
    uint32_t net_debug_first_rail;  /* tests: the NIC whose turn it is for the first peer */
    uint32_t net_debug_fail_rail_send; /* tests: the Nth completed send on a rail beside the
                                          first is taken as failed (0: none) */
} efa_engine_params_t;

/* Create the engine (and its inbox, without a node).  NULL and *err on
 * failure. */
efa_engine_t *efa_engine_create(const efa_engine_params_t *p, int *err);
/* Flush control messages still queued (bounded wait), unlink the inbox and
 * free everything.  Requests still pending are abandoned. */
void efa_engine_destroy(efa_engine_t *e);
/* The inbox file (for the runtime's cleanup list). */
const char *efa_engine_inbox_path(const efa_engine_t *e);
/* The inbox file the engine of these parameters uses (for messages). */
void efa_engine_inbox_file(const efa_engine_params_t *p, char *buf, size_t len);
/* This process's card, to publish before any peer sends. */
void efa_engine_my_card(const efa_engine_t *e, efa_engine_card_t *out);

/* Send len bytes from buf to process 'peer' (vpid) as (cid, src, tag).
 * Returns 1 when the send is already complete (buf reusable, no callback
 * follows), 0 when req->complete will be called, or a negative error.
 * sync: complete only once the receiver has matched the message. */
int efa_engine_send(efa_engine_t *e, uint32_t peer, uint32_t cid, int32_t src, int32_t tag,
                    const void *buf, size_t len, bool sync, efa_engine_req_t *req);
/* The same from device memory (efa_device.h), to a process of this node
 * only, by slots its RTS fits (-FI_EOPNOTSUPP otherwise; mtl_efa gives it
 * messages of efa_engine_node_device_min or more): a rendezvous whatever its size, whose
 * bytes the receiver copies with the device's copy after importing the
 * buffer's IPC handle, or that streams through the rings, read with the
 * device's copy, where it cannot (engine.hpp). */
int efa_engine_send_device(efa_engine_t *e, uint32_t peer, uint32_t cid, int32_t src, int32_t tag,
                           const void *buf, size_t len, bool sync, efa_engine_req_t *req);
/* The same to a process on another node (-FI_EOPNOTSUPP otherwise), whose
 * device buffer mr registers (efa_core_mr_acquire_device, FI_REMOTE_READ):
 * a rendezvous whose RTS offers the receiver a read of that registration
 * (its keys on every NIC it is registered on), or that
 * streams DATA frames, read with the device's copy, where the receiver
 * cannot read.  Accepted (0 or 1), mr is the engine's, released when the
 * send ends; refused (negative), still the caller's. */
int efa_engine_send_device_read(efa_engine_t *e, uint32_t peer, uint32_t cid, int32_t src,
                                int32_t tag, const void *buf, size_t len, bool sync, efa_mr_t *mr,
                                efa_engine_req_t *req);

/* Post a receive into req->buf/buflen matching (cid, src, tag); src and
 * tag may be EFA_ENGINE_ANY (a wildcard tag never matches a negative tag).
 * Returns 1 when it completed inside the call (req->complete is NOT
 * called), 0 when req->complete follows, or a negative error. */
int efa_engine_recv(efa_engine_t *e, uint32_t cid, int32_t src, int32_t tag, efa_engine_req_t *req);
/* The same for a receive that only processes of this node can match (its
 * source is on this node, or it takes any source of a communicator with no
 * process elsewhere).  The caller vouches for that: while only such
 * receives wait, the engine leaves the provider to the core's paced poll
 * (efa_core_progress_paced), which an on-node round trip would otherwise
 * pay on every progress call. */
int efa_engine_recv_local(efa_engine_t *e, uint32_t cid, int32_t src, int32_t tag,
                          efa_engine_req_t *req);

/* A receive posted here and elsewhere too (the provider, for
 * MPI_ANY_SOURCE in a communicator spanning nodes), so that only one of the
 * two may take a message.  Returns 1 (a waiting message was taken, complete
 * now), 2 (a waiting message was taken, req->complete follows) or 0 (posted:
 * the caller now posts the other half).  When a message later matches a
 * posted partnered receive, the engine does not deliver it: it holds it,
 * reads no further frames (that keeps MPI's order), and calls
 * req->partner_cancel.  The caller then reports with efa_engine_partner_done
 * how the other half ended. */
#define EFA_ENGINE_MATCHED_LATER 2
int efa_engine_recv_partnered(efa_engine_t *e, uint32_t cid, int32_t src, int32_t tag,
                              efa_engine_req_t *req);
/* The other half is posted now: only from here on may the engine call
 * req->partner_cancel (with threads, a message can match the engine's half
 * before the other half exists; it is held until then). */
void efa_engine_partner_armed(efa_engine_t *e, efa_engine_req_t *req);
/* The other half of a partnered receive ended: 'matched' (it took a
 * message: the engine forgets req, and a message it held for req goes back
 * to matching as if it had just arrived) or cancelled (a message held for
 * req is delivered to it: returns 1 and req->complete follows; with none
 * held, the engine forgets req and returns 0). */
int efa_engine_partner_done(efa_engine_t *e, efa_engine_req_t *req, bool matched);

/* What a probe found. */
typedef struct efa_engine_probe {
    int32_t src, tag;
    size_t len;
    void *msg; /* with claim: the message, for efa_engine_mrecv */
} efa_engine_probe_t;

/* Look for a waiting message matching (cid, src, tag): 1 found (*out
 * filled), 0 none.  claim: remove it, so only efa_engine_mrecv gets it.
 * A negative error: none, and the peer on another node it waits on (with
 * EFA_ENGINE_ANY, a member of the communicator) was lost; a blocking
 * probe calls again until it finds one, and the engine watches what such
 * misses wait on as it watches posted receives. */
int efa_engine_probe(efa_engine_t *e, uint32_t cid, int32_t src, int32_t tag, bool claim,
                     efa_engine_probe_t *out);
/* Communicator cid was freed (its id may come back for another): what
 * the engine noted of it for probes is forgotten. */
void efa_engine_comm_freed(efa_engine_t *e, uint32_t cid);
/* Receive a claimed message into req->buf/buflen; returns like
 * efa_engine_recv. */
int efa_engine_mrecv(efa_engine_t *e, void *msg, efa_engine_req_t *req);

/* Cancel a receive that has not matched: true, and req->complete follows
 * with err -FI_ECANCELED; false when it matched already. */
bool efa_engine_cancel(efa_engine_t *e, efa_engine_req_t *req);

/* Cancel a send.  Only a message no receive can ever match is reported
 * cancelled: one still queued here, or one the receiver withdraws from its
 * unexpected messages on our request.
 * Not complete yet: returns 0, and req->complete follows in every case:
 * with err -FI_ECANCELED when the message can never be received, with 0
 * when the receiver had matched it (the send completes as it would have).
 * Complete already (a standard-mode eager send completes once written):
 * the receiver is asked all the same, and the answer is the caller's to
 * wait for, since no callback is left to tell it: returns -FI_EAGAIN while
 * it is awaited (make progress, then call again), then 1 when the receiver
 * withdrew the message (it is never received: the caller reports the send
 * cancelled) or 0 (it matched, or its peer was lost).  The receiver
 * answers from its progress, as it answers any message. */
int efa_engine_cancel_send(efa_engine_t *e, efa_engine_req_t *req);

/* Poll the inbox and push queued frames; returns events handled. */
int efa_engine_progress(efa_engine_t *e);

/* Counters, for verbose output and tests. */
typedef struct efa_engine_stats {
    uint64_t frames_sent, frames_received;
    uint64_t eager, rendezvous, single_copy, streamed, queued, unexpected;
    uint64_t dropped; /* corrupted frames (bad length, sender, request id or pid) */
    /* Other nodes: provider messages sent (and how many of them packed
     * several frames) and received, and received ones that came early and
     * waited for those before them; the local endpoints the peers on
     * other nodes are spread over. */
    uint64_t net_sent, net_batched, net_received, net_reordered, net_endpoints;
    uint64_t net_injected; /* of net_sent, those that went by inject (a lone small message) */
    uint64_t net_lost;     /* provider receives that failed: messages lost by the provider */
    /* Credit (net_link.hpp): grant messages sent alone (and received:
     * not in net_received, which counts the ordered stream), times a peer's
     * grant was used up with a message to send, and the most bytes ever
     * held for one sender's early messages. */
    uint64_t net_grants, net_grants_received, net_no_credit, net_held_bytes_max;
    /* Rendezvous messages from other nodes this process read by RMA, and
     * those whose read failed and that were streamed instead. */
    uint64_t net_read, net_read_failed;
    /* Several NICs: peers whose messages took a NIC beside the first, the
     * provider messages sent there, and those sent again over the first
     * NIC because theirs failed. */
    uint64_t net_rail_peers, net_rail_sent, net_failed_over;
    uint64_t net_duplicates;        /* copies of messages that had arrived (sent again), dropped */
    uint64_t net_rail_recv_failed;  /* receives that failed on a NIC, taken as its flush */
    uint64_t net_first_recv_failed; /* ... of them on the first NIC */
    /* Peers whose streamed data and reads take every NIC that reaches them
     * in turn, and the messages sent over a NIC beside the first so. */
    uint64_t net_turn_peers, net_turns;
    /* NICs a peer's messages took again once the core put them back after
     * a fault, and the provider messages sent over them since. */
    uint64_t net_taken_back, net_sent_back;
    /* Peers asked for one more numbered message after a receive failed as
     * its NIC flushed (a lost last message then shows as a gap), and asks
     * of peers answered so. */
    uint64_t net_asks, net_answers;
    /* Rendezvous messages in device memory: copied device to device by the
     * device's IPC, and those streamed through the rings instead (IPC
     * refused, or the receiver's copy failed); those to the process itself,
     * copied device to device without IPC. */
    uint64_t device_ipc, device_streamed, device_self;
    /* Reads from another node into device memory whose every piece was
     * copied to the device as it came in, and those pieces; reads straight
     * into the device buffer's registration (device_by_provider). */
    uint64_t device_read_landed, device_read_pieces, device_read_direct;
    /* Receives in device memory streamed as DATA frames (from this node
     * or another) whose every piece was copied to the device as its frames
     * came in, and those pieces. */
    uint64_t device_stream_landed, device_stream_pieces;
    /* Device sends streamed as DATA frames (IPC refused, or a receiver
     * on another node that could not read), copied to the host a piece at
     * a time as their frames went, and those pieces; device sends to
     * other nodes offered for reading from their registration. */
    uint64_t device_send_staged, device_send_pieces, device_send_read;
    /* Messages never received, dropped when their communicator was freed
     * (its id may name the next one). */
    uint64_t unreceived;
} efa_engine_stats_t;
void efa_engine_get_stats(const efa_engine_t *e, efa_engine_stats_t *out);
/* The eager and packing limits of messages to other nodes as they apply:
 * the provider's largest message caps what the parameters asked (0, 0
 * without the provider). */
void efa_engine_net_limits(const efa_engine_t *e, size_t *eager, size_t *coalesce);
/* The smallest device message to a process of this node that
 * efa_engine_send_device takes: one above the largest that goes eager
 * (copied into its frame, complete without its receive), so that a small
 * device message staged through the host never waits for its receive
 * where a host one would not; SIZE_MAX where the node's slots cannot hold
 * the RTS with the IPC handle (common_efa_onnode_slot_size set small). */
size_t efa_engine_node_device_min(const efa_engine_t *e);
/* stats.dropped alone (cheap enough for every progress call). */
uint64_t efa_engine_dropped(const efa_engine_t *e);

#ifdef __cplusplus
}
#endif
#endif /* EFA_ENGINE_H */
