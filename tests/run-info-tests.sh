#!/usr/bin/env bash
# efa-mpi-info (tools/efa_mpi_info.cpp): what it says of this machine with
# the default provider and a stand-in, the NIC lists' mistakes, the NIC
# sets of recorded instance topologies, its JSON, and bad arguments.
#   tests/run-info-tests.sh EFA_MPI_INFO TOPOLOGY_DIR
set -u
info=$1 topo=$2
pass=0 fail=0

check() { # name condition-description command-status
    if [ "$3" -eq 0 ]; then
        echo "PASS info/$1"
        pass=$((pass + 1))
    else
        echo "FAIL info/$1: $2"
        sed 's/^/    /' <<<"$OUT" | head -20
        fail=$((fail + 1))
    fi
}

run() { OUT=$("$info" "$@" 2>&1); RC=$?; }
# stdout alone (the JSON), whatever a library says on stderr
run_json() { OUT=$("$info" "$@" --json 2>/dev/null); RC=$?; }

if [ ! -x "$info" ]; then
    echo "FAIL info: no efa-mpi-info at $info"
    echo "0 passed, 1 failed"
    exit 1
fi

# The release it reports is configure's (AC_INIT), in both forms.
release=$(sed -n 's/^AC_INIT(\[ompi-efa\], \[\([0-9.]*\)\].*/\1/p' "$(dirname "$0")/../configure.ac")
run --version
[ $RC -eq 0 ] && [ -n "$release" ] && [ "$OUT" = "efa-mpi-info (ompi-efa) $release" ]
check version "expected 'efa-mpi-info (ompi-efa) $release' (exit $RC)" $?
run_json --provider shm --one-node
[ "$(JSON=$OUT python3 -c 'import json, os; print(json.loads(os.environ["JSON"])["components"])' 2>/dev/null)" = "$release" ]
check json-release "the JSON's components is not $release" $?

# The default provider: efa where libfabric has it (fi_info says, not the
# tool under test), else the reason; and the tool's list of providers
# agrees with fi_info's on efa.
run_json
listed=$(JSON=$OUT python3 -c 'import json, os; print(int(any(p["name"] == "efa" for p in json.loads(os.environ["JSON"])["providers"])))' 2>/dev/null)
has_efa=0
if command -v fi_info >/dev/null; then
    fi_info -p efa >/dev/null 2>&1 && has_efa=1
    [ "$listed" = "$has_efa" ]
    check providers-efa "the tool lists efa: ${listed:-?}, fi_info -p efa: $has_efa" $?
else
    has_efa=${listed:-0} # (no fi_info here, libfabric-bin: the tool's word)
    echo "SKIP info/providers-efa: no fi_info to compare with"
fi
run
if [ "$has_efa" = 1 ]; then
    grep -qE "^components' provider \(asked: efa\): efa" <<<"$OUT"
    check default-efa "efa offered by libfabric but not chosen" $?
else
    [ $RC -eq 3 ] && grep -q "found no EFA device" <<<"$OUT" && grep -q "^locked memory: " <<<"$OUT"
    check default-no-efa "expected exit 3, the no-efa-device text and the locked memory (exit $RC)" $?
fi

# A stand-in: chosen, its NICs listed, a NIC set for each of 2 processes.
run --provider "tcp;ofi_rxm" --local-size 2
[ $RC -eq 0 ] && grep -qE "^components' provider \(asked: tcp;ofi_rxm\): tcp;ofi_rxm, fabric " <<<"$OUT" &&
    grep -q "^NICs on this machine:" <<<"$OUT" && [ "$(grep -c '^  local rank [01] ' <<<"$OUT")" -eq 2 ]
check standin-rxm "expected exit 0, the provider, its NICs and 2 NIC sets (exit $RC)" $?

# The locked-memory limit (EFA pins what it registers): a finite soft
# limit, set for the tool alone, is said with how to raise it.
OUT=$(ulimit -S -l 64 && "$info" --provider "tcp;ofi_rxm" --json 2>/dev/null)
JSON=$OUT python3 -c '
import json, os
t = json.loads(os.environ["JSON"])["locked_memory"]
assert t.startswith("64 KiB (ulimit -l; hard limit "), t
assert "memlock=-1" in t, t' 2>/dev/null
check locked-memory "the JSON's locked_memory does not say 64 KiB and how to raise it" $?
OUT=$(ulimit -S -l 64 && "$info" --provider "tcp;ofi_rxm" 2>&1)
grep -q "^locked memory: 64 KiB (ulimit -l" <<<"$OUT"
check locked-memory-text "the text does not say 'locked memory: 64 KiB'" $?

