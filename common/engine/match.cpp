// Matching for the matching engine (match.hpp).
#include "match.hpp"

namespace efa::engine {

Message *Matcher::post(efa_engine_req_t *r) {
    for (efa_engine_link_t *l = unexpected_.front(); l && l != unexpected_.end(); l = l->next) {
        Message *m = msg_of(l);
        if (matches(r->cid, r->src, r->tag, m->env)) {
            unexpected_.remove(l);
            return m;
        }
    }
    posted_.push_back(&r->link);
    posted_net_ += (r->flags & kReqLocal) ? 0 : 1;
    return nullptr;
}

efa_engine_req_t *Matcher::arrive(const Envelope &env) {
    for (efa_engine_link_t *l = posted_.front(); l && l != posted_.end(); l = l->next) {
        efa_engine_req_t *r = req_of(l);
        if (matches(r->cid, r->src, r->tag, env)) {
            posted_.remove(l);
            unposted(r);
            return r;
        }
    }
    return nullptr;
}

Message *Matcher::probe(uint32_t cid, int32_t src, int32_t tag, bool take) {
    for (efa_engine_link_t *l = unexpected_.front(); l && l != unexpected_.end(); l = l->next) {
        Message *m = msg_of(l);
        if (matches(cid, src, tag, m->env)) {
            if (take) {
                unexpected_.remove(l);
            }
            return m;
        }
    }
    return nullptr;
}

Message *Matcher::withdraw(uint32_t via, uint64_t seq) {
    if (0 == seq) {
        return nullptr;
    }
    for (efa_engine_link_t *l = unexpected_.front(); l && l != unexpected_.end(); l = l->next) {
        Message *m = msg_of(l);
        if (m->via == via && m->seq == seq) {
            unexpected_.remove(l);
            return m;
        }
    }
    return nullptr;
}

bool Matcher::cancel(efa_engine_req_t *r) {
    if (nullptr == r->link.next) {
        return false;
    }
    posted_.remove(&r->link);
    unposted(r);
    return true;
}

} // namespace efa::engine
