#!/usr/bin/env python3
"""TFLOP/s of the suite's GEMMs under an SM carveout, ours vs stock.

For every case of the shapes file (bench/moe_shapes.json: a (M, K) @ w (E, K,
N) MoE layer), times:

* the dense GEMMs of a training step on the whole token batch:
  fwd (M, K) @ (K, N), dgrad (M, N) @ (N, K), wgrad (K, M) @ (M, N), the
  last two in the transposed layouts autograd hands to ``mm``;
* the grouped forward (sum M, K) @ (E, K, N) with device offsets.

at k = 0, 8, 16, 24, 32, 48, 66, for

* ours: inside ``overlap_ops.sm_carveout(k)`` (dense: the carveout-aware
  cuBLAS path; grouped: ``torch.ops.overlap_ops.grouped_mm``);
* stock: ``torch._C._set_sm_carveout_experimental(k)`` only (dense:
  ``torch.mm`` as PyTorch ships it; grouped: stock ``torch._grouped_mm``).

Median of CUDA-event timings over fresh random data, L2 flushed before each
timed call. Writes carveout.json, carveout.md and carveout.png to --out and
prints a short table (geometric means per k) last.

    python tools/bench/bench_carveout.py --out /tmp/carveout
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Callable, Optional

import torch

from grouped_mm_cases import DEFAULT_SUITE

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CARVEOUTS = (0, 8, 16, 24, 32, 48, 66)
DENSE_GEMMS = ("fwd", "dgrad", "wgrad")
L2_FLUSH_BYTES = 256 * 1024 * 1024  # > 5x the H200's 50 MiB L2


@dataclasses.dataclass
class Row:
    """One measurement: a GEMM of a case, at carveout k, for one impl."""

    case: str
    gemm: str  # fwd | dgrad | wgrad | grouped
    impl: str  # ours | stock
    k: int
    m: int
    n: int
    kdim: int
    ms: Optional[float]  # median milliseconds; None when it could not run
    tflops: Optional[float]
    note: str = ""


def _parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", type=Path, default=DEFAULT_SUITE,
                   help="suite file (default: bench/moe_shapes.json)")
    p.add_argument("--out", type=Path, default=REPO / "results" / "carveout",
                   help="output folder for JSON, markdown and PNG")
    p.add_argument("--carveouts", default=",".join(map(str, DEFAULT_CARVEOUTS)),
                   help="comma-separated k values (0 = no carveout)")
    p.add_argument("--cases", default="",
                   help="comma-separated case names (default: all)")
    p.add_argument("--gemms", default="fwd,dgrad,wgrad,grouped",
                   help="which GEMMs: fwd, dgrad, wgrad, grouped")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32", "tf32"),
                   default=None,
                   help="GEMM dtype (default: the suite's, bf16). fp32 runs "
                   "exact fp32 (TF32 off) and tf32 fp32 with TF32 on: "
                   "cuBLAS's fp32 kernels are not persistent, so ours runs "
                   "them on a green-context stream")
    p.add_argument("--iters", type=int, default=20, help="timed runs")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


def _time_ms(fn: Callable[[], object], iters: int, warmup: int,
             flush: torch.Tensor) -> float:
    """Median milliseconds of fn, L2 flushed before every timed call."""
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for start, end in zip(starts, ends):
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


# ---------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------


def _dense_operands(gemm: str, m: int, k: int, n: int,
                    device: torch.device,
                    dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Operands of one dense GEMM of the step, in autograd's layouts.

    fwd:   x (M, K) @ w (K, N)
    dgrad: dy (M, N) @ w^T (N, K)     (w^T a transposed view)
    wgrad: x^T (K, M) @ dy (M, N)     (x^T a transposed view)
    """
    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=device, dtype=dtype)

    if gemm == "fwd":
        return rand(m, k), rand(k, n)
    if gemm == "dgrad":
        return rand(m, n), rand(k, n).t()
    if gemm == "wgrad":
        return rand(m, k).t(), rand(m, n)
    raise ValueError(f"unknown dense GEMM {gemm!r}")


def _dense_dims(gemm: str, m: int, k: int, n: int) -> tuple[int, int, int]:
    """(rows, cols, reduction) of the output of `gemm`."""
    return {"fwd": (m, n, k), "dgrad": (m, k, n), "wgrad": (k, n, m)}[gemm]


