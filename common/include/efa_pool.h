/*
 * One pool of the owners' operation structs (btl_efa's fragments and
 * native one-sided operations), each with a buffer of its own, made in
 * slabs whose buffers are registered in one piece where the provider wants
 * local descriptors (common/core/slab_pool.cpp).
 *
 * The pool takes no lock: its owner serializes get and put (btl_efa holds
 * its module lock).  The free list runs through a pointer field of the
 * owner's struct (link_off), so that get and put are a few instructions
 * inline; that field is the pool's while the element is free and the
 * owner's (an endpoint's queue, say) while it is out.
 *
 * At finalize, a slab with an element the provider still holds cannot be
 * freed while the endpoints are open: efa_pool_retire keeps those slabs
 * (the owner points the busy elements' completions at the core's
 * efa_op_complete_nothing), efa_pool_destroy frees them once the core is
 * closed, or leaves them to the provider.
 */
#ifndef EFA_POOL_H
#define EFA_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "efa_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct efa_pool_desc {
    size_t elem_size;  /* the owner's struct */
    size_t link_off;   /* offsetof the struct's free-list pointer */
    size_t buf_size;   /* bytes of buffer per element; 0: none */
    size_t buf_align;  /* of each slab's buffers (a power of two, at least 8) */
    unsigned per_slab; /* elements per slab */
    efa_core_t *core;  /* registers each slab's buffers when mr_access != 0 */
    uint64_t mr_access;
    /* Once per element as its slab is made: the element (zeroed), its
     * buffer and the buffer's descriptor (NULL unless registered). */
    void (*init)(void *arg, void *elem, void *buf, void *desc);
    void *arg;
    /* offsetof the struct's efa_mr_t * that receives its slab's
     * registration (the descriptors on the other NICs: efa_mr_rail_desc);
     * 0: none. */
    size_t mr_off;
} efa_pool_desc_t;

/* The head the inline get and put read; the rest is the core's. */
typedef struct efa_pool {
    void *free;
    size_t link_off;
} efa_pool_t;

/* Makes the pool and its first slab.  NULL (and *err, a negative
 * libfabric error) when it cannot. */
efa_pool_t *efa_pool_create(const efa_pool_desc_t *desc, int *err);

/* Adds a slab to the free list: 0, or a negative libfabric error. */
int efa_pool_grow(efa_pool_t *pool);

/* Elements made so far, and slabs. */
size_t efa_pool_elems(const efa_pool_t *pool);
size_t efa_pool_slabs(const efa_pool_t *pool);

static inline void **efa_pool_link_(efa_pool_t *pool, void *elem) {
    return (void **)((char *)elem + pool->link_off);
}

/* A free element (its link field cleared), growing by a slab when none is
 * left; NULL when the pool cannot grow. */
static inline void *efa_pool_get(efa_pool_t *pool) {
    if (NULL == pool->free && 0 != efa_pool_grow(pool)) {
        return NULL;
    }
    void *elem = pool->free;
    pool->free = *efa_pool_link_(pool, elem);
    *efa_pool_link_(pool, elem) = NULL;
    return elem;
}

static inline void efa_pool_put(efa_pool_t *pool, void *elem) {
    *efa_pool_link_(pool, elem) = pool->free;
    pool->free = elem;
}

/* Finalize while the core is open: every slab none of whose elements is
 * busy(arg, elem) is freed (its registration released); the others are
 * kept.  The free list is emptied.  Returns the slabs kept. */
size_t efa_pool_retire(efa_pool_t *pool, bool (*busy)(void *arg, void *elem), void *arg);

/* After the core was released: with core_closed (nothing can complete any
 * more) the kept slabs are freed, otherwise left to the provider.  Frees
 * the pool; returns the slabs left. */
size_t efa_pool_destroy(efa_pool_t *pool, bool core_closed);

#ifdef __cplusplus
}
#endif
#endif /* EFA_POOL_H */