# What the components' defaults choose with the provider, from the core
# opened on it (the same rules: efa_core_auto_matching,
# efa_core_atomics_usable): field=expected-prefix pairs of the JSON.
choices_ok() { # name what-failed options... -- field=prefix...
    local name=$1 what=$2 args=() want=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
    shift
    want=("$@")
    run_json "${args[@]}"
    JSON=$OUT python3 - "${want[@]}" <<'PY'
import json, os, sys
d = json.loads(os.environ["JSON"])
assert d["opened"] is True, d
for pair in sys.argv[1:]:
    field, prefix = pair.split("=", 1)
    got = d["choices"][field]
    assert got.startswith(prefix), (field, got, prefix)
PY
    check "$name" "$what" $?
}
choices_ok choices-rxm "rxm spanning nodes: own matching, native put/get/atomics" \
    --provider "tcp;ofi_rxm" -- matching=own put=native get=native atomics=native
choices_ok choices-rxd-defect "rxd: atomics emulated for its loopback defect" \
    --provider "udp;ofi_rxd" -- matching=own "atomics=emulated (ofi_rxd crashes"
choices_ok choices-one-node "one node: atomics through the on-node channel" \
    --provider "tcp;ofi_rxm" --one-node -- "atomics=emulated (every peer on this node"
choices_ok choices-shm "shm: provider matching (own not measured there), FI_HMEM offered" \
    --provider shm --one-node -- matching=provider "single_copy=" "onnode=shared-memory rings" \
    "hmem=shm offers FI_HMEM"
choices_ok choices-rxm-no-hmem "rxm: no FI_HMEM (device buffers through the host)" \
    --provider "tcp;ofi_rxm" -- "hmem=tcp;ofi_rxm does not offer FI_HMEM"
# Device allocations through their dmabufs where libfabric is 1.20 or
# later (Debian's 1.17: by address).
api=$(fi_info --version 2>/dev/null | sed -n 's/^libfabric api: //p')
if [ "$(printf '%s\n' "$api" 1.20 | sort -V | head -1)" = 1.20 ]; then
    want_dmabuf="dmabuf=through the allocation's dmabuf first"
else
    want_dmabuf="dmabuf=by device address (FI_MR_DMABUF needs libfabric 1.20"
fi
choices_ok choices-dmabuf "device registrations as libfabric $api allows" \
    --provider shm --one-node -- "$want_dmabuf"
# CUDA VMM and pool memory go with other device memory but on libfabric's
# efa fabric (common_efa_hmem_vmm auto): shm is not it.
choices_ok choices-vmm "VMM memory kept from a provider that takes it" \
    --provider shm --one-node -- "vmm=to the provider with other device memory (common_efa_hmem_vmm auto"
# common_efa_dmabuf off from the environment: registered by address, as
# the core then does whatever libfabric allows.
OMPI_MCA_common_efa_dmabuf=0 choices_ok choices-dmabuf-off "common_efa_dmabuf 0 not followed" \
    --provider shm --one-node -- "dmabuf=by device address (common_efa_dmabuf off)"
# Striping off: one rail, said as striping's choice; by default (here one
# NIC) not.
OUT=$(OMPI_MCA_common_efa_stripe_min=0 "$info" --provider "tcp;ofi_rxm" 2>&1)
RC=$?
[ $RC -eq 0 ] && grep -q "rails: *one NIC (striping off" <<<"$OUT"
check rails-striping-off "stripe_min 0 not said as striping off (exit $RC)" $?
OUT=$("$info" --provider "tcp;ofi_rxm" 2>&1)
RC=$?
[ $RC -eq 0 ] && ! grep -q "striping off" <<<"$OUT" && grep -q "rails: " <<<"$OUT"
check rails-default-not-off "striping said off without stripe_min 0 (exit $RC)" $?
# common_efa_hmem_vmm from the environment, as the components take it; a
# value the glue would refuse is a bad argument, not silently auto.
OUT=$(OMPI_MCA_common_efa_hmem_vmm=off "$info" --provider shm --one-node 2>&1)
RC=$?
[ $RC -eq 0 ] && grep -q "CUDA VMM, pool memory: through the host (common_efa_hmem_vmm off)" <<<"$OUT"
check env-hmem-vmm "common_efa_hmem_vmm=off from the environment not taken (exit $RC)" $?
OUT=$(OMPI_MCA_mtl_efa_provider_cuda_calls=sometimes "$info" --provider shm --one-node 2>&1)
RC=$?
[ $RC -eq 2 ] && grep -q "provider_cuda_calls must be auto, on or off, not 'sometimes'" <<<"$OUT"
check env-bad-cuda-calls "a bad provider_cuda_calls not refused (exit $RC)" $?

