// The on-node message channel (shm_ring.hpp): frames in order through
// wrap-around, a full ring refusing and recovering, the slot boundary,
// attach errors, reentrant polls, and a producer in another process.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "efa_node.h"
#include "efa_ring_inline.h"
#include "efa_shm_ring.h"
#include "shm_ring.hpp"
#include "shm_ring_test.hpp"

namespace {

using efa::shm::Geometry;
using efa::shm::Inbox;
using efa::shm::Outbox;

using shm_ring_test::drain;
using shm_ring_test::Frame;
using shm_ring_test::geo;
using shm_ring_test::temp_path;

// efa_ring_copy_short and efa_ring_copy: every length of a line and
// around it, at 8 offsets of source and of destination,
// copy exactly [s, s + n) to [d, d + n) and write nothing beside it.
TEST(ShmRing, CopyShortWritesExactlyTheBytes) {
    constexpr size_t kGuard = 64;
    for (size_t n = 0; n <= 2 * EFA_RING_LINE + 1; ++n) {
        for (size_t so = 0; so < 8; ++so) {
            for (size_t doff = 0; doff < 8; ++doff) {
                std::vector<uint8_t> src(kGuard + n + kGuard), dst(kGuard + n + kGuard, 0xee);
                for (size_t i = 0; i < src.size(); ++i) {
                    src[i] = static_cast<uint8_t>(i * 31 + n);
                }
                const uint8_t *from = src.data() + kGuard / 2 + so;
                uint8_t *to = dst.data() + kGuard / 2 + doff;
                if (n <= EFA_RING_LINE) {
                    efa_ring_copy_short(to, from, n);
                } else {
                    efa_ring_copy(to, from, n);
                }
                for (size_t i = 0; i < dst.size(); ++i) {
                    const uint8_t *at = dst.data() + i;
                    const bool inside = at >= to && at < to + n;
                    ASSERT_EQ(dst[i], inside ? from[at - to] : 0xee)
                        << "n " << n << " src offset " << so << " dst offset " << doff << " byte "
                        << i;
                }
            }
        }
    }
}

TEST(ShmRing, GeometryChecks) {
    EXPECT_TRUE(geo(2, 64, 8192).valid());
    EXPECT_FALSE(geo(0, 64, 8192).valid()); // no rings
    EXPECT_FALSE(geo(2, 48, 8192).valid()); // not a power of two
    EXPECT_FALSE(geo(2, 64, 100).valid());  // not a multiple of a line
    EXPECT_FALSE(geo(2, 1, 8192).valid());  // one slot
    EXPECT_EQ(geo(2, 64, 8192).max_frame(), 8192u - efa::shm::kSlotHeader);
    EXPECT_EQ(geo(2, 64, 8192).ring_bytes() % efa::shm::kPage, 0u);
    int err = 0;
    EXPECT_EQ(Inbox::create(temp_path("bad"), geo(2, 3, 8192), err), nullptr);
    EXPECT_EQ(err, -EINVAL);
}

TEST(ShmRing, AttachErrors) {
    int err = 0;
    EXPECT_EQ(Outbox::attach(temp_path("missing"), 0, 1, err), nullptr);
    EXPECT_EQ(err, -ENOENT);
    const std::string path = temp_path("range");
    auto in = Inbox::create(path, geo(2, 8, 256), err);
    ASSERT_NE(in, nullptr) << err;
    EXPECT_EQ(Outbox::attach(path, 2, in->cookie(), err), nullptr);
    EXPECT_EQ(err, -ERANGE);
    // Not a segment: a file of the right size with no magic.
    const std::string junk = temp_path("junk");
    FILE *f = fopen(junk.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::vector<char> zeros(64 * 1024);
    fwrite(zeros.data(), 1, zeros.size(), f);
    fclose(f);
    ASSERT_EQ(chmod(junk.c_str(), 0644), 0);
    EXPECT_EQ(Outbox::attach(junk, 0, 1, err), nullptr);
    EXPECT_EQ(err, -EACCES); // open to others: not an inbox
    ASSERT_EQ(chmod(junk.c_str(), 0600), 0);
    EXPECT_EQ(Outbox::attach(junk, 0, 1, err), nullptr);
    EXPECT_EQ(err, -EPROTO);
    unlink(junk.c_str());
}

TEST(ShmRing, InOrderThroughWrapAround) {
    int err = 0;
    const std::string path = temp_path("wrap");
    auto in = Inbox::create(path, geo(2, 4, 128), err);
    ASSERT_NE(in, nullptr) << err;
    auto out = Outbox::attach(path, 1, in->cookie(), err);
    ASSERT_NE(out, nullptr) << err;
    // 4 slots, 25 frames, two at a time: the counters wrap the slots 6 times.
    uint32_t next_sent = 0, next_seen = 0;
    for (int round = 0; round < 13; ++round) {
        for (int i = 0; i < 2 && next_sent < 25; ++i, ++next_sent) {
            ASSERT_EQ(out->send(&next_sent, sizeof(next_sent)), 0);
        }
        for (const Frame &f : drain(*in)) {
            EXPECT_EQ(f.ring, 1u);
            ASSERT_EQ(f.bytes.size(), sizeof(uint32_t));
            uint32_t v;
            memcpy(&v, f.bytes.data(), sizeof(v));
            EXPECT_EQ(v, next_seen++);
        }
    }
    EXPECT_EQ(next_seen, 25u);
}

TEST(ShmRing, FullRingRefusesThenRecovers) {
    int err = 0;
    const std::string path = temp_path("full");
    auto in = Inbox::create(path, geo(1, 8, 128), err);
    ASSERT_NE(in, nullptr) << err;
    auto out = Outbox::attach(path, 0, in->cookie(), err);
    ASSERT_NE(out, nullptr) << err;
    for (uint8_t i = 0; i < 8; ++i) {
        ASSERT_EQ(out->send(&i, 1), 0);
    }
    uint8_t x = 99;
    EXPECT_EQ(out->send(&x, 1), -EAGAIN);
    EXPECT_EQ(out->reserve(1), nullptr);
    EXPECT_EQ(in->waiting(0), 8u);
    // Taking three frames frees three slots, no more.
    auto got = drain(*in, 3);
    ASSERT_EQ(got.size(), 3u);
    for (uint8_t i = 0; i < 3; ++i) {
        EXPECT_EQ(got[i].bytes[0], i);
    }
    for (uint8_t i = 8; i < 11; ++i) {
        ASSERT_EQ(out->send(&i, 1), 0);
    }
    EXPECT_EQ(out->send(&x, 1), -EAGAIN);
    got = drain(*in);
    ASSERT_EQ(got.size(), 8u);
    for (uint8_t i = 0; i < 8; ++i) {
        EXPECT_EQ(got[i].bytes[0], i + 3);
    }
    EXPECT_EQ(in->waiting(0), 0u);
}

TEST(ShmRing, SlotBoundary) {
    int err = 0;
    const std::string path = temp_path("boundary");
    auto in = Inbox::create(path, geo(1, 4, 256), err);
    ASSERT_NE(in, nullptr) << err;
    auto out = Outbox::attach(path, 0, in->cookie(), err);
    ASSERT_NE(out, nullptr) << err;
    const size_t max = out->max_frame();
    EXPECT_EQ(max, 256u - efa::shm::kSlotHeader);
    std::vector<uint8_t> big(max + 1);
    for (size_t i = 0; i < big.size(); ++i) {
        big[i] = static_cast<uint8_t>(i * 7 + 1);
    }
    EXPECT_EQ(out->send(big.data(), max + 1), -EMSGSIZE);
    EXPECT_EQ(out->reserve(max + 1), nullptr);
    ASSERT_EQ(out->send(big.data(), max), 0);
    ASSERT_EQ(out->send(big.data(), max - 1), 0);
    ASSERT_EQ(out->send(big.data(), 0), 0); // an empty frame is a frame
    // Zero-copy path.
    void *dst = out->reserve(max);
    ASSERT_NE(dst, nullptr);
    memcpy(dst, big.data() + 1, max);
    out->commit(max);
    auto got = drain(*in);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got[0].bytes, std::vector<uint8_t>(big.begin(), big.begin() + max));
    EXPECT_EQ(got[1].bytes, std::vector<uint8_t>(big.begin(), big.begin() + max - 1));
    EXPECT_TRUE(got[2].bytes.empty());
    EXPECT_EQ(got[3].bytes, std::vector<uint8_t>(big.begin() + 1, big.begin() + 1 + max));
}

// The re-entry guard, with the locked exchange (several threads may poll)
// and with the plain load and store of one thread.
class ShmRingGuard : public ::testing::TestWithParam<bool> {};

TEST_P(ShmRingGuard, SeveralSendersAndReentrantPoll) {
    int err = 0;
    const std::string path = temp_path(GetParam() ? "senders1" : "senders");
    auto in = Inbox::create(path, geo(3, 8, 128), err);
    ASSERT_NE(in, nullptr) << err;
    in->set_one_thread(GetParam());
    EXPECT_TRUE(drain(*in).empty()); // nobody attached yet
    auto a = Outbox::attach(path, 0, in->cookie(), err);
    auto c = Outbox::attach(path, 2, in->cookie(), err);
    ASSERT_TRUE(a && c);
    char x = 'a', z = 'c';
    ASSERT_EQ(a->send(&x, 1), 0);
    ASSERT_EQ(c->send(&z, 1), 0);
    ASSERT_EQ(c->send(&z, 1), 0);
    int nested = -1;
    std::vector<uint32_t> rings;
    int n = in->poll(
        [&](uint32_t r, void *, size_t) {
            rings.push_back(r);
            // A poll from inside delivery must not hand the frame out again.
            nested = in->poll([](uint32_t, void *, size_t) { FAIL(); }, 10);
        },
        10);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(nested, 0);
    EXPECT_EQ(rings, (std::vector<uint32_t>{0, 2, 2}));
    // The guard is down again after the poll: the next frame is delivered.
    ASSERT_EQ(a->send(&x, 1), 0);
    EXPECT_EQ(drain(*in).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(OneThread, ShmRingGuard, ::testing::Bool());

// A sender that keeps its ring full, ahead of another's in ring order:
// a poll that spent its budget on the first ring starts the next one
// after it, so the later ring's frame is taken in the next poll (it was
// left for as long as the first sender kept up: a master waiting for one
// worker while another streams to it).
TEST(ShmRing, APollThatSpentItsBudgetStartsAfterThatRing) {
    int err = 0;
    const std::string path = temp_path("resume");
    auto in = Inbox::create(path, geo(3, 8, 128), err);
    ASSERT_NE(in, nullptr) << err;
    auto busy = Outbox::attach(path, 0, in->cookie(), err);
    auto quiet = Outbox::attach(path, 2, in->cookie(), err);
    ASSERT_TRUE(busy && quiet);
    const char b = 'b', q = 'q';
    auto fill = [&] {
        while (0 == busy->send(&b, 1)) {
        }
    };
    fill();
    ASSERT_EQ(quiet->send(&q, 1), 0);
    std::vector<Frame> got = drain(*in, 4);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got[0].ring, 0u);
    fill();
    got = drain(*in, 4);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got[0].ring, 2u) << "the quiet sender's frame waited behind the busy one's";
    EXPECT_EQ(got[1].ring, 0u);
    // That poll spent its budget on ring 0 again: the next starts after it.
    EXPECT_EQ(quiet->send(&q, 1), 0);
    got = drain(*in, 1000);
    ASSERT_EQ(got.size(), 6u); // 5 of ring 0's left, and ring 2's
    EXPECT_EQ(got.front().ring, 2u);
    EXPECT_EQ(got.back().ring, 0u);
}

TEST(ShmRing, InboxUnlinksItsFile) {
    int err = 0;
    const std::string path = temp_path("unlink");
    {
        auto in = Inbox::create(path, geo(1, 4, 128), err);
        ASSERT_NE(in, nullptr);
        EXPECT_EQ(access(path.c_str(), F_OK), 0);
    }
    EXPECT_NE(access(path.c_str(), F_OK), 0);
    // A stale inbox of this user (mode 0600) of that name is replaced.
    FILE *f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("stale", f);
    fclose(f);
    ASSERT_EQ(chmod(path.c_str(), 0600), 0);
    auto in = Inbox::create(path, geo(1, 4, 128), err);
    ASSERT_NE(in, nullptr) << err;
    auto out = Outbox::attach(path, 0, in->cookie(), err);
    EXPECT_NE(out, nullptr) << err;
}

// ---- files planted at an inbox's name, corrupted headers and slots ----

// Write 'len' bytes at 'off' of the file, as another process with the
// file open would.
void poke(const std::string &path, off_t off, const void *bytes, size_t len) {
    int fd = open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(static_cast<ssize_t>(len), pwrite(fd, bytes, len, off));
    close(fd);
}

std::string contents(const std::string &path) {
    std::string s;
    FILE *f = fopen(path.c_str(), "r");
    if (f) {
        char buf[256];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
            s.append(buf, n);
        }
        fclose(f);
    }
    return s;
}

