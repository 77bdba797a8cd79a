// The flow control of efa_msg_flow.h: credits, the peers' send queues and
// the list of peers with work waiting.
#pragma once

#include "efa_msg_flow.h"

namespace efa {

// The C struct is the base, so the seam's efa_flow_t * converts back; the
// owner allocates it (inside its module) and calls init.
class MsgFlow : public efa_flow_t {
  public:
    static MsgFlow *of(efa_flow_t *f) { return static_cast<MsgFlow *>(f); }
    static const MsgFlow *of(const efa_flow_t *f) { return static_cast<const MsgFlow *>(f); }

    void init(int32_t window, size_t link_off);
    void init_peer(efa_flow_peer_t *p) const;
    void received(efa_flow_peer_t *p, uint16_t returned, bool counts);
    void unsent(efa_flow_peer_t *p, uint16_t given, bool took_credit);
    void enqueue(efa_flow_peer_t *p, void *item);
    void *pop(efa_flow_peer_t *p);
    void push_front(efa_flow_peer_t *p, void *item);
    void dequeue_through(efa_flow_peer_t *p, void *last);
    void requeue_front(efa_flow_peer_t *p, void *first, void *last);
    int32_t drain(bool (*drain_peer)(void *arg, efa_flow_peer_t *p), void *arg);

  private:
    void **link(void *item) const { return efa_flow_link_(this, item); }
    void wait(efa_flow_peer_t *p);
};

} // namespace efa
