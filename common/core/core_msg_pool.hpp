// The untagged receive pool of core_msg.cpp (efa_core_msg.h), shared with
// core_msg_rest.cpp: a rail's failed buffers set aside and posted again.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include <rdma/fabric.h>

#include "core.hpp"
#include "efa_core_msg.h"
#include "registered_block.hpp"

struct efa_msg_pool {
    struct Buf {
        efa_op_t op; // first: the progress loop casts the context back
        efa_msg_pool *pool;
        efa_ctx *ctx;
        uint8_t *data;
        void *desc;                       // the slab's descriptor on ctx's NIC
        size_t len = 0;                   // while held back by the swap
        fi_addr_t src = FI_ADDR_NOTAVAIL; // the same
        std::atomic<bool> posted{false};
    };
    efa_core *core = nullptr;
    size_t per_ctx = 0;
    efa::RegisteredBlock slab;      // the first NIC's buffers, kBufSize bytes each (core_msg.cpp)
    efa::RegisteredBlock rail_slab; // the other rails' (own matching's channel)
    std::deque<Buf> bufs;           // empty while no handler is installed (never moved)
    std::mutex lock;                // unposted
    std::vector<Buf *> unposted;
    std::atomic<size_t> unposted_count{0};
    // A rail's receives that failed (deliver), posted again once
    // common_efa_rail_retry seconds have passed, so that a link that came
    // back (the peers' rail_back) has buffers to receive into; failing at
    // once again, they wait twice as long (to 8 times).  Under lock.
    std::vector<Buf *> resting;
    std::atomic<size_t> resting_count{0};
    std::atomic<uint64_t> rest_due_ms{0};
    uint64_t rest_wait_ms = 0, rested_ms = 0; // the last wait, and when it ended
    // One handler per channel (efa_core_msg.h): the first byte of a message
    // says whose it is.
    std::atomic<efa_msg_handler_fn> fn[EFA_MSG_CHANNELS]{};
    void *arg[EFA_MSG_CHANNELS]{};
    std::atomic<bool> closing{false};
    // The swap (see above): the arrival held back, the progress calls it
    // has waited, and how many arrivals were handed on out of order.
    bool swap = false;
    std::atomic<Buf *> held{nullptr};
    std::atomic<uint32_t> held_calls{0};
    std::atomic<uint64_t> swapped{0};
};

namespace efa {

// A rail's receive that failed (core_msg.cpp's deliver, or a post its NIC
// refused) set aside until common_efa_rail_retry seconds have passed; then
// efa_core_msg_progress posts it again (core_msg_rest.cpp).
void msg_rest(efa_msg_pool::Buf *b);

} // namespace efa
