// An owner that went another way after the provider refused its device
// memory from the backlog says so (efa_mr.h's
// efa_core_device_refusal_taken), so that the backlog tells no failure of
// that post (ctx_progress.cpp).  Per thread: the owner hears that
// completion in the thread that flushes the backlog, and another thread's
// refusal must not hide a failure there.  What the owner posts instead,
// while told, takes the refused post's place at the head of its backlog
// (RepostInPlace), ahead of the posts that came after it.
#include "core.hpp"
#include "ctx_post.hpp"
#include "efa_mr.h"

namespace {
thread_local bool t_refusal_taken = false;
thread_local efa::Backlog *t_front_of = nullptr; // RepostInPlace's backlog (none: null)
thread_local int t_front_at = 0;                 // ... and the next place from its head
} // namespace

namespace efa::post {

bool take_refusal_taken() {
    const bool taken = t_refusal_taken;
    t_refusal_taken = false;
    return taken;
}

RepostInPlace::RepostInPlace(efa::Backlog *b) : outer_(t_front_of), outer_at_(t_front_at) {
    t_front_of = b;
    t_front_at = 0;
}

RepostInPlace::~RepostInPlace() {
    t_front_of = outer_;
    t_front_at = outer_at_;
}

int repost_place(const efa::Backlog *b) {
    return b == t_front_of ? t_front_at++ : -1;
}

} // namespace efa::post

extern "C" void efa_core_device_refusal_taken(void) {
    t_refusal_taken = true;
}
