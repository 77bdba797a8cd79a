// The matching engine's way to other nodes: its frames carried in the
// provider's untagged messages (FI_MSG), so that mtl_efa can match every
// message itself (the "own" matching path) instead of leaving matching to
// the provider's tagged interface.
//
// What travels.  One provider message holds a NetHdr and one or more
// frames of the engine's format (engine.hpp), each preceded by its
// length and padded to 8 bytes.  The header's first byte (kNetMagic, 0x80
// or above) puts the message in the engine's channel of the core's
// untagged receive pool (efa_core_msg.h), apart from btl_efa's messages;
// its sequence number lets the receiver restore the sender's order
// (net_order.hpp).
//
// Sending works like a ring: reserve() gives room in the peer's open
// message, the engine writes its frame there, commit() closes the frame.
// A peer with fewer than 'window' messages in flight gets the open message
// posted at once, so a lone message never waits; a frame small enough to
// be packed, only while fewer than 'small_window' are.  Beyond that,
// further frames go into the same open message (coalescing: many small
// MPI messages in one provider message) until it reaches coalesce_bytes or
// coalesce_max frames; it is posted when one of the peer's messages
// completes.  (A provider message costs both sides far more than a frame:
// on tcp;ofi_rxm a burst of 64 small messages to one peer went 2x faster
// with small messages packed after 4 in flight than after 16.  Larger
// frames keep the whole window: a stream's bandwidth needs it.)  When it is full and cannot go,
// reserve() says no and the engine queues the frame as it does for a full ring.  The bytes are
// copied into the link's send buffers (registered where the provider needs
// it), so a frame is "written" once committed, as in a ring.
//
// A lone small message goes by inject (no completion to reap, which is
// most of what a message costs here beyond the provider-matched path):
// when nothing is in flight to the peer, the message fits the provider's
// inject size, and no other message went to that peer by inject since the
// owner's last progress call.  The last condition keeps packing alive: a
// burst of sends between two progress calls injects its first message
// only, the rest go as posted sends and fill the window as before.
//
// Credit.  A receiver holds a sender's early messages until the ones
// before them come (net_order.hpp); after one loss the provider may keep
// delivering later ones for a long time.  So a sender posts a message
// numbered seq only below its peer's grant: the receiver grants 'credit'
// messages beyond those it has handed on, carried in every NetHdr it
// sends to that sender, and on its own (a grant message, numbered kNoSeq,
// outside the order and the credit) once a quarter of the credit went
// unsaid.  The credit (16 windows, 256 messages by default) is well above
// what a stream keeps in flight (bench_pt2pt's bw posts 64 at a time), so
// that a stream without a loss never waits for its grant.
// Held memory per sender is then at most credit messages of buf_size
// bytes; nothing is dropped: a sender without credit packs and queues as
// for a full window, and the message that fills the gap releases the held
// ones, whose delivery sends the grant that lets the sender go on.  Every
// process starts from kFirstGrant, granted without a word.
//
// Rails.  A peer's messages go over one NIC of the process's set (the
// owner picks it: Engine::net_peer), with the contexts' receive pools on
// every NIC (efa_core_msg.h), so the receiver takes them wherever they
// come and the sequence numbers keep their order.  Messages longer than
// turn_min (streamed data, beyond an eager message) take every rail that
// reaches the peer in turn (add_turn): one peer's stream has the
// bandwidth of them all, and the receiver's order holds what comes early
// (NetOrder).  On a rail beside the
// first nothing goes by inject: a message in flight there when the rail
// fails is posted again, from its buffer, over the peer's home rail
// (fail_over: the first, while it lasts), and the peer stays there; the
// receiver's order drops the copy of one that had arrived after all.  The
// first rail fails over the same way, to the lowest rail left: a lone
// message injected there to a peer with another rail keeps its buffer
// until the peer's grant shows it handed on (a few per peer; beyond,
// messages go with a completion), so that it can go again.  Only the
// loss of the last rail is the peer's (the core's peer deadline).
//
// Asking.  A message lost after its send completed (a NIC that flushed a
// receive it had taken) leaves a gap only once a later message of its
// stream comes; the last of a burst would leave its receiver waiting for
// ever.  So a receiver that took such a flush asks each peer (ask: a
// grant message numbered kAskSeq), and a peer asked answers with one more
// numbered message, one without a frame (answer, sent as grants are),
// whose number shows the gap to the receiver's order
// (Engine::check_net_gaps).  No other numbered message is empty, so the
// asker knows an answer when it comes, and asks again until it does (the
// flush, or one later, may have taken the ask or the answer too).
//
// Threads: the owner serialises every call (the engine's mutex), and the
// send completions, which come from the core's progress, call the owner's
// 'sent' handler, which takes that mutex before calling release().
#ifndef EFA_ENGINE_NET_HPP
#define EFA_ENGINE_NET_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "efa_core.h"
#include "efa_rma.h"
#include "registered_block.hpp"

