// Who sent it, on the matching engine's path to other nodes
// (engine_net.cpp): a provider message's header names the sending
// process (vpid), and where the provider reports the source (FI_SOURCE)
// the engine checks the name against the address it reaches that process
// at.  Two real processes on tcp;ofi_rxm, each with a core and an engine,
// in a job of three: the parent is vpid 0, the child claims to be vpid 1
// (truly) or vpid 2 (whose address, for the parent, is the parent's own).
// The forged message is dropped and counted, and a receive on ANY_SOURCE
// never sees it (before the check it matched, as from vpid 2); the
// genuine one is received.
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "core_test_op.hpp"
#include "core_test_params.hpp"
#include "efa_engine.h"
#include "forked_core_peer.hpp"
#include "engine_test_req.hpp"

namespace {

using engine_test::on_complete;
using engine_test::Req;

constexpr const char *kProvider = "tcp;ofi_rxm";
constexpr uint32_t kCid = 5;
constexpr int32_t kTag = 7;
constexpr uint64_t kGo = 0x3; // parent to child (a tagged core message): send now

// How an engine reaches vpid: addrs[vpid] through context 0.
struct Reach {
    efa_core_t *core = nullptr;
    fi_addr_t addrs[3] = {FI_ADDR_UNSPEC, FI_ADDR_UNSPEC, FI_ADDR_UNSPEC};
};

int no_card(void *, uint32_t, efa_engine_card_t *) {
    return -FI_ENOENT;
}

int addr_of(void *arg, uint32_t vpid, fi_addr_t *addr, efa_ctx_t **ctx) {
    auto *r = static_cast<Reach *>(arg);
    if (vpid >= 3 || r->addrs[vpid] == FI_ADDR_UNSPEC) {
        return -FI_ENOENT;
    }
    *addr = r->addrs[vpid];
    *ctx = efa_core_ctx(r->core, 0);
    return 0;
}

uint32_t source_vpid(void *, uint32_t, int32_t src) {
    return static_cast<uint32_t>(src);
}

size_t comm_members(void *, uint32_t, uint32_t *vpids, size_t max) {
    for (size_t i = 0; i < 3 && i < max; ++i) {
        vpids[i] = static_cast<uint32_t>(i);
    }
    return 3;
}

efa_engine_t *open_engine(Reach *reach, uint32_t vpid, const std::string &tag) {
    efa_engine_params_t p{};
    p.inbox_dir = "/tmp";
    p.job_tag = tag.c_str();
    p.my_vpid = vpid;
    p.nlocal = 1;
    p.nprocs = 3;
    p.no_rings = true;
    p.peer_card = no_card;
    p.peer_card_arg = reach;
    p.core = reach->core;
    p.peer_addr = addr_of;
    p.source_vpid = source_vpid;
    p.comm_members = comm_members;
    p.net_eager = 1024;
    int err = 0;
    return efa_engine_create(&p, &err);
}

// The child: an engine that calls itself 'Vpid', told when to send one
// small message to vpid 0.
template <uint32_t Vpid> void child_body(efa_core_t *core, const std::string &tag) {
    Reach reach;
    reach.core = core;
    reach.addrs[0] = core->peer_index.begin()->first->addr[0]; // the parent
    efa_engine_t *e = open_engine(&reach, Vpid, tag);
    if (!e) {
        _exit(4);
    }
    static char go[8];
    CoreTestOp g;
    efa_ctx_trecv(efa_core_ctx(core, 0), go, sizeof(go), nullptr, FI_ADDR_UNSPEC, kGo, 0, &g.op);
    while (!g.done) {
        efa_core_progress(core);
        efa_engine_progress(e);
        usleep(200);
    }
    static std::vector<uint8_t> msg = engine_test::pattern(64, 9);
    static Req send;
    send.on.complete = on_complete;
    if (efa_engine_send(e, 0, kCid, static_cast<int32_t>(Vpid), kTag, msg.data(), msg.size(), false,
                        &send.on) < 0) {
        _exit(5);
    }
    for (;;) {
        efa_core_progress(core);
        efa_engine_progress(e);
        usleep(200);
    }
}

template <uint32_t Vpid> class EngineFrom : public ::testing::Test {
  protected:
    void SetUp() override {
        tag_ = "unitsource." + std::to_string(getpid());
        const std::string tag = tag_ + ".child";
        auto child_fn = [tag](int to_parent, int from_parent) {
            forked_core_peer::child(core_test_params(kProvider), to_parent, from_parent,
                                    [&](efa_core_t *core) { child_body<Vpid>(core, tag); });
        };
        const char *why = nullptr;
        ASSERT_TRUE(forked_core_peer::start(core_test_params(kProvider), child_fn, &child_,
                                            &reach_.core, &peer_, &why))
            << why << " (" << kProvider << ")";
        ASSERT_TRUE(efa_core_get_info(reach_.core)->has_source)
            << "nothing to check without FI_SOURCE";
        const void *blob = nullptr;
        size_t len = 0;
        int err = 0;
        ASSERT_EQ(efa_core_local_blob(reach_.core, &blob, &len), 0);
        ASSERT_NE(self_ = efa_core_peer_get(reach_.core, blob, len, &err), nullptr) << err;
        reach_.addrs[1] = peer_->addr[0];
        reach_.addrs[2] = self_->addr[0]; // vpid 2 lives at this process's own address
        engine_ = open_engine(&reach_, 0, tag_);
        ASSERT_NE(engine_, nullptr);
    }
    void TearDown() override {
        if (engine_) {
            efa_engine_destroy(engine_);
        }
        if (self_) {
            efa_core_peer_put(reach_.core, self_);
        }
        forked_core_peer::stop_all(child_, reach_.core, peer_);
    }
    // Posts a receive on ANY_SOURCE, tells the child to send, and drives
    // progress for up to 'secs' or until the receive completes.
    void receive(Req *r, double secs) {
        r->on.complete = on_complete;
        r->on.buf = in_;
        r->on.buflen = sizeof(in_);
        ASSERT_EQ(efa_engine_recv(engine_, kCid, EFA_ENGINE_ANY, kTag, &r->on), 0);
        CoreTestOp go;
        ASSERT_EQ(efa_ctx_tsend(efa_core_ctx(reach_.core, 0), in_, 8, nullptr, peer_->addr[0], kGo,
                                0, &go.op),
                  0);
        for (int i = 0; i < static_cast<int>(secs * 1000) && 0 == r->completions; ++i) {
            efa_core_progress(reach_.core);
            efa_engine_progress(engine_);
            usleep(1000);
        }
        EXPECT_TRUE(go.done);
    }
    uint64_t dropped() const {
        efa_engine_stats_t st{};
        efa_engine_get_stats(engine_, &st);
        return st.dropped;
    }
    std::string tag_;
    pid_t child_ = -1;
    Reach reach_;
    efa_peer_t *peer_ = nullptr;
    efa_peer_t *self_ = nullptr;
    efa_engine_t *engine_ = nullptr;
    uint8_t in_[256] = {};
};

using EngineFromGenuineSender = EngineFrom<1>;
using EngineFromForger = EngineFrom<2>;

TEST_F(EngineFromGenuineSender, IsReceived) {
    Req r;
    receive(&r, 10);
    EXPECT_EQ(r.completions, 1) << "the genuine sender's message never arrived";
    EXPECT_EQ(r.on.msg_src, 1);
    EXPECT_EQ(efa_core_source_forged(reach_.core), 0u);
}

TEST_F(EngineFromForger, IsDroppedAndCounted) {
    Req r;
    receive(&r, 3);
    EXPECT_EQ(r.completions, 0) << "a message naming vpid 2, sent by vpid 1, was received (source "
                                << r.on.msg_src << ")";
    EXPECT_EQ(efa_core_source_forged(reach_.core), 1u);
    EXPECT_GE(dropped(), 1u);
    if (0 == r.completions) {
        EXPECT_TRUE(efa_engine_cancel(engine_, &r.on));
    }
}

} // namespace
