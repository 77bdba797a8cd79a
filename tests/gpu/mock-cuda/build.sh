#!/usr/bin/env bash
# Builds the mock CUDA driver and runtime (mock_cuda.h says what they are)
# into OUT: libcuda.so.1, libcudart.so.13 (its symbols versioned as the
# real one's, which OSU's binaries ask for), the unversioned names
# libfabric opens, an nvidia-smi that lists the one mock device, and
# mock_check (mock_check.c: what the rehearsal relies on, checked).
#   tests/gpu/mock-cuda/build.sh OUT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT}
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$out"
cc=(gcc -Wall -Wextra -Werror -O2 -fPIC -shared -I"$cuda/include")
"${cc[@]}" -Wl,-soname,libcuda.so.1 -o "$out/libcuda.so.1" \
    "$here/mock_cuda_mem.c" "$here/mock_cuda_vmm.c" "$here/mock_cuda_ctx.c" -ldl -lpthread
ln -sf libcuda.so.1 "$out/libcuda.so"
"${cc[@]}" -Wl,-soname,libcudart.so.13 -Wl,--version-script,"$here/mock_cudart.map" \
    -o "$out/libcudart.so.13" "$here/mock_cudart.c" -L"$out" -lcuda
ln -sf libcudart.so.13 "$out/libcudart.so"
gcc -Wall -Wextra -Werror -O2 -I"$cuda/include" -o "$out/mock_check" "$here/mock_check.c" \
    -L"$out" -lcuda -Wl,-rpath,"$out"
cat >"$out/nvidia-smi" <<'SMI'
#!/bin/sh
# The mock's nvidia-smi: one device, said to be the mock.
echo "GPU 0: Mock CUDA device (tests/gpu/mock-cuda, no GPU) (UUID: GPU-00000000-0000-0000-0000-000000000000)"
SMI
chmod +x "$out/nvidia-smi"
echo "mock-cuda: built in $out"
