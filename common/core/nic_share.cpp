#include "nic_share.hpp"

#include <cstdlib>
#include <memory>
#include <string_view>

#include "nic_select.hpp" // binding_is_partial

namespace efa {

std::vector<size_t> share_of(const std::vector<size_t> &pool, size_t n, size_t k, int max_nics,
                             std::string *how) {
    const size_t count = pool.size();
    std::vector<size_t> mine;
    if (n >= count) {
        mine.push_back(pool[k % count]);
        *how = "NIC " + std::to_string(k % count + 1) + " of " + std::to_string(count);
    } else {
        const size_t block = k % n;
        const size_t first = block * count / n, size = (block + 1) * count / n - first;
        const size_t start = (k / n) % size;
        for (size_t i = 0; i < size; ++i) {
            mine.push_back(pool[first + (start + i) % size]);
        }
        *how = "block " + std::to_string(block + 1) + " of " + std::to_string(n) + " over " +
               std::to_string(count) + " NICs, starting at its NIC " + std::to_string(start + 1);
    }
    if (max_nics > 0 && mine.size() > static_cast<size_t>(max_nics)) {
        mine.resize(static_cast<size_t>(max_nics));
        *how += ", cut to " + std::to_string(max_nics);
    }
    return mine;
}

namespace {

// "1st", "2nd", "3rd", "4th", ..., "11th", "12th", "13th", "21st".
std::string ordinal_word(size_t n) {
    const size_t last = n % 10, tens = n % 100;
    const char *suffix = (tens >= 11 && tens <= 13) ? "th"
                         : last == 1                ? "st"
                         : last == 2                ? "nd"
                         : last == 3                ? "rd"
                                                    : "th";
    return std::to_string(n) + suffix;
}

// The runtime's text is trusted no further than a list of PU numbers and
// ranges, "0-3,8": hwloc's parser also takes forms such as "0-" (0 and
// up) that no bound process has.
bool list_syntax(std::string_view text) {
    auto number = [](std::string_view n) {
        return !n.empty() && n.find_first_not_of("0123456789") == std::string_view::npos;
    };
    while (true) {
        const size_t comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        const size_t dash = item.find('-');
        if (!number(item.substr(0, dash)) ||
            (dash != std::string_view::npos && !number(item.substr(dash + 1)))) {
            return false;
        }
        if (comma == std::string_view::npos) {
            return true;
        }
        text.remove_prefix(comma + 1);
    }
}

} // namespace

OwnedBitmap node_binding(hwloc_topology_t topo, const std::string &text, size_t rank,
                         std::string *why) {
    const std::string who = "local rank " + std::to_string(rank) + "'s binding";
    if (text.empty()) {
        *why = who + " is missing";
        return nullptr;
    }
    OwnedBitmap bits(hwloc_bitmap_alloc());
    if (!bits) {
        *why = "no memory for " + who;
        return nullptr;
    }
    if (!list_syntax(text) || hwloc_bitmap_list_sscanf(bits.get(), text.c_str()) != 0) {
        *why = who + " \"" + text.substr(0, 64) + "\" is not a cpuset list";
        return nullptr;
    }
    hwloc_bitmap_and(bits.get(), bits.get(), hwloc_topology_get_topology_cpuset(topo));
    if (!binding_is_partial(topo, bits.get())) {
        *why = who + " " + text.substr(0, 64) + " does not keep it on a part of the machine";
        return nullptr;
    }
    return bits;
}

PoolSharers pool_sharers(hwloc_topology_t topo, hwloc_const_cpuset_t own_binding,
                         const std::vector<size_t> &pool, size_t local_rank, size_t local_size,
                         const std::vector<std::string> &node_bindings, const PoolOf &pool_of) {
    PoolSharers sharers;
    if (node_bindings.size() != local_size || local_rank >= local_size) {
        sharers.why = "the runtime gave " + std::to_string(node_bindings.size()) +
                      " bindings for local rank " + std::to_string(local_rank) + " of " +
                      std::to_string(local_size);
        return sharers;
    }
    std::vector<OwnedBitmap> bindings;
    for (size_t r = 0; r < node_bindings.size(); ++r) {
        bindings.push_back(node_binding(topo, node_bindings[r], r, &sharers.why));
        if (!bindings.back()) {
            return sharers;
        }
    }
    // A process rebound after its launch (by a wrapper, or by itself) is
    // not where the runtime says; its peers may not be either.
    if (!hwloc_bitmap_isequal(bindings[local_rank].get(), own_binding)) {
        sharers.why = "the runtime's binding of this process, " + node_bindings[local_rank] +
                      ", is not the one it has";
        return sharers;
    }
    for (size_t r = 0; r < bindings.size(); ++r) {
        if (r == local_rank || pool_of(bindings[r].get()) == pool) {
            sharers.ordinal += r < local_rank;
            ++sharers.count;
        }
    }
    sharers.known = true;
    sharers.why = ordinal_word(sharers.ordinal + 1) + " of " + std::to_string(sharers.count) +
                  " processes bound in this pool";
    return sharers;
}

} // namespace efa
