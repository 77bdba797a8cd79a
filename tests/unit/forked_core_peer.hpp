// A peer in another process for the tests that need a real one
// (test_core_probe.cpp, test_engine_watch.cpp): a forked child that opens
// a core of its own, and the two processes' address blobs exchanged over
// pipes, so that each has the other in its table (a probe is answered
// only for a peer in the table).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "core.hpp"

namespace forked_core_peer {

inline bool write_blob(int fd, const std::vector<uint8_t> &blob) {
    const uint32_t n = static_cast<uint32_t>(blob.size());
    return write(fd, &n, sizeof(n)) == sizeof(n) &&
           write(fd, blob.data(), n) == static_cast<ssize_t>(n);
}

inline bool read_all(int fd, void *buf, size_t len) {
    auto *p = static_cast<char *>(buf);
    while (len > 0) {
        ssize_t r = read(fd, p, len);
        if (r <= 0) {
            return false;
        }
        p += r;
        len -= static_cast<size_t>(r);
    }
    return true;
}

inline bool read_blob(int fd, std::vector<uint8_t> *blob) {
    uint32_t n = 0;
    if (!read_all(fd, &n, sizeof(n)) || n > 65536) {
        return false;
    }
    blob->resize(n);
    return read_all(fd, blob->data(), n);
}

// The child's side: a core from 'params', the parent in its table, then
// body(core) (which must not return).  Exit status 2/3: the core or the
// exchange failed.
template <class Body>
[[noreturn]] void child(const efa_core_params_t &params, int to_parent, int from_parent,
                        Body &&body) {
    int err = 0;
    efa_core_t *core = efa_core_acquire(&params, &err);
    if (!core || !write_blob(to_parent, core->blob)) {
        _exit(2);
    }
    std::vector<uint8_t> parent;
    if (!read_blob(from_parent, &parent) ||
        !efa_core_peer_get(core, parent.data(), parent.size(), &err)) {
        _exit(3);
    }
    body(core);
    _exit(0);
}

// The parent's side: forks the child (which runs child_fn(to_parent,
// from_parent)), opens its own core, and exchanges blobs.  false with
// 'why' set when any step fails; *pid is the child's once forked.
template <class ChildFn>
bool start(const efa_core_params_t &params, ChildFn &&child_fn, pid_t *pid, efa_core_t **core,
           efa_peer_t **peer, const char **why) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) {
        *why = "pipe";
        return false;
    }
    *pid = fork();
    if (*pid < 0) {
        *why = "fork";
        return false;
    }
    if (*pid == 0) {
        close(up[0]);
        close(down[1]);
        child_fn(up[1], down[0]);
    }
    close(up[1]);
    close(down[0]);
    int err = 0;
    *core = efa_core_acquire(&params, &err);
    std::vector<uint8_t> blob;
    bool ok = *core != nullptr;
    *why = ok ? nullptr : "efa_core_acquire in the parent";
    if (ok && !read_blob(up[0], &blob)) {
        ok = false;
        *why = "the child did not open its core";
    }
    if (ok && !write_blob(down[1], (*core)->blob)) {
        ok = false;
        *why = "writing the parent's blob";
    }
    close(up[0]);
    close(down[1]);
    if (ok && !(*peer = efa_core_peer_get(*core, blob.data(), blob.size(), &err))) {
        ok = false;
        *why = "efa_core_peer_get of the child";
    }
    return ok;
}

// Kills the child and waits for it.
inline void stop(pid_t pid) {
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
    }
}

// The end of a test: the child killed, then the parent's peer and core.
inline void stop_all(pid_t pid, efa_core_t *core, efa_peer_t *peer) {
    stop(pid);
    if (peer) {
        efa_core_peer_put(core, peer);
    }
    if (core) {
        efa_core_release(core);
    }
}

} // namespace forked_core_peer
