// The registration backend of the MR caches: memory registered with the
// NICs' domains (fi_mr_backend.cpp), host ranges and device allocations.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <rdma/fi_domain.h> // (FI_HMEM_DEVICE_ONLY: in fabric.h before libfabric 2.0)

#include "efa_device.h"
#include "mr_cache.hpp"
#include "provider_select.hpp" // (Reporter)

namespace efa {

// Registers memory with the NICs' domains for the cache: NIC 0's, and
// each other rail's where the core opened several.
class FiMrBackend : public MrBackend {
  public:
    // bind_eps: with FI_MR_ENDPOINT every registration is bound to these
    // endpoints and enabled before use; empty otherwise.
    struct Domain {
        fid_domain *domain;
        std::vector<fid_ep *> bind_eps;
    };
    // mr_local: local buffers need descriptors, so ranges registered for
    // local RMA access are registered on the rails too (else only those
    // for remote access are).
    // device: the ranges are device allocations (efa_device.h), registered
    // with their interface and device (fi_mr_regattr), on the rails by the
    // same rule as host ranges (local reads and writes always: a device
    // buffer needs its descriptor), with keys from 'keys' (the host
    // backend's on the same domains: a provider that does not pick keys
    // refuses one taken twice).
    FiMrBackend(std::vector<Domain> domains, bool mr_local)
        : domains_(std::move(domains)), mr_local_(mr_local), device_(false), keys_(&own_keys_) {}
    FiMrBackend(std::vector<Domain> domains, bool mr_local, FiMrBackend &keys)
        : domains_(std::move(domains)), mr_local_(mr_local), device_(true), keys_(keys.keys_) {}
    int reg(void *base, size_t len, uint64_t access, MrRegistration *out) override;
    void dereg(const MrRegistration &r) override;

    // Device allocations through a dmabuf first (FI_MR_DMABUF; core.cpp
    // decides whether it can work here).  A provider that refuses one
    // turns it off for good (said once through rep); a device that cannot
    // export an allocation leaves that one to the plain path.
    void use_dmabuf(Reporter *rep) {
        dmabuf_rep_ = rep;
        dmabuf_.store(true, std::memory_order_relaxed);
    }
    bool dmabuf() const { return dmabuf_.load(std::memory_order_relaxed); }
    uint64_t dmabuf_regs() const { return dmabuf_regs_.load(std::memory_order_relaxed); }
    // Device registrations over several allocations side by side (CUDA VMM:
    // device_span.hpp).
    uint64_t span_regs() const { return span_regs_.load(std::memory_order_relaxed); }
    // A registration the provider would not close (its pages stay pinned,
    // and reachable by its key where it had remote rights) is said
    // through rep, once; counted in closes_failed().
    void say_close_failures_to(Reporter *rep) { close_rep_ = rep; }
    uint64_t closes_failed() const { return closes_failed_.load(std::memory_order_relaxed); }

  private:
    void close_mr(void *handle);
    int reg_one(const Domain &d, void *base, size_t len, uint64_t access, uint64_t key,
                const efa_device_hmem_t *hmem, fid_mr **out);
    int reg_dmabuf(const Domain &d, void *base, size_t len, uint64_t access, uint64_t key,
                   const efa_device_hmem_t &h, fid_mr **out, bool *refused);
    int reg_device_on(size_t nic, void *base, size_t len, uint64_t access, uint64_t key,
                      const efa_device_hmem_t &h, bool span, fid_mr **out, bool *by_dmabuf);
    void add_rails(void *base, size_t len, uint64_t access, uint64_t key,
                   const efa_device_hmem_t *h, bool span, MrRegistration *out);
    int bind_and_enable(const Domain &d, fid_mr *mr);
    int reg_device(void *base, size_t len, uint64_t access, MrRegistration *out);
    std::vector<Domain> domains_;
    bool mr_local_;
    bool device_;
    std::atomic<uint64_t> own_keys_{1}; // for providers that do not pick keys
    std::atomic<uint64_t> *keys_;       // own_keys_, or the host backend's
    std::atomic<bool> dmabuf_{false};
    std::atomic<uint32_t> dmabuf_off_rails_{0}; // rails (bit per NIC) whose dmabuf was refused
    std::atomic<uint64_t> dmabuf_regs_{0};      // device registrations made through a dmabuf
    std::atomic<uint64_t> span_regs_{0};        // ... over several allocations
    std::atomic<bool> span_dmabuf_off_{false};  // such a range's dmabuf was refused
    Reporter *dmabuf_rep_ = nullptr;
    Reporter *close_rep_ = nullptr;
    std::atomic<uint64_t> closes_failed_{0};
};

// The flags a device allocation is registered with: FI_HMEM_DEVICE_ONLY
// for a device's own memory (every allocation the device seam describes
// is: managed memory counts as host memory), which tells libfabric's shm
// that it may hand the buffer to its peer by the device's IPC instead of
// copying it through host memory, and which efa accepts (all its device
// memory is so); none for host memory.
inline uint64_t device_mr_flags(int iface) {
#ifdef FI_HMEM_DEVICE_ONLY
    return FI_HMEM_SYSTEM != iface ? FI_HMEM_DEVICE_ONLY : 0;
#else
    (void)iface;
    return 0;
#endif
}

// Registrations through a dmabuf (FI_MR_DMABUF) exist in the headers
// built with and in the API version asked for: libfabric hands the dmabuf
// to the provider only from 1.20 (below, the attribute is read as an iov).
inline bool dmabuf_in_api(uint32_t api_version) {
#ifdef FI_MR_DMABUF
    return api_version >= FI_VERSION(1, 20);
#else
    (void)api_version;
    return false;
#endif
}

} // namespace efa
