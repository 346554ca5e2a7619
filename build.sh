#!/usr/bin/env bash
# ./build.sh          build + install the overlap_ops extension, run a demo
# ./build.sh test     build + install, then run every test (CPU tests always;
#                     CUDA tests when a GPU is present) and the patch checks
# ./build.sh wheel    build a patched PyTorch wheel (see README, "Wheel")
#
# Environment: PYTHON (default python3), MAX_JOBS, OVERLAP_OPS_CUDA
# (auto|0|1), OVERLAP_OPS_ARCHS (default "90a;80"), CUTLASS_INCLUDE_DIR.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
export MAX_JOBS=${MAX_JOBS:-$(nproc)}

say() { printf '\n==> %s\n' "$*"; }

ensure_python_deps() {
  # Install what is missing; never replace a torch the user already has.
  if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    say "torch not found: installing torch==2.14.1"
    "$PYTHON" -m pip install "torch==2.14.1"
  fi
  local missing=()
  for mod in ninja:ninja expecttest:expecttest pytest:pytest \
             cutlass_library:nvidia-cutlass setuptools:setuptools; do
    "$PYTHON" -c "import ${mod%%:*}" 2>/dev/null || missing+=("${mod##*:}")
  done
  if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    "$PYTHON" -m pip install "${missing[@]}"
  fi
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

build_extension() {
  ensure_python_deps
  find_cuda_home
  say "building overlap_ops (MAX_JOBS=$MAX_JOBS); ninja prints [done/total]"
  local start=$SECONDS
  local log=torch_ext/build/overlap_ops-build.log
  mkdir -p torch_ext/build
  # -v shows ninja's progress lines (the full output goes to $log);
  # --no-build-isolation builds against the torch installed here instead of
  # downloading another one.
  { "$PYTHON" -m pip install --no-build-isolation --no-deps -v ./torch_ext \
      2>&1; echo $? > "$log.status"; } | tee "$log" \
    | grep --line-buffered -E '^ *\[[0-9]+/[0-9]+\]|overlap_ops:|error|Error|Successfully' \
    || true
  local status
  status=$(cat "$log.status")
  if [[ "$status" != 0 ]]; then
    # Never go on with an overlap_ops installed by an earlier build.
    echo "build.sh: building overlap_ops failed (pip exit status $status);" \
         "full log: $log" >&2
    exit 1
  fi
  "$PYTHON" -c 'import overlap_ops' || {
    echo "build.sh: overlap_ops built but does not import; full log: $log" >&2
    exit 1
  }
  say "built in $((SECONDS - start)) s"
}

run_tests() {
  say "tests"
  "$PYTHON" -m pytest -q test "$@"
  if [[ -f tools/check_patches.py ]]; then
    say "patch checks"
    "$PYTHON" tools/check_patches.py
  fi
}

case "${1:-}" in
  "")
    build_extension
    say "demo"
    "$PYTHON" tools/demo.py
    ;;
  test)
    shift
    build_extension
    run_tests "$@"
    ;;
  wheel)
    shift
    exec "$PYTHON" tools/build_wheel.py "$@"
    ;;
  *)
    echo "usage: ./build.sh [test [pytest args] | wheel [options]]" >&2
    exit 2
    ;;
esac