# The components' settings from the environment, by any of their names.
OUT=$(OMPI_MCA_btl_efa_provider_include="tcp;ofi_rxm" "$info" 2>&1)
RC=$?
[ $RC -eq 0 ] && grep -qE "^components' provider \(asked: tcp;ofi_rxm\): tcp;ofi_rxm" <<<"$OUT"
check env-synonym "btl_efa_provider_include from the environment not taken (exit $RC)" $?

# The NIC lists' mistakes, as the components would refuse them.
run --provider shm --one-node --nic-include nosuch0
[ $RC -eq 3 ] && grep -q "Unknown NIC:   nosuch0" <<<"$OUT"
check nic-unknown "expected exit 3 and the unknown-nic text (exit $RC)" $?
run --provider shm --one-node --nic-exclude shm
[ $RC -eq 3 ] && grep -q "leaves no NIC to use" <<<"$OUT"
check nic-none-left "expected exit 3 and the no-nic-left text (exit $RC)" $?

# Recorded instances: p5.48xlarge with 8 processes gets 4 NICs each, all
# 32 used once; p4d with 8 gets 1 each, every NIC twice; trn1.32xlarge
# with 2 gets its package's 4 each (JSON read back).
sets_ok() { # file processes per-process uses-per-nic nics
    run_json --topology "$topo/$1" --local-size "$2" "${@:6}"
    # (with --topology the exit status is the recorded sets', whatever
    # this machine's provider)
    [ $RC -eq 0 ] || { echo "    exit $RC"; return 1; }
    JSON=$OUT python3 - "$3" "$4" "$5" <<'PY'
import collections, json, os, sys
per, uses, nics = (int(a) for a in sys.argv[1:])
d = json.loads(os.environ["JSON"])
sets = [s["nics"] for s in d["sets"]]
count = collections.Counter(n for s in sets for n in s)
assert all(len(s) == per for s in sets), sets
assert len(count) == nics and set(count.values()) == {uses}, count
assert all(isinstance(s["reason"], str) and s["reason"] for s in d["sets"])
PY
}
sets_ok p5.48xlarge.xml 8 4 1 32
check p5-eight "8 processes should get 4 of the 32 NICs each" $?
sets_ok p4d.xml 8 1 2 4
check p4d-eight "8 processes should get 1 of the 4 NICs each, each NIC twice" $?
sets_ok trn1.32xlarge.xml 2 4 1 8
check trn1-two "2 processes (one a package) should get the 4 NICs of their package each" $?
# A process with a GPU takes the NICs of its PCIe switch (--gpu auto: one
# process per accelerator): p5en with 8 gets its GPU's 2 NICs each, all 16
# once; p5 with one process on GPU 3 gets that switch's 4; a GPU the
# topology does not have is refused (exit 2, the node's GPUs listed).
sets_ok p5en.48xlarge.xml 8 2 1 16 && JSON=$OUT python3 -c '
import json, os
for s in json.loads(os.environ["JSON"])["sets"]:
    assert "GPU 0000:" in s["reason"] and "PCIe switch" in s["reason"], s
' 2>/dev/null
check p5en-eight-gpu "8 processes, one a GPU, should get their GPU's 2 NICs each (said so), 16 in all" $?
sets_ok p5.48xlarge.xml 8 4 1 32 --gpu none && JSON=$OUT python3 -c '
import json, os
assert all("GPU 0000:" not in s["reason"] for s in json.loads(os.environ["JSON"])["sets"])
' 2>/dev/null
check p5-eight-no-gpu "--gpu none: 8 processes should get 4 NICs each by their binding" $?
run_json --topology "$topo/p5.48xlarge.xml" --local-size 1 --gpu 3
[ $RC -eq 0 ] && JSON=$OUT python3 -c '
import json, os
s = json.loads(os.environ["JSON"])["sets"][0]
assert len(s["nics"]) == 4 and all(n.startswith("rdmap") for n in s["nics"]), s
assert "GPU 0000:42:00.0" in s["reason"] and "PCIe switch" in s["reason"], s
' 2>/dev/null
check p5-gpu-three "--gpu 3 should give the 4 NICs of GPU 3 (0000:42:00.0)'s switch" $?
# Two GPUs under one switch of 8 NICs, one process each, 4 NICs each: the
# second starts half way along, so the 16 NICs are used once each.
sets_ok shared-switch.xml 4 4 1 16 --nics-per-proc 4
check shared-switch-four "4 processes, 2 GPUs a switch of 8 NICs, should get 4 NICs each, 16 in all" $?
# p4d: GPUs and NIC on one root bus (a host bridge, no switch): each GPU
# its bus's NIC.
run_json --topology "$topo/p4d.xml" --local-size 8
[ $RC -eq 0 ] && JSON=$OUT python3 -c '
import json, os
for s in json.loads(os.environ["JSON"])["sets"]:
    bus = s["reason"].split("GPU 0000:")[1][:2]
    assert s["nics"] == ["rdmap%ds27-rdm" % int(bus, 16)] and "host bridge" in s["reason"], s
