// The core's own messages in the tag space no component receive matches
// (EFA_PROTO_PROBE, efa_tag.h), and how they share it:
//
//   proto:2 = 3 | answer:1 | withdraw:1 | reply:1 | rdv:1 | fin:1 | rail_out:1 | id:56
//
//  - liveness pings and answers (core_probe.cpp): withdraw, reply, rdv,
//    fin and rail_out 0, 'answer' tells the two apart, 'id' is the sender's
//    probe id;
//  - notices that the sender took out a NIC by which it reached the
//    receiver (core_rails.cpp): rail_out 1, every other bit but the id 0,
//    the id's top 2 bits the sender's rail (its NIC of the set), the
//    other 54 the sender's probe id's; taken by the receive of pings and
//    answers;
//  - withdraw requests and their replies (core_withdraw.cpp): withdraw 1,
//    'reply' tells the two apart; a request's 'id' is the requester's probe
//    id, by which the receiver finds its address;
//  - rendezvous notes and their answers (core_rdv.cpp): rdv 1, 'fin' tells
//    the two apart; 'id' is the sender's probe id.
// Each kind but the notices has receives of its own, which require the
// others' bits zero.
#pragma once

#include <cstdint>

#include "efa_tag.h"

namespace efa::control {

constexpr uint64_t kProbeTag = static_cast<uint64_t>(EFA_PROTO_PROBE) << 62;
constexpr uint64_t kAnswerBit = static_cast<uint64_t>(1) << 61;
constexpr uint64_t kWithdrawBit = static_cast<uint64_t>(1) << 60;
constexpr uint64_t kReplyBit = static_cast<uint64_t>(1) << 59;
constexpr uint64_t kRdvBit = static_cast<uint64_t>(1) << 58;
constexpr uint64_t kFinBit = static_cast<uint64_t>(1) << 57;
constexpr uint64_t kRailOutBit = static_cast<uint64_t>(1) << 56;
constexpr uint64_t kIdMask = (static_cast<uint64_t>(1) << 56) - 1;
// A notice's id field: the rail above the probe id's low bits.
constexpr int kRailOutRailShift = 54;
constexpr uint64_t kRailOutIdMask = (static_cast<uint64_t>(1) << kRailOutRailShift) - 1;

// Pings, answers and rail-out notices: any id, either answer bit, either
// rail_out bit; withdraw, reply, rdv and fin zero.
constexpr uint64_t kProbeIgnore = kAnswerBit | kRailOutBit | kIdMask;
// Withdraw requests and replies: any id, either reply bit.
constexpr uint64_t kWithdrawIgnore = kReplyBit | kIdMask;
// Rendezvous notes and answers: any id, either fin bit.
constexpr uint64_t kRdvIgnore = kFinBit | kIdMask;

} // namespace efa::control
