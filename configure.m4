dnl Configure macros shared by the top-level (out-of-tree) build.
dnl Each macro does one job and says what it found.

dnl Checks shared with the build inside an Open MPI tree (EFA_CXX20_IFELSE,
dnl EFA_CHECK_FI_FEATURES) live in common/configure.m4, the file Open MPI's
dnl autogen.pl reads there; its MCA_opal_common_efa_CONFIG is not used here.
m4_include([common/configure.m4])

dnl C++20 is required for the core; the Open MPI glue stays C.
AC_DEFUN([EFA_CHECK_CXX20], [
    EFA_CXX20_IFELSE([], [AC_MSG_ERROR([a C++20 compiler is required (g++ 12 or newer)])])
    AC_SUBST([EFA_CXXSTD], [-std=c++20])
    AC_SUBST([EFA_WARN_CFLAGS], ["-Wall -Wextra"])
])

dnl Locate Open MPI: --with-ompi=DIR, else through mpicc.  We need the
dnl devel headers (ompi_config.h, ompi/mca/mtl/mtl.h, opal/mca/btl/btl.h).
AC_DEFUN([EFA_CHECK_OMPI], [
    AC_ARG_WITH([ompi],
        [AS_HELP_STRING([--with-ompi=DIR], [Open MPI installation (default: found through mpicc)])])
    AC_ARG_VAR([MPICC], [Open MPI C compiler wrapper used to find Open MPI])
    AS_IF([test -n "$with_ompi" && test "$with_ompi" != yes],
          [AS_IF([test -x "$with_ompi/bin/mpicc"], [MPICC="$with_ompi/bin/mpicc"],
                 [AC_MSG_ERROR([--with-ompi=$with_ompi: no bin/mpicc there])])],
          [AC_PATH_PROG([MPICC], [mpicc])])
    AS_IF([test -z "$MPICC"],
          [AC_MSG_ERROR([Open MPI not found: install libopenmpi-dev or pass --with-ompi=DIR])])
    AC_PATH_PROG([OMPI_INFO], [ompi_info], [], [`dirname $MPICC`:$PATH])
    AS_IF([test -z "$OMPI_INFO"], [AC_MSG_ERROR([ompi_info not found next to $MPICC])])

    MPI_CPPFLAGS=`$MPICC --showme:compile`
    MPI_LIBS=`$MPICC --showme:link`
    EFA_OMPI_INCDIR=""
    for d in `$MPICC --showme:incdirs`; do
        AS_IF([test -f "$d/openmpi/ompi_config.h"], [EFA_OMPI_INCDIR="$d/openmpi"])
        AS_IF([test -z "$EFA_OMPI_INCDIR" && test -f "$d/ompi_config.h"], [EFA_OMPI_INCDIR="$d"])
    done
    AC_MSG_CHECKING([for the Open MPI development headers])
    AS_IF([test -n "$EFA_OMPI_INCDIR" && test -f "$EFA_OMPI_INCDIR/ompi/mca/mtl/mtl.h"],
          [AC_MSG_RESULT([$EFA_OMPI_INCDIR])],
          [AC_MSG_RESULT([no])
           AC_MSG_ERROR([Open MPI was found at $MPICC but without development headers (ompi/mca/mtl/mtl.h); Open MPI must be configured with --with-devel-headers (Debian: libopenmpi-dev)])])
    EFA_OMPI_VERSION=`$OMPI_INFO --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p'`
    AS_CASE([$EFA_OMPI_VERSION],
        [4.1.*|5.0.*], [],
        [AC_MSG_WARN([Open MPI $EFA_OMPI_VERSION: the components are built and tested against the 4.1 and 5.0 series (MTL 2.0.0, BTL 3.1.0 and 3.3.0)])])
    dnl An Open MPI built with --disable-dlopen loads no component from a
    dnl file, so nothing built here could ever run in it.  Only its plain
    dnl "no" stops configure: an ompi_info that does not say goes on.
    AC_MSG_CHECKING([whether Open MPI loads components from files (dlopen)])
    efa_ompi_dlopen=`$OMPI_INFO --parsable --config 2>/dev/null | sed -n 's/^option:dlopen://p' | head -1`
    AC_MSG_RESULT([${efa_ompi_dlopen:-not said}])
    AS_IF([test "x$efa_ompi_dlopen" = xno],
          [AC_MSG_ERROR([Open MPI $EFA_OMPI_VERSION ($OMPI_INFO says option:dlopen:no) was built with --disable-dlopen: it cannot load components from files, so mtl_efa and btl_efa would never be loaded (the components are DSOs only, in an Open MPI tree too).  Use an Open MPI built with dlopen support, its default.])])
    EFA_OMPI_LIBDIR=`$OMPI_INFO --path libdir --parsable | sed -n 's/^path:libdir://p'`
    EFA_OMPI_PKGLIBDIR=`$OMPI_INFO --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p'`
    EFA_OMPI_PREFIX=`$OMPI_INFO --path prefix --parsable | sed -n 's/^path:prefix://p'`
    OMPI_CPPFLAGS="$MPI_CPPFLAGS -I$EFA_OMPI_INCDIR"
    EFA_CHECK_OMPI_HEADERS
    EFA_OMPI_MACHINE_FLAGS
    OMPI_LIBS="-L$EFA_OMPI_LIBDIR -lmpi -lopen-pal"
    AC_SUBST([MPI_CPPFLAGS])
    AC_SUBST([MPI_LIBS])
    AC_SUBST([OMPI_CPPFLAGS])
    AC_SUBST([OMPI_LIBS])
    AC_SUBST([EFA_OMPI_VERSION])
    AC_SUBST([EFA_OMPI_LIBDIR])
])

