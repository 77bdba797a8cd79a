// Which libfabric providers the components may use.  One place decides,
// for the MTL and the BTL alike.
//
// An include or exclude list is comma-separated.  An item names a provider
// by prefix at a ';' boundary, so "tcp" admits the layered "tcp;ofi_rxm"
// and "efa" admits "efa", but "ef" admits nothing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace efa {

class ProviderFilter {
  public:
    static constexpr const char *kDefaultInclude = "efa";

    // Outcome of parsing the two lists.
    enum class Status { kOk, kConflict, kEmptyItem };

    // include empty => the default ("efa"); exclude empty => none.
    static ProviderFilter parse(std::string_view include, std::string_view exclude, Status *status);

    bool admits(std::string_view provider_name) const;

    // Items of the include list that name no provider in 'known' at all:
    // the user most likely mistyped them.
    std::vector<std::string> unknown_items(const std::vector<std::string> &known) const;
    // The same for the exclude list, where a mistyped name would admit the
    // very provider it was meant to keep out.  kDefaultInclude is never
    // unknown here: excluding the components' own provider is meaningful
    // on a machine whose libfabric lists no EFA device.
    std::vector<std::string> unknown_excluded(const std::vector<std::string> &known) const;

    const std::vector<std::string> &include() const { return include_; }
    const std::vector<std::string> &exclude() const { return exclude_; }
    std::string describe() const;

    static bool item_matches(std::string_view item, std::string_view provider_name);
    static std::vector<std::string> split(std::string_view list, bool *empty_item);

  private:
    std::vector<std::string> include_;
    std::vector<std::string> exclude_;
};

} // namespace efa
