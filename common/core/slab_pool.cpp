// The slab pool (efa_pool.h).  A slab is made whole or not at all: a
// failed allocation or registration leaves the pool as it was.
#include "slab_pool.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include <rdma/fi_errno.h>

namespace efa {

SlabPool::~SlabPool() {
    free_slabs(true);
}

int SlabPool::grow() {
    const size_t n = desc_.per_slab;
    Slab s{static_cast<char *>(std::calloc(n, desc_.elem_size)), RegisteredBlock{}};
    if (!s.elems) {
        return -FI_ENOMEM;
    }
    if (desc_.buf_size) {
        const int err =
            s.bufs.make(desc_.core, n * desc_.buf_size, desc_.buf_align, desc_.mr_access);
        if (err) {
            std::free(s.elems);
            return err;
        }
    }
    try {
        slabs_.push_back(s);
    } catch (...) {
        free_slab(s, true);
        return -FI_ENOMEM;
    }
    void *desc = s.bufs.desc();
    // Pushed in reverse so that the slab's first element comes out first.
    for (size_t i = n; i-- > 0;) {
        char *elem = s.elems + i * desc_.elem_size;
        if (desc_.init) {
            desc_.init(desc_.arg, elem, s.bufs.data ? s.bufs.data + i * desc_.buf_size : nullptr,
                       desc);
        }
        if (desc_.mr_off) {
            auto *mr = reinterpret_cast<efa_mr_t *>(s.bufs.mr);
            std::memcpy(elem + desc_.mr_off, &mr, sizeof(mr));
        }
        efa_pool_put(this, elem);
    }
    return 0;
}

void SlabPool::free_slab(Slab &s, bool release_mr) {
    s.bufs.release(desc_.core, release_mr);
    std::free(s.elems);
    s.elems = nullptr;
}

size_t SlabPool::retire(bool (*busy)(void *arg, void *elem), void *arg) {
    size_t kept = 0;
    for (Slab &s : slabs_) {
        bool any = false;
        for (size_t i = 0; i < desc_.per_slab; ++i) {
            // every element is asked: the owner repoints each busy one
            any = busy(arg, s.elems + i * desc_.elem_size) || any;
        }
        if (any) {
            slabs_[kept++] = s;
        } else {
            free_slab(s, true);
        }
    }
    slabs_.resize(kept);
    free = nullptr;
    return kept;
}

void SlabPool::free_slabs(bool release_mr) {
    for (Slab &s : slabs_) {
        free_slab(s, release_mr);
    }
    slabs_.clear();
    free = nullptr;
}

size_t SlabPool::destroy(SlabPool *p, bool core_closed) {
    if (core_closed) {
        p->free_slabs(false); // the registrations went with the core
    }
    const size_t left = p->slabs();
    if (0 == left) {
        delete p;
    }
    return left;
}

} // namespace efa

// The C seam (efa_pool.h)

extern "C" {

efa_pool_t *efa_pool_create(const efa_pool_desc_t *desc, int *err) {
    auto *pool = new (std::nothrow) efa::SlabPool(*desc);
    *err = pool ? pool->grow() : -FI_ENOMEM;
    if (*err) {
        delete pool;
        return nullptr;
    }
    return pool->head();
}

int efa_pool_grow(efa_pool_t *pool) {
    return efa::SlabPool::of(pool)->grow();
}

size_t efa_pool_elems(const efa_pool_t *pool) {
    return efa::SlabPool::of(pool)->elems();
}

size_t efa_pool_slabs(const efa_pool_t *pool) {
    return efa::SlabPool::of(pool)->slabs();
}

size_t efa_pool_retire(efa_pool_t *pool, bool (*busy)(void *arg, void *elem), void *arg) {
    return efa::SlabPool::of(pool)->retire(busy, arg);
}

size_t efa_pool_destroy(efa_pool_t *pool, bool core_closed) {
    return efa::SlabPool::destroy(efa::SlabPool::of(pool), core_closed);
}

} // extern "C"