// A symbolic link, or a file open to others, at the inbox's name is
// refused by the owner and left as it is (neither followed nor removed);
// a sender refuses both too.
TEST(ShmRing, PlantedFilesAreRefusedAndLeftAlone) {
    int err = 0;
    const std::string path = temp_path("planted");
    const std::string target = temp_path("planted-target");
    FILE *f = fopen(target.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("victim", f);
    fclose(f);
    ASSERT_EQ(0, symlink(target.c_str(), path.c_str()));
    EXPECT_EQ(Inbox::create(path, geo(1, 4, 128), err), nullptr);
    EXPECT_EQ(err, -EEXIST);
    char link[512] = {};
    EXPECT_GT(readlink(path.c_str(), link, sizeof(link) - 1), 0) << "the link was removed";
    EXPECT_EQ(target, link);
    EXPECT_EQ("victim", contents(target));
    EXPECT_EQ(Outbox::attach(path, 0, 1, err), nullptr);
    EXPECT_EQ(err, -ELOOP);
    unlink(path.c_str());
    // A file of this user open to others: not one of its inboxes.
    f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("planted", f);
    fclose(f);
    ASSERT_EQ(0, chmod(path.c_str(), 0666));
    EXPECT_EQ(Inbox::create(path, geo(1, 4, 128), err), nullptr);
    EXPECT_EQ(err, -EEXIST);
    EXPECT_EQ("planted", contents(path));
    unlink(path.c_str());
    unlink(target.c_str());
}

// Another user's file (mode 0600, as an inbox would be): refused by the
// owner and by a sender even where the caller could open it (root).
TEST(ShmRing, AnotherUsersFileIsRefused) {
    if (0 != geteuid()) {
        GTEST_SKIP() << "needs root to make a file of another user";
    }
    int err = 0;
    const std::string path = temp_path("other-user");
    {
        auto in = Inbox::create(path, geo(1, 4, 128), err);
        ASSERT_NE(in, nullptr) << err;
        ASSERT_EQ(0, chown(path.c_str(), 65534, 65534));
        EXPECT_EQ(Outbox::attach(path, 0, in->cookie(), err), nullptr);
        EXPECT_EQ(err, -EACCES);
        // Keep the file past the inbox: link it to a second name.
        ASSERT_EQ(0, link(path.c_str(), (path + ".keep").c_str()));
    }
    ASSERT_EQ(0, rename((path + ".keep").c_str(), path.c_str()));
    const std::string before = contents(path);
    EXPECT_EQ(Inbox::create(path, geo(1, 4, 128), err), nullptr);
    EXPECT_EQ(err, -EEXIST);
    struct stat st;
    ASSERT_EQ(0, stat(path.c_str(), &st)) << "another user's file was removed";
    EXPECT_EQ(65534u, st.st_uid);
    EXPECT_EQ(before, contents(path));
    unlink(path.c_str());
}

// Each field of the shared header, corrupted, makes a sender refuse the
// segment; another owner's cookie too.
TEST(ShmRing, CorruptedHeaderIsRefusedAtAttach) {
    int err = 0;
    const std::string path = temp_path("badhdr");
    auto in = Inbox::create(path, geo(2, 8, 256), err);
    ASSERT_NE(in, nullptr) << err;
    EXPECT_EQ(Outbox::attach(path, 0, in->cookie() ^ 1, err), nullptr);
    EXPECT_EQ(err, -EKEYREJECTED);
    efa::shm::HeaderImage good{};
    int fd = open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(static_cast<ssize_t>(sizeof(good)), pread(fd, &good, sizeof(good), 0));
    close(fd);
    std::vector<efa::shm::HeaderImage> bad(7, good);
    bad[0].magic ^= 1;
    bad[1].version = 99;
    bad[2].nrings = 0;
    bad[3].nslots = 3;
    bad[4].slot_size = 100;
    bad[5].ring_offset = 1ull << 40;
    bad[6].ring_bytes += efa::shm::kPage;
    for (size_t i = 0; i < bad.size(); ++i) {
        poke(path, 0, &bad[i], sizeof(bad[i]));
        EXPECT_EQ(Outbox::attach(path, 0, in->cookie(), err), nullptr) << "field " << i;
        EXPECT_EQ(err, -EPROTO) << "field " << i;
    }
    poke(path, 0, &good, sizeof(good));
    // Counters with more in flight than slots.
    const uint64_t tail = 100;
    const off_t ring0 = static_cast<off_t>(efa::shm::kPage);
    poke(path, ring0 + static_cast<off_t>(efa::shm::kLine), &tail, sizeof(tail));
    EXPECT_EQ(Outbox::attach(path, 0, in->cookie(), err), nullptr);
    EXPECT_EQ(err, -EPROTO);
    EXPECT_NE(Outbox::attach(path, 1, in->cookie(), err), nullptr) << err;
}

// The owner works from its own geometry: a header corrupted after the
// sender attached changes nothing (it used to take the rings' offset and
// size from it), and a slot length longer than the slot is dropped and
// counted.
TEST(ShmRing, OwnerIgnoresTheSharedHeaderAndDropsBadLengths) {
    int err = 0;
    const std::string path = temp_path("owner");
    auto in = Inbox::create(path, geo(2, 4, 128), err);
    ASSERT_NE(in, nullptr) << err;
    auto out = Outbox::attach(path, 1, in->cookie(), err);
    ASSERT_NE(out, nullptr) << err;
    efa::shm::HeaderImage h{};
    int fd = open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(static_cast<ssize_t>(sizeof(h)), pread(fd, &h, sizeof(h), 0));
    close(fd);
    h.ring_offset = 1ull << 40;
    h.ring_bytes = 1ull << 40;
    h.nrings = 1000;
    h.nslots = 1u << 20;
    poke(path, 0, &h, sizeof(h));
    const char msg[] = "still fine";
    ASSERT_EQ(0, out->send(msg, sizeof(msg)));
    auto got = drain(*in);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].ring, 1u);
    EXPECT_EQ(0, memcmp(got[0].bytes.data(), msg, sizeof(msg)));
    // The next slot (1) of ring 1: a length beyond the slot.
    ASSERT_EQ(0, out->send(msg, sizeof(msg)));
    const uint32_t huge = 1u << 30;
    const off_t slot1 = static_cast<off_t>(efa::shm::kPage + geo(2, 4, 128).ring_bytes() +
                                           efa::shm::kRingControl + 128);
    poke(path, slot1, &huge, sizeof(huge));
    EXPECT_TRUE(drain(*in).empty());
    EXPECT_EQ(in->dropped(), 1u);
    ASSERT_EQ(0, out->send(msg, sizeof(msg)));
    EXPECT_EQ(drain(*in).size(), 1u);
}

