# shellcheck shell=bash disable=SC2034 # (what is set here, the runner reads)
# Sourced by run-mpi-tests.sh: how it judges a run.  A run passes when it
# exits 0 and its log has the program's "ok" line and the lines that show its
# variant took the path it is meant to check (expected_lines); otherwise the
# FAIL line says why, from the exit code and the log.  Counts into the
# runner's NPASS and NFAIL and reports its RUN_ARGS.

# expected_lines LABEL CONFIG: sets ALSO and ALSO2 to the patterns (if any)
# that the log of the variant LABEL must match besides its "ok" line, and
# EACH to one (if any) that it must match once per process.
expected_lines() {
    local label=$1 cfg=$2
    ALSO=""
    ALSO2=""
    EACH=""
    # pingpong+ring: frames must have gone through the rings.
    [[ $label == *+ring ]] && ALSO="on-node channel: [1-9][0-9]* frames sent"
    [[ $label == *+ring && $cfg == cm-efa-onnode-stream ]] &&
        ALSO="mtl:efa: on-node channel: [1-9][0-9]* frames sent.*[1-9][0-9]* streamed"
    [[ $label == *+ring && $cfg == cm-efa-onnode ]] &&
        ALSO="mtl:efa: on-node channel: [1-9][0-9]* frames sent.*[1-9][0-9]* single copy"
    # remap+hooks: the components installed Open MPI's memory hooks and
    # cache registrations; remap+nohooks: without hooks they must not cache
    # (the stand-ins would not show stale data: they read by virtual address).
    [[ $label == *+hooks ]] && ALSO="registration cache: up to [0-9]+ idle"
    [[ $label == *+nohooks ]] && ALSO="registration cache: off"
    # pingpong+hosts: each rank is local rank 0 on its own host (Open MPI
    # sees two nodes, under the hosts' own names) and its NIC is the host's
    # interface.
    # (With two links, *-rails-netns, either link's NIC may be the first.)
    if [[ $label == *+hosts ]]; then
        local nic=eth0
        [[ $cfg == *-rails-netns ]] && nic="eth[01]"
        ALSO="\\[${NETNS_PREFIX}1:[0-9]+\\] common:efa: report: local rank 0: NIC $nic"
        ALSO2="\\[${NETNS_PREFIX}2:[0-9]+\\] common:efa: report: local rank 0: NIC $nic"
    fi
    # ssend+noinject, modes+noinject: the MTL took the test setting.
    [[ $label == *+noinject ]] && ALSO="mtl:efa: inject off"
    # many_outstanding+batch: queued messages went packed.
    [[ $label == *+batch ]] && ALSO="btl:efa: coalescing: [1-9][0-9]* batch\\(es\\) carried"
    # ordering+swap: own matching put swapped provider messages back in order.
    [[ $label == *+swap ]] && ALSO="mtl:efa: own matching: [1-9][0-9]* provider messages sent .*received \\([1-9][0-9]* came early"
    # many_outstanding+pack: own matching packed queued messages.
    # ordering+endpoints: own matching spread the peers over 2 endpoints
    # (of one NIC; with two NICs a peer on the second takes one of its own).
    [[ $label == *+endpoints ]] && ALSO="mtl:efa: own matching: [1-9][0-9]* provider messages sent .*peers spread over [2-4] endpoint"
    # ordering+direct: the core swapped arrivals, and the mode was on.
    if [[ $label == *+direct ]]; then
        ALSO="untagged messages: [1-9][0-9]* handed on out of order"
        ALSO2="direct mode forced \\(force_direct_mode\\): untagged messages of at most 8192 bytes"
    fi
    # pingpong+read: own matching read large messages from the other node
    # by RMA, none failed; pingpong+stream: none read, the bytes streamed.
    [[ $label == *+read ]] && ALSO="own matching: .* [1-9][0-9]* rendezvous read by RMA \\(0 reads failed"
    if [[ $label == *+stream ]]; then
        ALSO="own matching: .* 0 rendezvous read by RMA"
        ALSO2="mtl:efa: on-node channel: .*[1-9][0-9]* streamed"
    fi
    [[ $label == *+pack ]] && ALSO="mtl:efa: own matching: [1-9][0-9]* provider messages sent \\([1-9][0-9]* packing several,"
    # span: every process (EACH: as many lines as processes) read
    # completions from the provider, so its peers on the other node were
    # reached through it.
    [[ $label == span ]] && EACH="common:efa: provider [^ ]+: [1-9][0-9]* completions read"
    # pingpong+rails: ob1's large messages went by get striped over both
    # NICs (own matching's by reads, the provider's matching's by read
    # rendezvous), and every process read completions on its second rail.
    if [[ $label == *+rails ]]; then
        ALSO="btl:efa: [1-9][0-9]* put/get striped over up to 2 rails"
        [[ $cfg == cm-efa-own-* ]] && ALSO="own matching: .* [1-9][0-9]* rendezvous read by RMA \\(0 reads failed"
        [[ $cfg == cm-efa-rails-* || ($cfg == cm-efa-*-rails-netns && $cfg != cm-efa-own-*) ]] &&
            ALSO="common:efa: read rendezvous: [1-9][0-9]* messages sent, [1-9][0-9]* read \\([0-9]+ bytes\\), 0 failed"
        EACH="common:efa: rail 1 \\([^)]*\\): [1-9][0-9]* completions"
    fi
    # ordering+mixed: MPI_COMM_WORLD spans nodes and the rings carried frames.
    if [[ $label == *+mixed ]]; then
        ALSO="mtl:efa: on-node channel: [1-9][0-9]* frames sent"
        ALSO2="communicator 0 takes the mixed path"
    fi
}

