/*
 * btl_efa's wire format, and the checks of every field of it that comes
 * from another process (a provider message or an on-node ring slot) before
 * the BTL acts on it.  Pure C without Open MPI's headers, so that the
 * fuzzer (tests/fuzz/fuzz_btl_wire.cpp) runs the very checks the BTL runs
 * (deliver_from in btl_efa_recv.c, the emulated one-sided target
 * and initiator in btl_efa_emul.c).
 * Peers of one job share the architecture (no byte swap).
 */
#ifndef EFA_BTL_WIRE_H
#define EFA_BTL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    EFA_BTL_MSG_AM = 1, /* two-sided fragment: hdr + payload */
    EFA_BTL_MSG_PUT,    /* rma + payload, answered by RESP */
    EFA_BTL_MSG_GET,    /* rma, answered by RESP + data */
    EFA_BTL_MSG_ATOMIC, /* rma (op, operands), answered by RESP (+ old value) */
    EFA_BTL_MSG_RESP,   /* rma.status, rma.operand: fetched value, + data for GET */
    EFA_BTL_MSG_CREDIT, /* hdr only: returns credits, takes none (tag: EFA_BTL_CREDIT_*) */
    EFA_BTL_MSG_BATCH,  /* hdr + several AM messages packed (efa_btl_wire_batch_next) */
    /* an answer without data through a ring, alone in its frame:
     * efa_btl_ring_resp_t (no efa_btl_hdr_t) */
    EFA_BTL_MSG_RING_RESP,
    /* a request in one line through a ring, alone in its frame:
     * efa_btl_ring_req_t (no efa_btl_hdr_t), an atomic, or a put or get of
     * up to EFA_BTL_RING_INLINE_MAX bytes */
    EFA_BTL_MSG_RING_ATOMIC,
    EFA_BTL_MSG_RING_PUT,
    EFA_BTL_MSG_RING_GET,
};

/* A CREDIT message's tag: plain credits; an ask for a numbered message
 * after a NIC's flush; the answer, through the provider, numbered
 * (btl_efa_spread_ask.c).  Its body, if any, is padding. */
enum { EFA_BTL_CREDIT_PLAIN = 0, EFA_BTL_CREDIT_ASK = 1, EFA_BTL_CREDIT_TELL = 2 };

/* An answer without data (to an atomic, a put, or a refusal), or with the
 * few bytes of a small get in operand, written into the initiator's
 * on-node ring: with the slot's own 8 bytes it fills less than one cache
 * line, where a header and an rma block take two (on a
 * machine whose cores pass cache lines slowly the second line of a ring
 * frame costs about 0.1 us each way).  The initiator takes it by its
 * length and type before any parse, as the RESP it stands for: its id is
 * looked up (a ring atomic's record, or the table of operations in
 * flight), never taken for an address. */
typedef struct efa_btl_ring_resp {
    uint8_t type; /* EFA_BTL_MSG_RING_RESP */
    uint8_t data; /* a get's bytes in operand (at most EFA_BTL_RING_INLINE_MAX; 0: none) */
    uint8_t pad[2];
    int32_t status;   /* OPAL status */
    uint64_t req;     /* the request's id */
    uint64_t operand; /* an atomic's fetched value, or a get's bytes */
    uint64_t offset;  /* as the request's */
    uint64_t len;     /* as the request's */
} efa_btl_ring_resp_t;

/* A request written into the target's on-node ring in one cache line
 * with the slot's 8 bytes, where a header and an rma block take two: an
 * atomic (btl_efa_ring_atomic.c), or a put or get of up to
 * EFA_BTL_RING_INLINE_MAX bytes (btl_efa_ring_rma.c).  It holds what the target's table reads
 * (efa_emul_execute: an atomic's extent comes from addr and flags) and the
 * claim word the initiator can take it back by.  Every one is exactly this
 * long: the target takes it by its length and type before any parse, and
 * executes it as the efa_btl_hdr_t and efa_btl_rma_t it stands for
 * (efa_btl_wire_ring_req_unpack). */
