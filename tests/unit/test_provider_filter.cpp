// Provider include/exclude lists: parsing, prefix matching, conflicts.
#include <gtest/gtest.h>

#include "provider_filter.hpp"

using efa::ProviderFilter;

namespace {

ProviderFilter parse(const char *inc, const char *exc, ProviderFilter::Status *st) {
    return ProviderFilter::parse(inc, exc, st);
}

TEST(ProviderFilter, DefaultAdmitsOnlyEfa) {
    ProviderFilter::Status st;
    auto f = parse("", "", &st);
    EXPECT_EQ(st, ProviderFilter::Status::kOk);
    EXPECT_TRUE(f.admits("efa"));
    EXPECT_FALSE(f.admits("tcp;ofi_rxm"));
    EXPECT_FALSE(f.admits("shm"));
    EXPECT_FALSE(f.admits("efa_fake"));
}

TEST(ProviderFilter, PrefixMatchesAtSemicolonOnly) {
    EXPECT_TRUE(ProviderFilter::item_matches("tcp", "tcp;ofi_rxm"));
    EXPECT_TRUE(ProviderFilter::item_matches("tcp;ofi_rxm", "tcp;ofi_rxm"));
    EXPECT_TRUE(ProviderFilter::item_matches("udp", "udp;ofi_rxd"));
    EXPECT_FALSE(ProviderFilter::item_matches("tc", "tcp;ofi_rxm"));
    EXPECT_FALSE(ProviderFilter::item_matches("ef", "efa"));
    EXPECT_FALSE(ProviderFilter::item_matches("tcp;ofi_rxm;x", "tcp;ofi_rxm"));
    EXPECT_FALSE(ProviderFilter::item_matches("ofi_rxm", "tcp;ofi_rxm"));
}

TEST(ProviderFilter, IncludeList) {
    ProviderFilter::Status st;
    auto f = parse(" shm , tcp;ofi_rxm ", "", &st);
    EXPECT_EQ(st, ProviderFilter::Status::kOk);
    ASSERT_EQ(f.include().size(), 2u);
    EXPECT_EQ(f.include()[0], "shm");
    EXPECT_TRUE(f.admits("shm"));
    EXPECT_TRUE(f.admits("tcp;ofi_rxm"));
    EXPECT_FALSE(f.admits("efa"));
    EXPECT_FALSE(f.admits("udp;ofi_rxd"));
}

TEST(ProviderFilter, ExcludeListAdmitsTheRest) {
    ProviderFilter::Status st;
    auto f = parse("", "sockets,udp", &st);
    EXPECT_EQ(st, ProviderFilter::Status::kOk);
    EXPECT_TRUE(f.include().empty());
    EXPECT_TRUE(f.admits("efa"));
    EXPECT_TRUE(f.admits("shm"));
    EXPECT_FALSE(f.admits("sockets"));
    EXPECT_FALSE(f.admits("udp;ofi_rxd"));
}

TEST(ProviderFilter, BothListsConflict) {
    ProviderFilter::Status st;
    parse("shm", "tcp", &st);
    EXPECT_EQ(st, ProviderFilter::Status::kConflict);
}

TEST(ProviderFilter, EmptyItemsAreFlagged) {
    ProviderFilter::Status st;
    parse("shm,,tcp", "", &st);
    EXPECT_EQ(st, ProviderFilter::Status::kEmptyItem);
    parse("shm,", "", &st);
    EXPECT_EQ(st, ProviderFilter::Status::kEmptyItem);
    parse("", ",udp", &st);
    EXPECT_EQ(st, ProviderFilter::Status::kEmptyItem);
    parse("   ", "", &st);
    EXPECT_EQ(st, ProviderFilter::Status::kOk); // blank means unset
}

TEST(ProviderFilter, UnknownItems) {
    ProviderFilter::Status st;
    auto f = parse("shm,tpc,udp", "", &st);
    auto unknown = f.unknown_items({"shm", "tcp;ofi_rxm", "udp;ofi_rxd", "udp"});
    ASSERT_EQ(unknown.size(), 1u);
    EXPECT_EQ(unknown[0], "tpc");
}

// A mistyped exclusion would admit what it meant to keep out: such names
// are found too, except the components' own provider (absent from
// libfabric's list where there is no EFA device, and meaningful to exclude).
TEST(ProviderFilter, UnknownExcludedItems) {
    ProviderFilter::Status st;
    auto f = parse("", "shm,tpc,efa", &st);
    auto unknown = f.unknown_excluded({"shm", "tcp;ofi_rxm", "udp;ofi_rxd"});
    ASSERT_EQ(unknown.size(), 1u);
    EXPECT_EQ(unknown[0], "tpc");
    EXPECT_TRUE(parse("", "tcp", &st).unknown_excluded({"tcp;ofi_rxm"}).empty());
    EXPECT_TRUE(parse("shm", "", &st).unknown_excluded({"tcp;ofi_rxm"}).empty());
}

TEST(ProviderFilter, Describe) {
    ProviderFilter::Status st;
    EXPECT_EQ(parse("shm,tcp", "", &st).describe(), "shm,tcp");
    EXPECT_EQ(parse("", "udp", &st).describe(), "all providers except udp");
}

} // namespace