' 2>/dev/null
check p4d-root-bus "8 processes on p4d should each get the NIC of their GPU's root bus (exit $RC)" $?
# Open MPI's default above 2 processes (round-robin by package, bound to
# the package), processes without a GPU: the runtime's bindings give each
# its place among its package's processes, so p4d's 4 NICs serve 2 each
# (by local rank alone each package's 4 would share one NIC) and p5's 8
# processes take 4 NICs each, all 32 once.
sets_ok p4d.xml 8 1 2 4 --gpu none --map-by package && JSON=$OUT python3 -c '
import json, os
for s in json.loads(os.environ["JSON"])["sets"]:
    assert "from the node'"'"'s bindings" in s["reason"], s
' 2>/dev/null
check p4d-by-package "8 processes bound to packages should use every NIC twice, said from the bindings" $?
sets_ok p5.48xlarge.xml 8 4 1 32 --gpu none --map-by package
check p5-by-package "8 processes bound to packages should get 4 of the 32 NICs each" $?
# The same with GPUs guessed (one process per accelerator): half of the
# processes are bound away from the GPU of their local rank's number, so
# the bindings decide for all 8 (some by GPU, the rest by binding, would
# double up NICs): still 4 each, all 32 once, and said.
sets_ok p5.48xlarge.xml 8 4 1 32 --map-by package && JSON=$OUT python3 -c '
import json, os
for s in json.loads(os.environ["JSON"])["sets"]:
    assert "the binding decides for every process of the node" in s["reason"], s
' 2>/dev/null
check p5-by-package-gpu "8 processes round robin over the packages, GPUs guessed, should get 4 of the 32 NICs each by their bindings (said)" $?
run --map-by numa
[ $RC -eq 2 ] && grep -q "takes slot, core or package" <<<"$OUT"
check bad-map-by "expected exit 2 and the choices for --map-by numa (exit $RC)" $?
run --topology "$topo/p5.48xlarge.xml" --gpu 8
[ $RC -eq 2 ] && grep -q "common_efa_gpu 8: the node's accelerators are 0: 0000:12:00.0" <<<"$OUT"
check gpu-unknown "expected exit 2 and the node's GPUs for --gpu 8 (exit $RC)" $?
# nics_per_proc cuts each share to its first N: 8 processes on p5 with 2
# each use 16 NICs once; bad values are refused as the components would.
sets_ok p5.48xlarge.xml 8 2 1 16 --nics-per-proc 2
check p5-eight-two-each "--nics-per-proc 2: 8 processes should get 2 NICs each, 16 in all" $?
OUT=$(OMPI_MCA_common_efa_nics_per_proc=65 "$info" 2>&1)
[ $? -eq 2 ] && grep -q "nics_per_proc must be 0 to 64, not '65'" <<<"$OUT"
check nics-per-proc-bad "expected exit 2 and the range for nics_per_proc=65" $?