dnl Do the Open MPI headers the components include compile?  Open MPI 5.0's
dnl --with-devel-headers leaves out a few headers that installed ones
dnl include (opal/mca/threads/pthreads/*.h, opal/mca/timer/linux/*.h, ...).
dnl Name the first missing one; --with-ompi-source=DIR (the tree Open MPI
dnl was configured and built in) supplies them, after the installed ones.
AC_DEFUN([EFA_CHECK_OMPI_HEADERS], [
    AC_ARG_WITH([ompi-source],
        [AS_HELP_STRING([--with-ompi-source=DIR],
            [the Open MPI source (and build) tree of the installed Open MPI, for the headers its installation lacks (Open MPI 5.0)])])
    AS_IF([test -n "$with_ompi_source" && test "$with_ompi_source" != yes],
          [AS_IF([test -f "$with_ompi_source/opal/mca/btl/btl.h"],
                 [OMPI_CPPFLAGS="$OMPI_CPPFLAGS -I$with_ompi_source"
                  for d in opal/include ompi/include; do
                      AS_IF([test -d "$with_ompi_source/$d"], [OMPI_CPPFLAGS="$OMPI_CPPFLAGS -I$with_ompi_source/$d"])
                  done],
                 [AC_MSG_ERROR([--with-ompi-source=$with_ompi_source: no Open MPI source tree there (opal/mca/btl/btl.h)])])])
    AC_MSG_CHECKING([whether the Open MPI headers the components include compile])
    cat > conftest_ompi.c <<_EFA_EOF
#include "ompi_config.h"
#include "ompi/version.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/mtl/mtl.h"
#include "ompi/mca/mtl/base/base.h"
#include "ompi/mca/mtl/base/mtl_base_datatype.h"
#include "ompi/message/message.h"
#include "ompi/proc/proc.h"
#if OMPI_MAJOR_VERSION >= 5
#include "ompi/runtime/ompi_rte.h"
#include "opal/mca/pmix/pmix-internal.h"
#include "opal/mca/threads/mutex.h"
#else
#include "ompi/mca/rte/rte.h"
#include "opal/mca/pmix/pmix.h"
#include "opal/threads/mutex.h"
#endif
#include "opal/mca/btl/btl.h"
#include "opal/mca/btl/base/base.h"
#include "opal/memoryhooks/memory.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/show_help.h"
int main(void) { return 0; }
_EFA_EOF
    efa_hdr_out=`$CC $CPPFLAGS $OMPI_CPPFLAGS -c conftest_ompi.c -o conftest_ompi.o 2>&1`
    efa_hdr_rc=$?
    rm -f conftest_ompi.c conftest_ompi.o
    AS_IF([test $efa_hdr_rc -eq 0],
          [AC_MSG_RESULT([yes])],
          [AC_MSG_RESULT([no])
           efa_hdr_missing=`echo "$efa_hdr_out" | sed -n 's/.*fatal error: \([[^:]]*\): No such file.*/\1/p' | head -1`
           echo "$efa_hdr_out" >&AS_MESSAGE_LOG_FD
           AS_IF([test -n "$efa_hdr_missing"],
                 [AC_MSG_ERROR([Open MPI $EFA_OMPI_VERSION's installed development headers ($EFA_OMPI_INCDIR) lack $efa_hdr_missing, which an installed header includes (Open MPI 5.0's --with-devel-headers does not install every header it needs).  Pass --with-ompi-source=DIR, the tree that Open MPI was configured and built in, or build the components inside that tree (scripts/add-to-ompi-tree.sh).])],
                 [efa_hdr_first=`echo "$efa_hdr_out" | grep -m1 'error:'`
                  dnl The fuzz harnesses need the core only (scripts/build-instrumented.sh
                  dnl fuzz builds nothing else): Debian's clang 14 cannot compile Open
                  dnl MPI 5.0's headers (_Float16), which must not stop them.
                  AS_IF([test "x$enable_fuzzers" = xyes],
                        [AC_MSG_WARN([the Open MPI headers do not compile with $CC: $efa_hdr_first.  Only the core and the fuzz harnesses (tests/fuzz) can be built in this tree, not the components.])],
                        [AC_MSG_ERROR([the Open MPI headers do not compile with $CC: $efa_hdr_first (all of it in config.log).  Use the compiler Open MPI was built with.])])])])
])