def _balanced_offsets(total: int, groups: int,
                      device: torch.device) -> torch.Tensor:
    sizes = [total // groups] * groups
    sizes[0] += total - sum(sizes)
    return torch.tensor(sizes, device=device).cumsum(0).to(torch.int32)


# ---------------------------------------------------------------------------
# Running one implementation at one k
# ---------------------------------------------------------------------------


def _run_ours(k: int, fn: Callable[[], object], time: Callable) -> float:
    import overlap_ops

    with overlap_ops.sm_carveout(k):
        return time(fn)


def _run_stock(k: int, fn: Callable[[], object], time: Callable) -> float:
    previous = torch._C._get_sm_carveout_experimental()
    torch._C._set_sm_carveout_experimental(k if k else None)
    try:
        return time(fn)
    finally:
        torch._C._set_sm_carveout_experimental(previous)


def _measure(rows: list[Row], case: str, gemm: str, dims: tuple[int, int, int],
             fns: dict[str, Callable[[], object]], carveouts: list[int],
             time: Callable) -> None:
    m, n, kdim = dims
    flops = 2.0 * m * n * kdim
    for impl, fn in fns.items():
        runner = _run_ours if impl == "ours" else _run_stock
        for k in carveouts:
            try:
                ms = runner(k, fn, time)
                rows.append(Row(case, gemm, impl, k, m, n, kdim, ms,
                                flops / (ms * 1e-3) / 1e12))
            except RuntimeError as exc:  # e.g. stock grouped mm limits
                rows.append(Row(case, gemm, impl, k, m, n, kdim, None, None,
                                str(exc).splitlines()[0][:120]))


_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16,
           "fp32": torch.float32, "tf32": torch.float32}


def gemm_dtype(name: Optional[str], suite: dict) -> torch.dtype:
    """The GEMMs' dtype: --dtype, else the suite's (bf16 by default). Sets
    TF32 for fp32 (off) and tf32 (on)."""
    if name is None:
        return getattr(torch, suite.get("dtype", "bfloat16"))
    if name in ("fp32", "tf32"):
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    return _DTYPES[name]


