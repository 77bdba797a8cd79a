#include "nic.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include "locked_memory.hpp"
#include "provider_options.hpp"

namespace efa {

namespace {
int fail(const Reporter &rep, const char *call, int rc, const fi_info *info) {
    say_open_failed(rep, call, rc, info, locked_memory());
    return rc;
}

// shm names each endpoint's shared-memory region after the process id.  A
// process that died without cleaning up (killed, aborted) leaves its region
// in /dev/shm, and a later process that gets the same pid back then fails
// fi_enable with EBUSY.  Give shm a name of our own that no earlier process
// can have held: pid, start time in nanoseconds and context index.
InfoPtr unique_shm_name(const fi_info *info, int index) {
    if (info->addr_format != FI_ADDR_STR || std::string(info->fabric_attr->prov_name) != "shm") {
        return nullptr;
    }
    InfoPtr copy = dup_one(info);
    if (!copy) {
        return nullptr;
    }
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    std::string name = shm_endpoint_name(getpid(), ts.tv_sec, ts.tv_nsec, index);
    free(copy->src_addr);
    copy->src_addr = strdup(name.c_str());
    copy->src_addrlen = name.size() + 1;
    return copy;
}
} // namespace

std::string shm_endpoint_name(long pid, long long sec, long nsec, int index) {
    char name[96];
    snprintf(name, sizeof(name), "efa-%010ld-%011lld%09ld-%02d", pid, sec, nsec, index);
    return name;
}

fi_cq_format cq_format_for(const fi_info *info) {
    return (info->caps & FI_TAGGED) ? FI_CQ_FORMAT_TAGGED : FI_CQ_FORMAT_DATA;
}

std::unique_ptr<Nic> Nic::open(const fi_info *src, const efa_core_params_t &params, efa_core *core,
                               const Reporter &rep, int *err) {
    const int num_contexts = params.num_contexts;
    std::unique_ptr<Nic> nic(new Nic());
    nic->info_ = dup_one(src);
    if (!nic->info_) {
        *err = -FI_ENOMEM;
        return nullptr;
    }
    fi_info *info = nic->info_.get();
    fid_fabric *fabric = nullptr;
    int rc = fi_fabric(info->fabric_attr, &fabric, nullptr);
    if (rc) {
        *err = fail(rep, "fi_fabric", rc, info);
        return nullptr;
    }
    nic->fabric_.reset(fabric);
    fid_domain *domain = nullptr;
    rc = fi_domain(fabric, info, &domain, nullptr);
    if (rc) {
        *err = fail(rep, "fi_domain", rc, info);
        return nullptr;
    }
    nic->domain_.reset(domain);
    fi_av_attr av_attr = {};
    av_attr.type = FI_AV_TABLE;
    fid_av *av = nullptr;
    rc = fi_av_open(domain, &av_attr, &av, nullptr);
    if (rc) {
        *err = fail(rep, "fi_av_open", rc, info);
        return nullptr;
    }
    nic->av_.reset(av);

    for (int i = 0; i < num_contexts; ++i) {
        nic->ctxs_.push_back(std::make_unique<efa_ctx>());
    }
    for (int i = 0; i < num_contexts; ++i) {
        fi_cq_attr cq_attr = {};
        cq_attr.format = efa::cq_format_for(info);
        cq_attr.wait_obj = FI_WAIT_NONE; // we poll from opal_progress
        // Room for every posted operation's completion, and never tiny: a
        // small tx/rx queue (tests make them tiny on purpose) must not
        // shrink the CQ, or completions back up inside the provider.
        cq_attr.size = std::max<size_t>(info->tx_attr->size + info->rx_attr->size, 4096);
        fid_cq *cq = nullptr;
        rc = fi_cq_open(domain, &cq_attr, &cq, nullptr);
        if (rc) {
            *err = fail(rep, "fi_cq_open", rc, info);
            return nullptr;
        }
        nic->cqs_.emplace_back(cq);
        fid_ep *ep = nullptr;
        InfoPtr named = unique_shm_name(info, i);
        rc = fi_endpoint(domain, named ? named.get() : info, &ep, nullptr);
        if (rc) {
            *err = fail(rep, "fi_endpoint", rc, info);
            return nullptr;
        }
        nic->eps_.emplace_back(ep);
        // Every context gets the same switches; the first one's outcome
        // is what the report says, and a switch another context took
        // otherwise is unknown (merge_switches).
        ProviderSwitches sw;
        apply_switches_before_enable(ep, info, params, &sw);
        if ((rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) ||
            (rc = fi_ep_bind(ep, &av->fid, 0)) || (rc = fi_enable(ep))) {
            *err = fail(rep, "fi_ep_bind/fi_enable", rc, info);
            return nullptr;
        }
        size_t len = 0;
        fi_getname(&ep->fid, nullptr, &len); // learn the size first
        if (i == 0) {
            nic->addr_len_ = len;
            nic->names_.resize(len * num_contexts);
        }
        if (len != nic->addr_len_) {
            *err = fail(rep, "fi_getname", -FI_EOTHER, info);
            return nullptr;
        }
        rc = fi_getname(&ep->fid, nic->names_.data() + i * len, &len);
        if (rc) {
            *err = fail(rep, "fi_getname", rc, info);
            return nullptr;
        }
        efa_ctx &c = *nic->ctxs_[i];
        c.ep = ep;
        c.cq = cq;
        c.tagged_cq = FI_CQ_FORMAT_TAGGED == cq_attr.format;
        c.core = core;
        c.index = i;
        // The untagged pool of the BTL may take up to a quarter of the
        // queue; of the rest, an eighth (at least 4) is kept for internal
        // receives.
        if (info->rx_attr->size > 0 && info->rx_attr->size < (1u << 30)) {
            int size = static_cast<int>(info->rx_attr->size);
            c.rx_capacity = size - std::min(32, size / 4);
            c.rx_user_capacity = c.rx_capacity - std::max(4, c.rx_capacity / 8);
            if (c.rx_user_capacity < 1) {
                c.rx_user_capacity = 1;
            }
        }
        if (i == 0) {
            read_switches_after_enable(ep, info, params, &sw);
            nic->switches_ = std::move(sw);
        } else {
            merge_switches(&nic->switches_, sw,
                           std::string(info->domain_attr->name) + " context " + std::to_string(i));
        }
    }
    return nic;
}

void Nic::close_endpoints() {
    eps_.clear();
}

Nic::~Nic() {
    // Endpoints before their CQs and the AV; then domain, then fabric.
    eps_.clear();
    cqs_.clear();
    av_.reset();
    domain_.reset();
    fabric_.reset();
}

} // namespace efa
