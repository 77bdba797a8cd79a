// Frames of the matching engine (common/engine/engine_deliver.cpp, Engine::deliver):
// a peer of the node writes them into its ring of this process's inbox.
// The harness plays that peer, hostile: it attaches to ring 1 (local rank
// 1, engine B's) or ring 2 (local rank 2, a process with no inbox) of
// engine A's inbox and writes frames of every type (eager, short eager,
// RTS, ACK, FIN, CTS, DATA, cancel and cancelled, unknown ones) with any
// sender id, request id, envelope, length and body, while A has receives
// posted, sends waiting for answers (synchronous, rendezvous, streaming)
// and cancels asked for, then lets A progress.  A request id is taken
// from the input or from one of A's requests (exact, or off by an index
// or a generation), so that the answers A waits for are reached too.
//
// Job layout (vpids): 0 is A (local rank 0), 1 is B (local rank 1, only
// there so that A's answers have an inbox to go to; progressed only at the
// end), 2 has local rank 2 but no inbox, 3 publishes no card, 4 a card
// with a local rank outside the node; 5 and above are not in the job.
//
// Device memory: the fake device (efa_device.h) is installed, and A's
// sends are from its memory when the input says so (a rendezvous that
// offers an IPC handle); an RTS frame may claim device memory
// (kFrameDevice) with any handle, offset and length.
//
// Checks beyond "no crash, no sanitizer report": a request completes at
// most once; a completed receive never reports more bytes than its
// buffer took unless truncated; a send is reported cancelled only when
// it was asked to be.
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <array>
#include <string>
#include <vector>

#include "efa_device.h"
#include "efa_engine.h"
#include "fuzz_input.hpp"
#include "fuzz_engine_req.hpp"
#include "engine.hpp"

using namespace efa::engine;

