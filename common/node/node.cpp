// The on-node stack of one process (node.hpp) and its C seam (efa_node.h).
#include "node.hpp"

#include <cerrno>
#include <cstdio>
#include <mutex>
#include <new>

#include <unistd.h>

#include "efa_cma.h"

namespace {
// The inbox file of process vpid of the job.
std::string file_of(const std::string &dir, const std::string &job_tag, uint32_t vpid) {
    return dir + "/efa_node." + job_tag + "." + std::to_string(vpid);
}
} // namespace

namespace efa::node {

std::unique_ptr<Node> Node::create(const efa_node_params_t &p, int &err) {
    err = 0;
    if (!p.dir || !p.job_tag || 0 == p.nlocal || p.local_rank >= p.nlocal ||
        p.nlocal > UINT32_MAX / EFA_NODE_CHANNELS) {
        err = -EINVAL;
        return nullptr;
    }
    std::unique_ptr<Node> n(new (std::nothrow) Node());
    if (!n) {
        err = -ENOMEM;
        return nullptr;
    }
    n->dir_ = p.dir;
    n->job_tag_ = p.job_tag;
    n->local_rank_ = p.local_rank;
    n->nlocal_ = p.nlocal;
    shm::Geometry g;
    g.nrings = EFA_NODE_CHANNELS * p.nlocal;
    g.nslots = p.slots;
    g.slot_size = p.slot_size;
    // Only the control pages now: each channel reserves its rings when it
    // opens (open_channel), so a process whose engine is off does not pay
    // for the engine's rings.
    n->inbox_ = shm::Inbox::create(file_of(n->dir_, n->job_tag_, p.my_vpid), g, err, false);
    if (!n->inbox_) {
        return nullptr;
    }
    n->inbox_->set_one_thread(p.one_thread);
    return n;
}

std::string Node::path_of(uint32_t vpid) const {
    return file_of(dir_, job_tag_, vpid);
}

efa_node_card_t Node::card() const {
    efa_node_card_t c{};
    c.cookie = inbox_->cookie();
    c.local_rank = local_rank_;
    c.channels = channels_;
    c.cma_cookie = efa_cma_cookie(&c.cma_cookie_addr);
    c.pid = static_cast<uint32_t>(getpid());
    c.inbox_fd = inbox_->fd() >= 0 ? static_cast<uint32_t>(inbox_->fd()) + 1 : 0;
    return c;
}

int Node::open_channel(uint32_t c, bool reserve) {
    if (c >= EFA_NODE_CHANNELS) {
        return -EINVAL;
    }
    if (reserve) {
        const int rc = inbox_->reserve_rings(c * nlocal_, nlocal_);
        if (rc) {
            return rc;
        }
    }
    channels_ |= 1u << c;
    return 0;
}

std::unique_ptr<shm::Outbox> Node::attach(uint32_t vpid, const efa_node_card_t &card, uint32_t c,
                                          int &err) const {
    if (c >= EFA_NODE_CHANNELS || !(card.channels & (1u << c)) || 0 == card.cookie) {
        err = -ENOENT; // that process does not serve this channel
        return nullptr;
    }
    const uint32_t ring = c * nlocal_ + local_rank_;
    auto out = shm::Outbox::attach(path_of(vpid), ring, card.cookie, err);
    const bool name_taken =
        -EKEYREJECTED == err || -EACCES == err || -ELOOP == err || -EPROTO == err;
    if (!out && (-ENOENT == err || name_taken) && 0 != card.pid && 0 != card.inbox_fd) {
        // The name is gone (removed by someone else: systemd-logind's
        // RemoveIPC at the end of the user's last session) or is another
        // file's (one of another user, a link, one that is no inbox,
        // planted at the name since): the process's own descriptor still
        // reaches its inbox (checked as the name's file is: owner, cookie).
        int again = 0;
        out = shm::Outbox::attach_from_process(card.pid, static_cast<int>(card.inbox_fd - 1), ring,
                                               card.cookie, again);
        if (out) {
            err = 0;
            by_descriptor_.fetch_add(1, std::memory_order_relaxed);
        }
    }
    return out;
}

} // namespace efa::node

