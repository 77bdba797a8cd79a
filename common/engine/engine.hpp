// The matching engine: MPI-style tagged messages with matching of its own
// (mtl_efa's engine path).  Two transports: the shared-memory rings to the
// processes of this node, described here, and, under own matching, the net
// link to peers on other nodes (net_link.hpp), which carries the same frames
// in provider messages.
//
// Rings.  Every process owns one inbox (shm_ring.hpp): one
// single-producer ring per local rank of the job.  A process sends to a
// peer by writing frames into its own ring of the peer's inbox, so the
// frames of one sender reach one receiver in the order they were written.
//
// Protocols, chosen by size (a frame is one ring slot):
//   eager       header + bytes in one frame.  Complete at the sender once
//               written; a synchronous send waits for an ACK sent when the
//               receiver matches it.
//   rendezvous  larger messages: an RTS frame with the length, the
//               address of the bytes and the sender's pid.  When it
//               matches, the receiver copies the bytes straight out of the
//               sender with process_vm_readv (single copy) and answers
//               FIN; where the kernel refuses that (ptrace_scope, another
//               pid namespace: checked once per sender by reading a cookie
//               the sender named) it answers CTS instead and the sender
//               streams DATA frames into the ring, which the receiver
//               copies into the receive buffer.  The send completes on FIN
//               or when its last DATA frame is written.
// Device memory (efa_device.h).  A send from a device buffer to a peer of
// this node (from efa_engine_node_device_min up) is a rendezvous: its RTS carries the
// device's IPC handle of the buffer, and the receiver copies the bytes
// with the device's copy straight into its receive (GPU to GPU: into the
// receive's device buffer when it has one), after importing the handle
// once per allocation (kept per peer, the least recently used dropped
// past kIpcKept or kIpcKeptBytes).  Where the import or the copy fails it answers CTS and
// the sender copies its buffer to the host in one device copy and streams
// DATA frames from there; single copy never reads device memory.
// Control frames (ACK, FIN, CTS) and DATA name the request they are about
// by an id the other side gave: an index and a generation into that
// side's table of requests waiting for an answer (IdTable), never an
// address, so a corrupted or stale id finds nothing and is dropped.
//
// Cancelling a send (kCancel, any size and mode): the receiver withdraws
// the message if it still waits unexpected, and the send is cancelled.
// The message is named by its number among its sender's messages to this
// receiver: both sides count the message frames (Peer::sent, arrived_),
// which one sender's ring or provider stream delivers in the order
// written, and the ring a frame came by says who sent it; so no frame
// carries the number, a short frame's header stays 16 bytes, and the hot
// path pays an increment on each side.
//
// Trust.  Frames come out of shared memory another process writes, so
// each is checked before anything acts on it: lengths against the frame,
// a sender's vpid against the job's size and against the ring the frame
// came in by (the sender's local rank, from the card it published), a
// request id against the table and the request's state and peer, a DATA
// offset against the bytes still expected.  What fails is dropped and
// counted (stats.dropped), never followed.
//
// Matching (match.hpp) is MPI's: frames are matched in the order
// they are read, and each sender's frames are read in the order written,
// which gives non-overtaking per (sender, communicator).
//
// Nothing spins on a full ring: a frame that does not fit waits in the
// peer's queue (in order behind every earlier message to that peer) and
// progress writes it later.  A receiver always drains its inbox (an
// unexpected small message is copied out), so queues always empty.
//
// Other nodes (mtl_efa's own matching).  Given the core, the engine also
// reaches peers that have no inbox on this node: the same frames travel
// in the provider's untagged messages (net_link.hpp), several packed in
// one when they queue up, with a sequence number that restores each
// sender's order on arrival (net_order.hpp).  Matching, the protocols and
// the checks are the ones above, but single copy is never tried with a
// peer on another node: where the provider has FI_RMA, a large message's
// RTS names the sender's registered buffer and the receiver reads it by
// RMA, then answers FIN (engine_read.cpp); otherwise, or when the
// read fails, its RTS is answered CTS and the bytes stream as DATA frames.
// A peer the provider cannot reach any more (a failed send), or a process
// of this node that died, fails every request waiting on it, and every
// receive on MPI_ANY_SOURCE whose communicator it belongs to (ULFM's rule:
// engine_watch.cpp).
//
// Threads: with thread_safe every call takes the engine's mutex;
// completion callbacks are always called after it is released.
#ifndef EFA_ENGINE_ENGINE_HPP
#define EFA_ENGINE_ENGINE_HPP

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "efa_engine.h"
#include "efa_cma.h"
#include "efa_device.h"
#include "net_order.hpp"
#include "match.hpp"
#include "net_link.hpp"
#include "node.hpp"
#include "shm_ring.hpp"

