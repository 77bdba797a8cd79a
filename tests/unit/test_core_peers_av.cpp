// The peer table's inserts into the address vector (common/core/core_peers.cpp)
// and what a provider that reaches this host alone says of itself.
//  - A short insert: fi_av_insert takes fewer of a peer's addresses (one
//    per context) than asked, as shm's vector does when it is full (256
//    addresses).  The addresses that did go in are removed again, and the
//    message says how many of how many went in and the domain's bound.
//    The vector's insert is made short by a stand-in in front of it, over
//    tcp;ofi_rxm.  (shm's own full vector cannot stand in: libfabric
//    1.17's shm answers every name whose process it cannot find with one
//    entry it already holds, "addr already in AV", so made-up peers do not
//    fill it as real ones do.)  That answer is modelled too: an entry
//    another peer owns is never removed, nor shared with the new peer.
//  - efa_core_host_only: shm reaches this host alone, tcp does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_test_params.hpp"
#include "peer_blob.hpp"

namespace {

// What the core's show_help was told, topic and arguments.
struct Said {
    std::string topic, a1, a2, a3;
};
std::vector<Said> g_said;

void record(const char *topic, const char *a1, const char *a2, const char *a3) {
    g_said.push_back({topic, a1 ? a1 : "", a2 ? a2 : "", a3 ? a3 : ""});
}

// Stands in front of an address vector's operations: an insert takes at
// most 'room' addresses more (the rest fail as a full vector's do: their
// entries FI_ADDR_NOTAVAIL, the count short), and removals are recorded.
struct ShortAv {
    static inline fi_ops_av *real = nullptr;
    static inline fi_ops_av ops{};
    static inline size_t room = 0;
    // Not FI_ADDR_NOTAVAIL: the entry every insert answers with, as shm
    // does for a name it cannot find (nothing is inserted).
    static inline fi_addr_t answer_with = FI_ADDR_NOTAVAIL;
    static inline std::vector<fi_addr_t> inserted, removed;

    static int insert(fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr,
                      uint64_t flags, void *context) {
        if (answer_with != FI_ADDR_NOTAVAIL) {
            for (size_t i = 0; i < count; ++i) {
                fi_addr[i] = i < room ? answer_with : FI_ADDR_NOTAVAIL;
            }
            return static_cast<int>(std::min(count, room));
        }
        const size_t take = std::min(count, room);
        int n = take ? real->insert(av, addr, take, fi_addr, flags, context) : 0;
        if (n > 0) {
            room -= static_cast<size_t>(n);
            inserted.insert(inserted.end(), fi_addr, fi_addr + n);
        }
        for (size_t i = take; i < count; ++i) {
            fi_addr[i] = FI_ADDR_NOTAVAIL;
        }
        return n;
    }
    static int remove(fid_av *av, fi_addr_t *fi_addr, size_t count, uint64_t flags) {
        removed.insert(removed.end(), fi_addr, fi_addr + count);
        return real->remove(av, fi_addr, count, flags);
    }
    static void install(fid_av *av, size_t r) {
        real = av->ops;
        ops = *real;
        ops.insert = insert;
        ops.remove = remove;
        av->ops = &ops;
        room = r;
        answer_with = FI_ADDR_NOTAVAIL;
        inserted.clear();
        removed.clear();
    }
    static void uninstall(fid_av *av) { av->ops = real; }
};

efa_core_t *open_core(const char *prov, int contexts) {
    efa_core_params_t p = core_test_params(prov);
    p.num_contexts = contexts;
    int err = 0;
    efa_core_t *core = efa_core_acquire(&p, &err);
    EXPECT_NE(core, nullptr) << prov << ": " << err;
    if (core) {
        core->rep.show_help = record;
        core->rep.explain = true;
    }
    g_said.clear();
    return core;
}

// A short insert's addresses taken out again, and the message saying how
// many went in, of how many, and the bound.  (Before the fix: nothing was
// removed, and the message said only "Unspecified error".)
TEST(PeerAvInsert, AShortInsertIsUndoneAndSaysHowManyOfHowMany) {
    constexpr int kContexts = 3;
    efa_core_t *core = open_core("tcp;ofi_rxm", kContexts);
    ASSERT_NE(core, nullptr);
    const void *blob = nullptr;
    size_t len = 0;
    ASSERT_EQ(efa_core_local_blob(core, &blob, &len), 0);
    fid_av *av = core->nic->av();

    for (size_t room : {size_t{1}, size_t{2}, size_t{0}}) {
        g_said.clear();
        ShortAv::install(av, room);
        int err = 0;
        efa_peer_t *peer = efa_core_peer_get(core, blob, len, &err);
        ShortAv::uninstall(av);
        EXPECT_EQ(peer, nullptr) << "room " << room;
        EXPECT_EQ(err, -FI_ENOSPC) << "room " << room;
        ASSERT_EQ(ShortAv::inserted.size(), room);
        // Exactly what went in came out again (none where none went in).
        std::vector<fi_addr_t> in = ShortAv::inserted, out = ShortAv::removed;
        std::sort(in.begin(), in.end());
        std::sort(out.begin(), out.end());
        EXPECT_EQ(out, in) << "room " << room;
        ASSERT_EQ(g_said.size(), 1u) << "room " << room;
        EXPECT_EQ(g_said[0].topic, "av-insert-failed");
        EXPECT_NE(g_said[0].a1.find(std::to_string(room) + " of " + std::to_string(kContexts)),
                  std::string::npos)
            << g_said[0].a1;
        const size_t ep_cnt = core->nic->info()->domain_attr->ep_cnt;
        ASSERT_GT(ep_cnt, 0u);
        EXPECT_NE(g_said[0].a3.find("ep_cnt is " + std::to_string(ep_cnt)), std::string::npos)
            << g_said[0].a3;
        EXPECT_TRUE(core->peers.empty());
        EXPECT_TRUE(core->addr_owner.empty());
    }
    // The vector still takes the peer whole.
    int err = 0;
    efa_peer_t *peer = efa_core_peer_get(core, blob, len, &err);
    ASSERT_NE(peer, nullptr) << err;
    efa_core_peer_put(core, peer);
    efa_core_release(core);
}

// A core on tcp;ofi_rxm with its own peer entry (self), and the blob of
// another process with the same names (another fabric id list), whose
// insert the tests answer with self's entry as shm does.
struct SelfAndOther {
    static constexpr int kContexts = 2;
    efa_core_t *core = nullptr;
    efa_peer_t *self = nullptr;
    std::vector<uint8_t> other;