namespace {

using fuzz::on_complete;
using fuzz::Req;
using fuzz::small_or_raw;

constexpr uint32_t kNprocs = 5;
constexpr uint32_t kNlocal = 3;

struct Job {
    std::string tag;
    efa_engine_t *a = nullptr;
    efa_engine_t *b = nullptr;
};

// The modex's part (see the job layout above).
int card_of(void *arg, uint32_t vpid, efa_engine_card_t *card) {
    const Job *j = static_cast<const Job *>(arg);
    switch (vpid) {
    case 0:
    case 1:
        efa_engine_my_card(0 == vpid ? j->a : j->b, card);
        return 0;
    case 2:
        card->cookie = 0x1234;
        card->local_rank = 2;
        return 0;
    case 4:
        card->cookie = 0x1234;
        card->local_rank = 7;
        return 0;
    default:
        return -FI_ENOENT;
    }
}

efa_engine_t *make(Job &j, uint32_t vpid, uint32_t slots, bool single_copy) {
    efa_engine_params_t p{};
    p.inbox_dir = "/dev/shm";
    p.job_tag = j.tag.c_str();
    p.my_vpid = vpid;
    p.local_rank = vpid;
    p.nlocal = kNlocal;
    p.nprocs = kNprocs;
    p.slots = slots;
    p.slot_size = 256;
    p.single_copy = single_copy;
    p.peer_card = card_of;
    p.peer_card_arg = &j;
    int err = 0;
    efa_engine_t *e = efa_engine_create(&p, &err);
    FUZZ_CHECK(e != nullptr);
    return e;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    efa_device_install(efa_fake_device_ops());
    Job job;
    job.tag = "fuzz." + std::to_string(getpid());
    const bool single_copy = in.take<uint8_t>() & 1;
    job.a = make(job, 0, 64, single_copy);
    // B's rings are deep: B is not progressed until the end, and A's
    // answers and streamed DATA must not be left waiting for room.
    job.b = make(job, 1, 1024, false);
    int err = 0;
    std::array<std::unique_ptr<efa::shm::Outbox>, kNlocal> out;
    efa_engine_card_t card{};
    efa_engine_my_card(job.a, &card);
    for (uint32_t r = 1; r < kNlocal; ++r) {
        out[r] = efa::shm::Outbox::attach(efa_engine_inbox_path(job.a), r, card.cookie, err);
        FUZZ_CHECK(out[r] != nullptr);
    }

    std::vector<Req> reqs(16); // never reallocated: the engine keeps pointers
    size_t nreq = 0;
    for (int step = 0; step < 32 && in.left() >= 2; ++step) {
        const uint8_t op = in.take<uint8_t>();
        switch (op % 6) {
        case 0: // A posts a receive
            fuzz::post_recv(in, job.a, reqs, nreq);
            break;
        case 1: { // A sends (to B mostly; to itself or a process it cannot reach)
            if (nreq == reqs.size()) {
                break;
            }
            Req &r = reqs[nreq++];
            r.is_send = true;
            const uint8_t to = in.take<uint8_t>();
            const uint32_t peer = to < 0xc0 ? 1 : to % 8;
            const uint8_t mode = in.take<uint8_t>();
            const bool sync = mode & 1;
            // Eager (up to 216 bytes in a 256-byte slot) or rendezvous;
            // from device memory (mode 2): always a rendezvous.
            r.buf.assign(in.take<uint8_t>() * 4u, 0x3c);
            r.on.complete = on_complete;
            void *buf = r.buf.data();
            if (mode & 2) {
                r.dev = efa_fake_device_alloc(r.buf.size());
                FUZZ_CHECK(r.dev != nullptr);
                buf = r.dev;
            }
            const int rc = (r.dev ? efa_engine_send_device : efa_engine_send)(
                job.a, peer, in.take<uint8_t>() % 4, 0, in.take<int8_t>() % 8, buf, r.buf.size(),
                sync, &r.on);
            if (rc == 1) {
                on_complete(&r.on);
            } else if (rc < 0) {
                FUZZ_CHECK(peer > 1); // only an unreachable peer refuses
                r.completions = 1;    // never started: no callback
            }
            break;
        }
        case 2: // A cancels one of its requests
            fuzz::cancel_one(in, job.a, reqs, nreq);
            break;
        default: { // a frame from the peer on ring 1 or 2
            const std::vector<uint8_t> frame = fuzz::make_frame(in, reqs, nreq, kNprocs);
            const int rc = out[(op & 0x80) ? 2 : 1]->send(frame.data(), frame.size());
            FUZZ_CHECK(rc == 0 || rc == -EAGAIN || rc == -EMSGSIZE);
            break;
        }
        }
        efa_engine_progress(job.a);
    }
    for (size_t i = 0; i < nreq; ++i) {
        Req &r = reqs[i];
        if (!r.is_send && !r.completions) {
            (void)efa_engine_cancel(job.a, &r.on);
        }
    }
    efa_engine_progress(job.a);
    if (fuzz::verbose()) { // what an input reached (make-seeds.py's seeds are checked so)
        efa_engine_stats_t st{};
        efa_engine_get_stats(job.a, &st);
        fprintf(stderr,
                "A: frames sent %llu received %llu dropped %llu; eager %llu rendezvous %llu "
                "streamed %llu unexpected %llu\n",
                (unsigned long long)st.frames_sent, (unsigned long long)st.frames_received,
                (unsigned long long)st.dropped, (unsigned long long)st.eager,
                (unsigned long long)st.rendezvous, (unsigned long long)st.streamed,
                (unsigned long long)st.unexpected);
        for (size_t i = 0; i < nreq; ++i) {
            fprintf(stderr, "  req %zu %s: %s err %d len %zu\n", i,
                    reqs[i].is_send ? "send" : "recv", reqs[i].completions ? "complete" : "pending",
                    reqs[i].on.err, reqs[i].on.msg_len);
        }
    }
    // B takes what A wrote (so that A's destroy finds no answer waiting
    // for room), then A once more.
    efa_engine_progress(job.b);
    efa_engine_progress(job.a);
    for (auto &o : out) {
        o.reset();
    }
    efa_engine_destroy(job.a);
    efa_engine_destroy(job.b);
    FUZZ_CHECK(0 == efa_fake_device_imported()); // the engines closed what they imported
    for (size_t i = 0; i < nreq; ++i) {
        efa_fake_device_free(reqs[i].dev);
    }
    efa_device_install(nullptr);
    return 0;
}
