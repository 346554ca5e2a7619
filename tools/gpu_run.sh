#!/usr/bin/env bash
# Runs stages on a GPU machine and packs their logs and results into
# $OUT/gpu_run.tgz (or results/tmp/gpu_run.tgz without OUT):
#   tools/gpu_run.sh build test sanitize bench carveout moe
# A machine without a network needs the wheels it lacks in .whl/ (git
# ignored); fill it where there is one with `tools/gpu_run.sh wheels`.
# Stages:
#   build     pip-installs the extension (CUDA kernels) against this torch
#   saveext   packs the installed extension into $OUT/ext.tgz; carried back
#             as .ext/ext.tgz, `loadext` installs it instead of `build`
#             (same sources and torch only: the caller's responsibility)
#   test      every test file (CPU and CUDA tests; TEST_K narrows them as
#             pytest -k does, e.g. TEST_K="cuda or CUDA"; TEST_FILES picks
#             the files)
#   sanitize  compute-sanitizer memcheck over the CUDA grouped-mm tests,
#             once per backend (SANITIZE_BACKENDS, default "auto sm80 generic")
#   bench     tools/bench/bench_grouped_mm.py $BENCH_ARGS
#   carveout  carveout tests, the carveout and single-GPU overlap benches
#   proxy     the single-GPU overlap proxy alone (bench_overlap --single-gpu)
#   moe       MoE-layer tests and tools/bench/bench_moe_layer.py $MOE_ARGS
#   host      host time per call (tools/bench/bench_host_overhead.py), on a
#             tiny shape and a launch-bound one
#   ncu       Nsight Compute on one GEMM launch per NCU_ROWS entry, each
#             "shapes-file:case:dist:pass:impl" (profile_grouped_mm.py);
#             one text report per row under ncu/
#   buildsh   ./build.sh as a user runs it: this machine's default compiler
#             (CC/CXX unset), CPU-only so that it fits (OVERLAP_OPS_CUDA=0),
#             installed into a throwaway folder; its log is buildsh.log
# BUDGET_S bounds the whole run (default 560 s, under the device tool's
# 600 s limit) so the tarball is always written.
set -uo pipefail
cd "$(dirname "$0")/.."
DEVICE_WHEELS=("nvidia-cutlass==4.2.0.0" "expecttest")
if [[ ${1:-} == wheels ]]; then
  python3 -m pip download --quiet --no-deps -d .whl "${DEVICE_WHEELS[@]}"
  ls .whl
  exit