    ::testing::AssertionResult open() {
        core = open_core("tcp;ofi_rxm", kContexts);
        if (!core) {
            return ::testing::AssertionFailure() << "no core";
        }
        const void *blob = nullptr;
        size_t len = 0;
        int err = efa_core_local_blob(core, &blob, &len);
        if (err) {
            return ::testing::AssertionFailure() << "efa_core_local_blob: " << err;
        }
        self = efa_core_peer_get(core, blob, len, &err);
        if (!self) {
            return ::testing::AssertionFailure() << "efa_core_peer_get: " << err;
        }
        std::vector<uint32_t> ids = core->fabric_ids;
        ids[0] ^= 1;
        other = efa::make_peer_blob(kContexts, static_cast<uint16_t>(core->nic->addr_len()),
                                    core->nic->names(), ids);
        return ::testing::AssertionSuccess();
    }
    // The other peer's insert, 'room' addresses counted in, each answered
    // with self's entry; what efa_core_peer_get returned.
    efa_peer_t *insert_other(size_t room, int *err) {
        fid_av *av = core->nic->av();
        ShortAv::install(av, room);
        ShortAv::answer_with = self->addr[0];
        g_said.clear();
        efa_peer_t *p = efa_core_peer_get(core, other.data(), other.size(), err);
        ShortAv::uninstall(av);
        return p;
    }
    ~SelfAndOther() {
        if (self) {
            efa_core_peer_put(core, self);
        }
        if (core) {
            efa_core_release(core);
        }
    }
};

// An insert that answers with an entry another peer owns (shm's answer
// to a name whose process it cannot find) and then comes up short: that
// entry is not removed, and the peer that owns it keeps it.
TEST(PeerAvInsert, AShortInsertLeavesAnotherPeersEntry) {
    SelfAndOther t;
    ASSERT_TRUE(t.open());
    int err = 0;
    EXPECT_EQ(t.insert_other(1, &err), nullptr);
    EXPECT_TRUE(ShortAv::removed.empty()) << "removed the entry of a peer that owns it";
    ASSERT_EQ(g_said.size(), 1u);
    EXPECT_NE(g_said[0].a1.find("1 of 2"), std::string::npos) << g_said[0].a1;
    EXPECT_EQ(g_said[0].a1.find("removed again"), std::string::npos) << g_said[0].a1;
    EXPECT_EQ(t.core->addr_owner.count(t.self->addr[0]), 1u);
}

// An insert that counts every address in but answers with an entry
// another peer owns (shm's answer to a name whose process it cannot find,
// counted as inserted): the new peer is refused, since the two would take
// each other's messages, and the owner keeps its entry.
TEST(PeerAvInsert, AnEntryAnotherPeerOwnsIsNeverShared) {
    SelfAndOther t;
    ASSERT_TRUE(t.open());
    efa_core_peer_set_name(t.core, t.self, "rank 7 on host here");
    int err = 0;
    EXPECT_EQ(t.insert_other(SelfAndOther::kContexts, &err), nullptr); // all counted in
    EXPECT_EQ(err, -FI_EADDRINUSE);
    EXPECT_TRUE(ShortAv::removed.empty()) << "removed the entry of a peer that owns it";
    ASSERT_EQ(g_said.size(), 1u);
    EXPECT_EQ(g_said[0].topic, "av-entry-shared");
    EXPECT_EQ(g_said[0].a2, "rank 7 on host here");
    EXPECT_EQ(t.core->peers.size(), 1u);
    EXPECT_EQ(t.core->addr_owner.at(t.self->addr[0]), t.self);
}

// shm reaches the processes of this host alone, tcp;ofi_rxm others
// (asked without FI_REMOTE_COMM at selection, as for a job on one node: its
// entry then says neither, so the answer is libfabric's to a second
// question).
TEST(PeerHost, ProvidersOfThisHostAloneSaySo) {
    efa_core_t *core = open_core("shm", 1);
    ASSERT_NE(core, nullptr);
    ASSERT_NE(efa_core_host_only(core), nullptr);
    EXPECT_STREQ(efa_core_host_only(core), "shm");
    EXPECT_STREQ(efa_core_host_only(core), "shm"); // (the answer kept)
    efa_core_release(core);

    core = open_core("tcp;ofi_rxm", 1);
    ASSERT_NE(core, nullptr);
    EXPECT_EQ(efa_core_host_only(core), nullptr) << efa_core_get_info(core)->domain;
    efa_core_release(core);
}

} // namespace
