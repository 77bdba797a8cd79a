#include "peer_deadline.hpp"

namespace efa {

bool PeerDeadline::posted(uint64_t peer, const void *op, Kind kind, uint64_t now) {
    Peer &p = peers_[peer];
    if (p.dead) {
        return false;
    }
    // An idle peer's clock starts with its first operation: the time it
    // spent with nothing to do is no silence.
    if (p.ops.empty()) {
        p.last = now;
    }
    if (p.ops.emplace(op, kind).second) {
        ++total_;
        p.sends += kind == Kind::Send;
    }
    return true;
}

bool PeerDeadline::completed(uint64_t peer, const void *op, uint64_t now) {
    auto it = peers_.find(peer);
    if (it == peers_.end()) {
        return false;
    }
    Peer &p = it->second;
    auto o = p.ops.find(op);
    if (o == p.ops.end()) {
        return false;
    }
    p.sends -= o->second == Kind::Send;
    p.ops.erase(o);
    --total_;
    // An error completion is news from the provider too: it ends the wait
    // for this operation, and an unreachable peer is declared dead by the
    // caller from the error itself.
    p.last = now;
    return true;
}

void PeerDeadline::forget(uint64_t peer, const void *op) {
    auto it = peers_.find(peer);
    if (it == peers_.end()) {
        return;
    }
    Peer &p = it->second;
    auto o = p.ops.find(op);
    if (o != p.ops.end()) {
        p.sends -= o->second == Kind::Send;
        p.ops.erase(o);
        --total_;
    }
}

bool PeerDeadline::dead(uint64_t peer) const {
    auto it = peers_.find(peer);
    return it != peers_.end() && it->second.dead;
}

bool PeerDeadline::due(uint64_t now) {
    if (!enabled() || total_ == 0 || now < next_check_) {
        return false;
    }
    next_check_ = now + interval_;
    return true;
}

PeerDeadline::Verdict PeerDeadline::check(uint64_t now) {
    Verdict v;
    for (auto &kv : peers_) {
        Peer &p = kv.second;
        if (p.dead || p.ops.empty()) {
            continue;
        }
        const uint64_t quiet = now > p.last ? now - p.last : 0;
        if (p.sends > 0) {
            if (quiet >= timeout_) {
                v.expired.push_back(kv.first);
            }
        } else if (quiet >= timeout_ / 2 && now - p.last_probe >= timeout_ / 2) {
            // Only waited on: ask it (the probe is a send, so the first rule
            // then bounds it).  At most one probe per half timeout.
            p.last_probe = now;
            v.probe.push_back(kv.first);
        }
    }
    return v;
}

std::vector<const void *> PeerDeadline::declare_dead(uint64_t peer) {
    Peer &p = peers_[peer];
    p.dead = true;
    std::vector<const void *> ops;
    ops.reserve(p.ops.size());
    for (auto &kv : p.ops) {
        ops.push_back(kv.first);
    }
    total_ -= p.ops.size();
    p.ops.clear();
    p.sends = 0;
    return ops;
}

std::vector<const void *> PeerDeadline::release_all() {
    std::vector<const void *> ops;
    for (auto &kv : peers_) {
        for (auto &o : kv.second.ops) {
            ops.push_back(o.first);
        }
        kv.second.ops.clear();
        kv.second.sends = 0;
    }
    total_ = 0;
    return ops;
}

} // namespace efa