fi
FINAL=${OUT:-results/tmp}
WORK=$(mktemp -d /tmp/gpu_run.XXXXXX)
mkdir -p "$FINAL"
TARBALL=$FINAL/gpu_run.tgz
pack() { tar czf "$TARBALL" -C "$WORK" .; }
trap pack EXIT
left() { echo $(( ${BUDGET_S:-560} - SECONDS )); }
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-$(nproc)}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
if [[ -d .whl ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  if [[ -f /tmp/site/cutlass_library/source/include/cutlass/cutlass.h ]]; then
    export CUTLASS_INCLUDE_DIR=/tmp/site/cutlass_library/source/include
  fi
fi
# Build with the system compiler: an extension built by a compiler whose C++
# runtime differs from torch's cannot throw exceptions into it.
export CC=/usr/bin/gcc CXX=/usr/bin/g++
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv
python3 -c 'import torch; print("torch", torch.__version__)'

for stage in "$@"; do
  pack
  echo "==> $stage ($SECONDS s, $(left) s left)"
  case "$stage" in
    build)
      python3 -m pip install --no-build-isolation --no-deps -v ./torch_ext \
        > "$WORK/build.log" 2>&1
      rc=$?
      grep -E "error|^ *\[[0-9]+/" "$WORK/build.log" | cut -c1-300 | tail -30
      # ptxas C7515 (serialized wgmma) is correct but slow on every call.
      grep -o "C7515.*" "$WORK/build.log" | cut -c1-300 | sed 's/^/WARNING /'
      echo "build rc=$rc in $SECONDS s"
      [[ $rc == 0 ]] || exit 1
      ;;
    saveext)
      pkg=$(python3 -c "import overlap_ops, os; print(os.path.dirname(overlap_ops.__file__))") || exit 1
      tar czf "$FINAL/ext.tgz" --exclude=__pycache__ -C "$(dirname "$pkg")" overlap_ops
      ls -l "$FINAL/ext.tgz"
      ;;
    loadext)
      mkdir -p /tmp/site && tar xzf .ext/ext.tgz -C /tmp/site || exit 1
      export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
      python3 -c "import overlap_ops; print('loaded', overlap_ops.__file__)" || exit 1
      ;;
    test)
      python3 -c "import overlap_ops, sys; print('overlap_ops from', overlap_ops.__file__)" || exit 1
      # -rs names every skip, so a skipped GPU check cannot pass for a run.
      timeout "$(left)" python3 -m pytest -q -rs ${TEST_FILES:-test} -k "${TEST_K:-not nothing}" 2>&1 \
        | tee "$WORK/test.log" | tail -30
      ;;
    sanitize)
      for backend in ${SANITIZE_BACKENDS:-auto sm80 generic}; do
        log=$WORK/sanitize_$backend.log
        TORCH_GROUPED_MM_BACKEND=$backend timeout 150 \
          compute-sanitizer --tool memcheck --report-api-errors no \
          --error-exitcode 3 python3 -m pytest -q -rs \
          ${SANITIZE_FILES:-test/test_grouped_mm_cuda.py test/test_grouped_mm_sm90.py test/test_extension_grouped_mm_cuda.py} \
          -k "CUDA and ${SANITIZE_K:-not nothing}" > "$log" 2>&1
        echo "memcheck $backend rc=$?"
        grep -E "passed|failed|ERROR SUMMARY" "$log" | tail -3
      done
      ;;
    bench)
      mkdir -p "$WORK/bench"
      timeout "$(left)" python3 tools/bench/bench_grouped_mm.py \
        --out "$WORK/bench" ${BENCH_ARGS:-} 2>&1 | tail -40
      ;;
    carveout)
      mkdir -p "$WORK/carveout"
      python3 -m pytest -q -rs test/test_sm_carveout.py \
        test/test_extension_carveout.py 2>&1 \
        | tee "$WORK/carveout/test.log" | tail -10
      timeout 180 python3 tools/bench/bench_carveout.py \
        --out "$WORK/carveout" 2>&1 | tail -20
      timeout 90 python3 tools/bench/bench_overlap.py --single-gpu \
        --out "$WORK/carveout" 2>&1 | tail -20
      ;;
    proxy)
      mkdir -p "$WORK/carveout"
      timeout 120 python3 tools/bench/bench_overlap.py --single-gpu \
        --out "$WORK/carveout" 2>&1 | tail -25
      ;;
    moe)
      mkdir -p "$WORK/moe"
      python3 -m pytest -q -rs test/test_moe_layer.py 2>&1 \
        | tee "$WORK/moe/test.log" | tail -10
      timeout "$(left)" python3 tools/bench/bench_moe_layer.py \
        --out "$WORK/moe" ${MOE_ARGS:-} 2>&1 | tail -30
      ;;
    host)
      mkdir -p "$WORK/host"
      for shape in "4 16 32 16" "4 512 1024 1024"; do
        # shellcheck disable=SC2086  # the shape is four words on purpose
        timeout 60 python3 tools/bench/bench_host_overhead.py --device cuda \
          --dtype bf16 --shape $shape --out "$WORK/host/${shape// /x}" \
          2>&1 | tail -9
      done
      ;;
    ncu)
      mkdir -p "$WORK/ncu"
      for row in ${NCU_ROWS:-}; do
        IFS=: read -r shapes case dist pass impl <<< "$row"
        log=$WORK/ncu/${case}_${dist}_${pass}_$impl.txt
        # The GEMM kernels only (CUTLASS's device_kernel, cuBLAS's nvjet);
        # the skip passes over the warm-up calls.
        timeout 120 ncu --launch-skip 2 --launch-count 1 \
          -k "regex:device_kernel|nvjet|xmma" \
          --section SpeedOfLight --section LaunchStats \
          --section Occupancy --section MemoryWorkloadAnalysis \
          --section WarpStateStats --section SchedulerStats \
          python3 tools/bench/profile_grouped_mm.py --shapes "bench/$shapes" \
          --case "$case" --dist "$dist" --pass "$pass" --impl "$impl" \
          > "$log" 2>&1
        echo "ncu $row rc=$?"
        grep -E "device_kernel|nvjet|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Registers Per|Grid Size|Cluster Size|Achieved Occupancy" \
          "$log" | cut -c1-160 | head -12
      done
      ;;
    buildsh)
      # The extension goes to a throwaway folder, so that later stages keep
      # the one `build` or `loadext` installed.
      (unset CC CXX
       # build.sh's own checks must import this build, not the other one.
       export OVERLAP_OPS_CUDA=0 PIP_TARGET=/tmp/buildsh-site PIP_UPGRADE=1
       export PYTHONPATH=/tmp/buildsh-site${PYTHONPATH:+:$PYTHONPATH}
       timeout "$(left)" ./build.sh > "$WORK/buildsh.log" 2>&1
       echo "build.sh rc=$?" >> "$WORK/buildsh.log")
      grep -E "^==>|^build.sh|error check" "$WORK/buildsh.log" | tail -15
      ;;
    *)
      echo "gpu_run: unknown stage $stage" >&2
      exit 2
      ;;
  esac
done
