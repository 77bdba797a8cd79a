/*
 * The components' release, as ompi_info shows it ("Component v0.9.0").
 *
 * Out of tree, configure passes the release of AC_INIT (-DEFA_RELEASE_*),
 * so a user can tell which build of the components a node has apart from
 * which Open MPI it runs.  Inside an Open MPI tree the components are part
 * of that Open MPI release and carry its number.
 */
#ifndef COMMON_EFA_RELEASE_H
#define COMMON_EFA_RELEASE_H

#if defined(EFA_RELEASE_MAJOR)
#define MCA_COMMON_EFA_RELEASE_VERSION                                                             \
    MCA_BASE_MAKE_VERSION(component, EFA_RELEASE_MAJOR, EFA_RELEASE_MINOR, EFA_RELEASE_PATCH)
#else
#define MCA_COMMON_EFA_RELEASE_VERSION                                                             \
    MCA_BASE_MAKE_VERSION(component, OPAL_MAJOR_VERSION, OPAL_MINOR_VERSION, OPAL_RELEASE_VERSION)
#endif

#endif
