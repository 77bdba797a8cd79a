// The C interface of the on-node message channel (efa_shm_ring.h).
#include "efa_shm_ring.h"
#include "shm_ring.hpp"

struct efa_shm_inbox {
    std::unique_ptr<efa::shm::Inbox> in;
};

struct efa_shm_outbox {
    std::unique_ptr<efa::shm::Outbox> out;
};

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

void efa_shm_inbox_destroy(efa_shm_inbox_t *inbox) {
    delete inbox;
}

int efa_shm_inbox_poll(efa_shm_inbox_t *inbox, efa_shm_deliver_fn fn, void *arg, int budget) {
    return inbox->in->poll(
        [fn, arg](uint32_t r, void *frame, size_t len) { fn(arg, r, frame, len); }, budget);
}

efa_shm_outbox_t *efa_shm_outbox_attach(const char *path, unsigned ring, int *err) {
    int rc = 0;
    auto out = efa::shm::Outbox::attach(path, ring, rc);
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

} // extern "C"
