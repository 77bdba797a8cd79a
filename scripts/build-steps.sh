# Sourced by scripts/build.sh and scripts/build-instrumented.sh: the steps
# of an out-of-tree build both take.  WHO names the calling script in the
# messages; a step that fails prints the end of its log and exits.

# configure_once WHO TOP BUILD CONFIGURE-ARGS...: regenerates TOP/configure
# when it is missing or older than its inputs, then configures BUILD
# (created if need be) unless it is configured by the current configure
# already.  Leaves the shell in BUILD.
configure_once() {
    local who=$1 top=$2 build=$3
    shift 3
    cd "$top" || exit 1
    if [ ! -x configure ] || [ configure.ac -nt configure ] || [ configure.m4 -nt configure ] ||
       [ common/configure.m4 -nt configure ]; then
        autoreconf -fi >/dev/null
    fi
    mkdir -p "$build"
    cd "$build" || exit 1
    if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
        "$top/configure" "$@" >configure.out 2>&1 ||
            { tail -30 configure.out; echo "$who: configure failed (full log: $build/configure.out)"; exit 1; }
    fi
}

# make_logged WHO MAKE-ARGS...: make in the build directory (the current
# one), into make.out.
make_logged() {
    local who=$1
    shift
    make "$@" >make.out 2>&1 ||
        { grep -E "error|Error" -A3 make.out | head -40; echo "$who: make failed (full log: $PWD/make.out)"; exit 1; }
}

# build_test_programs WHO JOBS DIR...: in the build directory (the current
# one), the test programs (check_PROGRAMS) of each DIR, into make-check.out.
# TESTS= builds them without running the suites.
build_test_programs() {
    local who=$1 jobs=$2 d
    shift 2
    : >make-check.out
    for d in "$@"; do
        [ -f "$d/Makefile" ] || continue
        make -C "$d" -j"$jobs" check TESTS= >>make-check.out 2>&1 ||
            { grep -E "error|Error" -A3 make-check.out | head -40; echo "$who: building $d failed"; exit 1; }
    done
}

# report_warnings WHO: the warnings of make.out and make-check.out, if any.
report_warnings() {
    if grep -q "warning:" make.out make-check.out; then
        echo "$1: the build printed warnings:"
        grep "warning:" make.out make-check.out | sort -u | head -20
    fi
}
