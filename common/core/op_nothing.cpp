// The completion of an operation nobody waits for (efa_core.h): in a file
// of its own, so that the core's files that hand it out (the deadline's
// probes) and those that call completions (progress) need not call each
// other.
#include "efa_core.h"

extern "C" void efa_op_complete_nothing(efa_op_t *op, const efa_cqe_t *cqe) {
    (void)op;
    (void)cqe;
}
