#!/usr/bin/env bash
# Install what building and testing need, from Debian's packages.
# Idempotent: installs only what is missing.
set -euo pipefail

pkgs=(g++ make autoconf automake libtool pkg-config
      libopenmpi-dev openmpi-bin libfabric-dev libfabric-bin libhwloc-dev hwloc
      libgtest-dev netpipe-openmpi gnuplot-nox valgrind python3 python3-mpi4py
      clang libclang-rt-dev   # clang: the libFuzzer harnesses (tests/fuzz)
      iproute2 nftables       # namespace hosts and their faults (tests/netns)
      gdb)                    # tests/netns/rxd-hang.sh: a stand-in caught looping

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: everything is installed"
    exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
