#!/usr/bin/env bash
# ./build.sh          install the build requirements, build + install the
#                     overlap_ops extension, check that its C++ errors reach
#                     Python, run a demo
# ./build.sh test     the same without the demo, plus the test requirements,
#                     then every test (CPU tests always; CUDA tests when a
#                     GPU is present) and the patch checks
# ./build.sh check    only the error check, on the installed extension
# ./build.sh wheel    build a patched PyTorch wheel (see README, "Wheel")
#
# Requirements come from torch_ext/pyproject.toml; torch is installed
# (2.14.1) only when missing, and an installed torch is never replaced.
# Environment: PYTHON (default python3), MAX_JOBS, CC/CXX, OVERLAP_OPS_CUDA
# (auto|0|1), TORCH_CUDA_ARCH_LIST or OVERLAP_OPS_ARCHS (default "90a;80"),
# CUTLASS_INCLUDE_DIR.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
TESTED_TORCH=2.14.1
SYSTEM_CC=/usr/bin/gcc
SYSTEM_CXX=/usr/bin/g++
BUILD_DIR=torch_ext/build
# Compilers whose build failed the error check (reset: rm -rf torch_ext/build)
REJECTED=$BUILD_DIR/rejected-compilers

say() { printf '\n==> %s\n' "$*"; }
fail() { echo "build.sh: $*" >&2; exit 1; }

ensure_torch() {
  "$PYTHON" -c 'import torch' 2>/dev/null && return
  say "torch not found: installing torch==$TESTED_TORCH"
  "$PYTHON" -m pip install "torch==$TESTED_TORCH"
}

