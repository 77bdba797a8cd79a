// The device-memory seam (efa_device.h): which backend answers, and the
// calls the components make through it.  The backend is installed once,
// at the core's start, before any message; efa_device_on is read on every
// message without a lock for that reason.
#include <atomic>

#include <rdma/fi_errno.h>

#include "efa_device.h"

namespace {
std::atomic<const efa_device_ops_t *> g_ops{nullptr};
} // namespace

extern "C" {

bool efa_device_on = false;

void efa_device_install(const efa_device_ops_t *ops) {
    g_ops.store(ops, std::memory_order_release);
    efa_device_on = nullptr != ops;
}

const char *efa_device_name(void) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    return ops ? ops->name : nullptr;
}

bool efa_device_check(const void *buf, size_t len) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    return ops && nullptr != buf && ops->check(buf, len) > 0;
}

int efa_device_copy(void *dst, const void *src, size_t len) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    if (!ops) {
        return -FI_ENOSYS;
    }
    return 0 == len ? 0 : ops->copy(dst, src, len);
}

void efa_device_release(void *buf) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    if (ops && ops->release && buf) {
        ops->release(buf);
    }
}

bool efa_device_ipc_on(void) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    return ops && ops->ipc_export;
}

int efa_device_ipc_export(const void *buf, size_t len, efa_device_ipc_t *out) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    return ops && ops->ipc_export ? ops->ipc_export(buf, len, out) : -FI_ENOSYS;
}

int efa_device_ipc_import(uint32_t pid, const efa_device_ipc_t *h, const void *near, void **base) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    return ops && ops->ipc_import ? ops->ipc_import(pid, h, near, base) : -FI_ENOSYS;
}

void efa_device_ipc_close(void *base) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    if (ops && ops->ipc_close && base) {
        ops->ipc_close(base);
    }
}

void efa_device_ipc_release(uint64_t held) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    if (ops && ops->ipc_release && 0 != held) {
        ops->ipc_release(held);
    }
}

bool efa_device_hmem_on(void) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    return ops && ops->hmem;
}

int efa_device_hmem(const void *buf, size_t len, efa_device_hmem_t *out) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    return ops && ops->hmem ? ops->hmem(buf, len, out) : -FI_ENOSYS;
}

bool efa_device_dmabuf_on(void) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    return ops && ops->dmabuf;
}

int efa_device_dmabuf(const efa_device_hmem_t *alloc, int *fd, uint64_t *offset) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    return ops && ops->dmabuf ? ops->dmabuf(alloc, fd, offset) : -FI_ENOSYS;
}

int efa_device_host_register(void *buf, size_t len) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    return ops && ops->host_register ? ops->host_register(buf, len) : -FI_ENOSYS;
}

int efa_device_host_unregister(void *buf) {
    const efa_device_ops_t *ops = g_ops.load(std::memory_order_acquire);
    return ops && ops->host_unregister ? ops->host_unregister(buf) : -FI_ENOSYS;
}

} // extern "C"
