// The forced direct mode (force_direct_mode: what libfabric's efa-direct
// offers, on a stand-in) and the swap of untagged arrivals: a whole core on
// the shm provider, sending untagged messages from context 1 to its own
// context 0, as btl_efa and the engine send to a peer.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <rdma/fi_errno.h>

#include "core_test_params.hpp"
#include "core_with_self.hpp"
#include "efa_core.h"
#include "efa_core_msg.h"

namespace {

class CoreDirect : public ::testing::Test {
  protected:
    CoreWithSelf opened;
    efa_core_t *core = nullptr;
    efa_peer_t *self = nullptr;
    std::vector<uint8_t> arrived; // first byte of each message, in handing-on order
    int failures = 0;

    static void on_message(void *arg, efa_ctx_t *, void *buf, size_t len, int err, fi_addr_t) {
        auto *t = static_cast<CoreDirect *>(arg);
        if (err) {
            t->failures++;
            return;
        }
        t->arrived.push_back(static_cast<const uint8_t *>(buf)[0]);
        (void)len;
    }

    void open(bool direct, bool swap, int mtu = 0) {
        efa_core_params_t p = core_test_params("shm");
        p.num_contexts = 2;
        p.force_direct_mode = direct;
        p.debug_swap_messages = swap;
        p.direct_mode_mtu = mtu;
        ASSERT_TRUE(opened.open(p));
        core = opened.core();
        self = opened.self();
        ASSERT_EQ(0, efa_core_msg_set_channel(core, EFA_MSG_CHANNEL_BTL, on_message, this));
    }
    void TearDown() override {
        if (core) {
            efa_core_msg_set_channel(core, EFA_MSG_CHANNEL_BTL, nullptr, nullptr);
        }
    }
    // One message of len bytes whose first byte is 'first', from context 1
    // to context 0; the buffer stays alive until its completion.
    struct Send {
        efa_op_t op{};
        std::vector<uint8_t> buf;
        bool done = false;
    };
    static void send_done(efa_op_t *op, const efa_cqe_t *) {
        reinterpret_cast<Send *>(op)->done = true;
    }
    int send(Send &s, uint8_t first, size_t len) {
        s.buf.assign(len, first);
        s.op.complete = send_done;
        int rc;
        do {
            rc = efa_ctx_try_send(efa_core_ctx(core, 1), s.buf.data(), len, nullptr, self->addr[0],
                                  &s.op);
            if (rc == -FI_EAGAIN) {
                efa_core_progress(core);
            }
        } while (rc == -FI_EAGAIN);
        return rc;
    }
    bool progress_until(size_t n, int max_calls = 2000000) {
        for (int i = 0; i < max_calls && arrived.size() < n; ++i) {
            efa_core_progress(core);
        }
        return arrived.size() >= n;
    }
};

} // namespace

TEST_F(CoreDirect, InfoSaysUntaggedUnorderedMtuSized) {
    open(true, false, 2048);
    const efa_core_info_t *in = efa_core_get_info(core);
    EXPECT_FALSE(in->has_tagged);
    EXPECT_FALSE(in->ordered);
    EXPECT_TRUE(in->mr_local); // efa-direct requires FI_MR_LOCAL
    EXPECT_FALSE(in->has_atomic);
    EXPECT_TRUE(in->swaps_messages); // the mode turns the swap on
    EXPECT_EQ(2048u, in->max_msg_size);
    EXPECT_EQ(2048u, efa_core_msg_max_size(core));
}

TEST_F(CoreDirect, DefaultModeKeepsTagsAndOrder) {
    open(false, false);
    const efa_core_info_t *in = efa_core_get_info(core);
    EXPECT_TRUE(in->has_tagged);
    EXPECT_TRUE(in->ordered);
    EXPECT_FALSE(in->swaps_messages);
    EXPECT_GT(efa_core_msg_max_size(core), 8192u);
}

TEST_F(CoreDirect, MessageOverTheMtuIsRefused) {
    open(true, false); // the default MTU, 8192
    Send big, fits;
    EXPECT_EQ(-FI_EMSGSIZE, send(big, 1, 8193));
    ASSERT_EQ(0, send(fits, 2, 8192));
    ASSERT_TRUE(progress_until(1));
    EXPECT_EQ(2, arrived[0]);
}

TEST_F(CoreDirect, ArrivalsAreHandedOnInSwappedPairs) {
    open(false, true);
    constexpr int kN = 6;
    std::vector<Send> s(kN);
    for (int i = 0; i < kN; i += 2) {
        // A pair at a time: the provider (shm) delivers 1 before 2.
        ASSERT_EQ(0, send(s[i], static_cast<uint8_t>(i + 1), 64));
        ASSERT_EQ(0, send(s[i + 1], static_cast<uint8_t>(i + 2), 64));
        ASSERT_TRUE(progress_until(static_cast<size_t>(i + 2)));
    }
    ASSERT_TRUE(progress_until(kN));
    EXPECT_EQ((std::vector<uint8_t>{2, 1, 4, 3, 6, 5}), arrived);
    EXPECT_EQ(0, failures);
}

TEST_F(CoreDirect, ALoneArrivalIsNotHeldForEver) {
    open(false, true);
    Send one;
    ASSERT_EQ(0, send(one, 7, 64));
    ASSERT_TRUE(progress_until(1)); // released after the hold's progress calls
    EXPECT_EQ(7, arrived[0]);
}

TEST_F(CoreDirect, ZeroByteMessagesAreProbesAndDropped) {
    open(true, true);
    Send probe, real;
    ASSERT_EQ(0, send(probe, 0, 0));
    ASSERT_EQ(0, send(real, 9, 16));
    ASSERT_TRUE(progress_until(1));
    for (int i = 0; i < 1000; ++i) {
        efa_core_progress(core);
    }
    ASSERT_EQ(1u, arrived.size()) << "the probe was handed on";
    EXPECT_EQ(9, arrived[0]);
    EXPECT_TRUE(probe.done);
}

// An inject over the provider's inject size, or (forced direct mode) over
// the MTU, is refused before the provider sees it, so that the caller can
// send it with a completion; the inject size the core reports is never
// over the largest message.
TEST_F(CoreDirect, OversizeInjectIsRefusedNotPassedOn) {
    open(true, false, 1025);
    const efa_core_info_t *in = efa_core_get_info(core);
    if (0 == in->inject_size) {
        GTEST_SKIP() << "the provider has no inject";
    }
    EXPECT_LE(in->inject_size, 1025u);
    std::vector<uint8_t> buf(in->inject_size + 64, 5);
    EXPECT_EQ(-FI_EMSGSIZE,
              efa_ctx_try_inject(efa_core_ctx(core, 1), buf.data(), 1032, self->addr[0]));
    EXPECT_EQ(-FI_EMSGSIZE, efa_ctx_try_inject(efa_core_ctx(core, 1), buf.data(),
                                               in->inject_size + 1, self->addr[0]));
    int rc;
    do {
        rc = efa_ctx_try_inject(efa_core_ctx(core, 1), buf.data(), in->inject_size, self->addr[0]);
        if (-FI_EAGAIN == rc) {
            efa_core_progress(core);
        }
    } while (-FI_EAGAIN == rc);
    ASSERT_EQ(0, rc);
    ASSERT_TRUE(progress_until(1));
    EXPECT_EQ(5, arrived[0]);
    EXPECT_EQ(0, failures);
}