ensure_python_deps() {  # ensure_python_deps GROUP...: build, test, bench
  ensure_torch
  local listed req reqs=()
  listed=$("$PYTHON" torch_ext/build_requirements.py --unmet "$@") \
    || fail "cannot read the requirements in torch_ext/pyproject.toml"
  while IFS= read -r req; do
    # An explicit CUTLASS (a machine without a network) replaces the wheel.
    [[ -n ${CUTLASS_INCLUDE_DIR:-} && $req == nvidia-cutlass* ]] && continue
    [[ -z $req ]] || reqs+=("$req")
  done <<<"$listed"
  ((${#reqs[@]})) || return 0
  say "installing what torch_ext/pyproject.toml declares ($*): ${reqs[*]}"
  # The constraint keeps pip from replacing the installed torch.
  local pin
  pin=$(mktemp)
  "$PYTHON" -c 'import torch; print("torch==" + torch.__version__)' > "$pin"
  "$PYTHON" -m pip install --quiet -c "$pin" "${reqs[@]}" \
    || { rm -f "$pin"; fail "installing the requirements failed"; }
  rm -f "$pin"
}

find_cuda_home() {
  # torch guesses the toolkit as nvcc's grandparent folder; an nvcc that is
  # a wrapper script or a link (/usr/local/bin/nvcc) makes that /usr/local,
  # without the CUDA headers. nvcc's dry run names its real toolkit.
  [[ -n "${CUDA_HOME:-}" ]] && return
  command -v nvcc >/dev/null || return 0
  local top
  top=$(nvcc --dryrun -E -x cu /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' \
        | head -1)
  if [[ -n "$top" && -d "$top/include" ]]; then
    CUDA_HOME=$(cd "$top" && pwd)
    export CUDA_HOME
  fi
}

compiler() {  # the C++ compiler cpp_extension runs: $CXX, else c++
  local cxx=${CXX:-c++}
  readlink -f "$(command -v "${cxx%% *}")" 2>/dev/null || echo "$cxx"
}

can_use_system_compiler() {
  [[ -x $SYSTEM_CXX && $(compiler) != "$(readlink -f "$SYSTEM_CXX")" ]]
}

use_system_compiler() {
  export CC=$SYSTEM_CC CXX=$SYSTEM_CXX
}

skip_rejected_compiler() {
  # An earlier ./build.sh found this compiler's build failing the error
  # check: go straight to the system compiler instead of failing again.
  [[ -f $REJECTED ]] && grep -qxF "$(compiler)" "$REJECTED" \
    && can_use_system_compiler || return 0
  say "CXX=$(compiler) failed the error check before ($REJECTED):" \
      "building with CC=$SYSTEM_CC CXX=$SYSTEM_CXX"
  use_system_compiler
}

compile_and_install() {
  say "building overlap_ops with CXX=$(compiler) (MAX_JOBS=$MAX_JOBS);" \
      "ninja prints [done/total]"
  local start=$SECONDS
  local log=$BUILD_DIR/overlap_ops-build.log
  mkdir -p "$BUILD_DIR"
  # -v shows ninja's progress lines (the full output goes to $log);
  # --no-build-isolation builds against the torch installed here instead of
  # downloading another one.
  { "$PYTHON" -m pip install --no-build-isolation --no-deps -v ./torch_ext \
      2>&1; echo $? > "$log.status"; } | tee "$log" \
    | grep --line-buffered -E '^ *\[[0-9]+/[0-9]+\]|overlap_ops:|error|Error|Successfully' \
    || true
  local status
  status=$(cat "$log.status")
  # Never go on with an overlap_ops installed by an earlier build.
  [[ "$status" == 0 ]] || fail "building overlap_ops failed (pip exit" \
    "status $status); full log: $log"
  "$PYTHON" -c 'import overlap_ops' \
    || fail "overlap_ops built but does not import; full log: $log"
  say "built in $((SECONDS - start)) s"
}

# A call the extension rejects on every machine, and its whole message. A
# C++ runtime other than torch's shows here: the exception cannot cross
# into libtorch (a crash), or the message is cut at its first number.
BAD_CALL='import torch, overlap_ops
try:
    overlap_ops.grouped_mm(torch.randn(10, 8), torch.randn(3, 8, 4),
                           torch.tensor([4, 10], dtype=torch.int32))
except RuntimeError as error:
    print(error)
else:
    raise SystemExit("no error raised")'
BAD_CALL_MESSAGE='grouped_mm: offs must have one entry per group (3 for the 2d x 3d layout), got 2'

errors_reach_python() {  # status 1: the compiler's fault, 2: another one
  local out status=0
  out=$("$PYTHON" -c "$BAD_CALL" 2>&1) || status=$?
  if ((status == 0)) && [[ $out == "$BAD_CALL_MESSAGE" ]]; then
    echo "error check: a bad call raised RuntimeError with its whole message"
    return 0
  fi
  if ((status > 128)); then
    echo "build.sh: a bad call killed the process (signal $((status - 128)))" \
         "instead of raising RuntimeError" >&2
  elif ((status == 0)); then
    echo "build.sh: a bad call raised a garbled error:" \
         "got \"$out\", expected \"$BAD_CALL_MESSAGE\"" >&2
  else
    echo "build.sh: the error check itself failed (exit status $status):" >&2
    tail -5 <<<"$out" >&2
    return 2
  fi
  echo "build.sh: overlap_ops was built with CXX=$(compiler), whose C++" \
       "runtime does not match torch's (for example it links libstdc++" \
       "statically), so C++ errors cannot reach Python." >&2
  return 1
}

check_or_rebuild() {
  say "error check"
  local status=0
  errors_reach_python || status=$?
  ((status != 2)) || fail "fix the error check above first"
  ((status != 0)) || return 0
  can_use_system_compiler || fail "set CC and CXX to a GCC that links" \
    "libstdc++ dynamically, as torch's own build does (a Linux" \
    "distribution's gcc and g++ do), and run ./build.sh again"
  local rejected
  rejected=$(compiler)
  use_system_compiler
  say "rebuilding with the system compiler: CC=$CC CXX=$CXX"
  rm -rf "$BUILD_DIR"
  mkdir -p "$BUILD_DIR" && echo "$rejected" >> "$REJECTED"
  compile_and_install
  errors_reach_python || fail "the system compiler's build fails the" \
    "error check too; full log: $BUILD_DIR/overlap_ops-build.log"
  echo "build.sh: built with $CXX; to build with it from the start, set" \
       "CC=$CC CXX=$CXX"
}

build_extension() {
  ensure_python_deps "$@"
  find_cuda_home
  skip_rejected_compiler
  compile_and_install
  check_or_rebuild
}

run_tests() {
  say "tests"
  "$PYTHON" -m pytest -q test "$@"
  if [[ -f tools/patches/check_patches.py ]]; then
    say "patch checks"
    "$PYTHON" tools/patches/check_patches.py
  fi
}

case "${1:-}" in
  "")
    build_extension build
    say "demo"
    "$PYTHON" tools/demo.py
    ;;
  test)
    shift
    build_extension build test bench
    run_tests "$@"
    ;;
  check)
    errors_reach_python
    ;;
  wheel)
    shift
    exec "$PYTHON" tools/patches/build_wheel.py "$@"
    ;;
  *)
    echo "usage: ./build.sh [test [pytest args] | check | wheel [options]]" >&2
    exit 2
    ;;
esac
