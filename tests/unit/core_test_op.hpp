// An operation a core test waits on (it records its completion), and the
// wait: progress until it completes or a time limit passes.
#pragma once

#include <unistd.h>

#include <chrono>

#include "efa_core.h"

struct CoreTestOp {
    efa_op_t op{};
    bool done = false;
    int err = 1;
    CoreTestOp() {
        op.complete = [](efa_op_t *o, const efa_cqe_t *c) {
            auto *self = reinterpret_cast<CoreTestOp *>(o);
            self->done = true;
            self->err = c->err;
        };
    }
};

// Drives progress until op completes or 'limit' passes; the seconds taken.
inline double core_test_wait(efa_core_t *core, const CoreTestOp &op, double limit) {
    auto t0 = std::chrono::steady_clock::now();
    double s = 0;
    while (!op.done && s < limit) {
        efa_core_progress(core);
        usleep(1000);
        s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return s;
}
