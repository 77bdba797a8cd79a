// One NIC (libfabric domain) with its address vector and the endpoints
// (contexts) the process drives on it.  The MTL and the BTL share it.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "efa_core.h"
#include "fi_handles.hpp"
#include "provider_options.hpp"
#include "provider_select.hpp"

namespace efa {
// An operation the provider refused for lack of queue space, kept in order
// and posted again from progress.
struct Deferred {
    efa_op_t *op = nullptr; // completes with an error if the late post fails; null for injects
    std::function<ssize_t()> post;
    bool holds_slot = false; // a receive that occupies a provider queue slot while posted
    const char *call = "";   // the libfabric call, for the failure report
};

struct Backlog {
    std::mutex lock;
    std::deque<Deferred> ops;
    std::atomic<size_t> size{0};
    std::atomic<uint64_t> deferred{0}; // statistics: posts that found the queue full
    // Its owner is being told of a refused post, whose replacement goes
    // first: no other thread's flush posts what waits behind it meanwhile.
    std::atomic<bool> reposting{false};
};
} // namespace efa

// The C-visible context: one endpoint and its completion queue.
struct efa_ctx {
    fid_ep *ep = nullptr;
    fid_cq *cq = nullptr;
    efa_core *core = nullptr;
    int index = 0;
    int rail = 0;             // the NIC: 0, or one of the core's other rails
    bool use_cq_data = false; // send the source rank as remote CQ data
    bool source = false;      // FI_SOURCE granted: completions are read with their source
    bool tagged_cq = true;    // entries are fi_cq_tagged_entry, else fi_cq_data_entry
    // Several threads may post and progress at once (MPI_THREAD_MULTIPLE).
    // Otherwise one thread at a time drives the context, and the
    // receive-slot counters below need no locked instructions (each costs
    // tens of cycles on every receive post and completion).
    bool mt = true;

    // Receives carry a second iov into this scratch area when set: a message
    // longer than the user's buffer then overflows here instead of making
    // the provider truncate, which some stand-ins handle badly (tcp;ofi_rxm
    // drops the connection, udp;ofi_rxd truncates silently).  The owner
    // sees the truncation as a length beyond its buffer.
    void *overflow_buf = nullptr;
    size_t overflow_len = 0;
    void *overflow_desc = nullptr;

    // Posts that found the provider's queue full, one backlog per
    // direction.  While one is non-empty, every new post of its direction
    // joins it, so send order and receive posting order hold.  Separate,
    // because receives that wait for space must never hold back the sends
    // that the peer's receives are waiting for.
    efa::Backlog tx_backlog, rx_backlog, rx_internal_backlog;

    // Provider receive-queue slots held by posted receives (see EFA_RX_*).
    // capacity 0: the provider gave no bound.
    std::atomic<int> rx_posted{0}, rx_posted_user{0};
    int rx_capacity = 0, rx_user_capacity = 0;

    // Operations posted through the core and not completed yet (receives
    // of the pool that stay posted for ever are not counted): while any
    // is in flight, efa_core_progress_paced polls on every call.
    std::atomic<int> inflight{0};

    // Statistics: completions read from the CQ over the context's life,
    // reported when the core closes (a job's proof that its traffic
    // crossed the provider), and the pvar common_efa_completions.  A
    // locked add only where several threads may poll (mt).
    std::atomic<uint64_t> completions{0};
};

namespace efa {

// The name a shm endpoint gets (nic.cpp, unique_shm_name).  Fixed width:
// peers compare address lengths, and shm's address is this string, so a
// process whose pid (or context index) has one digit more than another's
// would otherwise be refused by it.
std::string shm_endpoint_name(long pid, long long sec, long nsec, int index);

// The completion queue's format: tagged where the endpoint has tags, else
// the data format (efa-direct, libfabric 2.4 and later, refuses a tagged
// queue with -FI_ENOSYS; the data format carries all the rest).
fi_cq_format cq_format_for(const fi_info *info);

class Nic {
  public:
    // Opens fabric, domain, AV and num_contexts endpoints from 'info'.
    // Returns nullptr and sets *err (reported through rep) on failure.
    // params.num_contexts endpoints; params also carries the efa switches.
    static std::unique_ptr<Nic> open(const fi_info *info, const efa_core_params_t &params,
                                     efa_core *core, const Reporter &rep, int *err);
    ~Nic();
    // Closes the endpoints now (the rest goes with the Nic): a rail's
    // endpoints may hold operations on a dead connection, which the
    // provider must drop while their registrations still exist.
    void close_endpoints();

    Nic(const Nic &) = delete;
    Nic &operator=(const Nic &) = delete;

    const fi_info *info() const { return info_.get(); }
    fid_domain *domain() const { return domain_.get(); }
    fid_av *av() const { return av_.get(); }
    int num_contexts() const { return static_cast<int>(ctxs_.size()); }
    efa_ctx *ctx(int i) { return ctxs_[i].get(); }
    size_t addr_len() const { return addr_len_; }
    // Endpoint names, num_contexts * addr_len bytes.
    const std::vector<uint8_t> &names() const { return names_; }
    // What came of the efa provider's switches (provider_options.hpp).
    const ProviderSwitches &switches() const { return switches_; }

  private:
    Nic() = default;
    InfoPtr info_;
    FabricPtr fabric_;
    DomainPtr domain_;
    AvPtr av_;
    std::vector<EpPtr> eps_;
    std::vector<CqPtr> cqs_;
    std::vector<std::unique_ptr<efa_ctx>> ctxs_;
    size_t addr_len_ = 0;
    std::vector<uint8_t> names_;
    ProviderSwitches switches_;
};

} // namespace efa
