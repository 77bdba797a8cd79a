# -*- shell-script -*-
#
# Configure macros of the EFA components.  This file has two readers:
#
# * Inside an Open MPI source tree (this directory is opal/mca/common/efa,
#   see scripts/add-to-ompi-tree.sh) Open MPI's autogen.pl m4_includes it
#   with every other component's configure.m4, and Open MPI's configure
#   runs MCA_opal_common_efa_CONFIG below.  mtl/efa and btl/efa come later
#   in that configure and only look at $opal_common_efa_happy.
#
# * Our own configure.ac (the out-of-tree build against an installed Open
#   MPI) m4_includes it from the top-level configure.m4 for the shared
#   checks (EFA_CXX20_IFELSE, EFA_CHECK_FI_FEATURES), so both builds test
#   the same things.  MCA_opal_common_efa_CONFIG is defined there too but
#   never expanded, so the Open MPI macros it calls need not exist.


# EFA_CXX20_IFELSE([action-if-ok], [action-if-not])
# -------------------------------------------------
# Does $CXX compile C++20 with -std=c++20?  The core needs it; the Open MPI
# glue is C and does not.
AC_DEFUN([EFA_CXX20_IFELSE], [
    AC_LANG_PUSH([C++])
    efa_cxx20_save_CXXFLAGS=$CXXFLAGS
    CXXFLAGS="$CXXFLAGS -std=c++20"
    AC_MSG_CHECKING([whether $CXX accepts -std=c++20])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <span>
#include <concepts>]], [[std::span<int> s; return (int)s.size();]])],
        [efa_cxx20_ok=yes], [efa_cxx20_ok=no])
    AC_MSG_RESULT([$efa_cxx20_ok])
    CXXFLAGS=$efa_cxx20_save_CXXFLAGS
    AC_LANG_POP([C++])
    AS_IF([test "$efa_cxx20_ok" = yes], [$1], [$2])
])


# EFA_CHECK_FI_FEATURES
# ---------------------
# The libfabric features that depend on its version.  FI_OPT_EFA_* and
# friends are enum members, invisible to #ifdef, so they are checked as
# declarations; the results (HAVE_RDMA_FI_EXT_EFA_H, HAVE_DECL_FI_OPT_*)
# are what common/nic.cpp reads from efa_build_config.h.  The caller puts
# libfabric's -I flags in CPPFLAGS.  When adding a check here, add its
# #undef line to efa_build_config_ompi.h.in as well (the out-of-tree build
# generates its template with autoheader).
AC_DEFUN([EFA_CHECK_FI_FEATURES], [
    AC_CHECK_HEADERS([rdma/fi_ext_efa.h rdma/fi_ext.h])
    AC_CHECK_DECLS([FI_OPT_EFA_RNR_RETRY, FI_OPT_EFA_EMULATED_READ, FI_OPT_EFA_EMULATED_WRITE,
                    FI_OPT_EFA_EMULATED_ATOMICS, FI_OPT_EFA_USE_DEVICE_RDMA,
                    FI_OPT_CUDA_API_PERMITTED, FI_OPT_SHARED_MEMORY_PERMITTED], [], [], [[
#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#ifdef HAVE_RDMA_FI_EXT_H
#include <rdma/fi_ext.h>
#endif
#ifdef HAVE_RDMA_FI_EXT_EFA_H
#include <rdma/fi_ext_efa.h>
#endif
]])
])


