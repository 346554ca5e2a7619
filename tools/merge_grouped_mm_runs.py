#!/usr/bin/env python3
"""Merges grouped-mm benchmark runs that each cover part of a suite into one
report, when one device call cannot time every row.

    python3 tools/merge_grouped_mm_runs.py results/tf32/part1 \
        results/tf32/part2 --out results/tf32

Each argument is a folder (or JSON file) written by tools/bench_grouped_mm.py.
Every row keeps its own run's ours/stock/floor times, so each ratio is still
measured side by side within one run; only the rows' grouping into tables and
geometric means spans runs. The runs must share GPU, torch and suite, and no
row (case, dist, dtype, pass) may appear twice. Same-run variant columns are
left out (not every run has them; they stay in the part's own report). The
header lists each part's measured peak and copy bandwidth (each row's floor
uses its own part's) and its command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import grouped_mm_report as report

# What makes two runs' "ours" the same column: the machine, torch, suite,
# our build and its forced settings.
_SAME = ("gpu", "torch", "cuda", "shapes_path", "schema", "overlap_ops",
         "ours_label", "backend_env")
_KEY = ("case", "dist", "dtype", "pass")


def _load(path: str) -> dict[str, Any]:
    file = Path(path)
    if file.is_dir():
        file = file / "grouped_mm_results.json"
    if not file.is_file():
        raise SystemExit(f"merge: no benchmark results at {file}")
    return json.loads(file.read_text())


def _without_variants(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if "@" not in k}


def merge(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One results dict with the rows of every run, in run order."""
    if len(runs) < 2:
        raise ValueError("merge: give at least two runs")
    first = runs[0]
    for index, run in enumerate(runs[1:], start=2):
        for key in _SAME:
            if run.get(key) != first.get(key):
                raise ValueError(f"merge: run {index} has {key} "
                                 f"{run.get(key)!r}, run 1 has "
                                 f"{first.get(key)!r}")
    rows, seen, group_sizes = [], {}, {}
    for index, run in enumerate(runs, start=1):
        group_sizes.update(run.get("group_sizes") or {})
        for row in run["rows"]:
            missing = [k for k in _KEY if k not in row]
            if missing:
                raise ValueError(f"merge: a row of run {index} has no "
                                 f"{', '.join(missing)}")
            key = tuple(row[k] for k in _KEY)
            if key in seen:
                raise ValueError(f"merge: row {' '.join(key)} is in run "
                                 f"{seen[key]} and run {index}")
            seen[key] = index
            rows.append(_without_variants(row))
    merged = dict(first, rows=rows, variants={}, group_sizes=group_sizes)
    merged["complete"] = all(run.get("complete", True) for run in runs)
    if not merged["complete"]:
        merged["stopped"] = "a merged part stopped early"
    merged["command"] = " ; ".join(
        f"[{run.get('timestamp', '?')}] {run.get('command', '?')}"
        for run in runs)
    # Each row's floor and timing came from its own part (a part that is
    # itself a merge brings its parts).
    merged["parts"] = [
        part for run in runs for part in (run.get("parts") or [
            {key: run.get(key) for key in
             ("timestamp", "source_commit", "floor_peak_tflops",
              "copy_gbps", "peak_tflops", "timer")}])]
    return merged


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+",
                        help="result folders or grouped_mm_results.json files")
    parser.add_argument("--out", required=True,
                        help="folder for the merged JSON, markdown and PNG")
    args = parser.parse_args(argv)
    try:
        merged = merge([_load(path) for path in args.runs])
    except ValueError as error:
        print(error, file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "grouped_mm_results.json").write_text(
        json.dumps(merged, indent=1) + "\n")
    written = report.render(merged, out)
    print(report.summary_table(merged))
    print("wrote", ", ".join(str(p) for p in [out / "grouped_mm_results.json",
                                             *written]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
