"""Grouped-GEMM benchmark: overlap_ops vs stock ``torch._grouped_mm``.

For every case x dist of a suite file (default ``bench/moe_shapes.json``),
every dtype and every pass (fwd, dgrad, wgrad; see ``grouped_mm_cases``) it
times, side by side in one run on one GPU:

- ours: ``torch.ops.overlap_ops.grouped_mm``;
- stock: ``torch._grouped_mm`` of the same torch (routing to ours is off);
- optionally (``--inductor``) a function calling ``torch._grouped_mm``
  under ``torch.compile(mode="max-autotune-no-cudagraphs")``;
- optionally (``--loop``) one cuBLAS ``torch.mm`` per group, the sizes
  read on the host before timing (``LoopColumn``), and (``--per-group``)
  ours launched once per group the same way (``PerGroupColumn``), and
  (``--routed``) ``torch._grouped_mm`` with the extension's routing on,
  as users call it (the dispatch rule may hand a call to stock's kernel);

and the floor of DESIGN.md: max(FLOPs / measured dense bf16 mm peak,
bytes / measured device-to-device copy bandwidth). Each column is checked
once per row against a float64 per-group reference before it is timed.
Times are medians of per-call CUDA-event timings after warm-up, on fresh
random data, rotating among input sets when one set would fit in 2x L2.

    python3 tools/bench/bench_grouped_mm.py --out results/tmp            # GPU
    python3 tools/bench/bench_grouped_mm.py --quick --out results/tmp    # smoke
    python3 tools/bench/bench_grouped_mm.py --passes fwd,dgrad,wgrad \\
        --dtypes bf16,fp16,fp32 --out results/tmp
    python3 tools/bench/bench_grouped_mm.py --pair-dtypes --out results/tmp
        # bf16 and fp16 of each row in the same timing rounds
    python3 tools/bench/bench_grouped_mm.py --render results/tmp         # no GPU

Writes ``grouped_mm_results.json`` (after every row, so a run cut short
keeps what it measured), ``grouped_mm_results.md`` and
``grouped_mm_results.png`` under ``--out``; progress goes to stderr and the
summary table is printed last on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import torch

# tools/ is on sys.path when this file runs as a script (and in the tests).
import grouped_mm_cases as cases
import grouped_mm_report as report

REPO = Path(__file__).resolve().parents[2]
JSON_NAME = "grouped_mm_results.json"
_TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16,
                 "fp32": torch.float32}
# Relative error bound per dtype label (per group, vs a float64 reference).
_TOLERANCE = {"bf16": 2e-2, "fp16": 5e-3, "tf32": 5e-3}
_PEAK_SIZE = 8192
_COPY_BYTES = 1 << 30
_FALLBACK_L2_BYTES = 60 << 20  # H200; used if torch does not report it
_QUICK_CASES = 2


@dataclasses.dataclass(frozen=True)
class RowSpec:
    """One measurement row: a case, a distribution, a dtype and a pass."""

    case: cases.Case
    dist: str
    dtype: str  # command-line name: bf16, fp16 or fp32
    pass_name: str
    # Inputs drawn as values of this dtype (--inputs-as), e.g. fp16 inputs
    # holding bf16 values: same kernels, fewer mantissa bits toggling.
    inputs_as: Optional[str] = None

    @property
    def label(self) -> str:
        """dtype as reported (fp32 runs as tf32)."""
        return cases.DTYPES[self.dtype][0]


@dataclasses.dataclass(frozen=True)
class Timer:
    """How each column is timed."""

    warmup_ms: float
    rep_ms: float
    min_runs: int
    max_runs: int
    # Columns are timed in this many interleaved rounds (ours, stock, ...,
    # ours, stock, ...) and each reports its median round, so a clock or
    # thermal drift during a row moves every column alike.
    rounds: int = 3
    # "balanced" (a Williams design, ``balanced_orders``): every column is
    # timed equally often in every position and right after every other
    # column. A GPU that heats up during a long compute-bound row slows its
    # late positions (mixtral rows: the last of 9 timings 10-20% slower),
    # and the column before sets the clock and heat a
    # column starts from: after stock's float16 loop (host-bound, the GPU
    # half idle) the GPU is cooler than after a CUTLASS kernel.
    # "rotate": round r starts at column r mod n: every position, but each
    # column always after the same one.
    # "fixed": the same order every round.
    order: str = "balanced"


def _csv(allowed: Sequence[str]) -> Callable[[str], list[str]]:
    """argparse type: a comma-separated subset of ``allowed``, in order."""
    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated subset of {','.join(allowed)}, "
                f"got {text!r}")
        return list(dict.fromkeys(items))
    return parse


def _names(text: str) -> list[str]:
    """argparse type: comma-separated names."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected names, got {text!r}")
    return names


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"expected an integer >= 1, got {text!r}")
    return value


def _env_pair(text: str) -> tuple[str, str]:
    """argparse type: NAME=VALUE."""
    name, sep, value = text.partition("=")
    if not sep or not name or not name.replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(
            f"expected NAME=VALUE, got {text!r}")
    return name, value


# --aa's column label: ours@again.
AA_LABEL = "again"


def _variant(text: str) -> tuple[str, dict[str, str]]:
    """argparse type: LABEL:NAME=VALUE[,NAME=VALUE...], a column of ours
    run with that environment (e.g. sm80:TORCH_GROUPED_MM_BACKEND=sm80)."""
    label, sep, rest = text.partition(":")
    if not sep or not label.replace("_", "").replace("-", "").isalnum():
        raise argparse.ArgumentTypeError(
            f"expected LABEL:NAME=VALUE[,NAME=VALUE], got {text!r}")
    pairs = [_env_pair(item) for item in rest.split(",") if item]
    if not pairs:
        raise argparse.ArgumentTypeError(f"no NAME=VALUE in {text!r}")
    return label, dict(pairs)


