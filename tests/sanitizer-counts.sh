# Sourced by the sanitizer runners (run-sanitizer-tests.sh,
# run-tsan-tests.sh): their running totals.  The runner sets pass, fail,
# skip and logs, and report_prefix (the file name its runtime's log_path
# gives reports), report_what (how a report is named in a FAIL line),
# report_first (a grep -E pattern for a report's first telling line) and
# report_lines (how many lines of a report to print).

count() { # add the "N passed, N failed[, N skipped]" line of a log
    local line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
    if [ -z "$line" ]; then
        echo "FAIL $2 (no result line; see $1)"
        fail=$((fail + 1))
        return
    fi
    pass=$((pass + $(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")))
    fail=$((fail + $(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")))
    grep -q skipped <<<"$line" && skip=$((skip + $(sed -E 's/.*, ([0-9]+) skipped.*/\1/' <<<"$line")))
}

reports() { # one failure per process that left a report since the last call
    local f n=0
    for f in "$logs/reports/$report_prefix".*; do
        [ -s "$f" ] || continue
        echo "FAIL $1: $report_what $(grep -m1 -E "$report_first" "$f")"
        sed -n "1,${report_lines}p" "$f" | sed 's/^/    /'
        # where the memory is (a stack, a heap block and who allocated it):
        # often below the lines above, and what tells a real race from a
        # handover the runtime cannot see
        grep -m1 -A3 -E '^  Location is' "$f" | sed 's/^/    /'
        echo "    ($(grep -c -E "$report_first" "$f") report(s) in $logs/$1.$(basename "$f"); the first's lines above)"
        mv "$f" "$logs/$1.$(basename "$f")"
        n=$((n + 1))
    done
    fail=$((fail + n))
}
