// Read rendezvous (common/core/core_rdv.cpp) and the striped read under it
// (rail_read.cpp), with a core that talks to itself on tcp;ofi_rxm over two
// NICs (this host's interface and the loopback one, as the MPI rails
// configurations do): a large message offered by its note and a tagged
// message of no bytes, the receive that matches it reading the bytes,
// striped over both rails, and answering.  The note and the receive may
// come in either order; a probe learns the length from the note; a
// receive shorter than the message reads what fits; a withdrawn message's
// note is dropped.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <rdma/fi_errno.h>

#include "core.hpp"
#include "core_test_op.hpp"
#include "core_test_rdv.hpp"
#include "core_test_iface.hpp"
#include "core_with_self.hpp"
#include "efa_tag.h"

namespace {

constexpr size_t kLen = 1 << 20;
constexpr uint64_t kEnvelope = 0x2a; // communicator 0, tag 42

using Offer = RdvTestOffer;
using Taken = RdvTestTaken;

class CoreRdv : public ::testing::Test {
  protected:
    void SetUp() override {
        efa_core_params_t p;
        if (!core_test_two_rails(&nics_, &p)) {
            GTEST_SKIP() << "no interface beside loopback for a second rail";
        }
        ASSERT_TRUE(self_.open(p));
        core_ = self_.core();
        ctx_ = efa_core_ctx(core_, 0);
        if (!efa_core_can_rdv(core_)) {
            GTEST_SKIP() << "no read rendezvous on this provider";
        }
        ASSERT_EQ(efa_core_get_info(core_)->num_nics, 2) << "two rails: " << nics_;
        codec_ = efa_tag_codec_make(&efa_core_get_info(core_)->tag_layout);
        src_.resize(kLen);
        for (size_t i = 0; i < kLen; ++i) {
            src_[i] = static_cast<uint8_t>(i * 7 + 3);
        }
        dst_.assign(kLen, 0);
        int err = 0;
        mr_ = efa_core_mr_acquire(core_, src_.data(), kLen, FI_REMOTE_READ, &err);
        ASSERT_NE(mr_, nullptr) << err;
    }
    void TearDown() override {
        if (mr_) {
            efa_core_mr_release(core_, mr_);
        }
    }

    // The tagged message of a rendezvous (what mtl_efa sends after the note).
    uint64_t rdv_tag(uint32_t seq) const {
        return efa_tag_codec_with_seq(&codec_, kEnvelope, seq) | codec_.rdv_bit;
    }
    void progress_until(const bool &flag, double limit = 10) {
        for (int i = 0; i < static_cast<int>(limit * 1000) && !flag; ++i) {
            efa_core_progress(core_);
            usleep(1000);
        }
    }
    // Offers seq: its note, then (by the core) its tagged message, which a
    // receive must match.
    void send(uint32_t seq, Offer &offer, CoreTestOp &tagged) {
        ASSERT_EQ(efa_ctx_rdv_offer(ctx_, self_.self()->addr[0], rdv_tag(seq), 0, mr_, src_.data(),
                                    kLen, &tagged.op, &offer.o),
                  0);
    }

