// The matching engine's receive side as the caller sees it: posted
// receives, partnered receives, probe, matched receive and cancel.
#include "engine_impl.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <rdma/fi_errno.h>

#include "efa_core_msg.h"

namespace efa::engine {

int Engine::recv(uint32_t cid, int32_t src, int32_t tag, efa_engine_req_t *req, bool local) {
    return post_recv(cid, src, tag, req, local ? kReqLocal : 0);
}

int Engine::post_recv(uint32_t cid, int32_t src, int32_t tag, efa_engine_req_t *req,
                      uint8_t flags) {
    Guard g(mu_, mt_);
    if (net_ && !interest_ && !(flags & kReqLocal)) {
        interest_ = true; // a peer on another node may send what it waits for
        efa_core_net_interest(net_->core(), 1);
    }
    req->flags = flags; // requests are recycled: nothing of an earlier use may stay
    req->cid = cid;
    req->src = src;
    req->tag = tag;
    req->err = 0;
    req->link.next = req->link.prev = nullptr;
    req->state = kPosted;
    Message *m = match_.post(req);
    if (nullptr == m) {
        return 0;
    }
    req->state = kIdle;
    // Matched at its post: a partnered receive is the engine's alone, said
    // here under the lock.  Once it is released, another thread's progress
    // may hold the message for it (were it still a partner) or complete it
    // (the bytes of an RTS it took), so nothing of req is read after.
    const bool partnered = flags & kReqPartner;
    req->flags = static_cast<uint8_t>(req->flags & ~(kReqPartner | kReqArmed));
    if (take(m, req)) {
        return 1;
    }
    return partnered ? EFA_ENGINE_MATCHED_LATER : 0; // (took an RTS: the bytes follow)
}

int Engine::recv_partnered(uint32_t cid, int32_t src, int32_t tag, efa_engine_req_t *req) {
    if (net_) {
        // With the provider's traffic in the engine, a receive has nothing
        // else to be posted to; holding a message would also stall frames
        // that came in one provider message.
        return -FI_EOPNOTSUPP;
    }
    // 0: posted, a partner until partner_done, whatever another thread's
    // progress does with it meanwhile (a message it holds for it waits
    // for partner_armed); 1 or EFA_ENGINE_MATCHED_LATER: decided under the
    // lock (post_recv).
    const int rc = post_recv(cid, src, tag, req, kReqPartner);
    if (__builtin_expect(nullptr != after_partner_post, 0)) {
        after_partner_post(after_partner_post_arg);
    }
    return rc;
}

int Engine::partner_done(efa_engine_req_t *req, bool matched) {
    int rc = 0;
    {
        std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
        if (mt_) {
            lock.lock();
            wait_for_cancel(lock, req); // another thread's call of its cancel
        }
        // A cancel still queued is not called: the caller hands req back.
        // Nor is this thread's own call of it (its cancel completed it in
        // this thread) counted any longer: req, reused at once, must not
        // wait on it.
        for (auto it = cancels_.begin(); it != cancels_.end(); ++it) {
            if (*it == req) {
                cancels_.erase(it);
                break;
            }
        }
        const auto me = std::this_thread::get_id();
        for (auto it = cancelling_.begin(); it != cancelling_.end(); ++it) {
            if (it->req == req && it->by == me) {
                cancelling_.erase(it);
                break;
            }
        }
        req->flags &= static_cast<uint8_t>(~(kReqPartner | kReqArmed));
        if (kPosted == req->state) {
            match_.cancel(req);
            req->state = kDone;
            return 0;
        }
        if (kHeld != req->state) {
            return 0;
        }
        auto *m = reinterpret_cast<Message *>(static_cast<uintptr_t>(req->remote));
        --held_;
        if (matched) {
            req->state = kDone;
            hand_over(m); // as if it had just arrived
        } else {
            req->state = kIdle;
            if (take(m, req)) {
                req->state = kDone;
                finish(req);
            }
            rc = 1;
        }
    }
    run_cancels();
    run_completions();
    return rc;
}

int Engine::mrecv(Message *m, efa_engine_req_t *req) {
    Guard g(mu_, mt_);
    req->flags = 0;
    req->err = 0;
    req->link.next = req->link.prev = nullptr;
    req->state = kIdle;
    if (take(m, req)) {
        return 1;
    }
    if (net_ && !interest_) {
        // Its data or its sender's answer may come from the provider (a
        // large message of another node): polled at every call meanwhile.
        interest_ = true;
        efa_core_net_interest(net_->core(), 1);
    }
    return 0;
}

int Engine::probe(uint32_t cid, int32_t src, int32_t tag, bool claim, efa_engine_probe_t *out) {
    if (net_) {
        efa_core_progress(net_->core()); // ... and those the provider has
    }
    progress(); // messages already in the rings count as arrived
    Guard g(mu_, mt_);
    Message *m = match_.probe(cid, src, tag, claim);
    if (nullptr == m) {
        // (peers on other nodes are watched, and processes of this node)
        return net_ || params_.peer_exited ? probe_missed(cid, src) : 0;
    }
    out->src = m->env.src;
    out->tag = m->env.tag;
    out->len = m->len;
    out->msg = claim ? m : nullptr;
    return 1;
}

bool Engine::cancel(efa_engine_req_t *req) {
    {
        Guard g(mu_, mt_);
        if (kPosted != req->state || !match_.cancel(req)) {
            return false;
        }
        req->err = -FI_ECANCELED;
        req->msg_len = 0;
        req->state = kDone;
        finish(req);
    }
    run_completions();
    return true;
}

// A send the caller wants cancelled.  Only a message no receiver can ever
// match may be reported cancelled: one still queued here, or one the
// receiver withdraws from its unexpected queue.  Asking the receiver is
// the only way to know: the message may have matched meanwhile.  A send
// waiting for an answer (ACK, FIN) learns the outcome from the answers; a
// standard-mode eager send, complete once written, asks for an answer
// either way and the caller polls for it (efa_engine.h).
int Engine::cancel_send(efa_engine_req_t *req) {
    int rc = 0;
    {
        Guard g(mu_, mt_);
        if (kSendQueued == req->state) { // never written: nobody saw it
            int err = 0;
            Peer *p = peer(req->peer, err);
            if (nullptr != p) {
                p->sends.remove(&req->link);
                if (req->local_id) {
                    ids_.remove(req->local_id);
                }
                req->err = -FI_ECANCELED;
                req->state = kDone;
                finish(req);
            }
        } else if ((kWaitAck == req->state || kWaitFin == req->state) &&
                   !(req->flags & kReqCancel)) {
            req->flags |= kReqCancel; // asked once
            send_ctrl(req->peer, kCancel, req->local_id, req->seq);
        } else if (kRecall == req->state) {
            rc = -FI_EAGAIN;
        } else if (kDone == req->state && (req->flags & kReqCancel)) {
            // Asked already (or cancelled while queued): the outcome stands.
            rc = 0 == (req->flags & (kReqSync | kReqRndv)) && -FI_ECANCELED == req->err;
        } else if (kDone == req->state && 0 == (req->flags & (kReqSync | kReqRndv)) &&
                   0 != req->seq && 0 == req->err) {
            // Written and complete: only the receiver knows whether a
            // receive took it.  (A synchronous or rendezvous send that is
            // complete was matched: no question to ask.)
            int err = 0;
            Peer *p = peer(req->peer, err);
            if (nullptr != p && !p->error) {
                req->flags |= kReqCancel;
                req->state = kRecall;
                req->local_id = ids_.add(req); // names the answer
                send_ctrl(req->peer, kCancel, req->local_id, req->seq, kFrameAnswer);
                rc = -FI_EAGAIN;
                if (p->net && !interest_) {
                    interest_ = true; // the answer comes from the provider
                    efa_core_net_interest(net_->core(), 1);
                }
            }
        } // else streaming, or complete after a match: it completes (or did) as it is
    }
    run_completions();
    return rc;
}

} // namespace efa::engine

