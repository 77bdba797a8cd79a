/*
 * The on-node message channel's C interface (shm_ring.hpp has the design).
 *
 * A process creates one inbox: a shared-memory segment with one ring per
 * local rank of its job.  A sender attaches an outbox to its own ring (its
 * local rank) of a peer's inbox, by the inbox's file name, and posts
 * frames of at most efa_shm_outbox_max_frame() bytes; the owner polls its
 * inbox from progress and gets every frame in the order each sender posted
 * them.  Nothing waits: a full ring returns -FI_EAGAIN.
 *
 * Same conventions as efa_core.h: 0 or a negative error (libfabric's codes
 * are errno values: -FI_EAGAIN, -FI_ENOENT, ...).
 */
#ifndef EFA_SHM_RING_H
#define EFA_SHM_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct efa_shm_inbox efa_shm_inbox_t;
typedef struct efa_shm_outbox efa_shm_outbox_t;

/* The most slots a ring may have (and rings an inbox). */
#define EFA_SHM_RING_MAX_SLOTS 65536

/* Create the inbox file at path with nrings rings of nslots (a power of
 * two) slots of slot_size bytes (a multiple of 64, 8 of them the slot's
 * header).  A stale inbox of this user at path is replaced; anything else
 * there is refused (-FI_EEXIST) and left alone.  Senders reserve their
 * own ring's space when they attach.  NULL and *err on failure
 * (-FI_ENOSPC: the file system has no room). */
efa_shm_inbox_t *efa_shm_inbox_create(const char *path, unsigned nrings, unsigned nslots,
                                      size_t slot_size, int *err);
/* The random value senders must present to attach: publish it (modex). */
uint64_t efa_shm_inbox_cookie(const efa_shm_inbox_t *inbox);
/* Frames dropped because their length was corrupted. */
uint64_t efa_shm_inbox_dropped(const efa_shm_inbox_t *inbox);
/* Unlink the file and unmap it. */
void efa_shm_inbox_destroy(efa_shm_inbox_t *inbox);

/* Called for each frame: ring is the sender's index, the frame is valid
 * until the function returns. */
typedef void (*efa_shm_deliver_fn)(void *arg, unsigned ring, void *frame, size_t len);
/* Deliver up to budget waiting frames; returns how many.  Reentrant and
 * concurrent calls return 0 (only one poller at a time). */
int efa_shm_inbox_poll(efa_shm_inbox_t *inbox, efa_shm_deliver_fn fn, void *arg, int budget);
/* The same over rings [first, first + count) only (one channel of a shared
 * inbox, common/efa_node.h); fn is told the ring's index within the range.
 * A call while any other poll of the inbox runs returns 0. */
int efa_shm_inbox_poll_range(efa_shm_inbox_t *inbox, unsigned first, unsigned count,
                             efa_shm_deliver_fn fn, void *arg, int budget);

/* Attach to ring 'ring' of the inbox at path, which must be a regular file
 * of this user closed to others, holding 'cookie' (what its owner
 * published).  NULL and *err (-FI_ENOENT: no such inbox; -ELOOP, -EACCES:
 * not a file the owner created; -EKEYREJECTED: another inbox than the one
 * published; -FI_EPROTO: not a compatible inbox; -FI_ERANGE: no such ring;
 * -FI_ENOSPC: no room for the ring). */
efa_shm_outbox_t *efa_shm_outbox_attach(const char *path, unsigned ring, uint64_t cookie, int *err);
/* What an error of create or attach means, in words. */
const char *efa_shm_strerror(int err);
void efa_shm_outbox_detach(efa_shm_outbox_t *outbox);
size_t efa_shm_outbox_max_frame(const efa_shm_outbox_t *outbox);
/* Copy a frame into the ring: 0, -FI_EAGAIN (full) or -FI_EMSGSIZE. */
int efa_shm_outbox_send(efa_shm_outbox_t *outbox, const void *buf, size_t len);
/* Zero-copy: room for len bytes (NULL: full or too long), then commit the
 * bytes written.  Nothing else may use the outbox in between. */
void *efa_shm_outbox_reserve(efa_shm_outbox_t *outbox, size_t len);
void efa_shm_outbox_commit(efa_shm_outbox_t *outbox, size_t len);
/* Frames committed so far (a free-running count) and slots of the ring: a
 * frame committed when the count became c keeps its slot until the count
 * passes c - 1 + slots (the sender's next frame into that slot). */
uint64_t efa_shm_outbox_committed(const efa_shm_outbox_t *outbox);
unsigned efa_shm_outbox_slots(const efa_shm_outbox_t *outbox);
/* The outbox's sender state, for efa_ring_reserve and efa_ring_commit
 * (efa_ring_inline.h) on a component's own send path: valid until the
 * outbox is detached. */
struct efa_ring_producer;
struct efa_ring_producer *efa_shm_outbox_producer(efa_shm_outbox_t *outbox);
/* Tell the inbox's owner that something for it went by the network
 * provider (its paced provider poll then looks at once: efa_ring_wake). */
void efa_shm_outbox_wake(efa_shm_outbox_t *outbox);
/* The inbox's owner closed it (its process was done with the rings): one
 * whose process is gone was not lost then. */
bool efa_shm_outbox_owner_closed(const efa_shm_outbox_t *outbox);

#ifdef __cplusplus
}
#endif
#endif /* EFA_SHM_RING_H */
