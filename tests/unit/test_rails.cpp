// Several NICs per process: the blob that carries every NIC's addresses,
// the pairing of our NICs with a peer's, the parts of a striped transfer,
// and which NICs may be rails at all.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "efa_params.hpp"
#include "peer_deadline.hpp"
#include "efa_rma.h"
#include "peer_blob.hpp"
#include "provider_select.hpp"

namespace {

TEST(RailsBlob, CarriesEveryNicsNamesAndFabrics) {
    const uint16_t nctx = 2, alen = 3;
    std::vector<uint8_t> names(3 * nctx * alen);
    std::iota(names.begin(), names.end(), 1);
    const std::vector<uint32_t> fabrics{7, 8, 7};
    const auto blob = efa::make_peer_blob(nctx, alen, names, fabrics);
    efa::PeerBlob pb;
    ASSERT_EQ(efa::parse_peer_blob(blob.data(), blob.size(), alen, nctx, &pb, nullptr),
              efa::PeerBlobStatus::kOk);
    EXPECT_EQ(pb.header.num_nics, 3);
    EXPECT_EQ(pb.fabric_ids, fabrics);
    for (int n = 0; n < 3; ++n) {
        EXPECT_EQ(0, memcmp(pb.nic_names(n), names.data() + n * nctx * alen, nctx * alen)) << n;
    }
}

TEST(RailsBlob, RefusesABlobShorterThanItsNics) {
    const std::vector<uint8_t> names(2 * 4, 0xab);
    auto blob = efa::make_peer_blob(1, 4, names, {1, 2});
    efa::PeerBlob pb;
    std::string why;
    blob.pop_back(); // the last fabric id is cut
    EXPECT_EQ(efa::parse_peer_blob(blob.data(), blob.size(), 4, 1, &pb, &why),
              efa::PeerBlobStatus::kMalformed);
    EXPECT_NE(why.find("2 NIC(s)"), std::string::npos) << why;
    EXPECT_EQ(pb.names, nullptr);
}

TEST(RailsBlob, RefusesMoreNicsThanRails) {
    const int nics = efa::kMaxRails + 1;
    const std::vector<uint8_t> names(nics * 4, 0xab);
    const auto blob = efa::make_peer_blob(1, 4, names, std::vector<uint32_t>(nics, 1));
    efa::PeerBlob pb;
    EXPECT_EQ(efa::parse_peer_blob(blob.data(), blob.size(), 4, 1, &pb, nullptr),
              efa::PeerBlobStatus::kMalformed);
}

TEST(RailsPairing, OneFabricSpreadsOverThePeersNics) {
    // EFA: every NIC on one fabric; our NIC i meets the peer's NIC i mod R.
    EXPECT_EQ(efa::pair_rails({5, 5, 5, 5}, {5, 5, 5, 5}), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(efa::pair_rails({5, 5, 5, 5}, {5, 5}), (std::vector<int>{0, 1, 0, 1}));
    EXPECT_EQ(efa::pair_rails({5, 5}, {5, 5, 5, 5}), (std::vector<int>{0, 1}));
}

TEST(RailsPairing, SubnetsMeetTheirOwn) {
    // Stand-ins: one fabric per subnet; the peer lists its NICs in
    // another order, and has one we lack.
    EXPECT_EQ(efa::pair_rails({10, 11}, {11, 12, 10}), (std::vector<int>{2, 0}));
    // A NIC of ours on a subnet the peer is not on reaches nothing.
    EXPECT_EQ(efa::pair_rails({10, 13}, {10, 11}), (std::vector<int>{0, -1}));
}

TEST(RailsStripe, PartsCoverTheTransferOnceInCacheLines) {
    for (size_t len : {size_t{1}, size_t{63}, size_t{4096}, size_t{262144}, size_t{4194305}}) {
        for (int rails = 1; rails <= EFA_MAX_RAILS; ++rails) {
            size_t next = 0;
            for (int r = 0; r < rails; ++r) {
                size_t off, n;
                efa_rma_stripe_part(len, rails, r, &off, &n);
                EXPECT_EQ(off, next) << len << " " << rails << " " << r;
                if (off + n < len) { // a part with more after it
                    EXPECT_EQ(n % 64, 0u) << len << " " << rails << " " << r;
                }
                next = off + n;
            }
            EXPECT_EQ(next, len) << len << " " << rails;
        }
    }
    size_t off, n;
    efa_rma_stripe_part(4u << 20, 2, 1, &off, &n);
    EXPECT_EQ(off, 2u << 20);
    EXPECT_EQ(n, 2u << 20);
}

TEST(RailsParams, StripeMinRange) {
    efa_core_params_t p{};
    p.num_contexts = 1;
    p.progress_batch = 16;
    auto refused = [&](int v) {
        p.stripe_min = v;
        for (const auto &pb : efa::validate_params(p)) {
            if (pb.name == "stripe_min") {
                return true;
            }
        }
        return false;
    };
    EXPECT_FALSE(refused(0)); // never striped
    EXPECT_FALSE(refused(efa::ParamLimits::kMinStripe));
    EXPECT_FALSE(refused(efa::ParamLimits::kMaxStripe));
    EXPECT_TRUE(refused(efa::ParamLimits::kMinStripe - 1));
    EXPECT_TRUE(refused(-1));
}

TEST(RailsSelect, LoopbackOnlyWhenNamed) {
    fi_info info{};
    fi_domain_attr dom{};
    char name[] = "lo";
    dom.name = name;
    info.domain_attr = &dom;
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(0x7f000001);
    info.addr_format = FI_SOCKADDR_IN;
    info.src_addr = &sin;
    info.src_addrlen = sizeof(sin);
    EXPECT_TRUE(efa::is_loopback(&info));
    sin.sin_addr.s_addr = htonl(0x0a4d0001); // 10.77.0.1
    char eth[] = "eth1";
    dom.name = eth;
    EXPECT_FALSE(efa::is_loopback(&info));
    EXPECT_TRUE(efa::named_in("eth0,lo", "lo"));
    EXPECT_TRUE(efa::named_in("lo", "lo"));
    EXPECT_FALSE(efa::named_in("eth0,lo0", "lo"));
    EXPECT_FALSE(efa::named_in("", "lo"));
    EXPECT_FALSE(efa::named_in(nullptr, "lo"));
}

TEST(RailsDeadline, ATouchRestartsTheFirstRailsClock) {
    // A rail found dead moves its work to the first rail: the time spent
    // waiting on the dead one is no silence of the first.
    efa::PeerDeadline d(5000, 1000);
    efa::PeerDeadline::Entry send;
    ASSERT_TRUE(d.posted(1, &send, efa::PeerDeadline::Kind::Send, 0));
    d.touch(1, 4000);
    EXPECT_TRUE(d.check(6000).expired.empty());
    EXPECT_EQ(d.check(9000).expired, std::vector<uint64_t>{1});
    d.touch(2, 1000); // a peer never tracked: nothing
    EXPECT_FALSE(d.dead(2));
}

TEST(RailsDeadline, AVerdictTheTouchMadeStaleIsSeenAsSuch) {
    // The first rail's key (1) and another rail's (2) fall silent together
    // and expire in the same check.  The core declares the other rail dead
    // first, which touches the first's clock: the first is then no longer
    // past its deadline (expired() says so), and is declared dead only if
    // it stays silent a whole timeout more.
    efa::PeerDeadline d(5000, 1000);
    efa::PeerDeadline::Entry first, other;
    ASSERT_TRUE(d.posted(1, &first, efa::PeerDeadline::Kind::Send, 0));
    ASSERT_TRUE(d.posted(2, &other, efa::PeerDeadline::Kind::Send, 0));
    auto v = d.check(5000);
    std::sort(v.expired.begin(), v.expired.end());
    ASSERT_EQ(v.expired, (std::vector<uint64_t>{1, 2}));
    EXPECT_TRUE(d.expired(1, 5000));
    EXPECT_TRUE(d.expired(2, 5000));
    EXPECT_EQ(d.declare_dead(2).size(), 1u);
    d.touch(1, 5000);
    EXPECT_FALSE(d.expired(1, 5001));
    EXPECT_FALSE(d.expired(2, 5001)); // dead already
    EXPECT_TRUE(d.check(9000).expired.empty());
    EXPECT_TRUE(d.expired(1, 10000));
    EXPECT_EQ(d.check(10000).expired, std::vector<uint64_t>{1});
    // Waited on alone (no send), a peer is probed, never expired.
    efa::PeerDeadline w(5000, 1000);
    efa::PeerDeadline::Entry recv;
    ASSERT_TRUE(w.posted(3, &recv, efa::PeerDeadline::Kind::Recv, 0));
    EXPECT_FALSE(w.expired(3, 60000));
    EXPECT_FALSE(w.expired(4, 60000)); // never tracked
}

} // namespace
