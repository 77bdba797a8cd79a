// The process-wide core: one per process, shared by the MTL and the BTL.
// It owns the provider selection, the NIC(s), the peer table, the MR cache
// and the progress loop.
#pragma once

#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <rdma/fi_errno.h>
#include <rdma/fi_domain.h> // (FI_HMEM_DEVICE_ONLY: in fabric.h before libfabric 2.0)

#include "core_report.hpp"
#include "efa_device.h"
#include "efa_core.h"
#include "efa_core_rdv.h"
#include "fi_failures.hpp"
#include "fi_mr_backend.hpp"
#include "mr_cache.hpp"
#include "nic.hpp"
#include "peer_blob.hpp"
#include "peer_deadline.hpp"
#include "rail_back.hpp"
#include "provider_options.hpp"
#include "provider_select.hpp"
#include "efa_tag.h"

namespace efa {

// The NICs beside the first, opened as rails (core_rails.cpp);
// 'domains' gains each one's domain for the registration backend.
void open_rails(efa_core *core, const std::vector<const fi_info *> &rail_infos,
                std::vector<FiMrBackend::Domain> *domains);
struct RdvState; // core_rdv.cpp

// A peer's addresses on the rails, by 'pairing' (pair_rails), inserted in
// each rail's AV under peers_lock; and removed again.
void insert_peer_rails(efa_core *core, efa_peer_t *peer, const PeerBlob &pb,
                       const std::vector<int> &pairing);
void remove_peer_rails(efa_core *core, efa_peer_t *peer);
// At release, before the registrations go: the rails' endpoints closed,
// but those of a rail that lost a peer left open (core_rails.cpp).
void close_rail_endpoints(efa_core *core);
// What is left for the process's exit on purpose (a rail left open, what
// its provider still holds): kept reachable, so that a leak checker tells
// it from a leak.
void keep_for_exit(void *p);

// How the core's registration cache serves acquires: remote rights exact
// (a key grants every right of its registration to whoever holds it), and
// no reuse at all where freed memory goes unreported.
MrCacheConfig mr_cache_config(const efa_core_params_t &params);

// A zero-byte control message (an answer to a ping, a rail-out notice)
// that found the queue full: posted again from progress (probe_send.cpp).
struct ControlDue {
    efa_ctx *ctx;
    fi_addr_t to;
    uint64_t tag;
};

} // namespace efa

struct efa_msg_pool; // core_msg.cpp: untagged receive buffers (btl_efa)

