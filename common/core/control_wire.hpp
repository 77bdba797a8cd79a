// Reading the core's control messages (control_tags.hpp) as they arrive:
// a liveness ping or answer is its tag alone, a withdraw request or reply
// or a rendezvous note or answer its tag and a few bytes.  Every bit of them is another process's
// to choose; the receives (core_probe.cpp, core_withdraw.cpp) read them only through these
// functions, which tests/fuzz/fuzz_control_wire.cpp tries with any bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace efa::control {

// A ping, an answer (core_probe.cpp) or a rail-out notice (core_rails.cpp).
struct ProbeMsg {
    bool valid;    // in the space of pings and answers (kProbeTag, kProbeIgnore),
                   // and not both an answer and a notice
    bool answer;   // an answer to this process's ping, not a ping
    bool rail_out; // the sender took out a NIC that reached this process
    int rail;      // a notice's: the sender's rail (its NIC of the set), 0 to 3
    uint64_t id;   // the sender's probe id (a notice's: its low 54 bits)
};
ProbeMsg parse_probe(uint64_t tag);

// A withdraw request: the message's tag, the requester's id for the
// answer, the message's length; a reply: that id and the outcome.  Each a
// 64-bit word in host order (the peers are the same machine type).
constexpr size_t kWithdrawRequestBytes = 24;
constexpr size_t kWithdrawReplyBytes = 16;

struct WithdrawMsg {
    enum Kind { kNone, kRequest, kReply };
    Kind kind;          // kNone: not a withdraw message, or too short
    uint64_t requester; // a request's: the requester's probe id
    uint64_t tag;       // a request's: the tag of the message to withdraw
    uint64_t id;        // the requester's name for the withdrawal
    uint64_t len;       // a request's: the length of the message
    int result;         // a reply's: 1 taken, 0 not, below 0 an error
};
// 'len' bytes received at 'buf' with tag 'tag'.
WithdrawMsg parse_withdraw(uint64_t tag, const uint8_t *buf, size_t len);

// A rendezvous note (core_rdv.cpp): the sender's id of the offer, the
// message's tag, its length, where its bytes are (the address as the
// provider expects it) and the sender's key on each of its NICs; an answer:
// that id and the outcome.  64-bit words in host order.
constexpr size_t kRdvNoteBytes = 72;
constexpr size_t kRdvFinBytes = 16;

struct RdvMsg {
    enum Kind { kNone, kNote, kFin };
    Kind kind;       // kNone: not a rendezvous message, too short, or a bad key count
    uint64_t sender; // the sender's probe id
    uint64_t id;     // the offer's id
    uint64_t tag;    // a note's: the tag of its message
    uint64_t len;    // a note's: the message's length
    uint64_t addr;   // a note's: its bytes at the sender
    int rkeys;       // a note's: keys that follow (1 to 4)
    uint64_t rkey[4];
    int result; // an answer's: 0 read, else the receiver's error
};
RdvMsg parse_rdv(uint64_t tag, const uint8_t *buf, size_t len);

} // namespace efa::control