def _parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description="Grouped GEMM: overlap_ops vs torch._grouped_mm vs floor")
    parser.add_argument("--shapes", default=str(REPO / "bench" /
                                                "moe_shapes.json"),
                        help="suite file (default: bench/moe_shapes.json)")
    parser.add_argument("--passes", type=_csv(cases.PASSES),
                        default=["fwd"], help="fwd,dgrad,wgrad (default fwd)")
    parser.add_argument("--dtypes", type=_csv(tuple(cases.DTYPES)),
                        default=["bf16", "fp16"],
                        help="bf16,fp16,fp32 (fp32 runs as tf32)")
    parser.add_argument("--cases", type=_names, default=None,
                        help="only these case names (comma-separated)")
    parser.add_argument("--dists", type=_csv(cases.DISTS), default=None,
                        help="only these dists (default: all in the suite)")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke test: first {_QUICK_CASES} cases, "
                        "first dist")
    parser.add_argument("--inductor", action="store_true",
                        help="add torch.compile(max-autotune-no-cudagraphs) "
                        "of torch._grouped_mm as a column (slow: it "
                        "autotunes every row)")
    parser.add_argument("--loop", action="store_true",
                        help="add a column 'loop': one cuBLAS torch.mm per "
                        "group with the sizes read on the host before "
                        "timing (stock's fp16/fp32 path without its sync; "
                        "in bf16 a cuBLAS reference stock lacks)")
    parser.add_argument("--per-group", action="store_true",
                        help="add a column 'pergroup': ours launched once "
                        "per group (sizes read on the host before timing; "
                        "fwd and dgrad only)")
    parser.add_argument("--routed", action="store_true",
                        help="add a column 'routed': torch._grouped_mm with "
                        "overlap_ops routing on (switched around each "
                        "timing round, not per call), what user code that "
                        "calls torch._grouped_mm gets")
    parser.add_argument("--inputs-as", choices=tuple(cases.DTYPES),
                        default=None,
                        help="draw inputs as values of this dtype, then "
                        "cast (e.g. fp16 runs on bf16-valued data: isolates "
                        "data-dependent power from the kernel)")
    parser.add_argument("--backend-env", type=_env_pair, action="append",
                        default=[], metavar="NAME=VALUE",
                        help="set for ours before overlap_ops loads; "
                        "labels the column (repeatable)")
    parser.add_argument("--variant", type=_variant, action="append",
                        default=[], metavar="LABEL:NAME=VALUE",
                        help="an extra column ours@LABEL, ours with this "
                        "environment (read per call by the CUDA backend), "
                        "timed in the same interleaved rounds: a same-run "
                        "A/B of tile configs (repeatable)")
    parser.add_argument("--aa", action="store_true",
                        help="an A/A control: ours@again and "
                        "stock@again, ours and stock timed a second time "
                        "in the same rounds with nothing changed. "
                        "ours@again over ours is the run's own noise "
                        "band; a "
                        "variant's difference inside it is not resolved "
                        "(0.94-1.06 per row on TF32 rows of the H200). "
                        "The label 'again' is "
                        "kept for it")
    parser.add_argument("--out", default=None,
                        help="output folder (default results/tmp; with "
                        "--render, the folder rendered)")
    parser.add_argument("--render", metavar="DIR", default=None,
                        help="no GPU: re-render md/png from "
                        f"DIR/{JSON_NAME} (into --out if given, else DIR)")
    parser.add_argument("--warmup-ms", type=float, default=25.0)
    parser.add_argument("--rep-ms", type=float, default=100.0)
    parser.add_argument("--min-runs", type=int, default=20)
    parser.add_argument("--max-runs", type=int, default=2000)
    parser.add_argument("--pair-dtypes", action="store_true",
                        help="time the dtypes of one case x dist x pass in "
                        "the same interleaved rounds, so a ratio between dtypes "
                        "(fp16 vs bf16) does not carry the clock drift "
                        "between rows measured one after the other")
    parser.add_argument("--rounds", type=_positive_int, default=3,
                        help="interleaved timing rounds per column; each "
                        "round times --rep-ms / rounds (default 3; rounded "
                        "up to whole designs of --column-order)")
    parser.add_argument("--column-order",
                        choices=("balanced", "rotate", "fixed"),
                        default="balanced",
                        help="balanced: a Williams design, every column "
                        "timed equally often in every position and after "
                        "every other column (a GPU heating up during a row "
                        "slows the late ones; the column before sets the "
                        "clock a column starts from); the rounds rounded "
                        "up to a multiple of n (2n when n is odd); "
                        "rotate: each round starts one column later, each "
                        "column always after the same one (runs of "
                        "2026-11-30m); fixed: ours, stock, ... every round "
                        "(runs before 2026-11-30l, but for --pair-dtypes, "
                        "which reversed every other round then)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the random data (not of the sizes)")
    args = parser.parse_args(argv)
    if any(label == AA_LABEL for label, _ in args.variant):
        parser.error(f"--variant: the label {AA_LABEL!r} is kept for --aa "
                     "(ours again, nothing changed)")
    if args.aa:
        args.variant.append((AA_LABEL, {}))
    labels = [label for label, _ in args.variant]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        parser.error(f"--variant: label(s) given twice: {', '.join(repeated)}")
    if args.out is None:
        args.out = args.render or str(REPO / "results" / "tmp")
    return args


def _ours_label(env: Sequence[tuple[str, str]]) -> str:
    """Column label of ours: "ours", or "ours[NAME=VALUE,...]"."""
    if not env:
        return "ours"
    return "ours[" + ",".join(f"{k}={v}" for k, v in env) + "]"


