// Who sent it (common/core/core_source.cpp): a message names its sender,
// and where the provider reports the source (FI_SOURCE, fi_cq_readfrom),
// the core and its owners check the name against it.
//  - The stand-in providers grant FI_SOURCE when asked, so the check runs
//    in these tests and in CI; the fast answers need no table.
//  - A withdrawal (core_withdraw.cpp), between two real processes on
//    tcp;ofi_rxm: the child forges a request in the parent's own name for
//    a message the parent holds for itself, and the parent drops and counts
//    it (before the check, the parent took its own message away, and its
//    send completed unmatched); the child's genuine withdrawal of its own
//    message still passes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "control_tags.hpp"
#include "core.hpp"
#include "core_test_op.hpp"
#include "core_test_params.hpp"
#include "efa_tag.h"
#include "forked_core_peer.hpp"

namespace {

constexpr const char *kProvider = "tcp;ofi_rxm";
constexpr size_t kLarge = 1 << 20; // rxm's rendezvous: held until matched
constexpr uint64_t kTag = 0x2a;    // the envelope (communicator 0, tag 42)
constexpr uint64_t kGo = 0x3;      // parent to child: do it now
constexpr uint64_t kResult = 0x4;  // child to parent: what its withdrawal said

uint64_t with_seq(uint32_t seq) {
    const efa_tag_layout_t l = EFA_TAG_LAYOUT_WITH_CQ_DATA;
    const efa_tag_codec_t c = efa_tag_codec_make(&l);
    return efa_tag_codec_with_seq(&c, kTag, seq);
}

void put64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, sizeof(v));
}

// In the child: the parent, its only peer.
efa_peer_t *parent_of(efa_core_t *core) {
    return core->peer_index.begin()->first;
}

[[noreturn]] void progress_for_ever(efa_core_t *core) {
    for (;;) {
        efa_core_progress(core);
        usleep(200);
    }
}

// rxm and shm report sources and are believed; ofi_rxd's are its own peer
// index (AGenuineMessageComesFromItsSendersEntry), so the check is off there.
TEST(SourceCheck, TheStandInsThatReportSourcesTrulyAreBelieved) {
    for (const char *prov : {"tcp;ofi_rxm", "udp;ofi_rxd", "shm"}) {
        int err = 0;
        efa_core_params_t p = core_test_params(prov);
        efa_core_t *core = efa_core_acquire(&p, &err);
        ASSERT_NE(core, nullptr) << prov << ": " << err;
        const bool believed = std::string(prov) != "udp;ofi_rxd";
        EXPECT_EQ(efa_core_get_info(core)->has_source, believed) << prov;
        efa_core_release(core);
    }
}

// The source a genuine message comes with is its sender's AV entry, also
// where the receiver inserted the sender after itself (ofi_rxd said the
// receiver's own entry then): else every checked message would be dropped.
void hello_body(efa_core_t *core) {
    static char b[8];
    CoreTestOp s;
    usleep(300000);
    efa_ctx_tsend(efa_core_ctx(core, 0), b, sizeof(b), nullptr, parent_of(core)->addr[0], kGo, 0,
                  &s.op);
    progress_for_ever(core);
}

struct SourceOp {
    efa_op_t op{};
    bool done = false;
    fi_addr_t src = 0;
};

