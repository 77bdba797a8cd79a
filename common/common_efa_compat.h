/*
 * What differs between the Open MPI series the components build against
 * (4.1 and 5.0) at the OPAL layer: where the runtime's PMIx wrappers live and
 * what their scopes are called, how a file is handed to the runtime for
 * cleanup, and the types of the process information.  Everything
 * version-specific of the common glue is here; docs/DESIGN.md ("Open MPI 4.1
 * and 5.0") lists every difference of the three components.
 */
#ifndef MCA_COMMON_EFA_COMPAT_H
#define MCA_COMMON_EFA_COMPAT_H

#include "opal_config.h"

#include <stdint.h>

#include "opal/constants.h"
#include "opal/util/proc.h"
#include "opal/version.h"

#if OPAL_MAJOR_VERSION >= 5
#include "opal/mca/pmix/pmix-internal.h"
#include "opal/mca/threads/mutex.h" /* opal_using_threads */

#define EFA_PMIX_LOCAL PMIX_LOCAL
#define EFA_PMIX_GLOBAL PMIX_GLOBAL
/* The key and type of a peer's host name in the modex. */
#define EFA_PMIX_HOSTNAME PMIX_HOSTNAME
#define EFA_PMIX_STRING PMIX_STRING
/* The node's processes, each one's local rank and binding, registered with
 * the job before it starts (common_efa_cpusets.c). */
#define EFA_PMIX_LOCAL_PEERS PMIX_LOCAL_PEERS
#define EFA_PMIX_LOCAL_RANK PMIX_LOCAL_RANK
#define EFA_PMIX_CPUSET PMIX_CPUSET
#define EFA_PMIX_UINT16 PMIX_UINT16

/* Hand a file to the runtime, which removes it if this process dies
 * without finalizing (mca_common_efa_register_cleanup says a refusal). */
static inline int mca_common_efa_pmix_register_cleanup(const char *path) {
    return opal_pmix_register_cleanup((char *)path, false, false, false);
}

/* 5.0's modex macros leave PMIx's own status in their result; as an OPAL
 * code (for a message, or handed up). */
static inline int mca_common_efa_modex_rc(int rc) {
    return opal_pmix_convert_status(rc);
}

/* 5.0 keeps the local rank unsigned, UINT16_MAX where the runtime gave none. */
static inline int mca_common_efa_local_rank(void) {
    return UINT16_MAX == opal_process_info.my_local_rank ? -1
                                                         : (int)opal_process_info.my_local_rank;
}
#else
#include "opal/mca/pmix/pmix.h"
#include "opal/threads/mutex.h" /* opal_using_threads */

#define EFA_PMIX_LOCAL OPAL_PMIX_LOCAL
#define EFA_PMIX_GLOBAL OPAL_PMIX_GLOBAL
#define EFA_PMIX_HOSTNAME OPAL_PMIX_HOSTNAME
#define EFA_PMIX_STRING OPAL_STRING
#define EFA_PMIX_LOCAL_PEERS OPAL_PMIX_LOCAL_PEERS
#define EFA_PMIX_LOCAL_RANK OPAL_PMIX_LOCAL_RANK
#define EFA_PMIX_CPUSET OPAL_PMIX_CPUSET
#define EFA_PMIX_UINT16 OPAL_UINT16

static inline int mca_common_efa_pmix_register_cleanup(const char *path) {
    if (NULL == opal_pmix.register_cleanup) {
        return OPAL_ERR_NOT_SUPPORTED; /* a runtime without the call (e.g. a singleton) */
    }
    return opal_pmix.register_cleanup((char *)path, false, false, false);
}

static inline int mca_common_efa_local_rank(void) {
    return (int)opal_process_info.my_local_rank;
}

/* 4.1's modex macros give OPAL codes. */
static inline int mca_common_efa_modex_rc(int rc) {
    return rc;
}
#endif

/* Processes of this job on this node, this one included. */
static inline int mca_common_efa_local_size(void) {
    return (int)opal_process_info.num_local_peers + 1;
}

#endif
