// Tag unpacking (common/efa_tag.h): the 64 tag bits of a received message
// are the sender's to choose.  Whatever they are, the generic and the
// precomputed (hot path) decoders must agree, packing what was unpacked
// must give the same bits back, and a wildcard receive must never match a
// negative (Open MPI internal) tag.
#include "efa_tag.h"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    const efa_tag_layout_t layout =
        (in.take<uint8_t>() & 1) ? EFA_TAG_LAYOUT_WITHOUT_CQ_DATA : EFA_TAG_LAYOUT_WITH_CQ_DATA;
    const efa_tag_codec_t codec = efa_tag_codec_make(&layout);
    const uint64_t bits = in.take<uint64_t>();

    const efa_tag_envelope_t e = efa_tag_unpack(&layout, bits);
    FUZZ_CHECK(e.proto == efa_tag_codec_proto(&codec, bits));
    FUZZ_CHECK(e.tag == efa_tag_codec_tag(&codec, bits));
    FUZZ_CHECK(efa_tag_codec_fits(&codec, e.tag));
    if (efa_tag_source_in_tag(&layout)) {
        FUZZ_CHECK(e.src == efa_tag_codec_src(&codec, bits));
        FUZZ_CHECK(e.src <= efa_tag_max_src(&layout));
    }
    FUZZ_CHECK(e.cid <= efa_tag_max_cid(&layout));
    // The seq (a large send's name for withdrawal) is not in the envelope.
    const uint32_t seq = efa_tag_codec_seq(&codec, bits);
    FUZZ_CHECK(seq <= efa_tag_max_seq(&layout));
    const uint64_t plain = efa_tag_codec_with_seq(&codec, bits, 0);
    FUZZ_CHECK((efa_tag_codec_with_seq(&codec, plain, seq) | (bits & codec.rdv_bit)) == bits);
    FUZZ_CHECK(efa_tag_pack(&layout, e.proto, e.cid, e.src, e.tag) == plain);
    FUZZ_CHECK(efa_tag_codec_pack(&codec, e.proto, e.cid, e.src, e.tag) == plain);

    // A receive (any source, any tag) on the communicator the bits name:
    // it matches exactly the non-negative tags, of both protocols.
    const uint64_t want = efa_tag_pack(&layout, EFA_PROTO_MSG, e.cid, 0, 0);
    const uint64_t ignore = efa_tag_recv_ignore(&layout, true, true);
    const bool matches = ((bits ^ want) & ~ignore) == 0;
    const bool should = e.tag >= 0 && (e.proto == EFA_PROTO_MSG || e.proto == EFA_PROTO_SYNC);
    FUZZ_CHECK(matches == should);

    // An envelope from the input: whatever fits the layout comes back.
    const uint32_t proto = in.take<uint8_t>() & 3;
    const uint32_t cid = in.take<uint32_t>() & efa_tag_max_cid(&layout);
    const uint32_t src = in.take<uint32_t>() & efa_tag_max_src(&layout);
    const int32_t tag = in.take<int32_t>();
    if (efa_tag_fits(&layout, tag)) {
        const uint64_t packed = efa_tag_codec_pack(&codec, proto, cid, src, tag);
        const efa_tag_envelope_t back = efa_tag_unpack(&layout, packed);
        FUZZ_CHECK(back.proto == proto && back.cid == cid && back.src == src && back.tag == tag);
    }
    return 0;
}