namespace efa::node {
Node &of(efa_node_t *n) {
    return *n->node;
}

efa_node_t *adopt(std::unique_ptr<Node> n) {
    auto *h = new (std::nothrow) efa_node();
    if (h) {
        h->node = std::move(n);
        h->refs = 1;
    }
    return h;
}
} // namespace efa::node

// The C seam (efa_node.h)

namespace {
std::mutex g_lock;
efa_node_t *g_node = nullptr; // the process's one node, while referenced
} // namespace

extern "C" {

// The process's one node: created by the first acquire, deleted (its file
// unlinked) by the last release.
efa_node_t *efa_node_acquire(const efa_node_params_t *p, bool *created, int *err) {
    std::lock_guard<std::mutex> hold(g_lock);
    *created = false;
    *err = 0;
    if (g_node) {
        ++g_node->refs;
        return g_node;
    }
    auto node = efa::node::Node::create(*p, *err);
    if (!node) {
        return nullptr;
    }
    efa_node_t *n = efa::node::adopt(std::move(node));
    if (!n) {
        *err = -ENOMEM;
        return nullptr;
    }
    g_node = n;
    *created = true;
    return n;
}

void efa_node_release(efa_node_t *n) {
    std::lock_guard<std::mutex> hold(g_lock);
    if (n && 0 == --n->refs) {
        if (g_node == n) {
            g_node = nullptr;
        }
        delete n; // unlinks the inbox
    }
}

void efa_node_file(const efa_node_params_t *p, uint32_t vpid, char *buf, size_t len) {
    if (len) {
        snprintf(buf, len, "%s",
                 file_of(p->dir ? p->dir : "", p->job_tag ? p->job_tag : "", vpid).c_str());
    }
}

const char *efa_node_path(const efa_node_t *n) {
    return n->node->path().c_str();
}

void efa_node_peer_file(const efa_node_t *n, uint32_t vpid, char *buf, size_t len) {
    if (len) {
        snprintf(buf, len, "%s", n->node->path_of(vpid).c_str());
    }
}

void efa_node_my_card(const efa_node_t *n, efa_node_card_t *out) {
    *out = n->node->card();
}

int efa_node_open_channel(efa_node_t *n, unsigned channel, bool reserve) {
    return n->node->open_channel(channel, reserve);
}

void efa_node_close_channel(efa_node_t *n, unsigned channel) {
    if (channel < EFA_NODE_CHANNELS) {
        n->node->close_channel(channel);
    }
}

size_t efa_node_max_frame(const efa_node_t *n) {
    return n->node->max_frame();
}

uint64_t efa_node_dropped(const efa_node_t *n) {
    return n->node->dropped();
}

uint32_t efa_node_by_descriptor(const efa_node_t *n) {
    return n->node->by_descriptor();
}

uint32_t *efa_node_doorbell(efa_node_t *n) {
    return n->node->inbox()->doorbell();
}

efa_ring_consumer *efa_node_consumer(efa_node_t *n, unsigned channel, uint32_t *first,
                                     uint32_t *count) {
    const efa::node::Node &node = *n->node;
    *first = channel * node.nlocal();
    *count = node.nlocal();
    return node.inbox()->consumer();
}

static_assert(EFA_NODE_SENDER_NONE == efa::shm::kSenderNone &&
              EFA_NODE_SENDER_ATTACHED == efa::shm::kSenderAttached &&
              EFA_NODE_SENDER_LEFT == efa::shm::kSenderLeft);

int efa_node_ring_sender(const efa_node_t *n, uint32_t ring) {
    return static_cast<int>(n->node->inbox()->sender(ring));
}

bool efa_node_ring_sender_present(const efa_node_t *n, uint32_t ring) {
    return EFA_NODE_SENDER_ATTACHED == efa_node_ring_sender(n, ring);
}

efa_shm_outbox_t *efa_node_attach(const efa_node_t *n, uint32_t vpid, const efa_node_card_t *card,
                                  unsigned channel, int *err) {
    int rc = 0;
    auto out = n->node->attach(vpid, *card, channel, rc);
    efa_shm_outbox_t *o = nullptr;
    if (out) {
        o = new (std::nothrow) efa_shm_outbox();
        if (o) {
            o->out = std::move(out);
        } else {
            rc = -ENOMEM;
        }
    }
    *err = o ? 0 : rc;
    return o;
}

} // extern "C"