namespace efa::engine {

// kCancel: a sender asks the receiver to withdraw an unmatched message,
// named by its number among the sender's messages to the receiver (which
// both count: no message frame carries it); kCancelled: withdrawn, the
// send is cancelled.  A matched message gets no answer, its ACK, FIN or
// DATA completes the send as usual, unless the kCancel asks for one
// (kFrameAnswer: a send complete already, which nothing else would
// answer): kKept.
enum FrameType : uint8_t {
    kEager = 1,
    kRts,
    kAck,
    kFin,
    kCts,
    kData,
    kEagerShort,
    kCancel,
    kCancelled,
    kKept
};

// Every frame starts with this header.  A standard-mode eager message
// (kEagerShort) carries only its first kShortHdr bytes: nobody answers
// it, so it needs neither sender nor id (a cancel names it by its number,
// which no frame carries), and a 40-byte message then still
// fits the slot's first cache line, which is the one line the receiver
// waits for.
constexpr size_t kShortHdr = 16;
struct FrameHdr {
    uint8_t type;
    uint8_t flags;
    uint16_t pad;
    uint32_t cid;
    int32_t src;
    int32_t tag;
    uint32_t sender; // vpid; from here on not in kEagerShort frames
    uint32_t pad2;
    uint64_t id; // a request of the sender (eager/RTS/ACK/FIN/CTS) or receiver (DATA)
};
static_assert(sizeof(FrameHdr) == 32);

struct RtsBody {
    uint64_t len, addr, cookie_addr, cookie;
    uint32_t pid;
    uint32_t rails;       // a read offer: NICs the buffer is registered on (cookie: the first's)
    uint64_t rail_key[3]; // its key on the sender's NIC 1, 2, 3
};
struct CtsBody {
    uint64_t recv_id;
};
struct DataBody {
    uint64_t offset;
};
struct CancelBody {
    uint64_t seq; // the message's number (Message::seq)
};

// Takes the engine's mutex only when threads share it.
class Guard {
  public:
    Guard(std::mutex &mu, bool on) : mu_(on ? &mu : nullptr) {
        if (mu_) {
            mu_->lock();
        }
    }
    ~Guard() {
        if (mu_) {
            mu_->unlock();
        }
    }
    Guard(const Guard &) = delete;
    Guard &operator=(const Guard &) = delete;

