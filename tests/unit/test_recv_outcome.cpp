// efa_recv_outcome: a receive's completion read as MPI reads it.  The
// distinction that matters is a real truncation (the buffer is full and
// bytes were over) against a provider that lost part of a message that
// fitted (ofi_rxd under loss reports FI_ETRUNC with fewer bytes than
// posted and none over).
#include <gtest/gtest.h>

#include "efa_core.h"

namespace {

efa_cqe_t completion(int err, size_t len, size_t olen) {
    efa_cqe_t c{};
    c.err = err;
    c.flags = FI_RECV | FI_TAGGED;
    c.len = len;
    c.olen = olen;
    return c;
}

TEST(RecvOutcome, NoErrorIsDone) {
    efa_cqe_t c = completion(0, 100, 0);
    EXPECT_EQ(EFA_RECV_DONE, efa_recv_outcome(&c, 100));
    c.len = 0;
    EXPECT_EQ(EFA_RECV_DONE, efa_recv_outcome(&c, 100));
}

TEST(RecvOutcome, FullBufferWithOverflowIsTruncation) {
    efa_cqe_t c = completion(-FI_ETRUNC, 100, 28);
    EXPECT_EQ(EFA_RECV_TRUNCATED, efa_recv_outcome(&c, 100));
}

TEST(RecvOutcome, FullBufferWithoutOverflowCountIsTruncation) {
    // (providers that do not fill olen)
    efa_cqe_t c = completion(-FI_ETRUNC, 100, 0);
    EXPECT_EQ(EFA_RECV_TRUNCATED, efa_recv_outcome(&c, 100));
}

TEST(RecvOutcome, UnsetLengthIsTruncation) {
    // (providers that leave len unset in error entries)
    efa_cqe_t c = completion(-FI_ETRUNC, 0, 0);
    EXPECT_EQ(EFA_RECV_TRUNCATED, efa_recv_outcome(&c, 100));
}

TEST(RecvOutcome, PartOfAFittingMessageIsShort) {
    efa_cqe_t c = completion(-FI_ETRUNC, 65536, 0);
    EXPECT_EQ(EFA_RECV_SHORT, efa_recv_outcome(&c, 1 << 20));
    c.len = 1;
    EXPECT_EQ(EFA_RECV_SHORT, efa_recv_outcome(&c, 2));
}

TEST(RecvOutcome, FewerBytesButSomeOverIsTruncation) {
    // a provider that filled len with less than the buffer but says what
    // was over: the message was longer, whatever len says
    efa_cqe_t c = completion(-FI_ETRUNC, 10, 5);
    EXPECT_EQ(EFA_RECV_TRUNCATED, efa_recv_outcome(&c, 100));
}

TEST(RecvOutcome, OtherErrorsFail) {
    for (int err : {-FI_ECANCELED, -FI_EIO, -FI_EHOSTUNREACH, -FI_ENOMSG}) {
        efa_cqe_t c = completion(err, 10, 0);
        EXPECT_EQ(EFA_RECV_FAILED, efa_recv_outcome(&c, 100)) << fi_strerror(-err);
    }
}

} // namespace