    CoreWithSelf self_;
    efa_core_t *core_ = nullptr;
    efa_ctx_t *ctx_ = nullptr;
    efa_tag_codec_t codec_{};
    std::string nics_;
    std::vector<uint8_t> src_, dst_;
    efa_mr_t *mr_ = nullptr;
};

TEST_F(CoreRdv, NoteFirstThenTakeReadsStripedAndAnswers) {
    Offer offer;
    CoreTestOp tagged, recv;
    uint64_t striped0 = 0;
    {
        efa_core_counters_t c{};
        efa_core_get_current_counters(&c);
        striped0 = c.striped;
    }
    send(7, offer, tagged);
    ASSERT_EQ(efa_ctx_trecv(ctx_, nullptr, 0, nullptr, FI_ADDR_UNSPEC, kEnvelope, codec_.seq_mask,
                            &recv.op),
              0);
    core_test_wait(core_, recv, 10);
    ASSERT_TRUE(recv.done);
    ASSERT_EQ(recv.err, 0);
    // The note went first; the probe of the message finds its length.
    size_t len = 0;
    int rc = -FI_EAGAIN;
    for (int i = 0; i < 10000 && rc == -FI_EAGAIN; ++i) {
        rc = efa_ctx_rdv_len(ctx_, self_.self(), rdv_tag(7), &len);
        efa_core_progress(core_);
    }
    ASSERT_EQ(rc, 0);
    EXPECT_EQ(len, kLen);
    Taken taken;
    ASSERT_EQ(
        efa_ctx_rdv_take(ctx_, self_.self(), rdv_tag(7), dst_.data(), kLen, Taken::cb, &taken), 0);
    progress_until(taken.done);
    progress_until(offer.done);
    ASSERT_TRUE(taken.done);
    EXPECT_EQ(taken.err, 0);
    EXPECT_EQ(taken.msg_len, kLen);
    EXPECT_EQ(0, memcmp(src_.data(), dst_.data(), kLen));
    ASSERT_TRUE(offer.done) << "the answer never came";
    EXPECT_EQ(offer.result, 0);
    efa_core_counters_t c{};
    efa_core_get_current_counters(&c);
    EXPECT_GT(c.striped, striped0) << "read over one rail only";
    // Taken: no note is left for the seq.
    EXPECT_EQ(efa_ctx_rdv_len(ctx_, self_.self(), rdv_tag(7), &len), -FI_EAGAIN);
    core_test_wait(core_, tagged, 5);
}

TEST_F(CoreRdv, TakeBeforeItsNoteWaitsForIt) {
    Taken taken;
    ASSERT_EQ(
        efa_ctx_rdv_take(ctx_, self_.self(), rdv_tag(9), dst_.data(), kLen, Taken::cb, &taken), 0);
    for (int i = 0; i < 50; ++i) {
        efa_core_progress(core_);
    }
    EXPECT_FALSE(taken.done) << "finished without its note";
    Offer offer;
    CoreTestOp tagged, recv;
    send(9, offer, tagged);
    ASSERT_EQ(efa_ctx_trecv(ctx_, nullptr, 0, nullptr, FI_ADDR_UNSPEC, kEnvelope, codec_.seq_mask,
                            &recv.op),
              0);
    progress_until(taken.done);
    progress_until(offer.done);
    ASSERT_TRUE(taken.done);
    EXPECT_EQ(taken.err, 0);
    EXPECT_EQ(0, memcmp(src_.data(), dst_.data(), kLen));
    EXPECT_TRUE(offer.done);
    EXPECT_EQ(offer.result, 0);
    core_test_wait(core_, recv, 5);
    core_test_wait(core_, tagged, 5);
}

TEST_F(CoreRdv, AShortReceiveReadsWhatFitsAndSaysTheLength) {
    Offer offer;
    CoreTestOp tagged, recv;
    send(11, offer, tagged);
    ASSERT_EQ(efa_ctx_trecv(ctx_, nullptr, 0, nullptr, FI_ADDR_UNSPEC, kEnvelope, codec_.seq_mask,
                            &recv.op),
              0);
    core_test_wait(core_, recv, 10);
    const size_t fits = kLen / 2 + 5;
    Taken taken;
    ASSERT_EQ(
        efa_ctx_rdv_take(ctx_, self_.self(), rdv_tag(11), dst_.data(), fits, Taken::cb, &taken), 0);
    progress_until(taken.done);
    progress_until(offer.done);
    ASSERT_TRUE(taken.done);
    EXPECT_EQ(taken.err, 0);
    EXPECT_EQ(taken.msg_len, kLen); // the caller reports the truncation
    EXPECT_EQ(0, memcmp(src_.data(), dst_.data(), fits));
    EXPECT_EQ(dst_[fits], 0) << "read beyond the receive";
    EXPECT_TRUE(offer.done);
}

TEST_F(CoreRdv, AWithdrawnMessagesNoteIsDropped) {
    Offer offer;
    CoreTestOp tagged, recv;
    send(13, offer, tagged);
    ASSERT_EQ(efa_ctx_trecv(ctx_, nullptr, 0, nullptr, FI_ADDR_UNSPEC, kEnvelope, codec_.seq_mask,
                            &recv.op),
              0);
    core_test_wait(core_, recv, 10);
    size_t len = 0;
    int rc = -FI_EAGAIN;
    for (int i = 0; i < 10000 && rc == -FI_EAGAIN; ++i) {
        rc = efa_ctx_rdv_len(ctx_, self_.self(), rdv_tag(13), &len);
        efa_core_progress(core_);
    }
    ASSERT_EQ(rc, 0);
    efa::rdv_withdrawn(core_, core_->probe_id, rdv_tag(13));
    EXPECT_EQ(efa_ctx_rdv_len(ctx_, self_.self(), rdv_tag(13), &len), -FI_EAGAIN);
    // The sender hears it was withdrawn.
    efa_rdv_offer_end(&offer.o, -FI_ECANCELED);
    progress_until(offer.done);
    EXPECT_TRUE(offer.done);
    EXPECT_EQ(offer.result, -FI_ECANCELED);
    // Unanswered, its note may still reach the receiver and wait there
    // (read after the withdrawal): that tag to that receiver goes its plain
    // way from now on, or the next message of it, once the seq wraps,
    // would take that note (another buffer, another length).
    Offer again;
    CoreTestOp tagged2;
    EXPECT_EQ(efa_ctx_rdv_offer(ctx_, self_.self()->addr[0], rdv_tag(13), 0, mr_, src_.data(), kLen,
                                &tagged2.op, &again.o),
              -FI_EALREADY);
}

// A receive that failed before it could read still answers: the sender's
// send ends with the receiver's error instead of waiting for ever.
TEST_F(CoreRdv, ADeclinedReceiveAnswersTheSenderWithItsError) {
    Offer offer;
    CoreTestOp tagged, recv;
    send(15, offer, tagged);
    ASSERT_EQ(efa_ctx_trecv(ctx_, nullptr, 0, nullptr, FI_ADDR_UNSPEC, kEnvelope, codec_.seq_mask,
                            &recv.op),
              0);
    core_test_wait(core_, recv, 10);
    ASSERT_TRUE(recv.done);
    efa_ctx_rdv_decline(ctx_, self_.self(), rdv_tag(15), -FI_ENOMEM);
    progress_until(offer.done);
    ASSERT_TRUE(offer.done) << "the sender was never answered";
    EXPECT_EQ(offer.result, -FI_ENOMEM);
    size_t len = 0;
    EXPECT_EQ(efa_ctx_rdv_len(ctx_, self_.self(), rdv_tag(15), &len), -FI_EAGAIN)
        << "the declined message's note is still kept";
    EXPECT_EQ(0, dst_[0]) << "a declined receive read";
}

} // namespace