  private:
    std::mutex *mu_;
};

// Request states (efa_engine_req_t.state).
enum ReqState : uint8_t {
    kIdle = 0,
    kPosted,     // receive in the posted queue
    kRecvData,   // receive matched, waiting for DATA frames
    kRecvRead,   // receive matched, reading the bytes from a peer on another node by RMA
    kSendQueued, // message waiting for ring room
    kWaitAck,    // synchronous eager send written, waiting for the match
    kWaitFin,    // RTS written, waiting for FIN or CTS
    kStreaming,  // writing DATA frames
    kHeld,       // partnered receive: a message waits for the other half's cancel
    kRecall,     // send complete already: the receiver is asked to withdraw it
    kDone,
};

// Request flags (efa_engine_req_t.flags): one list, so no two share a bit.
constexpr uint8_t kReqSync = 1;
constexpr uint8_t kReqRndv = 2;
constexpr uint8_t kReqPartner = 4; // a receive posted elsewhere too
constexpr uint8_t kReqArmed = 8;   // ... and that other half is posted
constexpr uint8_t kReqCancel = 16; // send: kCancel written or queued
constexpr uint8_t kReqSwept = 32;  // ANY_SOURCE receive: seen posted by a watch sweep
// A send that holds something until it finishes (release_held): its
// buffer's registration, for a receiver on another node to read
// (req->net_mr), or its device buffer's export to a peer of this node
// (req->ipc_held).
constexpr uint8_t kReqHeld = 64;
// kReqLocal = 128 (match.hpp): a receive only this node can match.

// Frame flags (FrameHdr.flags).
constexpr uint8_t kFrameSync = 1; // eager frame: answer ACK on match
// An RTS frame from another node whose bytes may be read by RMA: its body
// then carries the remote address and key in place of the single-copy
// fields.
constexpr uint8_t kFrameRead = 2;
// A kCancel frame that wants an answer either way (kCancelled or kKept).
constexpr uint8_t kFrameAnswer = 4;
// An RTS whose bytes are device memory: an efa_device_ipc_t follows its
// RtsBody (alloc_len 0: the sender has no handle; answer CTS).
constexpr uint8_t kFrameDevice = 8;
// A DATA frame whose bytes the sender's device could not read: the
// receive fails (its bytes are not the message's).
constexpr uint8_t kFrameFailed = 16;
// Device allocations of one peer kept imported, and their bytes past the latest
constexpr size_t kIpcKept = 16; // (each holds the peer's memory, even freed, until closed)
constexpr uint64_t kIpcKeptBytes = uint64_t{1} << 30;

// What deliver() is told a frame came by: a ring (the sender's local
// rank), or the provider, from the vpid a provider message named.
constexpr uint32_t kNetVia = 0x80000000u;

// Requests this side named in a frame and waits for an answer about:
// id = generation << 32 | index, so an id from a corrupted frame, or one
// of a request finished since, finds nothing.
class IdTable {
  public:
    uint64_t add(efa_engine_req_t *req);
    efa_engine_req_t *find(uint64_t id) const;
    void remove(uint64_t id);
    size_t live() const { return entries_.size() - free_.size(); }
    // Every request in the table, with its id.
    template <class F> void each(F &&f) const {
        for (size_t i = 0; i < entries_.size(); ++i) {
            if (entries_[i].req) {
                f(entries_[i].req, static_cast<uint64_t>(entries_[i].gen) << 32 | i);
            }
        }
    }

  private:
    struct Entry {
        efa_engine_req_t *req = nullptr;
        uint32_t gen = 0;
    };
    std::vector<Entry> entries_;
    std::vector<uint32_t> free_;
};

// The inbox file of process 'vpid'.
std::string inbox_path(const std::string &dir, const std::string &job_tag, uint32_t vpid);

class Engine {
  public:
    static std::unique_ptr<Engine> create(const efa_engine_params_t &p, int &err);
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    template <bool kDevice>
    int send(uint32_t peer, uint32_t cid, int32_t src, int32_t tag, const void *buf, size_t len,
             bool sync, efa_engine_req_t *req);
    int recv(uint32_t cid, int32_t src, int32_t tag, efa_engine_req_t *req, bool local);
    int recv_partnered(uint32_t cid, int32_t src, int32_t tag, efa_engine_req_t *req);
    int partner_done(efa_engine_req_t *req, bool matched);
    void partner_armed(efa_engine_req_t *req);
    int probe(uint32_t cid, int32_t src, int32_t tag, bool claim, efa_engine_probe_t *out);
    void comm_freed(uint32_t cid);
    int mrecv(Message *m, efa_engine_req_t *req);
    bool cancel(efa_engine_req_t *req);
    int cancel_send(efa_engine_req_t *req);
    int progress();

