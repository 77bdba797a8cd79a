// The C interface of the slab pool (efa_pool.h).
#include "efa_pool.h"

#include <new>

#include <rdma/fi_errno.h>

#include "slab_pool.hpp"

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
