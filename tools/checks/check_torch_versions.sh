#!/usr/bin/env bash
# Builds the extension CPU-only against other torch releases and runs the
# CPU test suite with each: the "torch 2.11 to 2.14" promise, checked
# without a GPU. Each version gets its own virtual environment (reused on
# a second run) and its own clone of this checkout's HEAD, so build
# folders never mix and uncommitted edits are not tested by accident.
#
#   tools/checks/check_torch_versions.sh 2.12.0 2.13.0
#   VENV_ROOT=~/venvs tools/checks/check_torch_versions.sh 2.11.0
#
# Needs a network (torch from the package registry, ~0.5 GB a version plus
# its CUDA libraries) and ~2.5 minutes a version to build on 2 cores. GPU
# tests skip; the CUDA sources are compile-checked with
#   PYTHON=<venv>/bin/python tools/checks/check_cuda_compile.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
if (( $# == 0 )); then
  echo "usage: $0 TORCH_VERSION..." >&2
  exit 2
fi
root=${VENV_ROOT:-/tmp}
repo=$PWD
results=()
for version in "$@"; do
  venv=$root/overlap-ops-torch-$version
  work=$(mktemp -d /tmp/overlap-ops-torch-$version.XXXXXX)
  log=$work/log
  start=$SECONDS
  echo "==> torch $version: environment $venv (log $log)"
  if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv" || { results+=("$version: no venv"); continue; }
  fi
  # torch first, then what torch_ext/pyproject.toml declares for building
  # and testing (the same list build.sh installs).
  if ! { "$venv/bin/python" -m pip install -q "torch==$version" &&
         reqs=$("$venv/bin/python" torch_ext/build_requirements.py \
           --unmet build test) &&
         { [[ -z $reqs ]] || "$venv/bin/python" -m pip install -q $reqs; }; } \
      > "$log" 2>&1; then
    tail -3 "$log"
    results+=("$version: torch did not install (log $log)")
    continue
  fi
  echo "==> torch $version: building the extension (CPU only)"
  git clone -q "$repo" "$work/src"
  if ! (cd "$work/src" && OVERLAP_OPS_CUDA=0 "$venv/bin/python" -m pip install \
      -q --no-build-isolation --no-deps ./torch_ext) >> "$log" 2>&1; then
    grep -m3 -i "error" "$log"
    results+=("$version: build failed (log $log)")
    continue
  fi
  echo "==> torch $version: CPU tests"
  # From outside the clone, so the tests import the installed package.
  summary=$(cd /tmp && "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    "$work/src/test" 2>&1 | tee -a "$log" | tail -1)
  echo "    $summary"
  results+=("$version: $summary ($((SECONDS - start)) s)")
done
echo "==> summary"
failed=0
for line in "${results[@]}"; do
  echo "    torch $line"
  [[ $line == *" passed"* && $line != *failed* && $line != *error* ]] || failed=1
done
exit $failed
