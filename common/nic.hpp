// One NIC (libfabric domain) with its address vector and the endpoints
// (contexts) the process drives on it.  The MTL and the BTL share it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "efa_core.h"
#include "fi_handles.hpp"
#include "provider_select.hpp"

// The C-visible context: one endpoint and its completion queue.
struct efa_ctx {
    fid_ep *ep = nullptr;
    fid_cq *cq = nullptr;
    efa_core *core = nullptr;
    int index = 0;
    bool use_cq_data = false; // send the source rank as remote CQ data
};

namespace efa {

class Nic {
  public:
    // Opens fabric, domain, AV and num_contexts endpoints from 'info'.
    // Returns nullptr and sets *err (reported through rep) on failure.
    static std::unique_ptr<Nic> open(const fi_info *info, int num_contexts, efa_core *core,
                                     const Reporter &rep, int *err);
    ~Nic();

    Nic(const Nic &) = delete;
    Nic &operator=(const Nic &) = delete;

    const fi_info *info() const { return info_.get(); }
    fid_domain *domain() const { return domain_.get(); }
    fid_av *av() const { return av_.get(); }
    int num_contexts() const { return static_cast<int>(ctxs_.size()); }
    efa_ctx *ctx(int i) { return &ctxs_[i]; }
    size_t addr_len() const { return addr_len_; }
    // Endpoint names, num_contexts * addr_len bytes.
    const std::vector<uint8_t> &names() const { return names_; }

  private:
    Nic() = default;
    InfoPtr info_;
    FabricPtr fabric_;
    DomainPtr domain_;
    AvPtr av_;
    std::vector<EpPtr> eps_;
    std::vector<CqPtr> cqs_;
    std::vector<efa_ctx> ctxs_;
    size_t addr_len_ = 0;
    std::vector<uint8_t> names_;
};

} // namespace efa
