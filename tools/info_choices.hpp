// efa-mpi-info's view of what the components would do with the provider
// they chose: the core opened for real (efa_core_acquire, as both
// components open it: fabric, domain, address vector and endpoint on the
// process's first NIC), what the provider granted there, and what the
// components' defaults make of it (mtl_efa_matching, btl_efa_rma_mode and
// _atomic_mode "auto", the on-node channel, single copy).
#pragma once

#include <string>
#include <vector>

#include "efa_core.h"

namespace efa::info {

struct Choices {
    bool opened = false;
    std::string not_opened;    // why the core did not open
    std::string locked_memory; // RLIMIT_MEMLOCK (locked_memory.hpp): EFA pins what it registers
    // What the provider granted on the endpoint.
    bool tagged = false, rma = false, atomics = false, mr_local = false;
    std::string write_by, read_by, atomics_by; // "device", "emulation" or "not said"
    size_t inject = 0, max_msg = 0, cq_data = 0;
    // What the components' defaults choose with it.
    std::string matching, matching_why; // mtl_efa: "own" or "provider"
    std::string put, get, atomic_ops;   // btl_efa: "native" or "emulated (...)"
    std::string onnode;                 // the on-node channel and where it lives
    std::string single_copy;            // cross-memory attach, or why not
    int rails = 1;                      // NICs opened: the rails
    size_t stripe_min = 0;              // one-sided transfers striped from (0: never)
    bool striping_off = false;          // common_efa_stripe_min 0 (the core then opens one rail)
    std::string hmem;                   // device (GPU) buffers and the provider's FI_HMEM
    std::string dmabuf;                 // how device allocations would be registered
    std::string vmm;                    // where CUDA VMM and pool memory would go
};

// one_node: a job within this node (atomics then go through the rings).
Choices component_choices(const efa_core_params_t &p, bool one_node,
                          efa_core_show_help_fn show_help, efa_core_verbose_fn verbose);

// The text section ("granted on the first NIC's endpoint", "what the
// components' defaults choose"); open_messages: what the core said when it
// did not open.
void print_text(const Choices &c, const std::vector<std::string> &open_messages);
// The JSON object's "opened", "granted" and "choices" members, each line
// ending in a comma; json_str quotes a string.
void print_json_fields(const Choices &c, std::string (*json_str)(const std::string &));

} // namespace efa::info
