"""DRAM bytes of a grouped GEMM's tile walk, if every wave ran in step.

A model, no GPU needed. A persistent kernel's P CTAs take output tiles in
the order of CUTLASS's group scheduler (groups one after another; in a
group, bands of `swizzle` tiles across the raster, the raster dimension
inside a band). If the CTAs stayed in step, the tiles in flight at any
moment would be one wave of P consecutive indices, each operand panel a
wave touches (a tile row of A, a tile column of B, over the group's whole
K) would come from DRAM once per wave and be shared from L2 by the wave's
other tiles, and the output would be written once. That gives the bytes
below; `--per-group` starts a new wave at every group, as one launch per
group does. Rows past a group's end are not read (TMA fills them with
zeros), so a group's last tile row reads only its real rows.

Calibration (mixtral_8x7b_w2 and _w13 balanced bf16 fwd, ncu DRAM bytes
read + written at locked clocks, results/fp16_vs_cublas): one launch per
group, w2 model 5.14 GB against 5.10 measured, w13 5.84 against 5.78; w13
in one launch 5.91 against 5.97. w2 in one launch: model 5.79 GB, measured
6.8 to 12.2 GB in different runs of the same call, the CTAs drifting apart
over 31 waves of long-K tiles (what OVERLAP_OPS_SM90_SCHEDULER=dynamic is
for). cuBLAS's per-group kernels read 4.46 GB on w2, near this model's
8-tile bands (4.56).

    python3 tools/wave_traffic.py --case mixtral_8x7b_w2
    python3 tools/wave_traffic.py --case mixtral_8x7b_w2 --per-group
    python3 tools/wave_traffic.py --case mixtral_8x7b_w2 --swizzle 8
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Iterator, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grouped_mm_cases as cases  # noqa: E402
from tile_fill import parse_tile  # noqa: E402

_H200_SMS = 132


@dataclasses.dataclass(frozen=True)
class Group:
    """One group's GEMM: (m, k) @ (k, n)."""

    m: int
    k: int
    n: int


@dataclasses.dataclass(frozen=True)
class Walk:
    """How the kernel walks the tiles."""

    tile_m: int = 128
    tile_n: int = 256
    ctas: int = _H200_SMS
    # "m": down each band of tile columns first (CUTLASS's AlongM);
    # "n": along each band of tile rows first.
    raster: str = "m"
    swizzle: int = 1
    per_group: bool = False


def pass_groups(case: cases.Case, sizes: Sequence[int],
                pass_name: str) -> list[Group]:
    """The GEMM of each group in a pass (grouped_mm_cases's table)."""
    if pass_name == "fwd":
        return [Group(s, case.K, case.N) for s in sizes]
    if pass_name == "dgrad":
        return [Group(s, case.N, case.K) for s in sizes]
    if pass_name == "wgrad":
        return [Group(case.K, s, case.N) for s in sizes]
    raise ValueError(f"pass {pass_name!r} is not one of {cases.PASSES}")


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def group_tiles(group: Group, walk: Walk) -> Iterator[tuple[int, int]]:
    """(m, n) tile coordinates of one group in the walk's order; tiles
    the swizzle rounding adds outside the group are left out (they read
    and write nothing)."""
    if group.m == 0 or group.n == 0:
        return
    tiles_m = _ceil(group.m, walk.tile_m)
    tiles_n = _ceil(group.n, walk.tile_n)
    s = walk.swizzle
    if walk.raster == "m":
        for band in range(0, _ceil(tiles_n, s) * s, s):
            for m in range(tiles_m):
                for n in range(band, band + s):
                    if n < tiles_n:
                        yield m, n
    else:
        for band in range(0, _ceil(tiles_m, s) * s, s):
            for n in range(tiles_n):
                for m in range(band, band + s):
                    if m < tiles_m:
                        yield m, n