struct efa_core {
    efa_core_params_t params{};
    std::string include_str, exclude_str; // own the strings params point to
    std::string nic_include_str, nic_exclude_str, gpu_str;
    efa::Reporter rep;
    efa::FailureLog failures; // failed libfabric calls, said once per kind
    std::atomic<bool> registration_refused_said{
        false};             // [registration-refused] (locked_memory.hpp)
    efa::CoreReport report; // the verbose-1 report (core_report.hpp)
    efa::Selection selection;
    std::unique_ptr<efa::Nic> nic;
    // The other NICs of the process's set (rails 1..), opened beside nic
    // when the set has several (common_efa_nics_per_proc): they carry
    // one-sided transfers striped over every NIC.  Empty with one NIC.
    std::vector<std::unique_ptr<efa::Nic>> rails;
    // What every endpoint, on every NIC, took of the provider's switches
    // (merge_switches): the first NIC's, less what another took otherwise.
    efa::ProviderSwitches switches;
    std::vector<uint32_t> fabric_ids; // of nic, then of each rail (peer_blob.hpp)
    std::atomic<bool> rail_lost_any[efa::kMaxRails] = {}; // a peer was lost on rail r
    // Peers whose first rail is out now (rail0_lost; put_back when it is
    // back): while some are, posts on it must look (rail0_out).
    // rail0_pinned: what keeps the first rail the peer's
    // (efa_core_pin_rail0), whose loss is then the peer's.
    std::atomic<int> rail0_out_peers{0};
    std::atomic<const char *> rail0_pinned{nullptr};
    // A rail's address of a peer -> the peer's rail-0 address for the same
    // context: the peer deadline knows processes by their rail-0 addresses
    // (under peers_lock; filled only where rails exist).
    std::unordered_map<fi_addr_t, fi_addr_t> rail_primary[efa::kMaxRails];
    std::unique_ptr<efa::FiMrBackend> mr_backend;
    std::unique_ptr<efa::MrCache> mr_cache;
    // Device allocations, where the provider carries them (info.hmem).
    std::unique_ptr<efa::FiMrBackend> dev_mr_backend;
    std::unique_ptr<efa::MrCache> dev_mr_cache;
    std::atomic<uint64_t> dev_mr_stale{0}; // registrations of freed allocations replaced
    // Allocations without synchronous memory operations: handed to the
    // provider (efa_core_hmem_vmm_allowed, and why), or copied through the
    // host (the buffers so refused).
    bool dev_vmm_ok = true;
    const char *dev_vmm_why = "";
    std::atomic<uint64_t> dev_vmm_staged{0};
    // Device allocations (by id) the provider refused to register, the 16
    // last: not asked again (each message would pay a registration).
    std::mutex dev_refused_lock;
    std::array<uint64_t, 16> dev_refused{};
    size_t dev_refused_next = 0;
    // Posts of device registrations the provider refused
    // (device_post_refused.cpp): from the first on, memory of that kind
    // (without synchronous memory operations, or any) is copied through
    // the host; the refusals, and the buffers of any kind copied since.
    std::atomic<bool> dev_vmm_posts_refused{false}, dev_posts_refused{false};
    std::atomic<uint64_t> dev_post_refusals{0}, dev_after_refusal{0};
    // Test setting (debug_fake_device_refuse_post): posts of the fake's
    // memory with a descriptor are refused (ctx_post.hpp).
    std::atomic<bool> dev_refuse_test{false};
    efa_core_info_t info{};
    std::string nic_reason;
    int node_rails = 1;                  // efa_core_info_t.node_rails
    int rails_off = 0;                   // NICs beside the first left unused: stripe_min 0
    std::atomic<uint64_t> peers_lost{0}; // processes declared unreachable (MPI_T)
    std::atomic<uint64_t> rails_lost{0}; // a rail to a peer taken out (MPI_T)
    // Lost rails asked again whether they reach their peer, by rail_key
    // (core_rail_back.cpp), and the pings the provider holds for them;
    // under deadline_lock.  rail_retry_on: some rail was lost (the
    // deadline's tick then asks them).
    std::unordered_map<fi_addr_t, efa::RailRetry> rail_retries;
    std::unordered_set<void *> rail_pings;
    std::atomic<bool> rail_retry_on{false};
    efa_tag_layout_t layout = EFA_TAG_LAYOUT_WITH_CQ_DATA;
    std::vector<uint8_t> blob;
    int refcount = 0;

    struct PeerEntry {
        efa_peer_t *peer;
        int refs;
    };
    // Orders addresses by length, then bytes.  (std::less on the vectors
    // would do, but g++ 12 at -O3, as in Open MPI's own build, warns
    // wrongly about the memcmp inside its operator<=>.)
    struct AddrLess {
        bool operator()(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b) const {
            if (a.size() != b.size()) {
                return a.size() < b.size();
            }
            return !a.empty() && std::memcmp(a.data(), b.data(), a.size()) < 0;
        }
    };
    using PeerMap = std::map<std::vector<uint8_t>, PeerEntry, AddrLess>;
    std::mutex peers_lock;
    PeerMap peers;
    // Does the provider reach other hosts (efa_core_host_only)?  Asked of
    // libfabric once, at the first peer that is not on this host.
    enum : int { kHostUnknown = 0, kHostOthers = 1, kHostAlone = 2 };
    std::atomic<int> host_only_state{kHostUnknown};
    // Reverse index, so that releasing a peer (del_procs, once per process
    // of the job) does not scan the whole table.
    std::unordered_map<efa_peer_t *, PeerMap::iterator> peer_index;
    // Which peer each AV entry belongs to, for the check of a claimed
    // sender against a message's source (core_source.cpp).
    std::unordered_map<fi_addr_t, efa_peer_t *> addr_owner;
    // Messages dropped because their source was another process than the
    // one they named, and receives from addresses not in the AV (their
    // claim cannot be checked); each kind said once.
    std::atomic<uint64_t> source_forged{0}, source_unchecked{0};
    std::atomic<bool> source_forged_said{false};