namespace efa::engine {

constexpr uint8_t kNetMagic = 0xE5;
constexpr uint8_t kNetVersion = 2;

struct NetHdr {
    uint8_t magic;
    uint8_t version;
    uint16_t frames;
    uint32_t sender; // vpid
    uint64_t seq;    // per (sender, receiver), from 0; kNoSeq: a grant alone
    uint64_t grant;  // the receiver of this may send to its sender below this seq (0: nothing new)
};
static_assert(sizeof(NetHdr) == 24);
constexpr uint64_t kNoSeq = UINT64_MAX;
// A grant alone that also asks its receiver for one more numbered message
// (NetLink::ask): a receive that failed as its NIC flushed may have held
// the last message of a stream, which no later one would show missing.
constexpr uint64_t kAskSeq = UINT64_MAX - 1;
// What a receiver grants before it says anything (both ends know it).
constexpr uint64_t kFirstGrant = 256;

// Before each frame: its length; frames start 8-byte aligned.
struct NetFrameHdr {
    uint32_t len;
    uint32_t pad;
};
constexpr size_t kNetAlign = 8;
inline size_t net_span(size_t len) {
    return sizeof(NetFrameHdr) + ((len + kNetAlign - 1) & ~(kNetAlign - 1));
}

// Walk the frames of one provider message: calls f(frame, len) for each;
// false when the message is malformed (what came before was handed on).
template <class F> bool net_frames(const uint8_t *msg, size_t len, F &&f) {
    if (len < sizeof(NetHdr)) {
        return false;
    }
    NetHdr h;
    __builtin_memcpy(&h, msg, sizeof(h));
    size_t off = sizeof(NetHdr);
    for (uint32_t i = 0; i < h.frames; ++i) {
        NetFrameHdr fh;
        if (len - off < sizeof(fh)) {
            return false;
        }
        __builtin_memcpy(&fh, msg + off, sizeof(fh));
        if (fh.len > len - off - sizeof(fh)) {
            return false;
        }
        f(msg + off + sizeof(fh), static_cast<size_t>(fh.len));
        off += net_span(fh.len);
        if (off > len) {
            off = len; // the last frame's padding may be cut off
        }
    }
    return true;
}

struct NetParams {
    efa_core_t *core = nullptr;
    uint32_t my_vpid = 0;
    // One send buffer: the largest provider message, header included.  No
    // more than tcp;ofi_rxm's eager buffer (16 KiB): at 64 bytes over, every
    // streamed chunk took rxm's large-message protocol, and own matching's
    // latency was 1.4x this one's at 32 KiB and 2x at 128 KiB (2847155,
    // 2026-11-26; docs/PERFORMANCE.md).  Raised where eager messages need more
    // (mtl_efa_net_eager_max), capped by the provider's limit.
    size_t buf_size = 16 * 1024;
    uint32_t max_bufs = 512; // send buffers at most (allocated 32 at a time)
    uint32_t window = 16;    // provider messages in flight per peer
    // ... while a frame that can be packed (at most coalesce_bytes) goes
    // at once only below this many: a burst of small messages packs after
    // its first few, each provider message costing the sender and the
    // receiver far more than a frame (capped at window)
    uint32_t small_window = 4;
    size_t coalesce_bytes = 4096; // a message gathers frames up to this size (0: one frame)
    uint32_t coalesce_max = 64;   // ... and this many frames
    bool inject = true;           // a lone small message by inject (see above)
    bool rail_failover = true;    // a failed rail's messages go again over the first (false:
                                  // its failure is the peer's loss)
    size_t turn_min = SIZE_MAX;   // longer messages take the peer's rails in turn (add_turn)
    // Messages granted beyond those handed on (0: 16 windows); at least
    // kFirstGrant, which a sender assumes before the first grant comes.
    uint64_t credit = 0;
};

struct NetStats {
    uint64_t messages = 0;    // provider messages posted
    uint64_t batched = 0;     // ... of them with more than one frame
    uint64_t frames = 0;      // frames they carried
    uint64_t injected = 0;    // ... of the messages, those that went by inject
    uint64_t grants = 0;      // grant messages sent (not among 'messages')
    uint64_t no_credit = 0;   // times a message found its peer's grant used up
    uint64_t rail_peers = 0;  // peers whose messages went over a rail beside the first
    uint64_t rail_sent = 0;   // ... messages (and grants) posted there
    uint64_t failed_over = 0; // messages posted again over the home rail (their rail failed)
    uint64_t retired = 0;     // buffers never used again: the provider may still read them
    uint64_t turn_peers = 0;  // peers whose longer messages take several rails in turn
    uint64_t turns = 0;       // ... messages sent over a rail beside the first in turn
    uint64_t taken_back = 0;  // rails a peer's messages took again once the core put them back
    uint64_t sent_back = 0;   // ... messages posted over such a rail since
    uint64_t asks = 0;        // asks sent (grant messages numbered kAskSeq; not among 'grants')
    uint64_t answers = 0;     // asks answered with a numbered message
    uint32_t endpoints = 0;   // local endpoints (contexts) the peers are spread over
};

class NetLink {
  public:
    struct Peer;
    struct Buf {
        efa_op_t op; // first: the core hands it back
        NetLink *link;
        Peer *peer;
        uint8_t *data;
        void *desc;   // on the first NIC
        efa_mr_t *mr; // the slab's registration (NULL: none), for the rails' descriptors
        size_t used;
        uint32_t frames;
        int rail; // where it was posted
        // Its failure came while the provider still held it
        // (efa_cqe_t.orphaned): release() never uses it again.
        bool orphaned;
        Buf *next_free;
    };
    struct Peer {
        uint32_t vpid = 0;
        fi_addr_t addr = FI_ADDR_UNSPEC; // on 'rail'
        efa_ctx_t *ctx = nullptr;
        int rail = 0;
        fi_addr_t addr0 = FI_ADDR_UNSPEC; // the same peer on the first rail
        efa_ctx_t *ctx0 = nullptr;
        // The peer on each rail (ctx NULL: not known), and those (bit r)
        // that its messages longer than turn_min take in turn (0: rail
        // alone), the next turn in 'turn'.
        efa_ctx_t *rail_ctx[EFA_MAX_RAILS] = {};
        fi_addr_t rail_addr[EFA_MAX_RAILS] = {};
        uint8_t turn_mask = 0;
        uint8_t turn = 0;
        // The rails that reach p and were not left (bit r), and the one
        // that takes over what a failed rail carried: the first, or the
        // lowest left once the first failed (leave_rail).
        uint8_t live = 1;
        uint8_t home = 0;
        // The rail add_peer gave p, those that took turns (add_turn), and
        // those taken again once the core put them back (take_back).
        uint8_t own_rail = 0;
        uint8_t turn_rails = 0;
        uint8_t back = 0;
        // Messages to p may go by inject: p's rail is the first, and no
        // rail could take over what a failed first rail carried (an
        // injected message has no completion to send it again from).
        bool may_inject = true;
        // ... or, where one could (keep_injected), by inject with its
        // buffer kept (kept, kept_n; linked by next_free) until p's grant
        // says p has handed it on: should the first rail fail, the kept
        // ones go again over the home rail and p drops the copies.
        bool keep_injected = false;
        // The core's rails taken out for p (efa_peer_t.rails_down, bit r:
        // rail r; NULL: not known), which leave_rails_out follows.
        const uint32_t *rails_down = nullptr;
        // ... and those it put back since (efa_peer_t.rails_back, taken
        // by exchange; NULL: not known).
        uint32_t *rails_back = nullptr;
        Buf *kept = nullptr;
        uint32_t kept_n = 0;
        uint32_t inflight = 0;
        uint64_t seq = 0;
        Buf *open = nullptr;               // frames written, not posted yet
        bool waiting = false;              // open found the provider's queue full: in waiting_
        bool injected = false;             // a message went by inject since the last progress()
        int error = 0;                     // a post failed for good: the peer is unreachable
        uint64_t limit = kFirstGrant;      // may post while seq is below (the peer's grant)
        uint64_t grant_out = 0;            // what this process grants the peer now
        uint64_t grant_said = kFirstGrant; // ... and what the peer has heard of it
        bool grant_due = false;            // a grant message waits in grants_
        bool ask_due = false;              // ... and asks for one more numbered message
        bool asking = false;               // asked, no answer from p since (the owner's)
        bool answer_due = false;           // an answer waits in grants_ (or for p's grant)
        bool starved = false;              // a message waits for limit to rise
    };
    // 'sent' is called for every completed provider message (err 0 or a
    // negative libfabric error) from the core's progress, with the owner's
    // lock not held, and with b NULL (under the lock, from inside the
    // link's calls) when a post to p failed for good.
    using SentFn = void (*)(void *owner, Buf *b, Peer *p, int err);