typedef struct efa_btl_ring_req {
    uint8_t type;      /* EFA_BTL_MSG_RING_ATOMIC, _PUT or _GET */
    uint8_t flags;     /* atomic: EFA_BTL_WIRE_ATOMIC_*; put, get: its length in bytes */
    uint16_t op;       /* atomic: as efa_btl_rma_t.op */
    uint32_t claim;    /* EFA_BTL_CLAIM_*: OPEN when written */
    uint64_t src;      /* the sender's opal_process_name_t */
    uint64_t req;      /* the initiator's id, echoed in the answer */
    uint64_t addr;     /* target address */
    uint64_t key;      /* target's registration key */
    uint64_t operand;  /* atomic: the operand; put: the bytes */
    uint64_t operand2; /* compare-and-swap: the new value */
} efa_btl_ring_req_t;

/* The most bytes a put in one line carries, and a get's answer in one
 * line (in operand). */
#define EFA_BTL_RING_INLINE_MAX 8u

/* Does an atomic of op and flags fit efa_btl_ring_atomic_t's fields? */
static inline bool efa_btl_wire_ring_atomic_fits(uint32_t op, uint32_t flags) {
    return op <= UINT16_MAX && flags <= UINT8_MAX;
}

/* Messages packed in a batch start at multiples of this many bytes of its
 * payload (the upper layer reads its headers in place). */
#define EFA_BTL_WIRE_BATCH_ALIGN 8u

/* The bytes a message of len bytes takes in a batch. */
static inline size_t efa_btl_wire_batch_span(size_t len) {
    return (len + EFA_BTL_WIRE_BATCH_ALIGN - 1) & ~(size_t)(EFA_BTL_WIRE_BATCH_ALIGN - 1);
}

typedef struct efa_btl_hdr {
    uint8_t type;
    uint8_t tag;      /* active-message tag (AM) */
    uint16_t credits; /* send credits returned to the receiver of this message */
    uint32_t len;     /* payload bytes after the headers */
    uint64_t src;     /* the sender's opal_process_name_t */
} efa_btl_hdr_t;

typedef struct efa_btl_rma {
    uint64_t req;      /* initiator's request, echoed in the response */
    uint64_t addr;     /* target address */
    uint64_t key;      /* target's registration key */
    uint64_t len;      /* bytes to put/get */
    uint64_t offset;   /* of this chunk within the request's local buffer */
    uint64_t operand;  /* atomics: operand; RESP: fetched value */
    uint64_t operand2; /* compare-and-swap: the new value */
    uint32_t op;       /* atomic op (mca_btl_base_atomic_op_t, 0x100: cswap) */
    int32_t status;    /* RESP: OPAL status */
    uint32_t flags;    /* atomics: MCA_BTL_ATOMIC_FLAG_32BIT */
    uint32_t claim;    /* a request in an on-node ring: EFA_BTL_CLAIM_* (else 0) */
} efa_btl_rma_t;

/* A put or get request written into a peer's on-node ring
 * (btl_efa_ring_rma.c) can be taken back until the target starts it: the
 * word goes from OPEN to TAKEN (the target, which then executes and
 * answers) or to CANCELLED (the initiator, which then does the operation
 * itself by single copy and the target drops the request), by one
 * compare-and-swap each in the shared slot, so exactly one side does it. */
enum {
    EFA_BTL_CLAIM_NONE = 0, /* not cancellable: the target executes it */
    EFA_BTL_CLAIM_OPEN,
    EFA_BTL_CLAIM_TAKEN,
    EFA_BTL_CLAIM_CANCELLED,
};

/* The claim word of the request at frame (a ring slot): where it is, and
 * the target's and the initiator's one compare-and-swap each. */
