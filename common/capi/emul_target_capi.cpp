// The C interface of the emulated one-sided target (efa_emul_target.h).
#include "efa_emul_target.h"

#include <new>

#include <rdma/fi_errno.h>

#include "emul_target.hpp"

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
