// The efa provider's own endpoint switches.  Each is compiled in only where
// this libfabric declares it (configure: HAVE_DECL_FI_OPT_*), applied only on
// the efa provider (or everywhere with force_efa_options, the test path on
// the stand-ins), and reported at verbose 1 with what came of it:
//  - FI_OPT_SHARED_MEMORY_PERMITTED (before fi_enable): the provider's own
//    shared-memory path.  Off when our on-node path carries node-local
//    traffic, so efa does not open a second shm region and endpoint per
//    process for nothing; on when our on-node path is off.
//  - FI_OPT_EFA_RNR_RETRY (before fi_enable): only when the user sets it.
//  - FI_OPT_CUDA_API_PERMITTED (before fi_enable): only when the user sets
//    provider_cuda_calls; off lets libfabric's efa fabric carry CUDA VMM
//    and pool memory (efa_core_hmem_vmm_allowed).
//  - FI_OPT_EFA_EMULATED_READ/WRITE/ATOMICS (after fi_enable): which
//    one-sided operations the device does; btl_efa's auto modes use the
//    provider's RMA only for those.  force_emulated overrides the answer.
// A refused option keeps the provider's default and says so; it never
// fails the endpoint.
#pragma once

#include <string>
#include <vector>

#include <rdma/fabric.h>

#include "efa_core.h"
#include "provider_select.hpp"

namespace efa {

// What came of the switches on one endpoint; 'lines' is the report.
struct ProviderSwitches {
    int provider_shm = EFA_SWITCH_AUTO; // what the provider runs with, AUTO: unknown
    int cuda_calls = EFA_SWITCH_AUTO;   // the same, of FI_OPT_CUDA_API_PERMITTED
    efa_rma_by_t read = EFA_RMA_BY_UNKNOWN;
    // The provider's own answer for RDMA read, which force_emulated leaves
    // alone: whether the device reads is a fact of the card, not a choice.
    efa_rma_by_t device_read = EFA_RMA_BY_UNKNOWN;
    efa_rma_by_t write = EFA_RMA_BY_UNKNOWN;
    efa_rma_by_t atomics = EFA_RMA_BY_UNKNOWN;
    std::vector<std::string> lines;
};

// Which of read, write, atomics a force_emulated list names.  Returns
// false (with the offending item) on anything else; "" names none.
struct EmulatedOverride {
    bool read = false, write = false, atomics = false;
};
bool parse_emulated_list(const char *list, EmulatedOverride *out, std::string *bad_item);

// Does this provider get the switches?  efa only, unless forced.
bool provider_takes_efa_switches(const fi_info *info, const efa_core_params_t &p);

// Before fi_enable.
void apply_switches_before_enable(fid_ep *ep, const fi_info *info, const efa_core_params_t &p,
                                  ProviderSwitches *out);
// After fi_enable.
void read_switches_after_enable(fid_ep *ep, const fi_info *info, const efa_core_params_t &p,
                                ProviderSwitches *out);

// Fold another endpoint's outcome (another context of the NIC, or another
// NIC's first) into 'all': a switch the endpoints took differently is
// unknown (AUTO) in 'all', so that nothing relies on it, and a line
// naming 'where' says so; a device read any of them emulates is emulated.
void merge_switches(ProviderSwitches *all, const ProviderSwitches &other, const std::string &where);

// Did the endpoint take CUDA calls off on a device without RDMA read?  The
// provider then copies eager messages into device memory only by gdrcopy
// and fails them without it (provider-cuda-calls-without-read).
bool cuda_calls_off_without_read(const ProviderSwitches &sw);

} // namespace efa
