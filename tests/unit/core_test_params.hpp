// The parameters a unit test opens a whole core with: one provider, one
// endpoint, the defaults the glue would pass otherwise (no peer deadline,
// the provider's own RNR retry, nothing forced).  Tests change the fields
// they are about.
#pragma once

#include "efa_core.h"

inline efa_core_params_t core_test_params(const char *provider) {
    efa_core_params_t p{};
    p.provider_include = provider;
    p.provider_exclude = "";
    p.num_contexts = 1;
    p.mr_cache_size = 16;
    p.progress_batch = 16;
    p.local_rank = 0;
    p.local_size = 1;
    p.rnr_retry = -1;
    p.force_emulated = "";
    return p;
}
