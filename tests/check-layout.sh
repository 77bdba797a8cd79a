#!/usr/bin/env bash
# Static checks of the on-node stack's layout (one stack per process: one
# inbox, one progress hook; common/efa_node.h):
#  - no file of mtl_efa/ or btl_efa/ registers an opal_progress callback of
#    its own (the common glue's one callback drives the core and the
#    components' channels: mca_common_efa_progress_add);
#  - btl_efa's component leaves btl_progress NULL (else ob1's BML would
#    register a second hook);
#  - no component makes an inbox of its own (efa_shm_inbox_create) or
#    publishes a modex key of its own for it.
# Prints "N passed, N failed".
#   tests/check-layout.sh
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
pass=0
fail=0

check() { # check NAME "why it failed" COMMAND... (the command succeeds when the check holds)
    local name=$1 why=$2
    shift 2
    if "$@"; then
        echo "PASS layout/$name"
        pass=$((pass + 1))
    else
        echo "FAIL layout/$name: $why"
        fail=$((fail + 1))
    fi
}

none_in_components() { # none_in_components REGEX: no match under mtl_efa/ or btl_efa/
    local hits
    hits=$(grep -nE "$1" "$top"/mtl_efa/*.[ch] "$top"/btl_efa/*.[ch] 2>/dev/null)
    [ -z "$hits" ] || { sed 's/^/    /' <<<"$hits"; return 1; }
}

check no-progress-register "a component registers its own opal_progress callback" \
    none_in_components 'opal_progress_register[[:space:]]*\('
check no-own-inbox "a component creates an inbox of its own" \
    none_in_components 'efa_shm_inbox_create[[:space:]]*\('
check no-own-modex-key "a component publishes an on-node modex key of its own" \
    none_in_components '"(mtl_efa_onnode|mtl_efa_engine|btl_efa_ring)"'

btl_progress_null() {
    local line
    line=$(grep -E '^[[:space:]]*\.btl_progress[[:space:]]*=' "$top/btl_efa/btl_efa_component.c")
    [ -n "$line" ] || { echo "    no .btl_progress initializer found"; return 1; }
    grep -qE '=[[:space:]]*NULL[[:space:]]*,?[[:space:]]*$' <<<"$line" ||
        { echo "    $line"; return 1; }
}
check btl-progress-null "btl_efa's component sets btl_progress (a second hook, by the BML)" \
    btl_progress_null

glue_one_hook() { # the common glue registers one callback with opal_progress, in one place
    local n
    n=$(cat "$top"/common/*.c | grep -cE 'opal_progress_register[[:space:]]*\(')
    [ "$n" -eq 1 ] && grep -qE 'opal_progress_register[[:space:]]*\(' "$top/common/common_efa_progress.c" ||
        { echo "    $n registrations in common/*.c (one, in common/common_efa_progress.c)"; return 1; }
}
check glue-one-hook "the common glue registers more than one progress callback" glue_one_hook

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
