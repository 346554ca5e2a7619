#!/usr/bin/env bash
# One device-machine session: install carried wheels, build the extension
# against the machine's own torch, then run the requested stages.
#   tools/gpu_session.sh build test bench sanitize moe kernels dram ...
# saveext packs the built extension into $OUT/ext.tar.xz; carried back as
# .ext/ext.tar.xz, loadext installs it instead of build (same sources only).
# testsm80 / benchsm80 run the tests / benchmark with the SM80 path forced.
# Results go to $OUT/session.tgz (the device tool returns at most 8 files),
# or to results/tmp when OUT is unset. A second invocation in the same
# command writes session-2.tgz, and so on, so it never overwrites the
# first one's results.
# Before the device call, record the commit its sources come from, so the
# results name it (this copy has no .git; the file is git-ignored):
#   git rev-parse --short=7 HEAD > .source-commit   # carry [".whl", ".source-commit"]
# The device machine has no network: .whl (git-ignored) carries the wheels
# it lacks. Fill it on a machine with one:
#   tools/gpu_session.sh wheels
set -uo pipefail
cd "$(dirname "$0")/.."
# The wheels the device machine needs and cannot download: CUTLASS's
# headers (the build) and expecttest (torch's test utilities import it; no
# test file collects without it).
DEVICE_WHEELS=("nvidia-cutlass==4.2.0.0" "expecttest")
if [[ ${1:-} == wheels ]]; then
  python3 -m pip download --quiet --no-deps -d .whl "${DEVICE_WHEELS[@]}" \
    && ls .whl
  exit
fi
FINAL=${OUT:-results/tmp}
OUT=$(mktemp -d /tmp/gpu_session.XXXXXX)
mkdir -p "$FINAL" "$OUT/carveout" "$OUT/overlap" "$OUT/moe"
TARBALL=$FINAL/session.tgz
n=1
while [[ -e $TARBALL ]]; do
  TARBALL=$FINAL/session-$((++n)).tgz