# EFA_CHECK_CMA
# -------------
# Linux cross-memory attach (process_vm_readv / process_vm_writev in
# <sys/uio.h>), btl_efa's single-copy path between processes of one node.
# Without it that path is compiled out (btl_efa_single_copy then accepts
# only "auto" and "none").  The result reaches the BTL as a preprocessor
# flag, $(EFA_CMA_CPPFLAGS), not through efa_build_config.h: the BTL
# includes opal_config.h, whose PACKAGE_* macros that header would repeat.
AC_DEFUN([EFA_CHECK_CMA], [
    efa_have_cma=no
    AC_CHECK_HEADER([sys/uio.h],
        [AC_CHECK_FUNCS([process_vm_readv process_vm_writev])
         AS_IF([test "$ac_cv_func_process_vm_readv" = yes && test "$ac_cv_func_process_vm_writev" = yes],
               [AC_CHECK_DECL([process_vm_readv], [efa_have_cma=yes], [], [[
#define _GNU_SOURCE 1
#include <sys/uio.h>
]])])])
    AC_MSG_CHECKING([whether btl_efa gets its CMA single-copy path])
    AC_MSG_RESULT([$efa_have_cma])
    AS_IF([test "$efa_have_cma" = yes],
          [EFA_CMA_CPPFLAGS=-DEFA_HAVE_CMA=1],
          [EFA_CMA_CPPFLAGS=])
    AC_SUBST([EFA_CMA_CPPFLAGS])
])


# EFA_OMPI_DSO_ONLY(component, happy-variable)
# --------------------------------------------
# Inside Open MPI: the EFA components are built as DSOs only.  Built
# statically they would be linked into libopen-pal/libmpi, and every MPI
# program would then link libstdc++ and libfabric through them.  A static
# build (--disable-dlopen, --enable-mca-static) therefore skips them.
# $compile_mode is set by Open MPI's MCA_CONFIGURE_M4_CONFIG_COMPONENT
# before it runs a component's CONFIG macro.
AC_DEFUN([EFA_OMPI_DSO_ONLY], [
    AC_MSG_CHECKING([whether $1 is built as a DSO])
    AS_IF([test "$compile_mode" = dso],
          [AC_MSG_RESULT([yes])],
          [AC_MSG_RESULT([no ($compile_mode)])
           AC_MSG_WARN([$1 can only be built as a DSO; it is skipped in this static build])
           $2=no])
])


# EFA_OMPI_COMPILE_MODE_DSO(mode-variable)
# -----------------------------------------
# The compile mode of the three EFA components: a DSO, whatever Open MPI
# builds its own components as (5.0 builds them into libmpi by default),
# unless dlopen is disabled, where EFA_OMPI_DSO_ONLY then skips them.  Used
# by the MCA_<project>_<framework>_efa_COMPILE_MODE hooks, which Open MPI's
# configure (4.1 and 5.0) asks instead of --enable-mca-dso/-static.
AC_DEFUN([EFA_OMPI_COMPILE_MODE_DSO], [
    # 5.0 reads the hook's answer indirectly (the value of the variable
    # named by the value of $1, config/opal_mca.m4), 4.1 directly: "dso=dso"
    # makes both read "dso".
    AS_IF([test "$enable_dlopen" = no], [$1=static], [$1=dso
                                                   dso=dso])
])

AC_DEFUN([MCA_opal_common_efa_COMPILE_MODE], [
    AC_MSG_CHECKING([for MCA component $2:$3 compile mode])
    EFA_OMPI_COMPILE_MODE_DSO([$4])
    AC_MSG_RESULT([$$4])
])


# MCA_opal_common_efa_POST_CONFIG(will_build)
# -------------------------------------------
# Open MPI runs the CONFIG macro even for a component the user disabled
# (--enable-mca-no-build=common-efa); the final word comes here, so that
# mtl/efa and btl/efa are not built without their library.
AC_DEFUN([MCA_opal_common_efa_POST_CONFIG], [
    AS_IF([test "$1" != "1"], [opal_common_efa_happy=no])
])dnl


