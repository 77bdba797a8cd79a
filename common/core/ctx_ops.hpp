// The context's operations as C++ functions (ctx_tagged.cpp, ctx_rma.cpp,
// ctx_progress.cpp); capi/core_capi.cpp exports them under efa_core.h's names.
#ifndef EFA_CTX_OPS_HPP
#define EFA_CTX_OPS_HPP

#include "core.hpp"

namespace efa {

int progress(efa_core_t *core);
int ctx_tsend(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t tag,
              uint64_t data, efa_op_t *op);
int ctx_tinject(efa_ctx_t *ctx, const void *buf, size_t len, fi_addr_t dest, uint64_t tag,
                uint64_t data);
int ctx_trecv(efa_ctx_t *ctx, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
              uint64_t ignore, efa_op_t *op);
int ctx_tpeek(efa_ctx_t *ctx, fi_addr_t src, uint64_t tag, uint64_t ignore, bool claim,
              efa_op_t *op);
int ctx_trecv_claimed(efa_ctx_t *ctx, void *buf, size_t len, void *desc, uint64_t tag,
                      uint64_t ignore, efa_op_t *op);
int ctx_write(efa_ctx_t *ctx, const void *buf, size_t len, void *desc, fi_addr_t dest,
              uint64_t raddr, uint64_t rkey, efa_op_t *op);
int ctx_read(efa_ctx_t *ctx, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t raddr,
             uint64_t rkey, efa_op_t *op);
int ctx_atomic(efa_ctx_t *ctx, enum fi_op aop, enum fi_datatype dt, const void *operand, void *desc,
               fi_addr_t dest, uint64_t raddr, uint64_t rkey, efa_op_t *op);
int ctx_fetch_atomic(efa_ctx_t *ctx, enum fi_op aop, enum fi_datatype dt, const void *operand,
                     void *desc, void *result, void *result_desc, fi_addr_t dest, uint64_t raddr,
                     uint64_t rkey, efa_op_t *op);
int ctx_compare_atomic(efa_ctx_t *ctx, enum fi_datatype dt, const void *swap, void *desc,
                       const void *compare, void *compare_desc, void *result, void *result_desc,
                       fi_addr_t dest, uint64_t raddr, uint64_t rkey, efa_op_t *op);
int core_query_atomic(efa_core_t *core, enum fi_datatype dt, enum fi_op aop, int kind);
int ctx_cancel(efa_ctx_t *ctx, efa_op_t *op);

} // namespace efa

#endif // EFA_CTX_OPS_HPP
