// The on-node stack's C seam (efa_node.h) as extern "C" shims over
// node/node.hpp.
#include "efa_node.h"

#include <cstdio>

#include "node.hpp"

extern "C" {

efa_node_t *efa_node_acquire(const efa_node_params_t *p, bool *created, int *err) {
    return efa::node::acquire_shared(*p, *created, *err);
}

void efa_node_release(efa_node_t *n) {
    efa::node::release_shared(n);
}

void efa_node_file(const efa_node_params_t *p, uint32_t vpid, char *buf, size_t len) {
    if (len) {
        snprintf(
            buf, len, "%s",
            efa::node::file_of(p->dir ? p->dir : "", p->job_tag ? p->job_tag : "", vpid).c_str());
    }
}

const char *efa_node_path(const efa_node_t *n) {
    return n->node->path().c_str();
}

void efa_node_peer_file(const efa_node_t *n, uint32_t vpid, char *buf, size_t len) {
    if (len) {
        snprintf(buf, len, "%s", n->node->path_of(vpid).c_str());
    }
}

void efa_node_my_card(const efa_node_t *n, efa_node_card_t *out) {
    *out = n->node->card();
}

int efa_node_open_channel(efa_node_t *n, unsigned channel, bool reserve) {
    return n->node->open_channel(channel, reserve);
}

void efa_node_close_channel(efa_node_t *n, unsigned channel) {
    if (channel < EFA_NODE_CHANNELS) {
        n->node->close_channel(channel);
    }
}

size_t efa_node_max_frame(const efa_node_t *n) {
    return n->node->max_frame();
}

uint64_t efa_node_dropped(const efa_node_t *n) {
    return n->node->dropped();
}

int efa_node_poll(efa_node_t *n, unsigned channel, efa_shm_deliver_fn fn, void *arg, int budget) {
    return n->node->poll(
        channel, [fn, arg](uint32_t r, void *frame, size_t len) { fn(arg, r, frame, len); },
        budget);
}

efa_shm_outbox_t *efa_node_attach(const efa_node_t *n, uint32_t vpid, const efa_node_card_t *card,
                                  unsigned channel, int *err) {
    int rc = 0;
    efa_shm_outbox_t *o = efa::node::attach_handle(n, vpid, *card, channel, rc);
    *err = o ? 0 : rc;
    return o;
}

} // extern "C"
