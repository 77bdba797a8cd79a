// The on-node stack of one process (node.hpp) and its C seam (efa_node.h).
#include "node.hpp"

#include <cerrno>
#include <cstdio>
#include <mutex>
#include <new>

#include <unistd.h>

#include "cma.hpp"

namespace efa::node {

std::string file_of(const std::string &dir, const std::string &job_tag, uint32_t vpid) {
    return dir + "/efa_node." + job_tag + "." + std::to_string(vpid);
}

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
    c.cma_cookie = cma::cookie(&c.cma_cookie_addr);
    c.pid = static_cast<uint32_t>(getpid());
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
    return shm::Outbox::attach(path_of(vpid), c * nlocal_ + local_rank_, card.cookie, err);
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

namespace {
std::mutex g_lock;
efa_node_t *g_node = nullptr; // the process's one node, while referenced
} // namespace

namespace efa::node {

efa_node_t *acquire_shared(const efa_node_params_t &p, bool &created, int &err) {
    std::lock_guard<std::mutex> hold(g_lock);
    created = false;
    err = 0;
    if (g_node) {
        ++g_node->refs;
        return g_node;
    }
    auto node = Node::create(p, err);
    if (!node) {
        return nullptr;
    }
    efa_node_t *n = adopt(std::move(node));
    if (!n) {
        err = -ENOMEM;
        return nullptr;
    }
    g_node = n;
    created = true;
    return n;
}

void release_shared(efa_node_t *n) {
    std::lock_guard<std::mutex> hold(g_lock);
    if (n && 0 == --n->refs) {
        if (g_node == n) {
            g_node = nullptr;
        }
        delete n; // unlinks the inbox
    }
}

efa_shm_outbox_t *attach_handle(const efa_node_t *n, uint32_t vpid, const efa_node_card_t &card,
                                unsigned channel, int &err) {
    auto out = n->node->attach(vpid, card, channel, err);
    if (!out) {
        return nullptr;
    }
    auto *o = new (std::nothrow) efa_shm_outbox();
    if (!o) {
        err = -ENOMEM;
        return nullptr;
    }
    o->out = std::move(out);
    return o;
}

} // namespace efa::node
