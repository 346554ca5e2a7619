#!/usr/bin/env python3
"""How well each Hopper tile shape would fill a benchmark row's groups:
host arithmetic on the group sizes a bench run recorded, to predict which
rows a tile config can move before a GPU run (results/NOTES.md).

    python3 tools/tile_fill.py results/grouped_mm_results.json \
        --dtype bf16 --pass fwd

For row-grouped passes (fwd, dgrad) and each tile (rows x cols), per row:
the tiles launched, "useful" (group rows / rows the tiles cover: the
padding of each group's last partial tile) and "wave" (tiles / whole waves
of --sms tiles: the persistent grid's idle last wave). Beside them, the
row's measured ours/floor, so the columns can be read against it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

# The SM90 configs' CTA tiles (GroupedMMSm90.cuh): large_solo, medium,
# wide, small. The counts assume no cluster: large's 2-CTA clusters pad
# each group to an even number of 128-row tiles, small's 1x2 clusters
# its column tiles.
DEFAULT_TILES = ((128, 256), (128, 128), (64, 256), (64, 128))


def tile_fill(group_rows: Sequence[int], n: int, tile_rows: int,
              tile_cols: int, sms: int) -> tuple[int, float, float]:
    """(tiles, useful, wave) of one row-grouped call: groups of
    group_rows rows, n output columns, on a persistent grid of sms CTAs.
    Empty groups launch no tile; a call with no rows has useful = wave = 0.
    """
    if tile_rows <= 0 or tile_cols <= 0 or sms <= 0 or n < 0:
        raise ValueError("tile sizes and sms must be > 0 and n >= 0")
    row_tiles = sum(math.ceil(m / tile_rows) for m in group_rows if m > 0)
    tiles = row_tiles * math.ceil(n / tile_cols)
    if tiles == 0:
        return 0, 0.0, 0.0
    useful = sum(m for m in group_rows if m > 0) / (row_tiles * tile_rows)
    return tiles, useful, last_wave_fill(tiles, sms)


def last_wave_fill(tiles: int, sms: int) -> float:
    """Tiles over the slots of the whole waves a persistent grid of sms CTAs
    takes for them (1.0 for no tiles)."""
    return tiles / (math.ceil(tiles / sms) * sms) if tiles else 1.0


def parse_tile(text: str) -> tuple[int, int]:
    """An output tile ROWSxCOLUMNS from the command line (argparse type)."""
    rows, sep, cols = text.partition("x")
    if not sep or not rows.isdigit() or not cols.isdigit():
        raise argparse.ArgumentTypeError(
            f"expected ROWSxCOLUMNS, e.g. 128x256, got {text!r}")
    return int(rows), int(cols)


def table(run: dict[str, Any], dtype: str, pass_: str,
          tiles: Sequence[tuple[int, int]], sms: int) -> str:
    """A markdown table over the run's rows of one dtype and pass."""
    if pass_ not in ("fwd", "dgrad"):
        raise ValueError("row-grouped passes only: fwd or dgrad")
    dtype = "tf32" if dtype == "fp32" else dtype  # the bench's label
    sizes = run.get("group_sizes")
    if not sizes:
        raise ValueError("the run records no group_sizes")
    head = ["case", "dist", "ours/floor"] + [
        f"{r}x{c} tiles / useful / wave" for r, c in tiles]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for row in run["rows"]:
        if row["dtype"] != dtype or row["pass"] != pass_:
            continue
        key = f"{row['case']}/{row['dist']}"
        if key not in sizes:
            raise ValueError(f"no group sizes for {key}")
        # dgrad's output has K columns, fwd's N.
        n = row["N"] if pass_ == "fwd" else row["K"]
        ours, floor = row.get("ours_us"), row.get("floor_us")
        ratio = f"{ours / floor:.2f}" if ours and floor else "-"
        cells = [row["case"], row["dist"], ratio]
        for r, c in tiles:
            count, useful, wave = tile_fill(sizes[key], n, r, c, sms)
            cells.append(f"{count} / {useful:.2f} / {wave:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    if len(lines) == 2:
        raise ValueError(f"no {dtype} {pass_} rows in the run")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a grouped_mm_results.json or its folder")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--pass", dest="pass_", default="fwd",
                        choices=("fwd", "dgrad"))
    parser.add_argument("--tile", dest="tiles", type=parse_tile,
                        action="append",
                        help="ROWSxCOLS, repeatable (default: 128x256, "
                             "128x128, 64x256, 64x128)")
    parser.add_argument("--sms", type=int, default=None,
                        help="persistent CTAs (default: the run's sm_count)")
    args = parser.parse_args(argv)
    path = Path(args.run)
    if path.is_dir():
        path = path / "grouped_mm_results.json"
    if not path.is_file():
        print(f"tile_fill: no benchmark results at {path}", file=sys.stderr)
        return 1
    try:
        run = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        print(f"tile_fill: {path} is not JSON: {error}", file=sys.stderr)
        return 1
    if args.sms is not None and args.sms <= 0:
        print("tile_fill: --sms must be > 0", file=sys.stderr)
        return 1
    sms = args.sms or run.get("sm_count")
    if not sms:
        print("tile_fill: the run records no sm_count; pass --sms",
              file=sys.stderr)
        return 1
    try:
        print(table(run, args.dtype, args.pass_,
                    args.tiles or DEFAULT_TILES, int(sms)))
    except ValueError as error:
        print(f"tile_fill: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
