// The matching engine's side of its peers on other nodes: provider
// messages in (through the sequence check to deliver()), completions of
// its own, and a peer the provider cannot reach (engine.hpp and
// net_link.hpp have the design).
#include "engine.hpp"

#include <chrono>
#include <cstring>
#include <string>

#include <rdma/fi_errno.h>

namespace efa::engine {

// Nothing this engine does waits on the provider: no receive posted (a
// remote sender may match it), no request waiting for an answer, nothing
// queued, in flight or held for reordering.
bool Engine::net_idle() const {
    return 0 == match_.posted_net() && 0 == ids_.live() && busy_.empty() && reads_.empty() &&
           net_->idle() && 0 == order_.held() && swap_held_.empty() && delayed_.empty();
}

// A provider message of the engine's channel (from the core's progress,
// no lock held).
void Engine::net_message(void *arg, efa_ctx_t *ctx, void *buf, size_t len, int err, fi_addr_t src) {
    auto *e = static_cast<Engine *>(arg);
    if (__builtin_expect(e->net_test_hooks_, 0) && !err) {
        const uint32_t nth = ++e->net_arrived_;
        if (nth == e->params_.net_debug_lose) {
            err = -FI_ETRUNC; // the test hook: as ofi_rxd reports it
        }
        if (0 == efa_ctx_rail(ctx) && e->params_.net_debug_flush_first &&
            ++e->net_first_arrived_ == e->params_.net_debug_flush_first) {
            net_message(arg, ctx, nullptr, 0, -FI_EIO, FI_ADDR_NOTAVAIL); // a flushed buffer
            if (e->params_.net_debug_flush_lost) {
                return; // ... that held this message
            }
        }
        if (nth == e->params_.net_debug_delay) {
            Guard g(e->mu_, e->mt_); // the test hook: progress() hands it on later
            const auto *m = static_cast<const uint8_t *>(buf);
            e->delayed_.assign(m, m + len);
            e->delayed_src_ = src;
            e->delayed_rail_ = efa_ctx_rail(ctx);
            e->delay_age_ = 0;
            return;
        }
    }
    if (err) {
        // A failed receive of the pool.  Cancelled: the pool is closing.
        // Anything else lost a message of a peer on another node, which no
        // frame says; its stream will wait for it (check_net_gaps finds
        // which).  The owner ends the job now, but for a NIC that flushed
        // its receives as it failed: one beside the first, or the first
        // where it can be left (every message there is numbered in its
        // stream).  Its senders move to another NIC; a message it did lose
        // leaves a gap that check_net_gaps fails after the peer timeout.
        // A truncation is a loss wherever it happens (ofi_rxd).
        const bool first = 0 == efa_ctx_rail(ctx);
        if (-FI_ECANCELED != err && -FI_ETRUNC != err &&
            (!first || (efa_core_rail0_fails_over(e->net_->core()) &&
                        efa_core_peer_timeout(e->net_->core()) > 0))) {
            {
                Guard g(e->mu_, e->mt_);
                ++e->net_rail_recv_failed_;
                e->net_first_recv_failed_ += first ? 1 : 0;
                e->net_ask_due_ = true; // the flushed receive may have held a stream's last
            }
            if (first) {
                efa_core_rail0_flushed(e->net_->core(), "mtl:efa", err);
            }
            return;
        }
        if (-FI_ECANCELED != err) {
            {
                Guard g(e->mu_, e->mt_);
                ++e->net_lost_;
                e->net_lost_err_ = err;
            }
            if (e->params_.lost) {
                const std::string why = std::string("a receive of a message from another node "
                                                    "failed: ") +
                                        fi_strerror(-err);
                e->params_.lost(e->params_.peer_card_arg, why.c_str());
            }
        }
        return;
    }
    e->on_net(static_cast<const uint8_t *>(buf), len, src, efa_ctx_rail(ctx));
    e->run_completions();
}

// Is src (the provider's source of the message, efa_cqe_t.src) an endpoint
// of the process its header names?  A third process could otherwise write
// into that peer's stream: its order, its matches, its answers.  On
// another rail src is an entry of that NIC's table: one of the named
// process's addresses there, whatever the rail's state.  Under mu_.
bool Engine::net_sender_ok(uint32_t vpid, fi_addr_t src, int rail) {
    if (FI_ADDR_NOTAVAIL == src) {
        return true; // the provider does not say: nothing to check
    }
    if (rail > 0) {
        const efa_peer_t *rails = nullptr;
        if (vpid < peers_.size() && peers_[vpid] && peers_[vpid]->net) {
            rails = peers_[vpid]->rails;
        } else if (vpid < params_.nprocs && params_.peer_rails) {
            rails = params_.peer_rails(params_.peer_card_arg, vpid);
        }
        if (rails && rail < rails->num_rails) {
            for (int i = 0; i < rails->num_addrs; ++i) {
                if (rails->addr[rail * nctx_ + i] == src) {
                    return true;
                }
            }
        }
        return false;
    }
    fi_addr_t claimed = FI_ADDR_NOTAVAIL;
    if (vpid < peers_.size() && peers_[vpid] && peers_[vpid]->net) {
        claimed = peers_[vpid]->net->addr0;
    } else if (vpid < params_.nprocs && params_.peer_addr) {
        efa_ctx_t *ctx = nullptr; // (a process this one has not sent to yet)
        if (0 != params_.peer_addr(params_.peer_card_arg, vpid, &claimed, &ctx)) {
            claimed = FI_ADDR_NOTAVAIL;
        }
    }
    return efa_core_source_ok(net_->core(), src, claimed, "a message of the matching engine");
}

void Engine::on_net(const uint8_t *msg, size_t len, fi_addr_t src, int rail) {
    Guard g(mu_, mt_);
    on_net_locked(msg, len, src, rail);
}

void Engine::on_net_locked(const uint8_t *msg, size_t len, fi_addr_t src, int rail) {
    NetHdr h{};
    if (len < sizeof(h)) {
        drop();
        return;
    }
    memcpy(&h, msg, sizeof(h));
    if (kNetMagic != h.magic || kNetVersion != h.version || !net_sender_ok(h.sender, src, rail)) {
        drop();
        return;
    }
    if (h.grant) {
        net_granted(h.sender, h.grant);
    }
    if (kNoSeq == h.seq || kAskSeq == h.seq) { // a grant alone, or an ask: outside the order
        if (0 != h.frames) {
            drop();
        } else {
            ++net_grants_received_;
            if (kAskSeq == h.seq) {
                net_answer(h.sender);
            }
        }
        if (!busy_.empty()) {
            flush_all(); // what waited for the grant
        }
        return;
    }
    ++net_received_;
    if (__builtin_expect(0 == h.frames, 0)) {
        net_answered(h.sender); // (only an answer is numbered and empty)
    }
    if (__builtin_expect(net_test_hooks_, 0) && params_.net_debug_swap) {
        if (swap_held_.empty()) {
            swap_held_.assign(msg, msg + len);
            swap_age_ = 0;
            return;
        }
        std::vector<uint8_t> first;
        first.swap(swap_held_);
        net_in_order(msg, len);
        net_in_order(first.data(), first.size());
    } else {
        net_in_order(msg, len);
    }
    if (!busy_.empty()) {
        flush_all(); // answers (ACK, CTS) queued by what came
    }
    net_->send_grants(); // those the answers did not carry
    fail_noted();        // after every write (a failed post only noted the peer)
}

// vpid granted this process messages below grant (net_link.hpp).
void Engine::net_granted(uint32_t vpid, uint64_t grant) {
    if (vpid < peers_.size() && peers_[vpid] && peers_[vpid]->net) {
        net_->granted(peers_[vpid]->net, grant);
    } // else this process never sent to vpid: nothing to grant
}

// Messages of sender's were handed on: grant it as many more.  A peer is
// made (as check_net_gaps does) only once a grant must be said.
void Engine::net_delivered(uint32_t sender) {
    const uint64_t n = order_.next(sender);
    if (UINT64_MAX == n) {
        return; // a closed stream
    }
    if (sender >= peers_.size() || !peers_[sender]) {
        if (n + net_->credit() - kFirstGrant < net_->credit() / 4) {
            return; // nothing to say yet
        }
    }
    int err = 0;
    Peer *p = peer(sender, err);
    if (p && p->net) {
        net_->delivered(p->net, n);
    } // else a peer that cannot be reached, or one on this node
}

// sender asked for one more numbered message (its receive failed as a NIC
// flushed: net_link.hpp, "Asking"); a peer is made, as for a grant.
void Engine::net_answer(uint32_t sender) {
    int err = 0;
    Peer *p = peer(sender, err);
    if (p && p->net) {
        net_->answer(p->net);
        fail_noted(); // (the answer's post may have failed for good)
    }
}

// sender answered an ask of this process's (what its number shows, the
// order finds: check_net_gaps).
void Engine::net_answered(uint32_t sender) {
    if (sender < peers_.size() && peers_[sender] && peers_[sender]->net) {
        peers_[sender]->net->asking = false;
    }
}

// After a flush every peer on another node this process knows is asked
// for one more numbered message, so that a message the flush lost shows
// as a gap even where it was the last of its stream (check_net_gaps ends
// the job); then those that have not answered, again every kAskAgainMs
// (the ask or the answer may have been lost as well), until they answer
// or fail.
void Engine::ask_peers() {
    constexpr uint64_t kAskAgainMs = 200;
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    const auto now_ms =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
    if (!net_ask_due_ && now_ms - net_asked_ms_ < kAskAgainMs) {
        return;
    }
    const bool all = net_ask_due_;
    net_ask_due_ = false;
    net_asking_ = false;
    net_asked_ms_ = now_ms;
    for (auto &p : peers_) {
        if (p && p->net && !p->error && (all || p->net->asking)) {
            net_->ask(p->net);
            net_asking_ = true;
        }
    }
}

// A checked provider message, through the sequence check to deliver().
void Engine::net_in_order(const uint8_t *msg, size_t len) {
    NetHdr h;
    memcpy(&h, msg, sizeof(h));
    const uint32_t via = kNetVia | h.sender;
    const auto v = order_.arrive(h.sender, h.seq, msg, len, [&](const uint8_t *m, size_t l) {
        if (!net_frames(m, l, [&](const uint8_t *f, size_t fl) { deliver(via, f, fl); })) {
            drop(); // frames cut short: what was whole went on
        }
    });
    if (NetOrder::Verdict::kDelivered == v) {
        net_delivered(h.sender);
    }
}

// A provider message of ours completed (b), or a post failed for good (b
// NULL: called from inside the link, under the lock).  The failure is only
// noted here: the post came from a write to np (flush() going through its
// queues, send() before it sets the request's state, an answer from
// deliver()), and failing the peer at once would empty those queues and
// finish their requests under the writer's feet.  The link writes nothing
// more to np meanwhile (its reserve() refuses); fail_noted() fails it once
// the writer is done.
void Engine::net_sent(void *owner, NetLink::Buf *b, NetLink::Peer *np, int err) {
    auto *e = static_cast<Engine *>(owner);
    if (nullptr == b) {
        e->net_failed_.push_back({np->vpid, err});
        return;
    }
    {
        Guard g(e->mu_, e->mt_);
        if (__builtin_expect(e->net_test_hooks_, 0) && !err && b->rail &&
            ++e->net_rail_completed_ == e->params_.net_debug_fail_rail_send) {
            err = -FI_EIO; // the test hook: as a rail's failed send, though it arrived
        }
        // A message whose rail beside the first failed goes again over the
        // first (net_link.hpp); where it cannot, the peer fails as below.
        if (err && e->net_->fail_over(b)) {
            e->fail_noted();
            return;
        }
        e->net_->release(b); // (may post: a failure is noted)
        if (err && !np->error) {
            np->error = err;
            e->fail_peer(np->vpid, err);
        }
        e->fail_noted();
    }
    e->run_completions();
}

// The peers whose posts failed for good (net_sent), failed now: called
// under mu_ where no write is under way.
void Engine::fail_noted_peers() {
    while (!net_failed_.empty()) {
        std::vector<std::pair<uint32_t, int>> failed;
        failed.swap(net_failed_);
        for (const auto &f : failed) {
            fail_peer(f.first, f.second);
        }
    }
}

// The provider cannot reach vpid: every request waiting on it (an answer,
// room to write, DATA, a receive posted for it alone, a receive on
// ANY_SOURCE of a communicator it belongs to: engine_watch.cpp)
// fails with err, and later sends to it fail at once.  Messages it sent
// that wait unexpected stay receivable.
void Engine::fail_peer(uint32_t vpid, int err) {
    if (vpid >= peers_.size() || !peers_[vpid]) {
        return;
    }
    Peer *p = peers_[vpid].get();
    p->error = err;
    if (p->net) {
        net_->abandon(p->net, err); // a message waiting for its grant would wait for ever
    }
    std::vector<efa_engine_req_t *> waiting;
    ids_.each([&](efa_engine_req_t *r, uint64_t) {
        if (r->peer == vpid && kDone != r->state) {
            waiting.push_back(r);
        }
    });
    for (List *l : {&p->sends, &p->streams}) {
        while (efa_engine_link_t *x = l->front()) {
            l->remove(x);
            efa_engine_req_t *r = req_of(x);
            if (l == &p->streams && r->device) {
                unstage(r); // a device send's host piece (stage_device_send)
            }
            if (0 == r->local_id || nullptr == ids_.find(r->local_id)) {
                waiting.push_back(r); // a standard eager send: not in the table
            }
        }
    }
    p->ctrl.clear();
    std::vector<efa_engine_req_t *> receives;
    Membership known;
    match_.each_posted([&](efa_engine_req_t *r) {
        if (source_of(r) == vpid || any_source_hears(r, vpid, known)) {
            receives.push_back(r);
        }
    });
    probe_lost(vpid, err, known);
    for (efa_engine_req_t *r : receives) {
        match_.cancel(r);
        r->err = err;
        r->msg_len = 0;
        r->msg_src = r->src; // no message: the envelope asked for, not a
        r->msg_tag = r->tag; // former message's of this pooled request
        r->state = kDone;
        finish(r);
    }
    for (efa_engine_req_t *r : waiting) {
        if (r->local_id) {
            ids_.remove(r->local_id);
        }
        if (kPosted == r->state) {
            continue; // a receive: not this peer's to fail
        }
        if (kRecall == r->state) {
            // Complete already (its callback was called): the caller's poll
            // learns that it is not known to be withdrawn.
            r->local_id = 0;
            r->err = 0;
            r->state = kDone;
            continue;
        }
        r->err = err;
        r->state = kDone;
        finish(r);
    }
}

void Engine::get_stats(efa_engine_stats_t *out) const {
    *out = stats;
    out->dropped = dropped();
    if (net_) {
        out->net_sent = net_->stats().messages;
        out->net_batched = net_->stats().batched;
        out->net_received = net_received_;
        out->net_reordered = order_.reordered();
        out->net_endpoints = net_->stats().endpoints;
        out->net_injected = net_->stats().injected;
        out->net_lost = net_lost_;
        out->net_grants = net_->stats().grants;
        out->net_grants_received = net_grants_received_;
        out->net_no_credit = net_->stats().no_credit;
        out->net_held_bytes_max = order_.held_bytes_max();
        out->net_rail_peers = net_->stats().rail_peers;
        out->net_rail_sent = net_->stats().rail_sent;
        out->net_failed_over = net_->stats().failed_over;
        out->net_duplicates = order_.duplicates();
        out->net_rail_recv_failed = net_rail_recv_failed_;
        out->net_first_recv_failed = net_first_recv_failed_;
        out->net_turn_peers = net_->stats().turn_peers;
        out->net_turns = net_->stats().turns;
        out->net_taken_back = net_->stats().taken_back;
        out->net_sent_back = net_->stats().sent_back;
        out->net_asks = net_->stats().asks;
        out->net_answers = net_->stats().answers;
    }
}

} // namespace efa::engine

