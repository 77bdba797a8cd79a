// The matching engine (efa_engine.h) against frames another process of the
// node corrupted or forged: a third local rank with no engine writes raw
// frames into an engine's inbox, and each bad one is dropped and counted
// while the real senders are still heard.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "efa_cma.h"

#include "efa_engine.h"
#include "efa_shm_ring.h"
#include "engine.hpp"
#include "engine_pair.hpp"
#include "engine_test_req.hpp"

namespace {

using efa::engine::FrameHdr;
using engine_test::pattern;
using engine_test::Req;

// A third local rank (no engine) that writes raw frames into its ring of
// an engine's inbox, as a corrupted or hostile process of the node would.
class EngineCorrupt : public engine_test::EnginePair {
  protected:
    efa_shm_outbox_t *forger = nullptr;

    // The forger writes into b's inbox, or a's.
    void open_with_forger(bool into_b) {
        nlocal = 3;
        open();
        attach_forger(into_b ? b : a, 2);
    }
    // The forger writes into ring 'ring' of victim's inbox: that of a real
    // peer (ring 0: a's), as a process that can write the whole file could,
    // which passes the ring check.  The peer must not write that ring of
    // the victim's inbox from then on (one producer per ring).
    void attach_forger(efa_engine_t *victim, uint32_t ring) {
        efa_engine_card_t card{};
        efa_engine_my_card(victim, &card);
        int err = 0;
        forger = efa_shm_outbox_attach(efa_engine_inbox_path(victim), ring, card.cookie, &err);
        ASSERT_NE(nullptr, forger) << err;
    }
    void TearDown() override {
        if (forger) {
            efa_shm_outbox_detach(forger);
        }
        EnginePair::TearDown();
    }
    void forge(uint8_t type, uint32_t sender, uint64_t id, size_t body = 0, uint8_t flags = 0,
               int32_t tag = 9) {
        std::vector<uint8_t> f(sizeof(FrameHdr) + body, 0x5a);
        FrameHdr h{};
        h.type = type;
        h.flags = flags;
        h.cid = 3;
        h.tag = tag;
        h.sender = sender;
        h.id = id;
        memcpy(f.data(), &h, sizeof(h));
        ASSERT_EQ(0, efa_shm_outbox_send(forger, f.data(), f.size()));
    }
    void forge_rts(uint32_t sender, uint64_t id, const efa::engine::RtsBody &body, int32_t tag) {
        std::vector<uint8_t> f(sizeof(FrameHdr) + sizeof(body), 0);
        FrameHdr h{};
        h.type = efa::engine::kRts;
        h.cid = 3;
        h.tag = tag;
        h.sender = sender;
        h.id = id;
        memcpy(f.data(), &h, sizeof(h));
        memcpy(f.data() + sizeof(h), &body, sizeof(body));
        ASSERT_EQ(0, efa_shm_outbox_send(forger, f.data(), f.size()));
    }
    static uint64_t dropped(efa_engine_t *e) {
        efa_engine_stats_t st{};
        efa_engine_get_stats(e, &st);
        return st.dropped;
    }
};

// Answers naming requests that do not exist, senders outside the job or
// not writing their own ring, unknown types, short frames: each dropped
// and counted, nothing followed (an id used to be dereferenced as a
// pointer, a sender id used to size a table), and the engine goes on.
TEST_F(EngineCorrupt, BadFramesAreDroppedAndTheEngineGoesOn) {
    open_with_forger(true);
    std::vector<uint8_t> got(64, 0);
    Req r;
    ASSERT_EQ(0, post(b, r, got.data(), got.size(), 3, EFA_ENGINE_ANY, 9));
    forge(efa::engine::kAck, 2, 0xdeadbeef00000010ull);                     // no such request
    forge(efa::engine::kFin, 0, 0);                                         // id 0 and not ring 0
    forge(efa::engine::kCts, 2, 0x10, sizeof(efa::engine::CtsBody));        // no such request
    forge(efa::engine::kData, 2, 0x7fff0001ull, 64);                        // no such request
    forge(efa::engine::kRts, 0x7fffffffu, 1, sizeof(efa::engine::RtsBody)); // not of the job
    forge(efa::engine::kEager, 0, 1, 8, 1); // synchronous, names vpid 0, but in ring 2
    forge(efa::engine::kRts, 2, 1, 4);      // body shorter than an RTS
    forge(0x77, 2, 1);                      // no such type
    ASSERT_TRUE(until([&] { return dropped(b) == 8; })) << dropped(b); // (8 slots)
    const uint8_t tiny[4] = {1, 2, 3, 4};
    ASSERT_EQ(0, efa_shm_outbox_send(forger, tiny, sizeof(tiny))); // shorter than a header
    ASSERT_TRUE(until([&] { return dropped(b) == 9; })) << dropped(b);
    EXPECT_EQ(0, r.completions) << "a dropped frame matched the receive";
    // The real sender is still heard.
    Req s;
    const auto data = pattern(40, 9);
    EXPECT_GE(send(a, s, 1, data, 9, true), 0);
    ASSERT_TRUE(until([&] { return r.completions == 1 && s.completions == 1; }));
    EXPECT_EQ(0, memcmp(got.data(), data.data(), data.size()));
    EXPECT_EQ(9u, dropped(b));
}

// An answer with the right id but from another ring than the peer's (or
// an id of a request finished since) completes nothing.
TEST_F(EngineCorrupt, ForgedAnswerToARealRequestIsDropped) {
    open_with_forger(false);
    Req s;
    const auto data = pattern(40, 4);
    ASSERT_EQ(0, send(a, s, 1, data, 9, true)); // synchronous: waits for b's ACK
    ASSERT_NE(0u, s.on.local_id);
    forge(efa::engine::kAck, 1, s.on.local_id); // b's name, but ring 2
    ASSERT_TRUE(until([&] { return dropped(a) == 1; }));
    EXPECT_EQ(0, s.completions) << "a forged ACK completed a synchronous send";
    std::vector<uint8_t> got(64, 0);
    Req r;
    ASSERT_GE(post(b, r, got.data(), got.size(), 3, 0, 9), 0); // complete now or later
    ASSERT_TRUE(until([&] { return s.completions == 1; }));
    EXPECT_EQ(0, memcmp(got.data(), data.data(), data.size()));
    const uint64_t stale = s.on.local_id; // answered: no longer in the table
    forge(efa::engine::kAck, 1, stale);
    ASSERT_TRUE(until([&] { return dropped(a) == 2; }));
    EXPECT_EQ(1, s.completions);
}

// A cancel frame with id 0 (from a real peer's ring: it passes the ring
// check) withdraws nothing: id 0 is what every standard-mode eager message
// keeps, whoever sent it (its frame names neither sender nor request), so
// it used to withdraw b's short message waiting unexpected at a.  The
// frame is dropped and counted; the message stays for its receive.
TEST_F(EngineCorrupt, CancelNamingNoRequestWithdrawsNothing) {
    open();
    Req s;
    const auto data = pattern(8, 3);
    ASSERT_GE(send(b, s, 0, data, 9, false, 3, 1), 0); // short eager: no sender, id 0
    ASSERT_TRUE(until([&] {
        efa_engine_stats_t st{};
        efa_engine_get_stats(a, &st);
        return 1 == st.unexpected;
    }));
    attach_forger(a, 0); // a's own ring of its inbox: vpid 0's (a never sends to itself here)
    forge(efa::engine::kCancel, 0, 0);
    ASSERT_TRUE(until([&] { return dropped(a) >= 1; }));
    std::vector<uint8_t> got(8, 0);
    Req r;
    const int rc = post(a, r, got.data(), got.size(), 3, 1, 9); // 1: complete at once
    ASSERT_GE(rc, 0);
    EXPECT_TRUE(until([&] { return 1 == rc || 1 == r.completions; }))
        << "a cancel with id 0 withdrew another sender's short message";
    EXPECT_EQ(data, got);
    EXPECT_EQ(1u, dropped(a));
    if (1 != rc && 0 == r.completions) {
        EXPECT_TRUE(efa_engine_cancel(a, &r.on));
    }
}

// Single copy reads the pid the peer's card named, checked once by the
// card's cookie; a later RTS from that peer's ring naming another pid (a
// child holding other bytes at the same address) is dropped and counted,
// never read (it used to be: the pid was checked once, then each RTS's
// pid was read).
TEST_F(EngineCorrupt, RtsNamingAnotherPidIsNotRead) {
    open();
    {
        Req s, r;
        const auto data = pattern(300000, 5);
        std::vector<uint8_t> got(data.size(), 0);
        ASSERT_EQ(0, send(a, s, 1, data, 2));
        ASSERT_GE(post(b, r, got.data(), got.size(), 3, 0, 2), 0);
        ASSERT_TRUE(until([&] { return r.completions == 1 && s.completions == 1; }));
        ASSERT_EQ(data, got);
        efa_engine_stats_t st{};
        efa_engine_get_stats(b, &st);
        if (1 != st.single_copy) {
            GTEST_SKIP() << "no single copy here (" << st.single_copy << ")";
        }
    }
    // A child with other bytes than ours at the same address.
    const size_t len = 4096;
    std::vector<uint8_t> secret(len, 0xa5);
    int go[2];
    ASSERT_EQ(0, pipe(go));
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (0 == child) {
        char c;
        (void)!read(go[0], &c, 1);
        _exit(0);
    }
    memset(secret.data(), 0, len);
    uint8_t probe = 0;
    const int readable = efa_cma_copy(static_cast<uint32_t>(child), false, &probe,
                                      reinterpret_cast<uintptr_t>(secret.data()), 1, nullptr);
    std::vector<uint8_t> got(len, 0x11);
    Req r;
    if (0 == readable && 0xa5 == probe) { // else the forged read could not succeed anyway
        ASSERT_EQ(0, post(b, r, got.data(), got.size(), 3, 0, 7));
        attach_forger(b, 0); // a's ring of b's inbox; a writes nothing more into it
        efa::engine::RtsBody body{};
        body.len = len;
        body.addr = reinterpret_cast<uintptr_t>(secret.data());
        body.pid = static_cast<uint32_t>(child);
        body.cookie = efa_cma_cookie(&body.cookie_addr); // the child's too (a fork's copy)
        forge_rts(0, 0x100000077ull, body, 7);
        ASSERT_TRUE(until([&] { return dropped(b) >= 1 || r.completions == 1; }));
    }
    (void)!write(go[1], "x", 1);
    close(go[0]);
    close(go[1]);
    int status = 0;
    waitpid(child, &status, 0);
    if (0 != readable || 0xa5 != probe) {
        GTEST_SKIP() << "cannot read a child process here (" << readable << ")";
    }
    EXPECT_EQ(0, r.completions) << "an RTS naming another pid matched the receive";
    EXPECT_EQ(std::vector<uint8_t>(len, 0x11), got) << "the other process's bytes were read";
    EXPECT_EQ(1u, dropped(b));
    if (0 == r.completions) {
        EXPECT_TRUE(efa_engine_cancel(b, &r.on));
    }
}

} // namespace