TEST(SourceCheck, AGenuineMessageComesFromItsSendersEntry) {
    for (const char *prov : {"tcp;ofi_rxm", "udp;ofi_rxd", "shm"}) {
        auto child_fn = [prov](int to_parent, int from_parent) {
            forked_core_peer::child(core_test_params(prov), to_parent, from_parent, hello_body);
        };
        pid_t child = -1;
        efa_core_t *core = nullptr;
        efa_peer_t *peer = nullptr, *self = nullptr;
        const char *why = nullptr;
        ASSERT_TRUE(
            forked_core_peer::start(core_test_params(prov), child_fn, &child, &core, &peer, &why))
            << why << " (" << prov << ")";
        // This process's own entry first, the child's after it.
        const void *blob = nullptr;
        size_t len = 0;
        int err = 0;
        std::vector<uint8_t> child_blob;
        for (const auto &kv : core->peers) {
            child_blob = kv.first;
        }
        efa_core_peer_put(core, peer);
        efa_core_local_blob(core, &blob, &len);
        self = efa_core_peer_get(core, blob, len, &err);
        peer = efa_core_peer_get(core, child_blob.data(), child_blob.size(), &err);
        ASSERT_TRUE(self && peer);
        ASSERT_NE(self->addr[0], peer->addr[0]);
        SourceOp r;
        r.op.complete = [](efa_op_t *o, const efa_cqe_t *c) {
            auto *so = reinterpret_cast<SourceOp *>(o);
            so->done = c->err == 0;
            so->src = c->src;
        };
        static char in[8];
        ASSERT_EQ(efa_ctx_trecv(efa_core_ctx(core, 0), in, sizeof(in), nullptr, FI_ADDR_UNSPEC, kGo,
                                0, &r.op),
                  0);
        for (int i = 0; i < 10000 && !r.done; ++i) {
            efa_core_progress(core);
            usleep(1000);
        }
        EXPECT_TRUE(r.done) << prov << ": the child's message never came";
        if (efa_core_get_info(core)->has_source) {
            EXPECT_EQ(r.src, peer->addr[0])
                << prov << ": the source is not the sender's entry (this "
                << "process's own is " << self->addr[0] << ")";
        } else {
            EXPECT_EQ(r.src, FI_ADDR_NOTAVAIL) << prov;
        }
        efa_core_peer_put(core, self);
        forked_core_peer::stop_all(child, core, peer);
    }
}

// What needs no table: the expected address, or an answer nobody can check.
TEST(SourceCheck, TheFastAnswers) {
    EXPECT_TRUE(efa_core_source_ok(nullptr, 5, 5, "same"));
    EXPECT_TRUE(efa_core_source_ok(nullptr, FI_ADDR_NOTAVAIL, 5, "provider does not say"));
    EXPECT_TRUE(efa_core_source_ok(nullptr, 5, FI_ADDR_NOTAVAIL, "claimed sender unknown"));
    efa_cqe_t cqe{};
    cqe.src = 7;
    EXPECT_TRUE(efa_core_source_is(nullptr, &cqe, 7, "same"));
}

// The child forges: once told, it asks the parent to withdraw the parent's
// own held message, naming the parent's probe id as the requester.
void forger_body(efa_core_t *core) {
    efa_ctx_t *ctx = efa_core_ctx(core, 0);
    efa_peer_t *parent = parent_of(core);
    const std::vector<uint8_t> &blob = core->peers.begin()->first;
    const uint64_t parent_id = efa::probe_id_of(blob.data(), blob.size());
    static char go[8];
    CoreTestOp g, req;
    efa_ctx_trecv(ctx, go, sizeof(go), nullptr, FI_ADDR_UNSPEC, kGo, 0, &g.op);
    core_test_wait(core, g, 60);
    static uint8_t wire[24];
    put64(wire, with_seq(5));
    put64(wire + 8, 77); // the requester's number for it, answered to the requester
    put64(wire + 16, kLarge);
    efa_ctx_tsend(ctx, wire, sizeof(wire), nullptr, parent->addr[0],
                  efa::control::kProbeTag | efa::control::kWithdrawBit | parent_id, 0, &req.op);
    progress_for_ever(core);
}

// The child's genuine withdrawal: its large message to the parent, held
// there, withdrawn by its own core; the answer goes to the parent.
void genuine_body(efa_core_t *core) {
    efa_ctx_t *ctx = efa_core_ctx(core, 0);
    efa_peer_t *parent = parent_of(core);
    static std::vector<char> big(kLarge, 3);
    CoreTestOp send, told;
    efa_ctx_tsend(ctx, big.data(), kLarge, nullptr, parent->addr[0], with_seq(5), 0, &send.op);
    core_test_wait(core, send, 0.5);
    struct W {
        efa_withdraw_t w{};
        bool done = false;
        int result = -1000;
    };
    static W w;
    w.w.done = [](efa_withdraw_t *wd, int result) {
        reinterpret_cast<W *>(wd)->done = true;
        reinterpret_cast<W *>(wd)->result = result;
    };
    if (efa_ctx_withdraw(ctx, parent->addr[0], with_seq(5), kLarge, &w.w) == 0) {
        for (int i = 0; i < 20000 && !w.done; ++i) {
            efa_core_progress(core);
            usleep(500);
        }
    }
    static int64_t result;
    result = w.result;
    efa_ctx_tsend(ctx, &result, sizeof(result), nullptr, parent->addr[0], kResult, 0, &told.op);
    progress_for_ever(core);
}

