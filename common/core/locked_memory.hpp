// The locked-memory limit (RLIMIT_MEMLOCK) in what the user reads when the
// NIC refuses memory.  EFA pins every buffer it registers: the provider's
// own bounce buffers when an endpoint opens, and the buffers the components
// register while the job runs.  A finite limit (a container started
// without --ulimit memlock=-1, a node without the EFA installer's
// limits.d file) makes both fail with ENOMEM or EAGAIN, which libfabric's
// words alone do not explain.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include <rdma/fabric.h>

#include "provider_select.hpp"

namespace efa {

struct LockedMemory {
    bool known = false;     // getrlimit answered
    bool unlimited = false; // the soft limit is RLIM_INFINITY
    uint64_t soft = 0;      // bytes (when finite)
    uint64_t hard = 0;      // bytes; UINT64_MAX: unlimited
};

// This process's limit now.
LockedMemory locked_memory();

// "unlimited", or the soft and hard limits with what raises them.
std::string locked_memory_text(const LockedMemory &limit);

// 64 KiB, 8 MiB, 1.5 GiB, 12345 B.
std::string bytes_text(uint64_t bytes);

// Could this failure be the locked-memory limit (ENOMEM, EAGAIN, either sign)?
bool may_be_locked_memory(int rc);

// A libfabric call failed while a NIC opened ([open-failed]), with the limit.
void say_open_failed(const Reporter &rep, const char *call, int rc, const fi_info *info,
                     const LockedMemory &limit);

// A buffer the registration cache could not register even after letting
// its idle registrations go: [registration-refused] the first time one
// fails for room (ENOMEM, EAGAIN), with the limit; every failure also at
// verbose 1 through the caller's failure log.  'said' is the process's
// once-flag.  Returns whether the help was shown.
bool say_registration_refused(const Reporter &rep, std::atomic<bool> &said, size_t len, int rc,
                              const LockedMemory &limit);

} // namespace efa
