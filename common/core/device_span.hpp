// A device buffer described for its registration: the allocation that
// holds its first byte and, for CUDA VMM memory, the allocations mapped
// side by side after it that the buffer runs into (PyTorch's expandable
// segments grow one address range a physical allocation at a time, so a
// tensor may lie across two).  One registration then covers them all
// (efa_core_mr_acquire_device, FiMrBackend::reg_device): a dmabuf of the
// whole range, or the range by address.
#pragma once

#include <cstddef>
#include <cstdint>

#include "efa_device.h"
#include "mr_cache.hpp"

namespace efa {

struct DeviceSpan {
    // The allocations together: base and len their range; iface, device
    // and no_sync_memops the first's (the others' must agree); buffer_id
    // the first's id, or for several a key made of all their ids (never 0).
    efa_device_hmem_t whole{};
    int pieces = 0;
    size_t len[kMrMaxPieces]; // (the first 'pieces' set: not cleared per message)
    uint64_t id[kMrMaxPieces];
};

// [buf, buf + len) described through the device backend (efa_device_hmem):
// 0; -FI_EINVAL where an allocation cannot be described, has no id, or the
// buffer runs past an allocation that is not CUDA VMM memory (no other
// kind is mapped side by side) or into one of another device; -FI_E2BIG
// where it runs over more than kMrMaxPieces allocations; the backend's
// error (-FI_ENOSYS: none).
int describe_device_span(const void *buf, size_t len, DeviceSpan *out);

// Does registration r hold each allocation of s as it was when registered
// (the same place, length and id: none freed and handed out again)?  A
// registration over more allocations than s holds it too, if those are
// as they were (efa_core_mr_acquire_device asks the device for them).
bool span_registered(const MrRegistration &r, const DeviceSpan &s);

// span_registered, and where r covers more allocations than s, those too
// as they are now (asked of the device): a registration over CUDA VMM
// pieces of which one was unmapped is not used on (by address the NIC's
// mapping of it may be gone; by dmabuf it would keep the old pages
// pinned while it is used), it is registered anew over what is there.
bool registration_current(const MrRegistration &r, const DeviceSpan &s);

// Note s's allocations in r (its registration), before it is made: 0, or
// -FI_ENOMEM where there is no memory for the list.
int note_span(const DeviceSpan &s, MrRegistration *r) noexcept;

} // namespace efa