# Why a run failed, from its exit code and log.
fail_reason() {
    local rc=$1 log=$2 tmo=$3 line
    line=$(grep -m1 -a '^FAIL ' "$log")
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        echo "timeout after ${tmo}s${line:+: $line}"
    elif [[ -n $line ]]; then
        echo "exit code $rc: $line"
    elif [[ $rc -eq 0 ]]; then
        echo "exit code 0 but no 'ok' line"
    else
        echo "exit code $rc$(log_hint "$log")"
    fi
}

# A short hint from the log of a run that failed without a FAIL line.
log_hint() {
    local log=$1 fw comp line
    if grep -q -a 'A requested component was not found' "$log"; then
        fw=$(grep -m1 -a '^Framework:' "$log" | awk '{print $2}')
        comp=$(grep -m1 -a '^Component:' "$log" | awk '{print $2}')
        echo ": Open MPI component not found: ${fw:-?} ${comp:-?}"
        return
    fi
    line=$(grep -m1 -a -E 'cannot be selected|exited on signal|Signal: |Segmentation fault|MPI_ABORT was invoked' \
        "$log")
    if [[ -z $line ]]; then
        # first meaningful line, skipping Open MPI's runtime noise
        line=$(grep -a -v -E '^#|^-+$|^[[:space:]]*$|ORTE_ERROR_LOG|help message|help_aggregate' \
            "$log" | head -n1)
    fi
    line=$(echo "$line" | sed 's/^[[:space:]]*//' | cut -c1-160)
    [[ -n $line ]] && echo ": $line"
}

# report LABEL CONFIG NP RC LOG TIMEOUT START_NS OKPATTERN [ALSO [ALSO2]]:
# the log must match OKPATTERN and, if given, ALSO and ALSO2
report() {
    local label=$1 cfg=$2 np=$3 rc=$4 log=$5 tmo=$6 t0=$7 okpat=$8 also=${9:-} also2=${10:-} secs
    secs=$(awk -v a="$t0" -v b="$(now_ns)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    if [[ $rc -eq 0 ]] && grep -q -a -E "$okpat" "$log" &&
        { [[ -z $also ]] || grep -q -a -E "$also" "$log"; } &&
        { [[ -z $also2 ]] || grep -q -a -E "$also2" "$log"; } &&
        { [[ -z ${EACH:-} ]] || [[ $(grep -c -a -E "$EACH" "$log") -ge $np ]]; }; then
        echo "PASS $label $cfg np=$np (${secs}s${RUN_ARGS:+, args: $RUN_ARGS})"
        NPASS=$((NPASS + 1))
    else
        local why
        why=$(fail_reason "$rc" "$log" "$tmo")
        if [[ $rc -eq 0 ]] && grep -q -a -E "$okpat" "$log"; then
            why="the program passed, but no line matches \"$also\"${also2:+ and \"$also2\"}"
            [[ -n ${EACH:-} ]] && why="the program passed, but fewer than $np lines (one per process) match \"$EACH\""
        fi
        echo "FAIL $label $cfg np=$np ($why; ${secs}s)"
        NFAIL=$((NFAIL + 1))
    fi
}
