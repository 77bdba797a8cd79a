// The peer deadline's stand-ins (deadline_tracked.hpp): recycled, so that
// tracking an operation costs no allocation; and the deadline's clock.
#include <cstdio>
#include <ctime>
#include <string>
#include <new>

#include "deadline_tracked.hpp"

namespace efa {

efa_op_t g_probe_owner = {{}, efa_op_complete_nothing, EFA_RX_INTERNAL, 0, 0, 0, nullptr};

Tracked *take_tracked(efa_core *core, efa_op_t *owner, efa_ctx *ctx, fi_addr_t peer,
                      uint64_t flags) {
    Tracked *t;
    if (!core->deadline_free.empty()) {
        t = static_cast<Tracked *>(core->deadline_free.front());
        core->deadline_free.pop_front();
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
    t->in_free_list.store(false, std::memory_order_relaxed);
    return t;
}

void give_tracked(efa_core *core, Tracked *t) {
    if (t->in_free_list.exchange(true, std::memory_order_acq_rel)) {
        return; // free already: in the list once, or two operations would share it
    }
    try {
        core->deadline_free.push_back(t);
    } catch (...) {
        delete t;
    }
}

// The provider handed back a stand-in it had handed back before: its owner
// heard of that operation already, and may have been freed since.
// Completing it again would complete whatever owns that memory now.
void stale_completion(efa_core *core, const efa_cqe_t *cqe) {
    const uint64_t n = core->stale_completions.fetch_add(1, std::memory_order_relaxed);
    char what[96];
    std::snprintf(what, sizeof(what), "flags 0x%llx, tag 0x%llx, error %d",
                  static_cast<unsigned long long>(cqe->flags),
                  static_cast<unsigned long long>(cqe->tag), cqe->err);
    core->rep.say(n ? 20 : 0, std::string("the provider completed an operation a second time (") +
                                  what + "); ignored");
}

uint64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

} // namespace efa