    int progress_batch = 16;

    // Per-context overflow areas of the stand-in providers (see efa_ctx).
    struct OverflowArea {
        void *base;
        size_t len;
        efa::MrRegistration reg;
    };
    std::vector<OverflowArea> overflow_areas;

    efa_msg_pool *msg_pool = nullptr;
    // Set while msg_pool is open (core_msg.cpp): progress reposts its
    // buffers through it, so that the progress loop calls nothing above it.
    int (*msg_progress)(efa_core *core) = nullptr;

    // The peer deadline (core_deadline.cpp).  deadline_on is fixed at open;
    // the rest is guarded by deadline_lock.  peer_names: under peers_lock.
    bool deadline_on = false;
    std::mutex deadline_lock;
    efa::PeerDeadline deadline{0};
    std::atomic<uint64_t> deadline_next_ms{0};
    // Time this process spent away from progress (note_progress_gap): the
    // clock of the last deadline_tick, the total away beyond kAwayGraceMs,
    // and how much of it the deadline took already (deadline_lock).
    std::atomic<uint64_t> tick_last_ms{0}, away_ms{0};
    uint64_t deadline_away_taken = 0;
    std::unordered_map<efa_peer_t *, std::string> peer_names;
    // The liveness probes (core_probe.cpp): the receives for pings and
    // answers (one per context); this process's probe id (a hash of its
    // blob) and the peers' (under peers_lock); the probes waiting for an
    // answer, by address, and the answers that found a full queue (under
    // deadline_lock; answers_pending says there are some).
    std::vector<efa_op_t *> probe_recvs;
    uint64_t probe_id = 0;
    std::unordered_multimap<uint64_t, efa_peer_t *> peers_by_probe_id;
    std::unordered_map<fi_addr_t, void *> probes_out;
    // Probes the provider refused, at their post or their completion: still
    // tracked, posted again at the next tick (under deadline_lock).
    std::vector<void *> probes_unposted;
    std::vector<efa::ControlDue> answers_due; // answers and rail-out notices
    // Rails a peer's notice asked to take out (rail keys), for the next
    // progress call (rail_outs_take; under deadline_lock).
    std::vector<fi_addr_t> rail_outs_due;
    std::atomic<bool> rail_outs_pending{false};
    std::unordered_set<void *> answers_out; // answers and notices the provider holds
    std::atomic<bool> answers_pending{false};
    // Withdrawing messages (core_withdraw.cpp), under withdraw_lock: the
    // receives for requests and replies (per context), the requests this
    // process waits on by id, and the claims it works on for its peers.
    std::mutex withdraw_lock;
    bool withdraw_on = false;
    uint64_t withdraw_next_id = 1;
    std::vector<void *> withdraw_recvs;
    std::unordered_map<uint64_t, efa_withdraw_t *> withdraws_out;
    std::unordered_set<void *> withdraw_work;
    // Read rendezvous under the provider's matching (core_rdv.cpp): on
    // where the control receives for its notes are posted.
    bool rdv_on = false;
    efa::RdvState *rdv = nullptr; // control_close deletes it
    // Stand-ins of failed operations the provider still holds: freed when
    // it hands them back, or after the endpoints close.
    std::unordered_set<const void *> orphans;
    // Of those, the receives whose owners have not been told yet: told
    // when the provider hands them back (it may write the buffer until
    // then), or after a further peer_timeout (deadline_tick).
    std::vector<void *> held_recvs;
    // Stand-ins no longer in use, for the next tracked operation (no
    // allocation per operation); under deadline_lock.  First in, first
    // out: a stand-in handed back is reused as late as can be, so that a
    // second completion of it from the provider finds it still free
    // (tracked_complete then ignores it) rather than another's.
    std::deque<void *> deadline_free;
    // Completions of stand-ins already handed back (a provider that
    // completed an operation twice): ignored, said once.
    std::atomic<uint64_t> stale_completions{0};
    // Some peer was declared dead: injects must look (deadline_refuses).
    std::atomic<bool> deadline_any_dead{false};
    // Called about once a second from the deadline's check: the owners'
    // sweeps over the peers they watch (btl_efa_watch.c, mtl_efa_any.c;
    // both may share one core); efa_core_add_deadline_tick, read under
    // deadline_lock.
    struct DeadlineTick {
        void (*fn)(void *arg);
        void *arg;
    };
    std::vector<DeadlineTick> deadline_ticks;
    // Progress calls that found work (ctx_progress.cpp): a counter, racy on
    // purpose across threads (a lost increment only delays a check).
    std::atomic<uint32_t> busy_calls{0};
    // Progress calls that found no work of this process on the rails: one
    // in kRailIdleEvery polls them anyway, or one in kRailColdEvery while
    // nothing has used them (ctx_progress.cpp).
    std::atomic<uint32_t> rail_idle_calls{0};
    // Something has used the rails: a message came in on one, this process
    // posted on one, or it registered memory that peers may read or write
    // (over any rail; providers that serve RMA in software, the stand-ins
    // and efa's emulated operations, need the target's progress on that
    // rail).  Set once, never cleared (note_rails_used).
    std::atomic<bool> rails_used{false};
    // Progress calls left that poll the rails whatever is in flight: set
    // when a message comes in on a rail (core_msg.cpp), counted down here.
    std::atomic<uint32_t> rail_msg_warm{0};

