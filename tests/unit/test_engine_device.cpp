// The matching engine with device memory (engine.hpp, efa_device.h), on the
// fake device, whose memory the CPU cannot touch: a send from a device
// buffer goes by the device's IPC handle and the receiver's device copy,
// straight into a device receive buffer; where the import is refused the
// bytes stream through the rings, read with the device's copy.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "efa_device.h"
#include "engine_pair.hpp"

namespace engine_test {
namespace {

// A device buffer of the fake, filled from host bytes or read back.
class DeviceBuf {
  public:
    explicit DeviceBuf(size_t len) : len_(len), p_(efa_fake_device_alloc(len)) {}
    ~DeviceBuf() { efa_fake_device_free(p_); }
    DeviceBuf(const DeviceBuf &) = delete;
    DeviceBuf &operator=(const DeviceBuf &) = delete;
    void *get() const { return p_; }
    void fill(const std::vector<uint8_t> &v) {
        ASSERT_EQ(0, efa_device_copy(p_, v.data(), v.size()));
    }
    std::vector<uint8_t> read(size_t n) const {
        std::vector<uint8_t> v(n);
        EXPECT_EQ(0, efa_device_copy(v.data(), p_, n));
        return v;
    }

  private:
    size_t len_;
    void *p_;
};

class EngineDeviceTest : public EnginePair {
  protected:
    void SetUp() override { efa_device_install(efa_fake_device_ops()); }
    void TearDown() override {
        EnginePair::TearDown(); // (closes what the engines imported)
        efa_fake_device_refuse_ipc(false);
        efa_fake_device_one_import(false);
        efa_fake_device_visible(false);
        efa_fake_device_no_sync_memops(false);
        EXPECT_EQ(0u, efa_fake_device_held()) << "an export's descriptor still held";
        efa_device_install(nullptr);
        EXPECT_EQ(0u, efa_fake_device_live()) << "an allocation left behind";
        EXPECT_EQ(0u, efa_fake_device_imported()) << "an import left open";
    }
    // Send len device bytes from a to b; b receives into a device buffer
    // (with a host buffer beside it, as mtl_efa posts one) or into host
    // memory; post_first: the receive waits before the RTS comes.
    void device_message(size_t len, size_t recv_len, bool recv_on_device, bool post_first,
                        bool expect_ipc) {
        const auto data = pattern(len, static_cast<uint8_t>(len));
        DeviceBuf src(len ? len : 1), dst(recv_len ? recv_len : 1);
        src.fill(data);
        std::vector<uint8_t> host(recv_len, 0xee);
        efa_engine_stats_t before{};
        efa_engine_get_stats(b, &before);
        Req s, r;
        r.on.device_buf = recv_on_device ? dst.get() : nullptr;
        if (post_first) {
            ASSERT_EQ(0, post(b, r, host.data(), recv_len, 3, 0, 9));
        }
        s.on.complete = on_complete;
        ASSERT_LE(0, efa_engine_send_device(a, 1, 3, 0, 9, src.get(), len, false, &s.on));
        if (!post_first) {
            ASSERT_TRUE(until([&] {
                efa_engine_stats_t st{};
                efa_engine_get_stats(b, &st);
                return st.unexpected > before.unexpected;
            }));
            const int rc = post(b, r, host.data(), recv_len, 3, 0, 9);
            ASSERT_LE(0, rc);
            r.completions += rc; // 1: complete inside the call (no callback)
        }
        ASSERT_TRUE(until([&] { return 1 == r.completions && (1 == s.completions || s.on.err); }));
        EXPECT_EQ(0, s.on.err);
        EXPECT_EQ(len > recv_len ? -FI_ETRUNC : 0, r.on.err);
        EXPECT_EQ(len, r.on.msg_len);
        const size_t n = std::min(len, recv_len);
        const std::vector<uint8_t> want(data.begin(), data.begin() + static_cast<long>(n));
        // Where the bytes are: the device buffer when they came by IPC into
        // a device receive, else the host buffer.
        const bool landed = expect_ipc && recv_on_device && n > 0;
        EXPECT_EQ(landed, r.on.device_landed);
        if (landed) {
            EXPECT_EQ(want, dst.read(n));
            EXPECT_EQ(std::vector<uint8_t>(recv_len, 0xee), host) << "host buffer written too";
        } else {
            EXPECT_EQ(want,
                      std::vector<uint8_t>(host.begin(), host.begin() + static_cast<long>(n)));
            if (recv_len > n) {
                EXPECT_EQ(0xee, host[n]) << "written past the message";
            }
        }
        efa_engine_stats_t st{};
        efa_engine_get_stats(b, &st);
        EXPECT_EQ(before.device_ipc + (expect_ipc ? 1 : 0), st.device_ipc);
        EXPECT_EQ(before.device_streamed + (expect_ipc ? 0 : 1), st.device_streamed);
        EXPECT_EQ(before.single_copy, st.single_copy) << "single copy read device memory";
    }
    // Three messages from three offsets of one allocation: imported once.
    void messages_of_one_allocation() {
        const auto data = pattern(8192, 5);
        DeviceBuf src(65536), dst(8192);
        src.fill(std::vector<uint8_t>(65536, 1));
        const uint64_t imports = efa_fake_device_imports();
        for (size_t off : {size_t(0), size_t(8192), size_t(40000)}) {
            uint8_t *at = static_cast<uint8_t *>(src.get()) + off;
            ASSERT_EQ(0, efa_device_copy(at, data.data(), 8192));
            std::vector<uint8_t> host(8192);
            Req s, r;
            r.on.device_buf = dst.get();
            ASSERT_EQ(0, post(b, r, host.data(), host.size(), 3, 0, 1));
            s.on.complete = on_complete;
            ASSERT_LE(0, efa_engine_send_device(a, 1, 3, 0, 1, at, 8192, false, &s.on));
            ASSERT_TRUE(until([&] { return 1 == r.completions && 1 == s.completions; }));
            EXPECT_EQ(data, dst.read(8192)) << "offset " << off;
        }
        EXPECT_EQ(imports + 1, efa_fake_device_imports()) << "one allocation, imported once";
    }
    // host.size() bytes sent from src, an allocation shorter than that,
    // into host: the device fails to copy them, and both sides must fail.
    void send_past_allocation(const DeviceBuf &src, std::vector<uint8_t> &host) {
        Req s, r;
        ASSERT_EQ(0, post(b, r, host.data(), host.size(), 3, 0, 4));
        s.on.complete = on_complete;
        ASSERT_LE(0, efa_engine_send_device(a, 1, 3, 0, 4, src.get(), host.size(), false, &s.on));
        ASSERT_TRUE(until([&] { return 1 == r.completions && 1 == s.completions; }));
        EXPECT_EQ(-FI_EIO, s.on.err);
        EXPECT_EQ(-FI_EIO, r.on.err);
    }
};

TEST_F(EngineDeviceTest, DeviceToDeviceByIpcAtEverySize) {
    open();
    for (size_t len : {size_t(0), size_t(1), size_t(64), size_t(4096), size_t(300000)}) {
        SCOPED_TRACE(len);
        device_message(len, len, true, true, true);
    }
}

TEST_F(EngineDeviceTest, DeviceToHostAndUnexpected) {
    open();
    device_message(5000, 5000, false, true, true);   // into host memory, by the device's copy
    device_message(70000, 70000, true, false, true); // the RTS waited unexpected
}

TEST_F(EngineDeviceTest, TruncatedDeviceReceive) {
    open();
    device_message(10000, 3000, true, true, true);
}

TEST_F(EngineDeviceTest, AnAllocationIsImportedOnce) {
    open();
    messages_of_one_allocation();
}

// A freed allocation's descriptor taken by the next: the receiver must not
// read the old one's import.
TEST_F(EngineDeviceTest, AReusedDescriptorIsANewAllocation) {
    open();
    device_message(20000, 20000, true, true, true);
    device_message(20000, 20000, true, true, true); // new buffers, maybe the same fd numbers
}

// A device message to this process itself: copied device to device from
// the sender's buffer, with no export and no import (CUDA refuses to open
// a handle of the process's own memory: it would stream through the host).
TEST_F(EngineDeviceTest, ADeviceMessageToItselfIsOneDeviceCopy) {
    open();
    efa_fake_device_refuse_ipc(true); // (an import tried would fail the test)
    for (size_t len : {size_t(1), size_t(70000)}) {
        SCOPED_TRACE(len);
        const auto data = pattern(len, 7);
        DeviceBuf src(len), dst(len);
        src.fill(data);
        std::vector<uint8_t> host(len, 0xee);
        efa_engine_stats_t before{};
        efa_engine_get_stats(a, &before);
        const uint64_t tries = efa_fake_device_import_tries();
        Req s, r;
        r.on.device_buf = dst.get();
        ASSERT_EQ(0, post(a, r, host.data(), len, 3, 0, 9));
        s.on.complete = on_complete;
        ASSERT_LE(0, efa_engine_send_device(a, 0, 3, 0, 9, src.get(), len, false, &s.on));
        ASSERT_TRUE(until([&] { return 1 == r.completions && 1 == s.completions; }));
        EXPECT_EQ(0, s.on.err);
        EXPECT_EQ(0, r.on.err);
        EXPECT_TRUE(r.on.device_landed);
        EXPECT_EQ(data, dst.read(len));
        EXPECT_EQ(std::vector<uint8_t>(len, 0xee), host) << "went through the host";
        efa_engine_stats_t st{};
        efa_engine_get_stats(a, &st);
        EXPECT_EQ(before.device_self + 1, st.device_self);
        EXPECT_EQ(before.device_ipc, st.device_ipc);
        EXPECT_EQ(before.device_streamed, st.device_streamed);
        EXPECT_EQ(tries, efa_fake_device_import_tries()) << "an import of its own memory";
    }
}

// A device that will not map a new allocation while a kept import (of a
// freed allocation at the same address, on CUDA) is still mapped: the
// peer's kept imports are closed and the new one imported, device to
// device, rather than refused and streamed for as long as the old is kept.
TEST_F(EngineDeviceTest, AnImportRefusedBesideKeptOnesIsAskedAgainAlone) {
    open();
    efa_fake_device_one_import(true);
    const uint64_t imports = efa_fake_device_imports();
    device_message(20000, 20000, true, true, true); // imported, kept
    device_message(20000, 20000, true, true,
                   true); // another allocation: refused beside it at first
    EXPECT_EQ(imports + 2, efa_fake_device_imports());
    EXPECT_EQ(1u, efa_fake_device_imported()) << "the first import still open";
}

// mtl_efa gives the engine only device messages above those that go
// eager (efa_engine_node_device_min: a small one staged through the host
// never waits for its receive), and none where the slots cannot hold the
// RTS with its IPC handle.
TEST_F(EngineDeviceTest, DeviceMessagesByIpcStartAboveTheEagerSize) {
    open();
    const size_t min = efa_engine_node_device_min(a);
    EXPECT_GT(min, size_t(slot_size) / 2);
    EXPECT_LE(min, size_t(slot_size));
    EXPECT_EQ(min, efa_engine_node_device_min(b));
    device_message(min, min, true, true, true);
}

TEST_F(EngineDeviceTest, SlotsTooSmallForTheRtsTakeNoDeviceMessage) {
    slot_size = 128;
    open();
    EXPECT_EQ(SIZE_MAX, efa_engine_node_device_min(a));
    Req s;
    DeviceBuf src(4096);
    EXPECT_EQ(-FI_EOPNOTSUPP, efa_engine_send_device(a, 1, 3, 0, 9, src.get(), 4096, false, &s.on));
}

// Only "already mapped" closes the peer's kept imports: another refusal
// streams that message and leaves them mapped.
TEST_F(EngineDeviceTest, AnotherRefusalLeavesTheKeptImports) {
    open();
    device_message(20000, 20000, true, true, true); // imported, kept
    ASSERT_EQ(1u, efa_fake_device_imported());
    efa_fake_device_refuse_ipc(true);
    device_message(20000, 20000, true, true, false); // another allocation: refused, streamed
    EXPECT_EQ(1u, efa_fake_device_imported()) << "a kept import closed for a refusal";
}

// A kept import holds the peer's allocation even after the peer freed it,
// so past the latest at most kIpcKeptBytes of them stay: the third of
// three 600 MiB allocations closes the first.  (The fake's memory is
// sparse: only the messages' bytes are touched.)
TEST_F(EngineDeviceTest, KeptImportsAreBoundedInBytes) {
    open();
    constexpr size_t kBig = size_t{600} << 20;
    const auto data = pattern(4096, 7);
    std::vector<std::unique_ptr<DeviceBuf>> bufs;
    for (int i = 0; i < 3; ++i) {
        bufs.push_back(std::make_unique<DeviceBuf>(kBig));
        bufs.back()->fill(data);
        std::vector<uint8_t> host(4096);
        Req s, r;
        ASSERT_EQ(0, post(b, r, host.data(), host.size(), 3, 0, 4));
        s.on.complete = on_complete;
        ASSERT_LE(0, efa_engine_send_device(a, 1, 3, 0, 4, bufs.back()->get(), 4096, false, &s.on));
        ASSERT_TRUE(until([&] { return 1 == r.completions && 1 == s.completions; }));
        EXPECT_EQ(data, host);
        EXPECT_EQ(i < 2 ? size_t(i + 1) : size_t(2), efa_fake_device_imported())
            << "after message " << i;
    }
    efa_engine_stats_t st{};
    efa_engine_get_stats(b, &st);
    EXPECT_EQ(3u, st.device_ipc) << "every message device to device";
}

TEST_F(EngineDeviceTest, ARefusedImportStreamsThroughTheRings) {
    open(4);
    efa_fake_device_refuse_ipc(true);
    device_message(50000, 50000, true, true, false); // ~50 DATA frames through 4 slots
    device_message(10, 10, false, false, false);
}

// A streamed device send goes through a host piece of net_device_piece
// bytes, copied from the device as its frames reach it: one copy per piece
// (the last one short), the bytes right whatever the piece and the frames.
TEST_F(EngineDeviceTest, AStreamedDeviceSendIsCopiedToTheHostPieceByPiece) {
    device_piece = 8192;
    open(4);
    efa_fake_device_refuse_ipc(true);
    device_message(50000, 50000, false, true, false); // 7 pieces, ~50 frames through 4 slots
    device_message(8192, 8192, false, false, false);  // exactly one piece
    efa_engine_stats_t st{};
    efa_engine_get_stats(a, &st);
    EXPECT_EQ(2u, st.device_send_staged);
    EXPECT_EQ(7u + 1u, st.device_send_pieces);
}

// With net_device_piece 0 the whole message is copied once, before its
// first frame.
TEST_F(EngineDeviceTest, AStreamedDeviceSendWithoutPiecesIsCopiedWhole) {
    open(4);
    efa_fake_device_refuse_ipc(true);
    device_message(50000, 50000, true, true, false);
    efa_engine_stats_t st{};
    efa_engine_get_stats(a, &st);
    EXPECT_EQ(1u, st.device_send_staged);
    EXPECT_EQ(1u, st.device_send_pieces);
}

// A piece the device cannot copy (here: one that runs past the end of the
// allocation, whose first piece it can copy) fails the send and the
// receive: the later frames say their bytes were never read, and the
// receive is not taken as whole.
TEST_F(EngineDeviceTest, AFailedPieceFailsBothSides) {
    device_piece = 3000;
    open(4);
    efa_fake_device_refuse_ipc(true);
    const auto data = pattern(4096, 3);
    DeviceBuf src(4096);
    src.fill(data);
    std::vector<uint8_t> host(8192, 0xee);
    send_past_allocation(src, host);
    EXPECT_EQ(std::vector<uint8_t>(data.begin(), data.begin() + 3000),
              std::vector<uint8_t>(host.begin(), host.begin() + 3000))
        << "the piece the device read";
    EXPECT_EQ(std::vector<uint8_t>(8192 - 3000, 0xee),
              std::vector<uint8_t>(host.begin() + 3000, host.end()))
        << "bytes delivered that were never read";
    efa_engine_stats_t st{};
    efa_engine_get_stats(a, &st);
    EXPECT_EQ(1u, st.device_send_pieces) << "the one piece the device could copy";
}

// An allocation whose import was refused is not asked for again: its
// later messages stream at once.
TEST_F(EngineDeviceTest, ARefusedAllocationIsNotAskedForAgain) {
    open();
    efa_fake_device_refuse_ipc(true);
    const auto data = pattern(3000, 9);
    DeviceBuf src(3000);
    src.fill(data);
    const uint64_t tries = efa_fake_device_import_tries();
    for (int i = 0; i < 3; ++i) {
        std::vector<uint8_t> host(3000);
        Req s, r;
        ASSERT_EQ(0, post(b, r, host.data(), host.size(), 3, 0, 2));
        s.on.complete = on_complete;
        ASSERT_LE(0, efa_engine_send_device(a, 1, 3, 0, 2, src.get(), 3000, false, &s.on));
        ASSERT_TRUE(until([&] { return 1 == r.completions && 1 == s.completions; }));
        EXPECT_EQ(data, host);
    }
    EXPECT_EQ(tries + 1, efa_fake_device_import_tries()) << "a refused import asked for again";
}

// The sender's device cannot copy its buffer (here: a length past its
// allocation, so no handle either): both sides fail, and no wrong byte is
// taken for the message.
TEST_F(EngineDeviceTest, AFailedDeviceReadFailsBothSides) {
    open();
    DeviceBuf src(4096);
    std::vector<uint8_t> host(8192, 0xee);
    send_past_allocation(src, host);
    EXPECT_EQ(std::vector<uint8_t>(8192, 0xee), host) << "bytes delivered that were never read";
}

// Memory exported as CUDA VMM memory is (the fake described so): each
// message's export holds a descriptor of the sender's, which the
// receiver takes out of it (pidfd_getfd), held until the message is done
// and then let go; the receiver keeps the allocation's mapping under its
// name, not the descriptor, so the same allocation is imported once.
class EngineDeviceVmmTest : public EngineDeviceTest {
  protected:
    void SetUp() override {
        EngineDeviceTest::SetUp();
        efa_fake_device_visible(true);
        efa_fake_device_no_sync_memops(true);
    }
};

TEST_F(EngineDeviceVmmTest, ByADescriptorHeldUntilTheMessageIsDone) {
    open();
    for (size_t len : {size_t(1), size_t(4096), size_t(300000)}) {
        SCOPED_TRACE(len);
        device_message(len, len, true, true, true);
        EXPECT_EQ(0u, efa_fake_device_held()) << "the descriptor outlived its message";
    }
    // The RTS waits unexpected: the descriptor is held until the receive
    // is posted and the receiver answers.
    const auto data = pattern(70000, 4);
    DeviceBuf src(70000), dst(70000);
    src.fill(data);
    Req s, r;
    s.on.complete = on_complete;
    ASSERT_LE(0, efa_engine_send_device(a, 1, 3, 0, 9, src.get(), 70000, false, &s.on));
    ASSERT_TRUE(until([&] {
        efa_engine_stats_t st{};
        efa_engine_get_stats(b, &st);
        return st.unexpected > 0;
    }));
    EXPECT_EQ(1u, efa_fake_device_held()) << "let go before the receiver took it";
    std::vector<uint8_t> host(70000);
    r.on.device_buf = dst.get();
    const int rc = post(b, r, host.data(), host.size(), 3, 0, 9);
    ASSERT_LE(0, rc);
    r.completions += rc;
    ASSERT_TRUE(until([&] { return 1 == r.completions && 1 == s.completions; }));
    EXPECT_EQ(data, dst.read(70000));
    EXPECT_EQ(0u, efa_fake_device_held());
}

TEST_F(EngineDeviceVmmTest, AnAllocationIsImportedOnceWhateverItsDescriptors) {
    open();
    messages_of_one_allocation();
}

// A send its peer never answered: the engine lets go of its descriptor
// when it closes.
TEST_F(EngineDeviceVmmTest, AnUnansweredSendLetsGoWhenTheEngineCloses) {
    open();
    DeviceBuf src(4096);
    Req s;
    s.on.complete = on_complete;
    ASSERT_LE(0, efa_engine_send_device(a, 1, 3, 0, 9, src.get(), 4096, false, &s.on));
    ASSERT_TRUE(until([&] {
        efa_engine_stats_t st{};
        efa_engine_get_stats(b, &st);
        return st.unexpected > 0;
    }));
    EXPECT_EQ(1u, efa_fake_device_held());
    efa_engine_destroy(a); // (before s goes: the engine reads its waiting sends)
    a = nullptr;
    EXPECT_EQ(0u, efa_fake_device_held()) << "the descriptor outlived the engine";
}

// A refused import streams the message, and its descriptor is let go all
// the same.
TEST_F(EngineDeviceVmmTest, ARefusedImportStreamsAndLetsGo) {
    open(4);
    efa_fake_device_refuse_ipc(true);
    device_message(50000, 50000, true, true, false);
    EXPECT_EQ(0u, efa_fake_device_held());
}

// Slots too small for a device RTS (its IPC handle): refused at once, for
// the caller to copy the buffer through the host, not queued for ever.
TEST_F(EngineDeviceTest, SlotsTooSmallForADeviceRtsRefuseIt) {
    slot_size = 128;
    open();
    DeviceBuf src(64);
    Req s;
    s.on.complete = on_complete;
    EXPECT_EQ(-FI_EOPNOTSUPP, efa_engine_send_device(a, 1, 3, 0, 1, src.get(), 64, false, &s.on));
    EXPECT_EQ(0, s.completions);
}

} // namespace
} // namespace engine_test
