// What the two harnesses of the matching engine share (fuzz_engine_frame:
// frames by a ring; fuzz_engine_net: provider messages from another
// node): the engine's requests with their checks, and the input's steps
// that post a receive or cancel a request.
#pragma once

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "efa_engine.h"
#include "fuzz_input.hpp"
#include "engine.hpp"

namespace fuzz {

struct Req {
    efa_engine_req_t on{}; // first: the callback's pointer is the Req's
    std::vector<uint8_t> buf;
    void *dev = nullptr; // a send from the fake device's memory (fuzz_engine_frame)
    bool is_send = false;
    bool cancel_asked = false;
    int completions = 0;
};

// A request completes at most once; a completed receive never reports
// more bytes than its buffer took unless truncated; a send is reported
// cancelled only when it was asked to be.
inline void on_complete(efa_engine_req_t *r) {
    Req *q = reinterpret_cast<Req *>(r);
    FUZZ_CHECK(++q->completions == 1);
    if (q->is_send) {
        FUZZ_CHECK(r->err != -FI_ECANCELED || q->cancel_asked);
        return;
    }
    if (r->err == 0) {
        FUZZ_CHECK(r->msg_len <= r->buflen);
    } else if (r->err == -FI_ETRUNC) {
        FUZZ_CHECK(r->msg_len > r->buflen);
    }
}

// A small value most of the time (so that envelopes match and ids hit),
// any value when the top bit asks for it.
inline uint32_t small_or_raw(Input &in, uint32_t mod) {
    const uint32_t v = in.take<uint32_t>();
    return (v & 0x80000000u) ? v : v % mod;
}

// The engine posts a receive of the input's size and envelope (reqs is
// never reallocated: the engine keeps pointers into it).
inline void post_recv(Input &in, efa_engine_t *e, std::vector<Req> &reqs, size_t &nreq) {
    if (nreq == reqs.size()) {
        return;
    }
    Req &r = reqs[nreq++];
    r.buf.assign(in.take<uint8_t>() * 4u, 0);
    r.on.complete = on_complete;
    r.on.buf = r.buf.data();
    r.on.buflen = r.buf.size();
    const uint32_t cid = in.take<uint8_t>() % 4;
    const int32_t src = static_cast<int32_t>(in.take<int8_t>() % 4);
    const int32_t rtag = static_cast<int32_t>(in.take<int8_t>() % 8);
    const int rc = efa_engine_recv(e, cid, src < 0 ? EFA_ENGINE_ANY : src,
                                   rtag < -1 ? EFA_ENGINE_ANY : rtag, &r.on);
    FUZZ_CHECK(rc >= 0);
    if (rc == 1) {
        on_complete(&r.on); // complete inside the call: no callback follows
    }
}

// The engine cancels one of its requests that has not completed.
inline void cancel_one(Input &in, efa_engine_t *e, std::vector<Req> &reqs, size_t nreq) {
    if (nreq == 0) {
        return;
    }
    Req &r = reqs[in.take<uint8_t>() % nreq];
    if (r.completions) {
        return; // done: its memory is the caller's again
    }
    if (r.is_send) {
        r.cancel_asked = true;
        efa_engine_cancel_send(e, &r.on);
    } else {
        (void)efa_engine_cancel(e, &r.on);
    }
}

// One engine frame as the input describes it: any type, flags, envelope
// and sender (below nprocs + 1 unless raw), a request id from the input or
// one of reqs' (exact, or off by an index or a generation), a body, and
// any length up to the whole, shorter than a header included.
inline std::vector<uint8_t> make_frame(Input &in, const std::vector<Req> &reqs, size_t nreq,
                                       uint32_t nprocs) {
    using namespace efa::engine;
    FrameHdr h{};
    h.type = in.take<uint8_t>();
    h.flags = in.take<uint8_t>();
    h.cid = small_or_raw(in, 4);
    h.src = static_cast<int32_t>(small_or_raw(in, 4));
    h.tag = static_cast<int32_t>(small_or_raw(in, 8));
    h.sender = small_or_raw(in, nprocs + 1);
    h.id = in.take<uint64_t>();
    const uint8_t idsel = in.take<uint8_t>();
    if ((idsel & 0x80) && nreq) {
        h.id = reqs[idsel % nreq].on.local_id;
        if (idsel & 0x20) {
            h.id += 1; // the next index
        } else if (idsel & 0x40) {
            h.id += uint64_t{1} << 32; // a later generation
        }
    }
    std::vector<uint8_t> frame(sizeof(h));
    memcpy(frame.data(), &h, sizeof(h));
    if (h.type == kEagerShort) {
        frame.resize(kShortHdr);
    }
    const std::vector<uint8_t> body = in.bytes(255);
    frame.insert(frame.end(), body.begin(), body.end());
    frame.resize(std::min<size_t>(frame.size(),
                                  in.take<uint8_t>() % 2 ? frame.size() : in.take<uint8_t>() % 48));
    return frame;
}

inline bool verbose() {
    static const bool v = [] {
        const char *s = getenv("EFA_FUZZ_VERBOSE");
        return s && s[0] == '1';
    }();
    return v;
}

} // namespace fuzz