// The C seam (efa_engine.h) of what this file implements.
using efa::engine::Message;

extern "C" {

int efa_engine_recv(efa_engine_t *e, uint32_t cid, int32_t src, int32_t tag,
                    efa_engine_req_t *req) {
    return e->engine->recv(cid, src, tag, req, false);
}

int efa_engine_recv_local(efa_engine_t *e, uint32_t cid, int32_t src, int32_t tag,
                          efa_engine_req_t *req) {
    return e->engine->recv(cid, src, tag, req, true);
}

int efa_engine_recv_partnered(efa_engine_t *e, uint32_t cid, int32_t src, int32_t tag,
                              efa_engine_req_t *req) {
    return e->engine->recv_partnered(cid, src, tag, req);
}

int efa_engine_partner_done(efa_engine_t *e, efa_engine_req_t *req, bool matched) {
    return e->engine->partner_done(req, matched);
}

int efa_engine_probe(efa_engine_t *e, uint32_t cid, int32_t src, int32_t tag, bool claim,
                     efa_engine_probe_t *out) {
    return e->engine->probe(cid, src, tag, claim, out);
}

int efa_engine_mrecv(efa_engine_t *e, void *msg, efa_engine_req_t *req) {
    return e->engine->mrecv(static_cast<Message *>(msg), req);
}

bool efa_engine_cancel(efa_engine_t *e, efa_engine_req_t *req) {
    return e->engine->cancel(req);
}

int efa_engine_cancel_send(efa_engine_t *e, efa_engine_req_t *req) {
    return e->engine->cancel_send(req);
}

} // extern "C"
