// The C interface of the on-node engine (efa_onnode.h).
#include <cstdio>
#include <new>

#include <rdma/fi_errno.h>

#include "efa_onnode.h"
#include "onnode_engine.hpp"

using efa::onnode::Engine;
using efa::onnode::Message;

extern "C" {

efa_onnode_t *efa_onnode_create(const efa_onnode_params_t *p, int *err) {
    int e = 0;
    auto engine = Engine::create(*p, e);
    if (!engine) {
        *err = e ? e : -FI_ENOMEM;
        return nullptr;
    }
    auto *o = new (std::nothrow) efa_onnode();
    if (!o) {
        *err = -FI_ENOMEM;
        return nullptr;
    }
    o->engine = std::move(engine);
    *err = 0;
    return o;
}

void efa_onnode_destroy(efa_onnode_t *e) {
    delete e;
}

const char *efa_onnode_inbox_path(const efa_onnode_t *e) {
    return e->engine->path().c_str();
}

int efa_onnode_send(efa_onnode_t *e, uint32_t peer, uint32_t cid, int32_t src, int32_t tag,
                    const void *buf, size_t len, bool sync, efa_onnode_req_t *req) {
    return e->engine->send(peer, cid, src, tag, buf, len, sync, req);
}

int efa_onnode_recv(efa_onnode_t *e, uint32_t cid, int32_t src, int32_t tag,
                    efa_onnode_req_t *req) {
    return e->engine->recv(cid, src, tag, req, false);
}

int efa_onnode_recv_local(efa_onnode_t *e, uint32_t cid, int32_t src, int32_t tag,
                          efa_onnode_req_t *req) {
    return e->engine->recv(cid, src, tag, req, true);
}

int efa_onnode_recv_partnered(efa_onnode_t *e, uint32_t cid, int32_t src, int32_t tag,
                              efa_onnode_req_t *req) {
    return e->engine->recv_partnered(cid, src, tag, req);
}

void efa_onnode_partner_armed(efa_onnode_t *e, efa_onnode_req_t *req) {
    e->engine->partner_armed(req);
}

int efa_onnode_partner_done(efa_onnode_t *e, efa_onnode_req_t *req, bool matched) {
    return e->engine->partner_done(req, matched);
}

int efa_onnode_probe(efa_onnode_t *e, uint32_t cid, int32_t src, int32_t tag, bool claim,
                     efa_onnode_probe_t *out) {
    return e->engine->probe(cid, src, tag, claim, out);
}

void efa_onnode_comm_freed(efa_onnode_t *e, uint32_t cid) {
    e->engine->comm_freed(cid);
}

int efa_onnode_mrecv(efa_onnode_t *e, void *msg, efa_onnode_req_t *req) {
    return e->engine->mrecv(static_cast<Message *>(msg), req);
}

bool efa_onnode_cancel(efa_onnode_t *e, efa_onnode_req_t *req) {
    return e->engine->cancel(req);
}

int efa_onnode_cancel_send(efa_onnode_t *e, efa_onnode_req_t *req) {
    return e->engine->cancel_send(req);
}

int efa_onnode_progress(efa_onnode_t *e) {
    return e->engine->progress();
}

void efa_onnode_inbox_file(const efa_onnode_params_t *p, char *buf, size_t len) {
    if (len) {
        snprintf(buf, len, "%s",
                 efa::onnode::inbox_path(p->inbox_dir ? p->inbox_dir : "",
                                         p->job_tag ? p->job_tag : "", p->my_vpid)
                     .c_str());
    }
}

void efa_onnode_my_card(const efa_onnode_t *e, efa_onnode_card_t *out) {
    *out = e->engine->my_card();
}

void efa_onnode_get_stats(const efa_onnode_t *e, efa_onnode_stats_t *out) {
    e->engine->get_stats(out);
}

uint64_t efa_onnode_dropped(const efa_onnode_t *e) {
    return e->engine->dropped();
}

} // extern "C"
