// A provider that refuses a post of device memory it registered: the
// caller copies that buffer through the host and posts again, and memory
// of its kind is copied through the host from then on (efa_mr.h's
// efa_core_mr_device_post_refused).  libfabric's efa fabric does so for
// CUDA memory without synchronous memory operations (libfabric issue
// 12853: every post fails with -FI_EINVAL), which common_efa_hmem_vmm
// "on" hands it; another provider or driver may refuse other device
// memory.  Also the test setting that stands in for such a provider.

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "ctx_post.hpp"
#include "efa_core.h"
#include "mr_cache.hpp"

namespace efa::post {

// 1: refused at the post, as libfabric's efa fabric does; 2: the post
// waits in the backlog and is refused when progress posts it, so that its
// owner hears it from the completion.
int refuse_for_test(efa_ctx *ctx, efa::Backlog &b, const char *call, efa_op_t *op) {
    if (2 != ctx->core->params.debug_fake_device_refuse_post || nullptr == op) {
        return post_failed(ctx, call, -FI_EINVAL);
    }
    op->rx_counted = 0;
    op->peek = 0;
    op->tracker = nullptr;
    efa::inflight_add(ctx, op);
    defer(ctx, b, call, op, [] { return static_cast<ssize_t>(-FI_EINVAL); });
    return 0;
}

} // namespace efa::post

namespace efa {

bool device_registration(const efa_mr_t *mr) {
    const auto *e = reinterpret_cast<const MrEntry *>(mr);
    return nullptr != e && e->reg.device;
}

} // namespace efa

extern "C" {

efa_device_post_refusal_t efa_core_mr_device_post_refused(efa_core_t *core, efa_mr_t *mr,
                                                          const char *call, int rc) {
    if (!efa::device_registration(mr) || !efa::refuses_memory(rc)) {
        return EFA_DEVICE_POST_NOT_REFUSED;
    }
    const auto *e = reinterpret_cast<const efa::MrEntry *>(mr);
    core->dev_post_refusals.fetch_add(1, std::memory_order_relaxed);
    // Memory without synchronous memory operations is what the one
    // provider known to refuse refuses: other device memory keeps going
    // to it until a post of that is refused too.
    const bool vmm = e->reg.no_sync_memops;
    std::atomic<bool> &kind = vmm ? core->dev_vmm_posts_refused : core->dev_posts_refused;
    if (!kind.exchange(true, std::memory_order_relaxed)) {
        core->rep.help("device-post-refused", call, fi_strerror(-rc),
                       vmm ? "device memory without synchronous memory operations (CUDA VMM, "
                             "pool memory); other device memory still goes to the provider"
                           : "all device memory");
    }
    return vmm ? EFA_DEVICE_POST_REFUSED_VMM : EFA_DEVICE_POST_REFUSED_ALL;
}

void efa_core_mr_device_refusals(const efa_core_t *core, uint64_t *posts, uint64_t *after) {
    *posts = core->dev_post_refusals.load(std::memory_order_relaxed);
    *after = core->dev_after_refusal.load(std::memory_order_relaxed);
}

} // extern "C"
