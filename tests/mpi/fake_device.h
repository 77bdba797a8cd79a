/*
 * The core's fake device as the MPI tests reach it (device_buffers.c):
 * found in the loaded libmca_common_efa (the job runs with
 * --mca common_efa_debug_fake_device 1), its memory allocated with a
 * guard, filled and checked through the fake's own copy (the CPU cannot
 * touch it).  Included after test_util.h.
 */
#ifndef EFA_TEST_FAKE_DEVICE_H
#define EFA_TEST_FAKE_DEVICE_H

#include <dlfcn.h>
#include <link.h>

typedef struct {
    const char *name;
    int (*check)(const void *, size_t);
    int (*copy)(void *, const void *, size_t);
    void (*release)(void *);
} dev_ops_t;

static void *(*dev_alloc)(size_t);
static void (*dev_free)(void *);
static size_t (*dev_live)(void);
static const dev_ops_t *dev;

static int find_common(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    if (strstr(info->dlpi_name, "libmca_common_efa.so")) {
        snprintf((char *)data, 4096, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

/* The fake device of the loaded core (libmca_common_efa). */
static void open_fake(void) {
    char path[4096] = "";
    dl_iterate_phdr(find_common, path);
    TU_ASSERT(path[0], "libmca_common_efa is not loaded (run under pml cm + mtl_efa)");
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    TU_ASSERT(lib, "dlopen %s: %s", path, dlerror());
    const dev_ops_t *(*ops)(void) = (const dev_ops_t *(*)(void))dlsym(lib, "efa_fake_device_ops");
    const char *(*name)(void) = (const char *(*)(void))dlsym(lib, "efa_device_name");
    dev_alloc = (void *(*)(size_t))dlsym(lib, "efa_fake_device_alloc");
    dev_free = (void (*)(void *))dlsym(lib, "efa_fake_device_free");
    dev_live = (size_t(*)(void))dlsym(lib, "efa_fake_device_live");
    TU_ASSERT(ops && name && dev_alloc && dev_free && dev_live, "no fake device in %s", path);
    const char *installed = name();
    TU_ASSERT(installed && 0 == strcmp(installed, "fake"),
              "the core's device is %s, not the fake (--mca common_efa_debug_fake_device 1)",
              installed ? installed : "none");
    dev = ops();
}

/* Device memory of len bytes plus a guard of 64 (len 0: one byte). */
#define GUARD 64
static void *dalloc(size_t len) {
    void *p = dev_alloc(len + GUARD);
    TU_ASSERT(p, "fake device allocation of %zu bytes failed", len + GUARD);
    TU_ASSERT(dev->check(p, len + GUARD) > 0, "fake memory not device memory");
    return p;
}

/* Fill device memory with the pattern of seed (through a host copy). */
static void dfill(void *d, size_t len, uint64_t seed) {
    unsigned char *h = tu_malloc(len + GUARD);
    tu_fill(h, len, seed);
    memset(h + len, TU_POISON, GUARD);
    TU_ASSERT(0 == dev->copy(d, h, len + GUARD), "fake copy to the device failed");
    free(h);
}

/* Check n bytes of device memory against seed, and its guard after len. */
static void dverify(const void *d, size_t n, size_t len, uint64_t seed, const char *what) {
    unsigned char *h = tu_malloc(len + GUARD);
    TU_ASSERT(0 == dev->copy(h, d, len + GUARD), "fake copy from the device failed");
    tu_verify(h, n, seed, what);
    for (size_t i = len; i < len + GUARD; ++i) {
        TU_ASSERT(TU_POISON == h[i], "%s: byte %zu past the %zu-byte buffer written", what, i - len,
                  len);
    }
    free(h);
}

/* Device to device to this process itself: the receive posted first, then
 * after the send (unexpected), each checked with its guard. */

#endif
