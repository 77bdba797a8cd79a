// Provider messages of the matching engine's network side (own matching:
// common/engine/engine_net.cpp, Engine::on_net, net_frames and NetOrder):
// a process on another node sends them as untagged messages into the
// engine's channel of the core's receive pool.  The harness plays that
// process, hostile: over a whole core on the shm provider (opened once)
// it sends engine A, from context 1 into context 0's pool, messages with
// any header (magic, version, frame count, sender, sequence number) and
// any frames (each with any length word, any type, envelope, request id
// and body, or cut short), while A has receives posted, sends to the
// other node waiting for answers (synchronous, rendezvous, streaming) and
// cancels asked for.  A's own sends go back to A through the same pool,
// so A answers itself too.  A request id is taken from the input or from
// one of A's requests, so that the answers A waits for are reached.
//
// Job layout (vpids): 0 is A, which reaches itself at its own address
// (as a process on another node would be reached: A's sends to 0 come
// back to it); 1 and 2 are on another node, played by the input, and A's
// answers to them come back to A as well (as sender 0, in its stream to
// itself: duplicates and gaps A must survive); 3 has no address
// (unreachable); 4 and above are not in the job.
//
// Checks beyond "no crash, no sanitizer report": every message sent
// arrives at A's handler (counted as received or dropped, none lost); a
// request completes at most once; a completed receive never reports more
// bytes than its buffer took unless truncated; a send is reported
// cancelled only when it was asked to be.
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "efa_core.h"
#include "efa_core_msg.h"
#include "efa_engine.h"
#include "tests/unit/core_test_params.hpp"
#include "fuzz_input.hpp"
#include "fuzz_engine_req.hpp"
#include "engine.hpp"
#include "net_link.hpp"

using namespace efa::engine;

