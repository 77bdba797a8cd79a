// The peer deadline's stand-ins (deadline_tracked.hpp): recycled, so that
// tracking an operation costs no allocation; and the deadline's clock.
#include <ctime>
#include <new>

#include "deadline_tracked.hpp"

namespace efa {

efa_op_t g_probe_owner = {{}, efa_op_complete_nothing, EFA_RX_INTERNAL, 0, 0, 0, nullptr};

Tracked *take_tracked(efa_core *core, efa_op_t *owner, efa_ctx *ctx, fi_addr_t peer,
                      uint64_t flags) {
    Tracked *t;
    if (!core->deadline_free.empty()) {
        t = static_cast<Tracked *>(core->deadline_free.back());
        core->deadline_free.pop_back();
    } else if (!(t = new (std::nothrow) Tracked)) {
        return nullptr;
    }
    // Field by field: the atomic makes the whole struct unassignable.
    t->op = efa_op_t{};
    t->entry = PeerDeadline::Entry{};
    t->owner = owner;
    t->ctx = ctx;
    t->peer = peer;
    t->flags = flags;
    t->sent = false;
    t->failed.store(false, std::memory_order_relaxed);
    t->held_err = 0;
    t->held_until = 0;
    return t;
}

void give_tracked(efa_core *core, Tracked *t) {
    try {
        core->deadline_free.push_back(t);
    } catch (...) {
        delete t;
    }
}

uint64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

} // namespace efa