// The seq wraps while a message of it still waits unmatched: a second
// offer of the same tag to the same receiver is refused (the receiver
// could not tell their notes apart and would pair the newer one with the
// older message); once the first is answered, the tag may go again.
TEST_F(CoreRdv, ASecondOfferOfATagStillUnansweredIsRefused) {
    Offer first, second;
    CoreTestOp tagged1, tagged2, recv;
    send(5, first, tagged1);
    EXPECT_EQ(efa_ctx_rdv_offer(ctx_, self_.self()->addr[0], rdv_tag(5), 0, mr_, src_.data(), kLen,
                                &tagged2.op, &second.o),
              -FI_EALREADY);
    for (int i = 0; i < 50; ++i) {
        efa_core_progress(core_);
    }
    EXPECT_FALSE(tagged2.done) << "a refused offer sent its message";
    // Another seq to the same receiver is not held up.
    Offer other;
    CoreTestOp tagged3;
    send(6, other, tagged3);
    for (uint32_t seq : {5u, 6u}) {
        CoreTestOp r;
        ASSERT_EQ(efa_ctx_trecv(ctx_, nullptr, 0, nullptr, FI_ADDR_UNSPEC, kEnvelope,
                                codec_.seq_mask, &r.op),
                  0);
        core_test_wait(core_, r, 10);
        ASSERT_TRUE(r.done);
        Taken taken;
        ASSERT_EQ(efa_ctx_rdv_take(ctx_, self_.self(), rdv_tag(seq), dst_.data(), kLen, Taken::cb,
                                   &taken),
                  0)
            << "seq " << seq;
        progress_until(taken.done);
        EXPECT_EQ(taken.err, 0);
    }
    progress_until(first.done);
    progress_until(other.done);
    ASSERT_TRUE(first.done);
    EXPECT_EQ(first.result, 0);
    // Answered: the tag is free again.
    Offer again;
    CoreTestOp tagged4;
    send(5, again, tagged4);
    ASSERT_EQ(efa_ctx_trecv(ctx_, nullptr, 0, nullptr, FI_ADDR_UNSPEC, kEnvelope, codec_.seq_mask,
                            &recv.op),
              0);
    core_test_wait(core_, recv, 10);
    Taken taken;
    ASSERT_EQ(
        efa_ctx_rdv_take(ctx_, self_.self(), rdv_tag(5), dst_.data(), kLen, Taken::cb, &taken), 0);
    progress_until(taken.done);
    progress_until(again.done);
    EXPECT_EQ(again.result, 0);
    core_test_wait(core_, tagged1, 5);
    core_test_wait(core_, tagged3, 5);
    core_test_wait(core_, tagged4, 5);
}
