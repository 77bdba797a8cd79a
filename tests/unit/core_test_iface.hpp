// Two rails for a unit test's core on tcp;ofi_rxm: the host's first IPv4
// interface that is up and not loopback, and "lo" (test_core_rdv.cpp,
// test_core_rail_back.cpp).
#pragma once

#include <ifaddrs.h>
#include <net/if.h>
#include <sys/socket.h>

#include <string>

#include "core_test_params.hpp"

// "" where the host has none.
inline std::string core_test_first_interface() {
    struct ifaddrs *list = nullptr;
    std::string name;
    if (getifaddrs(&list) != 0) {
        return name;
    }
    for (struct ifaddrs *i = list; i; i = i->ifa_next) {
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
            !(i->ifa_flags & IFF_LOOPBACK)) {
            name = i->ifa_name;
            break;
        }
    }
    freeifaddrs(list);
    return name;
}

// The names of the two NICs into *nics (which the parameters point into:
// it must outlive the core's open); false where the host has no interface
// beside loopback.  Striped from 4 KiB, a failed rail taken out.
inline bool core_test_two_rails(std::string *nics, efa_core_params_t *p) {
    const std::string iface = core_test_first_interface();
    if (iface.empty()) {
        return false;
    }
    *nics = iface + ",lo";
    *p = core_test_params("tcp;ofi_rxm");
    p->nic_include = nics->c_str();
    p->stripe_min = 4096;
    p->rail_failover = true;
    return true;
}

// The process's counters now (efa_core_get_current_counters).
inline efa_core_counters_t core_test_counters() {
    efa_core_counters_t c{};
    efa_core_get_current_counters(&c);
    return c;
}
