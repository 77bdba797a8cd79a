#!/usr/bin/env bash
# The on-node channels (mtl_efa's and btl_efa's, one shared-memory inbox per
# process: efa_node.<uid>.<jobid hex>.<vpid>) in a
# hostile or starved /dev/shm.  Each case runs pingpong (which checks every
# byte it receives) on 2 processes of one node and must end correctly:
#  - planted-*: before the job starts, a file of another user (mode 0666)
#    or a symbolic link is put at the inbox name of rank 1, the way a local
#    user who can guess the name would.  The component must refuse it, say
#    so (its help message), carry that process's messages by the provider,
#    and leave the planted file as it was (same owner, same bytes; the
#    link's target unchanged).
#  - full-tmpfs-*: /dev/shm is a 256 KiB tmpfs (a new mount namespace,
#    as Docker's small /dev/shm): no SIGBUS, the component says there is no
#    room and falls back to the provider.  Needs root (mount); without it
#    the case prints SKIP with the reason.
# Prints "N passed, N failed[, N skipped]".
#   run-shm-hostile-tests.sh <component-dir> <mpi-test-bin-dir>
set -u
# shellcheck source=runner-args.sh
. "$(dirname "$0")/runner-args.sh"
prog=$bindir/pingpong
work=$(mktemp -d /tmp/efa-shm-hostile.XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
skip=0

btl=(--mca pml ob1 --mca btl "efa,self" --mca btl_efa_provider_include "tcp;ofi_rxm")
mtl=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "tcp;ofi_rxm")

# Run by mpirun in front of the test program: rank PLANT_RANK puts the
# planted file at its own inbox name (uid, job id in hex and vpid, as the
# components name them) before MPI_Init, then becomes the program.  Open
# MPI 4.1 gives the job id in the environment; 5.0 does not (its job id is
# a hash of the PMIx namespace), so there the rank waits for rank 0's inbox
# of this job (made in MPI_Init, before the processes exchange addresses)
# and takes the job part of its name.
cat >"$work/plant.sh" <<'EOF'
#!/usr/bin/env bash
rank=${OMPI_MCA_ess_base_vpid:-${OMPI_COMM_WORLD_RANK:-}}
if [ "$rank" = "$PLANT_RANK" ]; then
    if [ -n "${OMPI_MCA_ess_base_jobid:-}" ]; then
        job=$(printf %x "$OMPI_MCA_ess_base_jobid")
    else
        # Rank 0 is a sibling (same launching daemon): its inbox is among
        # the files it maps (another job's inbox may be in /dev/shm too).
        for _ in $(seq 300); do
            first=$(for p in $(pgrep -P "$PPID"); do cat "/proc/$p/maps" 2>/dev/null; done |
                grep -oE "/dev/shm/$PLANT_PREFIX\.$(id -u)\.[0-9a-f]+\.0\$" | head -1)
            [ -n "$first" ] && break
            sleep 0.1
        done
        job=${first%.0}
        job=${job##*.}
    fi
    if [ -n "$job" ]; then
        name=/dev/shm/$PLANT_PREFIX.$(id -u).$job.$PLANT_RANK
        case $PLANT in
        other-user)
            printf 'planted by another user\n' >"$name"
            chmod 0666 "$name"
            chown 65534:65534 "$name"
            ;;
        symlink) ln -s "$PLANT_TARGET" "$name" ;;
        esac
        echo "$name" >"$PLANT_RECORD"
    fi
fi
exec "$@"
EOF
chmod +x "$work/plant.sh"

result() { # result NAME ok|fail|skip why
    case $2 in
    ok) echo "PASS shm-hostile/$1"; pass=$((pass + 1)) ;;
    skip) echo "SKIP shm-hostile/$1: $3"; skip=$((skip + 1)) ;;
    *) echo "FAIL shm-hostile/$1: $3"; fail=$((fail + 1)) ;;
    esac
}

# The job's own checks: exit 0, no crash, pingpong's "ok" from both ranks.
job_ok() { # job_ok RC OUT -> sets WHY
    WHY=""
    if [ "$1" -eq 124 ]; then
        WHY="hung (timeout)"
    elif grep -qiE "segmentation fault|bus error|core dumped|signal 7|signal 11|signal 6" <<<"$2"; then
        WHY="crashed"
    elif [ "$1" -ne 0 ]; then
        WHY="exit $1"
    elif [ "$(grep -c '^ok pingpong' <<<"$2")" -lt 1 ]; then
        WHY="pingpong did not report ok"
    fi
    [ -z "$WHY" ]
}