    // Pacing of the provider poll (efa_core_progress_paced, core_pace.cpp).
    // Relaxed loads and stores only: these fields decide how often to poll,
    // never whether a completion is handled.
    std::atomic<int> net_interest{0};
    // Something was posted or deferred since the paced check last found
    // nothing in flight: only then does that check count the contexts'
    // operations (an idle call, the spin of every on-node wait, then reads
    // one flag).  Set on the change only; seq_cst against the check's
    // clear (core_pace.cpp), so a post of another thread is never missed.
    std::atomic<bool> net_posted{false};
    uint64_t net_interval_ns = 0; // 0: poll on every call
    // The wait between paced polls: net_interval_ns after activity, doubled
    // by each paced poll that finds nothing, up to net_interval_max_ns.
    uint64_t net_interval_max_ns = 0;
    std::atomic<uint64_t> net_wait_ns{0};
    // The process's on-node doorbell (efa_core_set_doorbell), in its inbox:
    // a process of this node that sent something here by the provider rang
    // it.  Read by the paced check; cleared (exchange) when found rung.
    std::atomic<uint32_t *> net_bell{nullptr};
    std::atomic<uint64_t> net_bell_ns{0}; // when a ring was answered; 0 once a poll found something
    std::atomic<uint32_t> net_idle_calls{0};
    std::atomic<bool> net_warm{false};   // a poll found completions lately
    std::atomic<bool> net_events{false}; // ... since the last look at the clock
    std::atomic<uint64_t> net_last_event_ns{0}, net_last_poll_ns{0};
};