    const std::string &path() const;
    efa_engine_card_t my_card() const;
    uint64_t dropped() const {
        // (poll_inbox_: this engine's inbox, its own or the node's)
        // (read without the lock, as drop() and the order's counts are written)
        return __atomic_load_n(&stats.dropped, __ATOMIC_RELAXED) +
               (poll_inbox_ ? poll_inbox_->dropped() : 0) + order_.dropped();
    }
    size_t node_device_min() const; // (efa_engine_node_device_min)
    // The provider's eager and packing limits as they apply (its largest
    // message caps what the parameters asked); both 0 without it.
    void net_limits(size_t *eager, size_t *coalesce) const;
    // Test only: run in recv_partnered once post_recv released the lock,
    // where another thread's progress may come (EnginePartner).
    void (*after_partner_post)(void *) = nullptr;
    void *after_partner_post_arg = nullptr;
    void get_stats(efa_engine_stats_t *out) const;
    efa_engine_stats_t stats{};

  private:
    // The core's peer deadline watching a peer on another node that this
    // engine waits on (engine_watch.cpp).
    struct Watch {
        efa_op_t op{}; // first: the core hands it back
        Engine *engine = nullptr;
        uint32_t vpid = 0;
        bool on = false;     // the core watches the peer
        bool waited = false; // the sweep's scratch (a peer of this node's too)
    };
    struct Ctrl {
        FrameHdr hdr;
        CtsBody cts; // kCts; a kCancel's CancelBody, of the same size
        uint32_t len;
    };
    // A peer's device allocation imported (efa_device_ipc_import).
    struct IpcMap {
        efa_device_ipc_t key; // its handle and length (offset 0)
        void *base;
    };
    struct Peer {
        Peer() = default;
        Peer(const Peer &) = delete;
        Peer &operator=(const Peer &) = delete;
        ~Peer() {
            for (const IpcMap &m : ipc) {
                efa_device_ipc_close(m.base);
            }
            efa_cma_exit_unwatch(exit_fd);
        }
        uint32_t vpid = 0;
        uint32_t ring = 0; // its local rank: the ring of this inbox its frames come by
        // From its card: the one process single copy reads its messages
        // from (0: none), and the cookie that proves this pid is that
        // process.  An RTS naming another pid is corrupted (pid_ok).
        uint32_t pid = 0;
        uint64_t cma_cookie_addr = 0, cma_cookie = 0;
        int exit_fd = -1; // on this node: its process's exit, that pid proven (engine_watch.cpp)
        std::unique_ptr<shm::Outbox> out;  // on this node; else:
        NetLink::Peer *net = nullptr;      // through the provider
        const efa_peer_t *rails = nullptr; // its addresses on every rail (striped reads)
        size_t eager_max = 0, data_max = 0;
        int error = 0;         // unreachable: sends to it fail
        List sends;            // messages waiting for room, in order
        List streams;          // sends streaming DATA after a CTS
        std::deque<Ctrl> ctrl; // control frames waiting for room
        enum { kCmaUnknown, kCmaOn, kCmaOff } cma = kCmaUnknown;
        bool in_busy = false;    // listed in busy_
        uint64_t sent = 0;       // message frames written to it (Message::seq)
        std::vector<IpcMap> ipc; // its device allocations imported, the latest used last
        // Handles whose import failed (the latest last, kIpcKept at most):
        // not tried again, their messages stream at once.
        std::vector<efa_device_ipc_t> ipc_refused;
        Watch watch;
        bool busy() const { return !sends.empty() || !streams.empty() || !ctrl.empty(); }
    };