static inline uint32_t *efa_btl_wire_claim_word(void *frame) {
    return (uint32_t *)((uint8_t *)frame + sizeof(efa_btl_hdr_t) + offsetof(efa_btl_rma_t, claim));
}
static inline bool efa_btl_wire_claim_move(uint32_t *word, uint32_t to) {
    uint32_t open = EFA_BTL_CLAIM_OPEN;
    return __atomic_compare_exchange_n(word, &open, to, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

#define EFA_BTL_OP_CSWAP 0x100

/* Open MPI's atomic operations (mca_btl_base_atomic_op_t) as they travel
 * in efa_btl_rma_t.op, and its remote access flags (MCA_BTL_REG_FLAG_*) as
 * efa_rma_handle_t.access holds them: the core executes requests without
 * Open MPI's headers (btl_efa_emul.c checks that they are the
 * same). */
#define EFA_BTL_WIRE_OP_ADD 0x01u
#define EFA_BTL_WIRE_OP_AND 0x11u
#define EFA_BTL_WIRE_OP_OR 0x12u
#define EFA_BTL_WIRE_OP_XOR 0x14u
#define EFA_BTL_WIRE_OP_LAND 0x15u
#define EFA_BTL_WIRE_OP_LOR 0x16u
#define EFA_BTL_WIRE_OP_LXOR 0x17u
#define EFA_BTL_WIRE_OP_SWAP 0x1au
#define EFA_BTL_WIRE_OP_MIN 0x20u
#define EFA_BTL_WIRE_OP_MAX 0x21u
#define EFA_BTL_WIRE_OP_CSWAP EFA_BTL_OP_CSWAP
#define EFA_BTL_WIRE_ACCESS_REMOTE_READ 0x2u
#define EFA_BTL_WIRE_ACCESS_REMOTE_WRITE 0x4u
#define EFA_BTL_WIRE_ACCESS_REMOTE_ATOMIC 0x8u

/* Open MPI's MCA_BTL_ATOMIC_FLAG_32BIT and _FLOAT, as they travel in
 * efa_btl_rma_t.flags (btl_efa_emul.c checks that they are the
 * same). */
#define EFA_BTL_WIRE_ATOMIC_32BIT 0x1u
#define EFA_BTL_WIRE_ATOMIC_FLOAT 0x2u

/* The header and rma block a request in one line (a copy of the slot's
 * bytes) stands for, as the general target reads them (its claim is the
 * slot's word, taken there, not in the copy); a put's bytes are the
 * copy's operand.  false: a type of no such kind, or a put or get of none
 * or more bytes than operand holds (nothing in it is to be acted on). */
static inline bool efa_btl_wire_ring_req_unpack(const efa_btl_ring_req_t *q, efa_btl_hdr_t *hdr,
                                                efa_btl_rma_t *rma) {
    memset(hdr, 0, sizeof(*hdr));
    memset(rma, 0, sizeof(*rma));
    hdr->src = q->src;
    rma->req = q->req;
    rma->addr = q->addr;
    rma->key = q->key;
    rma->claim = q->claim;
    if (EFA_BTL_MSG_RING_PUT == q->type || EFA_BTL_MSG_RING_GET == q->type) {
        if (0 == q->flags || q->flags > EFA_BTL_RING_INLINE_MAX) {
            return false;
        }
        const bool put = EFA_BTL_MSG_RING_PUT == q->type;
        hdr->type = put ? EFA_BTL_MSG_PUT : EFA_BTL_MSG_GET;
        hdr->len = put ? q->flags : 0;
        rma->len = q->flags;
        return true;
    }
    if (EFA_BTL_MSG_RING_ATOMIC != q->type) {
        return false;
    }
    hdr->type = EFA_BTL_MSG_ATOMIC;
    rma->len = (q->flags & EFA_BTL_WIRE_ATOMIC_32BIT) ? 4 : 8;
    rma->operand = q->operand;
    rma->operand2 = q->operand2;
    rma->op = q->op;
    rma->flags = q->flags;
    return true;
}

/* What a received message is, once its lengths and type are checked. */
typedef enum {
    EFA_BTL_WIRE_SHORT,             /* shorter than a header: nothing in it is read */
    EFA_BTL_WIRE_CREDIT,            /* returns credits only */
    EFA_BTL_WIRE_AM,                /* a fragment for the upper layer */
    EFA_BTL_WIRE_AM_TRUNCATED,      /* its payload length runs past the message */
    EFA_BTL_WIRE_AM_BAD_TAG,        /* a tag outside the table of active-message callbacks */
    EFA_BTL_WIRE_SHORT_REQUEST,     /* one-sided kinds and unknown ones: no room for the rma */
    EFA_BTL_WIRE_TRUNCATED_REQUEST, /* its payload length runs past the message */
    EFA_BTL_WIRE_REQUEST,           /* put, get, atomic: executed by this process */
    EFA_BTL_WIRE_RESPONSE,          /* an answer to a request of this process */
    EFA_BTL_WIRE_UNKNOWN_TYPE,      /* a type of no version of this BTL */
    EFA_BTL_WIRE_BATCH,             /* several AM messages: payload holds them */
    EFA_BTL_WIRE_BATCH_TRUNCATED,   /* its payload length runs past the message */
    EFA_BTL_WIRE_BATCH_BAD_ENTRY,   /* (batch_next) an entry that is no whole AM message */
} efa_btl_wire_kind_t;

/* A message as parsed: copies of its headers (a ring slot is the sender's
 * memory too: a length checked must be the length used) and where its
 * payload lies in the buffer. */
typedef struct efa_btl_wire_msg {
    efa_btl_hdr_t hdr; /* all kinds but SHORT */
    efa_btl_rma_t rma; /* REQUEST, RESPONSE, TRUNCATED_REQUEST, UNKNOWN_TYPE (zero for the
                        * other kinds but AM, AM_* and BATCH*, where it is not written) */
    const uint8_t *payload;
    size_t payload_len; /* AM, REQUEST, RESPONSE: hdr.len bytes, inside the buffer */
} efa_btl_wire_msg_t;

/* What a message carrying an efa_btl_rma_t is, by its type alone: the
 * parser's last step, a table the fuzz harness's oracle shares. */
static inline efa_btl_wire_kind_t efa_btl_wire_request_kind(uint8_t type) {
    switch (type) {
    case EFA_BTL_MSG_PUT:
    case EFA_BTL_MSG_GET:
    case EFA_BTL_MSG_ATOMIC:
        return EFA_BTL_WIRE_REQUEST;
    case EFA_BTL_MSG_RESP:
        return EFA_BTL_WIRE_RESPONSE;
    default:
        return EFA_BTL_WIRE_UNKNOWN_TYPE;
    }
}

/* Parse one message of len bytes.  ntags: entries of the active-message
 * callback table (MCA_BTL_TAG_MAX): an AM's tag indexes it.  The headers
 * are read once each, into *msg; the order of the checks is the order in
 * which the BTL reports them. */
static inline efa_btl_wire_kind_t efa_btl_wire_parse(const void *buf, size_t len, unsigned ntags,
                                                     efa_btl_wire_msg_t *msg) {
    /* Field by field, not one memset of the whole: the active messages
     * (every on-node send) never read rma, and zeroing it cost more than
     * the rest of their parse. */
    msg->payload = NULL;
    msg->payload_len = 0;
    if (len < sizeof(efa_btl_hdr_t)) {
        memset(&msg->hdr, 0, sizeof(msg->hdr));
        memset(&msg->rma, 0, sizeof(msg->rma));
        return EFA_BTL_WIRE_SHORT;
    }
    memcpy(&msg->hdr, buf, sizeof(msg->hdr));
    if (EFA_BTL_MSG_CREDIT == msg->hdr.type) {
        memset(&msg->rma, 0, sizeof(msg->rma));
        return EFA_BTL_WIRE_CREDIT;
    }
    const uint8_t *body = (const uint8_t *)buf + sizeof(efa_btl_hdr_t);
    const size_t body_len = len - sizeof(efa_btl_hdr_t);
    if (EFA_BTL_MSG_AM == msg->hdr.type) {
        if (msg->hdr.len > body_len) {
            return EFA_BTL_WIRE_AM_TRUNCATED;
        }
        /* The tag indexes Open MPI's table of callbacks, which has
         * MCA_BTL_TAG_MAX (255) entries, one fewer than a uint8_t names:
         * tag 255 read past its end (tests/fuzz corpus). */
        if (msg->hdr.tag >= ntags) {
            return EFA_BTL_WIRE_AM_BAD_TAG;
        }
        msg->payload = body;
        msg->payload_len = msg->hdr.len;
        return EFA_BTL_WIRE_AM;
    }
    if (EFA_BTL_MSG_BATCH == msg->hdr.type) {
        if (msg->hdr.len > body_len) {
            return EFA_BTL_WIRE_BATCH_TRUNCATED;
        }
        msg->payload = body;
        msg->payload_len = msg->hdr.len;
        return EFA_BTL_WIRE_BATCH;
    }
    if (body_len < sizeof(efa_btl_rma_t)) {
        memset(&msg->rma, 0, sizeof(msg->rma));
        return EFA_BTL_WIRE_SHORT_REQUEST;
    }
    memcpy(&msg->rma, body, sizeof(msg->rma));
    if (msg->hdr.len > body_len - sizeof(efa_btl_rma_t)) {
        return EFA_BTL_WIRE_TRUNCATED_REQUEST;
    }
    msg->payload = body + sizeof(efa_btl_rma_t);
    msg->payload_len = msg->hdr.len;
    return efa_btl_wire_request_kind(msg->hdr.type);
}

/* Append one message to a batch's payload p (cap bytes, *used taken):
 * head_len bytes from head (the message's efa_btl_hdr_t and whatever of its
 * payload is contiguous with it), then data_len bytes from data, then zero
 * bytes up to the next entry's start.  false, nothing written, when it
 * does not fit. */
static inline bool efa_btl_wire_batch_add(uint8_t *p, size_t cap, size_t *used, const void *head,
                                          size_t head_len, const void *data, size_t data_len) {
    const size_t span = efa_btl_wire_batch_span(head_len + data_len);
    if (*used > cap || span > cap - *used) {
        return false;
    }
    uint8_t *at = p + *used;
    memcpy(at, head, head_len);
    if (data_len) {
        memcpy(at + head_len, data, data_len);
    }
    memset(at + head_len + data_len, 0, span - head_len - data_len);
    *used += span;
    return true;
}

/* The next message of a batch whose payload is p[0, len): parsed from
 * *off into *msg, *off moved past it.  false at the end of the batch.  An
 * entry must be a whole AM message (EFA_BTL_WIRE_AM, or _AM_BAD_TAG, which
 * the caller drops alone); anything else (a truncated or short entry, a
 * request, a credit, a batch inside the batch) is EFA_BTL_WIRE_BATCH_BAD_ENTRY
 * and ends the walk: what follows it cannot be trusted to start where the
 * entry says. */
static inline bool efa_btl_wire_batch_next(const uint8_t *p, size_t len, size_t *off,
                                           unsigned ntags, efa_btl_wire_kind_t *kind,
                                           efa_btl_wire_msg_t *msg) {
    if (*off >= len) {
        return false;
    }
    const size_t left = len - *off;
    *kind = efa_btl_wire_parse(p + *off, left, ntags, msg);
    if (EFA_BTL_WIRE_AM != *kind && EFA_BTL_WIRE_AM_BAD_TAG != *kind) {
        *kind = EFA_BTL_WIRE_BATCH_BAD_ENTRY;
        *off = len;
        return true;
    }
    /* hdr.len <= left - header here: no sum wraps. */
    const size_t span = efa_btl_wire_batch_span(sizeof(efa_btl_hdr_t) + (size_t)msg->hdr.len);
    *off = span < left ? *off + span : len;
    return true;
}

/* The target's check of a put's or get's length, before any lookup: a put
 * carries exactly the bytes it names (carried: hdr.len), a get asks for no
 * more than one answer holds (max_get: the chunk size).  Atomics have
 * their own (efa_btl_wire_atomic_extent). */
static inline bool efa_btl_wire_request_len_ok(uint8_t type, uint32_t carried, uint64_t len,
                                               size_t max_get) {
    if (EFA_BTL_MSG_PUT == type) {
        return len == carried;
    }
    if (EFA_BTL_MSG_GET == type) {
        return len <= max_get;
    }
    return true;
}

typedef enum {
    EFA_BTL_WIRE_ATOMIC_OK,
    EFA_BTL_WIRE_ATOMIC_UNSUPPORTED, /* floating point: not executed here */
    EFA_BTL_WIRE_ATOMIC_MISALIGNED,  /* addr not a multiple of the operand's size */
} efa_btl_wire_atomic_t;

/* An atomic's operand size (*len: 4 with the 32-bit flag, else 8) and
 * whether the target can execute it at addr.  The op itself is checked by
 * the caller (Open MPI's op numbers). */
static inline efa_btl_wire_atomic_t efa_btl_wire_atomic_extent(uint64_t addr, uint32_t flags,
                                                               uint64_t *len) {
    *len = (flags & EFA_BTL_WIRE_ATOMIC_32BIT) ? 4 : 8;
    if (flags & EFA_BTL_WIRE_ATOMIC_FLOAT) {
        return EFA_BTL_WIRE_ATOMIC_UNSUPPORTED;
    }
    return (addr % *len) ? EFA_BTL_WIRE_ATOMIC_MISALIGNED : EFA_BTL_WIRE_ATOMIC_OK;
}

/* Does a get's answer fit the request it names: the carried bytes are the
 * chunk's length, and [offset, offset + carried) lies inside the request's
 * buffer of req_size bytes (written so that no sum can wrap). */
static inline bool efa_btl_wire_get_answer_fits(size_t carried, uint64_t rma_len, uint64_t offset,
                                                size_t req_size) {
    return carried == rma_len && offset <= req_size && carried <= req_size - offset;
}

#ifdef __cplusplus
}
#endif
#endif /* EFA_BTL_WIRE_H */
