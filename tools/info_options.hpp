// efa-mpi-info's command line (info_options.cpp): the options, over the
// components' MCA parameters from the environment and the parameter files
// (each value taken kept with where it came from), and the components'
// release.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "efa_core.h"
#include "efa_params.hpp"

namespace efa::info {

// A parameter taken from the environment or a parameter file, with where
// it came from (said in the report, as the files are easy to forget).
struct Setting {
    std::string name, value, source;
    std::string overridden_by; // the option given instead, if any
};

struct Options {
    std::string provider;         // as common_efa_provider_include; empty: efa
    std::string provider_exclude; // as common_efa_provider_exclude
    std::string nic_include;      // as common_efa_nic_include
    std::string nic_exclude;
    int local_size = 1;
    bool map_by_package = false; // --map-by package: round-robin by package, bound to it
    bool map_by_core = false;    // --map-by core: process r bound to core r
    int nics_per_proc = 0;       // as common_efa_nics_per_proc; 0: the whole share
    std::string gpu = "auto";    // as common_efa_gpu
    int stripe_min = 262144;     // as common_efa_stripe_min (the glue's default)
    std::string topology;        // hwloc XML; empty: this machine
    bool one_node = false;       // a job within this node: FI_REMOTE_COMM not needed
    bool direct_mode = false;    // as common_efa_force_direct_mode
    // The environment's common_efa_hmem_vmm and _provider_cuda_calls
    // (EFA_SWITCH_*): where CUDA VMM memory goes depends on both.
    int hmem_vmm = EFA_SWITCH_AUTO;
    int provider_cuda_calls = EFA_SWITCH_AUTO;
    bool force_efa_options = false; // as common_efa_force_efa_options (the stand-ins)
    bool dmabuf = true;             // as common_efa_dmabuf (default on)
    // The core's other parameters, read to be passed on and checked as the
    // glue checks them (a value it refuses: the components would not run);
    // the glue's defaults (common_efa_glue.c's table) where unset.
    int num_contexts = 1, tx_size = 0, rx_size = 0, mr_cache_size = 1024, progress_batch = 16;
    int rnr_retry = -1, peer_timeout = 600, rail_retry = 10;
    int net_poll_interval_us = 20, net_poll_interval_max_us = 1000;
    int direct_mode_mtu = efa::ParamLimits::kDefaultDirectMtu;
    std::string force_emulated;
    bool json = false;
    std::vector<Setting> settings;
    std::vector<std::pair<std::string, bool>> param_files; // path, read
};

// The components' release this command was built with (configure's AC_INIT).
extern const char *const kRelease;

// The options given, over the parameters they stand for; --help and
// --version answered, and bad arguments or parameters said with the usage
// (exit status 2).
Options parse_options(int argc, char **argv);

// The core's parameters as the components would pass them on this machine
// (the strings point into o).  With --topology the NIC lists and the GPU
// name the recorded devices, not this machine's: the provider and the
// core here are opened without them.
efa_core_params_t core_params(const Options &o);
// The parameters the glue would refuse (efa::validate_params), said on
// standard error as it says them, with where each value came from; false:
// one at least.  (The GPU is checked against the topology it names.)
bool params_fit(const Options &o, efa_core_params_t p);

} // namespace efa::info
