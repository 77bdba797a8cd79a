// The fixture of the tests of the matching engine reaching a peer through
// the provider (test_engine_net.cpp, test_engine_net_read.cpp): one engine
// without rings sends to itself through a whole core on the shm provider
// (from context 1 to context 0's untagged receive pool), as it would to a
// process on another node.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <rdma/fi_errno.h>
#include <unistd.h>

#include "core_test_params.hpp"
#include "core_with_self.hpp"
#include "efa_core.h"
#include "efa_engine.h"
#include "engine_test_req.hpp"

namespace engine_test {

// Sends that completed inside the call count as done.
inline void note(int rc, Req &r) {
    ASSERT_GE(rc, 0);
    if (1 == rc) {
        r.completions++;
    }
}

class EngineNet : public ::testing::Test {
  protected:
    CoreWithSelf opened; // released after TearDown destroyed the engine
    efa_core_t *core = nullptr;
    efa_peer_t *self = nullptr;
    efa_engine_t *e = nullptr;
    std::string tag;
    // Set before open():
    bool no_inject = false;
    size_t read_min = 0;   // net_read_min: rendezvous by RMA read from this size
    size_t read_piece = 0; // net_debug_read_piece
    bool fail_reads = false;
    size_t device_piece = 0;   // net_device_piece: a device receive's read pieces
    uint32_t delay = 0;        // net_debug_delay: that provider message handed on late
    uint32_t small_window = 0; // net_small_window (0: the engine's default)
    bool fake_hmem = false;    // the core with the fake device, visible, and FI_HMEM asked for

    static int no_card(void *, uint32_t, efa_engine_card_t *) { return -FI_ENOENT; }
    static int addr_of(void *arg, uint32_t vpid, fi_addr_t *addr, efa_ctx_t **ctx) {
        auto *t = static_cast<EngineNet *>(arg);
        if (vpid != 0) {
            return -FI_ENOENT;
        }
        *addr = t->self->addr[0];        // context 0 receives
        *ctx = efa_core_ctx(t->core, 1); // context 1 sends
        return 0;
    }

    // direct_mtu > 0: the core in the forced direct mode with that MTU.
    void open(uint32_t window, size_t coalesce, bool swap = false, int direct_mtu = 0) {
        efa_core_params_t cp = core_test_params("shm");
        cp.num_contexts = 2;
        cp.force_direct_mode = direct_mtu > 0;
        cp.direct_mode_mtu = direct_mtu;
        cp.debug_fake_device = cp.debug_fake_device_hmem = cp.hmem = fake_hmem;
        ASSERT_TRUE(opened.open(cp));
        core = opened.core();
        self = opened.self();
        int err = 0;
        tag = "unitnet." + std::to_string(getpid());
        efa_engine_params_t p{};
        p.inbox_dir = "/tmp";
        p.job_tag = tag.c_str();
        p.my_vpid = 0;
        p.nlocal = 1;
        p.nprocs = 1;
        p.no_rings = true;
        p.peer_card = no_card;
        p.peer_card_arg = this;
        p.core = core;
        p.peer_addr = addr_of;
        p.net_eager = 1024;
        p.net_window = window;
        p.net_small_window = small_window;
        p.net_coalesce_bytes = coalesce;
        p.net_coalesce_max = 64;
        p.net_debug_swap = swap;
        p.net_no_inject = no_inject;
        p.net_read_min = read_min;
        p.net_debug_read_piece = read_piece;
        p.net_debug_fail_reads = fail_reads;
        p.net_device_piece = device_piece;
        p.net_debug_delay = delay;
        e = efa_engine_create(&p, &err);
        ASSERT_NE(nullptr, e) << err;
    }
    void TearDown() override {
        if (e) {
            efa_engine_destroy(e);
        }
    }
    void progress() {
        efa_core_progress(core);
        efa_engine_progress(e);
    }
    // Progress until every request of reqs completed (bounded).
    bool wait_all(std::vector<Req> &reqs) {
        for (int i = 0; i < 2000000; ++i) {
            bool all = true;
            for (auto &r : reqs) {
                all = all && r.completions > 0;
            }
            if (all) {
                return true;
            }
            progress();
        }
        return false;
    }
    int send(const std::vector<uint8_t> &buf, int32_t t, bool sync, Req &r) {
        r.on.complete = on_complete;
        return efa_engine_send(e, 0, 5, 0, t, buf.data(), buf.size(), sync, &r.on);
    }
    void recv(std::vector<uint8_t> &buf, int32_t t, Req &r) {
        r.on.complete = on_complete;
        r.on.buf = buf.data();
        r.on.buflen = buf.size();
        int rc = efa_engine_recv(e, 5, EFA_ENGINE_ANY, t, &r.on);
        ASSERT_GE(rc, 0);
        if (1 == rc) {
            r.completions++;
        }
    }
    // One message sent and received (tag t): true when it arrived whole.
    bool send_one_and_receive(const std::vector<uint8_t> &msg, int32_t t) {
        std::vector<Req> sends(1), recvs(1);
        note(send(msg, t, false, sends[0]), sends[0]);
        std::vector<uint8_t> got(msg.size());
        recv(got, t, recvs[0]);
        return wait_all(recvs) && wait_all(sends) && got == msg;
    }
    // n messages of 8, 9, ... bytes sent in one burst (no progress call
    // between them), then received: each whole and in order.
    void send_burst_in_order(int n) {
        std::vector<std::vector<uint8_t>> bufs;
        std::vector<Req> sends(n), recvs(n);
        for (int i = 0; i < n; ++i) {
            bufs.push_back(pattern(8 + i, static_cast<uint8_t>(i)));
            note(send(bufs.back(), 9, false, sends[i]), sends[i]);
        }
        std::vector<std::vector<uint8_t>> got(n, std::vector<uint8_t>(8 + n));
        for (int i = 0; i < n; ++i) {
            recv(got[i], 9, recvs[i]);
        }
        ASSERT_TRUE(wait_all(recvs));
        ASSERT_TRUE(wait_all(sends));
        for (int i = 0; i < n; ++i) {
            ASSERT_EQ(8u + i, recvs[i].on.msg_len) << "message " << i << " out of order";
            got[i].resize(8 + i);
            EXPECT_EQ(bufs[i], got[i]) << "message " << i;
        }
    }
    efa_engine_stats_t stats() {
        efa_engine_stats_t s{};
        efa_engine_get_stats(e, &s);
        return s;
    }
};

} // namespace engine_test