namespace efa {
// In-flight operations of a context (efa_ctx::inflight), counted at the
// post and at the completion, with the receive-slot counters' economy:
// locked instructions only where threads share the context.
// Tell the paced check that something waits for the provider (after the
// count that says what: the check clears the flag, then counts).
inline void note_posted(efa_core *core) {
    if (!core->net_posted.load(std::memory_order_seq_cst)) {
        core->net_posted.store(true, std::memory_order_seq_cst);
    }
}
inline void inflight_add(efa_ctx *ctx, efa_op_t *op) {
    op->net_counted = 1;
    if (ctx->mt) {
        ctx->inflight.fetch_add(1, std::memory_order_seq_cst);
    } else {
        ctx->inflight.store(ctx->inflight.load(std::memory_order_relaxed) + 1,
                            std::memory_order_relaxed);
    }
    note_posted(ctx->core);
}
inline void inflight_done(efa_ctx *ctx, efa_op_t *op) {
    if (!op->net_counted) {
        return; // the pool's standing receives, the deadline's probes
    }
    op->net_counted = 0;
    if (ctx->mt) {
        ctx->inflight.fetch_sub(1, std::memory_order_relaxed);
    } else {
        ctx->inflight.store(ctx->inflight.load(std::memory_order_relaxed) - 1,
                            std::memory_order_relaxed);
    }
}

// A rail's operations are tracked by the peer deadline under the peer's
// rail-0 address with the rail in the top byte (core_deadline.cpp): AV
// entries are table indices or user-space pointers, below 2^56.
// Progress calls that poll the rails after a message came in on one
// (efa_core.rail_msg_warm): a round trip's answer, or the next message of
// a stream, comes long before the last of them.
constexpr uint32_t kRailMsgWarmCalls = 4096;

// Set efa_core.rails_used (a load first: the flag is set once and then
// only read, so its cache line stays shared between threads).
inline void note_rails_used(efa_core *core) {
    if (!core->rails_used.load(std::memory_order_relaxed)) {
        core->rails_used.store(true, std::memory_order_relaxed);
    }
}

// What a provider answers when it will not take a post's memory itself
// (device_post_refused.cpp): not a full queue (the backlog's), a lost
// peer or a cancel, which another memory would meet as well.
inline bool refuses_memory(int rc) {
    switch (rc) {
    case -FI_EINVAL:
    case -FI_EOPNOTSUPP:
    case -FI_ENOSYS:
    case -FI_EFAULT:
    case -FI_EPERM:
    case -FI_EACCES:
        return true;
    default:
        return false;
    }
}

// The fake device of the tests as the device while a core with
// debug_fake_device is open, with its settings, said at verbose 1
// (core_fake_device.cpp); and gone with it.
void install_fake_device(efa_core *core);
void uninstall_fake_device();

// Is mr a registration of device memory (device_post_refused.cpp)?
bool device_registration(const efa_mr_t *mr);

namespace post {
// Did an owner, in this thread, take a post's failure from the backlog as
// its device memory refused and go another way since the last call
// (efa_core_device_refusal_taken; refusal_taken.cpp)?
bool take_refusal_taken();
} // namespace post

inline fi_addr_t rail_key(fi_addr_t rail0, int rail) {
    return rail0 | (static_cast<fi_addr_t>(rail) << 56);
}
inline int key_rail(fi_addr_t key) {
    return key == FI_ADDR_NOTAVAIL ? 0 : static_cast<int>(key >> 56);
}
inline fi_addr_t key_addr(fi_addr_t key) {
    return key == FI_ADDR_NOTAVAIL ? key : key & ((fi_addr_t{1} << 56) - 1);
}
// A rail stopped reaching the peer at rail-0 address 'rail0' (its
// operations failed or expired): the peer's rails_down gains it, owners
// send what was on it over the others, and it is said once
// (core_rails.cpp).
void rail_lost(efa_core *core, fi_addr_t rail0, int rail, const std::string &peer_name,
               const std::string &why);
// The first rail (rail 0) taken out for the peer at rail-0 address
// 'rail0' alone, where every user of it can move (nothing pinned it) and
// another rail reaches the peer both ways; false: its loss is the peer's
// (core_deadline.cpp).
bool rail0_lost(efa_core *core, fi_addr_t rail0, int err, const std::string &why);
// Is the first rail out for the peer with rail-0 address 'addr' (cheap
// until some peer lost it)?  Takes peers_lock.
bool rail0_out(efa_core *core, fi_addr_t addr);
// The lowest rail beside 'except' (and the first) that reaches 'peer'
// both ways and is not out for it; -1: none.  Under peers_lock.
inline int other_rail(const efa_peer_t *peer, int except) {
    const uint32_t down = __atomic_load_n(&peer->rails_down, __ATOMIC_RELAXED);
    for (int r = 1; r < peer->num_rails && r < kMaxRails; ++r) {
        if (r != except && (peer->rails_mutual & (1u << r)) && !(down & (1u << r)) &&
            peer->addr[static_cast<size_t>(r) * peer->num_addrs] != FI_ADDR_NOTAVAIL) {
            return r;
        }
    }
    return -1;
}
// The rail that carries the core's own messages to 'peer' (probes,
// notices): the first, or the lowest rail that reaches it both ways
// once the first is out for it (core_rail0.cpp); -1: none.  Under
// peers_lock.
inline int home_rail(const efa_peer_t *peer) {
    return __atomic_load_n(&peer->rails_down, __ATOMIC_RELAXED) & 1u ? other_rail(peer, 0) : 0;
}
// The notice rail_lost sends the peer, received over the first rail from
// the process whose probe id's low 54 bits are 'id', at source 'src', that
// took out its rail 'peer_rail' to this one (core_probe.cpp): this
// process's registrations are dropped too, and the rail that meets the
// peer's NIC there both ways taken out for it (core_rails.cpp).
void rail_out_received(efa_core *core, uint64_t id, fi_addr_t src, int peer_rail);

// The peer deadline's hooks into the post and completion paths
// (core_deadline.cpp).
void deadline_open(efa_core *core);
void deadline_close(efa_core *core); // after the endpoints are closed
// The operation to hand the provider for 'op' with 'peer': op itself when
// the deadline is off, else a stand-in that the core keeps until the
// provider returns it.  nullptr with *err when the peer is already dead.
efa_op_t *deadline_track(efa_ctx *ctx, fi_addr_t peer, efa_op_t *op, PeerDeadline::Kind kind,
                         uint64_t flags, int *err);
// A post of 'tracked' (from deadline_track) failed at once: forget it.
// true when another thread declared the peer lost meanwhile and told op's
// owner of its failure already (or is telling it): the caller then takes
// the post as made, so that the owner hears of it once.
bool deadline_untrack(efa_ctx *ctx, efa_op_t *tracked, efa_op_t *op);
// A receive 'tracked' was posted: cancelled if its peer was lost meanwhile.
void deadline_posted(efa_ctx *ctx, efa_op_t *tracked, efa_op_t *op);
// Is 'peer' dead (posts without an operation: injects)?
bool deadline_refuses(efa_ctx *ctx, fi_addr_t peer);
// Is 'op', waiting in a backlog, a stand-in whose peer was declared dead
// since it was tracked?  Its owner has been told (or is told when it
// completes): the flush must drop it, never post it.
bool deadline_dropped(const efa_op_t *op);
// Post a standing receive again (ctx_progress.cpp): parked in ctx's
// internal backlog when the provider has no room now.  0 or the error.
int repost_standing(efa_ctx *ctx, efa_op_t *op, const char *call, std::function<ssize_t()> post);
// The process-wide path counts (path_counts.hpp) into 'out'
// (core_counters.cpp).
void read_path_counts(efa_core_counters_t *out);
// From progress: checks the peers at most once a second.
void deadline_tick(efa_core *core);
// Called by deadline_tick each time with its clock: a gap between progress
// calls up to kAwayGraceMs is a process at work between MPI calls; beyond
// it, the rest is time away (a compute phase), in which nothing of a peer
// could be seen (efa_core_away_ms).
constexpr uint64_t kAwayGraceMs = 2000;
inline void note_progress_gap(efa_core *core, uint64_t now) {
    // (relaxed load and store: threads that tick at once lose at most a gap)
    const uint64_t last = core->tick_last_ms.load(std::memory_order_relaxed);
    core->tick_last_ms.store(now, std::memory_order_relaxed);
    if (0 != last && now > last + kAwayGraceMs) {
        core->away_ms.fetch_add(now - last - kAwayGraceMs, std::memory_order_relaxed);
    }
}
// The id a peer's probes carry: a hash of its blob (core_probe.cpp).
uint64_t probe_id_of(const void *blob, size_t len);
// From progress while answers_pending: answers to peers' pings that found
// a full queue, again (core_probe.cpp).
void probe_answers_retry(efa_core *core);
// From progress while rail_outs_pending: the rails peers' notices asked to
// take out, taken out (core_deadline.cpp).
void rail_outs_take(efa_core *core);
// Withdrawing messages (core_withdraw.cpp): the receives for requests and
// replies, posted after deadline_open; close after the endpoints are
// closed.
void withdraw_open(efa_core *core);
void withdraw_close(efa_core *core);
// The core's control receives: withdrawing and read rendezvous
// (core_rdv.cpp), after deadline_open (0, or the core does not open);
// close after the endpoints.
int control_open(efa_core *core);
void control_close(efa_core *core);
// A message with this tag from the process with probe id 'requester' was
// withdrawn here: a rendezvous message's note is dropped (core_rdv.cpp).
void rdv_withdrawn(efa_core *core, uint64_t requester, uint64_t tag);
// A receive's source is not in the AV although the provider reports
// sources: counted, said once (core_source.cpp).
void source_unchecked(efa_core *core);
} // namespace efa
