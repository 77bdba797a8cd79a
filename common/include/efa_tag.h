/*
 * How an MPI envelope (protocol bits, communicator id, source rank, tag) is
 * packed into libfabric's 64-bit tag.  C, because the MTL glue packs tags on
 * its hot path; the C++ core and the unit tests use the same functions.
 *
 * Two layouts, chosen when the core opens:
 *  - with remote CQ data (efa gives 4 bytes): the source rank rides in the
 *    CQ data, so the tag holds proto:2 | seq:14 | cid:16 | tag:32 and MPI
 *    tags reach 2^31-1;
 *  - without CQ data (or when forced): proto:2 | cid:16 | src:22 | tag:24.
 *
 * seq names one large send among the sender's sends to that peer, so that
 * the receiver can withdraw exactly that message when the sender cancels it
 * (core_withdraw.cpp); every receive ignores it, and a message that cannot
 * be withdrawn carries 0.  The layout without CQ data has no room for it.
 * The seq field's top bit is the rendezvous bit: the message carries no
 * bytes, only its seq, and the bytes are read from the sender by the
 * receiver (core_rdv.cpp); seqs take the bits below it.
 *
 * The tag field holds the MPI tag in two's complement.  MPI_ANY_TAG must
 * never match the negative tags Open MPI uses internally (collectives), so a
 * wildcard receive ignores every tag bit but the sign bit, which it requires
 * to be zero.
 */
#ifndef EFA_TAG_H
#define EFA_TAG_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    EFA_PROTO_BITS = 2,
    EFA_PROTO_MSG = 0,      /* an ordinary message */
    EFA_PROTO_SYNC = 1,     /* synchronous send: the receiver acknowledges the match */
    EFA_PROTO_SYNC_ACK = 2, /* that acknowledgement */
    EFA_PROTO_PROBE = 3,    /* the core's liveness probe (core_deadline.cpp); no receive of
                               the components matches it */
};

typedef struct efa_tag_layout {
    int cid_bits, src_bits, tag_bits; /* src_bits 0: the source rides in CQ data */
    int seq_bits;                     /* 0: no message can be withdrawn */
} efa_tag_layout_t;

#define EFA_TAG_LAYOUT_WITH_CQ_DATA ((efa_tag_layout_t){16, 0, 32, 14})
#define EFA_TAG_LAYOUT_WITHOUT_CQ_DATA ((efa_tag_layout_t){16, 22, 24, 0})

typedef struct efa_tag_envelope {
    uint32_t proto, cid, src;
    int32_t tag;
} efa_tag_envelope_t;

static inline uint64_t efa_tag_mask(int bits) {
    return bits >= 64 ? ~(uint64_t)0 : bits <= 0 ? 0 : (((uint64_t)1 << bits) - 1);
}

static inline bool efa_tag_source_in_tag(const efa_tag_layout_t *l) {
    return l->src_bits > 0;
}
static inline uint32_t efa_tag_max_cid(const efa_tag_layout_t *l) {
    return (uint32_t)efa_tag_mask(l->cid_bits);
}
static inline uint32_t efa_tag_max_src(const efa_tag_layout_t *l) {
    return (uint32_t)efa_tag_mask(l->src_bits);
}
static inline int32_t efa_tag_max_tag(const efa_tag_layout_t *l) {
    return (int32_t)efa_tag_mask(l->tag_bits - 1);
}
static inline int32_t efa_tag_min_tag(const efa_tag_layout_t *l) {
    return -efa_tag_max_tag(l) - 1;
}
static inline bool efa_tag_fits(const efa_tag_layout_t *l, int32_t tag) {
    return tag >= efa_tag_min_tag(l) && tag <= efa_tag_max_tag(l);
}

static inline uint64_t efa_tag_pack(const efa_tag_layout_t *l, uint32_t proto, uint32_t cid,
                                    uint32_t src, int32_t tag) {
    const int src_shift = l->tag_bits;
    const int cid_shift = src_shift + l->src_bits;
    const int proto_shift = cid_shift + l->cid_bits + l->seq_bits;
    return ((uint64_t)proto & efa_tag_mask(EFA_PROTO_BITS)) << proto_shift |
           ((uint64_t)cid & efa_tag_mask(l->cid_bits)) << cid_shift |
           ((uint64_t)src & efa_tag_mask(l->src_bits)) << src_shift |
           ((uint64_t)(uint32_t)tag & efa_tag_mask(l->tag_bits));
}

static inline efa_tag_envelope_t efa_tag_unpack(const efa_tag_layout_t *l, uint64_t bits) {
    const int src_shift = l->tag_bits;
    const int cid_shift = src_shift + l->src_bits;
    const int proto_shift = cid_shift + l->cid_bits + l->seq_bits;
    efa_tag_envelope_t e;
    e.proto = (uint32_t)((bits >> proto_shift) & efa_tag_mask(EFA_PROTO_BITS));
    e.cid = (uint32_t)((bits >> cid_shift) & efa_tag_mask(l->cid_bits));
    e.src = (uint32_t)((bits >> src_shift) & efa_tag_mask(l->src_bits));
    uint64_t t = bits & efa_tag_mask(l->tag_bits);
    if (t >> (l->tag_bits - 1)) {
        t |= ~efa_tag_mask(l->tag_bits); /* sign-extend */
    }
    e.tag = (int32_t)(uint32_t)t;
    return e;
}