def _plan(suite: cases.Suite, args: argparse.Namespace) -> list[RowSpec]:
    """Rows to run, in order: case, dist, dtype, pass."""
    chosen = list(suite.cases)
    if args.cases:
        unknown = set(args.cases) - {c.name for c in chosen}
        if unknown:
            raise SystemExit(f"--cases: unknown {sorted(unknown)}")
        chosen = [c for c in chosen if c.name in args.cases]
    dists = [d for d in suite.dists if args.dists is None or d in args.dists]
    if args.quick:
        chosen, dists = chosen[:_QUICK_CASES], dists[:1]
    return [RowSpec(case, dist, dtype, pass_name, args.inputs_as)
            for case in chosen for dist in dists
            for dtype in args.dtypes for pass_name in args.passes]


def _batches(plan: list[RowSpec], pair_dtypes: bool) -> list[list[RowSpec]]:
    """The plan's rows in the groups timed together: one row each, or
    with --pair-dtypes the dtypes of each case x dist x pass (in the plan's
    order of first appearance)."""
    if not pair_dtypes:
        return [[spec] for spec in plan]
    groups: dict[tuple[str, str, str], list[RowSpec]] = {}
    for spec in plan:
        groups.setdefault((spec.case.name, spec.dist, spec.pass_name),
                          []).append(spec)
    return list(groups.values())


# ---------------------------------------------------------------- timing


def _time_us(fns: Sequence[Callable[[], Any]], timer: Timer) -> float:
    """Median time of one call in microseconds, CUDA events per call.

    ``fns`` are the same computation on different input sets; calls
    rotate among them so L2 is cold at every reuse. The first calls are
    warm-up (module load, handles, heuristics, autotuning stay out).
    """
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    probe = max(3, len(fns))
    start, end = _event(), _event()
    start.record()
    for i in range(probe):
        fns[i % len(fns)]()
    end.record()
    end.synchronize()
    estimate_ms = max(start.elapsed_time(end) / probe, 1e-3)
    for i in range(math.ceil(timer.warmup_ms / estimate_ms)):
        fns[i % len(fns)]()
    runs = min(max(math.ceil(timer.rep_ms / estimate_ms), timer.min_runs),
               timer.max_runs)
    starts = [_event() for _ in range(runs)]
    ends = [_event() for _ in range(runs)]
    for i in range(runs):
        starts[i].record()
        fns[i % len(fns)]()
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return _median(times) * 1e3


def _event() -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=True)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return 0.5 * (ordered[mid - 1] + ordered[mid])


def _measure_peak_tflops(dtype: torch.dtype, timer: Timer) -> float:
    """Dense (8192^3) mm rate in TFLOP/s on random data."""
    n = _PEAK_SIZE
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    us = _time_us([lambda: torch.mm(a, b)], timer)
    return 2 * n ** 3 / us * 1e-6


