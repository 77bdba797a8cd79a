// A read of the process's own registered buffer through efa_core_rail_read,
// for the tests of a core that talks to itself over several rails
// (test_core_rail_back.cpp, test_core_rail0.cpp): the caller plans the
// read (its context, address, peer and keys); the buffer, the local
// registration, the wait and the check of every byte are here.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include <rdma/fi_errno.h>

#include "efa_core.h"
#include "efa_rma.h"

// plan(r, mr) fills r's ctx, addr, peer, rkeys and rkey[] (mr: the source
// buffer's registration).  Returns the read's completion error (1: none
// came within 10 s), the post's error, or -FI_EIO for wrong bytes.
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
    } d;
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
    return d.err;
}