def run_suite(args: argparse.Namespace) -> list[Row]:
    """Times every selected GEMM of every case; returns all rows."""
    import overlap_ops

    suite = json.loads(args.shapes.read_text())
    dtype = gemm_dtype(args.dtype, suite)
    device = torch.device("cuda")
    carveouts = [int(k) for k in args.carveouts.split(",") if k.strip()]
    wanted = {c for c in args.cases.split(",") if c}
    gemms = [g for g in args.gemms.split(",") if g]
    flush = torch.empty(L2_FLUSH_BYTES // 4, device=device, dtype=torch.float32)

    def time(fn: Callable[[], object]) -> float:
        return _time_ms(fn, args.iters, args.warmup, flush)

    rows: list[Row] = []
    for case in suite["cases"]:
        name = case["name"]
        if wanted and name not in wanted:
            continue
        m, k, n, e = case["M"], case["K"], case["N"], case["E"]
        for gemm in gemms:
            if gemm == "grouped":
                a = torch.randn(m, k, device=device, dtype=dtype)
                w = torch.randn(e, k, n, device=device, dtype=dtype)
                offs = _balanced_offsets(m, e, device)
                fns = {
                    "ours": lambda: overlap_ops.grouped_mm(a, w, offs),
                    "stock": lambda: torch._grouped_mm(a, w, offs),
                }
                dims = (m, n, k)
            else:
                a, b = _dense_operands(gemm, m, k, n, device, dtype)
                fns = {"ours": lambda: torch.mm(a, b),
                       "stock": lambda: torch.mm(a, b)}
                dims = _dense_dims(gemm, m, k, n)
            _measure(rows, name, gemm, dims, fns, carveouts, time)
            print(f"  {name:24s} {gemm:8s} done", file=sys.stderr, flush=True)
        torch.cuda.empty_cache()
    return rows


# ---------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------


def _geomean(values: list[float]) -> Optional[float]:
    values = [v for v in values if v]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summarize(rows: list[Row], sms: int) -> list[dict[str, object]]:
    """Per (impl, gemm kind, k): geomean TFLOP/s and its fraction of k = 0."""
    summary = []
    kinds = sorted({("dense" if r.gemm != "grouped" else "grouped")
                    for r in rows})
    for impl in ("ours", "stock"):
        for kind in kinds:
            def pick(k: int) -> list[float]:
                return [r.tflops for r in rows
                        if r.impl == impl and r.k == k and r.tflops
                        and (r.gemm == "grouped") == (kind == "grouped")]
            base = _geomean(pick(0))
            for k in sorted({r.k for r in rows}):
                g = _geomean(pick(k))
                summary.append({
                    "impl": impl, "kind": kind, "k": k,
                    "geomean_tflops": g,
                    "fraction_of_k0": (g / base) if g and base else None,
                    "sm_fraction": (sms - k) / sms,
                })
    return summary


def _fmt(x: Optional[float], spec: str = ".0f") -> str:
    return "-" if x is None else format(x, spec)


def markdown(rows: list[Row], summary: list[dict[str, object]],
             meta: dict[str, object]) -> str:
    """Full table (ours / stock TFLOP/s per k) plus the summary."""
    ks = sorted({r.k for r in rows})
    by_key = {(r.case, r.gemm, r.impl, r.k): r for r in rows}
    lines = [
        f"# SM carveout: GEMM TFLOP/s ({meta['device']}, {meta['sms']} SMs, "
        f"torch {meta['torch']}, {meta.get('dtype', 'bf16')})",
        "",
        "Cells: ours / stock TFLOP/s. Ours runs inside "
        "`overlap_ops.sm_carveout(k)`; stock only sets "
        "`torch._C._set_sm_carveout_experimental(k)`.",
        "",
        "| case | gemm | M x N x K | " + " | ".join(f"k={k}" for k in ks) + " |",
        "|---|---|---|" + "---|" * len(ks),
    ]
    seen = []
    for r in rows:
        if (r.case, r.gemm) not in seen:
            seen.append((r.case, r.gemm))
    for case, gemm in seen:
        any_row = next(r for r in rows if r.case == case and r.gemm == gemm)
        cells = []
        for k in ks:
            ours = by_key.get((case, gemm, "ours", k))
            stock = by_key.get((case, gemm, "stock", k))
            cells.append(f"{_fmt(ours.tflops if ours else None)} / "
                         f"{_fmt(stock.tflops if stock else None)}")
        lines.append(f"| {case} | {gemm} | {any_row.m}x{any_row.n}x"
                     f"{any_row.kdim} | " + " | ".join(cells) + " |")
    notes = sorted({f"{r.case} {r.gemm} {r.impl}: {r.note}"
                    for r in rows if r.note})
    if notes:
        lines += ["", "Not run:", ""] + [f"- {n}" for n in notes]
    lines += ["", "## Geometric means", "",
              "| impl | kind | k | TFLOP/s | of k=0 | (SMs-k)/SMs |",
              "|---|---|---|---|---|---|"]
    for s in summary:
        lines.append(
            f"| {s['impl']} | {s['kind']} | {s['k']} | "
            f"{_fmt(s['geomean_tflops'])} | "
            f"{_fmt(s['fraction_of_k0'], '.2f')} | {s['sm_fraction']:.2f} |")
    return "\n".join(lines) + "\n"


def plot(summary: list[dict[str, object]], path: Path) -> bool:
    """Fraction of k = 0 throughput vs k, ours and stock, with (SMs-k)/SMs."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = sorted({(s["impl"], s["kind"]) for s in summary})
    for impl, kind in series:
        pts = [(s["k"], s["fraction_of_k0"]) for s in summary
               if s["impl"] == impl and s["kind"] == kind
               and s["fraction_of_k0"] is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o",
                    linestyle="-" if impl == "ours" else "--",
                    label=f"{impl} {kind}")
    ideal = sorted({(s["k"], s["sm_fraction"]) for s in summary})
    ax.plot(*zip(*ideal), color="gray", linestyle=":", label="(SMs - k) / SMs")
    ax.set_xlabel("SM carveout k")
    ax.set_ylabel("geomean TFLOP/s, fraction of k = 0")
    ax.set_title("GEMM throughput under an SM carveout")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: Optional[list[str]] = None) -> int:
    args = _parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_carveout: needs a CUDA GPU", file=sys.stderr)
        return 2
    import overlap_ops

    if not overlap_ops.has_cuda_kernels():
        print("bench_carveout: overlap_ops was built without CUDA kernels",
              file=sys.stderr)
        return 2
    props = torch.cuda.get_device_properties(0)
    meta = {"device": props.name, "sms": props.multi_processor_count,
            "torch": torch.__version__, "shapes": str(args.shapes),
            "iters": args.iters, "dtype": args.dtype or "suite (bf16)"}
    rows = run_suite(args)
    summary = summarize(rows, props.multi_processor_count)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "carveout.json").write_text(json.dumps(
        {"meta": meta, "rows": [dataclasses.asdict(r) for r in rows],
         "summary": summary}, indent=1))
    (args.out / "carveout.md").write_text(markdown(rows, summary, meta))
    plotted = plot(summary, args.out / "carveout.png")
    print(f"wrote {args.out}/carveout.json, carveout.md"
          + (", carveout.png" if plotted else ""))
    print(f"\n{'impl':6s} {'kind':8s} " + " ".join(
        f"{'k=' + str(k):>7s}" for k in sorted({r.k for r in rows})))
    for impl in ("ours", "stock"):
        for kind in ("dense", "grouped"):
            vals = [s for s in summary if s["impl"] == impl
                    and s["kind"] == kind]
            if vals:
                print(f"{impl:6s} {kind:8s} " + " ".join(
                    f"{_fmt(s['geomean_tflops']):>7s}" for s in vals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
