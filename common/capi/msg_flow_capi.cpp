// The C interface of the message flow control (efa_msg_flow.h).
#include "efa_msg_flow.h"

#include "msg_flow.hpp"

extern "C" {

void efa_flow_init(efa_flow_t *f, int32_t window, size_t link_off) {
    efa::MsgFlow::of(f)->init(window, link_off);
}

void efa_flow_peer_init(const efa_flow_t *f, efa_flow_peer_t *p) {
    efa::MsgFlow::of(f)->init_peer(p);
}

void efa_flow_received(efa_flow_t *f, efa_flow_peer_t *p, uint16_t returned, bool counts) {
    efa::MsgFlow::of(f)->received(p, returned, counts);
}

void efa_flow_enqueue(efa_flow_t *f, efa_flow_peer_t *p, void *item) {
    efa::MsgFlow::of(f)->enqueue(p, item);
}

void *efa_flow_pop(efa_flow_t *f, efa_flow_peer_t *p) {
    return efa::MsgFlow::of(f)->pop(p);
}

void efa_flow_push_front(efa_flow_t *f, efa_flow_peer_t *p, void *item) {
    efa::MsgFlow::of(f)->push_front(p, item);
}

void efa_flow_dequeue_through(efa_flow_t *f, efa_flow_peer_t *p, void *last) {
    efa::MsgFlow::of(f)->dequeue_through(p, last);
}

int32_t efa_flow_drain(efa_flow_t *f, bool (*drain_peer)(void *arg, efa_flow_peer_t *p),
                       void *arg) {
    return efa::MsgFlow::of(f)->drain(drain_peer, arg);
}

} // extern "C"
