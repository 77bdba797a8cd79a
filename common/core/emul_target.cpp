// The emulated one-sided target (emul_target.hpp).  Requests come from
// other processes: every field is checked before memory is touched.
#include "emul_target.hpp"
#include "path_counts.hpp"

#include <cstring>
#include <new>
#include <thread>
#include <type_traits>

#include <rdma/fi_errno.h>

#include "efa_device.h"

namespace efa {

namespace {

bool covers(const efa_rma_handle_t &h, uint64_t addr, uint64_t len, uint32_t access) {
    return efa_rma_in_range(&h, addr, len) && (h.access & access) == access;
}

bool known_op(uint32_t op) {
    switch (op) {
    case EFA_BTL_WIRE_OP_ADD:
    case EFA_BTL_WIRE_OP_AND:
    case EFA_BTL_WIRE_OP_OR:
    case EFA_BTL_WIRE_OP_XOR:
    case EFA_BTL_WIRE_OP_LAND:
    case EFA_BTL_WIRE_OP_LOR:
    case EFA_BTL_WIRE_OP_LXOR:
    case EFA_BTL_WIRE_OP_SWAP:
    case EFA_BTL_WIRE_OP_MIN:
    case EFA_BTL_WIRE_OP_MAX:
    case EFA_BTL_WIRE_OP_CSWAP:
        return true;
    default:
        return false;
    }
}

// The value an operation leaves when the word holds cur (the operations
// without a CPU instruction of their own: min, max and the logical ones);
// min and max compare as signed, as MPI's integers are.
template <typename T> T combine(uint32_t op, T cur, T a) {
    using S = std::make_signed_t<T>;
    switch (op) {
    case EFA_BTL_WIRE_OP_MIN:
        return static_cast<S>(a) < static_cast<S>(cur) ? a : cur;
    case EFA_BTL_WIRE_OP_MAX:
        return static_cast<S>(a) > static_cast<S>(cur) ? a : cur;
    case EFA_BTL_WIRE_OP_LAND:
        return static_cast<T>(cur && a);
    case EFA_BTL_WIRE_OP_LOR:
        return static_cast<T>(cur || a);
    default: // LXOR
        return static_cast<T>(!cur != !a);
    }
}

// Applies a known op to *p; returns the old value.
template <typename T> uint64_t apply(T *p, uint32_t op, T a, T b) {
    switch (op) {
    case EFA_BTL_WIRE_OP_ADD:
        return __atomic_fetch_add(p, a, __ATOMIC_SEQ_CST);
    case EFA_BTL_WIRE_OP_AND:
        return __atomic_fetch_and(p, a, __ATOMIC_SEQ_CST);
    case EFA_BTL_WIRE_OP_OR:
        return __atomic_fetch_or(p, a, __ATOMIC_SEQ_CST);
    case EFA_BTL_WIRE_OP_XOR:
        return __atomic_fetch_xor(p, a, __ATOMIC_SEQ_CST);
    case EFA_BTL_WIRE_OP_SWAP:
        return __atomic_exchange_n(p, a, __ATOMIC_SEQ_CST);
    case EFA_BTL_WIRE_OP_CSWAP: {
        T old = a;
        __atomic_compare_exchange_n(p, &old, b, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        return old;
    }
    default: {
        T cur = __atomic_load_n(p, __ATOMIC_SEQ_CST);
        while (!__atomic_compare_exchange_n(p, &cur, combine(op, cur, a), false, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST)) {
        }
        return cur;
    }
    }
}

// A put or get on device memory, through the device's copy (the other
// side, the request's payload or the answer's, is host memory).
efa_emul_verdict_t copy_on_device(uint8_t type, void *target, uint64_t len, const void *in,
                                  void *out) {
    if (0 != len && 0 != (EFA_BTL_MSG_PUT == type ? efa_device_copy(target, in, len)
                                                  : efa_device_copy(out, target, len))) {
        return EFA_EMUL_DEVICE_COPY_FAILED;
    }
    return EFA_EMUL_DONE;
}

} // namespace

const char *EmulTarget::text(efa_emul_verdict_t v) {
    switch (v) {
    case EFA_EMUL_DONE:
        return "done";
    case EFA_EMUL_NO_SUCH_REG:
        return "no such registration";
    case EFA_EMUL_OUTSIDE:
        return "outside the registered range";
    case EFA_EMUL_NO_ACCESS:
        return "the registration does not grant this access";
    case EFA_EMUL_UNSUPPORTED_OP:
        return "unsupported atomic operation";
    case EFA_EMUL_MISALIGNED:
        return "misaligned atomic";
    case EFA_EMUL_DEVICE_ATOMIC:
        return "an atomic on device (GPU) memory, which this path cannot execute atomically";
    case EFA_EMUL_DEVICE_COPY_FAILED:
        return "the device's copy to or from the registered device memory failed";
    }
    return "unknown verdict";
}

void EmulTarget::add(const efa_rma_handle_t &h, void *owner) {
    std::shared_ptr<std::atomic<int>> copies;
    if (h.flags & EFA_RMA_HANDLE_DEVICE) {
        copies = std::make_shared<std::atomic<int>>(0);
    }
    std::lock_guard<SpinMutex> g(mu_);
    regs_[h.key] = Entry{h, owner, std::move(copies)};
    last_ = nullptr;
}

void EmulTarget::remove(uint64_t key) {
    std::shared_ptr<std::atomic<int>> copies;
    {
        std::lock_guard<SpinMutex> g(mu_);
        auto it = regs_.find(key);
        if (it != regs_.end()) {
            copies = std::move(it->second.copies);
            regs_.erase(it);
        }
        last_ = nullptr;
    }
    wait_device_copies(copies.get());
}

void EmulTarget::wait_device_copies(const std::atomic<int> *copies) {
    while (copies && 0 != copies->load(std::memory_order_acquire)) {
        std::this_thread::yield();
    }
}

size_t EmulTarget::size() {
    std::lock_guard<SpinMutex> g(mu_);
    return regs_.size();
}

efa_emul_verdict_t EmulTarget::check(uint64_t key, uint64_t addr, uint64_t len, uint32_t access,
                                     const Entry **found) const {
    // The registration the last request named, without the table's
    // lookup (a division by the bucket count): a peer's operations on one
    // window name one key after another.
    if (nullptr != last_ && last_->h.key == key && covers(last_->h, addr, len, access)) {
        *found = last_;
        return EFA_EMUL_DONE;
    }
    auto it = regs_.find(key);
    if (it != regs_.end() && covers(it->second.h, addr, len, access)) {
        last_ = &it->second;
        *found = last_;
        return EFA_EMUL_DONE;
    }
    // A key gone is refused, as a NIC refuses it: a request that outlived
    // its registration (its origin gave up on it, or its window was freed)
    // must not land in a registration made since at the same address.
    if (it == regs_.end()) {
        return EFA_EMUL_NO_SUCH_REG;
    }
    // A live key whose range is a neighbour's (osc/rdma pairs them at
    // times): the registration that covers the request serves it, if it
    // has the named one's rights (a window's regions have all; pml ob1's
    // buffer for one peer's RDMA, one).
    const uint32_t named_access = it->second.h.access;
    for (const auto &kv : regs_) {
        if (kv.second.h.access == named_access && covers(kv.second.h, addr, len, access)) {
            *found = &kv.second;
            return EFA_EMUL_DONE;
        }
    }
    return efa_rma_in_range(&it->second.h, addr, len) ? EFA_EMUL_NO_ACCESS : EFA_EMUL_OUTSIDE;
}

efa_emul_verdict_t EmulTarget::execute(uint8_t type, const efa_btl_rma_t &rma, const void *in,
                                       void *out, uint64_t *result) {
    uint64_t len = rma.len;
    uint32_t access;
    switch (type) {
    case EFA_BTL_MSG_PUT:
        access = EFA_BTL_WIRE_ACCESS_REMOTE_WRITE;
        break;
    case EFA_BTL_MSG_GET:
        access = EFA_BTL_WIRE_ACCESS_REMOTE_READ;
        break;
    default: {
        access = EFA_BTL_WIRE_ACCESS_REMOTE_ATOMIC;
        const efa_btl_wire_atomic_t extent = efa_btl_wire_atomic_extent(rma.addr, rma.flags, &len);
        if (!known_op(rma.op) || EFA_BTL_WIRE_ATOMIC_UNSUPPORTED == extent) {
            return EFA_EMUL_UNSUPPORTED_OP;
        }
        if (EFA_BTL_WIRE_ATOMIC_MISALIGNED == extent) {
            return EFA_EMUL_MISALIGNED;
        }
    }
    }
    std::unique_lock<SpinMutex> g(mu_); // a deregistration waits for the copy
    const Entry *e = nullptr;
    const efa_emul_verdict_t v = check(rma.key, rma.addr, len, access, &e);
    if (EFA_EMUL_DONE != v) {
        return v;
    }
    void *target = reinterpret_cast<void *>(static_cast<uintptr_t>(rma.addr));
    if (e->h.flags & EFA_RMA_HANDLE_DEVICE) {
        if (EFA_BTL_MSG_ATOMIC == type) {
            return EFA_EMUL_DEVICE_ATOMIC;
        }
        // (its own counter: a removal of another registration in between
        // neither waits for it nor lets the removal of this one miss it)
        std::shared_ptr<std::atomic<int>> running = e->copies;
        running->fetch_add(1, std::memory_order_relaxed);
        g.unlock();
        const efa_emul_verdict_t dv = copy_on_device(type, target, len, in, out);
        running->fetch_sub(1, std::memory_order_release);
        return dv;
    }
    switch (type) {
    // (memmove: a process's put or get to its own window may overlap)
    case EFA_BTL_MSG_PUT:
        if (len) {
            std::memmove(target, in, len);
        }
        break;
    case EFA_BTL_MSG_GET:
        if (len) {
            std::memmove(out, target, len);
        }
        break;
    default:
        if (4 == len) {
            *result =
                apply(static_cast<uint32_t *>(target), rma.op, static_cast<uint32_t>(rma.operand),
                      static_cast<uint32_t>(rma.operand2));
        } else {
            *result = apply(static_cast<uint64_t *>(target), rma.op, rma.operand, rma.operand2);
        }
    }
    return EFA_EMUL_DONE;
}

} // namespace efa

// The C seam (efa_emul_target.h)

extern "C" {

const char *efa_emul_verdict_text(efa_emul_verdict_t v) {
    return efa::EmulTarget::text(v);
}

efa_emul_table_t *efa_emul_table_create(void) {
    return new (std::nothrow) efa_emul_table;
}

void efa_emul_table_destroy(efa_emul_table_t *t, void (*leftover)(void *arg, void *owner),
                            void *arg) {
    if (t) {
        t->target.drain([&](void *owner) {
            if (leftover) {
                leftover(arg, owner);
            }
        });
        delete t;
    }
}

int efa_emul_table_add(efa_emul_table_t *t, const efa_rma_handle_t *h, void *owner) try {
    t->target.add(*h, owner);
    return 0;
} catch (const std::bad_alloc &) {
    return -FI_ENOMEM;
}

void efa_emul_table_remove(efa_emul_table_t *t, uint64_t key) {
    t->target.remove(key);
}

size_t efa_emul_table_size(efa_emul_table_t *t) {
    return t->target.size();
}

efa_emul_verdict_t efa_emul_execute(efa_emul_table_t *t, uint8_t type, const efa_btl_rma_t *rma,
                                    const void *in, void *out, uint64_t *result) {
    return t->target.execute(type, *rma, in, out, result);
}

} // extern "C"

extern "C" void efa_emul_count_request(bool served) {
    const efa::counts::Id id = served ? efa::counts::kEmulServed : efa::counts::kEmulRefused;
    efa::counts::add(id, 1);
}
