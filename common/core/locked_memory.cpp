#include "locked_memory.hpp"

#include <cstdio>
#include <cstdlib>

#include <sys/resource.h>

#include <rdma/fi_errno.h>

namespace efa {

LockedMemory locked_memory() {
    LockedMemory l;
    rlimit r{};
    if (getrlimit(RLIMIT_MEMLOCK, &r) != 0) {
        return l;
    }
    l.known = true;
    l.unlimited = r.rlim_cur == RLIM_INFINITY;
    l.soft = l.unlimited ? UINT64_MAX : static_cast<uint64_t>(r.rlim_cur);
    l.hard = r.rlim_max == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(r.rlim_max);
    return l;
}

std::string bytes_text(uint64_t bytes) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    uint64_t whole = bytes;
    while (whole >= 1024 && u < 4) {
        whole /= 1024;
        ++u;
    }
    char text[32];
    const uint64_t scale = uint64_t{1} << (10 * u);
    if (u == 0 || bytes % scale == 0) {
        std::snprintf(text, sizeof(text), "%llu %s", static_cast<unsigned long long>(whole),
                      units[u]);
    } else {
        std::snprintf(text, sizeof(text), "%.1f %s", static_cast<double>(bytes) / scale, units[u]);
    }
    return text;
}

std::string locked_memory_text(const LockedMemory &limit) {
    if (!limit.known) {
        return "not known (getrlimit failed)";
    }
    if (limit.unlimited) {
        return "unlimited";
    }
    const std::string hard =
        limit.hard == UINT64_MAX ? std::string("unlimited") : bytes_text(limit.hard);
    // The EFA installer writes limits.d/01_efa.conf (unlimited); containers
    // take theirs from the runtime, not from the host's files.
    return bytes_text(limit.soft) + " (ulimit -l; hard limit " + hard +
           "). EFA needs it unlimited: 'ulimit -l unlimited' where the hard limit allows, "
           "/etc/security/limits.d (the EFA installer's 01_efa.conf), or in a container "
           "'docker run --ulimit memlock=-1' (Kubernetes: the container runtime's default "
           "ulimits)";
}

bool may_be_locked_memory(int rc) {
    const int err = std::abs(rc);
    return err == FI_ENOMEM || err == FI_EAGAIN;
}

void say_open_failed(const Reporter &rep, const char *call, int rc, const fi_info *info,
                     const LockedMemory &limit) {
    std::string where = call;
    if (info && info->fabric_attr && info->fabric_attr->prov_name) {
        where += std::string(" (provider ") + info->fabric_attr->prov_name;
        if (info->domain_attr && info->domain_attr->name) {
            where += std::string(", NIC ") + info->domain_attr->name;
        }
        where += ")";
    }
    rep.help("open-failed", where, fi_strerror(std::abs(rc)), locked_memory_text(limit));
}

bool say_registration_refused(const Reporter &rep, std::atomic<bool> &said, size_t len, int rc,
                              const LockedMemory &limit) {
    if (!may_be_locked_memory(rc) || said.exchange(true)) {
        return false;
    }
    rep.help("registration-refused", bytes_text(len),
             std::string(fi_strerror(std::abs(rc))) + " (" + std::to_string(std::abs(rc)) + ")",
             locked_memory_text(limit));
    return true;
}

} // namespace efa
