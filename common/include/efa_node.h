/*
 * The on-node stack of one process (node.hpp has the design): one inbox
 * file, channels (EFA_NODE_CHANNEL_*) demultiplexed by ring range, one card
 * to publish.  Refcounted per process: the first user creates it, the last
 * one's release unlinks the file.
 *
 * Same conventions as efa_core.h: 0 or a negative error (errno values).
 */
#ifndef EFA_NODE_H
#define EFA_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "efa_shm_ring.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The channels of the inbox, each a block of nlocal rings. */
enum {
    EFA_NODE_CHANNEL_ENGINE = 0, /* mtl_efa's matching engine */
    EFA_NODE_CHANNEL_BTL = 1,    /* btl_efa's rings */
    EFA_NODE_CHANNELS = 2
};

typedef struct efa_node efa_node_t;

typedef struct efa_node_params {
    const char *dir;     /* where the inbox files live */
    const char *job_tag; /* unique per job and user: part of the file names */
    uint32_t my_vpid;
    uint32_t local_rank; /* my ring in every channel of every inbox of the node */
    uint32_t nlocal;     /* processes of the job on this node */
    uint32_t slots;      /* per ring, a power of two */
    uint32_t slot_size;  /* bytes, multiple of 64 */
    bool one_thread;     /* only one thread calls in (below MPI_THREAD_MULTIPLE) */
} efa_node_params_t;

/* What a process publishes (one modex entry): the cookie of its inbox, its
 * local rank, and a bit (1 << channel) for each channel it serves; its pid
 * and the address and value of its single-copy cookie (efa_cma.h), which
 * a reader checks before it trusts that pid. */
typedef struct efa_node_card {
    uint64_t cookie;
    uint32_t local_rank;
    uint32_t channels;
    uint64_t cma_cookie_addr, cma_cookie;
    uint32_t pid;
    /* The inbox's descriptor in that process, plus 1 (0: none): reaches
     * the inbox when its name does not (removed by someone else). */
    uint32_t inbox_fd;
} efa_node_card_t;

/* The process's node, created by the first call (*created true) with p;
 * later calls take a reference to it (p must describe the same file).
 * NULL and *err on failure (efa_shm_strerror says what). */
efa_node_t *efa_node_acquire(const efa_node_params_t *p, bool *created, int *err);
/* Drop a reference; the last unlinks the inbox. */
void efa_node_release(efa_node_t *n);
/* The file of the inbox of process vpid of these parameters (messages). */
void efa_node_file(const efa_node_params_t *p, uint32_t vpid, char *buf, size_t len);
const char *efa_node_path(const efa_node_t *n);
/* The inbox file of process vpid of this node's job (for messages). */
void efa_node_peer_file(const efa_node_t *n, uint32_t vpid, char *buf, size_t len);
void efa_node_my_card(const efa_node_t *n, efa_node_card_t *out);
/* Serve channel c from now on (set its card bit: publish the card again);
 * reserve: every ring of the channel reserved now.  0 or -ENOSPC. */
int efa_node_open_channel(efa_node_t *n, unsigned channel, bool reserve);
void efa_node_close_channel(efa_node_t *n, unsigned channel);
/* Largest frame a ring slot carries. */
size_t efa_node_max_frame(const efa_node_t *n);
/* Corrupted frames dropped (any channel). */
uint64_t efa_node_dropped(const efa_node_t *n);
/* The inbox's poll state, and channel c's block of rings in it, for a
 * component that polls with efa_ring_consume (efa_ring_inline.h) on its
 * own hot path (ring: the sender's local rank): valid until the node is
 * released. */
/* The inbox's doorbell, which this node's senders ring after sending this
 * process something by the provider (efa_shm_outbox_wake), for
 * efa_core_set_doorbell: valid until the node is released. */
uint32_t *efa_node_doorbell(efa_node_t *n);
struct efa_ring_consumer;
struct efa_ring_consumer *efa_node_consumer(efa_node_t *n, unsigned channel, uint32_t *first,
                                            uint32_t *count);
/* Attach to this process's ring of 'channel' in the inbox of process vpid,
 * which published 'card': NULL and *err (-ENOENT: it serves no such
 * channel; else efa_shm_outbox_attach's errors). */
efa_shm_outbox_t *efa_node_attach(const efa_node_t *n, uint32_t vpid, const efa_node_card_t *card,
                                  unsigned channel, int *err);
/* The sender of ring 'ring' of this process's inbox (an index of the
 * whole inbox: a channel's first, from efa_node_consumer, plus the
 * sender's local rank): EFA_NODE_SENDER_NONE (it never attached, or no
 * such ring), _ATTACHED (it attached and has not left: still there, or
 * dead), _LEFT (it let go of the ring in order: its finalize, its
 * process closing the node stack; a re-attach makes it _ATTACHED again).
 * The mark is stored (release) before the sender's process can exit and
 * read here with acquire: read after seeing that process exit, _LEFT
 * tells an orderly end from a death. */
enum { EFA_NODE_SENDER_NONE = 0, EFA_NODE_SENDER_ATTACHED = 1, EFA_NODE_SENDER_LEFT = 2 };
int efa_node_ring_sender(const efa_node_t *n, uint32_t ring);
/* The sender of ring 'ring' attached and has not left. */
bool efa_node_ring_sender_present(const efa_node_t *n, uint32_t ring);
/* Attaches (of any channel) that reached a peer's inbox through its
 * owner's descriptor, its name being gone or another file's. */
uint32_t efa_node_by_descriptor(const efa_node_t *n);

#ifdef __cplusplus
}
#endif
#endif /* EFA_NODE_H */
