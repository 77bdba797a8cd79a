// How the processes of a node divide one pool of nearest NICs
// (select_nic_set, nic_select.hpp): the share each takes, and who shares
// the pool when the runtime told every process's binding.
#pragma once

#include <hwloc.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace efa {

// The share of pool (in pool order) that the process with spread index k
// takes among n processes: one NIC when they are at least as many as the
// NICs, else block k % n of n contiguous blocks, starting at its member
// (k / n) % size.  The first NIC of a share is the process's primary; the
// rotation keeps processes that land in one block (more of them there than
// the even spread assumed) off each other's primary.  max_nics > 0 keeps
// at most that many.  *how: the choice in words.
std::vector<size_t> share_of(const std::vector<size_t> &pool, size_t n, size_t k, int max_nics,
                             std::string *how);

// The processes of the node whose pool is this process's, by the bindings
// the runtime gave for all of them.
struct PoolSharers {
    bool known = false; // false: the bindings cannot tell (why says it)
    size_t count = 0;   // processes with this pool, this one included
    size_t ordinal = 0; // this process's place among them, by local rank
    std::string why;    // known: "3rd of 4 processes bound in this pool"; else why not
};

struct BitmapFree {
    void operator()(hwloc_bitmap_t bits) const { hwloc_bitmap_free(bits); }
};
using OwnedBitmap = std::unique_ptr<hwloc_bitmap_s, BitmapFree>;

// Local rank `rank`'s binding from the runtime's text (a list, as in
// node_bindings below), restricted to the topology's PUs; null, *why
// saying so, where it is missing, no list, or not on a part of the
// machine.
OwnedBitmap node_binding(hwloc_topology_t topo, const std::string &text, size_t rank,
                         std::string *why);

// The pool (candidate indices in hardware order) that a process with this
// binding takes; empty: none.
using PoolOf = std::function<std::vector<size_t>(hwloc_const_cpuset_t)>;

// node_bindings[i]: the cpuset of local rank i as a list ("0-3,8-11"),
// empty where the runtime gave none.  A process shares this one's pool
// when its binding gives it the same pool: then every sharer counts the
// same sharers, in the same order, so their ordinals are 0..count-1, each
// once.  Known only when the list covers the local_size processes, every
// one of them bound to part of the machine, and this process's entry is
// the binding it has (own_binding, restricted to the topology's PUs).
PoolSharers pool_sharers(hwloc_topology_t topo, hwloc_const_cpuset_t own_binding,
                         const std::vector<size_t> &pool, size_t local_rank, size_t local_size,
                         const std::vector<std::string> &node_bindings, const PoolOf &pool_of);

} // namespace efa
