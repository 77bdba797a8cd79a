// FiMrBackend (core.hpp): registrations with the NICs' domains for the
// core's cache.
#include "core.hpp"

#include "device_span.hpp"
#include "efa_core.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include <rdma/fi_errno.h>

namespace efa {

// The attributes of a device allocation for fi_mr_regattr.
static void device_attr(const efa_device_hmem_t &h, fi_mr_attr *attr) {
    attr->iface = static_cast<enum fi_hmem_iface>(h.iface);
    switch (attr->iface) {
    case FI_HMEM_CUDA:
        attr->device.cuda = static_cast<int>(h.device);
        break;
    case FI_HMEM_ZE:
        attr->device.ze = static_cast<int>(h.device);
        break;
    default:
        attr->device.reserved = h.device;
        break;
    }
}

// fi_mr_regattr with a device allocation's flags (device_mr_flags); a
// provider that knows no FI_HMEM_DEVICE_ONLY (-FI_EBADFLAGS) is asked
// again without it.
static int regattr_device(fid_domain *domain, const fi_mr_attr &attr, uint64_t flags, fid_mr **mr) {
    const uint64_t device_only = device_mr_flags(attr.iface);
    int rc = fi_mr_regattr(domain, &attr, flags | device_only, mr);
    if (rc == -FI_EBADFLAGS && device_only) {
        rc = fi_mr_regattr(domain, &attr, flags, mr);
    }
    return rc;
}

int FiMrBackend::reg_one(const Domain &d, void *base, size_t len, uint64_t access, uint64_t key,
                         const efa_device_hmem_t *hmem, fid_mr **out) {
    fid_mr *mr = nullptr;
    int rc;
    if (hmem) {
        const iovec iov{base, len};
        fi_mr_attr attr{};
        attr.mr_iov = &iov;
        attr.iov_count = 1;
        attr.access = access;
        attr.requested_key = key;
        device_attr(*hmem, &attr);
        rc = regattr_device(d.domain, attr, 0, &mr);
    } else {
        rc = fi_mr_reg(d.domain, base, len, access, 0, key, 0, &mr, nullptr);
    }
    if (!hmem && rc == -FI_ENOKEY && !(access & (FI_REMOTE_READ | FI_REMOTE_WRITE))) {
        // libfabric 2.x's ofi_rxm with FI_ATOMIC files every registration in
        // a key map, and every local-only one has the same key there
        // (FI_KEY_NOTAVAIL): the second fails.  As a send buffer too, rxm
        // registers it for its rendezvous reads, which gives it a key of its
        // own.  Reproducer: tests/provider-defects/rxm_local_mr_key.c.
        rc = fi_mr_reg(d.domain, base, len, access | FI_SEND, 0, keys_->fetch_add(1), 0, &mr,
                       nullptr);
    }
    if (rc || (rc = bind_and_enable(d, mr))) {
        return rc;
    }
    *out = mr;
    return 0;
}

// FI_MR_ENDPOINT: the MR is usable only once bound to the endpoints that
// use it and enabled; every context may carry operations on any
// registration, so it is bound to all of them.  Closed where that fails.
int FiMrBackend::bind_and_enable(const Domain &d, fid_mr *mr) {
    int rc = 0;
    for (fid_ep *ep : d.bind_eps) {
        if ((rc = fi_mr_bind(mr, &ep->fid, 0))) {
            break;
        }
    }
    if (!rc && !d.bind_eps.empty()) {
        rc = fi_mr_enable(mr);
    }
    if (rc) {
        fi_close(&mr->fid);
    }
    return rc;
}

// The allocation h through the dmabuf its device exports: the provider
// then pins the pages the driver hands over (on EFA ibv_reg_dmabuf_mr)
// instead of asking a peer-memory kernel module to translate a device
// address.  -FI_ENODATA: the device exported none (this allocation goes
// the plain way); another error with *refused: the provider refused such
// a registration (dmabuf goes off); without: it had no room now (the
// NIC's registrations, the locked-memory limit), or binding the
// registration failed, which says nothing of dmabuf.
int FiMrBackend::reg_dmabuf(const Domain &d, void *base, size_t len, uint64_t access, uint64_t key,
                            const efa_device_hmem_t &h, fid_mr **out, bool *refused) {
    *refused = false;
#ifdef FI_MR_DMABUF
    int fd = -1;
    uint64_t offset = 0;
    if (efa_device_dmabuf(&h, &fd, &offset) != 0 || fd < 0) {
        return -FI_ENODATA;
    }
    // base_addr + offset is the registration's address: base, which lies
    // (base - h.base) bytes into the allocation.
    const uint64_t at = offset + (reinterpret_cast<uintptr_t>(base) - h.base);
    const fi_mr_dmabuf db{fd, at, len, static_cast<uint8_t *>(base) - at};
    fi_mr_attr attr{};
    attr.dmabuf = &db;
    attr.iov_count = 1;
    attr.access = access;
    attr.requested_key = key;
    device_attr(h, &attr);
    fid_mr *mr = nullptr;
    int rc = regattr_device(d.domain, attr, FI_MR_DMABUF, &mr);
    close(fd); // the registration holds the pages, not the descriptor
    if (rc != 0) {
        *refused = rc != -FI_ENOMEM && rc != -FI_EAGAIN && rc != -FI_ENOSPC;
        return rc == -FI_ENODATA ? -FI_EINVAL : rc;
    }
    if ((rc = bind_and_enable(d, mr)) == 0) {
        *out = mr;
    }
    return rc == -FI_ENODATA ? -FI_EINVAL : rc;
#else
    (void)d, (void)base, (void)len, (void)access, (void)key, (void)h, (void)out;
    *refused = true;
    return -FI_ENOSYS;
#endif
}

// A device allocation (or CUDA VMM allocations side by side, as one
// range: device_span.hpp): described by the device (its interface, device
// and id), registered through its dmabuf first, on the first NIC and,
// where peers may reach it or a read or write of this process lands in
// or leaves from it, on the rails too (as host ranges), so that one
// transfer of device memory can be striped over every NIC of the process
// (on a GPU node those of the GPU's PCIe switch).  A rail that refuses
// leaves the allocation on the rails before it.
int FiMrBackend::reg_device(void *base, size_t len, uint64_t access, MrRegistration *out) {
    DeviceSpan span;
    int rc = describe_device_span(base, len, &span);
    if (rc) {
        return rc;
    }
    if ((rc = note_span(span, out))) {
        return rc;
    }
    const efa_device_hmem_t &h = span.whole; // (CUDA VMM: maybe several allocations)
    const uint64_t key = keys_->fetch_add(1);
    bool by_dmabuf = false;
    fid_mr *mr = nullptr;
    const bool several = span.pieces > 1;
    if ((rc = reg_device_on(0, base, len, access, key, h, several, &mr, &by_dmabuf))) {
        return rc;
    }
    if (by_dmabuf) {
        dmabuf_regs_.fetch_add(1, std::memory_order_relaxed);
    }
    if (span.pieces > 1) {
        span_regs_.fetch_add(1, std::memory_order_relaxed);
    }
    out->handle = mr;
    out->desc = fi_mr_desc(mr);
    out->key = fi_mr_key(mr);
    out->rails = 1;
    out->buffer_id = h.buffer_id;
    out->device = true;
    out->no_sync_memops = h.no_sync_memops;
    // (a device buffer needs its descriptor whatever FI_MR_LOCAL says)
    if ((access & (FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ | FI_WRITE)) != 0) {
        add_rails(base, len, access, key, &h, several, out);
    }
    return 0;
}

// The allocation h on NIC nic's domain: through its dmabuf while that is
// on (*by_dmabuf says whether it went so), else by its address.  The
// first NIC's refusal turns dmabuf off for good; a rail's, for that rail
// alone (the first NIC's registrations, which every device buffer has,
// keep theirs).  A range over several allocations (span) that is
// refused turns it off for such ranges alone: one allocation's dmabuf
// may still be taken where a range's is not.  A failure for room is no
// refusal: it is the caller's, dmabuf stays on; a registration taken
// that would not bind to the endpoints goes by address, dmabuf on.
int FiMrBackend::reg_device_on(size_t nic, void *base, size_t len, uint64_t access, uint64_t key,
                               const efa_device_hmem_t &h, bool span, fid_mr **out,
                               bool *by_dmabuf) {
    const Domain &d = domains_[nic];
    const uint32_t bit = 1u << nic;
    *by_dmabuf = false;
    if (dmabuf_.load(std::memory_order_relaxed) &&
        !(dmabuf_off_rails_.load(std::memory_order_relaxed) & bit) &&
        !(span && span_dmabuf_off_.load(std::memory_order_relaxed))) {
        bool refused = false;
        const int rc = reg_dmabuf(d, base, len, access, key, h, out, &refused);
        if (rc == 0) {
            *by_dmabuf = true;
            return 0;
        }
        if (!refused && (rc == -FI_ENOMEM || rc == -FI_EAGAIN || rc == -FI_ENOSPC)) {
            return rc; // (no room: the cache lets its idle ones go and asks again)
        }
        if (span && refused) {
            if (!span_dmabuf_off_.exchange(true) && dmabuf_rep_) {
                dmabuf_rep_->say(1, std::string("device registrations: the provider refused "
                                                "one over several CUDA VMM allocations "
                                                "through a dmabuf (") +
                                        fi_strerror(-rc) +
                                        "); such ranges by device address from now on");
            }
            return reg_one(d, base, len, access, key, &h, out);
        }
        // (-FI_ENODATA: no dmabuf for this allocation, not a refusal; a
        // registration taken that would not bind: by address, dmabuf on)
        const bool first_refusal = refused && (nic > 0 ? !(dmabuf_off_rails_.fetch_or(bit) & bit)
                                                       : dmabuf_.exchange(false));
        if (first_refusal && dmabuf_rep_) {
            dmabuf_rep_->say(1, std::string("device registrations: the provider refused one "
                                            "through a dmabuf") +
                                    (nic > 0 ? " on NIC " + std::to_string(nic) : "") + " (" +
                                    fi_strerror(-rc) + "); device addresses " +
                                    (nic > 0 ? "there " : "") + "from now on");
        }
    }
    return reg_one(d, base, len, access, key, &h, out);
}

int FiMrBackend::reg(void *base, size_t len, uint64_t access, MrRegistration *out) {
    if (device_) {
        return reg_device(base, len, access, out);
    }
    // Without FI_MR_PROV_KEY the key asked for is the key: a per-process
    // counter keeps every registration of a domain distinct, and the other
    // rails' domains take the same number.
    const uint64_t key = keys_->fetch_add(1);
    fid_mr *mr = nullptr;
    int rc = reg_one(domains_[0], base, len, access, key, nullptr, &mr);
    if (rc) {
        return rc;
    }
    out->handle = mr;
    out->desc = fi_mr_desc(mr);
    out->key = fi_mr_key(mr);
    out->rails = 1;
    // Only what striped one-sided transfers touch goes on the rails: ranges
    // registered for remote access, and their local buffers where the
    // provider wants descriptors.  A rail that refuses leaves the range on
    // the rails before it.
    if ((access & (FI_REMOTE_READ | FI_REMOTE_WRITE)) != 0 ||
        (mr_local_ && (access & (FI_READ | FI_WRITE)) != 0)) {
        add_rails(base, len, access, key, nullptr, false, out);
    }
    return 0;
}

// The range, registered on the first NIC as out, on the rails' domains
// too with the same key (a device allocation h as such), until one
// refuses: the range stays on the rails before it (and the cache may
// try again where that rail had no room: rails_short_of_room).
void FiMrBackend::add_rails(void *base, size_t len, uint64_t access, uint64_t key,
                            const efa_device_hmem_t *h, bool span, MrRegistration *out) {
    for (size_t r = 1; r < domains_.size() && r < static_cast<size_t>(kMrMaxRails); ++r) {
        fid_mr *rmr = nullptr;
        bool by_dmabuf = false;
        const int rc = h ? reg_device_on(r, base, len, access, key, *h, span, &rmr, &by_dmabuf)
                         : reg_one(domains_[r], base, len, access, key, nullptr, &rmr);
        if (rc != 0) {
            out->rails_short_of_room = rc == -FI_ENOMEM || rc == -FI_EAGAIN || rc == -FI_ENOSPC;
            break;
        }
        MrRegistration::Rail &rail = out->rail[r - 1];
        rail.handle = rmr;
        rail.desc = fi_mr_desc(rmr);
        rail.key = fi_mr_key(rmr);
        out->rails = static_cast<int>(r) + 1;
    }
}

void FiMrBackend::close_mr(void *handle) {
    const int rc = fi_close(&static_cast<fid_mr *>(handle)->fid);
    if (rc != 0 && closes_failed_.fetch_add(1, std::memory_order_relaxed) == 0 && close_rep_) {
        close_rep_->say(0, std::string("a memory registration could not be closed (fi_close: ") +
                               fi_strerror(-rc) +
                               "): its pages stay registered with the NIC until the process "
                               "ends (said once)");
    }
}

void FiMrBackend::dereg(const MrRegistration &r) {
    if (r.handle) {
        close_mr(r.handle);
    }
    for (int i = 1; i < r.rails; ++i) {
        if (r.rail[i - 1].handle) {
            close_mr(r.rail[i - 1].handle);
        }
    }
}

MrCacheConfig mr_cache_config(const efa_core_params_t &params) {
    MrCacheConfig c;
    c.max_cached_entries = static_cast<size_t>(std::max(params.mr_cache_size, 0));
    c.exact_access = FI_REMOTE_READ | FI_REMOTE_WRITE;
    c.reuse = params.mem_release_hooks;
    return c;
}

} // namespace efa

