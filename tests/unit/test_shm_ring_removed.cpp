// An inbox whose file name is removed by someone else (systemd-logind's
// RemoveIPC) or taken by another file: a sender still reaches it through
// the owner's own descriptor (Outbox::attach_from_process), a frame sent so
// arrives, and the owner's end removes only its own file.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include "shm_ring.hpp"

namespace {

using efa::shm::Geometry;
using efa::shm::Inbox;
using efa::shm::Outbox;

std::string temp_path(const char *what) {
    return "/tmp/efa_shm_ring_removed_test." + std::to_string(getpid()) + "." + what;
}

Geometry small() {
    Geometry g;
    g.nrings = 2;
    g.nslots = 8;
    g.slot_size = 256;
    return g;
}

TEST(ShmRingRemoved, ARemovedInboxIsReachedThroughItsOwnersDescriptor) {
    int err = 0;
    const std::string path = temp_path("gone");
    auto in = Inbox::create(path, small(), err);
    ASSERT_NE(in, nullptr) << err;
    ASSERT_EQ(unlink(path.c_str()), 0);
    EXPECT_EQ(Outbox::attach(path, 1, in->cookie(), err), nullptr);
    EXPECT_EQ(err, -ENOENT);
    auto out = Outbox::attach_from_process(static_cast<uint32_t>(getpid()), in->fd(), 1,
                                           in->cookie(), err);
    ASSERT_NE(out, nullptr) << "err " << err;
    const char frame[] = "through the descriptor";
    ASSERT_EQ(out->send(frame, sizeof(frame)), 0);
    int got = 0;
    in->poll(
        [&](uint32_t ring, void *f, size_t len) {
            EXPECT_EQ(ring, 1u);
            EXPECT_EQ(len, sizeof(frame));
            EXPECT_EQ(memcmp(f, frame, sizeof(frame)), 0);
            ++got;
        },
        10);
    EXPECT_EQ(got, 1);
    // The cookie still decides: a descriptor of another segment is refused.
    EXPECT_EQ(Outbox::attach_from_process(static_cast<uint32_t>(getpid()), in->fd(), 1,
                                          in->cookie() + 1, err),
              nullptr);
    EXPECT_EQ(err, -EKEYREJECTED);
    // A descriptor the process does not have.
    EXPECT_EQ(
        Outbox::attach_from_process(static_cast<uint32_t>(getpid()), 1 << 20, 1, in->cookie(), err),
        nullptr);
    EXPECT_EQ(err, -ENOENT);
}

TEST(ShmRingRemoved, TheOwnersEndLeavesAnotherFileAtItsName) {
    int err = 0;
    const std::string path = temp_path("taken");
    auto in = Inbox::create(path, small(), err);
    ASSERT_NE(in, nullptr) << err;
    ASSERT_EQ(unlink(path.c_str()), 0);
    FILE *f = fopen(path.c_str(), "w"); // another job's file at the name
    ASSERT_NE(f, nullptr);
    fclose(f);
    in.reset();
    struct stat st;
    EXPECT_EQ(stat(path.c_str(), &st), 0) << "the owner removed a file that was not its own";
    unlink(path.c_str());
    // Its own file it still removes.
    auto again = Inbox::create(path, small(), err);
    ASSERT_NE(again, nullptr) << err;
    again.reset();
    EXPECT_NE(stat(path.c_str(), &st), 0);
}

} // namespace