def _measure_copy_gbps(timer: Timer) -> float:
    """Device-to-device copy bandwidth in GB/s, bytes read + written."""
    src = torch.randn(_COPY_BYTES // 4, device="cuda")
    dst = torch.empty_like(src)
    us = _time_us([lambda: dst.copy_(src)], timer)
    return 2 * _COPY_BYTES / us * 1e-3


def _measure_write_gbps(timer: Timer) -> float:
    """Device write-only bandwidth in GB/s (fill_ of a buffer as large as
    the copy's). Not part of the floor: it says how close a call that
    mostly writes its output (wgrad with few tokens per group) can get to
    a floor priced at the copy bandwidth."""
    dst = torch.empty(_COPY_BYTES // 4, device="cuda")
    us = _time_us([lambda: dst.fill_(1.0)], timer)
    return _COPY_BYTES / us * 1e-3


# ----------------------------------------------------------------- inputs


def _operands(spec: RowSpec, gen: torch.Generator
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, b) of one call of the pass, fresh standard-normal data on the
    generator's device.

    fwd: a (M, K), w (E, K, N). dgrad: grad (M, N), w^T (E, N, K) as a
    transposed view. wgrad: a^T (K, M) as a transposed view, grad (M, N).
    """
    c, dtype = spec.case, _TORCH_DTYPES[spec.dtype]

    def randn(*shape: int) -> torch.Tensor:
        if spec.inputs_as is None:
            return torch.randn(*shape, device=gen.device, dtype=dtype,
                               generator=gen)
        return torch.randn(*shape, device=gen.device,
                           dtype=_TORCH_DTYPES[spec.inputs_as],
                           generator=gen).to(dtype)

    if spec.pass_name == "fwd":
        return randn(c.M, c.K), randn(c.E, c.K, c.N)
    if spec.pass_name == "dgrad":
        return randn(c.M, c.N), randn(c.E, c.K, c.N).transpose(-2, -1)
    return randn(c.M, c.K).t(), randn(c.M, c.N)


def _reference(spec: RowSpec, a: torch.Tensor, b: torch.Tensor,
               sizes: list[int]) -> torch.Tensor:
    """The call's result in float64, computed group by group.

    fwd/dgrad: (M, N_out) rows grouped; wgrad: (E, K, N), zeros for empty
    groups.
    """
    if spec.pass_name == "wgrad":
        ref = torch.zeros(len(sizes), a.shape[0], b.shape[1],
                          device=a.device, dtype=torch.float64)
    else:
        ref = torch.zeros(a.shape[0], b.shape[-1], device=a.device,
                          dtype=torch.float64)
    start = 0
    for g, size in enumerate(sizes):
        rows = slice(start, start + size)
        start += size
        if size == 0:
            continue
        if spec.pass_name == "wgrad":
            torch.mm(a[:, rows].double(), b[rows].double(), out=ref[g])
        else:
            torch.mm(a[rows].double(), b[g].double(), out=ref[rows])
    return ref


def _group_error(spec: RowSpec, out: torch.Tensor, ref: torch.Tensor,
                 sizes: list[int]) -> float:
    """Largest per-group ||out - ref|| / ||ref||.

    An empty group must be exact zeros (wgrad): any non-zero gives inf.
    NaN or inf anywhere gives NaN, which fails every bound.
    """
    if out.shape != ref.shape or not bool(torch.isfinite(out).all()):
        return float("nan")
    diff2 = (out.double() - ref).square()
    ref2 = ref.square()
    if spec.pass_name == "wgrad":
        num, den = diff2.sum((1, 2)), ref2.sum((1, 2))
    else:
        ids = torch.repeat_interleave(
            torch.arange(len(sizes), device=out.device),
            torch.tensor(sizes, device=out.device))
        zeros = torch.zeros(len(sizes), device=out.device,
                            dtype=torch.float64)
        num = zeros.index_add(0, ids, diff2.sum(1))
        den = zeros.index_add(0, ids, ref2.sum(1))
    live = torch.tensor(sizes, device=out.device) > 0
    empty_error = torch.where(num > 0, math.inf, 0.0).double()
    rel = torch.where(live, (num / den.clamp_min(1e-300)).sqrt(),
                      empty_error)
    return float(rel.max())


# ----------------------------------------------------------------- columns


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    line = text[0] if text else type(error).__name__
    return f"{type(error).__name__}: {line}"[:300]


def _context_alive() -> bool:
    """False once the CUDA context is dead (e.g. a device-side assert)."""
    try:
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001  (any failure means the same here)
        return False


def _inductor_fn() -> Callable[..., torch.Tensor]:
    """A fresh compiled caller of torch._grouped_mm (dynamo reset first,
    so recompile limits never send a row back to eager)."""
    import torch._dynamo
    import torch._inductor.config

    torch._dynamo.reset()

    def call(a: torch.Tensor, b: torch.Tensor,
             offs: torch.Tensor) -> torch.Tensor:
        return torch._grouped_mm(a, b, offs=offs)

    compiled = torch.compile(call, mode="max-autotune-no-cudagraphs",
                             dynamic=False)
    # Inductor reports its autotuning winner only when it benchmarks, and
    # its caches skip that for shapes tuned before (another dist of the
    # case, or an earlier process). So the first call, which compiles,
    # runs without the caches, once per input shapes in this process;
    # later rows of the same shapes reuse the cache and the winner
    # recorded for them (_check_column).
    uncached = {name: False for name in ("fx_graph_cache",
                                        "autotune_local_cache")
                if hasattr(torch._inductor.config, name)}
    state = {"first": True}

    def first_uncached(a: torch.Tensor, b: torch.Tensor,
                       offs: torch.Tensor) -> torch.Tensor:
        first, state["first"] = state["first"], False
        if not first or _shape_key(a, b, offs) in _INDUCTOR_WINNERS:
            return compiled(a, b, offs)
        with torch._inductor.config.patch(uncached):
            return compiled(a, b, offs)

    return first_uncached


# Inductor's autotuning winner per input shapes, as recorded this process.
_INDUCTOR_WINNERS: dict[tuple[Any, ...], str] = {}


def _shape_key(a: Any, b: Any, offs: Any) -> Optional[tuple[Any, ...]]:
    """What Inductor's compile and autotuning cache depend on here."""
    if not all(isinstance(t, torch.Tensor) for t in (a, b, offs)):
        return None
    return (tuple(a.shape), a.stride(), tuple(b.shape), b.stride(),
            a.dtype, tuple(offs.shape), offs.dtype)


_AUTOTUNE_MARK = "Autotune Choices Stats:"


class _StderrTee:
    """Passes writes through to stderr and keeps a copy: Inductor reports
    its autotuning winner only by writing to sys.stderr."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.parts = stream, []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        # isatty, fileno, encoding, ...: the real stream's.
        return getattr(self.stream, name)


def autotune_winner(log: str) -> Optional[str]:
    """The kernel Inductor's max-autotune picked, from its "Autotune
    Choices Stats" report in ``log`` (the last one; None if absent):
    the winner's description (its tile config) when it has one."""
    lines = log.splitlines()
    for index in range(len(lines) - 2, -1, -1):
        if lines[index].strip() != _AUTOTUNE_MARK:
            continue
        try:
            stats = json.loads(lines[index + 1])
        except json.JSONDecodeError:
            continue
        name = stats.get("best_kernel")
        desc = stats.get("best_kernel_desc")
        return f"{name}: {desc}" if name and desc else name
    return None


def _ours(a: torch.Tensor, b: torch.Tensor,
          offs: torch.Tensor) -> torch.Tensor:
    return torch.ops.overlap_ops.grouped_mm(a, b, offs, None, None)


@dataclasses.dataclass(frozen=True, eq=False)
class EnvColumn:
    """ours under extra environment variables, set around a whole check
    or timing round (not per call, so the host cost stays out)."""

    env: dict[str, str]

    def __call__(self, a: torch.Tensor, b: torch.Tensor,
                 offs: torch.Tensor) -> torch.Tensor:
        return _ours(a, b, offs)


class LoopColumn:
    """One cuBLAS GEMM per group (``torch.mm``) with the group sizes read
    on the host once, at the column's check call: stock's float16 and
    float32 path without its per-call device-to-host copy. In bf16 it is
    the cuBLAS reference stock does not give, so fp16 / bf16 of the same
    library on the same shapes can be set beside ours (fp16 vs bf16).
    2d x 3d and 2d x 2d only, as the suite's passes."""

    def __init__(self) -> None:
        self._sizes: dict[int, list[int]] = {}

    def _group_sizes(self, offs: torch.Tensor) -> list[int]:
        # The bench reuses one offsets tensor per row: read it once (the
        # check call, outside the timed rounds).
        key = id(offs)
        if key not in self._sizes:
            ends = offs.tolist()
            self._sizes[key] = [e - s for s, e in zip([0] + ends, ends)]
        return self._sizes[key]

    def __call__(self, a: torch.Tensor, b: torch.Tensor,
                 offs: torch.Tensor) -> torch.Tensor:
        sizes = self._group_sizes(offs)
        if a.dim() == 2 and b.dim() == 3:  # rows grouped: (M, N)
            out = torch.empty(a.shape[0], b.shape[-1], device=a.device,
                              dtype=a.dtype)
            start = 0
            for g, size in enumerate(sizes):
                if size:
                    torch.mm(a[start:start + size], b[g],
                             out=out[start:start + size])
                start += size
            out[start:].zero_()
            return out
        if a.dim() == 2 and b.dim() == 2:  # K grouped: (G, M, N)
            out = torch.empty(len(sizes), a.shape[0], b.shape[-1],
                              device=a.device, dtype=a.dtype)
            start = 0
            for g, size in enumerate(sizes):
                # k = 0: torch.mm writes zeros.
                torch.mm(a[:, start:start + size], b[start:start + size],
                         out=out[g])
                start += size
            return out
        raise ValueError(f"loop column: {a.dim()}d x {b.dim()}d is not "
                         "a grouped layout of the suite")


class PerGroupColumn(LoopColumn):
    """Ours launched once per group on that group's rows (2d x 3d only),
    the sizes read on the host at the check call: what our kernel does
    when every group starts on an idle GPU, as each of cuBLAS's per-group
    launches does. The check call assembles the groups into one output;
    the timed calls do not (the copy would add ~2% on the Mixtral rows),
    so the time is the GEMMs' alone."""

    def __init__(self) -> None:
        super().__init__()
        self._checked = False
        self._offs: dict[int, list[torch.Tensor]] = {}

    def __call__(self, a: torch.Tensor, b: torch.Tensor,
                 offs: torch.Tensor) -> torch.Tensor:
        if not (a.dim() == 2 and b.dim() == 3):
            raise ValueError("pergroup column: rows-grouped 2d x 3d only")
        sizes = self._group_sizes(offs)
        if id(offs) not in self._offs:  # one-element offsets, made once
            self._offs[id(offs)] = [
                torch.tensor([size], device=a.device, dtype=offs.dtype)
                for size in sizes]
        outs, start = [], 0
        for g, (size, one) in enumerate(zip(sizes, self._offs[id(offs)])):
            if size:
                outs.append(_ours(a[start:start + size], b[g:g + 1], one))
            start += size
        if self._checked:
            return outs[-1]
        self._checked = True
        tail = a.new_zeros(a.shape[0] - start, b.shape[-1])
        return torch.cat(outs + [tail])


class RoutedColumn:
    """``torch._grouped_mm`` with routing on (``_column_env`` switches it
    around the column's check and timing rounds)."""

    def __call__(self, a: torch.Tensor, b: torch.Tensor,
                 offs: torch.Tensor) -> torch.Tensor:
        return torch._grouped_mm(a, b, offs=offs)


@contextlib.contextmanager
def _column_env(fn: Any) -> Iterator[None]:
    """Sets an EnvColumn's variables for the block, or a RoutedColumn's
    routing, then restores them."""
    env = fn.env if isinstance(fn, EnvColumn) else {}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    routed = None
    if isinstance(fn, RoutedColumn):
        import overlap_ops
        routed = overlap_ops.route_torch_grouped_mm(True)
    try:
        yield
    finally:
        if routed is not None:
            import overlap_ops
            overlap_ops.route_torch_grouped_mm(routed)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _callables(inductor: bool,
               variants: Sequence[tuple[str, dict[str, str]]] = (),
               loop: bool = False, per_group: bool = False,
               routed: bool = False
               ) -> dict[str, Callable[..., torch.Tensor]]:
    """Column name -> function(a, b, offs), fresh for one row. With the
    A/A variant (--aa), stock is timed twice too (stock@again), so a
    repeat of the whole comparison carries stock's own noise as well."""
    def stock(a: torch.Tensor, b: torch.Tensor,
              offs: torch.Tensor) -> torch.Tensor:
        return torch._grouped_mm(a, b, offs=offs)

    fns: dict[str, Callable[..., torch.Tensor]] = {"ours": _ours,
                                                   "stock": stock}
    for label, env in variants:
        fns[f"ours@{label}"] = EnvColumn(env)
    if any(label == AA_LABEL for label, _ in variants):
        fns[report.STOCK_AA_COLUMN] = stock
    if loop:
        fns["loop"] = LoopColumn()
    if per_group:
        fns["pergroup"] = PerGroupColumn()
    if routed:
        fns["routed"] = RoutedColumn()
    if inductor:
        fns["inductor"] = _inductor_fn()
    return fns


def _check_column(name: str, fn: Callable[..., torch.Tensor],
                  spec: RowSpec, a: torch.Tensor, b: torch.Tensor,
                  offs: torch.Tensor, sizes: list[int],
                  ref: torch.Tensor) -> dict[str, Any]:
    """Runs one column once and compares with ``ref`` (float64).

    Returns ``{name}_check`` ("pass", "fail" or "n/a"), ``{name}_rel_err``
    and ``{name}_error`` (first line of the exception, or None). Never
    raises: an unsupported dtype or layout becomes "n/a".
    """
    tee = _StderrTee(sys.stderr)
    try:
        # The first call compiles (and, for Inductor, autotunes).
        with _column_env(fn), contextlib.redirect_stderr(tee):
            out = fn(a, b, offs)
        if out.is_cuda:
            torch.cuda.synchronize()
        err = _group_error(spec, out, ref, sizes)
    except Exception as error:  # noqa: BLE001  (recorded as n/a)
        return {f"{name}_check": "n/a", f"{name}_rel_err": None,
                f"{name}_error": _first_line(error)}
    ok = err < _TOLERANCE[spec.label]  # False for NaN
    result = {f"{name}_check": "pass" if ok else "fail",
              f"{name}_rel_err": err, f"{name}_error": None}
    if name == "inductor":
        result["inductor_kernel"] = _inductor_kernel(
            "".join(tee.parts), _shape_key(a, b, offs))
    return result


def _inductor_kernel(log: str, key: Optional[tuple[Any, ...]]) -> str:
    """The kernel Inductor picked for a row from its compile's stderr, or
    the one recorded for the same input shapes when its cache answered."""
    winner = autotune_winner(log)
    if winner is not None:
        if key is not None:
            _INDUCTOR_WINNERS[key] = winner
        return winner
    known = _INDUCTOR_WINNERS.get(key) if key is not None else None
    return (f"{known} (cached: tuned on an earlier row)" if known
            else "(no autotuning report)")


def _check_and_prepare(name: str, fn: Callable[..., torch.Tensor],
                       spec: RowSpec,
                       sets: list[tuple[torch.Tensor, torch.Tensor]],
                       offs: torch.Tensor, sizes: list[int],
                       ref: torch.Tensor) -> tuple[dict[str, Any],
                                                   list[Callable[[], Any]]]:
    """Checks one column (on the first input set) and returns its result
    so far and the calls to time (none when it cannot run).

    A column that fails to run is n/a with its error; one that runs but
    gives wrong results is still timed and marked "fail".
    """
    result = _check_column(name, fn, spec, *sets[0], offs, sizes, ref)
    result[f"{name}_us"] = None
    if result[f"{name}_check"] == "n/a":
        return result, []
    return result, [lambda a=a, b=b: fn(a, b, offs) for a, b in sets]


# How each --column-order orders the rounds, for the results' timer line.
_ORDER_TEXT = {
    "balanced": ("a Williams design: every column equally often in every "
                 "position and after every other column, the rounds "
                 "rounded up to a multiple of the n columns timed together "
                 "(2n for an odd n)"),
    "rotate": ("each round starting one column later, the rounds rounded "
               "up to a multiple of the columns timed together"),
    "fixed": "the same order every round",
}


def balanced_orders(n: int) -> list[list[int]]:
    """A Williams design for n columns: n orders of range(n) (2n when n is
    odd) in which every column takes every position equally often and
    directly follows every other column equally often (n = 4: 0 1 3 2,
    1 2 0 3, 2 3 1 0, 3 0 2 1)."""
    first, low, high = [0], 1, n - 1
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    orders = [[(column + r) % n for column in first] for r in range(n)]
    if n % 2:
        orders += [order[::-1] for order in orders]
    return orders


def round_orders(keys: Sequence[Any], timer: Timer) -> list[list[Any]]:
    """The columns' order in each timing round (see ``Timer.order``), the
    rounds rounded up to whole designs."""
    keys = list(keys)
    if timer.order == "fixed" or len(keys) < 2:
        return [keys] * timer.rounds
    n = len(keys)
    if timer.order == "rotate":
        design = [list(range(r, n)) + list(range(r)) for r in range(n)]
    else:
        design = balanced_orders(n)
    count = -(-timer.rounds // len(design)) * len(design)
    return [[keys[i] for i in design[r % len(design)]] for r in range(count)]


def _time_columns(calls: dict[Any, list[Callable[[], Any]]],
                  results: dict[Any, dict[str, Any]], timer: Timer,
                  fns: Optional[dict[Any, Callable[..., torch.Tensor]]]
                  = None, names: Optional[dict[Any, str]] = None) -> None:
    """Times the columns in interleaved rounds (``round_orders``); each
    column's time is its median round (``{name}_rounds_us`` keeps all).

    The dicts share their keys: one per column, the column's name unless
    ``names`` maps a key to it (columns of several rows timed together).
    ``fns`` gives each column's environment."""
    orders = round_orders([key for key in calls if calls[key]], timer)
    per_round = dataclasses.replace(
        timer, rep_ms=timer.rep_ms / len(orders),
        min_runs=max(1, math.ceil(timer.min_runs / len(orders))))
    rounds: dict[Any, list[float]] = {key: [] for key in calls}
    for order in orders:
        for key in order:
            if not calls[key]:
                continue  # failed in an earlier round
            name = (names or {}).get(key, key)
            try:
                with _column_env((fns or {}).get(key)):
                    rounds[key].append(_time_us(calls[key], per_round))
            except Exception as error:  # noqa: BLE001  (recorded as n/a)
                results[key][f"{name}_error"] = _first_line(error)
                calls[key] = []
                rounds[key] = []
    for key, times in rounds.items():
        if times:
            name = (names or {}).get(key, key)
            results[key][f"{name}_us"] = _median(times)
            results[key][f"{name}_rounds_us"] = times


def _run_row(spec: RowSpec, fns: dict[str, Callable[..., torch.Tensor]],
             machine: dict[str, Any], timer: Timer,
             seed: int) -> dict[str, Any]:
    """All columns of one row plus its floor.

    ``machine`` holds the device, its L2 size and the measured
    ``floor_peak_tflops`` and ``copy_gbps`` (see ``_machine``). A failure
    outside the columns (out of memory making inputs or the reference)
    marks every column n/a instead of ending the run.
    """
    return _run_rows_together([spec], [fns], machine, timer, [seed])[0]


def _run_rows_together(specs: Sequence[RowSpec],
                       fns: Sequence[dict[str, Callable[..., torch.Tensor]]],
                       machine: dict[str, Any], timer: Timer,
                       seeds: Sequence[int]) -> list[dict[str, Any]]:
    """Rows (with their columns ``fns[i]`` and seeds) whose columns are
    timed in the same interleaved rounds (--pair-dtypes). As in ``_run_row``, a
    row whose inputs or reference fail is n/a alone."""
    rows, calls, results, row_fns, names = [], {}, {}, {}, {}
    for i, (spec, columns, seed) in enumerate(zip(specs, fns, seeds)):
        row, sizes, n_sets = _row_header(spec, machine)
        rows.append(row)
        try:
            row_results, row_calls = _prepare_columns(
                spec, columns, machine["device"], sizes, n_sets, seed)
        except Exception as error:  # noqa: BLE001  (recorded as n/a)
            for name in columns:
                row.update({f"{name}_check": "n/a", f"{name}_rel_err": None,
                            f"{name}_us": None, f"{name}_error":
                            "row failed: " + _first_line(error)})
            torch.cuda.empty_cache()
            continue
        for name in columns:
            key = (i, name)
            calls[key], results[key] = row_calls[name], row_results[name]
            row_fns[key], names[key] = columns[name], name
    if calls:
        _time_columns(calls, results, timer, row_fns, names)
    for (i, _), result in results.items():
        rows[i].update(result)
    for row in rows:
        for name in report.RATIOS:
            row[name] = report.ratio(row, name)
    return rows


def _row_header(spec: RowSpec, machine: dict[str, Any]
                ) -> tuple[dict[str, Any], list[int], int]:
    """A row's description and floor, its group sizes and how many input
    sets it rotates through."""
    c = spec.case
    sizes = cases.group_sizes(spec.dist, c.M, c.E)
    work = cases.cost(c, sizes, spec.pass_name, cases.DTYPES[spec.dtype][1])
    floor = cases.floor(work, machine["floor_peak_tflops"] * 1e12,
                        machine["copy_gbps"] * 1e9)
    n_sets = cases.rotation_sets(work.bytes, machine["l2_bytes"])
    row: dict[str, Any] = {
        "case": c.name, "dist": spec.dist, "dtype": spec.label,
        "pass": spec.pass_name, "M": c.M, "K": c.K, "N": c.N, "E": c.E,
        "live_groups": sum(1 for s in sizes if s > 0),
        "flops": work.flops, "bytes": work.bytes, "floor_us": floor.us,
        "compute_us": floor.compute_us, "memory_us": floor.memory_us,
        "bound": floor.bound, "input_sets": n_sets,
    }
    return row, sizes, n_sets


def _prepare_columns(spec: RowSpec,
                     fns: dict[str, Callable[..., torch.Tensor]],
                     device: str, sizes: list[int], n_sets: int, seed: int
                     ) -> tuple[dict[str, dict[str, Any]],
                                dict[str, list[Callable[[], Any]]]]:
    """Makes n_sets input sets and the reference, checks each column;
    returns each column's result so far and its calls to time."""
    gen = torch.Generator(device=device).manual_seed(seed)
    sets = [_operands(spec, gen) for _ in range(n_sets)]
    offs = torch.tensor(cases.offsets(sizes), device=device,
                        dtype=torch.int32)
    ref = _reference(spec, *sets[0], sizes)
    results: dict[str, dict[str, Any]] = {}
    calls: dict[str, list[Callable[[], Any]]] = {}
    for name, fn in fns.items():
        results[name], calls[name] = _check_and_prepare(
            name, fn, spec, sets, offs, sizes, ref)
    return results, calls


# ----------------------------------------------------------------- output


def _write_json(results: dict[str, Any], out_dir: Path) -> None:
    """Atomically (re)writes the results file."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / (JSON_NAME + ".tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    tmp.replace(out_dir / JSON_NAME)


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _row_note(row: dict[str, Any]) -> str:
    parts = []
    for name in report.COLUMNS:
        if f"{name}_check" in row:
            us = row.get(f"{name}_us")
            parts.append(f"{name} {us:.1f} us" if us is not None
                         else f"{name} n/a")
            if row[f"{name}_check"] == "fail":
                err = row[f"{name}_rel_err"]
                parts.append(f"({name} CHECK FAIL {err:.1e})")
    parts.append(f"floor {row['floor_us']:.1f} us ({row['bound']})")
    return "    " + "  ".join(parts)


def _machine(dtypes: list[str], timer: Timer) -> dict[str, Any]:
    """GPU description, L2 size, measured peaks and copy bandwidth."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    _progress("measuring dense mm peaks and copy bandwidth ...")
    peaks = {cases.DTYPES[d][0]: _measure_peak_tflops(_TORCH_DTYPES[d],
                                                      timer)
             for d in dict.fromkeys(["bf16"] + dtypes)}
    return {
        "device": "cuda",
        "gpu": props.name,
        # Which card: fp16 over bf16 on the same rows moved from up to
        # 1.10 to at most 1.04 between two machines (2026-12-02).
        "gpu_uuid": str(getattr(props, "uuid", "unknown")),
        "sm_count": props.multi_processor_count,
        "l2_bytes": int(getattr(props, "L2_cache_size", 0)
                        or _FALLBACK_L2_BYTES),
        "peak_tflops": peaks,
        "floor_peak_tflops": peaks["bf16"],
        "floor_peak_note": "dense bf16 mm peak, used for every dtype",
        "copy_gbps": _measure_copy_gbps(timer),
        "write_gbps": _measure_write_gbps(timer),
    }


def _peak_again(timer: Timer) -> float:
    """The dense bf16 mm peak measured after the last row. The floor's is
    measured before the first, often on a GPU that idled and boosts; the
    two show how far the clock moved during the run (the floor keeps the
    first)."""
    _progress("measuring the dense bf16 mm peak again ...")
    return _measure_peak_tflops(torch.bfloat16, timer)


def _portable_command(argv: list[str], out: str | Path) -> str:
    """The command line as a reader can rerun it: `python3`, the script
    relative to the repository, and the output folder as `$OUT`."""
    script = os.path.relpath(os.path.abspath(argv[0]), REPO)
    rest = ["$OUT" if arg == str(out) else arg for arg in argv[1:]]
    return shlex.join(["python3", script] + rest).replace("'$OUT'", "$OUT")


def _import_ours(env: Sequence[tuple[str, str]]) -> str:
    """Sets the backend environment, then loads overlap_ops with routing
    of torch._grouped_mm off (so the stock column is stock); returns the
    overlap_ops version."""
    for name, value in env:
        os.environ[name] = value
    import overlap_ops

    overlap_ops.route_torch_grouped_mm(False)
    return str(getattr(overlap_ops, "__version__", "?"))


def _bench(args: argparse.Namespace) -> int:
    """Runs the benchmark; returns the exit status."""
    if not torch.cuda.is_available():
        raise SystemExit("bench_grouped_mm: needs a CUDA GPU (use --render "
                         "to re-render results without one)")
    suite = cases.load_suite(args.shapes)
    plan = _plan(suite, args)
    ours_version = _import_ours(args.backend_env)
    if "fp32" in args.dtypes:
        torch.backends.cuda.matmul.allow_tf32 = True
    timer = Timer(args.warmup_ms, args.rep_ms, args.min_runs, args.max_runs,
                  args.rounds, args.column_order)
    out_dir = Path(args.out)
    results: dict[str, Any] = {
        "schema": 1,
        "complete": False,
        "command": _portable_command(sys.argv, args.out),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "overlap_ops": ours_version,
        "shapes_path": os.path.relpath(args.shapes, REPO),
        "shapes_about": suite.about,
        "dists": suite.dists,
        "ours_label": _ours_label(args.backend_env),
        "backend_env": dict(args.backend_env),
        "variants": {f"ours@{label}": env for label, env in args.variant},
        "timer": (f"median of interleaved rounds, {timer.rounds} asked "
                  "(ours, stock, ... per round; " + _ORDER_TEXT[timer.order]
                  + "); each round the median of "
                  f"per-call CUDA events, >= {timer.min_runs} runs / "
                  f"{timer.rep_ms:.0f} ms in all, after a "
                  f"{timer.warmup_ms:.0f} ms warm-up in every round; "
                  "inputs rotated when a set is < 2x L2"),
        "tolerance": _TOLERANCE,
        "group_sizes": {},
        "rows": [],
    }
    results.update(_machine(args.dtypes, timer))
    if args.pair_dtypes:
        results["timer"] += ("; the dtypes of a case x dist x pass in the "
                             "same rounds")
    status = 0
    done = 0
    for batch in _batches(plan, args.pair_dtypes):
        for offset, spec in enumerate(batch, done + 1):
            _progress(f"[{offset}/{len(plan)}] {spec.case.name} {spec.dist} "
                      f"{spec.label} {spec.pass_name} ...")
        rows = _run_rows_together(
            batch, [_callables(args.inductor, args.variant, args.loop,
                               args.per_group, args.routed) for _ in batch],
            results, timer,
            [args.seed + done + j for j in range(1, len(batch) + 1)])
        done += len(batch)
        for spec, row in zip(batch, rows):
            results["rows"].append(row)
            results["group_sizes"][f"{spec.case.name}/{spec.dist}"] = \
                cases.group_sizes(spec.dist, spec.case.M, spec.case.E)
            _progress(_row_note(row))
        _write_json(results, out_dir)
        if not _context_alive():
            spec = batch[-1]
            results["stopped"] = (f"CUDA context lost at row {done} "
                                  f"({spec.case.name} {spec.dist} "
                                  f"{spec.label} {spec.pass_name})")
            status = 1
            break
    else:
        results["complete"] = True
    if status == 0:
        results["bf16_peak_tflops_end"] = _peak_again(timer)
    _write_json(results, out_dir)
    if len(report.render(results, out_dir)) < 2:
        _progress("no matplotlib here: PNG skipped (draw it with --render)")
    ours_columns = ("ours",) + report.variant_columns(results["rows"])
    failed = [f"{r['case']} {r['dist']} {r['dtype']} {r['pass']} {column}"
              for r in results["rows"] for column in ours_columns
              if r.get(f"{column}_check") == "fail"]
    if failed:
        _progress(f"ours failed the check {len(failed)} time(s) "
                  "(row, column): "
                  + "; ".join(failed))
        status = 1
    print(report.summary_table(results))
    return status


def _render(args: argparse.Namespace) -> int:
    """Re-renders md/png from an existing results file; no GPU."""
    source = Path(args.render)
    results = json.loads((source / JSON_NAME).read_text())
    for path in report.render(results, Path(args.out)):
        _progress(f"wrote {path}")
    print(report.summary_table(results))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point; returns the exit status."""
    args = _parse_args(argv)
    if args.render is not None:
        return _render(args)
    return _bench(args)


if __name__ == "__main__":
    sys.exit(main())
