/*
 * The stack's one opal_progress callback (common_efa_progress.h): the
 * core's progress, then the components' own functions (the on-node
 * channels), registered while there is anything to drive.
 */
#include "common_efa_progress.h"

#include "opal/constants.h"
#include "opal/runtime/opal_progress.h"

/* The core the progress callback drives, set while it is registered: each
 * call (a blocking MPI call makes millions) goes straight to the core. */
static efa_core_t *progress_core = NULL;
static bool progress_hmem = false; /* its provider granted FI_HMEM */

/* The components' own progress functions (the on-node channels), run after
 * the core's by the same callback: one opal_progress hook for the whole
 * stack.  A fixed array: nothing is allocated or locked on the hot path. */
#define EFA_PROGRESS_FNS 4
static mca_common_efa_progress_fn_t progress_fns[EFA_PROGRESS_FNS];
static int num_progress_fns = 0;
static bool progress_registered = false;

/* The second and later added functions (both components loaded). */
__attribute__((noinline)) static int progress_more(void) {
    int n = 0;
    const int fns = __atomic_load_n(&num_progress_fns, __ATOMIC_ACQUIRE);
    for (int i = 1; i < fns; ++i) {
        mca_common_efa_progress_fn_t fn = progress_fns[i];
        if (OPAL_LIKELY(NULL != fn)) {
            n += fn();
        }
    }
    return n;
}

/* Every opal_progress call comes here: the first added function straight
 * (NULL when none), the rest out of line (both components loaded). */
static int progress_cb(void) {
    efa_core_t *core = progress_core; /* NULL only while being unregistered */
    int n = OPAL_LIKELY(NULL != core) ? efa_core_progress_paced(core) : 0;
    mca_common_efa_progress_fn_t fn = __atomic_load_n(&progress_fns[0], __ATOMIC_ACQUIRE);
    if (OPAL_LIKELY(NULL != fn)) {
        n += fn();
        if (OPAL_UNLIKELY(NULL != progress_fns[1])) {
            n += progress_more();
        }
    }
    return n;
}

/* With FI_HMEM libfabric copies device memory in its progress on the
 * thread's current context, or device 0's on a thread with none: such a
 * thread first gets the process's device's primary context (once).  A
 * callback of its own: a job without FI_HMEM pays nothing for it. */
static int progress_cb_hmem(void) {
    mca_common_efa_cuda_context_thread();
    return progress_cb();
}

/* The callback (or progress_cb_hmem) is registered while it has work. */
static opal_progress_callback_t progress_registered_cb = NULL;
static void update_progress_registration(void) {
    const bool wanted = NULL != progress_core || num_progress_fns > 0;
    opal_progress_callback_t cb = progress_hmem ? progress_cb_hmem : progress_cb;
    if (progress_registered && (!wanted || cb != progress_registered_cb)) {
        opal_progress_unregister(progress_registered_cb);
        progress_registered = false;
    }
    if (wanted && !progress_registered) {
        opal_progress_register(cb);
        progress_registered_cb = cb;
        progress_registered = true;
    }
}

int mca_common_efa_progress_add(mca_common_efa_progress_fn_t fn) {
    for (int i = 0; i < num_progress_fns; ++i) {
        if (progress_fns[i] == fn) {
            return OPAL_SUCCESS;
        }
    }
    if (num_progress_fns >= EFA_PROGRESS_FNS) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    /* Release: a progress call that sees the entry (or the new count) sees
     * what the component set up before adding it. */
    __atomic_store_n(&progress_fns[num_progress_fns], fn, __ATOMIC_RELEASE);
    __atomic_store_n(&num_progress_fns, num_progress_fns + 1, __ATOMIC_RELEASE);
    update_progress_registration();
    return OPAL_SUCCESS;
}

void mca_common_efa_progress_remove(mca_common_efa_progress_fn_t fn) {
    for (int i = 0; i < num_progress_fns; ++i) {
        if (progress_fns[i] == fn) {
            /* Components go at finalize, when no other thread progresses. */
            for (int j = i + 1; j < num_progress_fns; ++j) {
                progress_fns[j - 1] = progress_fns[j];
            }
            progress_fns[--num_progress_fns] = NULL;
            break;
        }
    }
    update_progress_registration();
}

void mca_common_efa_progress_drive(efa_core_t *core) {
    progress_core = core;
    progress_hmem = NULL != core && efa_core_get_info(core)->hmem;
    update_progress_registration();
}
