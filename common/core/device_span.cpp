// Device buffers over several allocations side by side (device_span.hpp).
#include "device_span.hpp"

#include <new>

#include <rdma/fi_errno.h>

namespace efa {

int describe_device_span(const void *buf, size_t len, DeviceSpan *out) {
    efa_device_hmem_t h{};
    int rc = efa_device_hmem(buf, len ? len : 1, &h);
    if (rc) {
        return rc;
    }
    const uintptr_t start = reinterpret_cast<uintptr_t>(buf);
    const uintptr_t end = start + (len ? len : 1);
    if (end < start || start < h.base || start - h.base >= h.len) {
        return -FI_EINVAL; // (a backend that described another allocation)
    }
    out->whole = h;
    out->pieces = 1;
    out->len[0] = h.len;
    out->id[0] = h.buffer_id;
    uintptr_t at = h.base + h.len;
    uint64_t key = h.buffer_id;
    while (at < end) {
        // Only CUDA VMM memory maps allocations side by side; a buffer that
        // runs past a cudaMalloc allocation is the caller's error.
        if (!out->whole.no_sync_memops || 0 == h.buffer_id) {
            return -FI_EINVAL;
        }
        if (out->pieces == kMrMaxPieces) {
            return -FI_E2BIG;
        }
        rc = efa_device_hmem(reinterpret_cast<const void *>(at), end - at, &h);
        if (rc || h.base != at || 0 == h.len || !h.no_sync_memops || 0 == h.buffer_id ||
            h.iface != out->whole.iface || h.device != out->whole.device) {
            return -FI_EINVAL;
        }
        out->len[out->pieces] = h.len;
        out->id[out->pieces] = h.buffer_id;
        ++out->pieces;
        // (a key for the refusals remembered by id: any mix of the ids, as
        // a collision only sends a buffer through the host)
        key = (key ^ h.buffer_id) * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(out->pieces);
        at += h.len;
    }
    out->whole.len = at - out->whole.base;
    // (one allocation keeps its id, 0 included: the caller refuses an
    // allocation the device gives no id, which could be freed unseen)
    out->whole.buffer_id = 1 == out->pieces ? out->id[0] : key ? key : 1;
    return 0;
}

bool span_registered(const MrRegistration &r, const DeviceSpan &s) {
    uintptr_t want = s.whole.base;
    uintptr_t have = r.pieces_base;
    size_t i = 0;
    const size_t n = r.pieces.size();
    for (int j = 0; j < s.pieces; ++j) {
        while (i < n && have < want) {
            have += r.pieces[i++].len;
        }
        if (i == n || have != want || r.pieces[i].len != s.len[j] || r.pieces[i].id != s.id[j]) {
            return false;
        }
        want += s.len[j];
    }
    return s.pieces > 0;
}

bool registration_current(const MrRegistration &r, const DeviceSpan &s) {
    if (!span_registered(r, s)) {
        return false;
    }
    if (r.pieces.size() <= static_cast<size_t>(s.pieces)) {
        return true; // (it holds s's and no more)
    }
    size_t len = 0;
    for (const auto &p : r.pieces) {
        len += p.len;
    }
    DeviceSpan all;
    return 0 == describe_device_span(reinterpret_cast<const void *>(r.pieces_base), len, &all) &&
           static_cast<size_t>(all.pieces) == r.pieces.size() && span_registered(r, all);
}

int note_span(const DeviceSpan &s, MrRegistration *r) noexcept {
    r->pieces_base = s.whole.base;
    r->pieces.clear();
    try {
        r->pieces.reserve(static_cast<size_t>(s.pieces));
    } catch (const std::bad_alloc &) {
        return -FI_ENOMEM; // (out of memory: the registration is not made)
    }
    for (int i = 0; i < s.pieces; ++i) {
        r->pieces.push_back({s.len[i], s.id[i]});
    }
    return 0;
}

} // namespace efa
