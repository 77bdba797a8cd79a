#!/usr/bin/env bash
# rxd-hang.sh PID: succeeds, printing where, when process PID is caught
# stopped for good inside ofi_rxd (Debian's libfabric 1.17.0-3, whose
# build ID and offsets are below) under fi_cq_read; fails otherwise, and
# wherever gdb or that library is missing.  Two ways are told apart:
#  - the receive-entry loop: twice, a second apart, in rxd_rx_entry_free
#    (the free of a receive entry, which walks the entry pool's sorted free
#    list) or in the comparison that walk calls.  A free list that never
#    ends there is an entry freed twice inside the provider;
#  - any other spin inside the provider: five backtraces a second apart
#    whose frames inside libfabric, from the innermost out to the first
#    frame outside it, are the same return addresses each time, the
#    innermost not a system call's (a process that polls an idle provider
#    is caught in recvmsg or back in our code: its path through the
#    provider changes from one backtrace to the next).
# docs/DESIGN.md, "Stand-in provider defects that fail a run at times".
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

# backtrace: one backtrace of the process, with fi_cq_read further out
backtrace() {
    local bt
    bt=$(timeout 20 gdb -p "$pid" -batch -ex bt 2>/dev/null) || return 1
    grep -q "fi_cq_read" <<<"$bt" || return 1
    printf '%s\n' "$bt"
}

# in_free BT: the innermost frames of BT are the receive-entry loop: the
# walk's comparison called from rxd_rx_entry_free, or rxd_rx_entry_free
# itself.
in_free() {
    local pcs f0 f1
    mapfile -t pcs < <(sed -n 's/^#[0-9]* *\(0x[0-9a-f]*\) in .*libfabric\.so.*/\1/p' <<<"$1" | head -n 2)
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

# provider_chain BT: the frames of BT inside libfabric from the innermost
# out to the first frame outside it, as offsets in the library
# ("+0x45a00 < +0xc5d10 < ..."); fails where the innermost frame is not
# libfabric's.  The innermost frame's own address is left out (a loop
# moves it); the return addresses further out are the path into it.
provider_chain() {
    local line pc n=0 out=""
    while IFS= read -r line; do
        [[ $line =~ ^#([0-9]+)\ +(0x[0-9a-f]+\ in\ )?.*libfabric\.so ]] || break
        pc=${BASH_REMATCH[2]%% in }
        n=$((n + 1))
        [ "$n" -eq 1 ] && { out="libfabric"; continue; }
        [ -n "$pc" ] || return 1
        out+=" < +$(printf '0x%x' $((pc - base)))"
    done < <(grep '^#' <<<"$1")
    [ "$n" -ge 2 ] || return 1
    printf '%s' "$out"
}

bt=$(backtrace) || exit 1
first=$(in_free "$bt") && {
    sleep 1
    bt2=$(backtrace) && second=$(in_free "$bt2") && {
        echo "process $pid looping in ofi_rxd's receive-entry free list, a second apart: $first, then $second (libfabric $build_id)"
        exit 0
    }
}
chain=$(provider_chain "$bt") || exit 1
for _ in 1 2 3 4; do
    sleep 1
    bt=$(backtrace) || exit 1
    [ "$(provider_chain "$bt")" = "$chain" ] || exit 1
done
echo "process $pid spinning inside ofi_rxd, the same path through the provider in five backtraces a second apart: $chain (libfabric $build_id)"
