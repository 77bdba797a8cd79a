// Device allocations through a provider that granted FI_HMEM: their
// registrations (efa_mr.h's efa_core_mr_acquire_device), and whether the
// provider would grant it (efa_core_offers_hmem, for efa-mpi-info).
#include <algorithm>
#include <cstring>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "device_span.hpp"
#include "efa_core.h"
#include "efa_device.h"

using namespace efa;

extern "C" {

efa_mr_t *efa_core_mr_acquire_device(efa_core_t *core, const void *addr, size_t len,
                                     uint64_t access, int *err) {
    MrCache *cache = core->dev_mr_cache.get();
    DeviceSpan span;
    int rc = cache ? describe_device_span(addr, len, &span) : -FI_EOPNOTSUPP;
    const efa_device_hmem_t &h = span.whole; // (CUDA VMM: maybe several allocations)
    // What failed, for the report: not the provider unless it was asked.
    // (Each such buffer then goes through the host.)
    static_assert(256 == kMrMaxPieces, "the report names the limit");
    const char *what =
        !cache            ? "device registration (FI_HMEM not granted)"
        : -FI_E2BIG == rc ? "device buffer description (a buffer over more than 256 CUDA VMM "
                            "allocations side by side; such buffers go through the host)"
        : 0 != rc         ? "device buffer description (one allocation holding it whole, "
                            "or CUDA VMM allocations side by side)"
        : span.pieces > 1 ? "fi_mr_regattr (device memory over CUDA VMM allocations side by side)"
                          : "fi_mr_regattr (device memory)";
    // Id 0: the device cannot tell a freed allocation from the one at its
    // address now, so a registration could outlive its memory.
    if (0 == rc && 0 == h.buffer_id) {
        rc = -FI_EOPNOTSUPP;
        what = "device allocation id (none given)";
    }
    // (kept from the provider by common_efa_hmem_vmm, or since the
    // provider refused a post of such memory: device_post_refused.cpp)
    const bool vmm_refused = core->dev_vmm_posts_refused.load(std::memory_order_relaxed);
    if (0 == rc && h.no_sync_memops && (!core->dev_vmm_ok || vmm_refused)) {
        if (0 == core->dev_vmm_staged.fetch_add(1, std::memory_order_relaxed)) {
            core->rep.say(1, std::string("device memory without synchronous memory operations "
                                         "(CUDA VMM or pool memory) met: copied through the "
                                         "host (") +
                                 (core->dev_vmm_ok ? "the provider refused a post of such memory"
                                                   : core->dev_vmm_why) +
                                 ")");
        }
        *err = -FI_EOPNOTSUPP;
        return nullptr;
    }
    if (0 == rc && core->dev_posts_refused.load(std::memory_order_relaxed)) {
        core->dev_after_refusal.fetch_add(1, std::memory_order_relaxed);
        *err = -FI_EOPNOTSUPP; // (said when the provider refused)
        return nullptr;
    }
    if (0 == rc) {
        std::lock_guard<std::mutex> guard(core->dev_refused_lock);
        const auto &r = core->dev_refused;
        if (std::find(r.begin(), r.end(), h.buffer_id) != r.end()) {
            *err = -FI_EOPNOTSUPP; // (refused before: said then)
            return nullptr;
        }
    }
    for (int attempt = 0; 0 == rc; ++attempt) {
        bool cached = true;
        MrEntry *e =
            cache->acquire(reinterpret_cast<const void *>(h.base), h.len, access, &rc, &cached);
        // One the lookup cannot find (registered alone beside a stale
        // entry that overlaps it, or taken out since by another thread's
        // invalidation) holds these allocations all the same: it serves,
        // and goes at its last release (a stale entry beside it goes now:
        // below).  Asking again could meet the next
        // thread's invalidation, and fail a good buffer.
        if (e && registration_current(e->reg, span)) {
            if (!cached && cache->reuses()) {
                // Registered alone beside an entry that overlaps without
                // holding these allocations: that one is of allocations
                // freed since (allocations never overlap), and, idle, it
                // would keep their memory pinned and make every later
                // acquire here try the merge again.
                cache->invalidate(reinterpret_cast<const void *>(h.base), h.len);
            }
            if ((access & (FI_REMOTE_READ | FI_REMOTE_WRITE)) && !core->rails.empty()) {
                efa::note_rails_used(core); // peers may reach it over a rail
            }
            return reinterpret_cast<efa_mr_t *>(e);
        }
        if (e) {
            // Allocations never overlap, so an entry that does not hold
            // these allocations as they are (another id, length or place)
            // meets allocations freed since whose addresses the device
            // handed out again: those are dropped (held ones at their last
            // release) and these registered (they cannot be stale twice).
            // An entry over more allocations than these (CUDA VMM pieces
            // side by side) serves them while all of its own are as they
            // were.
            cache->release(e);
            cache->invalidate(reinterpret_cast<const void *>(h.base), h.len);
            core->dev_mr_stale.fetch_add(1, std::memory_order_relaxed);
            rc = attempt ? -FI_EIO : 0;
        } else if (0 != h.buffer_id) {
            // (refused, or no room even once the cache let its idle ones
            // go: this allocation goes through the host from now on)
            std::lock_guard<std::mutex> guard(core->dev_refused_lock);
            core->dev_refused[core->dev_refused_next++ % core->dev_refused.size()] = h.buffer_id;
        }
    }
    *err = rc;
    core->failures.report(core->rep, what, rc);
    return nullptr;
}

bool efa_core_hmem_vmm_allowed(int sw, const char *fabric, int provider_cuda_calls,
                               uint32_t lib_version, const char **why) {
    if (EFA_SWITCH_ON == sw) {
        *why = "common_efa_hmem_vmm on";
        return true;
    }
    if (EFA_SWITCH_OFF == sw) {
        *why = "common_efa_hmem_vmm off";
        return false;
    }
    // (efa-direct, the same device without the RDM layer, sets nothing)
    const bool efa_rdm = fabric && 0 == strcmp(fabric, "efa");
    // 1.18 to 1.19.0 set the attribute when the memory is registered,
    // whatever the endpoint may call; 1.19.1 moved it to the post, under the
    // endpoint's permission.  fi_version() has no patch level: 1.19 counts
    // as before.
    if (efa_rdm && EFA_SWITCH_OFF == provider_cuda_calls && lib_version >= FI_VERSION(1, 20)) {
        *why = "common_efa_hmem_vmm auto: libfabric's efa fabric runs without CUDA calls "
               "(common_efa_provider_cuda_calls off), so it sets no "
               "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS to fail their posts";
        return true;
    }
    if (efa_rdm && EFA_SWITCH_OFF == provider_cuda_calls) {
        *why = "common_efa_hmem_vmm auto: this libfabric is before 1.20 (up to 1.19.0 it sets "
               "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS when it registers CUDA memory even without "
               "CUDA calls, common_efa_provider_cuda_calls off, and the loaded library tells "
               "no patch level); on hands it over anyway";
        return false;
    }
    if (efa_rdm) {
        *why = "common_efa_hmem_vmm auto: libfabric's efa fabric fails posts of CUDA memory "
               "that refuses CU_POINTER_ATTRIBUTE_SYNC_MEMOPS; on hands it over anyway";
        return false;
    }
    *why = "common_efa_hmem_vmm auto: not libfabric's efa fabric, which fails their posts";
    return true;
}

// Messages with FI_HMEM on the first NIC's provider:
// what a job whose device buffers go to the provider would be granted
// (its FI_ATOMIC may not come with it: shm).
bool efa_core_offers_hmem(const efa_core_t *core) {
    const fi_info *nic = core->selection.nics.empty() ? nullptr : core->selection.nics[0];
    InfoPtr hints(nic ? fi_allocinfo() : nullptr);
    if (!hints) {
        return false;
    }
    hints->caps = (nic->caps & (FI_TAGGED | FI_MSG)) | FI_HMEM;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                  FI_MR_ENDPOINT | FI_MR_LOCAL | FI_MR_HMEM;
    hints->fabric_attr->prov_name = strdup(nic->fabric_attr->prov_name);
    fi_info *list = nullptr;
    const int rc = fi_getinfo(core->selection.api_version, nullptr, nullptr, 0, hints.get(), &list);
    InfoPtr owned(list);
    return 0 == rc && nullptr != list;
}

uint64_t efa_core_mr_device_stale(const efa_core_t *core) {
    return core->dev_mr_stale.load(std::memory_order_relaxed);
}

uint64_t efa_core_mr_device_vmm_staged(const efa_core_t *core) {
    return core->dev_vmm_staged.load(std::memory_order_relaxed);
}

uint64_t efa_core_mr_device_dmabuf(const efa_core_t *core) {
    return core->dev_mr_backend ? core->dev_mr_backend->dmabuf_regs() : 0;
}

uint64_t efa_core_mr_device_spans(const efa_core_t *core) {
    return core->dev_mr_backend ? core->dev_mr_backend->span_regs() : 0;
}

bool efa_core_mr_dmabuf_on(const efa_core_t *core) {
    return core->dev_mr_backend && core->dev_mr_backend->dmabuf();
}

bool efa_core_dmabuf_in_libfabric(void) {
    return dmabuf_in_api(api_version());
}

} // extern "C"
