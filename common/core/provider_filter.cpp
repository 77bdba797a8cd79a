#include "provider_filter.hpp"

#include <algorithm>
#include <cctype>

namespace efa {

namespace {
std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
        s.remove_prefix(1);
    }
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
        s.remove_suffix(1);
    }
    return s;
}
} // namespace

std::vector<std::string> ProviderFilter::split(std::string_view list, bool *empty_item) {
    std::vector<std::string> items;
    *empty_item = false;
    if (trim(list).empty()) {
        return items;
    }
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string_view::npos) {
            comma = list.size();
        }
        std::string_view item = trim(list.substr(start, comma - start));
        if (item.empty()) {
            *empty_item = true; // "a,,b" or a trailing comma: most likely a typo
        } else {
            items.emplace_back(item);
        }
        start = comma + 1;
    }
    return items;
}

ProviderFilter ProviderFilter::parse(std::string_view include, std::string_view exclude,
                                     Status *status) {
    ProviderFilter f;
    bool empty_inc = false, empty_exc = false;
    f.include_ = split(include, &empty_inc);
    f.exclude_ = split(exclude, &empty_exc);
    *status = Status::kOk;
    if (empty_inc || empty_exc) {
        *status = Status::kEmptyItem;
    }
    // Both lists at once is ambiguous about what wins: refuse it, as Open
    // MPI's own components do.
    if (!f.include_.empty() && !f.exclude_.empty()) {
        *status = Status::kConflict;
    }
    if (f.include_.empty() && f.exclude_.empty()) {
        f.include_.emplace_back(kDefaultInclude);
    }
    return f;
}

bool ProviderFilter::item_matches(std::string_view item, std::string_view name) {
    if (item.size() > name.size() || name.compare(0, item.size(), item) != 0) {
        return false;
    }
    return item.size() == name.size() || name[item.size()] == ';';
}

bool ProviderFilter::admits(std::string_view name) const {
    auto match = [&](const std::string &item) { return item_matches(item, name); };
    if (!include_.empty()) {
        return std::any_of(include_.begin(), include_.end(), match);
    }
    return std::none_of(exclude_.begin(), exclude_.end(), match);
}

namespace {
std::vector<std::string> not_in(const std::vector<std::string> &items,
                                const std::vector<std::string> &known) {
    std::vector<std::string> unknown;
    for (const auto &item : items) {
        bool found = std::any_of(known.begin(), known.end(), [&](const std::string &k) {
            return ProviderFilter::item_matches(item, k);
        });
        if (!found) {
            unknown.push_back(item);
        }
    }
    return unknown;
}
} // namespace

std::vector<std::string>
ProviderFilter::unknown_items(const std::vector<std::string> &known) const {
    return not_in(include_, known);
}

std::vector<std::string>
ProviderFilter::unknown_excluded(const std::vector<std::string> &known) const {
    std::vector<std::string> unknown = not_in(exclude_, known);
    std::erase(unknown, std::string(kDefaultInclude));
    return unknown;
}

std::string ProviderFilter::describe() const {
    std::string out = include_.empty() ? "all providers except " : "";
    const auto &list = include_.empty() ? exclude_ : include_;
    for (size_t i = 0; i < list.size(); ++i) {
        out += (i ? "," : "") + list[i];
    }
    return out;
}

} // namespace efa
