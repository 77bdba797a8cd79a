// Failed libfabric calls, said once per kind.  A failed post or completion
// ends in an MPI error class that names nothing; this is where the user
// learns which call failed, libfabric's words for it and the provider's own
// error data.  Once per (call, error): a peer that is gone fails every
// operation to it, and one line says that as well as a million.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "provider_select.hpp"

namespace efa {

class FailureLog {
  public:
    // 'rc' is a libfabric error (either sign); 'detail' the provider's
    // error data, if any.  Said at verbose 1 the first time this call fails
    // this way; returns whether it was the first time.
    bool report(const Reporter &rep, const std::string &call, int rc,
                const std::string &detail = "");

    // Would report() say something for this kind?  (Saves building the
    // provider's detail string for a kind already said.)
    bool is_new(const std::string &call, int rc);

  private:
    std::mutex lock_;
    std::set<std::pair<std::string, int>> seen_;
};

} // namespace efa
