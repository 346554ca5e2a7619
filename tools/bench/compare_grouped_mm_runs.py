#!/usr/bin/env python3
"""Compares the "ours" column of two grouped-mm benchmark runs row by row.

    python3 tools/bench/compare_grouped_mm_runs.py /tmp/a/grouped_mm_results.json \
        /tmp/b/grouped_mm_results.json --labels a,b \
        --out /tmp/comparison.md

Both files are tools/bench/bench_grouped_mm.py output. Rows match on (case, dist,
dtype, pass); each row gives both times, stock's time from the first run
and the ratios first/stock and first/second; a summary gives geometric means
per dtype and pass. Rows present in one run only are listed, not dropped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

from grouped_mm_report import geomean

Key = tuple[str, str, str, str]


def _rows(path: Path) -> dict[Key, dict[str, Any]]:
    data = json.loads(path.read_text())
    return {(r["case"], r["dist"], r["dtype"], r["pass"]): r
            for r in data["rows"]}


def _time(row: Optional[dict[str, Any]], column: str) -> Optional[float]:
    value = None if row is None else row.get(f"{column}_us")
    return value if isinstance(value, (int, float)) and value > 0 else None


def _div(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or b is None else a / b


def _fmt(value: Optional[float], digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def compare(first: dict[Key, dict[str, Any]], second: dict[Key, dict[str, Any]],
            labels: tuple[str, str]) -> str:
    """Markdown: a summary per (dtype, pass), then every row."""
    a, b = labels
    keys = list(first) + [k for k in second if k not in first]
    lines = [f"| dtype | pass | rows | gm {a}/stock | gm {a}/{b} | worst {a}/{b} |",
             "|---|---|---:|---:|---:|---:|"]
    for dtype, pass_name in dict.fromkeys((k[2], k[3]) for k in keys):
        group = [k for k in keys if k[2] == dtype and k[3] == pass_name]
        vs_stock = [_div(_time(first.get(k), "ours"), _time(first.get(k), "stock"))
                    for k in group]
        vs_second = [_div(_time(first.get(k), "ours"), _time(second.get(k), "ours"))
                     for k in group]
        worst = max(((v, k) for v, k in zip(vs_second, group) if v is not None),
                    default=None)
        worst_cell = "-" if worst is None else (
            f"{worst[0]:.2f} ({worst[1][0]} {worst[1][1]})")
        lines.append(f"| {dtype} | {pass_name} | {len(group)} | "
                     f"{_fmt(geomean(vs_stock))} | {_fmt(geomean(vs_second))} | "
                     f"{worst_cell} |")
    lines += ["", f"| case | dist | dtype | pass | {a} us | {b} us | stock us | "
              f"{a}/stock | {a}/{b} |", "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for key in keys:
        ta = _time(first.get(key), "ours")
        tb = _time(second.get(key), "ours")
        ts = _time(first.get(key), "stock")
        lines.append(f"| {' | '.join(key)} | {_fmt(ta, 1)} | {_fmt(tb, 1)} | "
                     f"{_fmt(ts, 1)} | {_fmt(_div(ta, ts))} | {_fmt(_div(ta, tb))} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--labels", default="first,second",
                        help="two comma-separated column names")
    parser.add_argument("--out", type=Path, help="write here (default: stdout)")
    args = parser.parse_args(argv)
    labels = tuple(args.labels.split(","))
    if len(labels) != 2 or not all(labels):
        parser.error(f"--labels needs two names, got {args.labels!r}")
    for path in (args.first, args.second):
        if not path.is_file():
            parser.error(f"{path} does not exist")
    text = compare(_rows(args.first), _rows(args.second), labels)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
