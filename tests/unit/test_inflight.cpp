// The table of operations in flight answered by id, with claims
// (efa_inflight.h; btl_efa's emulated one-sided requests): an answer that
// holds an operation is never raced by its expiry, and each operation is
// completed by exactly one caller, whatever the threads do.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "efa_inflight.h"

namespace {

struct Table {
    efa_inflight_t *t = efa_inflight_create();
    ~Table() { efa_inflight_destroy(t); }
};

// The interleaving of the defect: an answer claims the operation, the
// expiry runs (at a time far past the limit) before the answer writes;
// the expiry must leave it, and the answer's release completes it.
TEST(Inflight, ExpiryLeavesAnOperationAnAnswerHolds) {
    Table tb;
    int op = 0;
    ASSERT_EQ(0, efa_inflight_add(tb.t, 7, &op, 0.0));
    EXPECT_FALSE(efa_inflight_release(tb.t, 7, false)); // the initiator issued its chunks
    ASSERT_EQ(&op, efa_inflight_claim(tb.t, 7, 0.0));   // an answer arrives
    void *out[4];
    EXPECT_EQ(0u, efa_inflight_expire(tb.t, 1000.0, 1.0, out, 4)) << "expired while claimed";
    op = 1;                                             // the answer writes
    EXPECT_TRUE(efa_inflight_release(tb.t, 7, true));   // ... and completes it
    EXPECT_EQ(nullptr, efa_inflight_claim(tb.t, 7, 0)); // a late answer finds nothing
    EXPECT_EQ(0u, efa_inflight_expire(tb.t, 1000.0, 1.0, out, 4));
    EXPECT_EQ(0u, efa_inflight_size(tb.t));
}

// Idle and held by nobody: the expiry takes it, once, and a late answer
// or send failure finds nothing.
TEST(Inflight, ExpiryTakesAnIdleOperationOnce) {
    Table tb;
    int a = 0, b = 0;
    ASSERT_EQ(0, efa_inflight_add(tb.t, 1, &a, 0.0));
    ASSERT_EQ(0, efa_inflight_add(tb.t, 2, &b, 0.0));
    EXPECT_EQ(-EEXIST, efa_inflight_add(tb.t, 2, &b, 0.0));
    EXPECT_FALSE(efa_inflight_release(tb.t, 1, false)); // 2 stays its initiator's
    EXPECT_TRUE(efa_inflight_live(tb.t, 1));
    void *out[4];
    ASSERT_EQ(1u, efa_inflight_expire(tb.t, 3.0, 1.0, out, 4));
    EXPECT_EQ(&a, out[0]);
    // Its chunks still queued for credits are not sent (btl_efa_send.c).
    EXPECT_FALSE(efa_inflight_live(tb.t, 1));
    EXPECT_TRUE(efa_inflight_live(tb.t, 2));
    EXPECT_FALSE(efa_inflight_live(tb.t, 7)); // never in flight
    EXPECT_FALSE(efa_inflight_live(nullptr, 2));
    EXPECT_EQ(nullptr, efa_inflight_claim(tb.t, 1, 3.0)); // a late answer
    EXPECT_FALSE(efa_inflight_release(tb.t, 1, true)) << "an unclaimed release completed";
    EXPECT_EQ(0u, efa_inflight_expire(tb.t, 3.0, 1.0, out, 4));
    // A claim resets the clock: answered at 9, not idle at 9.5.
    ASSERT_EQ(&b, efa_inflight_claim(tb.t, 2, 9.0));
    EXPECT_FALSE(efa_inflight_release(tb.t, 2, false));
    EXPECT_FALSE(efa_inflight_release(tb.t, 2, false)); // the initiator's
    EXPECT_EQ(0u, efa_inflight_expire(tb.t, 9.5, 1.0, out, 4));
    ASSERT_EQ(1u, efa_inflight_expire(tb.t, 10.5, 1.0, out, 4));
    EXPECT_EQ(&b, out[0]);
    EXPECT_EQ(0u, efa_inflight_size(tb.t));
    EXPECT_EQ(0u, efa_inflight_expire(nullptr, 0, 0, out, 4)); // no table: nothing
}

// Two answers hold it (the last chunk's and a stray duplicate): the one
// that finds it over does not complete it while the other still writes;
// the last release does, and nobody can claim it after it is over.
// An answer not yet judged (another process's naming the id, a second
// one) claims without touching the clock: only one judged its target's
// (efa_inflight_touch) keeps a silent target's operation from expiring.
TEST(Inflight, AnUnjudgedAnswerLeavesTheIdleClock) {
    Table tb;
    int op = 0;
    ASSERT_EQ(0, efa_inflight_add(tb.t, 5, &op, 0.0));
    EXPECT_FALSE(efa_inflight_release(tb.t, 5, false)); // the initiator's
    for (int i = 0; i < 3; ++i) {                       // forged answers, dropped
        ASSERT_EQ(&op, efa_inflight_claim(tb.t, 5, -1.0));
        EXPECT_FALSE(efa_inflight_release(tb.t, 5, false));
    }
    void *out[4];
    ASSERT_EQ(1u, efa_inflight_expire(tb.t, 2.0, 1.0, out, 4)) << "kept alive by dropped answers";
    EXPECT_EQ(&op, out[0]);
    ASSERT_EQ(0, efa_inflight_add(tb.t, 6, &op, 0.0));
    EXPECT_FALSE(efa_inflight_release(tb.t, 6, false));
    ASSERT_EQ(&op, efa_inflight_claim(tb.t, 6, -1.0));
    efa_inflight_touch(tb.t, 6, 1.5); // judged its target's at 1.5
    EXPECT_FALSE(efa_inflight_release(tb.t, 6, false));
    EXPECT_EQ(0u, efa_inflight_expire(tb.t, 2.0, 1.0, out, 4)) << "a judged answer not counted";
    ASSERT_EQ(1u, efa_inflight_expire(tb.t, 2.6, 1.0, out, 4));
    efa_inflight_touch(tb.t, 6, 9.0); // gone: nothing
    efa_inflight_touch(nullptr, 6, 9.0);
    EXPECT_EQ(0u, efa_inflight_size(tb.t));
}

// This process was away from progress for 100 s (a compute phase between
// a put and its flush): that time is no silence of the target's.
TEST(Inflight, TimeAwayFromProgressDoesNotExpire) {
    Table tb;
    int op = 0;
    ASSERT_EQ(0, efa_inflight_add(tb.t, 3, &op, 0.0));
    EXPECT_FALSE(efa_inflight_release(tb.t, 3, false));
    efa_inflight_pause(tb.t, 100.0, 110.0); // back at 110 s after 100 s away
    void *out[4];
    EXPECT_EQ(0u, efa_inflight_expire(tb.t, 110.0, 50.0, out, 4)) << "expired for time away";
    EXPECT_EQ(0u, efa_inflight_expire(tb.t, 150.0, 50.0, out, 4));
    ASSERT_EQ(1u, efa_inflight_expire(tb.t, 150.5, 50.0, out, 4)); // 50 s watched, and more
    EXPECT_EQ(&op, out[0]);
}

TEST(Inflight, TheLastClaimCompletes) {
    Table tb;
    int op = 0;
    ASSERT_EQ(0, efa_inflight_add(tb.t, 3, &op, 0.0));
    ASSERT_EQ(&op, efa_inflight_claim(tb.t, 3, 0.0));
    EXPECT_FALSE(efa_inflight_release(tb.t, 3, true)) << "completed under the initiator's claim";
    EXPECT_EQ(nullptr, efa_inflight_claim(tb.t, 3, 0.0)) << "claimed after it was over";
    void *out[1];
    EXPECT_EQ(0u, efa_inflight_expire(tb.t, 100.0, 0.0, out, 1)) << "an operation over expired";
    EXPECT_TRUE(efa_inflight_release(tb.t, 3, false));
    EXPECT_EQ(0u, efa_inflight_size(tb.t));
}

// The race itself, between threads: answers (claim, write into the
// operation, release as over) against an expiry with a limit of 0 that
// runs all the time.  Every operation is completed exactly once, by one
// side or the other, and one completed by its answer was written first;
// completion frees it, so a write after it is a use after free (which the
// sanitizer tier reports) and a second completion a double free.
TEST(Inflight, AnswersRacingTheExpiryCompleteEachOnce) {
    Table tb;
    constexpr int kOps = 20000;
    struct Op {
        std::atomic<int> completed{0};
        std::atomic<int> written{0};
        bool by_answer = false;
    };
    std::vector<Op> ops(kOps);
    std::atomic<int> doubles{0}, unwritten{0};
    auto complete = [&](Op *op, bool by_answer) {
        if (op->completed.fetch_add(1) != 0) {
            doubles.fetch_add(1);
        }
        op->by_answer = by_answer;
        if (by_answer && 0 == op->written.load()) {
            unwritten.fetch_add(1);
        }
    };
    for (int i = 0; i < kOps; ++i) {
        ASSERT_EQ(0, efa_inflight_add(tb.t, 100 + i, &ops[i], 0.0));
        EXPECT_FALSE(efa_inflight_release(tb.t, 100 + i, false));
    }
    std::atomic<bool> stop{false};
    std::thread expiry([&] {
        void *out[16];
        while (!stop.load()) {
            const size_t n = efa_inflight_expire(tb.t, 1.0, 0.0, out, 16);
            for (size_t k = 0; k < n; ++k) {
                complete(static_cast<Op *>(out[k]), false);
            }
        }
    });
    for (int i = 0; i < kOps; ++i) {
        auto *op = static_cast<Op *>(efa_inflight_claim(tb.t, 100 + i, 0.0));
        if (nullptr == op) {
            continue; // expired first: the answer is dropped
        }
        if (op->completed.load() != 0) {
            doubles.fetch_add(1); // claimed what was already completed
        }
        op->written.store(1);
        if (efa_inflight_release(tb.t, 100 + i, true)) {
            complete(op, true);
        }
    }
    stop.store(true);
    expiry.join();
    void *out[16];
    while (size_t n = efa_inflight_expire(tb.t, 1.0, 0.0, out, 16)) {
        for (size_t k = 0; k < n; ++k) {
            complete(static_cast<Op *>(out[k]), false);
        }
    }
    int answered = 0;
    for (const Op &op : ops) {
        EXPECT_EQ(1, op.completed.load());
        answered += op.by_answer;
    }
    EXPECT_EQ(0, doubles.load());
    EXPECT_EQ(0, unwritten.load());
    EXPECT_EQ(0u, efa_inflight_size(tb.t));
    RecordProperty("completed_by_answer", answered);
}

// The table is an open-addressed array probed from the id's low bits:
// ids sharing a home slot, runs that wrap past the array's end, entries
// removed from the middle of a run (by release and by expiry) and growth
// must each leave every other operation findable, against a plain map
// driven by the same random steps.
TEST(Inflight, CollidingIdsStayFindableThroughRemovalsAndGrowth) {
    Table tb;
    ASSERT_NE(nullptr, tb.t);
    std::map<uint64_t, int> model; // id -> claims (all added at t=0)
    std::vector<int> storage(4096);
    std::mt19937_64 rng(12345);
    // Ids from a few home slots (multiples of 64 and 1024 apart, and next
    // to the last slot of a 64-entry array) so that runs collide and wrap.
    auto pick_id = [&rng]() -> uint64_t {
        static const uint64_t homes[] = {0, 1, 62, 63};
        return homes[rng() % 4] + 64 * (rng() % 48) + ((rng() % 8) ? 0 : 1024 * (rng() % 4));
    };
    for (int step = 0; step < 20000; ++step) {
        const uint64_t id = pick_id();
        auto it = model.find(id);
        switch (rng() % 4) {
        case 0: // add
            if (model.size() < 600) {
                const int rc = efa_inflight_add(tb.t, id, &storage[id % storage.size()], 0.0);
                if (model.end() == it) {
                    ASSERT_EQ(0, rc) << "step " << step;
                    model[id] = 1;
                } else {
                    ASSERT_EQ(-EEXIST, rc) << "step " << step;
                }
            }
            break;
        case 1: // claim
            if (model.end() == it) {
                ASSERT_EQ(nullptr, efa_inflight_claim(tb.t, id, 0.0)) << "step " << step;
            } else {
                ASSERT_EQ(&storage[id % storage.size()], efa_inflight_claim(tb.t, id, 0.0))
                    << "step " << step;
                ++it->second;
            }
            break;
        case 2: // release, over: the last claim completes and removes it
            if (model.end() == it || 0 == it->second) { // not claimed: nothing happens
                ASSERT_FALSE(efa_inflight_release(tb.t, id, true)) << "step " << step;
            } else {
                const bool last = 1 == it->second;
                ASSERT_EQ(last, efa_inflight_release(tb.t, id, true)) << "step " << step;
                if (last) {
                    model.erase(it);
                } else {
                    --it->second; // over now: no claim finds it, only releases remain
                    while (it->second > 0) {
                        ASSERT_EQ(1 == it->second, efa_inflight_release(tb.t, id, false));
                        --it->second;
                    }
                    model.erase(it);
                }
            }
            break;
        case 3: // release without ending it; at 0 claims the expiry may take it
            if (model.end() != it && it->second > 0) {
                ASSERT_FALSE(efa_inflight_release(tb.t, id, false)) << "step " << step;
                --it->second;
            }
            break;
        }
        if (0 == step % 997) { // the expiry takes exactly the unclaimed ones
            std::vector<void *> out(model.size() + 1);
            const size_t n = efa_inflight_expire(tb.t, 10.0, 1.0, out.data(), out.size());
            size_t idle = 0;
            for (auto m = model.begin(); m != model.end();) {
                if (0 == m->second) {
                    ++idle;
                    m = model.erase(m);
                } else {
                    ++m;
                }
            }
            ASSERT_EQ(idle, n) << "step " << step;
        }
        ASSERT_EQ(model.size(), efa_inflight_size(tb.t)) << "step " << step;
    }
    for (const auto &m : model) { // every survivor is still found
        ASSERT_EQ(&storage[m.first % storage.size()], efa_inflight_claim(tb.t, m.first, 0.0));
    }
}

} // namespace