# The NIC lists apply to the recorded devices: p4d without one NIC, 2
# processes (one a package): 1 NIC for the first, 2 for the second.
run_json --topology "$topo/p4d.xml" --local-size 2 --nic-exclude rdmap16s27
[ $RC -eq 0 ] && JSON=$OUT python3 -c '
import json, os
s = json.loads(os.environ["JSON"])["sets"]
assert [len(x["nics"]) for x in s] == [1, 2], s
assert all("rdmap16s27-rdm" not in x["nics"] for x in s), s'
check topology-nic-exclude "exit 0, the excluded NIC in no set, the first set of 1, the second of 2 (exit $RC)" $?
# The same named as the provider names the NIC (its domain, the form the
# components' lists take): recorded devices carry that name too.
run_json --topology "$topo/p4d.xml" --local-size 2 --nic-exclude rdmap16s27-rdm
[ $RC -eq 0 ] && JSON=$OUT python3 -c '
import json, os
s = json.loads(os.environ["JSON"])["sets"]
assert [len(x["nics"]) for x in s] == [1, 2], s
assert all(n.endswith("-rdm") for x in s for n in x["nics"]), s
assert all("rdmap16s27-rdm" not in x["nics"] for x in s), s'
check topology-nic-exclude-domain-name "exit 0 with the NIC named by its domain, excluded (exit $RC)" $?
run --topology "$topo/p4d.xml" --nic-exclude rdmap99s27
[ $RC -eq 1 ] && grep -q "an unknown name: rdmap99s27" <<<"$OUT"
check topology-nic-unknown "expected exit 1 and the unknown name (exit $RC)" $?

# A set larger than the core's rails (4): the first 4 opened, said so;
# with striping off (common_efa_stripe_min 0) the first alone.  p5 with
# one process: 32 NICs in its set, 4 opened.
run_json --topology "$topo/p5.48xlarge.xml" --local-size 1 --gpu none
[ $RC -eq 0 ] && JSON=$OUT python3 -c '
import json, os
s = json.loads(os.environ["JSON"])["sets"][0]
assert len(s["nics"]) == 32 and s["opened"] == s["nics"][:4], s
assert "the first 4 opened as rails" in s["reason"], s' 2>/dev/null
check p5-one-four-rails "1 process on p5: a set of 32, the first 4 opened and said (exit $RC)" $?
OUT=$(OMPI_MCA_common_efa_stripe_min=0 "$info" --topology "$topo/p4d.xml" --gpu none --json 2>/dev/null)
RC=$?
[ $RC -eq 0 ] && JSON=$OUT python3 -c '
import json, os
s = json.loads(os.environ["JSON"])["sets"][0]
assert len(s["nics"]) == 4 and s["opened"] == s["nics"][:1], s
assert "striping off" in s["reason"], s' 2>/dev/null
check stripe-off-one-nic "common_efa_stripe_min 0: the first NIC of the set alone (exit $RC)" $?
# Open MPI's default binding for 2 processes (a core each, both in the
# first package): p5's first package's 16 NICs, 8 each, 4 of them opened.
run_json --topology "$topo/p5.48xlarge.xml" --local-size 2 --map-by core --gpu none
[ $RC -eq 0 ] && JSON=$OUT python3 -c '
import json, os
d = json.loads(os.environ["JSON"])
s = d["sets"]
assert d["map_by"] == "core" and [x["binding"] for x in s] == ["0,32", "1,33"], d
assert [len(x["nics"]) for x in s] == [8, 8] and not set(s[0]["nics"]) & set(s[1]["nics"]), s
assert all(len(x["opened"]) == 4 for x in s), s' 2>/dev/null
check p5-two-by-core "2 processes a core each on p5: 8 NICs of the first package each (exit $RC)" $?
sets_ok p5.48xlarge.xml 4 8 1 32 --gpu none
check p5-four "4 processes on p5 should get 8 NICs each, all 32 once" $?
# A topology file hwloc cannot read: exit 1, said.
printf '<?xml version="1.0"?>\n<topology><object type="Machine"' >"${TMPDIR:-/tmp}/efa-info-bad.$$.xml"
run --topology "${TMPDIR:-/tmp}/efa-info-bad.$$.xml"
rm -f "${TMPDIR:-/tmp}/efa-info-bad.$$.xml"
[ $RC -eq 1 ] && grep -q "cannot load the topology" <<<"$OUT"
check malformed-topology "expected exit 1 and the message for malformed XML (exit $RC)" $?