// Corrupted slots count against a poll's budget: a sender writing nothing
// else, as fast as the owner frees them, must not keep one poll going for
// ever (with the engine's lock held, every other thread waiting on it).
TEST(ShmRing, CorruptedSlotsCountAgainstThePollsBudget) {
    int err = 0;
    const std::string path = temp_path("budget");
    auto in = Inbox::create(path, geo(2, 4, 128), err);
    ASSERT_NE(in, nullptr) << err;
    auto out = Outbox::attach(path, 1, in->cookie(), err);
    ASSERT_NE(out, nullptr) << err;
    const char msg[] = "corrupted";
    const uint32_t huge = 1u << 30;
    for (int slot = 0; slot < 4; ++slot) {
        ASSERT_EQ(0, out->send(msg, sizeof(msg)));
        const off_t at = static_cast<off_t>(efa::shm::kPage + geo(2, 4, 128).ring_bytes() +
                                            efa::shm::kRingControl + slot * 128);
        poke(path, at, &huge, sizeof(huge));
    }
    int calls = 0;
    EXPECT_EQ(2, in->poll([&](uint32_t, void *, size_t) { ++calls; }, 2));
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(in->dropped(), 2u) << "the poll went on past its budget";
    EXPECT_EQ(2, in->poll([&](uint32_t, void *, size_t) { ++calls; }, 2));
    EXPECT_EQ(in->dropped(), 4u);
    ASSERT_EQ(0, out->send(msg, sizeof(msg)));
    EXPECT_EQ(drain(*in).size(), 1u);
}

