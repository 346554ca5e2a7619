"""Problem definitions of the grouped-GEMM benchmark; no GPU needed.

A suite file (``bench/moe_shapes.json``) lists MoE forward GEMMs
a (M, K) @ w (E, K, N) and the group-size distributions to run. This module
turns a case, a distribution and a training pass into group sizes, FLOPs,
the fewest bytes the GEMM must move, and the floor of DESIGN.md
("Measuring"): max(FLOPs / dense bf16 mm peak, bytes / copy bandwidth).

Passes (all grouped along the M rows of the forward):

=====  ======================================  =======  ================
pass   call                                    layout   output
=====  ======================================  =======  ================
fwd    a (M, K) @ w (E, K, N)                  2d x 3d  (M, N)
dgrad  grad (M, N) @ w^T (E, N, K)             2d x 3d  (M, K)
wgrad  a^T (K, M) @ grad (M, N), groups on M   2d x 2d  (E, K, N)
=====  ======================================  =======  ================
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import torch

# The shared suite, as copied into this repository.
DEFAULT_SUITE = Path(__file__).resolve().parents[2] / "bench" / "moe_shapes.json"

PASSES = ("fwd", "dgrad", "wgrad")
DISTS = ("balanced", "skewed", "sparse")
# Command-line dtype name -> (label in results, element size in bytes).
# fp32 runs with TF32 allowed, so its results are labelled tf32.
DTYPES: dict[str, tuple[str, int]] = {
    "bf16": ("bf16", 2),
    "fp16": ("fp16", 2),
    "fp32": ("tf32", 4),
}
_SKEW_SEED = 0
_SKEW_POWER = 3
_SKEW_EPS = 1e-3
_SPARSE_PERIOD = 4  # group g is empty when g % 4 == 3


@dataclasses.dataclass(frozen=True)
class Case:
    """One forward GEMM of a suite: a (M, K) @ w (E, K, N)."""

    name: str
    M: int
    K: int
    N: int
    E: int


@dataclasses.dataclass(frozen=True)
class Suite:
    """A suite file: its description, distributions and cases."""

    path: str
    about: str
    dists: dict[str, str]
    cases: tuple[Case, ...]


@dataclasses.dataclass(frozen=True)
class Cost:
    """Work of one grouped GEMM: FLOPs and the fewest bytes it must move."""

    flops: int
    bytes: int


@dataclasses.dataclass(frozen=True)
class Floor:
    """Lower bound on the time of one grouped GEMM, in microseconds."""

    us: float
    compute_us: float
    memory_us: float

    @property
    def bound(self) -> str:
        """Which term sets the floor: "compute" or "memory"."""
        return "compute" if self.compute_us >= self.memory_us else "memory"


def load_suite(path: str | Path) -> Suite:
    """Reads a suite file; raises ValueError naming what is wrong."""
    data = json.loads(Path(path).read_text())
    dists = dict(data.get("dists", {}))
    unknown = sorted(set(dists) - set(DISTS))
    if unknown:
        raise ValueError(f"{path}: unknown dists {unknown}; known: {DISTS}")
    cases = []
    for entry in data.get("cases", []):
        case = Case(str(entry["name"]), int(entry["M"]), int(entry["K"]),
                    int(entry["N"]), int(entry["E"]))
        if min(case.M, case.K, case.N, case.E) <= 0:
            raise ValueError(f"{path}: case {case.name} needs M, K, N, E > 0")
        cases.append(case)
    if not cases or not dists:
        raise ValueError(f"{path}: expected non-empty 'cases' and 'dists'")
    return Suite(str(path), str(data.get("about", "")), dists, tuple(cases))


def group_sizes(dist: str, total: int, groups: int) -> list[int]:
    """Rows per group for a distribution; they sum to ``total``.

    balanced: even split, remainder to group 0.
    skewed: proportional to u**3 + 1e-3, u ~ U(0, 1) drawn in float64 from
      ``torch.Generator`` seeded 0, floored, remainder to group 0.
    sparse: groups with g % 4 == 3 empty, the rest balanced, remainder to
      the first non-empty group.
    """
    if groups <= 0 or total < 0:
        raise ValueError(f"need groups > 0 and total >= 0, got {groups}, "
                         f"{total}")
    if dist == "balanced":
        return _balanced(total, groups)
    if dist == "skewed":
        return _skewed(total, groups)
    if dist == "sparse":
        return _sparse(total, groups)
    raise ValueError(f"dist must be one of {DISTS}, got {dist!r}")


def _balanced(total: int, groups: int) -> list[int]:
    sizes = [total // groups] * groups
    sizes[0] += total - sum(sizes)
    return sizes


def _skewed(total: int, groups: int) -> list[int]:
    gen = torch.Generator().manual_seed(_SKEW_SEED)
    u = torch.rand(groups, generator=gen, dtype=torch.float64)
    weight = u ** _SKEW_POWER + _SKEW_EPS
    sizes = torch.floor(weight / weight.sum() * total).long().tolist()
    sizes[0] += total - sum(sizes)
    return sizes


def _sparse(total: int, groups: int) -> list[int]:
    live = [g for g in range(groups) if g % _SPARSE_PERIOD != 3]
    sizes = [0] * groups
    for g, size in zip(live, _balanced(total, len(live))):
        sizes[g] = size
    return sizes


def offsets(sizes: list[int]) -> list[int]:
    """Cumulative end offsets of the groups (what ``offs`` holds)."""
    ends, end = [], 0
    for size in sizes:
        end += size
        ends.append(end)
    return ends


def cost(case: Case, sizes: list[int], pass_name: str,
         elem_bytes: int) -> Cost:
    """FLOPs and fewest bytes of one pass of ``case`` with these sizes.

    FLOPs are 2 * m_g * N * K summed over the groups. Bytes count each
    operand read once and the output written once: for fwd and dgrad the
    2-D input, the output and the weights of non-empty groups; for wgrad
    a, grad and the whole (E, K, N) output (empty groups are written as
    zeros).
    """
    M, K, N, E = sum(sizes), case.K, case.N, case.E
    live = sum(1 for size in sizes if size > 0)
    flops = 2 * M * N * K
    if pass_name == "fwd":
        elems = M * K + M * N + live * K * N
    elif pass_name == "dgrad":
        elems = M * N + M * K + live * N * K
    elif pass_name == "wgrad":
        elems = M * K + M * N + E * K * N
    else:
        raise ValueError(f"pass must be one of {PASSES}, got {pass_name!r}")
    return Cost(flops, elems * elem_bytes)


def floor(work: Cost, peak_flops: float, copy_bytes_per_s: float) -> Floor:
    """max(FLOPs / peak, bytes / copy bandwidth), in microseconds."""
    if peak_flops <= 0 or copy_bytes_per_s <= 0:
        raise ValueError("peak and bandwidth must be positive")
    compute_us = work.flops / peak_flops * 1e6
    memory_us = work.bytes / copy_bytes_per_s * 1e6
    return Floor(max(compute_us, memory_us), compute_us, memory_us)


def rotation_sets(bytes_per_set: int, l2_bytes: int,
                  max_sets: int = 256) -> int:
    """Input sets to rotate through so that L2 is cold at every reuse.

    A call touching at least 2x L2 evicts its own data: one set. Smaller
    calls rotate so that at least 2x L2 of other sets' data is touched
    between two uses of the same set.
    """
    if bytes_per_set >= 2 * l2_bytes:
        return 1
    needed = 1 + math.ceil(2 * l2_bytes / max(bytes_per_set, 1))
    return min(needed, max_sets)


def case_to_dict(case: Case) -> dict[str, Any]:
    """The JSON form of a case."""
    return dataclasses.asdict(case)