# The core's other parameters, checked as the components check them
# (exit 2 with the range and where the value came from), integers read as
# Open MPI reads them (k suffix, hexadecimal).
OUT=$(OMPI_MCA_common_efa_num_contexts=99 "$info" --provider "tcp;ofi_rxm" 2>&1)
RC=$?
[ $RC -eq 2 ] && grep -q "common_efa_num_contexts must be 1 to 16, not '99' (from the environment, OMPI_MCA_common_efa_num_contexts)" <<<"$OUT"
check num-contexts-bad "expected exit 2 and the range for num_contexts=99 (exit $RC)" $?
OUT=$(OMPI_MCA_btl_efa_peer_timeout=12x "$info" --provider "tcp;ofi_rxm" 2>&1)
RC=$?
[ $RC -eq 2 ] && grep -q "common_efa_peer_timeout must be an integer.*not '12x'" <<<"$OUT"
check peer-timeout-not-integer "expected exit 2 for peer_timeout=12x (exit $RC)" $?
OUT=$(OMPI_MCA_common_efa_stripe_min=1k "$info" --provider "tcp;ofi_rxm" 2>&1)
RC=$?
[ $RC -eq 2 ] && grep -q "common_efa_stripe_min must be 4096 to 1073741824, not '1024'" <<<"$OUT"
check stripe-min-suffix-small "1k should read as 1024 and be refused (exit $RC)" $?
for v in 256k 0x40000 4K; do
    OUT=$(OMPI_MCA_common_efa_stripe_min=$v "$info" --provider "tcp;ofi_rxm" 2>&1)
    RC=$?
    [ $RC -eq 0 ] && grep -q "common_efa_stripe_min = $v (from the environment" <<<"$OUT"
    check "stripe-min-$v" "stripe_min=$v should be taken (exit $RC)" $?
done
# The provider asked, as the lists say it; the JSON says why the core did
# not open (empty when it did).
run --provider-exclude tcp --provider-exclude udp
[ $RC -ne 2 ] && grep -q "^components' provider (asked: all providers except udp)" <<<"$OUT"
check asked-exclude "an exclude list not said as such (exit $RC)" $?
run_json --provider "tcp;ofi_rxm"
[ $RC -eq 0 ] && JSON=$OUT python3 -c '
import json, os
d = json.loads(os.environ["JSON"])
assert d["opened"] is True and d["not_opened"] == "" and d["open_messages"] == [], d' 2>/dev/null
check json-not-opened "the JSON lacks not_opened and open_messages (exit $RC)" $?

# Bad arguments: a clear message and exit 2; an unreadable topology: exit 1.
run --local-size 0
[ $RC -eq 2 ] && grep -q "must be 1 to 1024" <<<"$OUT"
check bad-local-size "expected exit 2 and the range (exit $RC)" $?
run --topology /nonexistent.xml
[ $RC -eq 1 ] && grep -q "cannot load the topology" <<<"$OUT"
check bad-topology "expected exit 1 and the message (exit $RC)" $?
run --frobnicate
[ $RC -eq 2 ] && grep -q "unknown argument" <<<"$OUT"
check bad-argument "expected exit 2 and the message (exit $RC)" $?

# --topology answers for the recorded instance: its exit status is the
# recorded sets' (0 here, where this machine has no EFA), and this
# machine's sections are said to be this machine's.
run --topology "$topo/p5.48xlarge.xml" --local-size 8
[ $RC -eq 0 ] && grep -q "^NIC sets on $topo/p5.48xlarge.xml" <<<"$OUT" &&
    grep -q "^this machine, for reference" <<<"$OUT"
check topology-exit "expected exit 0 and this machine's sections labelled (exit $RC)" $?
run --topology "$topo/p4d.xml" --provider "tcp;ofi_rxm"
[ $RC -eq 0 ] && grep -q "^NICs on this machine:" <<<"$OUT"
check topology-local-nics "this machine's NICs not labelled as this machine's (exit $RC)" $?
# A bad --gpu (exit 2): the message alone, no report on stdout.
OUT=$("$info" --topology "$topo/p5.48xlarge.xml" --gpu 8 2>/dev/null)
RC=$?
[ $RC -eq 2 ] && [ -z "$OUT" ]
check gpu-unknown-no-report "expected exit 2 and nothing on stdout (exit $RC)" $?

# The exclusive pairs of the synopsis: refused, exit 2.
run --provider shm --provider-exclude tcp
[ $RC -eq 2 ] && grep -q "\-\-provider and --provider-exclude cannot be given together" <<<"$OUT"
check exclusive-provider "expected exit 2 and the message (exit $RC)" $?
run --provider shm --one-node --nic-include shm --nic-exclude shm
[ $RC -eq 2 ] && grep -q "\-\-nic-include and --nic-exclude cannot be given together" <<<"$OUT"
check exclusive-nic "expected exit 2 and the message (exit $RC)" $?
run --topology "$topo/p4d.xml" --nic-include rdmap16s27 --nic-exclude rdmap32s27
[ $RC -eq 2 ] && grep -q "cannot be given together" <<<"$OUT"
check exclusive-nic-topology "expected exit 2 with --topology too (exit $RC)" $?