dnl The machine flags (-m...) Open MPI itself was compiled with.  Its
dnl inline atomics depend on them: without -mcx16 on x86_64 its 128-bit
dnl compare-and-swap becomes a call to __sync_val_compare_and_swap_16, which
dnl nothing defines, and the first MPI_Mprobe under MPI_THREAD_MULTIPLE
dnl kills the process.  They go with the Open MPI include flags, so every
dnl file that includes Open MPI headers gets them.
AC_DEFUN([EFA_OMPI_MACHINE_FLAGS], [
    AC_MSG_CHECKING([for the machine flags Open MPI was built with])
    efa_ompi_build_cflags=`$OMPI_INFO --all --parsable 2>/dev/null | sed -n 's/^option:build:cflags://p'`
    EFA_OMPI_MACHINE_CFLAGS=""
    for efa_flag in $efa_ompi_build_cflags; do
        AS_CASE([$efa_flag], [-m*], [EFA_OMPI_MACHINE_CFLAGS="$EFA_OMPI_MACHINE_CFLAGS $efa_flag"])
    done
    AS_IF([test -n "$EFA_OMPI_MACHINE_CFLAGS"],
          [AC_MSG_RESULT([$EFA_OMPI_MACHINE_CFLAGS])
           OMPI_CPPFLAGS="$OMPI_CPPFLAGS $EFA_OMPI_MACHINE_CFLAGS"],
          [AC_MSG_RESULT([none])])
])

dnl EFA_PREFIX_LIBDIR(DIR, NAME, VAR): VAR=DIR/lib64 where libNAME is
dnl there (the EFA installer's layout on Amazon Linux and RHEL), else
dnl DIR/lib.
AC_DEFUN([EFA_PREFIX_LIBDIR], [
    AS_IF([ls "$1/lib64/lib$2."* > /dev/null 2>&1], [$3="$1/lib64"], [$3="$1/lib"])
])

dnl libfabric: --with-libfabric=DIR, else pkg-config.  Version-dependent
dnl features are checked as declarations: FI_OPT_EFA_* are enum members,
dnl invisible to #ifdef.
AC_DEFUN([EFA_CHECK_LIBFABRIC], [
    AC_ARG_WITH([libfabric],
        [AS_HELP_STRING([--with-libfabric=DIR], [libfabric installation (default: pkg-config)])])
    AS_IF([test -n "$with_libfabric" && test "$with_libfabric" != yes],
          [EFA_PREFIX_LIBDIR([$with_libfabric], [fabric], [efa_fabric_libdir])
           LIBFABRIC_CFLAGS="-I$with_libfabric/include"
           LIBFABRIC_LIBS="-L$efa_fabric_libdir -Wl,-rpath,$efa_fabric_libdir -lfabric"
           EFA_LIBFABRIC_VERSION="(from $efa_fabric_libdir)"],
          [PKG_CHECK_MODULES([LIBFABRIC], [libfabric >= 1.14],
               [EFA_LIBFABRIC_VERSION=`$PKG_CONFIG --modversion libfabric`],
               [AC_MSG_ERROR([libfabric >= 1.14 not found: install libfabric-dev or pass --with-libfabric=DIR])])])
    efa_save_CPPFLAGS=$CPPFLAGS
    efa_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $LIBFABRIC_CFLAGS"
    LIBS="$LIBS $LIBFABRIC_LIBS"
    AC_CHECK_HEADER([rdma/fi_tagged.h], [], [AC_MSG_ERROR([rdma/fi_tagged.h not found])])
    AC_CHECK_FUNC([fi_getinfo], [], [AC_MSG_ERROR([cannot link with libfabric])])
    dnl (pkg-config checked the version; a named directory is checked here)
    AC_MSG_CHECKING([for libfabric >= 1.14 headers])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <rdma/fabric.h>
#if FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION) < FI_VERSION(1, 14)
#error too old
#endif]], [[]])],
        [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no])
         AC_MSG_ERROR([libfabric >= 1.14 needed; $LIBFABRIC_CFLAGS has an older one])])
    EFA_CHECK_FI_FEATURES
    CPPFLAGS=$efa_save_CPPFLAGS
    LIBS=$efa_save_LIBS
    AC_SUBST([LIBFABRIC_CFLAGS])
    AC_SUBST([LIBFABRIC_LIBS])
])