// A sender's wake rings the owner's doorbell, in another process too (the
// header page stays mapped by the outbox), and leaves the frames alone.
TEST(ShmRing, WakeRingsTheOwnersDoorbell) {
    int err = 0;
    const std::string path = temp_path("bell");
    auto in = Inbox::create(path, geo(2, 4, 128), err);
    ASSERT_NE(in, nullptr) << err;
    volatile uint32_t *bell = in->doorbell();
    EXPECT_EQ(*bell, 0u);
    auto out = Outbox::attach(path, 0, in->cookie(), err);
    ASSERT_NE(out, nullptr) << err;
    EXPECT_EQ(*bell, 0u) << "attaching rang the doorbell";
    out->wake();
    EXPECT_EQ(*bell, 1u);
    out->wake(); // rung already: stays rung
    EXPECT_EQ(*bell, 1u);
    EXPECT_TRUE(drain(*in).empty()) << "a wake wrote a frame";
    *bell = 0; // what the owner's paced poll does when it answers
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (0 == pid) {
        efa_shm_outbox_t *o = efa_shm_outbox_attach(path.c_str(), 1, in->cookie(), &err);
        if (!o) {
            _exit(2);
        }
        efa_shm_outbox_wake(o);
        efa_shm_outbox_detach(o);
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && 0 == WEXITSTATUS(status));
    EXPECT_EQ(*bell, 1u) << "another process's wake did not reach the doorbell";
}

