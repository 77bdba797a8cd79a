// The C interface of the table of operations in flight (efa_inflight.h).
#include "efa_inflight.h"

#include <cerrno>
#include <new>

#include "inflight.hpp"

extern "C" {

efa_inflight_t *efa_inflight_create(void) {
    return new (std::nothrow) efa_inflight;
}

void efa_inflight_destroy(efa_inflight_t *t) {
    delete t;
}

int efa_inflight_add(efa_inflight_t *t, uint64_t id, void *op, double now) try {
    if (nullptr == t) {
        return -ENOMEM;
    }
    return t->table.add(id, op, now) ? 0 : -EEXIST;
} catch (const std::bad_alloc &) {
    return -ENOMEM;
}

void *efa_inflight_claim(efa_inflight_t *t, uint64_t id, double now) {
    return t ? t->table.claim(id, now) : nullptr;
}

bool efa_inflight_release(efa_inflight_t *t, uint64_t id, bool over) {
    return t && t->table.release(id, over);
}

size_t efa_inflight_expire(efa_inflight_t *t, double now, double limit, void **out, size_t max) {
    return t ? t->table.expire(now, limit, out, max) : 0;
}

size_t efa_inflight_size(efa_inflight_t *t) {
    return t ? t->table.size() : 0;
}

} // extern "C"