# Booleans as Open MPI 4.1 reads them (mca_base_var_enum_bool): integers
# (non-zero: true), t|true|enabled|yes|y, f|false|disabled|no|n; anything
# else (on included) refused.
bool_case() { # value expected: on, off or bad
    OUT=$(OMPI_MCA_common_efa_dmabuf=$1 "$info" --provider shm --one-node 2>&1)
    RC=$?
    case $2 in
    on) [ $RC -eq 0 ] && ! grep -q "common_efa_dmabuf off" <<<"$OUT" ;;
    off) [ $RC -eq 0 ] && grep -q "(common_efa_dmabuf off)" <<<"$OUT" ;;
    bad) [ $RC -eq 2 ] && grep -q "common_efa_dmabuf must be a boolean" <<<"$OUT" ;;
    esac
    check "bool-$1" "common_efa_dmabuf=$1 should be $2 (exit $RC)" $?
}
for v in 1 2 -1 t true enabled yes y; do bool_case "$v" on; done
for v in 0 f false disabled no n; do bool_case "$v" off; done
for v in on off TRUE 1x; do bool_case "$v" bad; done

# MCA parameter files, as Open MPI reads them: the user's
# (~/.openmpi/mca-params.conf) over the system's (OPAL_SYSCONFDIR here),
# the environment over both; where a value came from is said.
ptmp=$(mktemp -d)
trap 'rm -rf "$ptmp"' EXIT
mkdir -p "$ptmp/home/.openmpi" "$ptmp/etc"
printf '# the system file\ncommon_efa_provider_include = udp;ofi_rxd\nbtl_efa_dmabuf = 0\n' \
    >"$ptmp/etc/openmpi-mca-params.conf"
OUT=$(HOME=$ptmp/home OPAL_SYSCONFDIR=$ptmp/etc "$info" 2>&1)
RC=$?
[ $RC -eq 0 ] && grep -qE "^components' provider \(asked: udp;ofi_rxd\): udp;ofi_rxd" <<<"$OUT" &&
    grep -q "common_efa_provider_include = udp;ofi_rxd (from $ptmp/etc/openmpi-mca-params.conf)" <<<"$OUT" &&
    grep -q "(common_efa_dmabuf off)" <<<"$OUT"
check paramfile-system "the system file's provider and dmabuf not taken or not said (exit $RC)" $?
printf 'common_efa_provider_include=tcp;ofi_rxm   \n  # a comment\n\n' >"$ptmp/home/.openmpi/mca-params.conf"
OUT=$(HOME=$ptmp/home OPAL_SYSCONFDIR=$ptmp/etc "$info" 2>&1)
RC=$?
[ $RC -eq 0 ] && grep -qE "^components' provider \(asked: tcp;ofi_rxm\): tcp;ofi_rxm" <<<"$OUT" &&
    grep -q "common_efa_provider_include = tcp;ofi_rxm (from $ptmp/home/.openmpi/mca-params.conf)" <<<"$OUT"
check paramfile-user "the user's file not over the system's (exit $RC)" $?
OUT=$(HOME=$ptmp/home OPAL_SYSCONFDIR=$ptmp/etc OMPI_MCA_mtl_efa_provider_include=shm "$info" --one-node 2>&1)
RC=$?
[ $RC -eq 0 ] && grep -qE "^components' provider \(asked: shm\): shm" <<<"$OUT" &&
    grep -q "common_efa_provider_include = shm (from the environment, OMPI_MCA_mtl_efa_provider_include)" <<<"$OUT"
check paramfile-env "the environment not over the files (exit $RC)" $?
# A bad boolean in a file is refused with the file named.
printf 'mtl_efa_force_direct_mode = on\n' >"$ptmp/home/.openmpi/mca-params.conf"
OUT=$(HOME=$ptmp/home OPAL_SYSCONFDIR=$ptmp/etc "$info" 2>&1)
RC=$?
[ $RC -eq 2 ] && grep -q "common_efa_force_direct_mode must be a boolean.*not 'on' (from $ptmp/home/.openmpi/mca-params.conf, mtl_efa_force_direct_mode)" <<<"$OUT"
check paramfile-bad-bool "expected exit 2 and the file named (exit $RC)" $?
# --no-direct-mode turns a file's direct mode off (said as the option's);
# with --direct-mode it is refused.
printf 'common_efa_force_direct_mode = 1\n' >"$ptmp/home/.openmpi/mca-params.conf"
OUT=$(HOME=$ptmp/home OPAL_SYSCONFDIR=$ptmp/etc "$info" --provider shm --one-node 2>&1)
RC=$?
[ $RC -eq 0 ] && grep -q "^granted on the first NIC's endpoint: tags no" <<<"$OUT"
check paramfile-direct-mode "the file's direct mode not taken (exit $RC)" $?
OUT=$(HOME=$ptmp/home OPAL_SYSCONFDIR=$ptmp/etc "$info" --provider shm --one-node --no-direct-mode 2>&1)
RC=$?
[ $RC -eq 0 ] && grep -q "^granted on the first NIC's endpoint: tags yes" <<<"$OUT" &&
    grep -q "common_efa_force_direct_mode.*--no-direct-mode" <<<"$OUT"