    static std::unique_ptr<NetLink> create(const NetParams &p, SentFn sent, void *owner, int &err);
    ~NetLink();
    NetLink(const NetLink &) = delete;
    NetLink &operator=(const NetLink &) = delete;

    // A peer reached at addr0 through context ctx0 of the first NIC, and
    // whose messages go over rail 'rail' (addr through ctx; the same as
    // addr0 and ctx0 for rail 0).  Owned by the link.
    Peer *add_peer(uint32_t vpid, fi_addr_t addr0, efa_ctx_t *ctx0, int rail, fi_addr_t addr,
                   efa_ctx_t *ctx);
    // Rail r (> 0) reaches p too (addr through ctx): p's messages longer
    // than turn_min take it in turn with the first rail and the others.
    void add_turn(Peer *p, int r, fi_addr_t addr, efa_ctx_t *ctx);
    // The rail of p's next message or read that takes its turn (p's own
    // rail where it has no turns).
    int next_turn(Peer *p);
    // The largest frame one message carries (buf_size is a multiple of
    // kNetAlign: the frame's padding fits too).
    size_t max_frame() const { return params_.buf_size - sizeof(NetHdr) - sizeof(NetFrameHdr); }
    size_t buf_size() const { return params_.buf_size; }
    uint64_t credit() const { return params_.credit; }

