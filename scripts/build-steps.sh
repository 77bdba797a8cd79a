# Sourced by scripts/build.sh and scripts/build-instrumented.sh: the steps
# of an out-of-tree build both take.  WHO names the calling script in the
# messages; a step that fails prints the end of its log and exits.

# configure_once WHO TOP BUILD CONFIGURE-ARGS...: regenerates TOP/configure
# when it is missing or older than its inputs, then configures BUILD
# (created if need be) unless it is configured by the current configure
# with the same arguments already (BUILD/configure.args, written once
# configure succeeds).  Configured again with other arguments (another
# compiler, flags, Open MPI), BUILD is cleaned too: make compares times,
# not flags, and would keep the objects and programs of the old ones.
# Leaves the shell in BUILD.
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
    local args clean=0
    args=$(printf '%q ' "$@")
    [ -f Makefile ] && [ "$(cat configure.args 2>/dev/null)" != "$args" ] && clean=1
    if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ] || [ $clean -eq 1 ]; then
        rm -f configure.args
        "$top/configure" "$@" >configure.out 2>&1 ||
            { tail -30 configure.out; echo "$who: configure failed (full log: $build/configure.out)"; exit 1; }
        if [ $clean -eq 1 ]; then
            echo "$who: configured with other arguments than before: cleaning $build"
            make clean >make-clean.out 2>&1 || { tail -20 make-clean.out; exit 1; }
        fi
        printf '%s\n' "$args" >configure.args
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

# build_test_programs WHO JOBS DIR[:PROGRAM,...]...: in the build directory
# (the current one), the test programs (check_PROGRAMS) of each DIR, or
# only the PROGRAMs named after it, into make-check.out.  TESTS= builds
# them without running the suites.  TEST_CXXFLAGS, when the caller sets it
# (not exported), replaces CXXFLAGS for the test programs' own C++ files
# (the libraries they test keep theirs).
build_test_programs() {
    local who=$1 jobs=$2 arg d targets flags=()
    shift 2
    [ -n "${TEST_CXXFLAGS:-}" ] && flags=(CXXFLAGS="$TEST_CXXFLAGS")
    : >make-check.out
    for arg in "$@"; do
        d=${arg%%:*}
        targets=(check TESTS=)
        [ "$d" != "$arg" ] && IFS=, read -r -a targets <<<"${arg#*:}"
        [ -f "$d/Makefile" ] || continue
        make -C "$d" -j"$jobs" "${targets[@]}" "${flags[@]}" >>make-check.out 2>&1 ||
            { grep -E "error|Error" -A3 make-check.out | head -40; echo "$who: building $arg failed"; exit 1; }
    done
}

# report_warnings WHO: the warnings of make.out and make-check.out, if any.
report_warnings() {
    if grep -q "warning:" make.out make-check.out; then
        echo "$1: the build printed warnings:"
        grep "warning:" make.out make-check.out | sort -u | head -20
    fi
}