dnl hwloc for NIC locality: --with-hwloc=DIR, else pkg-config.
AC_DEFUN([EFA_CHECK_HWLOC], [
    AC_ARG_WITH([hwloc],
        [AS_HELP_STRING([--with-hwloc=DIR], [hwloc installation (default: pkg-config)])])
    AS_IF([test -n "$with_hwloc" && test "$with_hwloc" != yes],
          [EFA_PREFIX_LIBDIR([$with_hwloc], [hwloc], [efa_hwloc_libdir])
           HWLOC_CFLAGS="-I$with_hwloc/include"
           HWLOC_LIBS="-L$efa_hwloc_libdir -Wl,-rpath,$efa_hwloc_libdir -lhwloc"],
          [PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0], [],
               [AC_MSG_ERROR([hwloc >= 2.0 not found: install libhwloc-dev or pass --with-hwloc=DIR])])])
    AC_SUBST([HWLOC_CFLAGS])
    AC_SUBST([HWLOC_LIBS])
])

dnl GoogleTest for the core's unit tests (Debian: libgtest-dev).
AC_DEFUN([EFA_CHECK_GTEST], [
    AC_LANG_PUSH([C++])
    efa_save_LIBS=$LIBS
    LIBS="$LIBS -lgtest -pthread"
    efa_save_CXXFLAGS=$CXXFLAGS
    CXXFLAGS="$CXXFLAGS -std=c++20"
    AC_MSG_CHECKING([for GoogleTest])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <gtest/gtest.h>]], [[testing::InitGoogleTest();]])],
        [efa_have_gtest=yes], [efa_have_gtest=no])
    AC_MSG_RESULT([$efa_have_gtest])
    LIBS=$efa_save_LIBS
    CXXFLAGS=$efa_save_CXXFLAGS
    AC_LANG_POP([C++])
    AM_CONDITIONAL([HAVE_GTEST], [test "$efa_have_gtest" = yes])
])