    Engine() = default;
    void *reserve(Peer *p, size_t len) {
        return p->out ? p->out->reserve(len) : net_->reserve(p->net, len);
    }
    void commit(Peer *p, size_t len) {
        if (p->out) {
            p->out->commit(len);
        } else {
            net_->commit(p->net, len);
        }
    }
    Peer *net_peer(uint32_t vpid, int &err);
    static void net_sent(void *owner, NetLink::Buf *b, NetLink::Peer *np, int err);
    static void net_message(void *arg, efa_ctx_t *ctx, void *buf, size_t len, int err,
                            fi_addr_t src);
    // rail: the NIC it came in on (src is an address of that NIC's table).
    void on_net(const uint8_t *msg, size_t len, fi_addr_t src, int rail);
    void on_net_locked(const uint8_t *msg, size_t len, fi_addr_t src, int rail);
    bool net_sender_ok(uint32_t vpid, fi_addr_t src, int rail);
    void net_in_order(const uint8_t *msg, size_t len);
    void net_granted(uint32_t vpid, uint64_t grant);
    void net_delivered(uint32_t sender);
    void net_answer(uint32_t sender);
    void net_answered(uint32_t sender);
    void ask_peers();
    struct LostStream {
        fi_addr_t addr;
        std::string why;
    };
    void check_net_gaps();
    void report_lost();
    std::vector<LostStream> lost_; // found by check_net_gaps, reported by progress()
    std::vector<uint32_t> exited_; // processes of this node node_check found gone: the same
    void fail_peer(uint32_t vpid, int err);
    // Peers (vpid, error) whose posts failed for good while a write was
    // under way: failed by fail_noted() once it is done (engine_net.cpp).
    std::vector<std::pair<uint32_t, int>> net_failed_;
    // Inline test first: called on every send and progress call, and
    // almost always with nothing noted.
    void fail_noted() {
        if (!net_failed_.empty()) [[unlikely]] {
            fail_noted_peers();
        }
    }
    void fail_noted_peers();
    void watch_sweep();
    void watch_peer(Peer *p);
    uint32_t source_of(const efa_engine_req_t *posted) const;
    std::vector<uint32_t> members_of(uint32_t cid) const;
    void note_any_source(efa_engine_req_t *posted, std::vector<uint32_t> &cids);
    // (cid, whether the lost peer is a member), asked once per fail_peer.
    using Membership = std::vector<std::pair<uint32_t, bool>>;
    bool any_source_hears(const efa_engine_req_t *posted, uint32_t vpid, Membership &known) const;
    bool member_of(uint32_t cid, uint32_t vpid, Membership &known) const;
    Peer *waited_peer(uint32_t vpid, bool remote);
    bool sent_here(const efa_engine_card_t &card) const;
    void node_check(Peer *p);
    // Blocking probes (engine_watch.cpp): pml cm's MPI_Probe calls
    // probe() until it finds a message, so each miss notes what it waited
    // on, for the sweeps to watch; one that waits on a lost peer fails.
    struct ProbeWait {
        uint32_t cid;
        int32_t src;    // a rank, or EFA_ENGINE_ANY
        uint8_t sweeps; // sweeps still to watch it for (renewed by each miss)
        int err;        // a peer it waits on was lost
    };
    std::vector<ProbeWait> probe_waits_;
    int probe_missed(uint32_t cid, int32_t src);
    void probe_sweep(std::vector<uint32_t> &any_cids, bool remote);
    void probe_lost(uint32_t vpid, int err, Membership &known);
    void unwatch_all();
    static void watch_lost(efa_op_t *op, const efa_cqe_t *cqe);
    uint32_t watch_calls_ = 0;   // progress calls since the sweeps (watches, rails out) last ran
    uint64_t watch_next_ms_ = 0; // when the next sweep is due
    bool net_idle() const;
    int post_recv(uint32_t cid, int32_t src, int32_t tag, efa_engine_req_t *req, uint8_t flags);
    // A known peer inline (every send looks its peer up); the first look
    // at one sets it up (peer_first).
    Peer *peer(uint32_t vpid, int &err) {
        if (vpid < peers_.size() && peers_[vpid]) [[likely]] {
            return peers_[vpid].get();
        }
        return peer_first(vpid, err);
    }
    Peer *peer_first(uint32_t vpid, int &err);
    bool from_ring(uint32_t ring, uint32_t vpid);
    efa_engine_req_t *answered(uint32_t ring, const FrameHdr &h, uint8_t state);
    bool drop();
    bool write_message(Peer *p, efa_engine_req_t *req);
    bool write_ctrl(Peer *p, const Ctrl &c);
    void mark_busy(Peer *p);
    void send_ctrl(uint32_t vpid, uint8_t type, uint64_t id, uint64_t body, uint8_t flags = 0);
    bool flush(Peer *p);
    void flush_all();
    bool deliver(uint32_t ring, const void *frame, size_t len);
    Message *make_message(const FrameHdr &h, const RtsBody &b, const uint8_t *body, size_t blen,
                          uint32_t via, uint64_t seq);
    uint64_t count_arrival(uint32_t ring);
    void on_cancel(uint32_t ring, const FrameHdr &h, const uint8_t *body, size_t blen);
    void on_cancel_answer(uint32_t ring, const FrameHdr &h);
    bool hand_over(Message *m);
    void hold(Message *m, efa_engine_req_t *req);
    bool take(Message *m, efa_engine_req_t *req);
    bool pull(efa_engine_req_t *req, const FrameHdr &h, const RtsBody &b,
              const efa_device_ipc_t *ipc);
    bool pull_device(Peer *p, efa_engine_req_t *req, const FrameHdr &h, const RtsBody &b,
                     const efa_device_ipc_t &ipc);
    void *ipc_base(Peer *p, const efa_device_ipc_t &ipc, const void *near);
    // A device message to this process itself: the buffer's address in
    // place of a handle (self_ipc), read back by the receiver (self_base;
    // nullptr: not such a name).
    static void self_ipc(const efa_engine_req_t *r, efa_device_ipc_t *out);
    static void *self_base(const efa_device_ipc_t &ipc);
    void stage_device_send(efa_engine_req_t *req);
    size_t stage_piece(const efa_engine_req_t *req) const;
    const uint8_t *staged(efa_engine_req_t *req, size_t &n);
    static void unstage(efa_engine_req_t *req) {
        free(req->stage);
        req->stage = nullptr;
    }
    void ipc_forget(Peer *p, void *base);
    void on_data(efa_engine_req_t *req, const uint8_t *bytes, size_t n, uint8_t flags);
    void stream_to_device(efa_engine_req_t *req);
    void finish(efa_engine_req_t *req) {
        if (req->flags & kReqHeld) {
            release_held(req);
        }
        done_.push_back(&req->link);
    }
    void run_completions();
    bool cma_ok(Peer *p);
    bool pid_ok(uint32_t vpid, uint32_t pid);
    // Rendezvous by RMA read with peers on other nodes (engine_read.cpp).
    struct ReadOp;
    bool offer_read(Peer *p, efa_engine_req_t *r, RtsBody &b);
    bool read_from(Peer *p, efa_engine_req_t *req, const FrameHdr &h, const RtsBody &b);
    bool post_read(Peer *p, efa_engine_req_t *req, const FrameHdr &h, const RtsBody &b, size_t n,
                   efa_mr_t *mr, bool into_device);
    static void read_done(void *arg, int err);                // arg: the ReadOp
    static void read_landed(void *arg, size_t off, size_t n); // a device receive's piece
    void end_read(ReadOp *ro);
    void release_held(efa_engine_req_t *r);
    void orphan_reads();
    bool read_on_ = false;   // the provider has FI_RMA and net_read_min is set
    int rails_ = 1;          // NICs of this process (efa_core_info_t.num_nics)
    uint32_t next_rail_ = 0; // the rail of the next peer on another node (net_peer)
    int nctx_ = 1;           // contexts per NIC: the stride of a peer's addresses
    size_t stripe_min_ = 0;  // reads from this size striped over the rails (0: never)
    size_t read_piece_ = 0;  // the largest single read the provider takes
    std::vector<ReadOp *> reads_;

