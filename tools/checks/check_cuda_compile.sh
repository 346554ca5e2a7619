#!/usr/bin/env bash
# Compile-checks the CUDA sources with nvcc on a machine without a GPU (CI).
# Builds into a temporary folder; the library is never loaded or installed.
#
#   tools/checks/check_cuda_compile.sh          # every CUDA file except 13 of the 16
#                                        # CUTLASS SM90 and 4 of the 5 SM80
#                                        # instantiations (of the three TF32
#                                        # N-major units, _tf32_mn is
#                                        # compiled: _narrow and _cluster
#                                        # only change its tile config)
#   tools/checks/check_cuda_compile.sh --all    # all of them (~30 min on 2 cores)
#   tools/checks/check_cuda_compile.sh FILE...  # only these sources (paths or file
#                                        # names, .cu or .cpp)
#
# The GroupedMMSm90_*.cu (and GroupedMMSm80_*.cu) files differ only in
# template arguments, so the default compiles few of them to keep CI short:
# for SM90 bf16 with column-major A and row-major B (wgrad's layout, with
# the large config's store-tile kernels) and bf16 with both row-major (fwd,
# with large_solo's store-tile kernels, its default), for SM80 bf16. Each source
# gets the targets torch_ext/setup.py gives it (OVERLAP_OPS_ARCHS, default
# "90a;80").
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
start=$SECONDS
if ! "$PYTHON" -c 'import torch, sys; sys.exit(torch.version.cuda is None)'; then
  echo "check_cuda_compile: SKIPPED: torch is not a CUDA build" >&2
  exit 0
fi
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -x "$CUDA_HOME/bin/nvcc" ]]; then
  echo "check_cuda_compile: SKIPPED: no nvcc at $CUDA_HOME/bin/nvcc" >&2
  exit 0
fi
case "${1:-}" in
  -h|--help)
    sed -n '2,/^$/p' "$0" | sed -n 's/^# \{0,1\}//p'
    exit 0
    ;;
  --all) ;;
  "")
    export OVERLAP_OPS_CUDA_SOURCES='^(?!GroupedMMSm[89]0_)|^GroupedMMSm90_(bf16_(cr|rr)|tf32_mn|probe)\.cu$|^GroupedMMSm80_bf16\.cu$'
    ;;
  *)
    names=()
    for f in "$@"; do
      names+=("$(basename "$f" | sed 's/[.]/\\./g')")
    done
    OVERLAP_OPS_CUDA_SOURCES="^($(IFS='|'; echo "${names[*]}"))\$"
    export OVERLAP_OPS_CUDA_SOURCES
    ;;
esac
tmp=$(mktemp -d /tmp/check_cuda_compile.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp -r torch_ext "$tmp/torch_ext"
rm -rf "$tmp/torch_ext/build" "$tmp"/torch_ext/overlap_ops/*.so
cp -r aten "$tmp/aten"  # a copy: ninja writes objects next to relative sources
echo "==> nvcc compile check (MAX_JOBS=${MAX_JOBS:-$(nproc)}), sources:" \
     "${OVERLAP_OPS_CUDA_SOURCES:-all}"
(cd "$tmp/torch_ext" && OVERLAP_OPS_CUDA=1 OVERLAP_OPS_ARCHS="${OVERLAP_OPS_ARCHS:-90a;80}" \
   MAX_JOBS=${MAX_JOBS:-$(nproc)} "$PYTHON" setup.py -q build_ext \
   --build-temp "$tmp/obj" --build-lib "$tmp/lib" 2>&1 \
   | tee "$tmp/build.log" \
   | grep --line-buffered -E '^\[[0-9]+/[0-9]+\]|error|Error' \
   | cut -c1-160) || true
if ! ls "$tmp"/lib/overlap_ops/_C*.so >/dev/null 2>&1; then
  echo "check_cuda_compile: FAILED (rerun without the grep to see the log)" >&2
  exit 1
fi
# ptxas C7515: a kernel's wgmma instructions are serialized (non-wgmma
# code defines accumulator registers inside the MMA pipeline). It compiles
# and runs correctly, only several percent slower on every call (1.07x
# once), so only a check like this one sees it.
if grep -q "C7515" "$tmp/build.log"; then
  grep -o "C7515.*" "$tmp/build.log" | cut -c1-400 >&2
  echo "check_cuda_compile: FAILED: ptxas serialized wgmma (C7515) above" >&2
  exit 1
fi
echo "check_cuda_compile: passed in $((SECONDS - start)) s"
