/*
 * For test programs that call into btl_efa itself (tests/mpi/btl_sendi.c,
 * tests/osc/osc_inflight.c): the already loaded mca_btl_efa.so, opened
 * again by its path to look up its symbols.  Define _GNU_SOURCE before any
 * header (dl_iterate_phdr).
 */
#ifndef EFA_TEST_BTL_EFA_DL_H
#define EFA_TEST_BTL_EFA_DL_H

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

static int efa_test_find_btl_efa(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    const char *name = info->dlpi_name;
    const size_t n = strlen(name);
    if (n >= 14 && 0 == strcmp(name + n - 14, "mca_btl_efa.so")) {
        snprintf((char *)data, 4096, "%s", name);
        return 1;
    }
    return 0;
}

/* The handle of the loaded mca_btl_efa.so, or NULL (why in err). */
static inline void *efa_test_open_btl_efa(char *err, size_t err_len) {
    char path[4096] = "";
    dl_iterate_phdr(efa_test_find_btl_efa, path);
    if ('\0' == path[0]) {
        snprintf(err, err_len, "mca_btl_efa.so is not loaded (run under --mca btl efa,self)");
        return NULL;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (NULL == lib) {
        snprintf(err, err_len, "dlopen %s: %s", path, dlerror());
    }
    return lib;
}

#endif
