// Tag packing round trips at every boundary of both layouts, and the
// wildcard rules (MPI_ANY_TAG never matches negative internal tags).
#include <gtest/gtest.h>

#include <climits>

#include "efa_tag.h"

namespace {

// Would a receive (bits, ignore) match a message tagged 'msg'?  libfabric's rule.
bool matches(uint64_t msg, uint64_t bits, uint64_t ignore) {
    return ((msg ^ bits) & ~ignore) == 0;
}

// Calls f(proto, cid, src, tag) for every protocol and each field at and
// next to its limits (and a few values between), for layout l.
template <typename F> void for_each_boundary_envelope(const efa_tag_layout_t &l, F f) {
    const int32_t tags[] = {0, 1, -1, efa_tag_max_tag(&l), efa_tag_min_tag(&l), -32, 12345};
    const uint32_t cids[] = {0, 1, efa_tag_max_cid(&l), efa_tag_max_cid(&l) - 1};
    const uint32_t srcs[] = {0, 1, efa_tag_max_src(&l)};
    for (uint32_t proto : {EFA_PROTO_MSG, EFA_PROTO_SYNC, EFA_PROTO_SYNC_ACK}) {
        for (uint32_t cid : cids) {
            for (uint32_t src : srcs) {
                for (int32_t tag : tags) {
                    f(proto, cid, src, tag);
                }
            }
        }
    }
}

class Layouts : public ::testing::TestWithParam<efa_tag_layout_t> {};

TEST_P(Layouts, UsesAll64Bits) {
    efa_tag_layout_t l = GetParam();
    EXPECT_EQ(EFA_PROTO_BITS + l.seq_bits + l.cid_bits + l.src_bits + l.tag_bits, 64);
}

TEST_P(Layouts, RoundTripAtBoundaries) {
    efa_tag_layout_t l = GetParam();
    for_each_boundary_envelope(l, [&](uint32_t proto, uint32_t cid, uint32_t src, int32_t tag) {
        uint64_t bits = efa_tag_pack(&l, proto, cid, src, tag);
        efa_tag_envelope_t e = efa_tag_unpack(&l, bits);
        EXPECT_EQ(e.proto, proto);
        EXPECT_EQ(e.cid, cid);
        EXPECT_EQ(e.src, efa_tag_source_in_tag(&l) ? src : 0u);
        EXPECT_EQ(e.tag, tag) << "cid " << cid << " src " << src;
    });
}

TEST_P(Layouts, FieldsDoNotBleed) {
    efa_tag_layout_t l = GetParam();
    // All-ones in one field leaves the others zero.
    efa_tag_envelope_t e = efa_tag_unpack(&l, efa_tag_pack(&l, 0, efa_tag_max_cid(&l), 0, 0));
    EXPECT_EQ(e.proto, 0u);
    EXPECT_EQ(e.tag, 0);
    e = efa_tag_unpack(&l, efa_tag_pack(&l, 3, 0, 0, -1));
    EXPECT_EQ(e.cid, 0u);
    EXPECT_EQ(e.proto, 3u);
    EXPECT_EQ(e.tag, -1);
}

TEST_P(Layouts, TagFitsBounds) {
    efa_tag_layout_t l = GetParam();
    EXPECT_TRUE(efa_tag_fits(&l, efa_tag_max_tag(&l)));
    EXPECT_TRUE(efa_tag_fits(&l, efa_tag_min_tag(&l)));
    if (l.tag_bits < 32) {
        EXPECT_FALSE(efa_tag_fits(&l, efa_tag_max_tag(&l) + 1));
        EXPECT_FALSE(efa_tag_fits(&l, efa_tag_min_tag(&l) - 1));
    }
}

TEST_P(Layouts, AnyTagMatchesNonNegativeOnly) {
    efa_tag_layout_t l = GetParam();
    uint64_t bits = efa_tag_pack(&l, EFA_PROTO_MSG, 7, 0, 0);
    uint64_t ignore = efa_tag_recv_ignore(&l, true, true);
    for (int32_t tag : {0, 1, 42, efa_tag_max_tag(&l)}) {
        EXPECT_TRUE(matches(efa_tag_pack(&l, EFA_PROTO_MSG, 7, 3, tag), bits, ignore)) << tag;
    }
    for (int32_t tag : {-1, -2, -17, efa_tag_min_tag(&l)}) {
        EXPECT_FALSE(matches(efa_tag_pack(&l, EFA_PROTO_MSG, 7, 3, tag), bits, ignore)) << tag;
    }
}

TEST_P(Layouts, ReceivesMatchSyncButNotAcks) {
    efa_tag_layout_t l = GetParam();
    uint64_t bits = efa_tag_pack(&l, EFA_PROTO_MSG, 5, 2, 9);
    uint64_t ignore = efa_tag_recv_ignore(&l, false, false);
    EXPECT_TRUE(matches(efa_tag_pack(&l, EFA_PROTO_MSG, 5, 2, 9), bits, ignore));
    EXPECT_TRUE(matches(efa_tag_pack(&l, EFA_PROTO_SYNC, 5, 2, 9), bits, ignore));
    EXPECT_FALSE(matches(efa_tag_pack(&l, EFA_PROTO_SYNC_ACK, 5, 2, 9), bits, ignore));
    // Another communicator or tag never matches.
    EXPECT_FALSE(matches(efa_tag_pack(&l, EFA_PROTO_MSG, 6, 2, 9), bits, ignore));
    EXPECT_FALSE(matches(efa_tag_pack(&l, EFA_PROTO_MSG, 5, 2, 10), bits, ignore));
}

TEST_P(Layouts, SourceFieldOnlyWhenInTag) {
    efa_tag_layout_t l = GetParam();
    uint64_t bits = efa_tag_pack(&l, EFA_PROTO_MSG, 5, 2, 9);
    uint64_t other_src = efa_tag_pack(&l, EFA_PROTO_MSG, 5, 3, 9);
    uint64_t exact = efa_tag_recv_ignore(&l, false, false);
    uint64_t any = efa_tag_recv_ignore(&l, true, false);
    EXPECT_EQ(matches(other_src, bits, exact), !efa_tag_source_in_tag(&l));
    EXPECT_TRUE(matches(other_src, bits, any));
}

// The precomputed codec of the hot paths packs and unpacks exactly as the
// generic functions do.
TEST_P(Layouts, CodecAgreesWithGenericFunctions) {
    efa_tag_layout_t l = GetParam();
    efa_tag_codec_t c = efa_tag_codec_make(&l);
    EXPECT_EQ(c.source_in_tag, efa_tag_source_in_tag(&l));
    for_each_boundary_envelope(l, [&](uint32_t proto, uint32_t cid, uint32_t src, int32_t tag) {
        uint64_t bits = efa_tag_pack(&l, proto, cid, src, tag);
        EXPECT_EQ(efa_tag_codec_pack(&c, proto, cid, src, tag), bits);
        efa_tag_envelope_t e = efa_tag_unpack(&l, bits);
        EXPECT_EQ(efa_tag_codec_proto(&c, bits), e.proto);
        EXPECT_EQ(efa_tag_codec_src(&c, bits), e.src);
        EXPECT_EQ(efa_tag_codec_tag(&c, bits), e.tag);
    });
    for (int32_t tag : {0, -1, INT_MAX, INT_MIN, efa_tag_max_tag(&l), efa_tag_min_tag(&l)}) {
        EXPECT_EQ(efa_tag_codec_fits(&c, tag), efa_tag_fits(&l, tag)) << tag;
    }
    if (l.tag_bits < 32) {
        EXPECT_FALSE(efa_tag_codec_fits(&c, efa_tag_max_tag(&l) + 1));
        EXPECT_FALSE(efa_tag_codec_fits(&c, efa_tag_min_tag(&l) - 1));
    }
}

// A large send's seq (what a withdrawal names it by) changes nothing a
// receive or the envelope sees, and reads back as written.
TEST_P(Layouts, SeqIsIgnoredByEveryReceiveAndReadsBack) {
    efa_tag_layout_t l = GetParam();
    efa_tag_codec_t c = efa_tag_codec_make(&l);
    const uint64_t plain = efa_tag_pack(&l, EFA_PROTO_SYNC, 5, 2, 9);
    for (uint32_t seq : {1u, 2u, efa_tag_max_seq(&l)}) {
        const uint64_t bits = efa_tag_codec_with_seq(&c, plain, seq);
        if (0 == l.seq_bits) {
            EXPECT_EQ(bits, plain); // the layout has no seq
            continue;
        }
        EXPECT_NE(bits, plain);
        EXPECT_EQ(efa_tag_codec_seq(&c, bits), seq);
        EXPECT_EQ(efa_tag_codec_with_seq(&c, bits, 0), plain);
        efa_tag_envelope_t e = efa_tag_unpack(&l, bits);
        EXPECT_EQ(e.proto, static_cast<uint32_t>(EFA_PROTO_SYNC));
        EXPECT_EQ(e.cid, 5u);
        EXPECT_EQ(e.tag, 9);
        EXPECT_EQ(efa_tag_codec_proto(&c, bits), static_cast<uint32_t>(EFA_PROTO_SYNC));
        for (bool any_src : {false, true}) {
            for (bool any_tag : {false, true}) {
                const uint64_t want = efa_tag_pack(&l, EFA_PROTO_MSG, 5, 2, any_tag ? 0 : 9);
                EXPECT_TRUE(matches(bits, want, efa_tag_recv_ignore(&l, any_src, any_tag)))
                    << "seq " << seq << " any_src " << any_src << " any_tag " << any_tag;
            }
        }
        // An acknowledgement never matches a receive, whatever its seq.
        const uint64_t ack =
            efa_tag_codec_with_seq(&c, efa_tag_pack(&l, EFA_PROTO_SYNC_ACK, 5, 2, 9), seq);
        EXPECT_FALSE(matches(ack, plain, efa_tag_recv_ignore(&l, true, false)));
    }
}

// A rendezvous message (the seq field's top bit) matches every receive its
// plain form matches, and its seq reads back without the bit.
TEST_P(Layouts, RendezvousBitIsIgnoredByEveryReceive) {
    efa_tag_layout_t l = GetParam();
    efa_tag_codec_t c = efa_tag_codec_make(&l);
    if (0 == l.seq_bits) {
        EXPECT_EQ(c.rdv_bit, 0u);
        return;
    }
    EXPECT_EQ(c.rdv_bit & c.seq_mask, c.rdv_bit); // within the seq field
    const uint64_t plain = efa_tag_pack(&l, EFA_PROTO_MSG, 5, 2, 9);
    for (uint32_t seq : {1u, efa_tag_max_seq(&l)}) {
        const uint64_t bits = efa_tag_codec_with_seq(&c, plain, seq) | c.rdv_bit;
        EXPECT_EQ(efa_tag_codec_seq(&c, bits), seq);
        EXPECT_EQ(efa_tag_codec_proto(&c, bits), static_cast<uint32_t>(EFA_PROTO_MSG));
        EXPECT_EQ(efa_tag_unpack(&l, bits).tag, 9);
        for (bool any_src : {false, true}) {
            for (bool any_tag : {false, true}) {
                const uint64_t want = efa_tag_pack(&l, EFA_PROTO_MSG, 5, 2, any_tag ? 0 : 9);
                EXPECT_TRUE(matches(bits, want, efa_tag_recv_ignore(&l, any_src, any_tag)));
            }
        }
    }
    EXPECT_EQ(uint64_t{efa_tag_max_seq(&l)} << c.seq_shift & c.rdv_bit, 0u); // no seq sets it
}

INSTANTIATE_TEST_SUITE_P(Tag, Layouts,
                         ::testing::Values(EFA_TAG_LAYOUT_WITH_CQ_DATA,
                                           EFA_TAG_LAYOUT_WITHOUT_CQ_DATA));

TEST(TagLayout, WithCqDataReachesMpiIntMax) {
    efa_tag_layout_t l = EFA_TAG_LAYOUT_WITH_CQ_DATA;
    EXPECT_EQ(efa_tag_max_tag(&l), INT_MAX);
    EXPECT_EQ(efa_tag_min_tag(&l), INT_MIN);
    EXPECT_EQ(efa_tag_max_cid(&l), 65535u);
    EXPECT_EQ(efa_tag_max_seq(&l), (1u << 13) - 1); // the field's top bit: the rendezvous bit
    EXPECT_EQ(efa_tag_rdv_bit(&l), uint64_t{1} << 61);
    EXPECT_FALSE(efa_tag_source_in_tag(&l));
}

TEST(TagLayout, WithoutCqDataLimits) {
    efa_tag_layout_t l = EFA_TAG_LAYOUT_WITHOUT_CQ_DATA;
    EXPECT_EQ(efa_tag_max_tag(&l), (1 << 23) - 1);
    EXPECT_GE(efa_tag_max_tag(&l), 32767); // MPI's minimum for MPI_TAG_UB
    EXPECT_EQ(efa_tag_max_src(&l), (1u << 22) - 1);
    EXPECT_EQ(efa_tag_max_cid(&l), 65535u);
    EXPECT_EQ(efa_tag_max_seq(&l), 0u); // no room: nothing can be withdrawn
    EXPECT_EQ(efa_tag_rdv_bit(&l), 0u); // nor read by rendezvous
}

} // namespace
