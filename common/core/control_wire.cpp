// The core's control messages as the receiver reads them (control_wire.hpp).
#include "control_wire.hpp"

#include <cstring>

#include "control_tags.hpp"

namespace efa::control {

namespace {

uint64_t word(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

// Whether 'tag' lies in the space a receive of 'want' ignoring 'ignore'
// takes: the receives ask the provider for exactly that, and a tag outside
// it read here would be a message meant for another receive.
bool in_space(uint64_t tag, uint64_t want, uint64_t ignore) {
    return ((tag ^ want) & ~ignore) == 0;
}

} // namespace

ProbeMsg parse_probe(uint64_t tag) {
    ProbeMsg m{};
    m.valid = in_space(tag, kProbeTag, kProbeIgnore) &&
              (tag & (kAnswerBit | kRailOutBit)) != (kAnswerBit | kRailOutBit);
    if (m.valid) {
        m.answer = (tag & kAnswerBit) != 0;
        m.rail_out = (tag & kRailOutBit) != 0;
        m.id = tag & (m.rail_out ? kRailOutIdMask : kIdMask);
        m.rail = m.rail_out ? static_cast<int>((tag & kIdMask) >> kRailOutRailShift) : 0;
    }
    return m;
}

WithdrawMsg parse_withdraw(uint64_t tag, const uint8_t *buf, size_t len) {
    WithdrawMsg m{};
    m.kind = WithdrawMsg::kNone;
    if (!in_space(tag, kProbeTag | kWithdrawBit, kWithdrawIgnore)) {
        return m;
    }
    if (tag & kReplyBit) {
        if (len < kWithdrawReplyBytes) {
            return m;
        }
        m.kind = WithdrawMsg::kReply;
        m.id = word(buf);
        // The outcome travels as a 64-bit word; only 1 (taken) means
        // anything to the requester, any other value is "not taken".
        m.result = static_cast<int>(static_cast<int64_t>(word(buf + 8)));
        return m;
    }
    if (len < kWithdrawRequestBytes) {
        return m;
    }
    m.kind = WithdrawMsg::kRequest;
    m.requester = tag & kIdMask;
    m.tag = word(buf);
    m.id = word(buf + 8);
    m.len = word(buf + 16);
    return m;
}

RdvMsg parse_rdv(uint64_t tag, const uint8_t *buf, size_t len) {
    RdvMsg m{};
    m.kind = RdvMsg::kNone;
    if (!in_space(tag, kProbeTag | kRdvBit, kRdvIgnore)) {
        return m;
    }
    m.sender = tag & kIdMask;
    if (tag & kFinBit) {
        if (len < kRdvFinBytes) {
            return m;
        }
        m.kind = RdvMsg::kFin;
        m.id = word(buf);
        m.result = static_cast<int>(static_cast<int64_t>(word(buf + 8)));
        return m;
    }
    if (len < kRdvNoteBytes) {
        return m;
    }
    const uint64_t rkeys = word(buf + 32);
    if (rkeys < 1 || rkeys > 4) {
        return m;
    }
    m.kind = RdvMsg::kNote;
    m.id = word(buf);
    m.tag = word(buf + 8);
    m.len = word(buf + 16);
    m.addr = word(buf + 24);
    m.rkeys = static_cast<int>(rkeys);
    for (int k = 0; k < 4; ++k) {
        m.rkey[k] = word(buf + 40 + 8 * k);
    }
    return m;
}

} // namespace efa::control
