// One aligned block of memory for messages, registered as one piece where
// the provider wants local descriptors (FI_MR_LOCAL, as EFA does).  Every
// pool of send or receive buffers is made of these: btl_efa's fragments
// and one-sided operations (slab_pool), the untagged receive buffers
// (core_msg) and own matching's send buffers (engine/net_link).
#pragma once

#include <cstddef>
#include <cstdint>

#include "efa_core.h"

namespace efa {

struct MrEntry;

// Goes to the core's MR cache and failure log itself, not through the C
// API of core.cpp: core.cpp opens core_msg, which holds one of these, and
// a call back up would make a cycle between files (tests/call_cycles.py).
struct RegisteredBlock {
    char *data = nullptr;
    MrEntry *mr = nullptr;

    // len bytes aligned to align, registered for access unless access is
    // 0.  0, or a negative libfabric error with nothing allocated.
    int make(efa_core_t *core, size_t len, size_t align, uint64_t access);
    void *desc() const;
    // The descriptor on rail 'rail' (0: the first NIC; registered there
    // where access asked for the rails too: fi_mr_backend.cpp), and how
    // many rails have one (1 without a registration).
    void *desc(int rail) const;
    int rails() const;
    // Frees the memory; the registration too unless the core that made it
    // is gone (release_mr false).
    void release(efa_core_t *core, bool release_mr);
    // Drops the registration only: the provider may still write into the
    // memory until the endpoints close, but the domain is about to go.
    void unregister(efa_core_t *core);
    // Never freed: the provider may still read or write the memory when
    // its owner goes (an operation it holds of a lost peer).  Kept on a
    // list for the process's life, where a leak checker finds it held.
    void keep_for_provider() const;
};

} // namespace efa
