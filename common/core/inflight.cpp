// Operations in flight answered by id, with claims (inflight.hpp).
#include "inflight.hpp"

namespace efa {

bool Inflight::add(uint64_t id, void *op, double now) {
    std::lock_guard<std::mutex> g(mu_);
    return ops_.emplace(id, Entry{op, now, 1, false}).second;
}

void *Inflight::claim(uint64_t id, double now) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = ops_.find(id);
    if (ops_.end() == it || it->second.over) {
        return nullptr;
    }
    ++it->second.claims;
    it->second.last = now;
    return it->second.op;
}

bool Inflight::release(uint64_t id, bool over) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = ops_.find(id);
    if (ops_.end() == it || it->second.claims <= 0) {
        return false; // not claimed: a caller's bug, and nothing to complete
    }
    Entry &e = it->second;
    e.over = e.over || over;
    if (0 != --e.claims || !e.over) {
        return false;
    }
    ops_.erase(it);
    return true;
}

size_t Inflight::expire(double now, double limit, void **out, size_t max) {
    std::lock_guard<std::mutex> g(mu_);
    size_t n = 0;
    for (auto it = ops_.begin(); it != ops_.end() && n < max;) {
        const Entry &e = it->second;
        // A claimed operation is being answered (or started) right now:
        // its claimant may write into it, so it is not expiry's to take.
        if (0 == e.claims && !e.over && now - e.last > limit) {
            out[n++] = e.op;
            it = ops_.erase(it);
        } else {
            ++it;
        }
    }
    return n;
}

size_t Inflight::size() {
    std::lock_guard<std::mutex> g(mu_);
    return ops_.size();
}

} // namespace efa
