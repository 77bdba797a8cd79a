// The window of a sender's numbered messages (common/include/efa_seq_window.h)
// that tells a copy sent again over another NIC from the message itself:
// in order, out of order, copies on both sides of the lowest number not
// seen yet, and a sender a whole window ahead.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "efa_seq_window.h"

namespace {

TEST(SeqWindow, NewNumbersOnceCopiesAfter) {
    efa_seq_window_t w;
    efa_seq_window_init(&w);
    for (uint64_t n = 1; n <= 10000; ++n) { // past two windows' worth, in order
        ASSERT_FALSE(efa_seq_window_seen(&w, n)) << n;
    }
    EXPECT_EQ(10001u, w.base);
    EXPECT_TRUE(efa_seq_window_seen(&w, 1));
    EXPECT_TRUE(efa_seq_window_seen(&w, 10000));
    EXPECT_TRUE(efa_seq_window_seen(&w, 0)); // no number
    EXPECT_FALSE(efa_seq_window_seen(&w, 10001));
    EXPECT_EQ(0u, w.skipped);
}

TEST(SeqWindow, OutOfOrderWithinTheWindow) {
    efa_seq_window_t w;
    efa_seq_window_init(&w);
    std::vector<uint64_t> order(3000);
    std::iota(order.begin(), order.end(), 1);
    std::mt19937 rng(7);
    std::shuffle(order.begin(), order.end(), rng);
    for (uint64_t n : order) {
        ASSERT_FALSE(efa_seq_window_seen(&w, n)) << n;
    }
    EXPECT_EQ(3001u, w.base);
    std::shuffle(order.begin(), order.end(), rng);
    for (uint64_t n : order) { // every one again: each a copy
        ASSERT_TRUE(efa_seq_window_seen(&w, n)) << n;
    }
}

TEST(SeqWindow, ACopyAboveAGapIsStillACopy) {
    // 5's first send failed and has not come yet; 6..100 arrived.  A copy
    // of 50 (sent again though it had arrived) is dropped; 5's copy is new.
    efa_seq_window_t w;
    efa_seq_window_init(&w);
    for (uint64_t n = 1; n <= 100; ++n) {
        if (n != 5) {
            ASSERT_FALSE(efa_seq_window_seen(&w, n));
        }
    }
    EXPECT_EQ(5u, w.base);
    EXPECT_TRUE(efa_seq_window_gap(&w));
    EXPECT_TRUE(efa_seq_window_seen(&w, 50));
    EXPECT_FALSE(efa_seq_window_seen(&w, 5));
    EXPECT_EQ(101u, w.base);
    EXPECT_FALSE(efa_seq_window_gap(&w));
    EXPECT_TRUE(efa_seq_window_seen(&w, 5));
}

TEST(SeqWindow, ASenderAWindowAheadMovesItOn) {
    efa_seq_window_t w;
    efa_seq_window_init(&w);
    ASSERT_FALSE(efa_seq_window_seen(&w, 2)); // 1 missing
    ASSERT_FALSE(efa_seq_window_seen(&w, 3));
    const uint64_t far = 1 + EFA_SEQ_WINDOW_BITS; // one past the window of base 1
    EXPECT_FALSE(efa_seq_window_seen(&w, far));
    EXPECT_EQ(1u, w.skipped);                  // 1 given up (2 and 3 had come)
    EXPECT_TRUE(efa_seq_window_seen(&w, 1));   // taken for a copy now
    EXPECT_TRUE(efa_seq_window_seen(&w, far)); // a copy
    EXPECT_FALSE(efa_seq_window_seen(&w, 4));  // still inside: new
    EXPECT_TRUE(efa_seq_window_seen(&w, 4));
    // far beyond: every number of the old window leaves at once
    const uint64_t before = w.skipped;
    const uint64_t base = w.base;
    EXPECT_FALSE(efa_seq_window_seen(&w, uint64_t{1} << 40));
    EXPECT_EQ((uint64_t{1} << 40) - EFA_SEQ_WINDOW_BITS + 1, w.base);
    // all left behind but the one of them that had arrived (far)
    EXPECT_EQ(before + (w.base - base) - 1, w.skipped);
    EXPECT_FALSE(efa_seq_window_seen(&w, w.base)); // the window works from there
}

} // namespace
