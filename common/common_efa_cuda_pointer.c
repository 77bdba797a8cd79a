/*
 * CUDA's pointer attribute calls for the Open MPI 5 device backend
 * (common_efa_device.c): an allocation's id read and its synchronous
 * copies asked for by the core (efa_cuda_pointer.h), so that memory whose
 * driver refuses them (VMM, pool memory) is told apart rather than
 * failing Open MPI's get_buffer_id with a help message per buffer.  Taken
 * from the CUDA driver Open MPI's cuda component loaded (dlopen with
 * RTLD_NOLOAD, nothing linked); where it or a symbol is missing the
 * backend asks Open MPI as before.
 */
#include "common_efa.h"

#if OPAL_MAJOR_VERSION >= 5
#include <dlfcn.h>

#include "efa_cuda_pointer.h"

bool mca_common_efa_cuda_pointer(struct efa_cuda_pointer_calls *cu) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (NULL == lib) {
        return false;
    }
    int (*get)(void *, int, unsigned long long) =
        (int (*)(void *, int, unsigned long long))dlsym(lib, "cuPointerGetAttribute");
    int (*set)(const void *, int, unsigned long long) =
        (int (*)(const void *, int, unsigned long long))dlsym(lib, "cuPointerSetAttribute");
    /* (the handle stays open: the driver stays loaded while Open MPI runs) */
    if (NULL == get || NULL == set) {
        dlclose(lib);
        return false;
    }
    /* set before get: the backend reads get to know whether both are there */
    cu->set = set;
    __atomic_store_n(&cu->get, get, __ATOMIC_RELEASE);
    return true;
}
#endif