/* The largest seq a layout carries (0: none): the seq field but its top
 * bit, the rendezvous bit. */
static inline uint32_t efa_tag_max_seq(const efa_tag_layout_t *l) {
    return (uint32_t)efa_tag_mask(l->seq_bits - 1);
}

/* The rendezvous bit in place (0: the layout has none). */
static inline uint64_t efa_tag_rdv_bit(const efa_tag_layout_t *l) {
    return l->seq_bits > 1
               ? (uint64_t)1 << (l->tag_bits + l->src_bits + l->cid_bits + l->seq_bits - 1)
               : 0;
}

/* The bits a receive must ignore to match both ordinary and synchronous
 * sends whatever their seq, and optionally any source / any non-negative
 * tag. */
static inline uint64_t efa_tag_recv_ignore(const efa_tag_layout_t *l, bool any_src, bool any_tag) {
    const int seq_shift = l->tag_bits + l->src_bits + l->cid_bits;
    const int proto_shift = seq_shift + l->seq_bits;
    uint64_t ignore = (uint64_t)EFA_PROTO_SYNC << proto_shift;
    ignore |= efa_tag_mask(l->seq_bits) << seq_shift;
    if (any_src) {
        ignore |= efa_tag_mask(l->src_bits) << l->tag_bits;
    }
    if (any_tag) {
        ignore |= efa_tag_mask(l->tag_bits - 1);
    }
    return ignore;
}

/* The same packing with every shift and mask worked out once, for the hot
 * paths: the generic functions above recompute them from the field widths
 * on every call, which costs tens of instructions per message. */
typedef struct efa_tag_codec {
    uint8_t src_shift, cid_shift, seq_shift, proto_shift;
    bool source_in_tag;
    uint64_t tag_mask, src_mask, cid_mask, seq_mask; /* in place (already shifted) */
    uint64_t rdv_bit;                                /* in place; 0: none */
    uint64_t sign_bit;                               /* the tag field's sign bit */
    int32_t min_tag, max_tag;
} efa_tag_codec_t;

static inline efa_tag_codec_t efa_tag_codec_make(const efa_tag_layout_t *l) {
    efa_tag_codec_t c;
    c.src_shift = (uint8_t)l->tag_bits;
    c.cid_shift = (uint8_t)(l->tag_bits + l->src_bits);
    c.seq_shift = (uint8_t)(l->tag_bits + l->src_bits + l->cid_bits);
    c.proto_shift = (uint8_t)(c.seq_shift + l->seq_bits);
    c.source_in_tag = l->src_bits > 0;
    c.tag_mask = efa_tag_mask(l->tag_bits);
    c.src_mask = efa_tag_mask(l->src_bits) << c.src_shift;
    c.cid_mask = efa_tag_mask(l->cid_bits) << c.cid_shift;
    c.seq_mask = efa_tag_mask(l->seq_bits) << c.seq_shift;
    c.rdv_bit = efa_tag_rdv_bit(l);
    c.sign_bit = (uint64_t)1 << (l->tag_bits - 1);
    c.min_tag = efa_tag_min_tag(l);
    c.max_tag = efa_tag_max_tag(l);
    return c;
}

static inline bool efa_tag_codec_fits(const efa_tag_codec_t *c, int32_t tag) {
    return tag >= c->min_tag && tag <= c->max_tag;
}

static inline uint64_t efa_tag_codec_pack(const efa_tag_codec_t *c, uint32_t proto, uint32_t cid,
                                          uint32_t src, int32_t tag) {
    return (uint64_t)proto << c->proto_shift | ((uint64_t)cid << c->cid_shift & c->cid_mask) |
           ((uint64_t)src << c->src_shift & c->src_mask) | ((uint64_t)(uint32_t)tag & c->tag_mask);
}

/* A packed tag with its seq field set (a layout without one: unchanged). */
static inline uint64_t efa_tag_codec_with_seq(const efa_tag_codec_t *c, uint64_t bits,
                                              uint32_t seq) {
    return (bits & ~c->seq_mask) | ((uint64_t)seq << c->seq_shift & c->seq_mask);
}

/* The seq of a packed tag, without the rendezvous bit. */
static inline uint32_t efa_tag_codec_seq(const efa_tag_codec_t *c, uint64_t bits) {
    return (uint32_t)((bits & c->seq_mask & ~c->rdv_bit) >> c->seq_shift);
}

static inline uint32_t efa_tag_codec_proto(const efa_tag_codec_t *c, uint64_t bits) {
    return (uint32_t)(bits >> c->proto_shift);
}

static inline uint32_t efa_tag_codec_src(const efa_tag_codec_t *c, uint64_t bits) {
    return (uint32_t)((bits & c->src_mask) >> c->src_shift);
}

static inline int32_t efa_tag_codec_tag(const efa_tag_codec_t *c, uint64_t bits) {
    uint64_t t = bits & c->tag_mask;
    return (int32_t)(uint32_t)((t ^ c->sign_bit) - c->sign_bit); /* sign-extend */
}

#ifdef __cplusplus
}
#endif
#endif /* EFA_TAG_H */
