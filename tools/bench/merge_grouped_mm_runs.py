#!/usr/bin/env python3
"""Merges grouped-mm benchmark runs that each cover part of a suite into one
report, when one device call cannot time every row.

    python3 tools/bench/merge_grouped_mm_runs.py /tmp/part1 /tmp/part2 --out /tmp/all


Each argument is a folder (or JSON file) written by tools/bench/bench_grouped_mm.py.
Every row keeps its own run's ours/stock/floor times, so each ratio is still
measured side by side within one run; only the rows' grouping into tables and
geometric means spans runs. The runs must share GPU, torch and suite, and no
row (case, dist, dtype, pass) may appear twice. A same-run variant column
stays where every run has it with the same settings (the A/A control of
`--aa`, ours@again and stock@again, so the merged report keeps its noise
band and the repeat of each ratio); any other is left out (it stays in
its part's own report). The
header lists each part's measured peak and copy bandwidth (each row's floor
uses its own part's) and its command line.

A run given as PATH@VARIANT takes that run's same-run variant column as its
"ours" (for a part whose variant is the build's new default); the part's
line in the header says so, with the variant's settings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

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


def shared_variants(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The variant columns every run has, with the same settings."""
    first = runs[0].get("variants") or {}
    return {name: env for name, env in first.items()
            if all((run.get("variants") or {}).get(name) == env
                   for run in runs[1:])}


def _with_stock_aa(columns: Iterable[str]) -> set[str]:
    """columns, and --aa's second stock column where its ours@again is
    among them."""
    names = set(columns)
    if report.AA_COLUMN in names:
        names.add(report.STOCK_AA_COLUMN)
    return names


def _only_variants(row: dict[str, Any], kept: set[str],
                   known: set[str]) -> dict[str, Any]:
    """row without the fields of variant columns not in `kept`. A field
    belongs to the longest of the `known` columns it starts with, since a
    label may hold "_" itself (ours@large_solo_us is not ours@large's)."""
    def column(key: str) -> str:
        return max((c for c in known if key.startswith(c + "_")),
                   key=len, default="")
    return {k: v for k, v in row.items()
            if "@" not in k or column(k) in kept}


def promote_variant(run: dict[str, Any], name: str) -> dict[str, Any]:
    """A copy of run whose ours column is its variant `name` (the times,
    checks and errors of `ours@name`, and the ratios recomputed)."""
    column = f"ours@{name}"
    if column not in (run.get("variants") or {}):
        known = ", ".join(v.split("@", 1)[1] for v in run.get("variants") or {})
        raise ValueError(f"merge: no variant {name!r} in the run "
                         f"(it has: {known or 'none'})")
    ours_ratios = [r for r in report.RATIOS if r.startswith("ours/")]
    rows = []
    for row in run["rows"]:
        # Nothing of the default column survives: fields the variant lacks
        # (a failed variant has no time) stay absent.
        row = {k: v for k, v in row.items()
               if not k.startswith("ours_") and k not in ours_ratios}
        prefix = f"{column}_"
        for key, value in list(row.items()):
            if key.startswith(prefix):
                row["ours_" + key[len(prefix):]] = value
        for ratio_name in ours_ratios:
            value = report.ratio(row, ratio_name)
            if value is not None:
                row[ratio_name] = value
        rows.append(row)
    settings = ",".join(f"{k}={v}" for k, v in run["variants"][column].items())
    ours_from = f"variant {name} ({settings})"
    # The promoted column is ours now, not a variant beside it.
    variants = {k: v for k, v in run["variants"].items() if k != column}
    promoted = dict(run, rows=rows, ours_from=ours_from, variants=variants)
    if run.get("parts"):  # a merged run: each of its parts says so
        promoted["parts"] = [dict(part, ours_from=ours_from)
                             for part in run["parts"]]
    return promoted


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
    kept = shared_variants(runs)
    kept_columns = _with_stock_aa(kept)
    known = _with_stock_aa(name for run in runs
                           for name in run.get("variants") or {})
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
            rows.append(_only_variants(row, kept_columns, known))
    merged = dict(first, rows=rows, variants=kept, group_sizes=group_sizes)
    merged["complete"] = all(run.get("complete", True) for run in runs)
    if not merged["complete"]:
        merged["stopped"] = "a merged part stopped early"
    merged["command"] = " ; ".join(
        (f"[{run['timestamp']}] " if run.get("timestamp") else "")
        + str(run.get("command", "?"))
        for run in runs)
    # Each row's floor and timing came from its own part (a part that is
    # itself a merge brings its parts).
    merged["parts"] = [
        part for run in runs for part in (run.get("parts") or [
            {key: run.get(key) for key in
             ("timestamp", "source_commit", "floor_peak_tflops",
              "copy_gbps", "write_gbps", "peak_tflops",
              "bf16_peak_tflops_end", "timer", "ours_from")
             if run.get(key) is not None}])]
    return merged


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+",
                        help="result folders or grouped_mm_results.json "
                        "files; PATH@VARIANT takes that variant as ours")
    parser.add_argument("--out", required=True,
                        help="folder for the merged JSON, markdown and PNG")
    args = parser.parse_args(argv)
    try:
        runs = []
        for arg in args.runs:
            path, sep, variant = arg.rpartition("@")
            if not sep or "/" in variant:  # an "@" inside the path
                path, variant = arg, ""
            run = _load(path)
            runs.append(promote_variant(run, variant) if variant else run)
        merged = merge(runs)
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
