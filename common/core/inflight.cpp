// Operations in flight answered by id, with claims (inflight.hpp).
#include "inflight.hpp"

#include <cerrno>
#include <mutex>
#include <new>

#include "efa_inflight.h"

namespace efa {

namespace {

// Slots of a new table: room for a window of operations without a growth.
constexpr size_t kFirstSlots = 64;

} // namespace

Inflight::Entry *Inflight::find(uint64_t id) {
    if (slots_.empty()) {
        return nullptr;
    }
    const size_t mask = slots_.size() - 1;
    for (size_t i = id & mask;; i = (i + 1) & mask) {
        Entry &e = slots_[i];
        if (nullptr == e.op) {
            return nullptr; // a run ends at a free slot: the id is not here
        }
        if (e.id == id) {
            return &e;
        }
    }
}

// Free e's slot, moving later entries of its run back so that every entry
// stays reachable from its home slot without tombstones.
void Inflight::erase(Entry *e) {
    const size_t mask = slots_.size() - 1;
    size_t hole = static_cast<size_t>(e - slots_.data());
    for (size_t i = (hole + 1) & mask; nullptr != slots_[i].op; i = (i + 1) & mask) {
        const size_t home = slots_[i].id & mask;
        // Entry i may fill the hole when its home is not in (hole, i]
        // (cyclically): its probe from home passes the hole.
        const bool home_after_hole =
            hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
        if (!home_after_hole) {
            slots_[hole] = slots_[i];
            hole = i;
        }
    }
    slots_[hole].op = nullptr;
    --used_;
}

bool Inflight::grow() {
    std::vector<Entry> old;
    try {
        old.swap(slots_);
        slots_.assign(old.empty() ? kFirstSlots : 2 * old.size(), Entry{0, nullptr, 0, 0, false});
    } catch (const std::bad_alloc &) {
        slots_.swap(old);
        return false;
    }
    const size_t mask = slots_.size() - 1;
    for (const Entry &e : old) {
        if (nullptr != e.op) {
            size_t i = e.id & mask;
            while (nullptr != slots_[i].op) {
                i = (i + 1) & mask;
            }
            slots_[i] = e;
        }
    }
    return true;
}

int Inflight::add(uint64_t id, void *op, double now) {
    if (nullptr == op) {
        return -EEXIST; // a free slot's mark, not an operation
    }
    std::lock_guard<SpinMutex> g(lock_);
    if (nullptr != find(id)) {
        return -EEXIST;
    }
    if (2 * (used_ + 1) > slots_.size() && !grow()) {
        return -ENOMEM;
    }
    const size_t mask = slots_.size() - 1;
    size_t i = id & mask;
    while (nullptr != slots_[i].op) {
        i = (i + 1) & mask;
    }
    slots_[i] = Entry{id, op, now, 1, false};
    ++used_;
    return 0;
}

void *Inflight::claim(uint64_t id, double now) {
    std::lock_guard<SpinMutex> g(lock_);
    Entry *e = find(id);
    if (nullptr == e || e->over) {
        return nullptr;
    }
    ++e->claims;
    if (now >= 0.0) {
        e->last = now;
    }
    return e->op;
}

void Inflight::touch(uint64_t id, double now) {
    std::lock_guard<SpinMutex> g(lock_);
    if (Entry *e = find(id); nullptr != e && !e->over) {
        e->last = now;
    }
}

bool Inflight::live(uint64_t id) {
    std::lock_guard<SpinMutex> g(lock_);
    const Entry *e = find(id);
    return nullptr != e && !e->over;
}

bool Inflight::release(uint64_t id, bool over) {
    std::lock_guard<SpinMutex> g(lock_);
    Entry *e = find(id);
    if (nullptr == e || e->claims <= 0) {
        return false; // not claimed: a caller's bug, and nothing to complete
    }
    e->over = e->over || over;
    if (0 != --e->claims || !e->over) {
        return false;
    }
    erase(e);
    return true;
}

size_t Inflight::expire(double now, double limit, void **out, size_t max) {
    std::lock_guard<SpinMutex> g(lock_);
    size_t n = 0;
    for (size_t i = 0; i < slots_.size() && n < max;) {
        const Entry &e = slots_[i];
        // A claimed operation is being answered (or started) right now:
        // its claimant may write into it, so it is not expiry's to take.
        if (nullptr != e.op && 0 == e.claims && !e.over && now - e.last > limit) {
            out[n++] = e.op;
            erase(&slots_[i]); // may move a later entry into slot i: look again
        } else {
            ++i;
        }
    }
    return n;
}

void Inflight::pause(double seconds, double now) {
    std::lock_guard<SpinMutex> g(lock_);
    for (Entry &e : slots_) {
        if (nullptr != e.op) {
            e.last = e.last + seconds < now ? e.last + seconds : now;
        }
    }
}

size_t Inflight::size() {
    std::lock_guard<SpinMutex> g(lock_);
    return used_;
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

int efa_inflight_add(efa_inflight_t *t, uint64_t id, void *op, double now) {
    if (nullptr == t) {
        return -ENOMEM;
    }
    return t->table.add(id, op, now);
}

void *efa_inflight_claim(efa_inflight_t *t, uint64_t id, double now) {
    return t ? t->table.claim(id, now) : nullptr;
}

void efa_inflight_touch(efa_inflight_t *t, uint64_t id, double now) {
    if (t) {
        t->table.touch(id, now);
    }
}

bool efa_inflight_release(efa_inflight_t *t, uint64_t id, bool over) {
    return t && t->table.release(id, over);
}

bool efa_inflight_live(efa_inflight_t *t, uint64_t id) {
    return t && t->table.live(id);
}

size_t efa_inflight_expire(efa_inflight_t *t, double now, double limit, void **out, size_t max) {
    return t ? t->table.expire(now, limit, out, max) : 0;
}

void efa_inflight_pause(efa_inflight_t *t, double seconds, double now) {
    if (t) {
        t->table.pause(seconds, now);
    }
}

size_t efa_inflight_size(efa_inflight_t *t) {
    return t ? t->table.size() : 0;
}

} // extern "C"
