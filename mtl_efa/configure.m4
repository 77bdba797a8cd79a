# -*- shell-script -*-
#
# Inside an Open MPI source tree (this directory is ompi/mca/mtl/efa) Open
# MPI's configure runs these macros; our own configure does not read this
# file.  Everything the MTL needs (libfabric, hwloc, C++20) is checked once
# by opal/mca/common/efa/configure.m4, configured earlier (OPAL before OMPI).

# MCA_ompi_mtl_efa_POST_CONFIG(will_build)
# ----------------------------------------
# The MTL keeps its per-peer address in ompi_proc_t's endpoint array, so it
# needs the MTL slot there (only reserved when some MTL is built).
AC_DEFUN([MCA_ompi_mtl_efa_POST_CONFIG], [
    AS_IF([test "$1" = "1"], [OMPI_REQUIRE_ENDPOINT_TAG([MTL])])
])dnl

# Built as a DSO only (common/configure.m4, EFA_OMPI_COMPILE_MODE_DSO).
AC_DEFUN([MCA_ompi_mtl_efa_COMPILE_MODE], [
    AC_MSG_CHECKING([for MCA component $2:$3 compile mode])
    EFA_OMPI_COMPILE_MODE_DSO([$4])
    AC_MSG_RESULT([$$4])
])

# MCA_ompi_mtl_efa_CONFIG([action-if-can-compile], [action-if-cant-compile])
# -------------------------------------------------------------------------
AC_DEFUN([MCA_ompi_mtl_efa_CONFIG], [
    AC_CONFIG_FILES([ompi/mca/mtl/efa/Makefile])

    OPAL_VAR_SCOPE_PUSH([mtl_efa_happy])
    mtl_efa_happy=yes
    EFA_OMPI_DSO_ONLY([mtl efa], [mtl_efa_happy])
    AC_MSG_CHECKING([whether common efa (libfabric, hwloc, C++20) is usable for mtl efa])
    AS_IF([test "$opal_common_efa_happy" = yes],
          [AC_MSG_RESULT([yes])],
          [AC_MSG_RESULT([no])
           mtl_efa_happy=no])
    AS_IF([test "$mtl_efa_happy" = yes], [$1], [$2])
    OPAL_VAR_SCOPE_POP
])dnl