namespace {

using fuzz::on_complete;
using fuzz::Req;
using fuzz::small_or_raw;

constexpr uint32_t kNprocs = 4;

// One core for the whole run: opening one per input would measure the
// provider, not the engine.  Context 1 sends, context 0's pool receives.
struct Fabric {
    efa_core_t *core = nullptr;
    efa_peer_t *self = nullptr;
    Fabric() {
        efa_core_params_t p = core_test_params("shm");
        p.num_contexts = 2;
        int err = 0;
        core = efa_core_acquire(&p, &err);
        if (!core) {
            fprintf(stderr, "fuzz_engine_net: no core over the shm provider (%d)\n", err);
            abort();
        }
        const void *blob = nullptr;
        size_t len = 0;
        FUZZ_CHECK(0 == efa_core_local_blob(core, &blob, &len));
        self = efa_core_peer_get(core, blob, len, &err);
        FUZZ_CHECK(self != nullptr);
    }
};

Fabric &fabric() {
    static Fabric f; // left open at exit: the fuzzer ends the process
    return f;
}

int no_card(void *, uint32_t, efa_engine_card_t *) {
    return -FI_ENOENT;
}

int addr_of(void *, uint32_t vpid, fi_addr_t *addr, efa_ctx_t **ctx) {
    if (vpid > 2) {
        return -FI_ENOENT;
    }
    *addr = fabric().self->addr[0];
    *ctx = efa_core_ctx(fabric().core, 1);
    return 0;
}

// One frame as the input describes it, behind its length word.
void add_frame(fuzz::Input &in, const std::vector<Req> &reqs, size_t nreq,
               std::vector<uint8_t> &msg) {
    const std::vector<uint8_t> frame = fuzz::make_frame(in, reqs, nreq, kNprocs);
    // The length word: the frame's own most of the time, any when asked.
    const uint8_t lensel = in.take<uint8_t>();
    NetFrameHdr fh{static_cast<uint32_t>(frame.size()), 0};
    if (lensel & 0x80) {
        fh.len = in.take<uint32_t>();
    }
    const size_t at = msg.size();
    msg.resize(at + sizeof(fh));
    memcpy(msg.data() + at, &fh, sizeof(fh));
    msg.insert(msg.end(), frame.begin(), frame.end());
    msg.resize(at + net_span(frame.size()));
}

uint64_t seen(efa_engine_t *a) {
    efa_engine_stats_t st{};
    efa_engine_get_stats(a, &st);
    return st.net_received + st.net_grants_received + st.dropped;
}

void progress(efa_engine_t *a) {
    efa_core_progress(fabric().core);
    efa_engine_progress(a);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    Fabric &f = fabric();
    const std::string tag = "fuzznet." + std::to_string(getpid());
    efa_engine_params_t p{};
    p.inbox_dir = "/dev/shm";
    p.job_tag = tag.c_str();
    p.my_vpid = 0;
    p.nlocal = 1;
    p.nprocs = kNprocs;
    p.no_rings = true;
    p.peer_card = no_card;
    p.core = f.core;
    p.peer_addr = addr_of;
    const uint8_t mode = in.take<uint8_t>();
    p.net_eager = 256;
    p.net_window = 1 + mode % 4;
    p.net_coalesce_bytes = (mode & 0x10) ? 0 : 1024;
    p.net_coalesce_max = 8;
    p.net_debug_swap = mode & 0x20;
    int err = 0;
    efa_engine_t *a = efa_engine_create(&p, &err);
    FUZZ_CHECK(a != nullptr);

    const size_t max_msg = efa_core_msg_max_size(f.core);
    std::vector<uint8_t> wire(max_msg); // the message in flight, kept until it completed
    std::vector<Req> reqs(16);          // never reallocated: the engine keeps pointers
    size_t nreq = 0;
    std::vector<uint64_t> next_seq(kNprocs + 1, 0);
    for (int step = 0; step < 24 && in.left() >= 2; ++step) {
        const uint8_t op = in.take<uint8_t>();
        switch (op % 6) {
        case 0: // A posts a receive
            fuzz::post_recv(in, a, reqs, nreq);
            break;
        case 1: { // A sends to itself, to the other node, or to a process it cannot reach
            if (nreq == reqs.size()) {
                break;
            }
            Req &r = reqs[nreq++];
            r.is_send = true;
            const uint32_t peer = in.take<uint8_t>() % 5; // 3: no address, 4: not in the job
            const bool sync = in.take<uint8_t>() & 1;
            // Eager (up to net_eager) or rendezvous, streamed.
            r.buf.assign(in.take<uint8_t>() * 4u, 0x3c);
            r.on.complete = on_complete;
            const int rc =
                efa_engine_send(a, peer, in.take<uint8_t>() % 4, 0, in.take<int8_t>() % 8,
                                r.buf.data(), r.buf.size(), sync, &r.on);
            if (rc == 1) {
                on_complete(&r.on);
            } else if (rc < 0) {
                FUZZ_CHECK(peer > 2); // only an unreachable peer refuses
                r.completions = 1;    // never started: no callback
            }
            break;
        }
        case 2: // A cancels one of its requests
            fuzz::cancel_one(in, a, reqs, nreq);
            break;
        default: { // a provider message from "the other node"
            NetHdr h{kNetMagic, kNetVersion, 0, 0, 0, 0};
            const uint8_t hsel = in.take<uint8_t>();
            h.sender = small_or_raw(in, kNprocs + 1);
            const uint32_t s = h.sender <= kNprocs ? h.sender : kNprocs;
            if (hsel & 0x01) {
                h.seq = in.take<uint64_t>(); // any number: early, late, absurd
            } else if (hsel & 0x02) {
                h.seq = next_seq[s] + 1 + (hsel >> 4) % 4; // a little early
            } else {
                h.seq = next_seq[s]++;
            }
            if (hsel & 0x80) { // any grant, sometimes as a grant alone (kNoSeq)
                h.grant = in.take<uint64_t>();
                h.seq = (h.grant & 1) ? kNoSeq : h.seq;
            }
            if (hsel & 0x04) {
                h.magic = in.take<uint8_t>() | 0x80; // still the engine's channel
                h.version = in.take<uint8_t>();
            }
            std::vector<uint8_t> msg(sizeof(h));
            const uint8_t nframes = 1 + in.take<uint8_t>() % 4;
            for (uint8_t i = 0; i < nframes; ++i) {
                add_frame(in, reqs, nreq, msg);
            }
            h.frames = (hsel & 0x08) ? in.take<uint16_t>() : nframes;
            memcpy(msg.data(), &h, sizeof(h));
            msg.resize(std::min(msg.size(), (hsel & 0x40) ? size_t{in.take<uint8_t>()} : max_msg));
            if (msg.empty()) {
                msg.push_back(h.magic); // a zero-byte message is the core's probe
            }
            // Sent as the other node would: through the provider, into
            // context 0's pool, and progressed until A's handler had it.
            memcpy(wire.data(), msg.data(), msg.size());
            struct SendOp {
                efa_op_t op; // first: the completion's pointer is the SendOp's
                bool done;
            } so{};
            so.op.complete = [](efa_op_t *o, const efa_cqe_t *) {
                reinterpret_cast<SendOp *>(o)->done = true;
            };
            const bool &done = so.done;
            const uint64_t before = seen(a);
            int rc;
            int tries = 0;
            while (-FI_EAGAIN ==
                       (rc = efa_ctx_try_send(efa_core_ctx(f.core, 1), wire.data(), msg.size(),
                                              nullptr, f.self->addr[0], &so.op)) &&
                   ++tries < 100000) {
                progress(a);
            }
            FUZZ_CHECK(0 == rc);
            for (int i = 0; i < 1000000 && (!done || seen(a) == before); ++i) {
                progress(a);
            }
            FUZZ_CHECK(done && seen(a) > before); // none lost on the way
            break;
        }
        }
        progress(a);
    }
    // What A sent itself arrives before its receives are withdrawn: the
    // same input does the same thing on every run.
    uint64_t last = seen(a);
    for (int i = 0, still = 0; i < 100000 && still < 500; ++i, ++still) {
        progress(a);
        if (seen(a) != last) {
            last = seen(a);
            still = 0;
        }
    }
    for (size_t i = 0; i < nreq; ++i) {
        Req &r = reqs[i];
        if (!r.is_send && !r.completions) {
            (void)efa_engine_cancel(a, &r.on);
        }
    }
    for (int i = 0; i < 64; ++i) {
        progress(a);
    }
    if (fuzz::verbose()) { // what an input reached
        efa_engine_stats_t st{};
        efa_engine_get_stats(a, &st);
        fprintf(stderr,
                "A: net sent %llu received %llu reordered %llu dropped %llu; eager %llu "
                "rendezvous %llu streamed %llu unexpected %llu\n",
                (unsigned long long)st.net_sent, (unsigned long long)st.net_received,
                (unsigned long long)st.net_reordered, (unsigned long long)st.dropped,
                (unsigned long long)st.eager, (unsigned long long)st.rendezvous,
                (unsigned long long)st.streamed, (unsigned long long)st.unexpected);
        for (size_t i = 0; i < nreq; ++i) {
            fprintf(stderr, "  req %zu %s: %s err %d len %zu\n", i,
                    reqs[i].is_send ? "send" : "recv", reqs[i].completions ? "complete" : "pending",
                    reqs[i].on.err, reqs[i].on.msg_len);
        }
    }
    efa_engine_destroy(a);
    // Messages A sent that its handler had not taken yet arrive with no
    // engine listening: the core drops them.
    for (int i = 0; i < 64; ++i) {
        efa_core_progress(f.core);
    }
    return 0;
}