template <void (*Body)(efa_core_t *)> class WithdrawIn : public ::testing::Test {
  protected:
    void SetUp() override {
        auto child_fn = [](int to_parent, int from_parent) {
            forked_core_peer::child(core_test_params(kProvider), to_parent, from_parent, Body);
        };
        const char *why = nullptr;
        ASSERT_TRUE(forked_core_peer::start(core_test_params(kProvider), child_fn, &child_, &core_,
                                            &peer_, &why))
            << why << " (" << kProvider << ")";
        ctx_ = efa_core_ctx(core_, 0);
        ASSERT_TRUE(efa_core_get_info(core_)->has_source) << "nothing to check without FI_SOURCE";
        ASSERT_TRUE(efa_core_can_withdraw(core_));
    }
    void TearDown() override {
        if (self_) {
            efa_core_peer_put(core_, self_);
        }
        forked_core_peer::stop_all(child_, core_, peer_);
    }
    pid_t child_ = -1;
    efa_core_t *core_ = nullptr;
    efa_ctx_t *ctx_ = nullptr;
    efa_peer_t *peer_ = nullptr;
    efa_peer_t *self_ = nullptr;
    std::vector<char> buf_ = std::vector<char>(kLarge, 7);
};

using ForgedWithdrawal = WithdrawIn<forger_body>;
using GenuineWithdrawal = WithdrawIn<genuine_body>;

TEST_F(ForgedWithdrawal, IsDroppedCountedAndTakesNothing) {
    // The parent's own large message to itself, held unmatched: what a
    // request in the parent's name would take.
    const void *blob = nullptr;
    size_t len = 0;
    int err = 0;
    ASSERT_EQ(efa_core_local_blob(core_, &blob, &len), 0);
    ASSERT_NE(self_ = efa_core_peer_get(core_, blob, len, &err), nullptr) << err;
    CoreTestOp send, go;
    ASSERT_EQ(
        efa_ctx_tsend(ctx_, buf_.data(), kLarge, nullptr, self_->addr[0], with_seq(5), 0, &send.op),
        0);
    core_test_wait(core_, send, 1.0);
    ASSERT_FALSE(send.done) << "rxm completed a rendezvous send nobody matched: nothing to test";
    ASSERT_EQ(efa_ctx_tsend(ctx_, buf_.data(), 8, nullptr, peer_->addr[0], kGo, 0, &go.op), 0);
    core_test_wait(core_, go, 10);
    ASSERT_TRUE(go.done);
    for (int i = 0; i < 3000 && efa_core_source_forged(core_) == 0; ++i) {
        efa_core_progress(core_);
        usleep(1000);
    }
    core_test_wait(core_, send, 1.0); // what a claim would have completed
    EXPECT_FALSE(send.done) << "a request forged by another process withdrew this process's "
                               "message: its send completed with no receive matched";
    EXPECT_EQ(efa_core_source_forged(core_), 1u);
    // Still there for the receive it was meant for.
    std::vector<char> in(kLarge);
    CoreTestOp recv;
    ASSERT_EQ(
        efa_ctx_trecv(ctx_, in.data(), kLarge, nullptr, FI_ADDR_UNSPEC, with_seq(5), 0, &recv.op),
        0);
    core_test_wait(core_, recv, 10);
    EXPECT_TRUE(recv.done && recv.err == 0) << "the held message did not reach its receive";
    core_test_wait(core_, send, 10);
    EXPECT_TRUE(send.done);
}

TEST_F(GenuineWithdrawal, PassesTheCheck) {
    int64_t result = -2000;
    CoreTestOp told;
    ASSERT_EQ(
        efa_ctx_trecv(ctx_, &result, sizeof(result), nullptr, FI_ADDR_UNSPEC, kResult, 0, &told.op),
        0);
    core_test_wait(core_, told, 20);
    ASSERT_TRUE(told.done) << "the child never said what its withdrawal answered";
    EXPECT_EQ(result, 1) << "the child's own request did not take its own message";
    EXPECT_EQ(efa_core_source_forged(core_), 0u);
}

} // namespace
