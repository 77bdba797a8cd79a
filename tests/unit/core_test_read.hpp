// A read of the process's own registered buffer through efa_core_rail_read,
// for the tests of a core that talks to itself over several rails
// (test_core_rail_back.cpp, test_core_rail0.cpp): the caller plans the
// read (its context, address, peer and keys); the buffer, the local
// registration, the wait and the check of every byte are here, and of
// the pieces the read reports as they land (efa_rail_read_req_t.landed):
// each one's bytes in place when it is reported, all of them before done,
// together the whole buffer once.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include <rdma/fi_errno.h>

#include "efa_core.h"
#include "efa_core_rdv.h"
#include "efa_rma.h"

// plan(r, mr) fills r's ctx, addr, peer, rkeys and rkey[] (mr: the source
// buffer's registration).  Returns the read's completion error (1: none
// came within 10 s), the post's error, or -FI_EIO for wrong bytes or
// pieces reported wrong.
inline int core_test_read_self(efa_core_t *core, size_t len,
                               const std::function<void(efa_rail_read_req_t &, efa_mr_t *)> &plan) {
    std::vector<uint8_t> src(len), dst(len, 0);
    for (size_t i = 0; i < len; ++i) {
        src[i] = static_cast<uint8_t>(i * 5 + 1);
    }
    int err = 0;
    efa_mr_t *mr = efa_core_mr_acquire(core, src.data(), len, FI_REMOTE_READ, &err);
    if (!mr) {
        return err ? err : -FI_ENOMEM;
    }
    struct Done {
        bool done = false;
        int err = 1;
        const uint8_t *src = nullptr, *dst = nullptr;
        std::vector<std::pair<size_t, size_t>> pieces; // (off, n) as they landed
        bool landed_wrong = false;                     // before its bytes, or after done
    } d;
    d.src = src.data();
    d.dst = dst.data();
    efa_rail_read_req_t r{};
    plan(r, mr);
    r.buf = dst.data();
    r.len = len;
    r.raddr = efa_core_get_info(core)->mr_virt_addr
                  ? reinterpret_cast<uint64_t>(src.data())
                  : reinterpret_cast<uint64_t>(src.data()) - efa_mr_base(mr);
    r.mr = efa_core_get_info(core)->mr_local ? mr : nullptr;
    r.done = [](void *arg, int e) {
        static_cast<Done *>(arg)->done = true;
        static_cast<Done *>(arg)->err = e;
    };
    r.landed = [](void *arg, size_t off, size_t n) {
        auto *t = static_cast<Done *>(arg);
        t->landed_wrong = t->landed_wrong || t->done || memcmp(t->src + off, t->dst + off, n) != 0;
        t->pieces.emplace_back(off, n);
    };
    r.arg = &d;
    const int rc = efa_core_rail_read(core, &r, nullptr);
    for (int i = 0; rc == 0 && i < 10000 && !d.done; ++i) {
        efa_core_progress(core);
        usleep(1000);
    }
    efa_core_mr_release(core, mr);
    if (rc) {
        return rc;
    }
    if (d.done && d.err == 0 && memcmp(src.data(), dst.data(), len) != 0) {
        return -FI_EIO; // wrong bytes
    }
    if (d.done && d.err == 0) { // the pieces: the whole buffer, each byte once
        std::sort(d.pieces.begin(), d.pieces.end());
        size_t at = 0;
        for (const auto &pc : d.pieces) {
            d.landed_wrong = d.landed_wrong || pc.first != at;
            at = pc.first + pc.second;
        }
        if (d.landed_wrong || at != len) {
            return -FI_EIO;
        }
    }
    return d.err;
}
