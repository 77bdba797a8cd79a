# shellcheck shell=bash disable=SC2034 # (what is set here, the runner reads)
# Sourced by run-mpi-tests.sh: making one run, an MPI test program or
# NetPIPE, under mpirun with a timeout, its output in a log of its own, and
# reporting it (mpi-checks.sh), or, under --list, printing its command.
# Uses the runner's settings (BIN_DIR, LOG_DIR, NETPIPE, LIST, QUICK,
# COMMON_ARGS, CFG_ARGS, EXTRA_ARGS) and its state (CHILD, counters).

now_ns() { date +%s%N; }

# Stops the run in progress (CHILD, with its MPI job) when we are interrupted.
on_signal() {
    [[ -n $CHILD ]] && kill -TERM "$CHILD" 2>/dev/null && wait "$CHILD"
    echo "interrupted: $NPASS passed, $NFAIL failed so far"
    exit 130
}

# run_logged LOG CMD...: append the command and its output to LOG; sets RC
run_logged() {
    local log=$1
    shift
    echo "# $(quote_cmd "$@")" >>"$log"
    "$@" </dev/null >>"$log" 2>&1 &
    CHILD=$!
    wait "$CHILD"
    RC=$?
    CHILD=""
}

# a command line that can be pasted back into a shell
quote_cmd() { printf '%q ' "$@"; }

# mpirun_cmd NP TIMEOUT [extra mpirun args...] -- sets CMD to the mpirun
# prefix (without program).  A --map-by among the extra arguments replaces
# the configuration's (Open MPI 5.0's mpirun refuses two).
mpirun_cmd() {
    local np=$1 tmo=$2 cfg_args=("${CFG_ARGS[@]}") i
    shift 2
    if [[ " $* " == *" --map-by "* ]]; then
        cfg_args=()
        for ((i = 0; i < ${#CFG_ARGS[@]}; ++i)); do
            if [[ ${CFG_ARGS[i]} == --map-by ]]; then
                ((++i))
                continue
            fi
            cfg_args+=("${CFG_ARGS[i]}")
        done
    fi
    CMD=(timeout -k 15 "$tmo" mpirun -np "$np" "${COMMON_ARGS[@]}" "${cfg_args[@]}"
        -x MPI_TEST_TIMEOUT=$((tmo > 20 ? tmo - 10 : tmo)) "${EXTRA_ARGS[@]}" "$@")
}

# run_test TEST LABEL CONFIG NP [extra mpirun args...]
run_test() {
    local t=$1 label=$2 cfg=$3 np=$4
    shift 4
    local tmo log t0 args reason
    if [[ $LIST != 1 ]] && reason=$(known_defect "$label" "$cfg" "$np"); then
        echo "SKIP $label $cfg np=$np ($(skip_kind "$reason")$reason)"
        NSKIP=$((NSKIP + 1))
        return
    fi
    tmo=$(test_timeout "$t")
    log="$LOG_DIR/$cfg/$label-np$np.log"
    read -r -a args <<<"$(test_args "$t" "$cfg" "$np")"
    RUN_ARGS="${args[*]}"
    mpirun_cmd "$np" "$tmo" "$@"
    CMD+=("$BIN_DIR/$t" "${args[@]}")
    if [[ $LIST == 1 ]]; then
        quote_cmd "${CMD[@]}"; echo
        return
    fi
    mkdir -p "$LOG_DIR/$cfg"
    if [[ ! -x $BIN_DIR/$t ]]; then
        echo "FAIL $label $cfg np=$np (missing program $BIN_DIR/$t)"
        NFAIL=$((NFAIL + 1))
        return
    fi
    t0=$(now_ns)
    : >"$log"
    run_logged "$log" "${CMD[@]}"
    expected_lines "$label" "$cfg"
    report "$label" "$cfg" "$np" "$RC" "$log" "$tmo" "$t0" "^ok $t " "$ALSO" "$ALSO2"
}

# NetPIPE: an integrity-check run, then (without --quick) a short
# performance run.
run_netpipe() {
    RUN_ARGS=""
    EACH=""
    local cfg=$1 np=2 tmo log t0 rc=0 out upper reps reason
    if [[ $LIST != 1 ]] && reason=$(known_defect netpipe "$cfg" "$np"); then
        echo "SKIP netpipe $cfg np=$np ($(skip_kind "$reason")$reason)"
        NSKIP=$((NSKIP + 1))
        return
    fi
    tmo=$(test_timeout netpipe)
    log="$LOG_DIR/$cfg/netpipe-np$np.log"
    out="$LOG_DIR/$cfg/netpipe-np$np.out"
    # (reps: the performance run's, which --quick does not make)
    if [[ $QUICK == 1 ]]; then upper=1048576 reps=5; else upper=4194304 reps=20; fi
    mpirun_cmd "$np" "$tmo"
    local c1=("${CMD[@]}" "$NETPIPE" -i -u "$upper" -n 5 -o "$out.integrity")
    local c2=("${CMD[@]}" "$NETPIPE" -u "$upper" -n "$reps" -p 0 -o "$out")
    if [[ $LIST == 1 ]]; then
        quote_cmd "${c1[@]}"; echo
        [[ $QUICK == 1 ]] || { quote_cmd "${c2[@]}"; echo; }
        return
    fi
    mkdir -p "$LOG_DIR/$cfg"
    if ! command -v "$NETPIPE" >/dev/null; then
        echo "FAIL netpipe $cfg np=$np (missing program $NETPIPE: install netpipe-openmpi or set NETPIPE)"
        NFAIL=$((NFAIL + 1))
        return
    fi
    if ! reason=$(same_libmpi "$(command -v "$NETPIPE")"); then
        echo "SKIP netpipe $cfg np=$np (not this Open MPI's program: $reason; see NETPIPE)"
        NSKIP=$((NSKIP + 1))
        return
    fi
    t0=$(now_ns)
    : >"$log"
    run_logged "$log" "${c1[@]}"
    rc=$RC
    if [[ $rc -eq 0 ]]; then
        if grep -q -a -i 'check failed' "$log" || ! grep -q -a 'Integrity check passed' "$log"; then
            echo "FAIL netpipe $cfg np=$np (integrity check failed, see $log)"
            NFAIL=$((NFAIL + 1))
            return
        fi
        # The measuring pass (NetPIPE's own timing loop over the same
        # sizes) in full runs; quick runs keep the integrity pass alone.
        if [[ $QUICK == 1 ]]; then
            report netpipe "$cfg" "$np" "$rc" "$log" "$tmo" "$t0" 'bytes +[0-9]+ times --> +Integrity check passed'
            return
        fi
        run_logged "$log" "${c2[@]}"
        rc=$RC
    fi
    report netpipe "$cfg" "$np" "$rc" "$log" "$tmo" "$t0" 'bytes +[0-9]+ times --> +[0-9.]+ Mbps'
}