    // Room for a frame of len bytes to p, or nullptr (wait and retry).
    void *reserve(Peer *p, size_t len);
    void commit(Peer *p, size_t len);
    // A completed message's buffer goes back (called by the owner's
    // 'sent' handler, under its lock); p's open message may go now.  One
    // the provider may still read (orphaned) is retired instead.
    void release(Buf *b);
    // b's post failed (err from its completion): its rail leaves the peer
    // and b goes again over the peer's home rail, with its peer from now
    // on.  True when it went or waits to (its buffer stays in flight);
    // false when b's rail was the peer's last, failover is off, or the
    // post failed for good (release it and fail the peer as before).
    bool fail_over(Buf *b);
    // Every peer leaves the rails the core took out for it (its deadline,
    // or the peer's notice) while another rail is left: the messages kept
    // from inject go again (resend_kept).  Called by the owner now and then
    // (not on every progress call): a kept message has no completion to
    // fail, and a round trip waiting on it posts nothing else that the
    // core could refuse.
    // ... and takes again the rails it left so whose loss the core
    // undid (the peer answered over them: core_rail_back.cpp), with their
    // turns: a NIC back after a fault carries messages again.
    void leave_rails_out();
    // Post messages that found the provider's queue full, and grants that
    // could not go; a peer may have a message injected again.
    // Inline test first: the engine calls it on every progress call, and
    // with no peer waiting, no grant due, nothing injected and nothing to
    // send again it has nothing to do (pending_: one load for the four).
    void progress() {
        if (pending_) {
            progress_pending();
        }
    }
    // p granted this process messages below 'grant' (from any NetHdr of p's).
    void granted(Peer *p, uint64_t grant);
    // This process has handed on 'delivered' messages of p's: p may send
    // credit more; said by a grant message once a quarter of the credit
    // went unsaid (else with the next message to p).
    void delivered(Peer *p, uint64_t delivered);
    // The grant messages delivered() found due, unless a message to their
    // peer carried them meanwhile (also from progress()).
    void send_grants();
    // Ask p for one more numbered message (a grant message numbered
    // kAskSeq; p->asking set), and answer p's ask (a numbered message with
    // no frame; without credit, once p grants more): both sent from
    // progress(), as grants are.
    void ask(Peer *p);
    void answer(Peer *p);
    // The owner failed p (err): what was written to p and not posted never
    // goes (a message waiting for p's grant or for the provider's queue),
    // and nothing more is written to p.
    void abandon(Peer *p, int err);
    // Messages posted and not completed, or written and not posted, or
    // grants not sent.
    bool idle() const {
        return 0 == inflight_ && waiting_.empty() && open_ == 0 && grants_.empty() &&
               resend_.empty();
    }
    efa_core_t *core() const { return params_.core; }
    const NetStats &stats() const { return stats_; }

