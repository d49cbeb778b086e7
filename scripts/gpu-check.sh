#!/usr/bin/env bash
# GPU check: builds kvtier with kernels for sm_90 (H100/H200), runs the tests
# labelled `gpu` and the GPU benchmarks, and writes the log and figures to
# one directory. Meant for a machine with an NVIDIA GPU and CUDA 13 at
# /usr/local/cuda; on one without a GPU it still builds, and the tests and
# benchmark report themselves skipped.
#
#   scripts/gpu-check.sh [OUT_DIR]      (default: $OUT if set, else ./gpu-check-out)
#
# Files written: gpu-check.log (everything), ctest-gpu.log, gpu_copy.txt,
# gather_scatter.txt, nvidia-smi.txt, summary.json (the gpu_copy JSON line).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu-check-out}}"
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1
start=$(date +%s)
echo "=== gpu-check $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi: not available"
cat "$out/nvidia-smi.txt" | head -15

# Dependencies: on a machine with no package registry (the device tool's CUDA
# image) from the bundle that scripts/device-deps.sh packs on Debian 12;
# elsewhere apt, only when something is missing (install-deps says what).
if [[ -f .devdeps/deps.tar.xz ]]; then
  bash scripts/device-deps.sh unpack .devdeps/deps.tar.xz || exit 1
else
  bash scripts/install-deps || echo "install-deps failed; trying to build with what is here"
fi

# The Python tests need an interpreter with grpc, protobuf, xxhash and torch:
# Debian's /usr/bin/python3, or the image's own python3.
python=/usr/bin/python3
for candidate in /usr/bin/python3 "$(command -v python3)"; do
  if "$candidate" -c 'import grpc, google.protobuf, xxhash, torch' 2>/dev/null; then
    python="$candidate"; break
  fi
done
echo "=== python for the tests: $python ($("$python" --version 2>&1))"
"$python" -c 'import grpc, google.protobuf as p; print("grpcio", grpc.__version__, "protobuf", p.__version__)' || true
g++ --version | head -1 || true
/usr/local/cuda/bin/nvcc --version | tail -2 || true

build=build-gpu
rm -rf "$build"  # no cache from another configuration
jobs=$(nproc)
# CMake 4 refuses configs that declare a minimum below 3.5 (some of Debian's
# find modules do); warnings are not errors here: another compiler than CI's.
# (No -include flags here: GCC uses a precompiled prelude only as the first
# include, and falls back to parsing it without the generated stubs' paths.)
export CMAKE_POLICY_VERSION_MINIMUM=3.5
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVTIER_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DKVTIER_WERROR=OFF -DKVTIER_PYTHON="$python" || exit 1
cmake --build "$build" -j "$jobs" --target gpu_test gpu_device_test gpu_copy gather_scatter \
  kvtierd kvtier_python || exit 1
echo "=== build done in $(( $(date +%s) - start ))s"

status=0
echo "=== ctest -L gpu (and the CPU-side gpu_test)"
# cuda_ipc_test: the vLLM connector's GPU path (CUDA IPC export, DirectTransfer)
# against a CUDA kvtierd, byte-exact on the device.
ctest --test-dir "$build" -R '^(GpuDeviceTest|GpuProbeTest|CpuCopyEngineTest|CopyEngineFactoryTest|Fp8|EngineLayout|AllLayouts|cuda_ipc_test)' \
  --output-on-failure -j 4 2>&1 | tee "$out/ctest-gpu.log" || status=1
# A GPU machine must run the device tests, not skip them.
if nvidia-smi -L >/dev/null 2>&1 && grep -q "Not Run\|Skipped" "$out/ctest-gpu.log"; then
  if grep -q "\(GpuDeviceTest\|cuda_ipc_test\).*Skipped" "$out/ctest-gpu.log"; then
    echo "gpu-check: a GPU is present but the device tests skipped" ; status=1
  fi
fi

echo "=== bench/gpu_copy"
timeout 300 "$build/bench/gpu_copy" | tee "$out/gpu_copy.txt" || status=1
grep '^{' "$out/gpu_copy.txt" > "$out/summary.json" || true
echo "=== bench/gather_scatter (CPU backend)"
timeout 120 "$build/bench/gather_scatter" | tee "$out/gather_scatter.txt" || status=1

echo "=== gpu-check finished in $(( $(date +%s) - start ))s, status $status"
exit $status
