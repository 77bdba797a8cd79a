// What the core leaves for the process's exit on purpose (core.hpp's
// keep_for_exit): a rail endpoint left open because it lost a peer, and
// what its provider still holds.  Kept in a list reachable to the end, so
// that a leak checker tells them from leaks.
#include <mutex>
#include <vector>

#include "core.hpp"

namespace efa {

void keep_for_exit(void *p) {
    static std::mutex lock;
    static auto *kept = new std::vector<void *>; // never freed: reachable to the end
    std::lock_guard<std::mutex> guard(lock);
    kept->push_back(p);
}

} // namespace efa
