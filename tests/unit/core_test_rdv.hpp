// What a read rendezvous test watches (efa_core_rdv.h): the sender's offer,
// ended by the receiver's answer, and the receive's take.
#pragma once

#include <cstddef>

#include "efa_core_rdv.h"

struct RdvTestOffer {
    efa_rdv_offer_t o{};
    bool done = false;
    int result = 1;
    RdvTestOffer() {
        o.done = [](efa_rdv_offer_t *of, int result) {
            auto *self = reinterpret_cast<RdvTestOffer *>(of);
            self->done = true;
            self->result = result;
        };
    }
};

struct RdvTestTaken {
    bool done = false;
    int err = 1;
    size_t msg_len = 0;
    static void cb(void *arg, int err, size_t msg_len) {
        auto *self = static_cast<RdvTestTaken *>(arg);
        self->done = true;
        self->err = err;
        self->msg_len = msg_len;
    }
};