# planted NAME other-user|symlink btl|mtl "expected message"
planted() {
    # Both components share one inbox per process (common/efa_node.h).
    local name=$1 kind=$2 comp=$3 want=$4 prefix=efa_node args
    if [ "$comp" = btl ]; then
        args=("${btl[@]}")
    else
        args=("${mtl[@]}")
    fi
    local record=$work/$name.record target=$work/$name.target
    printf 'the link target\n' >"$target"
    local target_sum
    target_sum=$(sha256sum <"$target")
    rm -f "$record"
    local out rc
    out=$(PLANT=$kind PLANT_RANK=1 PLANT_PREFIX=$prefix PLANT_TARGET=$target PLANT_RECORD=$record \
        timeout 120 mpirun -np 2 --oversubscribe \
        --mca mca_base_component_path "$path" \
        -x PLANT -x PLANT_RANK -x PLANT_PREFIX -x PLANT_TARGET -x PLANT_RECORD \
        "${args[@]}" "$work/plant.sh" "$prog" -s 64k -i 20 2>&1)
    rc=$?
    local file why=""
    file=$(cat "$record" 2>/dev/null)
    if [ -z "$file" ]; then
        why="the file was not planted (no job id in the environment, no inbox of rank 0 seen)"
    elif ! job_ok "$rc" "$out"; then
        why=$WHY
    elif [ "$kind" = other-user ]; then
        if [ ! -f "$file" ] || [ -L "$file" ]; then
            why="the planted file $file was removed"
        elif [ "$(stat -c %u "$file")" != 65534 ] ||
            [ "$(cat "$file")" != "planted by another user" ]; then
            why="the planted file $file was changed (owner $(stat -c %u "$file"))"
        fi
    elif [ ! -L "$file" ] || [ "$(readlink "$file")" != "$target" ]; then
        why="the planted link $file was removed or replaced"
    elif [ "$(sha256sum <"$target")" != "$target_sum" ]; then
        why="the link's target was written through"
    fi
    if [ -z "$why" ] && ! grep -qF -- "$want" <<<"$out"; then
        why="message \"$want\" not printed"
    fi
    [ -n "$file" ] && rm -f "$file"
    if [ -n "$why" ]; then
        result "$name" fail "$why"
        head -30 <<<"$out" | sed 's/^/    /'
    else
        result "$name" ok
    fi
}

btl_msg="cannot use this process's shared-memory"
mtl_msg="cannot use its shared-memory inbox"
planted planted-other-user-btl other-user btl "$btl_msg"
planted planted-symlink-btl symlink btl "$btl_msg"
planted planted-other-user-mtl other-user mtl "$mtl_msg"
planted planted-symlink-mtl symlink mtl "$mtl_msg"

# full_tmpfs NAME btl|mtl "expected message"
full_tmpfs() {
    local name=$1 comp=$2 want=$3 args
    if [ "$comp" = btl ]; then args=("${btl[@]}"); else args=("${mtl[@]}"); fi
    if [ "$(id -u)" != 0 ]; then
        result "$name" skip "needs root to mount a small tmpfs on /dev/shm"
        return
    fi
    if ! unshare -m sh -c 'mount -t tmpfs -o size=4k tmpfs /dev/shm' 2>/dev/null; then
        result "$name" skip "cannot mount a tmpfs in a new mount namespace here (unshare -m)"
        return
    fi
    local out rc
    # The mount is private to the new namespace (mpirun and its processes
    # see it; the machine's /dev/shm is untouched).
    out=$(timeout 120 unshare -m --propagation private sh -c \
        'mount -t tmpfs -o size=256k tmpfs /dev/shm && exec "$@"' sh \
        mpirun -np 2 --oversubscribe --mca mca_base_component_path "$path" "${args[@]}" \
        "$prog" -s 64k -i 50 2>&1)
    rc=$?
    if ! job_ok "$rc" "$out"; then
        result "$name" fail "$WHY"
        head -30 <<<"$out" | sed 's/^/    /'
    elif ! grep -qF -- "$want" <<<"$out"; then
        result "$name" fail "message \"$want\" not printed"
        head -30 <<<"$out" | sed 's/^/    /'
    else
        result "$name" ok
    fi
}

full_tmpfs full-tmpfs-btl btl "no room to reserve"
full_tmpfs full-tmpfs-mtl mtl "no room to reserve"

if [ $skip -gt 0 ]; then
    echo "$pass passed, $fail failed, $skip skipped"
else
    echo "$pass passed, $fail failed"
fi
[ $fail -eq 0 ]
