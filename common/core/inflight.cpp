// Operations in flight answered by id, with claims (inflight.hpp).
#include "inflight.hpp"

#include <cerrno>
#include <new>

#include "efa_inflight.h"

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

// The C seam (efa_inflight.h)

extern "C" {

efa_inflight_t *efa_inflight_create(void) {
    return new (std::nothrow) efa_inflight;
}

void efa_inflight_destroy(efa_inflight_t *t) {
    delete t;
}

int efa_inflight_add(efa_inflight_t *t, uint64_t id, void *op, double now) try {
    if (nullptr == t) {
        return -ENOMEM;
    }
    return t->table.add(id, op, now) ? 0 : -EEXIST;
} catch (const std::bad_alloc &) {
    return -ENOMEM;
}

void *efa_inflight_claim(efa_inflight_t *t, uint64_t id, double now) {
    return t ? t->table.claim(id, now) : nullptr;
}

bool efa_inflight_release(efa_inflight_t *t, uint64_t id, bool over) {
    return t && t->table.release(id, over);
}

size_t efa_inflight_expire(efa_inflight_t *t, double now, double limit, void **out, size_t max) {
    return t ? t->table.expire(now, limit, out, max) : 0;
}

size_t efa_inflight_size(efa_inflight_t *t) {
    return t ? t->table.size() : 0;
}

} // extern "C"