# MCA_opal_common_efa_CONFIG([action-if-can-compile], [action-if-cant-compile])
# ----------------------------------------------------------------------------
# The shared core as an Open MPI "common" component (libmca_common_efa).
# Needs libfabric >= 1.14 (Open MPI's own OFI check, so --with-ofi applies),
# the hwloc Open MPI itself uses (internal or external: its include path is
# then in CPPFLAGS and its symbols come through libopen-pal), and a C++20
# compiler (Open MPI's configure has already set up $CXX).
# $opal_common_efa_happy tells mtl/efa and btl/efa whether they can build.
AC_DEFUN([MCA_opal_common_efa_CONFIG], [
    # Open MPI's hwloc must be configured first (it is otherwise configured
    # after the "common" framework).  Keep this first: automake numbers the
    # config headers' stamp files in the order it sees them, and config.status
    # in the order configure creates them; hwloc's must come before ours in
    # both, or efa_build_config.h is regenerated on every make.
    # (Open MPI 5.0 has no such macro: there hwloc is configured first anyway.)
    m4_ifdef([MCA_opal_hwloc_CONFIG_REQUIRE], [AC_REQUIRE([MCA_opal_hwloc_CONFIG_REQUIRE])])

    AC_CONFIG_FILES([opal/mca/common/efa/Makefile])
    # The core's own small config header, filled from the same checks as
    # out of tree (the core is plain C++ and does not include opal_config.h).
    AC_CONFIG_HEADERS([opal/mca/common/efa/efa_build_config.h:opal/mca/common/efa/efa_build_config_ompi.h.in])
    # Makes the three Makefile.am's take their Open MPI branch; our own
    # configure.ac defines it false.  Run unconditionally: Open MPI runs
    # every component's CONFIG macro, even for components it will not build.
    AM_CONDITIONAL([EFA_BUILD_IN_OMPI_TREE], [true])

    OPAL_VAR_SCOPE_PUSH([common_efa_save_CPPFLAGS common_efa_save_CXXFLAGS common_efa_flag])
    opal_common_efa_happy=yes
    common_efa_CXXSTD=

    EFA_OMPI_DSO_ONLY([common efa], [opal_common_efa_happy])

    # 5.0 wants a prefix and sets <prefix>_{CPPFLAGS,LDFLAGS,LIBS}; 4.1
    # ignores it and sets (and substitutes) opal_ofi_*: with the prefix
    # opal_ofi the Makefile.am's read the same variables from both.
    OPAL_CHECK_OFI([opal_ofi])
    AC_SUBST([opal_ofi_CPPFLAGS])
    AC_SUBST([opal_ofi_LDFLAGS])
    AC_SUBST([opal_ofi_LIBS])
    AS_IF([test "$opal_ofi_happy" = yes],
          [OPAL_CHECK_OFI_VERSION_GE([1,14], [], [opal_common_efa_happy=no])],
          [opal_common_efa_happy=no])

    AS_IF([test "$opal_common_efa_happy" = yes],
          [EFA_CXX20_IFELSE([common_efa_CXXSTD=-std=c++20], [opal_common_efa_happy=no])])

    AS_IF([test "$opal_common_efa_happy" = yes],
          [AC_LANG_PUSH([C++])
           common_efa_save_CXXFLAGS=$CXXFLAGS
           CXXFLAGS="$CXXFLAGS $common_efa_CXXSTD"
           AC_MSG_CHECKING([whether Open MPI's hwloc (2.x) compiles in C++])
           AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <hwloc.h>
#if HWLOC_API_VERSION < 0x00020000
#error hwloc 2 needed
#endif]], [[hwloc_topology_t t; (void)hwloc_topology_init(&t);]])],
               [AC_MSG_RESULT([yes])],
               [AC_MSG_RESULT([no])
                opal_common_efa_happy=no])
           CXXFLAGS=$common_efa_save_CXXFLAGS
           AC_LANG_POP([C++])])

    AS_IF([test "$opal_common_efa_happy" = yes],
          [common_efa_save_CPPFLAGS=$CPPFLAGS
           CPPFLAGS="$CPPFLAGS $opal_ofi_CPPFLAGS"
           EFA_CHECK_FI_FEATURES
           CPPFLAGS=$common_efa_save_CPPFLAGS])

    EFA_CHECK_CMA

    # Open MPI optimises its C (-O3) but leaves CXXFLAGS without -O: give the
    # C++ core the optimisation level of Open MPI's C.
    common_efa_CXXOPT=
    for common_efa_flag in $CFLAGS; do
        AS_CASE([$common_efa_flag], [-O*], [common_efa_CXXOPT=$common_efa_flag])
    done
    AC_SUBST([common_efa_CXXSTD])
    AC_SUBST([common_efa_CXXOPT])
    OPAL_VAR_SCOPE_POP

    AS_IF([test "$opal_common_efa_happy" = yes], [$1], [$2])
])dnl
