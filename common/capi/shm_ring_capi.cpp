// The C interface of the on-node message channel (efa_shm_ring.h).
#include "efa_shm_ring.h"

#include <cerrno>
#include <cstring>

#include "shm_ring.hpp"

extern "C" {

efa_shm_inbox_t *efa_shm_inbox_create(const char *path, unsigned nrings, unsigned nslots,
                                      size_t slot_size, int *err) {
    efa::shm::Geometry g;
    g.nrings = nrings;
    g.nslots = nslots;
    g.slot_size = static_cast<uint32_t>(slot_size);
    int rc = 0;
    auto in = efa::shm::Inbox::create(path, g, rc);
    if (!in) {
        if (err) {
            *err = rc;
        }
        return nullptr;
    }
    return new efa_shm_inbox{std::move(in)};
}

uint64_t efa_shm_inbox_cookie(const efa_shm_inbox_t *inbox) {
    return inbox->in->cookie();
}

uint64_t efa_shm_inbox_dropped(const efa_shm_inbox_t *inbox) {
    return inbox->in->dropped();
}

void efa_shm_inbox_destroy(efa_shm_inbox_t *inbox) {
    delete inbox;
}

int efa_shm_inbox_poll(efa_shm_inbox_t *inbox, efa_shm_deliver_fn fn, void *arg, int budget) {
    return inbox->in->poll(
        [fn, arg](uint32_t r, void *frame, size_t len) { fn(arg, r, frame, len); }, budget);
}

int efa_shm_inbox_poll_range(efa_shm_inbox_t *inbox, unsigned first, unsigned count,
                             efa_shm_deliver_fn fn, void *arg, int budget) {
    return inbox->in->poll_range(
        first, count, [fn, arg](uint32_t r, void *frame, size_t len) { fn(arg, r, frame, len); },
        budget);
}

efa_shm_outbox_t *efa_shm_outbox_attach(const char *path, unsigned ring, uint64_t cookie,
                                        int *err) {
    int rc = 0;
    auto out = efa::shm::Outbox::attach(path, ring, cookie, rc);
    if (!out) {
        if (err) {
            *err = rc;
        }
        return nullptr;
    }
    return new efa_shm_outbox{std::move(out)};
}

void efa_shm_outbox_detach(efa_shm_outbox_t *outbox) {
    delete outbox;
}

size_t efa_shm_outbox_max_frame(const efa_shm_outbox_t *outbox) {
    return outbox->out->max_frame();
}

int efa_shm_outbox_send(efa_shm_outbox_t *outbox, const void *buf, size_t len) {
    return outbox->out->send(buf, len);
}

void *efa_shm_outbox_reserve(efa_shm_outbox_t *outbox, size_t len) {
    return outbox->out->reserve(len);
}

void efa_shm_outbox_commit(efa_shm_outbox_t *outbox, size_t len) {
    outbox->out->commit(len);
}

const char *efa_shm_strerror(int err) {
    return efa::shm::strerror_of(err);
}

} // extern "C"