  private:
    void free_or_retire(Buf *b); // (orphaned: retired)
    void progress_pending();
    NetLink() = default;
    Buf *get_buf();
    bool post(Peer *p);
    bool send_grant(Peer *p);
    int post_buf(Peer *p, Buf *b, int rail);
    int send_on(Peer *p, Buf *b, int rail);
    void drop_rail(Peer *p, int rail);
    void take_back(Peer *p, uint8_t rails);
    bool send_answer(Peer *p);
    void set_inject(Peer *p) const;
    bool can_keep(const Peer *p) const;
    void keep(Peer *p, Buf *b);
    void confirm_kept(Peer *p);
    void resend_kept(Peer *p);
    bool leave_rail(Peer *p, int rail);
    bool has_credit(const Peer *p) const { return p->seq < p->limit; }
    static void on_complete(efa_op_t *op, const efa_cqe_t *cqe);

    NetParams params_;
    SentFn sent_ = nullptr;
    void *owner_ = nullptr;
    std::vector<std::unique_ptr<Peer>> peers_;
    std::vector<efa::RegisteredBlock> slabs_;
    std::vector<std::unique_ptr<Buf[]>> bufs_;
    Buf *free_ = nullptr;
    uint32_t nbufs_ = 0;
    uint32_t inflight_ = 0;
    uint32_t open_ = 0;    // peers with an open message
    uint32_t retired_ = 0; // buffers never used again (fail_over, orphaned)
    uint32_t kept_ = 0;    // injected messages' buffers kept (Peer::kept), all peers
    std::vector<Peer *> waiting_;
    std::vector<Peer *> injected_; // peers with injected set
    std::vector<Peer *> grants_;   // peers with grant_due set
    std::vector<Buf *> resend_;    // failed over, found the first rail's queue full
    // One of injected_, grants_, waiting_ and resend_ is not empty (set
    // with every push, cleared by progress_pending once all are).
    bool pending_ = false;
    size_t inject_max_ = 0;         // the provider's inject size (0: never)
    std::vector<efa_ctx_t *> ctxs_; // the distinct contexts peers were given
    NetStats stats_;
};

} // namespace efa::engine

#endif
