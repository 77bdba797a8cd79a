/*
 * What differs for the MTL between Open MPI 4.1 and 5.0: the runtime header
 * (ORTE is gone in 5.0), the job size, the communicator's context id (5.0
 * has 128-bit extended CIDs; without MCA_MTL_BASE_FLAG_SUPPORTS_EXT_CID
 * pml/cm gives the MTL only communicators whose local CID every member
 * agrees on, the same 32-bit id 4.1 has), the component's init
 * signature (5.0 asks about accelerator buffers) and where OPAL's mutex
 * header lives (opal/mca/threads in 5.0).
 */
#ifndef MTL_EFA_COMPAT_H
#define MTL_EFA_COMPAT_H

#include "ompi_config.h"

#include "common_efa_compat.h"
#include "ompi/communicator/communicator.h"
#include "ompi/version.h"

#if OMPI_MAJOR_VERSION >= 5
#include "ompi/runtime/ompi_rte.h"
#include "opal/mca/threads/mutex.h"

/* 5.0 exports a component's structure with the plain DECLSPEC. */
#ifndef OMPI_MODULE_DECLSPEC
#define OMPI_MODULE_DECLSPEC OMPI_DECLSPEC
#endif

#define MTL_EFA_INIT_PARAMS                                                                        \
    bool enable_progress_threads, bool enable_mpi_threads, bool *accelerator_support
/* Whether pml/cm may hand this MTL device buffers uncopied
 * (mtl_efa_device.c), and whether a convertor's buffer is device memory
 * (Open MPI asked its accelerator when it prepared it). */
#define MTL_EFA_INIT_ACCELERATOR(yes) (*accelerator_support = (yes))
/* (managed memory, which the CPU may touch, is not) */
#define MTL_EFA_CONVERTOR_ON_DEVICE(conv) (0 != opal_convertor_on_discrete_device(conv))
/* Whether Open MPI packed a non-contiguous buffer into device memory of
 * its own (ompi_mtl_datatype_pack / _recv_buf with accelerator support:
 * any device buffer, managed memory too, gets a device temporary). */
#define MTL_EFA_CONVERTOR_TEMP_ON_DEVICE(conv) (0 != opal_convertor_on_device(conv))
/* 5.0's device support is its accelerator framework (the core's backend). */
#define MTL_EFA_CONVERTOR_COPIES_CUDA 0
/* A lost peer: inside the MTL, a code no other failure gives (a peer
 * that was never reachable is OMPI_ERR_UNREACH); to the program, 5.0's
 * MPI_ERR_PROC_FAILED, the class fault-tolerant (ULFM) programs test for
 * and 5.0's ob1 reports under ULFM.  The calls return it through the
 * module's wrappers (mtl_efa_module.c). */
#define MTL_EFA_ERR_LOST OPAL_ERR_COMM_FAILURE
#define MTL_EFA_ERR_PEER_LOST MPI_ERR_PROC_FAILED
#define MTL_EFA_PEER_LOST_IS_A_CLASS 1
/* Whether MPI fault tolerance (ULFM: mpi_ft_enable, mpirun --with-ft
 * ulfm) is on.  pml/cm has no revoke, and the agreement behind
 * MPIX_Comm_agree and MPIX_Comm_shrink travels over ob1's BML endpoints,
 * which pml/cm never makes: only failed calls work over this MTL
 * (mtl_efa_peers.c says so once). */
#if defined(OPAL_ENABLE_FT_MPI) && OPAL_ENABLE_FT_MPI
#include "ompi/runtime/params.h"
#define MTL_EFA_FT_MPI_ON() (ompi_ftmpi_enabled)
#else
#define MTL_EFA_FT_MPI_ON() false
#endif

static inline uint32_t mtl_efa_comm_cid(const ompi_communicator_t *comm) {
    return ompi_comm_get_local_cid(comm);
}
static inline uint32_t mtl_efa_job_size(void) {
    return opal_process_info.num_procs;
}
#else
#include "ompi/mca/rte/rte.h"
#include "opal/threads/mutex.h"

#define MTL_EFA_INIT_PARAMS bool enable_progress_threads, bool enable_mpi_threads
/* 4.1 has no class for a failed process: a lost peer is OMPI_ERR_UNREACH,
 * as for its ob1 an unreachable peer, which a call returns as
 * MPI_ERR_INTERN; a status holds MPI_ERR_INTERN itself (4.1 copies a
 * status's code unconverted). */
#define MTL_EFA_ERR_LOST OMPI_ERR_UNREACH
#define MTL_EFA_ERR_PEER_LOST MPI_ERR_INTERN
#define MTL_EFA_PEER_LOST_IS_A_CLASS 0
/* (4.1 has no MPI fault tolerance) */
#define MTL_EFA_FT_MPI_ON() false
/* 4.1's pml/cm asks nothing.  Built with CUDA, its convertor copies
 * receives and non-contiguous sends through the host, but hands a
 * contiguous device buffer to the MTL as it is (mtl_efa_device.c). */
#define MTL_EFA_INIT_ACCELERATOR(yes) ((void)(yes))
#define MTL_EFA_CONVERTOR_ON_DEVICE(conv)                                                          \
    (0 != ((conv)->flags & CONVERTOR_CUDA) && 0 == ((conv)->flags & CONVERTOR_CUDA_UNIFIED))
/* (4.1's temporaries are host memory) */
#define MTL_EFA_CONVERTOR_TEMP_ON_DEVICE(conv) ((void)(conv), 0)
#if defined(OPAL_CUDA_SUPPORT) && OPAL_CUDA_SUPPORT
#define MTL_EFA_CONVERTOR_COPIES_CUDA 1
#else
#define MTL_EFA_CONVERTOR_COPIES_CUDA 0
#endif

static inline uint32_t mtl_efa_comm_cid(const ompi_communicator_t *comm) {
    return comm->c_contextid;
}
static inline uint32_t mtl_efa_job_size(void) {
    return (uint32_t)ompi_process_info.num_procs;
}
#endif

#endif
