#!/usr/bin/env bash
# Compile-checks the ROCm host code of the SM carveout with Debian's hipcc
# (HIP 5.2, clang 15): aten/src/ATen/hip/*.cpp, CUMask.cpp and
# CarveoutStreamCache.cpp, then what a ROCm build makes of the series' CUDA
# folders. Objects go to a temporary directory; nothing is linked or run,
# so no AMD GPU is needed.
#
#   tools/checks/check_hip_compile.sh            # needs hipcc on PATH
#   INSTALL=1 tools/checks/check_hip_compile.sh  # apt-get installs hipcc first
#
# Three passes: (1) the real headers only, so the hipBLASLt/rocBLAS branches
# are compiled out as on a machine without those libraries; (2) with the
# stand-in headers in tools/checks/hip_stubs, so the version-guarded branches
# compile too; (3) tools/checks/hipify_compile.py: the series' files under
# ATen/cuda and ATen/native/cuda hipified as PyTorch's ROCm build does, each
# unit compiled or, CUDA-only (CUTLASS), empty under USE_ROCM.
#
# Why host-only (--cuda-host-only) and C++20: these files have no kernels,
# PyTorch compiles them as host code, and torch >= 2.14 headers are used
# with C++20. clang 15's device pass adds nothing here.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
start=$SECONDS

if ! command -v hipcc >/dev/null; then
  if [[ "${INSTALL:-0}" != 1 ]]; then
    echo "check_hip_compile: hipcc not found; run" \
         "'apt-get install -y hipcc libamdhip64-dev' or INSTALL=1 $0" >&2
    exit 2
  fi
  echo "==> apt-get install hipcc libamdhip64-dev"
  # A fresh machine may have no package lists yet.
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    hipcc libamdhip64-dev >/dev/null
  echo "    installed in $((SECONDS - start)) s"
fi

torch_include=$("$PYTHON" -c 'import os, torch
print(os.path.join(os.path.dirname(torch.__file__), "include"))')
out=$(mktemp -d /tmp/check_hip_compile.XXXXXX)
trap 'rm -rf "$out"' EXIT

# HIP_PLATFORM=amd: Debian's hipcc picks the NVIDIA platform when nvcc is
# on PATH. --offload-arch: any arch, it only stops hipcc from probing
# /sys/class/kfd for a GPU.
export HIP_PLATFORM=amd
flags=(--offload-arch=gfx90a --cuda-host-only -std=c++20 -Wall -Wextra
       -Werror -Wno-unused-command-line-argument -I aten/src
       -I "$torch_include")
sources=(aten/src/ATen/cuda/CUMask.cpp
         aten/src/ATen/cuda/CarveoutStreamCache.cpp
         aten/src/ATen/hip/*.cpp)

compile_all() {
  local label=$1
  shift
  for src in "${sources[@]}"; do
    local t0=$SECONDS
    hipcc "${flags[@]}" "$@" -c "$src" \
      -o "$out/$(basename "$src" .cpp).$label.o"
    printf '    %-45s ok (%d s)\n' "$src" $((SECONDS - t0))
  done
}

expect_macro() {  # expect_macro NAME VALUE [flags]: which branch compiled
  local name=$1 value=$2 macros
  shift 2
  macros=$(hipcc "${flags[@]}" "$@" -E -dM \
             aten/src/ATen/hip/CarveoutBlasHIP.cpp)
  grep -qx "#define $name $value" <<<"$macros" || {
    echo "check_hip_compile: expected $name=$value" >&2
    exit 1
  }
  echo "    $name=$value"
}

echo "==> $(hipcc --version 2>/dev/null | head -1)"
echo "==> pass 1: real headers (hipBLASLt/rocBLAS branches compiled out)"
compile_all plain
expect_macro AT_ROCM_HIPBLASLT_HAS_SM_COUNT_TARGET 0
echo "==> pass 2: with tools/checks/hip_stubs (guarded branches compiled)"
compile_all stubs -I tools/checks/hip_stubs
expect_macro AT_ROCM_HIPBLASLT_HAS_SM_COUNT_TARGET 1 -I tools/checks/hip_stubs
expect_macro AT_ROCM_HAS_ROCBLAS 1 -I tools/checks/hip_stubs
echo "==> pass 3: hipified as the ROCm build does (tools/checks/hipify_compile.py)"
t0=$SECONDS
"$PYTHON" tools/checks/hipify_compile.py
echo "    pass 3 took $((SECONDS - t0)) s"
echo "==> HIP compile check passed in $((SECONDS - start)) s"