// Two processes: a child produces 100000 frames of varying length through
// a ring of 8 slots (the ring is full most of the time), each carrying its
// sequence number and a pattern; the parent checks every one.  The C API
// is used here, as the BTL uses it.
TEST(ShmRing, ForkedProducer) {
    int err = 0;
    const std::string path = temp_path("fork");
    efa_shm_inbox_t *in = efa_shm_inbox_create(path.c_str(), 2, 8, 512, &err);
    ASSERT_NE(in, nullptr) << err;
    constexpr uint32_t kFrames = 100000;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (0 == pid) {
        efa_shm_outbox_t *out =
            efa_shm_outbox_attach(path.c_str(), 1, efa_shm_inbox_cookie(in), &err);
        if (!out) {
            _exit(2);
        }
        const size_t max = efa_shm_outbox_max_frame(out);
        uint8_t buf[512];
        for (uint32_t i = 0; i < kFrames; ++i) {
            size_t len = sizeof(i) + (i * 13) % (max - sizeof(i) + 1);
            memcpy(buf, &i, sizeof(i));
            for (size_t k = sizeof(i); k < len; ++k) {
                buf[k] = static_cast<uint8_t>(i + k);
            }
            while (-EAGAIN == efa_shm_outbox_send(out, buf, len)) {
            }
        }
        efa_shm_outbox_detach(out);
        _exit(0);
    }
    struct State {
        uint32_t next = 0;
        uint32_t bad = 0;
        size_t max;
    } st;
    st.max = 512 - efa::shm::kSlotHeader;
    while (st.next < kFrames && st.bad == 0) {
        efa_shm_inbox_poll(
            in,
            [](void *arg, unsigned ring, void *frame, size_t len) {
                auto *s = static_cast<State *>(arg);
                uint32_t i;
                memcpy(&i, frame, sizeof(i));
                const size_t want = sizeof(i) + (i * 13) % (s->max - sizeof(i) + 1);
                bool ok = ring == 1 && i == s->next && len == want;
                for (size_t k = sizeof(i); ok && k < len; ++k) {
                    ok = static_cast<uint8_t *>(frame)[k] == static_cast<uint8_t>(i + k);
                }
                s->bad += ok ? 0 : 1;
                ++s->next;
            },
            &st, 16);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && 0 == WEXITSTATUS(status));
    EXPECT_EQ(st.bad, 0u);
    EXPECT_EQ(st.next, kFrames);
    efa_shm_inbox_destroy(in);
}

} // namespace
