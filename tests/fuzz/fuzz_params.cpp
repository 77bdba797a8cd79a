// MCA string parameters the core parses (the user's input): the provider
// include/exclude lists (provider_filter.cpp), force_emulated
// (provider_options.cpp), btl_efa's rma/atomic modes and single copy
// (efa_rma.h), and the range checks of every numeric parameter
// (efa_params.cpp).  None may crash, and the parsed forms must be
// consistent with what they admit.
#include "efa_params.hpp"
#include "efa_rma.h"
#include "fuzz_input.hpp"
#include "provider_filter.hpp"
#include "provider_options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    const std::string include = in.str();
    const std::string exclude = in.str();
    const std::string name = in.str();
    const std::string emulated = in.str();

    efa::ProviderFilter::Status st;
    efa::ProviderFilter f = efa::ProviderFilter::parse(include, exclude, &st);
    // Never an empty filter: no list means the default.
    FUZZ_CHECK(!f.include().empty() || !f.exclude().empty());
    for (const auto &item : f.include()) {
        FUZZ_CHECK(!item.empty() && item.find(',') == std::string::npos);
        FUZZ_CHECK(efa::ProviderFilter::item_matches(item, item));
        FUZZ_CHECK(f.admits(item));
    }
    for (const auto &item : f.exclude()) {
        FUZZ_CHECK(!item.empty() && item.find(',') == std::string::npos);
        if (f.include().empty()) {
            FUZZ_CHECK(!f.admits(item));
        }
    }
    (void)f.admits(name);
    (void)f.describe();
    (void)f.unknown_items({name, "efa", "tcp;ofi_rxm", "shm"});
    // A name admits its layered forms and nothing that merely starts alike.
    if (!name.empty()) {
        FUZZ_CHECK(efa::ProviderFilter::item_matches(name, name + ";ofi_rxm"));
    }
    FUZZ_CHECK(!efa::ProviderFilter::item_matches(name + "x", name));

    efa::EmulatedOverride eo;
    std::string bad;
    if (!efa::parse_emulated_list(emulated.c_str(), &eo, &bad)) {
        FUZZ_CHECK(!emulated.empty());
    }

    efa_rma_mode_t mode;
    efa_single_copy_mode_t sc;
    if (efa_rma_parse_mode(emulated.c_str(), &mode)) {
        FUZZ_CHECK(emulated.empty() || emulated == "auto" || emulated == "native" ||
                   emulated == "emulated");
    }
    if (efa_rma_parse_single_copy(emulated.c_str(), &sc)) {
        FUZZ_CHECK(emulated.empty() || emulated == "auto" || emulated == "cma" ||
                   emulated == "none");
    }

    efa_core_params_t p{};
    p.provider_include = include.c_str();
    p.provider_exclude = exclude.c_str();
    p.num_contexts = in.take<int32_t>();
    p.tx_size = in.take<int32_t>();
    p.rx_size = in.take<int32_t>();
    p.mr_cache_size = in.take<int32_t>();
    p.progress_batch = in.take<int32_t>();
    p.rnr_retry = in.take<int32_t>();
    p.force_emulated = emulated.c_str();
    const auto problems = efa::validate_params(p);
    const bool in_range = p.num_contexts >= 1 && p.num_contexts <= efa::ParamLimits::kMaxContexts &&
                          p.progress_batch >= 1 && p.rnr_retry >= -1 &&
                          p.rnr_retry <= efa::ParamLimits::kMaxRnrRetry;
    if (!in_range) {
        FUZZ_CHECK(!problems.empty());
    }
    for (const auto &pr : problems) {
        FUZZ_CHECK(!pr.name.empty() && !pr.allowed.empty());
    }
    return 0;
}
