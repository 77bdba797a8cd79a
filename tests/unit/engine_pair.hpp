// The fixture of the matching engine's unit tests (test_engine.cpp,
// test_engine_partner.cpp, test_engine_forged_frames.cpp): two engines of
// one process, a and b, as two processes of one node would use them, each
// finding the other's card as the modex would give it; and the calls that
// post, send and progress both until something is done.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>
#include <unistd.h>

#include "efa_engine.h"
#include "engine_test_req.hpp"

namespace engine_test {

class EnginePair : public ::testing::Test {
  protected:
    efa_engine_t *a = nullptr; // vpid 0, local rank 0
    efa_engine_t *b = nullptr; // vpid 1, local rank 1
    std::string tag;
    uint32_t nlocal = 2; // a third local rank has no engine: tests write its ring
    uint32_t slot_size = 1024;
    uint32_t slot_size_b = 0; // b's, where it differs (its own parameter)
    size_t device_piece = 0;  // net_device_piece (0: device bytes copied whole)
    bool thread_safe = false; // the engines' thread_safe (set before open)

    // The modex's part: the card of engine a or b.
    static int card_of(void *arg, uint32_t vpid, efa_engine_card_t *card) {
        auto *t = static_cast<EnginePair *>(arg);
        efa_engine_t *e = 0 == vpid ? t->a : 1 == vpid ? t->b : nullptr;
        if (nullptr == e) {
            return -FI_ENOENT;
        }
        efa_engine_my_card(e, card);
        return 0;
    }
    efa_engine_t *make(uint32_t vpid, uint32_t slots, bool single_copy, int *err) {
        efa_engine_params_t p{};
        p.inbox_dir = "/tmp";
        p.job_tag = tag.c_str();
        p.my_vpid = vpid;
        p.local_rank = vpid;
        p.nlocal = nlocal;
        p.nprocs = nlocal;
        p.slots = slots;
        p.slot_size = 1 == vpid && slot_size_b ? slot_size_b : slot_size;
        p.net_device_piece = device_piece;
        p.single_copy = single_copy;
        p.thread_safe = thread_safe;
        p.peer_card = card_of;
        p.peer_card_arg = this;
        return efa_engine_create(&p, err);
    }
    void open(uint32_t slots = 8, bool single_copy_b = true) {
        tag = "unit." + std::to_string(getpid()) + "." +
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
        int err = 0;
        a = make(0, slots, true, &err);
        ASSERT_NE(nullptr, a) << err;
        b = make(1, slots, single_copy_b, &err);
        ASSERT_NE(nullptr, b) << err;
    }
    void TearDown() override {
        if (a) {
            efa_engine_destroy(a);
        }
        if (b) {
            efa_engine_destroy(b);
        }
    }
    // Progress both sides until done() or a bound.
    template <class F> bool until(F &&done) {
        for (int i = 0; i < 100000; ++i) {
            if (done()) {
                return true;
            }
            efa_engine_progress(a);
            efa_engine_progress(b);
        }
        return done();
    }
    static int post(efa_engine_t *e, Req &r, void *buf, size_t len, uint32_t cid, int32_t src,
                    int32_t tag) {
        r.on.complete = on_complete;
        r.on.buf = buf;
        r.on.buflen = len;
        return efa_engine_recv(e, cid, src, tag, &r.on);
    }
    static int send(efa_engine_t *e, Req &r, uint32_t to, const std::vector<uint8_t> &data,
                    int32_t tag, bool sync = false, uint32_t cid = 3, int32_t src = 0) {
        r.on.complete = on_complete;
        return efa_engine_send(e, to, cid, src, tag, data.data(), data.size(), sync, &r.on);
    }
};

} // namespace engine_test
