# -*- shell-script -*-
#
# Inside an Open MPI source tree (this directory is opal/mca/btl/efa) Open
# MPI's configure runs this macro; our own configure does not read this
# file.  Everything the BTL needs (libfabric, hwloc, C++20) is checked once
# by opal/mca/common/efa/configure.m4 (the "common" framework is configured
# before all other OPAL frameworks).

# Built as a DSO only (common/configure.m4, EFA_OMPI_COMPILE_MODE_DSO).
AC_DEFUN([MCA_opal_btl_efa_COMPILE_MODE], [
    AC_MSG_CHECKING([for MCA component $2:$3 compile mode])
    EFA_OMPI_COMPILE_MODE_DSO([$4])
    AC_MSG_RESULT([$$4])
])

# MCA_opal_btl_efa_CONFIG([action-if-can-compile], [action-if-cant-compile])
# -------------------------------------------------------------------------
AC_DEFUN([MCA_opal_btl_efa_CONFIG], [
    AC_CONFIG_FILES([opal/mca/btl/efa/Makefile])

    OPAL_VAR_SCOPE_PUSH([btl_efa_happy])
    btl_efa_happy=yes
    EFA_OMPI_DSO_ONLY([btl efa], [btl_efa_happy])
    AC_MSG_CHECKING([whether common efa (libfabric, hwloc, C++20) is usable for btl efa])
    AS_IF([test "$opal_common_efa_happy" = yes],
          [AC_MSG_RESULT([yes])],
          [AC_MSG_RESULT([no])
           btl_efa_happy=no])
    AS_IF([test "$btl_efa_happy" = yes], [$1], [$2])
    OPAL_VAR_SCOPE_POP
])dnl
