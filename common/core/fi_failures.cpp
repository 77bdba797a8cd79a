#include "fi_failures.hpp"

#include <cstdlib>

#include <rdma/fi_errno.h>

namespace efa {

bool FailureLog::report(const Reporter &rep, const std::string &call, int rc,
                        const std::string &detail) {
    const int err = std::abs(rc);
    {
        std::lock_guard<std::mutex> guard(lock_);
        if (!seen_.emplace(call, err).second) {
            return false;
        }
    }
    rep.say(1, call + " failed: " + fi_strerror(err) + " (" + std::to_string(err) + ")" +
                   (detail.empty() ? "" : "; provider: " + detail));
    return true;
}

bool FailureLog::is_new(const std::string &call, int rc) {
    std::lock_guard<std::mutex> guard(lock_);
    return seen_.count({call, std::abs(rc)}) == 0;
}

} // namespace efa
