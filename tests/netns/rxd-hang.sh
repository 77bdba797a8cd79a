#!/usr/bin/env bash
# rxd-hang.sh PID: succeeds, printing where, when process PID is caught
# twice, a second apart, looping inside ofi_rxd's rxd_rx_entry_free (the
# free of a receive entry, which walks the entry pool's sorted free list)
# under fi_cq_read, in Debian's libfabric 1.17.0-3, whose build ID and
# offsets are below; fails otherwise, and wherever gdb or that library is
# missing.  A free list that never ends there is an entry freed twice
# inside the provider: docs/DESIGN.md, "Stand-in provider defects that
# fail a run at times".
set -u
pid=$1
# Debian's libfabric1 1.17.0-3 (amd64): its build ID, then the ranges of
# rxd_rx_entry_free and of ofi_ibuf_is_lower (the comparison its free-list
# walk calls), found by matching its code with a build of the v1.17.0 tag.
build_id=fe18b194102d71a0e42d7917af959ffa5d36152c
free_lo=$((0xc5c80)) free_hi=$((0xc5e00))
lower_lo=$((0x459f0)) lower_hi=$((0x45a00))

command -v gdb >/dev/null || exit 1
lib=$(awk '$6 ~ /libfabric\.so/ {print $6; exit}' "/proc/$pid/maps" 2>/dev/null)
[ -n "$lib" ] || exit 1
readelf -n "$lib" 2>/dev/null | grep -q "Build ID: $build_id" || exit 1
# The library's load address: its mapping at file offset 0 (the ELF's
# first segment is at address 0).
base=$(awk -v l="$lib" '$6 == l && $3 == "00000000" {split($1, a, "-"); print a[1]; exit}' "/proc/$pid/maps")
[ -n "$base" ] || exit 1
base=$((16#$base))

# in_free: the innermost frames of one backtrace are the loop: the walk's
# comparison called from rxd_rx_entry_free, or rxd_rx_entry_free itself,
# with fi_cq_read further out.
in_free() {
    local bt pcs f0 f1
    bt=$(timeout 20 gdb -p "$pid" -batch -ex bt 2>/dev/null) || return 1
    grep -q "fi_cq_read" <<<"$bt" || return 1
    mapfile -t pcs < <(sed -n 's/^#[0-9]* *\(0x[0-9a-f]*\) in .*libfabric\.so.*/\1/p' <<<"$bt" | head -n 2)
    [ ${#pcs[@]} -ge 1 ] || return 1
    f0=$((pcs[0] - base))
    if [ "$f0" -ge "$free_lo" ] && [ "$f0" -lt "$free_hi" ]; then
        printf 'rxd_rx_entry_free+0x%x' $((f0 - free_lo))
        return 0
    fi
    [ ${#pcs[@]} -ge 2 ] || return 1
    f1=$((pcs[1] - base))
    if [ "$f0" -ge "$lower_lo" ] && [ "$f0" -lt "$lower_hi" ] &&
        [ "$f1" -ge "$free_lo" ] && [ "$f1" -lt "$free_hi" ]; then
        printf 'ofi_ibuf_is_lower from rxd_rx_entry_free+0x%x' $((f1 - free_lo))
        return 0
    fi
    return 1
}

first=$(in_free) || exit 1
sleep 1
second=$(in_free) || exit 1
echo "process $pid looping in ofi_rxd's receive-entry free list, a second apart: $first, then $second (libfabric $build_id)"
