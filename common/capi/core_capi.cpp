// efa_core.h's hot path (progress, tagged, one-sided operations) as
// extern "C" shims over core/ctx_*.cpp: nothing else lives here.
#include "ctx_ops.hpp"

extern "C" {

int efa_core_progress(efa_core_t *core) {
    return efa::progress(core);
}

int efa_ctx_tsend(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                  uint64_t tag, uint64_t data, efa_op_t *op) {
    return efa::ctx_tsend(ctx, buf, len, desc, dest, tag, data, op);
}

int efa_ctx_tinject(efa_ctx_t *ctx, const void *buf, size_t len, fi_addr_t dest, uint64_t tag,
                    uint64_t data) {
    return efa::ctx_tinject(ctx, buf, len, dest, tag, data);
}

int efa_ctx_trecv(efa_ctx_t *ctx, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
                  uint64_t ignore, efa_op_t *op) {
    return efa::ctx_trecv(ctx, buf, len, desc, src, tag, ignore, op);
}

int efa_ctx_tpeek(efa_ctx_t *ctx, fi_addr_t src, uint64_t tag, uint64_t ignore, bool claim,
                  efa_op_t *op) {
    return efa::ctx_tpeek(ctx, src, tag, ignore, claim, op);
}

int efa_ctx_trecv_claimed(efa_ctx_t *ctx, void *buf, size_t len, void *desc, uint64_t tag,
                          uint64_t ignore, efa_op_t *op) {
    return efa::ctx_trecv_claimed(ctx, buf, len, desc, tag, ignore, op);
}

int efa_ctx_write(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
                  uint64_t raddr, uint64_t rkey, efa_op_t *op) {
    return efa::ctx_write(ctx, buf, len, desc, dest, raddr, rkey, op);
}

int efa_ctx_read(efa_ctx_t *ctx, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t raddr,
                 uint64_t rkey, efa_op_t *op) {
    return efa::ctx_read(ctx, buf, len, desc, src, raddr, rkey, op);
}

int efa_ctx_atomic(efa_ctx_t *ctx, enum fi_op aop, enum fi_datatype dt, const void *operand,
                   void *desc, fi_addr_t dest, uint64_t raddr, uint64_t rkey, efa_op_t *op) {
    return efa::ctx_atomic(ctx, aop, dt, operand, desc, dest, raddr, rkey, op);
}

int efa_ctx_fetch_atomic(efa_ctx_t *ctx, enum fi_op aop, enum fi_datatype dt, const void *operand,
                         void *desc, void *result, void *result_desc, fi_addr_t dest,
                         uint64_t raddr, uint64_t rkey, efa_op_t *op) {
    return efa::ctx_fetch_atomic(ctx, aop, dt, operand, desc, result, result_desc, dest, raddr,
                                 rkey, op);
}

int efa_ctx_compare_atomic(efa_ctx_t *ctx, enum fi_datatype dt, const void *swap, void *desc,
                           const void *compare, void *compare_desc, void *result, void *result_desc,
                           fi_addr_t dest, uint64_t raddr, uint64_t rkey, efa_op_t *op) {
    return efa::ctx_compare_atomic(ctx, dt, swap, desc, compare, compare_desc, result, result_desc,
                                   dest, raddr, rkey, op);
}

int efa_core_query_atomic(efa_core_t *core, enum fi_datatype dt, enum fi_op aop, int kind) {
    return efa::core_query_atomic(core, dt, aop, kind);
}

int efa_ctx_cancel(efa_ctx_t *ctx, efa_op_t *op) {
    return efa::ctx_cancel(ctx, op);
}

} // extern "C"
