/*
 * The target half of the emulated one-sided protocol, as C: the process's
 * table of registrations that peers may name, and the execution of a
 * peer's put, get or atomic request against it (common/core/
 * emul_target.cpp).  btl_efa receives the requests and sends the answers;
 * what a request may touch is decided here, where it is unit-tested
 * without Open MPI (tests/unit/test_emul_target.cpp).
 *
 * Every request names a registration key; the range and the access are
 * checked against this table, never against anything the request claims.
 * A refused request writes nothing.  Atomics use the CPU's atomic
 * instructions, so they are coherent with this process's own atomics and
 * with each other whatever their origin.
 * A registration of device memory (EFA_RMA_HANDLE_DEVICE) is written and
 * read only through the device's copy (efa_device.h); atomics on it are
 * refused (EFA_EMUL_DEVICE_ATOMIC): a copy, an operation and a copy back
 * would not be atomic with respect to the device's own writers.  After
 * EFA_EMUL_DEVICE_COPY_FAILED the range's bytes are the device's to say
 * (a driver's copy may fail part way).
 */
#ifndef EFA_EMUL_TARGET_H
#define EFA_EMUL_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "efa_btl_wire.h"
#include "efa_rma.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct efa_emul_table efa_emul_table_t;

/* Why a request was or was not executed. */
typedef enum {
    EFA_EMUL_DONE,
    EFA_EMUL_NO_SUCH_REG,        /* no registration with that key covers the range */
    EFA_EMUL_OUTSIDE,            /* the key's registration does not cover the range */
    EFA_EMUL_NO_ACCESS,          /* registered without the access the operation needs */
    EFA_EMUL_UNSUPPORTED_OP,     /* an atomic operation or type not executed here */
    EFA_EMUL_MISALIGNED,         /* an atomic's address is not a multiple of its size */
    EFA_EMUL_DEVICE_ATOMIC,      /* an atomic on device memory: no CPU atomic reaches it */
    EFA_EMUL_DEVICE_COPY_FAILED, /* the device's copy failed (nothing known written) */
} efa_emul_verdict_t;

/* The verdict in words, for messages to the user. */
const char *efa_emul_verdict_text(efa_emul_verdict_t v);

/* NULL when out of memory. */
efa_emul_table_t *efa_emul_table_create(void);

/* Calls leftover(arg, owner) for each registration still in the table,
 * then frees the table. */
void efa_emul_table_destroy(efa_emul_table_t *t, void (*leftover)(void *arg, void *owner),
                            void *arg);

/* Adds the registration h names by h->key, with the owner's pointer for
 * efa_emul_table_destroy.  0, or -FI_ENOMEM. */
int efa_emul_table_add(efa_emul_table_t *t, const efa_rma_handle_t *h, void *owner);

/* Removes it; waits for a request being executed against the table (a
 * device copy too). */
void efa_emul_table_remove(efa_emul_table_t *t, uint64_t key);

/* Registrations in the table. */
size_t efa_emul_table_size(efa_emul_table_t *t);

/* Executes one request of type EFA_BTL_MSG_PUT (copies rma->len bytes of
 * 'in' to rma->addr), EFA_BTL_MSG_GET (copies rma->len bytes at rma->addr
 * to 'out') or EFA_BTL_MSG_ATOMIC (rma->op with rma->operand, and
 * rma->operand2 as the new value of a compare-and-swap; *result is the old
 * value).  Nothing is touched unless the verdict is EFA_EMUL_DONE.
 * The key is the initiator's hint: when its registration does not cover
 * the range, any other that does is accepted (osc/rdma on a dynamic window
 * can pair a region's range with its neighbour's handle while the table it
 * reads is being rewritten). */
efa_emul_verdict_t efa_emul_execute(efa_emul_table_t *t, uint8_t type, const efa_btl_rma_t *rma,
                                    const void *in, void *out, uint64_t *result);
/* A peer's request answered (btl_efa_emul.c): executed, or refused for any
 * reason (the verdicts above, a bad length, the BTL finalizing), for the
 * MPI_T counts common_efa_emul_served and _emul_refused.  The process's
 * own operations, executed in place, are not requests of peers. */
void efa_emul_count_request(bool served);

#ifdef __cplusplus
}
#endif
#endif /* EFA_EMUL_TARGET_H */
