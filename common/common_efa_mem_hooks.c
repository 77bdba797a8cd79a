/*
 * Open MPI's memory hooks for the core's registration cache: the core
 * hears of every release of memory (free() included) where the runtime
 * can tell, and only then reuses a registration after its users let it go.
 */
#include "common_efa.h"

#include "opal/mca/base/mca_base_framework.h"
#include "opal/mca/memory/base/base.h"
#include "opal/memoryhooks/memory.h"

static bool hooks_registered = false;

/* Open MPI installs its memory hooks only for a component that opens the
 * memory framework (as its registration caches do); without that the
 * support level stays 0 however the process was started.  Opened with the
 * core, closed with it (the framework counts its users). */
static bool memory_framework_open = false;

static void open_memory_framework(void) {
    if (!memory_framework_open &&
        OPAL_SUCCESS == mca_base_framework_open(&opal_memory_base_framework, 0)) {
        memory_framework_open = true;
    }
}

static void close_memory_framework(void) {
    if (memory_framework_open) {
        (void)mca_base_framework_close(&opal_memory_base_framework);
        memory_framework_open = false;
    }
}

static void mem_release_cb(void *buf, size_t length, void *cbdata, bool from_alloc) {
    (void)cbdata;
    (void)from_alloc;
    efa_core_mem_release(buf, length);
}

/* Hear of every release of memory, free() included, where the runtime can
 * tell: only then may the core reuse a registration after its users let it
 * go (mca_common_efa_mem_hooks_on becomes the core's mem_release_hooks).
 * Without (no memory component, as with "--mca memory ^patcher", or a
 * static binary) the support level is 0.  FREE implies MUNMAP; MUNMAP
 * alone misses the pages free() hands back.  Registered before the core
 * opens, so that no registration is made unheard. */
void mca_common_efa_mem_hooks_start(void) {
    open_memory_framework();
    if (!hooks_registered && (opal_mem_hooks_support_level() & OPAL_MEMORY_FREE_SUPPORT) &&
        OPAL_SUCCESS == opal_mem_hooks_register_release(mem_release_cb, NULL)) {
        hooks_registered = true;
    }
}

void mca_common_efa_mem_hooks_stop(void) {
    if (hooks_registered) {
        opal_mem_hooks_unregister_release(mem_release_cb);
        hooks_registered = false;
    }
    close_memory_framework();
}

bool mca_common_efa_mem_hooks_on(void) {
    return hooks_registered;
}
