/*
 * Flow control of untagged messages between two processes: the credits
 * and the send queues of the message channel (common/core/msg_flow.cpp).
 * btl_efa's active messages and one-sided requests use it.
 *
 * Every message but a credit message takes one of the sender's credits for
 * its peer (window of them at the start).  The receiver counts what it
 * handled (owed) and returns it, piggybacked on its next message to the
 * sender (efa_flow_give, then efa_flow_gave once it went) or, once
 * threshold are owed, in a credit message of its own, which takes no
 * credit: credits always flow back.  A send that cannot go (no credit, the
 * provider's queue full) joins its peer's queue; a peer with a queue or a
 * credit message due is on the flow's waiting list, which the owner's
 * progress drains (efa_flow_drain) in order.
 *
 * No lock is taken here: the owner holds its own around every call.  The
 * queue runs through a pointer field of the owner's struct (link_off), as
 * the pool's free list does (efa_pool.h).
 */
#ifndef EFA_MSG_FLOW_H
#define EFA_MSG_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One peer's side of the flow, kept in the owner's endpoint. */
typedef struct efa_flow_peer {
    int32_t credits; /* messages this process may still send to the peer */
    int32_t owed;    /* messages handled from the peer, not yet credited back */
    bool credit_due; /* owed reached the threshold: a credit message is due */
    bool waiting;    /* on the flow's waiting list */
    void *head;      /* sends waiting, in order */
    void *tail;
    struct efa_flow_peer *next_waiting;
} efa_flow_peer_t;

typedef struct efa_flow {
    efa_flow_peer_t *waiting_head, *waiting_tail;
    volatile int32_t num_waiting; /* peers on that list (may be read without the lock) */
    int32_t window;               /* credits per peer */
    int32_t threshold;            /* owed credits that warrant a credit message */
    size_t link_off;              /* offsetof the queued struct's next pointer */
} efa_flow_t;

/* window below 1 is taken as 1; the threshold is half the window (at
 * least 1). */
void efa_flow_init(efa_flow_t *f, int32_t window, size_t link_off);
void efa_flow_peer_init(const efa_flow_t *f, efa_flow_peer_t *p);

static inline void **efa_flow_link_(const efa_flow_t *f, void *item) {
    return (void **)((char *)item + f->link_off);
}
/* The item queued after this one (NULL: the last). */
static inline void *efa_flow_next(const efa_flow_t *f, void *item) {
    return *efa_flow_link_(f, item);
}

/* The credits to piggyback on the next message to the peer (a header
 * carries 16 bits of them). */
static inline uint16_t efa_flow_give(const efa_flow_peer_t *p) {
    return (uint16_t)(p->owed > UINT16_MAX ? UINT16_MAX : p->owed);
}
/* A message that carried 'given' credits went; took_credit unless it was
 * a credit message or took a path without credits. */
static inline void efa_flow_sent(const efa_flow_t *f, efa_flow_peer_t *p, uint16_t given,
                                 bool took_credit) {
    p->owed -= given;
    if (p->owed < f->threshold) {
        p->credit_due = false;
    }
    if (took_credit) {
        --p->credits;
    }
}

/* A message that carried 'given' credits (and took one, took_credit)
 * failed while its peer lives: the peer got neither, so both come back
 * (else the credits a failed send carried were lost for good, and so
 * the peer's sends could wait for ever).  Puts the peer on the waiting
 * list where a credit message becomes due or sends wait. */
void efa_flow_unsent(efa_flow_t *f, efa_flow_peer_t *p, uint16_t given, bool took_credit);

/* A message from the peer arrived: take the credits it returns and, when
 * it counts (it took a credit), count it towards what this process owes.
 * Puts the peer on the waiting list when a credit message becomes due. */
void efa_flow_received(efa_flow_t *f, efa_flow_peer_t *p, uint16_t returned, bool counts);

/* Queue a send behind the peer's others and put the peer on the waiting
 * list. */
void efa_flow_enqueue(efa_flow_t *f, efa_flow_peer_t *p, void *item);
/* Take the queue's head (NULL when empty), its link cleared; the peer
 * stays on the waiting list. */
void *efa_flow_pop(efa_flow_t *f, efa_flow_peer_t *p);
/* Put an item taken by efa_flow_pop back at the head (it could not go). */
void efa_flow_push_front(efa_flow_t *f, efa_flow_peer_t *p, void *item);
/* The queue's head up to 'last' (included) went: they leave the queue,
 * and last's link is cleared. */
void efa_flow_dequeue_through(efa_flow_t *f, efa_flow_peer_t *p, void *last);
/* Put the items first..last (chained, last's link clear) that
 * efa_flow_dequeue_through took back at the head (they could not go). */
void efa_flow_requeue_front(efa_flow_t *f, efa_flow_peer_t *p, void *first, void *last);

/* Drain the waiting list in order: drain_peer posts what it can of one
 * peer's queue and its due credit message, and returns false when the
 * provider's queue is full (the drain stops there).  A peer left with
 * nothing queued and no credit message due leaves the list.  Returns the
 * peers still waiting. */
int32_t efa_flow_drain(efa_flow_t *f, bool (*drain_peer)(void *arg, efa_flow_peer_t *p), void *arg);

/* A credit message is due to the peer and something is owed. */
static inline bool efa_flow_credit_due(const efa_flow_peer_t *p) {
    return p->credit_due && p->owed > 0;
}
/* The credit message went (or nothing was owed after all). */
static inline void efa_flow_credit_settled(efa_flow_peer_t *p) {
    p->credit_due = false;
}

#ifdef __cplusplus
}
#endif
#endif