// efa_core.h: a cached registration's range, and its keys and descriptors
// on the first NIC and the rails.
using efa::MrEntry;
using efa::MrRegistration;

extern "C" {
void *efa_mr_desc(const efa_mr_t *mr) {
    return reinterpret_cast<const MrEntry *>(mr)->reg.desc;
}
uint64_t efa_mr_key(const efa_mr_t *mr) {
    return reinterpret_cast<const MrEntry *>(mr)->reg.key;
}
uintptr_t efa_mr_base(const efa_mr_t *mr) {
    return reinterpret_cast<const MrEntry *>(mr)->base;
}
size_t efa_mr_len(const efa_mr_t *mr) {
    return reinterpret_cast<const MrEntry *>(mr)->len;
}

int efa_mr_rails(const efa_mr_t *mr) {
    return reinterpret_cast<const MrEntry *>(mr)->reg.rails;
}
uint64_t efa_mr_rail_key(const efa_mr_t *mr, int rail) {
    const MrRegistration &r = reinterpret_cast<const MrEntry *>(mr)->reg;
    return rail <= 0 ? r.key : rail < r.rails ? r.rail[rail - 1].key : FI_KEY_NOTAVAIL;
}
void *efa_mr_rail_desc(const efa_mr_t *mr, int rail) {
    const MrRegistration &r = reinterpret_cast<const MrEntry *>(mr)->reg;
    return rail <= 0 ? r.desc : rail < r.rails ? r.rail[rail - 1].desc : nullptr;
}
} // extern "C"