    efa_engine_params_t params_{};
    std::string dir_, job_tag_;
    std::unique_ptr<shm::Inbox> inbox_; // of its own (no node)
    node::Node *node_ = nullptr;        // or the shared one's channel params_.channel
    // What progress() polls: the rings of this engine's channel (either inbox).
    shm::Inbox *poll_inbox_ = nullptr;
    uint32_t poll_first_ = 0, poll_count_ = 0;
    size_t eager_max_ = 0;
    size_t data_max_ = 0;
    std::vector<std::unique_ptr<Peer>> peers_; // by vpid, below params_.nprocs
    IdTable ids_;
    // Message frames (eager, RTS) that came from each sender, by the ring
    // they come by (a ring of the inbox: its index; the provider:
    // poll_count_ + the sender's vpid): the number of the latest one, as
    // the sender counts them too (Peer::sent).
    std::vector<uint64_t> arrived_;
    std::vector<Peer *> busy_; // peers with something queued
    Matcher match_;
    List done_;    // completed, callbacks not yet called
    int held_ = 0; // messages held for partnered receives: no frame is read meanwhile
    // Partnered receives whose other half must be cancelled: called once the
    // mutex is released (the caller's cancel takes the provider's locks).
    std::vector<efa_engine_req_t *> cancels_;
    // The cancels being called now, and by which thread.  With threads the
    // other half can complete in another thread while its cancel is being
    // called: partner_done waits for the call to return (and drops a cancel
    // still queued), so that no cancel reaches a request already handed back
    // to its owner, who may have reused it.
    struct CancelCall {
        efa_engine_req_t *req;
        std::thread::id by;
    };
    std::vector<CancelCall> cancelling_;
    std::condition_variable cancel_returned_;
    void run_cancels();
    // (under the mutex, with threads) until no other thread calls req's cancel
    void wait_for_cancel(std::unique_lock<std::mutex> &lock, efa_engine_req_t *req);
    // What this process names in its RTS frames so that a receiver can
    // check that process_vm_readv reaches it (efa_cma.h).
    uint64_t cookie_ = 0, cookie_addr_ = 0;
    std::mutex mu_;
    bool mt_ = false;
    // Other nodes.
    std::unique_ptr<NetLink> net_;
    NetOrder order_;
    bool interest_ = false; // holding the core's net interest (efa_core_net_interest)
    uint64_t net_received_ = 0;
    uint64_t net_grants_received_ = 0; // grant messages alone (outside the order)
    // Receives of the provider's pool that failed (not cancelled): each lost
    // a message of some peer on another node (ofi_rxd reports FI_ETRUNC
    // under load); its stream then waits for it (check_net_gaps).
    uint64_t net_lost_ = 0;
    uint32_t net_rail_completed_ = 0;   // (for params_.net_debug_fail_rail_send)
    uint64_t net_rail_recv_failed_ = 0; // receives a rail beside the first failed (not a loss)
    int net_lost_err_ = 0;
    uint32_t gap_calls_ = 0;
    // Any of the net link's test hooks (net_debug_lose, _delay, _swap) on:
    // the one branch a provider arrival pays for them when they are off.
    bool net_test_hooks_ = false;
    uint32_t net_arrived_ = 0;           // (for params_.net_debug_lose and net_debug_delay)
    uint32_t net_first_arrived_ = 0;     // (for params_.net_debug_flush_first)
    uint64_t net_first_recv_failed_ = 0; // of net_rail_recv_failed_, on the first NIC
    // A receive failed as its NIC flushed: the next sweep asks every peer
    // for one more numbered message (ask_peers; net_link.hpp, "Asking"),
    // and the sweeps after ask again, every kAskAgainMs, those that did
    // not answer yet (net_asking_).
    bool net_ask_due_ = false;
    bool net_asking_ = false;
    uint64_t net_asked_ms_ = 0;
    // The test hook (params_.net_debug_swap): a message held back until
    // the next one is in (or a few progress calls pass), then handed on
    // after it.
    std::vector<uint8_t> swap_held_;
    int swap_age_ = 0;
    // The test hook (params_.net_debug_delay): that message held back for
    // kDelayCalls progress calls, as one the provider delivers late.
    static constexpr uint32_t kDelayCalls = 1u << 14;
    std::vector<uint8_t> delayed_;
    fi_addr_t delayed_src_ = FI_ADDR_NOTAVAIL; // its source (efa_cqe_t.src)
    int delayed_rail_ = 0;                     // ... and the rail it came in on
    uint32_t delay_age_ = 0;
};

} // namespace efa::engine

struct efa_engine {
    std::unique_ptr<efa::engine::Engine> engine;
};

#endif