namespace efa::engine {

// A peer on another node whose stream to this process waits for a message
// that does not come while later ones are held has lost that message: a
// reliable provider never leaves such a gap open for long.  After a failed
// receive here (net_lost_) a gap open for kLostGapMs is taken as that loss;
// without one, after twice common_efa_peer_timeout: a message in flight on
// a rail that died is sent again over the first once the sender's deadline
// for that rail expires (NetLink::fail_over), while the peer's later
// messages keep coming over the others (NetLink::next_turn) and open the
// gap at once.  The peer then fails as a
// dead one would (fail_peer here, the core's peer-unreachable message and
// its operations; the caller reports, outside the lock): a job that waits
// on the lost message ends with an error that names the peer instead of
// hanging.  With an owner's lost callback the caller hands it the reason
// instead (the MTL ends the job: receives waiting on ANY_SOURCE could wait
// for the lost message for ever).  Called under mu_.
void Engine::check_net_gaps() {
    constexpr uint64_t kLostGapMs = 2000;
    const int secs = efa_core_peer_timeout(net_->core());
    const uint64_t limit = net_lost_ ? kLostGapMs : secs > 0 ? 2 * secs * uint64_t{1000} : 0;
    if (0 == limit) {
        return;
    }
    // (time this process spent away from progress, a compute phase, is no
    // wait for the message: its copy sent again may be waiting in a CQ
    // not read yet)
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    const auto now_ms =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()) -
        efa_core_away_ms(net_->core());
    for (uint32_t s : order_.stalled(now_ms, limit)) {
        std::string why = "MPI_COMM_WORLD rank " + std::to_string(s) + ": message " +
                          std::to_string(order_.next(s)) +
                          " of its stream to this process never came, although " +
                          std::to_string(order_.held(s)) + " later ones did";
        why += net_lost_
                   ? std::string(" (a receive here failed: ") + fi_strerror(-net_lost_err_) +
                         "): the provider lost it"
                   : " (for " + std::to_string(2 * secs) + " s, twice common_efa_peer_timeout)";
        order_.close(s);
        int err = 0;
        Peer *p = peer(s, err); // (made now if this process never sent to it)
        if (p && p->net) {
            lost_.push_back({p->net->addr0, why});
        }
        if (!params_.lost || !(p && p->net)) { // (nobody told: what waits on s fails here)
            fail_peer(s, -FI_EIO);
        }
    }
}

// Say what check_net_gaps and node_check found, outside the lock (the
// owner's callbacks end the job or declare the process lost; the core's
// fails the peer's operations, whose completions come back into this
// engine).
void Engine::report_lost() {
    std::vector<LostStream> lost;
    std::vector<uint32_t> exited;
    {
        Guard g(mu_, mt_);
        lost.swap(lost_);
        exited.swap(exited_);
    }
    for (uint32_t vpid : exited) {
        params_.peer_exited(params_.peer_card_arg, vpid);
    }
    for (const LostStream &l : lost) {
        if (params_.lost) {
            params_.lost(params_.peer_card_arg, l.why.c_str());
        } else if (FI_ADDR_NOTAVAIL != l.addr) {
            efa_core_peer_lost(net_->core(), l.addr, -FI_EIO, l.why.c_str());
        }
    }
}

} // namespace efa::engine