done
trap 'tar czf "$TARBALL" -C "$OUT" .' EXIT
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
# Room for the SM80 kernels JIT-compiled from PTX on Hopper (testsm80,
# benchsm80), so later stages and processes reuse them.
export CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-4294967296}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [[ -d .whl ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  # Only where the carried wheels hold it: setup.py prefers this variable
  # to an installed nvidia-cutlass.
  if [[ -f /tmp/site/cutlass_library/source/include/cutlass/cutlass.h ]]; then
    export CUTLASS_INCLUDE_DIR=/tmp/site/cutlass_library/source/include
  fi
fi
# Say at once what is missing, before the ~5 minute build.
# (torch_ext/setup.py also finds the headers of an installed
# nvidia-cutlass.) Without expecttest no test file collects: stop then if
# a stage runs tests.
# Only a build needs the CUTLASS headers (a loadext call leaves the wheel
# out to fit the carry limit).
missing=()
[[ " $* " != *" build "* ]] \
  || [[ -f ${CUTLASS_INCLUDE_DIR:-/nonexistent}/cutlass/cutlass.h ]] \
  || python3 -c "import cutlass_library" 2>/dev/null \
  || missing+=("CUTLASS headers (nvidia-cutlass)")
python3 -c "import expecttest" 2>/dev/null || missing+=("expecttest")
if (( ${#missing[@]} )); then
  echo "gpu_session: missing here: ${missing[*]}; run 'tools/gpu_session.sh" \
    "wheels' on a machine with a network and carry .whl" >&2
  if [[ " ${missing[*]} " == *" expecttest "* && " $* " =~ \ (test|sanitize|moe|carveouttest) ]]; then
    exit 1
  fi
fi
# The image's default CXX (/opt/gcc/bin/g++) links libstdc++ statically, so a
# c10::Error thrown from the extension cannot be caught by libtorch: the
# process segfaults on the first TORCH_CHECK failure (seen 2026-11-30).
# The system compiler links libstdc++ dynamically, as torch itself does.
export CC=/usr/bin/gcc CXX=/usr/bin/g++
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,clocks.sm,clocks.mem --format=csv
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())'
echo "sources: $(cat .source-commit 2>/dev/null || echo 'unknown (no .source-commit carried)')"
# The bench records this first: the machine's copy can carry a .git whose
# HEAD is not the carried sources' commit (seen 2026-12-01: runs of
# e46512a and a0ea2a5 recorded f95a894+changes).
if [[ -s .source-commit ]]; then
  export OVERLAP_OPS_SOURCE_COMMIT=$(cat .source-commit)
fi
# profile_rows ROWS FILE ARGS...: tools/profile_grouped_mm.py ARGS on each
# row of ROWS ("case dist pass" separated by ";", from either suite), for
# each of ROW_IMPLS (default: ours then stock), appended to FILE (the
# profiler's warnings left out).
profile_rows() {
  local rows row pcase pdist ppass shapes suite impl file=$2
  IFS=';' read -ra rows <<< "$1"
  shift 2
  mkdir -p "$(dirname "$file")"
  for row in "${rows[@]}"; do
    read -r pcase pdist ppass <<< "$row"
    shapes=bench/moe_shapes.json
    for suite in bench/moe_shapes_extra.json bench/moe_shapes_tile_check.json; do
      grep -q "\"$pcase\"" "$shapes" || shapes=$suite
    done
    for impl in ${ROW_IMPLS:-ours stock}; do
      python3 tools/profile_grouped_mm.py --shapes "$shapes" --case "$pcase" \
        --dist "$pdist" --pass "$ppass" --impl "$impl" "$@" 2>&1 \
        | grep -v "Warning\|_warn_once" | tee -a "$file"
      echo | tee -a "$file"
    done
  done
}
# bench_part LABEL DIR ARGS...: tools/bench_grouped_mm.py ARGS into DIR
# with what is left of SESSION_BUDGET_S, then the tarball packed; returns
# 1 (and runs nothing) when less than 20 s are left.
bench_part() {
  local label=$1 dir=$2 left
  shift 2
  left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
  echo "$label: $left s left"
  if (( left < 20 )); then
    echo "$label: stopped, too little time"
    return 1
  fi
  mkdir -p "$dir"
  timeout "$left" python3 tools/bench_grouped_mm.py --out "$dir" "$@" 2>&1 \
    | tail -8
  tar czf "$TARBALL" -C "$OUT" .
}
for stage in "$@"; do
  # Pack what is done so far: if the device tool stops the command at its
  # time limit, the finished stages still come back.
  tar czf "$TARBALL" -C "$OUT" .
  echo "==> $stage ($SECONDS s)"
  case "$stage" in
    build)
      start=$SECONDS
      python3 -m pip install --no-build-isolation --no-deps -v ./torch_ext \
        > "$OUT/build.log" 2>&1
      rc=$?
      grep -E "error|^ *\[[0-9]+/" "$OUT/build.log" | cut -c1-300 | tail -40
      # ptxas C7515 (serialized wgmma): correct but slower on every call.
      grep -o "C7515.*" "$OUT/build.log" | cut -c1-300 | sed 's/^/WARNING /'
      echo "build rc=$rc in $((SECONDS - start)) s"
      # Each unit's compile time from ninja's log, slowest first: what
      # bounds the build (torch_ext/setup.py compiles every unit in one
      # ninja run since the nineteenth session).
      find torch_ext/build -name .ninja_log | while read -r log; do
        awk -v g="$(basename "$(dirname "$log")")" \
          '!/^#/ {printf "%7.1f s  %s  %s\n", ($2 - $1) / 1000, g, $4}' "$log"
      done | sort -rn > "$OUT/build_times.txt"
      head -4 "$OUT/build_times.txt"
      [[ $rc == 0 ]] || exit 1
      ;;
    test)
      # A hung kernel (a deadlocked pipeline) must not take the whole call.
      # -rs: the log names every skip's reason, so a skipped GPU check
      # cannot pass for a run one.
      timeout "${TEST_TIMEOUT_S:-300}" python3 -m pytest -q -rs test \
        -k "cuda or CUDA" 2>&1 | tee "$OUT/test.log" | tail -25
      ;;
    saveext)
      # The installed extension as one file, $FINAL/ext.tar.xz (~8 MB, a
      # few seconds), stamped with the sources' commit and the torch it was
      # built against. Carried back as .ext/ext.tar.xz (git-ignored), the
      # `loadext` stage installs it in place of `build` (215-250 s) while
      # the sources are unchanged: a bench-only call skips the build.
      pkg=$(python3 -c "import overlap_ops, os; print(os.path.dirname(overlap_ops.__file__))") \
        || { echo "saveext: overlap_ops is not installed"; exit 1; }
      stamp=$(mktemp -d)
      cat .source-commit > "$stamp/source-commit" 2>/dev/null \
        || echo unknown > "$stamp/source-commit"
      python3 -c "import torch; print(torch.__version__)" > "$stamp/torch-version"
      XZ_OPT="-T0 -3" tar cJf "$FINAL/ext.tar.xz" --exclude=__pycache__ \
        -C "$(dirname "$pkg")" overlap_ops -C "$stamp" source-commit torch-version
      ls -l "$FINAL/ext.tar.xz"
      ;;
    loadext)
      # Installs the extension `saveext` packed (EXT_ARCHIVE, default
      # .ext/ext.tar.xz) into /tmp/site for the later stages, only when it
      # was built from these sources (.source-commit) and this torch.
      archive=${EXT_ARCHIVE:-.ext/ext.tar.xz}
      [[ -f $archive ]] || { echo "loadext: no $archive; run build"; exit 1; }
      stamp=$(mktemp -d)
      tar xJf "$archive" -C "$stamp" source-commit torch-version \
        || { echo "loadext: $archive has no stamp; run build"; exit 1; }
      built_from="$(cat "$stamp/source-commit") on torch $(cat "$stamp/torch-version")"
      here="$(cat .source-commit 2>/dev/null || echo unknown) on torch $(python3 -c \
        'import torch; print(torch.__version__)')"
      if [[ $built_from != "$here" || $built_from == unknown* ]]; then
        echo "loadext: $archive was built from $built_from; these sources are" \
          "$here: run build"
        exit 1
      fi
      mkdir -p /tmp/site && tar xJf "$archive" -C /tmp/site overlap_ops || exit 1
      export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
      python3 -c "import overlap_ops; print('loadext: overlap_ops from', overlap_ops.__file__)" \
        || exit 1
      ;;
    testk)
      # The CUDA tests matching TEST_K (pytest -k), e.g. the changed
      # kernels' tests before the whole suite: "CUDA and (TileChunk or
      # Tf32MnB)".
      timeout "${TEST_TIMEOUT_S:-300}" python3 -m pytest -q test \
        -k "${TEST_K:?set TEST_K to a pytest -k expression}" 2>&1 \
        | tee "$OUT/test_k.log" | tail -5
      ;;
    testtiles)
      # The CUDA grouped-mm tests once per forced SM90 tile config, so every
      # config runs every case (the heuristic alone leaves some untested).
      # wide is built for 16-bit only: float32 tests keep the heuristic.
      for tile in small medium large large_solo wide; do
        echo "-- OVERLAP_OPS_SM90_TILE=$tile"
        OVERLAP_OPS_SM90_TILE=$tile python3 -m pytest -q test/test_grouped_mm_cuda.py \
          -k CUDA 2>&1 | tee "$OUT/test_tile_$tile.log" | tail -3
      done
      ;;
    testswitches)
      # The SM90 A/B switches' other settings (the defaults run in test):
      # the bias added by the finishing kernel, CUTLASS initialised on
      # every call before the fill (classic), and every kernel launched by
      # CUTLASS's run() (lean; the default, direct, launches the cluster
      # kernels without its per-launch attribute call).
      OVERLAP_OPS_SM90_BIAS=kernel python3 -m pytest -q \
        test/test_grouped_mm_cuda.py test/test_grouped_mm_autograd.py \
        -k "CUDA and bias" 2>&1 | tee "$OUT/test_bias_kernel.log" | tail -3
      for host_path in classic lean; do
        OVERLAP_OPS_SM90_HOST_PATH=$host_path python3 -m pytest -q \
          test/test_grouped_mm_cuda.py -k CUDA 2>&1 \
          | tee "$OUT/test_host_$host_path.log" | tail -3
      done
      ;;
    testtf32)
      # The float32 CUDA tests with TF32 allowed and default dispatch, so
      # Hopper's TF32 route (GroupedMMTf32Route.h) hands some calls to the
      # SM80 kernels.
      # Then with SM90 forced and the N-major weights always copied
      # (OVERLAP_OPS_SM90_TF32_MN_B=copy), so its TF32 kernels and the
      # transposing copy run every call they can, with the default short K
      # tile and again with the full one (OVERLAP_OPS_SM90_TF32_K_TILE=long).
      # Last, the N-major weights always read directly (=direct).
      # TF32_RUNS: backend:k_tile[:mn_b] runs (default: all four; mn_b
      # unset is auto).
      for run in ${TF32_RUNS:-auto:short sm90:short:copy sm90:long:copy \
          auto:short:direct}; do
        IFS=: read -r backend k_tile mn_b <<< "$run"
        echo "-- OVERLAP_OPS_GROUPED_MM_BACKEND=$backend K tile $k_tile" \
          "${mn_b:+MN B $mn_b}"
        OVERLAP_OPS_TEST_TF32=1 OVERLAP_OPS_GROUPED_MM_BACKEND=$backend \
          OVERLAP_OPS_SM90_TF32_K_TILE=$k_tile \
          OVERLAP_OPS_SM90_TF32_MN_B=${mn_b:-auto} \
          python3 -m pytest -q test/test_grouped_mm_cuda.py \
          test/test_grouped_mm_autograd.py \
          -k "cuda and (float32 or Tf32MnB)" 2>&1 \
          | tee "$OUT/test_tf32_${backend}_$k_tile${mn_b:+_$mn_b}.log" \
          | tail -15
      done
      ;;
    testall)
      python3 -m pytest -q test 2>&1 | tee "$OUT/test.log" | tail -25
      ;;
    testsm80)
      # The SM80 (CUTLASS 2.x) path forced on this GPU; on the H200 its
      # kernels are JIT-compiled from compute_80 PTX (the driver caches
      # them). The CUDA grouped-mm suites (contract tests, no-sync, graph
      # replay, carveout grid, bad offsets, MoE step) and the carveout tests
      # that go through it; test_backend_selects_kernels fails if another
      # family's GEMM ran. Then the float32 CUDA tests again with TF32
      # allowed, so they take the SM80 TF32 kernels instead of the exact
      # generic one.
      OVERLAP_OPS_GROUPED_MM_BACKEND=sm80 python3 -m pytest -q \
        test/test_grouped_mm_cuda.py test/test_grouped_mm_autograd.py \
        test/test_sm_carveout.py -k "cuda or CUDA" \
        2>&1 | tee "$OUT/test_sm80.log" | tail -25
      OVERLAP_OPS_GROUPED_MM_BACKEND=sm80 OVERLAP_OPS_TEST_TF32=1 \
        python3 -m pytest -q test/test_grouped_mm_cuda.py \
        test/test_grouped_mm_autograd.py -k "cuda and float32" \
        2>&1 | tee "$OUT/test_sm80_tf32.log" | tail -15
      ;;
    sanitize)
      # memcheck over the CUDA grouped-mm tests, once per kernel family and
      # SM90 tile config (profiler-based tests skip: CUPTI is taken).
      # SANITIZE_CONFIGS: backend:tile pairs to run (default: all).
      # A third field (short or long) sets OVERLAP_OPS_SM90_TF32_K_TILE and
      # allows TF32 for the float32 tests; a fourth sets
      # OVERLAP_OPS_SM90_TF32_MN_B (auto when unset; direct: the N-major
      # weights always read as they are; copy: always copied).
      # SANITIZE_FILES: the test files (default test/test_grouped_mm_cuda.py;
      # the column-sums kernel's tests are in test/test_grouped_mm_autograd.py).
      for backend_tile in ${SANITIZE_CONFIGS:-auto:auto auto:small auto:medium \
          auto:large auto:large_solo auto:wide sm90:auto:short:copy \
          sm90:auto:long:copy auto:auto:short:direct sm80:auto generic:auto}; do
        IFS=: read -r backend tile k_tile mn_b <<< "$backend_tile"
        log="$OUT/sanitize_${backend}_${tile}${k_tile:+_$k_tile}${mn_b:+_$mn_b}.log"
        echo "-- memcheck backend=$backend tile=$tile ${k_tile:+K tile $k_tile}" \
          "${mn_b:+MN B $mn_b}"
        OVERLAP_OPS_SM90_TF32_K_TILE=${k_tile:-auto} OVERLAP_OPS_TEST_TF32=${k_tile:+1} \
        OVERLAP_OPS_SM90_TF32_MN_B=${mn_b:-auto} \
        OVERLAP_OPS_GROUPED_MM_BACKEND=$backend OVERLAP_OPS_SM90_TILE=$tile \
          timeout 150 compute-sanitizer --tool memcheck --report-api-errors no \
          --error-exitcode 3 python3 -m pytest -q -rs \
          ${SANITIZE_FILES:-test/test_grouped_mm_cuda.py} \
          -k "CUDA and ${SANITIZE_K:-not nothing}" > "$log" 2>&1
        echo "rc=$?"; grep -E "passed|failed|ERROR SUMMARY" "$log" | tail -3
      done
      ;;
    carveout)
      python3 -m pytest -q test/test_sm_carveout.py -k "cuda or CUDA" 2>&1 \
        | tee "$OUT/carveout_test.log" | tail -15
      timeout 180 python3 tools/bench_carveout.py --out "$OUT/carveout" 2>&1 | tail -30
      timeout 90 python3 tools/bench_overlap.py --single-gpu --out "$OUT/overlap" 2>&1 | tail -20
      ;;
    overlap2)
      # Two GPUs (kind nvidia-h200-x2): GEMM + NCCL all-gather /
      # reduce-scatter, ours (overlap_ops.sm_carveout) and stock (context
      # only), NVLS off (exported above).
      left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
      echo "overlap2: $left s left; GPUs: $(nvidia-smi -L | wc -l)"
      timeout "$left" torchrun --nproc-per-node 2 tools/bench_overlap.py \
        --stock --out "$OUT/overlap" > "$OUT/overlap/overlap2.log" 2>&1
      echo "rc=$?"; tail -30 "$OUT/overlap/overlap2.log"
      ;;
    carveouttest)
      python3 -m pytest -q test/test_sm_carveout.py test/test_cu_mask.py \
        2>&1 | tee "$OUT/carveout_test.log" | tail -15
      ;;
    host)
      # Host time per call on the CUDA path, ours vs stock (no sync inside a
      # round): tells whether the smallest rows are host-bound.
      # Each shape with our direct host path (the default: cluster kernels
      # launched without CUTLASS's per-launch attribute call), lean (every
      # kernel launched by CUTLASS) and classic (CUTLASS initialised on
      # every call, before the fill).
      for host_path in direct lean classic; do
        toy=$OUT/host; granite=$OUT/host/granitemoe
        if [[ $host_path != direct ]]; then
          toy=$OUT/host/$host_path; granite=$OUT/host/${host_path}_granitemoe
        fi
        echo "-- OVERLAP_OPS_SM90_HOST_PATH=$host_path"
        OVERLAP_OPS_SM90_HOST_PATH=$host_path python3 \
          tools/bench_host_overhead.py --device cuda --dtype bf16 \
          --out "$toy" 2>&1 | tail -8
        OVERLAP_OPS_SM90_HOST_PATH=$host_path python3 \
          tools/bench_host_overhead.py --device cuda --dtype bf16 \
          --shape 32 32 1024 1024 --out "$granite" 2>&1 | tail -6
      done
      ;;
    moe)
      # MoE FFN layer, ours vs stock, eager and compiled; each (layer, impl)
      # in its own process (a stock device-side assert stays contained).
      python3 -m pytest -q test/test_grouped_mm_autograd.py -k "moe_step" 2>&1 \
        | tee "$OUT/moe/moe_test.log" | tail -15
      # The device tool kills a command at 600 s, and then nothing comes
      # back: stop the bench (its JSON is written after every row) in time
      # for the tarball. SESSION_BUDGET_S: seconds the whole script may take.
      left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
      echo "moe bench: $left s left"
      timeout "$left" python3 tools/bench_moe_layer.py --out "$OUT/moe" \
        ${MOE_ARGS:-} 2>"$OUT/moe/moe_bench.log" | tail -40
      tail -5 "$OUT/moe/moe_bench.log"
      ;;
    benchtiles)
      # A/B of the SM90 tile configs (TILES) on the rows where we trail stock.
      for tile in ${TILES:-small medium large large_solo}; do
        python3 tools/bench_grouped_mm.py --out "$OUT/tile_$tile" \
          --backend-env OVERLAP_OPS_SM90_TILE=$tile \
          --shapes ${TILE_SHAPES:-bench/moe_shapes.json} \
          --cases ${TILE_CASES:-grin_moe,deepseek_v3_decode,qwen3_decode} \
          --passes ${TILE_PASSES:-fwd,wgrad} --dtypes bf16 2>&1 | tail -12
      done
      ;;
    kernels)
      # Launches and GPU time per call of each kernel (fill, GEMMs, finish),
      # and host time per call, ours and stock, on KERNEL_ROWS ("case dist
      # pass" separated by ";"): the fill kernel's cost.
      profile_rows "${KERNEL_ROWS:-grin_moe balanced fwd;grin_moe skewed fwd;gpt_oss_120b_w13 skewed fwd;qwen3_30b_a3b_w13 balanced wgrad;granitemoe_1b_decode balanced wgrad}" \
        "$OUT/kernels/kernels.md" --calls 20 --kernels ${KERNEL_ARGS:-}
      ;;
    kernelsab)
      # The kernels stage for ours under each KERNEL_VARIANTS entry
      # label:NAME=VALUE[,NAME=VALUE], interleaved over KERNEL_ROUNDS
      # (default 4) rounds, so a per-launch difference of ~1% is read
      # against the round-to-round spread (~2% on ms-long rows). The
      # first run of this stage kept one order in every round.
      mkdir -p "$OUT/kernels"
      # Checked here: a :? inside the subshell below would only end it.
      : "${KERNEL_ROWS:?set KERNEL_ROWS, e.g. 'gpt_oss_120b_w13 balanced fwd'}"
      read -ra variants <<< "${KERNEL_VARIANTS:?set KERNEL_VARIANTS, e.g. on:OVERLAP_OPS_SM90_TF32_TOKEN_SPLIT=on}"
      for round in $(seq "${KERNEL_ROUNDS:-4}"); do
        # Every other round in reverse, so no variant always runs first.
        order=("${variants[@]}")
        if (( round % 2 == 0 )); then
          order=()
          for (( i = ${#variants[@]} - 1; i >= 0; i-- )); do
            order+=("${variants[i]}")
          done
        fi
        for variant in "${order[@]}"; do
          label=${variant%%:*}; settings=${variant#*:}
          if [[ $variant != *:* || ( -n $settings && $settings != *=* ) ]]; then
            echo "kernelsab: expected LABEL:NAME=VALUE[,NAME=VALUE] or LABEL:, got $variant"
            exit 2
          fi
          echo "## round $round $label ${settings:-(defaults)}" | tee -a "$OUT/kernels/kernelsab.md"
          IFS=, read -ra envs <<< "$settings"
          (
            (( ${#envs[@]} )) && export "${envs[@]}"
            ROW_IMPLS=ours profile_rows "$KERNEL_ROWS" \
              "$OUT/kernels/kernelsab.md" --calls 20 --kernels ${KERNEL_ARGS:-}
          )
        done
        tar czf "$TARBALL" -C "$OUT" .
      done
      ;;
    biaskernels)
      # Ours with a per-group bias (stock rejects one): each kernel's GPU
      # time per call on BIAS_ROWS, with the bias in the GEMM's epilogue
      # and with the finishing kernel adding it (OVERLAP_OPS_SM90_BIAS).
      mkdir -p "$OUT/kernels"
      for bias_path in epilogue kernel; do
        echo "## OVERLAP_OPS_SM90_BIAS=$bias_path" | tee -a "$OUT/kernels/bias.md"
        OVERLAP_OPS_SM90_BIAS=$bias_path ROW_IMPLS=ours profile_rows \
          "${BIAS_ROWS:-gpt_oss_120b_w13 balanced fwd;grin_moe balanced fwd;qwen3_30b_a3b_w13 balanced wgrad}" \
          "$OUT/kernels/bias.md" --calls 20 --kernels --bias
      done
      ;;
    hostpath)
      # CUDA API calls per call and the host time from a call's start to
      # its first kernel launch, ours and stock, on HOST_ROWS ("case dist
      # pass" separated by ";"): where host-bound rows spend it.
      # Ours three times: CUTLASS initialised after the fill and the
      # cluster kernels launched without its per-launch attribute call
      # (direct, the default), every kernel launched by CUTLASS (lean), and
      # CUTLASS initialised on every call before the fill (classic).
      mkdir -p "$OUT/hostpath"
      rows="${HOST_ROWS:-granitemoe_1b_decode balanced wgrad;grin_moe balanced fwd}"
      echo "## OVERLAP_OPS_SM90_HOST_PATH=direct" | tee -a "$OUT/hostpath/hostpath.md"
      profile_rows "$rows" "$OUT/hostpath/hostpath.md" --calls 50 --host-path
      for host_path in lean classic; do
        echo "## OVERLAP_OPS_SM90_HOST_PATH=$host_path" | tee -a "$OUT/hostpath/hostpath.md"
        OVERLAP_OPS_SM90_HOST_PATH=$host_path ROW_IMPLS=ours profile_rows \
          "$rows" "$OUT/hostpath/hostpath.md" --calls 50 --host-path
      done
      ;;
    profile)
      # ncu on one row (PROFILE_ROW: case dist pass; PROFILE_DTYPE bf16,
      # fp16 or fp32; PROFILE_SHAPES: the suite file, default the shared
      # one), ours per tile config and stock: one GEMM launch each, after
      # PROFILE_SKIP (default 4) GEMM launches. GEMM kernels are matched by
      # PROFILE_KERNELS (default: CUTLASS's device_kernel and cuBLAS's
      # sm90_xmma names, which stock's float32 loop runs). PROFILE_SECTIONS
      # adds ncu sections (e.g. "ComputeWorkloadAnalysis" for the tensor
      # pipe's utilisation).
      read -r pcase pdist ppass <<< "${PROFILE_ROW:-deepseek_v3_decode sparse fwd}"
      mkdir -p "$OUT/ncu"
      extra_sections=()
      for section in ${PROFILE_SECTIONS:-}; do
        extra_sections+=(--section "$section")
      done
      for impl in ${PROFILE_IMPLS:-ours:small ours:medium stock}; do
        tile=${impl#*:}; impl=${impl%%:*}
        [[ $tile == "$impl" ]] && tile=auto
        OVERLAP_OPS_SM90_TILE=$tile timeout 120 ncu --launch-skip ${PROFILE_SKIP:-4} \
          --launch-count 1 -k "regex:${PROFILE_KERNELS:-device_kernel|xmma_gemm}" \
          --section SpeedOfLight --section MemoryWorkloadAnalysis \
          --section LaunchStats --section Occupancy --section SchedulerStats \
          --section WarpStateStats \
          "${extra_sections[@]}" \
          --export "$OUT/ncu/${impl}_${tile}" --force-overwrite \
          python3 tools/profile_grouped_mm.py --case "$pcase" --dist "$pdist" \
          --pass "$ppass" --impl "$impl" --dtype "${PROFILE_DTYPE:-bf16}" \
          --shapes "${PROFILE_SHAPES:-bench/moe_shapes.json}" \
          > "$OUT/ncu/${impl}_${tile}.log" 2>&1
        echo "ncu $impl tile=$tile rc=$?"
        # The report as text (details) and every collected metric (raw,
        # instanced ones such as the executed instructions per opcode).
        ncu -i "$OUT/ncu/${impl}_${tile}.ncu-rep" --page details \
          > "$OUT/ncu/${impl}_${tile}.txt" 2>&1
        ncu -i "$OUT/ncu/${impl}_${tile}.ncu-rep" --page raw --csv \
          --print-metric-instances values \
          > "$OUT/ncu/${impl}_${tile}_raw.csv" 2>&1
        grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Grid Size|Block Size|Registers|Achieved Occupancy|Waves" \
          "$OUT/ncu/${impl}_${tile}.txt" | head -24
      done
      ;;
    bench)
      # Stop in time for the tarball (the JSON is written after every row).
      left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
      echo "bench: $left s left"
      timeout "$left" python3 tools/bench_grouped_mm.py --out "$OUT" ${BENCH_ARGS:-} 2>&1 | tail -60
      ;;
    power)
      # SM clock, power and time per call of each column of one row, each
      # column alone (tools/probe_power.py); POWER_ARGS picks the row and
      # variants (default: the Mixtral row whose later rounds slowed, with
      # the 2-CTA cluster config as a third column).
      left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
      echo "power: $left s left"
      timeout "$left" python3 tools/probe_power.py --out "$OUT/power" \
        ${POWER_ARGS:---case mixtral_8x7b_w2 --dist balanced --dtype bf16 \
        --pass fwd --seconds 3 --variant large:OVERLAP_OPS_SM90_TILE=large} \
        2>&1 | tail -20
      ;;
    benchpadk)
      # TF32 wgrad (2d x 2d) by the default route (SM90 through padded
      # K-major copies where 1/m + 1/n < 1/700) against the SM80 kernels
      # for every call (the same-run variant sm80k,
      # OVERLAP_OPS_SM90_TF32_PADDED_K=off). PADK_CASES narrows it.
      left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
      echo "benchpadk: $left s left"
      mkdir -p "$OUT/padk"
      timeout "$left" python3 tools/bench_grouped_mm.py --out "$OUT/padk" \
        --passes wgrad --dtypes fp32 ${PADK_CASES:+--cases $PADK_CASES} \
        --variant sm80k:OVERLAP_OPS_SM90_TF32_PADDED_K=off 2>&1 | tail -20
      ;;
    biasgrad)
      # The bias gradient's column-sums kernel against the grouped-GEMM
      # reduction it replaced, on the shared suite (tools/bench_bias_grad.py).
      left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
      echo "biasgrad: $left s left"
      mkdir -p "$OUT/bias_grad"
      timeout "$left" python3 tools/bench_bias_grad.py --out "$OUT/bias_grad" \
        ${BIAS_GRAD_ARGS:-} 2>&1 | tail -70
      ;;
    benchplan)
      # Several bench runs in one call, each into its own folder
      # $OUT/plan/<name> of the tarball (the device tool returns at most 8
      # files: a hand-made script writing each run's files next to the
      # tarball lost a sweep's JSON, nineteenth session). BENCH_PLAN:
      # "name bench-args...; name bench-args...", run in order until
      # SESSION_BUDGET_S runs out; the tarball is packed after each.
      IFS=';' read -ra runs <<< "${BENCH_PLAN:?set BENCH_PLAN}"
      for run in "${runs[@]}"; do
        read -r name args <<< "$run"
        [[ -n $name ]] || continue
        if [[ ! $name =~ ^[A-Za-z0-9_.-]+$ ]]; then
          echo "benchplan: '$name' is not a folder name"; exit 2
        fi
        # $args unquoted: the bench's own arguments, split on spaces.
        bench_part "benchplan $name" "$OUT/plan/$name" $args || break
      done
      ;;
    benchmain)
      # Every dtype and pass of the shared suite from this build, in parts
      # (each part's JSON is written after every row) into $OUT/main/<n>;
      # tools/merge_grouped_mm_runs.py joins them. MAIN_PARTS: dtypes:passes
      # per part. --pair-dtypes: bf16 and fp16 of a row share timing rounds,
      # so their ratio (issue 3's fp16 target) carries no drift between rows.
      n=0
      for part in ${MAIN_PARTS:-bf16,fp16:fwd fp32:fwd,dgrad fp32:wgrad bf16,fp16:dgrad,wgrad}; do
        n=$((n + 1))
        bench_part "benchmain part $n ($part)" "$OUT/main/$n" \
          --dtypes "${part%%:*}" --passes "${part#*:}" --pair-dtypes || break
      done
      ;;
    benchcheck)
      # The ninth session's checks (results/NOTES.md has the predictions):
      # the 16-bit tile rule's bounds on bench/moe_shapes_tile_check.json,
      # deepseek_v3_decode (64 rows per group) and the second suite's
      # deepseek_v2_lite (K, N about 2048), both configs as
      # variants, into $OUT/tilecheck; then TF32 wgrad with SM90 forced on
      # rows near the padded-K crossover (deepseek_v3_decode is past it on
      # SM90 already: a control), into $OUT/padkcheck.
      left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
      echo "benchcheck: $left s left"
      if (( left < 60 )); then
        echo "benchcheck: skipped, too little time"
        continue
      fi
      mkdir -p "$OUT/tilecheck/"{suite,decode,extra} "$OUT/padkcheck"
      tiles=(--dtypes bf16 --passes fwd,dgrad
             --variant solo:OVERLAP_OPS_SM90_TILE=large_solo
             --variant wide:OVERLAP_OPS_SM90_TILE=wide)
      timeout $(( left * 2 / 3 )) python3 tools/bench_grouped_mm.py \
        --out "$OUT/tilecheck/suite" --shapes bench/moe_shapes_tile_check.json \
        "${tiles[@]}" 2>&1 | tail -6
      left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
      timeout $(( left > 3 ? left / 3 : 1 )) python3 tools/bench_grouped_mm.py \
        --out "$OUT/tilecheck/decode" --cases deepseek_v3_decode \
        "${tiles[@]}" 2>&1 | tail -6
      left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
      timeout $(( left > 3 ? left / 3 : 1 )) python3 tools/bench_grouped_mm.py \
        --out "$OUT/tilecheck/extra" --shapes bench/moe_shapes_extra.json \
        --cases deepseek_v2_lite_w13,deepseek_v2_lite_w2 \
        "${tiles[@]}" 2>&1 | tail -6
      left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
      if (( left < 20 )); then
        echo "benchcheck: no time left for the padded-K part"
        continue
      fi
      timeout "$left" python3 tools/bench_grouped_mm.py --out "$OUT/padkcheck" \
        --dtypes fp32 --passes wgrad \
        --cases qwen3_30b_a3b_w13,qwen3_30b_a3b_w2,deepseek_v3_decode,qwen3_decode \
        --variant sm90:OVERLAP_OPS_GROUPED_MM_BACKEND=sm90 2>&1 | tail -6
      ;;
    benchextra)
      # The second suite (bench/moe_shapes_extra.json) into $OUT/extra.
      left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
      echo "benchextra: $left s left"
      mkdir -p "$OUT/extra"
      timeout "$left" python3 tools/bench_grouped_mm.py --out "$OUT/extra" \
        --shapes bench/moe_shapes_extra.json ${EXTRA_ARGS:-} 2>&1 | tail -12
      ;;
    benchsm80)
      # Forced SM80 path vs stock torch into $OUT/sm80, then the same rows
      # with default dispatch (our Hopper kernels) into $OUT/sm80/hopper, and
      # the row-by-row comparison (results/sm80/README.md reads it). An H200
      # run is not an A100 run: say so in the results.
      mkdir -p "$OUT/sm80/hopper"
      for column in sm80 hopper; do
        left=$(( ${SESSION_BUDGET_S:-560} - SECONDS ))
        echo "benchsm80 ($column): $left s left"
        out="$OUT/sm80"; env_args=(--backend-env OVERLAP_OPS_GROUPED_MM_BACKEND=sm80)
        [[ $column == hopper ]] && out="$OUT/sm80/hopper" && env_args=()
        timeout "$left" python3 tools/bench_grouped_mm.py --out "$out" \
          "${env_args[@]}" --passes fwd --dtypes bf16,fp16,fp32 \
          ${BENCH_ARGS:-} 2>&1 | tail -12
      done
      python3 tools/compare_grouped_mm_runs.py "$OUT/sm80/grouped_mm_results.json" \
        "$OUT/sm80/hopper/grouped_mm_results.json" --labels sm80,hopper \
        --out "$OUT/sm80/comparison.md" && head -6 "$OUT/sm80/comparison.md"
      ;;
    dram)
      # DRAM bytes (ncu, locked clocks) of one row (DRAM_ROW: case dist
      # pass; DRAM_DTYPE, default bf16) for each DRAM_VARIANTS entry
      # label:NAME=VALUE[,NAME=VALUE] (ours under those switches; "loop"
      # and "pergroup" as labels run those columns instead), over
      # DRAM_LAUNCHES (default 3) GEMM launches after 4, so a variable walk
      # shows as spread (the one-launch kernel read 6.8-12.2 GB for the
      # same call, twenty-first session). Compare with the model:
      # tools/wave_traffic.py. Into $OUT/dram/dram.txt. cuBLAS's kernels:
      # nvjet_* for 16-bit, sm90_xmma_gemm_* for TF32 (a TF32 loop column
      # matched nothing before both were named, twenty-fifth session).
      read -r dcase ddist dpass <<< "${DRAM_ROW:-mixtral_8x7b_w2 balanced fwd}"
      mkdir -p "$OUT/dram"
      for variant in ${DRAM_VARIANTS:-ours: dyn:OVERLAP_OPS_SM90_SCHEDULER=dynamic loop:}; do
        label=${variant%%:*}; settings=${variant#*:}
        impl=ours; kernels=device_kernel
        [[ $label == loop ]] && impl=loop && kernels="nvjet|xmma"
        [[ $label == pergroup ]] && impl=pergroup
        echo "== $dcase $ddist $dpass ${DRAM_DTYPE:-bf16} $label ${settings:-(defaults)}" \
          | tee -a "$OUT/dram/dram.txt"
        IFS=, read -ra envs <<< "$settings"
        env "${envs[@]}" timeout 120 ncu --launch-skip 4 \
          --launch-count "${DRAM_LAUNCHES:-3}" -k "regex:$kernels" \
          --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \
          python3 tools/profile_grouped_mm.py --case "$dcase" --dist "$ddist" \
          --pass "$dpass" --impl "$impl" --dtype "${DRAM_DTYPE:-bf16}" \
          --calls 8 2>&1 | grep -E "dram__|lts__|gpu__time" \
          | tee -a "$OUT/dram/dram.txt"
      done
      ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