check paramfile-no-direct-mode "--no-direct-mode did not turn the file's off (exit $RC)" $?
run --provider shm --one-node --direct-mode --no-direct-mode
[ $RC -eq 2 ] && grep -q "\-\-direct-mode and --no-direct-mode cannot be given together" <<<"$OUT"
check exclusive-direct-mode "expected exit 2 and the message (exit $RC)" $?
printf 'mtl_efa_force_direct_mode = on\n' >"$ptmp/home/.openmpi/mca-params.conf"
# --help and --version answer all the same.
OUT=$(HOME=$ptmp/home OPAL_SYSCONFDIR=$ptmp/etc "$info" --help 2>&1)
RC=$?
[ $RC -eq 0 ] && grep -q "^usage: efa-mpi-info" <<<"$OUT"
check paramfile-bad-bool-help "--help refused for a bad parameter file (exit $RC)" $?
OUT=$(HOME=$ptmp/home OPAL_SYSCONFDIR=$ptmp/etc "$info" --version 2>&1)
RC=$?
[ $RC -eq 0 ] && grep -q "^efa-mpi-info (ompi-efa) " <<<"$OUT"
check paramfile-bad-bool-version "--version refused for a bad parameter file (exit $RC)" $?
# OMPI_MCA_mca_base_param_files replaces the list; none reads no file.
printf 'common_efa_provider_include = shm\n' >"$ptmp/list.conf"
OUT=$(HOME=$ptmp/home OPAL_SYSCONFDIR=$ptmp/etc OMPI_MCA_mca_base_param_files=$ptmp/list.conf "$info" --one-node 2>&1)
RC=$?
[ $RC -eq 0 ] && grep -qE "^components' provider \(asked: shm\): shm" <<<"$OUT"
check paramfile-list "OMPI_MCA_mca_base_param_files not followed (exit $RC)" $?
OUT=$(HOME=$ptmp/home OPAL_SYSCONFDIR=$ptmp/etc OMPI_MCA_mca_base_param_files=none "$info" 2>&1)
RC=$?
[ $RC -eq 3 ] && grep -qE "^components' provider \(asked: efa\)" <<<"$OUT"
check paramfile-none "mca_base_param_files none: no file should be read (exit $RC)" $?

# What could not be found is said: libfabric offering nothing, and
# this machine's topology not loaded.
OUT=$(FI_PROVIDER=nosuchprovider "$info" 2>&1)
RC=$?
[ $RC -eq 3 ] && grep -q "^  none: fi_getinfo failed" <<<"$OUT"
check getinfo-failed "an empty provider list without the reason (exit $RC)" $?
# (hwloc with no discovery component: no topology)
OUT=$(HWLOC_COMPONENTS=stop "$info" --provider "tcp;ofi_rxm" 2>&1)
RC=$?
[ $RC -eq 0 ] && grep -q "cannot load this machine's topology: the NICs' places and the NIC sets are left out" <<<"$OUT" &&
    ! grep -q "^NIC sets on" <<<"$OUT"
check here-topology-failed "no word that this machine's topology was not loaded (exit $RC)" $?

# The text agrees with the man page: exit-1 causes, -h, the GPU's
# default, common_efa_dmabuf.
OUT=$("$info" --help 2>&1)
grep -q "holds no EFA device" <<<"$OUT" && grep -q -- "--help, -h" <<<"$OUT" &&
    grep -q "OMPI_MCA_common_efa_gpu" <<<"$OUT" && grep -q "dmabuf" <<<"$OUT" &&
    grep -q "mca-params.conf" <<<"$OUT"
check help-text "--help lacks the exit-1 causes, -h, dmabuf or the parameter files" $?

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