dnl Where `make install` puts things.  Without --prefix: the common
dnl library beside Open MPI's libraries and the components in Open MPI's
dnl component directory, so that mpirun finds them with no settings.
dnl With --prefix: $libdir and $libdir/openmpi; the user then adds that
dnl directory to OMPI_MCA_mca_base_component_path (see README.md).
dnl The components' own release, from AC_INIT: ompi_info shows it as their
dnl "Component v" (inside an Open MPI tree they carry that release's).
AC_DEFUN([EFA_SET_RELEASE], [
    AS_IF([echo "$PACKAGE_VERSION" | grep -Eq '^@<:@0-9@:>@+\.@<:@0-9@:>@+\.@<:@0-9@:>@+$'], [],
          [AC_MSG_ERROR([the package version $PACKAGE_VERSION (configure.ac) is not MAJOR.MINOR.PATCH in numbers, which the components' MCA version needs])])
    efa_release_major=`echo "$PACKAGE_VERSION" | cut -d. -f1`
    efa_release_minor=`echo "$PACKAGE_VERSION" | cut -d. -f2`
    efa_release_patch=`echo "$PACKAGE_VERSION" | cut -d. -f3`
    AC_SUBST([EFA_RELEASE_CPPFLAGS],
             ["-DEFA_RELEASE_MAJOR=$efa_release_major -DEFA_RELEASE_MINOR=$efa_release_minor -DEFA_RELEASE_PATCH=$efa_release_patch"])
])

AC_DEFUN([EFA_SET_INSTALL_DIRS], [
    AC_ARG_WITH([ompi-component-dir],
        [AS_HELP_STRING([--with-ompi-component-dir=DIR], [where to install mca_*_efa.so])])
    AS_IF([test "x$prefix" = xNONE],
          [prefix=$EFA_OMPI_PREFIX
           AS_IF([test "x$libdir" = 'x${exec_prefix}/lib'], [libdir=$EFA_OMPI_LIBDIR])
           ompi_componentdir=$EFA_OMPI_PKGLIBDIR],
          [ompi_componentdir='${libdir}/openmpi'])
    AS_IF([test -n "$with_ompi_component_dir" && test "$with_ompi_component_dir" != yes],
          [ompi_componentdir=$with_ompi_component_dir])
    AC_SUBST([ompi_componentdir])
])

dnl --enable-sanitizers[=LIST]: instrument the components, the core and the
dnl test programs with the compiler's sanitizers (default address,undefined).
dnl Open MPI itself stays uninstrumented: the test programs carry the
dnl runtime, so the components dlopen'ed into them find it.  Undefined
dnl behaviour aborts (no recovery), so a run that hits it fails.
AC_DEFUN([EFA_CHECK_SANITIZERS], [
    AC_ARG_ENABLE([sanitizers],
        [AS_HELP_STRING([--enable-sanitizers@<:@=LIST@:>@],
            [build with -fsanitize=LIST (default address,undefined) for tests/run-sanitizer-tests.sh])])
    EFA_SAN_FLAGS=""
    AS_CASE([$enable_sanitizers],
        [""|no], [],
        [yes], [EFA_SAN_FLAGS="-fsanitize=address,undefined"],
        [EFA_SAN_FLAGS="-fsanitize=$enable_sanitizers"])
    AS_IF([test -n "$EFA_SAN_FLAGS"], [
        EFA_SAN_FLAGS="$EFA_SAN_FLAGS -fno-sanitize-recover=all -fno-omit-frame-pointer"
        AC_MSG_CHECKING([whether $CC and $CXX accept $EFA_SAN_FLAGS])
        efa_save_CFLAGS=$CFLAGS
        efa_save_LDFLAGS=$LDFLAGS
        CFLAGS="$CFLAGS $EFA_SAN_FLAGS"
        LDFLAGS="$LDFLAGS $EFA_SAN_FLAGS"
        AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [efa_san_ok=yes], [efa_san_ok=no])
        CFLAGS=$efa_save_CFLAGS
        LDFLAGS=$efa_save_LDFLAGS
        AC_MSG_RESULT([$efa_san_ok])
        AS_IF([test $efa_san_ok = no],
              [AC_MSG_ERROR([--enable-sanitizers: the compiler cannot build with $EFA_SAN_FLAGS (Debian: the sanitizer runtimes come with gcc; clang needs libclang-rt-dev)])])
        CFLAGS="$CFLAGS $EFA_SAN_FLAGS"
        CXXFLAGS="$CXXFLAGS $EFA_SAN_FLAGS"
        LDFLAGS="$LDFLAGS $EFA_SAN_FLAGS"])
    AC_SUBST([EFA_SAN_FLAGS])
])

dnl --enable-fuzzers: build the libFuzzer harnesses of tests/fuzz (clang
dnl only: configure with CC=clang CXX=clang++; scripts/build-instrumented.sh
dnl fuzz does).  The core is then compiled with coverage instrumentation
dnl (-fsanitize=fuzzer-no-link) so that the fuzzer sees its branches.
AC_DEFUN([EFA_CHECK_FUZZERS], [
    AC_ARG_ENABLE([fuzzers],
        [AS_HELP_STRING([--enable-fuzzers], [build the libFuzzer harnesses in tests/fuzz (needs clang)])])
    AS_IF([test "x$enable_fuzzers" = xyes], [
        AC_LANG_PUSH([C++])
        AC_MSG_CHECKING([whether $CXX builds libFuzzer harnesses])
        efa_save_CXXFLAGS=$CXXFLAGS
        CXXFLAGS="$CXXFLAGS -fsanitize=fuzzer"
        AC_LINK_IFELSE([AC_LANG_SOURCE([[
#include <cstddef>
#include <cstdint>
extern "C" int LLVMFuzzerTestOneInput(const uint8_t *, size_t) { return 0; }]])],
            [efa_fuzz_ok=yes], [efa_fuzz_ok=no])
        CXXFLAGS=$efa_save_CXXFLAGS
        AC_MSG_RESULT([$efa_fuzz_ok])
        AC_LANG_POP([C++])
        AS_IF([test $efa_fuzz_ok = no],
              [AC_MSG_ERROR([--enable-fuzzers needs clang with libFuzzer: configure with CC=clang CXX=clang++ (Debian: clang and libclang-rt-dev)])])
        CFLAGS="$CFLAGS -fsanitize=fuzzer-no-link"
        CXXFLAGS="$CXXFLAGS -fsanitize=fuzzer-no-link"])
    AM_CONDITIONAL([EFA_FUZZERS], [test "x$enable_fuzzers" = xyes])
])
