#!/usr/bin/env bash
# Compiles and runs the series' ATen C++ tests (aten/src/ATen/test/*_test.cpp)
# on the CPU: g++ against the installed torch wheel's headers and libraries
# (libtorch_cpu, libc10) and the portable aten/ sources they test, with
# tools/checks/gtest_shim standing in for googletest (a PyTorch build links
# the real one). The tests it runs need no GPU. Run by CI (.ci/run).
#
#   tools/checks/run_cpp_tests.sh                 # every test
#   tools/checks/run_cpp_tests.sh cuda_cu_mask_test [--gtest_filter=...]
#
# Environment: PYTHON (default python3), CXX (default g++), BUILD_DIR
# (default: a temporary folder, removed afterwards).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
CXX=${CXX:-g++}
start=$SECONDS

# The aten/ sources the tests exercise: host code with no CUDA or HIP
# header, which a PyTorch build compiles into torch_cuda / torch_hip.
PORTABLE_SOURCES=(
  aten/src/ATen/cuda/SMCarveout.cpp
  aten/src/ATen/cuda/CUMask.cpp
  aten/src/ATen/cuda/CarveoutStreamCache.cpp
)

tests=()
filter_args=()
for arg in "$@"; do
  case $arg in
    --*) filter_args+=("$arg") ;;
    *) tests+=("aten/src/ATen/test/${arg%.cpp}.cpp") ;;
  esac
done
if ((${#tests[@]} == 0)); then
  tests=(aten/src/ATen/test/*_test.cpp)
fi

torch_dir=$("$PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
abi=$("$PYTHON" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
if [[ -n ${BUILD_DIR:-} ]]; then
  build=$BUILD_DIR
  mkdir -p "$build"
else
  build=$(mktemp -d /tmp/cpp-tests.XXXXXX)
  trap 'rm -rf "$build"' EXIT
fi

flags=(-std=c++20 -O1 -pthread "-D_GLIBCXX_USE_CXX11_ABI=$abi"
       -I tools/checks/gtest_shim -I aten/src
       -isystem "$torch_dir/include"
       -isystem "$torch_dir/include/torch/csrc/api/include")
libs=(-L "$torch_dir/lib" -ltorch_cpu -lc10 "-Wl,-rpath,$torch_dir/lib")

compile() {  # compile SOURCE OBJECT
  "$CXX" "${flags[@]}" -c "$1" -o "$2"
}

objects=()
pids=()
for source in "${PORTABLE_SOURCES[@]}" tools/checks/gtest_shim/gtest_main.cpp; do
  object=$build/$(basename "${source%.cpp}").o
  compile "$source" "$object" & pids+=($!)
  objects+=("$object")
done
for test in "${tests[@]}"; do
  [[ -f $test ]] || { echo "run_cpp_tests: no such test: $test" >&2; exit 2; }
  compile "$test" "$build/$(basename "${test%.cpp}").o" & pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid" || { echo "run_cpp_tests: compile failed" >&2; exit 1; }
done

failed=()
for test in "${tests[@]}"; do
  name=$(basename "${test%.cpp}")
  "$CXX" "$build/$name.o" "${objects[@]}" "${libs[@]}" -o "$build/$name"
  if "$build/$name" "${filter_args[@]}" > "$build/$name.log" 2>&1; then
    echo "run_cpp_tests: $name passed ($(grep -c '^\[       OK \]' "$build/$name.log") tests)"
  else
    cat "$build/$name.log"
    failed+=("$name")
  fi
done
echo "run_cpp_tests: ${#tests[@]} test binaries in $((SECONDS - start)) s"
if ((${#failed[@]})); then
  echo "run_cpp_tests: FAILED: ${failed[*]}" >&2
  exit 1
fi
