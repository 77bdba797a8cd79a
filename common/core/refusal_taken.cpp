// An owner that went another way after the provider refused its device
// memory from the backlog says so (efa_mr.h's
// efa_core_device_refusal_taken), so that the backlog tells no failure of
// that post (ctx_progress.cpp).  Per thread: the owner hears that
// completion in the thread that flushes the backlog, and another thread's
// refusal must not hide a failure there.
#include "core.hpp"
#include "efa_mr.h"

namespace {
thread_local bool t_refusal_taken = false;
} // namespace

namespace efa::post {

bool take_refusal_taken() {
    const bool taken = t_refusal_taken;
    t_refusal_taken = false;
    return taken;
}

} // namespace efa::post

extern "C" void efa_core_device_refusal_taken(void) {
    t_refusal_taken = true;
}