def _waves(groups: Sequence[Group], walk: Walk
           ) -> Iterator[list[tuple[int, int, int]]]:
    """Lists of (group, m, n) tiles in flight together."""
    if walk.per_group:
        for g, group in enumerate(groups):
            tiles = [(g, m, n) for m, n in group_tiles(group, walk)]
            for start in range(0, len(tiles), walk.ctas):
                yield tiles[start:start + walk.ctas]
        return
    tiles = [(g, m, n) for g, group in enumerate(groups)
             for m, n in group_tiles(group, walk)]
    for start in range(0, len(tiles), walk.ctas):
        yield tiles[start:start + walk.ctas]


def dram_bytes(groups: Sequence[Group], walk: Walk, in_bytes: int,
               out_bytes: Optional[int] = None) -> int:
    """Bytes read and written if every wave runs in step: each operand
    panel a wave touches read once, the output written once."""
    out_bytes = in_bytes if out_bytes is None else out_bytes
    total = 0
    for wave in _waves(groups, walk):
        a_panels = {(g, m) for g, m, _ in wave}
        b_panels = {(g, n) for g, _, n in wave}
        for g, m in a_panels:
            rows = min(walk.tile_m, groups[g].m - m * walk.tile_m)
            total += rows * groups[g].k * in_bytes
        for g, n in b_panels:
            cols = min(walk.tile_n, groups[g].n - n * walk.tile_n)
            total += cols * groups[g].k * in_bytes
    total += sum(g.m * g.n for g in groups) * out_bytes
    return total


def least_bytes(groups: Sequence[Group], in_bytes: int,
                out_bytes: Optional[int] = None) -> int:
    """Every operand of a non-empty group read once, the output written
    once: the DRAM traffic no walk can beat."""
    out_bytes = in_bytes if out_bytes is None else out_bytes
    live = [g for g in groups if g.m and g.n]
    return (sum((g.m + g.n) * g.k for g in live) * in_bytes
            + sum(g.m * g.n for g in groups) * out_bytes)


def _parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=str(cases.DEFAULT_SUITE))
    parser.add_argument("--case", required=True)
    parser.add_argument("--dist", default="balanced", choices=cases.DISTS)
    parser.add_argument("--pass", dest="pass_name", default="fwd",
                        choices=cases.PASSES)
    parser.add_argument("--dtype", default="bf16", choices=tuple(cases.DTYPES))
    parser.add_argument("--tile", type=parse_tile, default=(128, 256),
                        help="output tile, ROWSxCOLUMNS (default 128x256)")
    parser.add_argument("--ctas", type=int, default=_H200_SMS,
                        help="CTAs in the persistent grid (default 132, "
                        "an H200 without carveout)")
    parser.add_argument("--raster", default="m", choices=("m", "n"))
    parser.add_argument("--swizzle", type=int, default=1,
                        choices=(1, 2, 4, 8))
    parser.add_argument("--per-group", action="store_true",
                        help="one launch per group: every group starts a "
                        "new wave")
    args = parser.parse_args(argv)
    tile_m, tile_n = args.tile
    if tile_m <= 0 or tile_n <= 0 or args.ctas <= 0:
        parser.error("--tile and --ctas must be positive")
    args.walk = Walk(tile_m, tile_n, args.ctas, args.raster, args.swizzle,
                     args.per_group)
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parse_args(argv)
    suite = cases.load_suite(args.shapes)
    case = next((c for c in suite.cases if c.name == args.case), None)
    if case is None:
        raise SystemExit(f"wave_traffic: no case {args.case!r} in "
                         f"{args.shapes}; it has "
                         + ", ".join(c.name for c in suite.cases))
    sizes = cases.group_sizes(args.dist, case.M, case.E)
    groups = pass_groups(case, sizes, args.pass_name)
    element = cases.DTYPES[args.dtype][1]
    walk_bytes = dram_bytes(groups, args.walk, element)
    least = least_bytes(groups, element)
    print(f"{case.name} {args.dist} {args.dtype} {args.pass_name}, "
          f"{args.walk.tile_m}x{args.walk.tile_n} tiles, {args.walk.ctas} "
          f"CTAs, raster {args.walk.raster}, swizzle {args.walk.swizzle}"
          f"{', one launch per group' if args.walk.per_group else ''}: "
          f"{walk_bytes / 1e9:.2f} GB in step (each operand once: "
          f"{least / 1e9:.2f} GB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
