// The core's control messages (common/core/control_wire.hpp): liveness
// pings and answers (core_probe.cpp), notices of a NIC taken out
// (core_rails.cpp), withdraw requests and replies
// (core_withdraw.cpp) and rendezvous notes and answers (core_rdv.cpp) as
// their receives read them.  Tag and bytes are the
// sender's to choose.  What each must parse as is written here from the
// tag space's definition (control_tags.hpp: proto 3 | answer | withdraw |
// reply | rdv | fin | rail_out | a 56-bit id), not from the parser; a control
// message never reads as a component's message under either tag layout; a
// message is read only within its length (a copy of exactly that size, so
// ASan sees a byte too far); and a probe id made from any address blob
// fits the id field and comes back from a ping's tag.
//
// Input: 8 bytes (the tag), then the message's bytes.
#include "control_wire.hpp"
#include "core.hpp"
#include "efa_tag.h"
#include "fuzz_input.hpp"

namespace {

using efa::control::ProbeMsg;
using efa::control::RdvMsg;
using efa::control::WithdrawMsg;

uint64_t bit(int n) {
    return static_cast<uint64_t>(1) << n;
}
uint64_t word(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

constexpr uint64_t kId = (static_cast<uint64_t>(1) << 56) - 1;

// Under both layouts: the proto field reads "probe", and a receive of any
// source and any tag on the communicator the bits name does not match.
void check_not_a_component_message(uint64_t tag) {
    const efa_tag_layout_t layouts[] = {EFA_TAG_LAYOUT_WITH_CQ_DATA,
                                        EFA_TAG_LAYOUT_WITHOUT_CQ_DATA};
    for (const efa_tag_layout_t &l : layouts) {
        const efa_tag_envelope_t e = efa_tag_unpack(&l, tag);
        FUZZ_CHECK(e.proto == EFA_PROTO_PROBE);
        const uint64_t want = efa_tag_pack(&l, EFA_PROTO_MSG, e.cid, 0, 0);
        FUZZ_CHECK(((tag ^ want) & ~efa_tag_recv_ignore(&l, true, true)) != 0);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    const uint64_t tag = in.take<uint64_t>();
    const std::vector<uint8_t> body = in.rest();
    auto *msg = static_cast<uint8_t *>(malloc(body.empty() ? 1 : body.size()));
    if (!body.empty()) {
        memcpy(msg, body.data(), body.size());
    }

    const bool control = (tag >> 62) == 3 && (tag & (bit(58) | bit(57) | bit(56))) == 0;
    const bool answer_bit = tag & bit(61), withdraw_bit = tag & bit(60), reply_bit = tag & bit(59);

    // A ping, an answer or a rail-out notice (bit 56, never with the answer
    // bit): withdraw and reply zero.
    const bool rail_out_bit = tag & bit(56);
    const bool probe_space =
        (tag >> 62) == 3 && (tag & (bit(58) | bit(57))) == 0 && !withdraw_bit && !reply_bit;
    const ProbeMsg p = efa::control::parse_probe(tag);
    FUZZ_CHECK(p.valid == (probe_space && !(rail_out_bit && answer_bit)));
    if (p.valid) {
        FUZZ_CHECK(p.answer == answer_bit);
        FUZZ_CHECK(p.rail_out == rail_out_bit);
        // A notice's id: the top 2 bits the sender's rail, the rest its id.
        FUZZ_CHECK(p.id == (tag & (rail_out_bit ? bit(54) - 1 : kId)));
        FUZZ_CHECK(p.rail == (rail_out_bit ? static_cast<int>((tag >> 54) & 3) : 0));
        check_not_a_component_message(tag);
    }

    // A withdraw request or reply: withdraw 1, answer 0, long enough.
    const WithdrawMsg w = efa::control::parse_withdraw(tag, msg, body.size());
    const bool withdraw = control && withdraw_bit && !answer_bit;
    FUZZ_CHECK(!(p.valid && w.kind != WithdrawMsg::kNone)); // the receives never share a message
    if (!withdraw) {
        FUZZ_CHECK(w.kind == WithdrawMsg::kNone);
    } else if (reply_bit) {
        FUZZ_CHECK(w.kind == (body.size() >= 16 ? WithdrawMsg::kReply : WithdrawMsg::kNone));
    } else {
        FUZZ_CHECK(w.kind == (body.size() >= 24 ? WithdrawMsg::kRequest : WithdrawMsg::kNone));
    }
    if (w.kind == WithdrawMsg::kReply) {
        FUZZ_CHECK(w.id == word(msg));
        FUZZ_CHECK(w.result == static_cast<int>(static_cast<int64_t>(word(msg + 8))));
        check_not_a_component_message(tag);
    } else if (w.kind == WithdrawMsg::kRequest) {
        FUZZ_CHECK(w.requester == (tag & kId));
        FUZZ_CHECK(w.tag == word(msg) && w.id == word(msg + 8) && w.len == word(msg + 16));
        check_not_a_component_message(tag);
    }

    // A rendezvous note or answer: rdv 1, answer, withdraw and reply 0,
    // long enough; a note names 1 to 4 keys.
    const RdvMsg r = efa::control::parse_rdv(tag, msg, body.size());
    const bool rdv = (tag >> 62) == 3 && (tag & bit(58)) && !(tag & bit(56)) && !answer_bit &&
                     !withdraw_bit && !reply_bit;
    FUZZ_CHECK(!(r.kind != RdvMsg::kNone && (p.valid || w.kind != WithdrawMsg::kNone)));
    if (!rdv) {
        FUZZ_CHECK(r.kind == RdvMsg::kNone);
    } else if (tag & bit(57)) {
        FUZZ_CHECK(r.kind == (body.size() >= 16 ? RdvMsg::kFin : RdvMsg::kNone));
    } else {
        const bool keys_ok = body.size() >= 72 && word(msg + 32) >= 1 && word(msg + 32) <= 4;
        FUZZ_CHECK(r.kind == (keys_ok ? RdvMsg::kNote : RdvMsg::kNone));
    }
    if (r.kind != RdvMsg::kNone) {
        FUZZ_CHECK(r.sender == (tag & kId) && r.id == word(msg));
        check_not_a_component_message(tag);
    }
    if (r.kind == RdvMsg::kFin) {
        FUZZ_CHECK(r.result == static_cast<int>(static_cast<int64_t>(word(msg + 8))));
    } else if (r.kind == RdvMsg::kNote) {
        FUZZ_CHECK(r.tag == word(msg + 8) && r.len == word(msg + 16) && r.addr == word(msg + 24) &&
                   r.rkeys == static_cast<int>(word(msg + 32)));
        for (int k = 0; k < 4; ++k) {
            FUZZ_CHECK(r.rkey[k] == word(msg + 40 + 8 * k));
        }
    }

    // The body as another process's address blob: its probe id fits the
    // tag's id field, and a ping carrying it reads back as that id.
    const uint64_t id = efa::probe_id_of(msg, body.size());
    FUZZ_CHECK((id & ~kId) == 0);
    const ProbeMsg ping = efa::control::parse_probe((static_cast<uint64_t>(3) << 62) | id);
    FUZZ_CHECK(ping.valid && !ping.answer && !ping.rail_out && ping.id == id);
    free(msg);
    return 0;
}
