#include "peer_deadline.hpp"

namespace efa {

bool PeerDeadline::posted(uint64_t peer, Entry *op, Kind kind, uint64_t now) {
    Peer &p = peers_[peer];
    if (p.dead) {
        return false;
    }
    if (op->peer) {
        return true; // tracked already
    }
    // An idle peer's clock starts with its first operation: the time it
    // spent with nothing to do is no silence.
    if (p.count == 0) {
        p.last = now;
    }
    op->prev = nullptr;
    op->next = p.head;
    if (p.head) {
        p.head->prev = op;
    }
    p.head = op;
    op->peer = &p;
    op->kind = kind;
    ++p.count;
    ++total_;
    p.sends += kind == Kind::Send;
    return true;
}

void PeerDeadline::unlink(Entry *e) {
    Peer &p = *e->peer;
    if (e->prev) {
        e->prev->next = e->next;
    } else {
        p.head = e->next;
    }
    if (e->next) {
        e->next->prev = e->prev;
    }
    e->prev = e->next = nullptr;
    e->peer = nullptr;
    --p.count;
    --total_;
    p.sends -= e->kind == Kind::Send;
}

bool PeerDeadline::completed(Entry *op, uint64_t now) {
    Peer *p = op->peer;
    if (!p) {
        return false;
    }
    unlink(op);
    // An error completion is news from the provider too: it ends the wait
    // for this operation, and an unreachable peer is declared dead by the
    // caller from the error itself.
    p->last = now;
    return true;
}

void PeerDeadline::forget(Entry *op) {
    if (op->peer) {
        unlink(op);
    }
}

void PeerDeadline::touch(uint64_t peer, uint64_t now) {
    auto it = peers_.find(peer);
    if (it != peers_.end() && !it->second.dead && it->second.last < now) {
        it->second.last = now;
    }
}

bool PeerDeadline::expired(uint64_t peer, uint64_t now) const {
    auto it = peers_.find(peer);
    if (it == peers_.end()) {
        return false;
    }
    const Peer &p = it->second;
    return !p.dead && p.sends > 0 && now > p.last && now - p.last >= timeout_;
}

bool PeerDeadline::revive(uint64_t peer, uint64_t now) {
    auto it = peers_.find(peer);
    if (it == peers_.end() || !it->second.dead) {
        return false;
    }
    it->second.dead = false; // declare_dead left it with nothing tracked
    it->second.last = now;
    it->second.last_probe = now;
    return true;
}

bool PeerDeadline::dead(uint64_t peer) const {
    auto it = peers_.find(peer);
    return it != peers_.end() && it->second.dead;
}

void PeerDeadline::away(uint64_t ms, uint64_t now) {
    for (auto &kv : peers_) {
        Peer &p = kv.second;
        if (!p.dead && p.count > 0) {
            p.last = p.last + ms < now ? p.last + ms : now;
            p.last_probe = p.last_probe + ms < now ? p.last_probe + ms : now;
        }
    }
}

void PeerDeadline::forget_peer(uint64_t peer) {
    auto it = peers_.find(peer);
    if (it != peers_.end() && 0 == it->second.count) {
        peers_.erase(it);
    }
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
        if (p.dead || p.count == 0) {
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

void PeerDeadline::drain(Peer &p, std::vector<Entry *> *out) {
    while (p.head) {
        Entry *e = p.head;
        unlink(e);
        out->push_back(e);
    }
}

std::vector<PeerDeadline::Entry *> PeerDeadline::declare_dead(uint64_t peer) {
    Peer &p = peers_[peer];
    p.dead = true;
    std::vector<Entry *> ops;
    ops.reserve(p.count);
    drain(p, &ops);
    return ops;
}

std::vector<PeerDeadline::Entry *> PeerDeadline::release_all() {
    std::vector<Entry *> ops;
    for (auto &kv : peers_) {
        drain(kv.second, &ops);
    }
    return ops;
}

} // namespace efa
