// Host buffers' registrations through the core's cache (efa_mr.h's
// efa_core_mr_acquire and efa_core_mr_release; device buffers':
// core_device_mr.cpp).  A registration refused for room is explained once
// per process (locked_memory.hpp).
#include "core.hpp"
#include "locked_memory.hpp"

using namespace efa;

extern "C" {

efa_mr_t *efa_core_mr_acquire(efa_core_t *core, const void *addr, size_t len, uint64_t access,
                              int *err) {
    auto *mr = reinterpret_cast<efa_mr_t *>(core->mr_cache->acquire(addr, len, access, err));
    if (!mr) {
        core->failures.report(core->rep, "fi_mr_reg", *err);
        efa::say_registration_refused(core->rep, core->registration_refused_said, len, *err,
                                      efa::locked_memory());
    } else if ((access & (FI_REMOTE_READ | FI_REMOTE_WRITE)) && !core->rails.empty()) {
        efa::note_rails_used(core); // peers may reach it over a rail
    }
    return mr;
}

void efa_core_mr_release(efa_core_t *core, efa_mr_t *mr) {
    auto *e = reinterpret_cast<MrEntry *>(mr);
    if (e && e->reg.device) {
        core->dev_mr_cache->release(e);
        return;
    }
    core->mr_cache->release(e);
}

} // extern "C"
