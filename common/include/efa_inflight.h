/*
 * Operations in flight that another process answers by id (btl_efa's
 * emulated one-sided requests), as C: who may touch an operation, and who
 * completes it, when answers, send failures and expiry come from several
 * threads at once (common/core/inflight.cpp; tests/unit/test_inflight.cpp).
 *
 * Every user of an operation holds a claim on it: the initiator while it
 * starts it, each answer or failure while it writes into it.  An
 * operation is completed (and may be freed) by exactly one caller: the
 * one that drops the last claim of an operation that is over, or the
 * expiry, which takes only operations that nobody holds.  So an answer
 * never writes into an operation the expiry freed, and no operation is
 * completed twice.  Each call takes the table's own lock; none calls out.
 */
#ifndef EFA_INFLIGHT_H
#define EFA_INFLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct efa_inflight efa_inflight_t;

/* NULL when out of memory (every call below then finds nothing). */
efa_inflight_t *efa_inflight_create(void);
/* Operations still in the table are abandoned (their memory is the
 * caller's, left alone). */
void efa_inflight_destroy(efa_inflight_t *t);
/* Enter op under id (unique while in the table), claimed once by the
 * caller, idle since 'now' (seconds).  0 or a negative error. */
int efa_inflight_add(efa_inflight_t *t, uint64_t id, void *op, double now);
/* The operation of that id, claimed, and idle since 'now' (now < 0: its
 * idle time left as it is, for an answer not judged yet: one from another
 * process, or a second, must not keep a silent target's operation from
 * expiring); NULL when none is in flight under that id (never was, over,
 * or expired). */
void *efa_inflight_claim(efa_inflight_t *t, uint64_t id, double now);
/* The operation of that id is idle since 'now' (an answer judged its
 * target's). */
void efa_inflight_touch(efa_inflight_t *t, uint64_t id, double now);
/* Drop a claim, saying whether the operation is over (sticky: once over,
 * no claim finds it any more).  True when the caller must complete it
 * now: it is over and this was its last claim; the id is gone then. */
bool efa_inflight_release(efa_inflight_t *t, uint64_t id, bool over);
/* Is an operation in flight under id (not over, not expired)?  Claims
 * nothing: for a look before something of it is sent. */
bool efa_inflight_live(efa_inflight_t *t, uint64_t id);
/* Operations that nobody holds, not over, idle for more than 'limit'
 * seconds at 'now': at most max of them, out of the table (no claim finds
 * them any more) and written to out; their number.  The caller completes
 * them. */
size_t efa_inflight_expire(efa_inflight_t *t, double now, double limit, void **out, size_t max);
/* Nobody could answer for 'seconds' up to 'now' (this process was away
 * from progress: efa_core_away_ms): no operation's idle time counts them. */
void efa_inflight_pause(efa_inflight_t *t, double seconds, double now);
/* Operations in the table (claimed ones over included). */
size_t efa_inflight_size(efa_inflight_t *t);

#ifdef __cplusplus
}
#endif

#endif
