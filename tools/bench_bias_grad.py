#!/usr/bin/env python3
"""Bias-gradient benchmark: the per-group column sums of the output
gradient (sum M, N), as the CUDA backward computes them now
(overlap_ops::_group_column_sums, one kernel within the SM carveout), on
the shared suite's forward outputs, against, in the same run:

- variants of the same kernel (--variants, default scalar): scalar,
  single-element loads (OVERLAP_OPS_COLUMN_SUMS_LOADS=scalar), the
  previous default;
- dense: torch's own column sum of the same grad, grad.sum(0) in float32:
  the same bytes, not grouped (an anchor, not a replacement: it needs no
  offsets);
- gemm (--with-gemm): the grouped-GEMM reduction the kernel replaced
  (ones (1, M) @ grad grouped along K; with TF32 allowed, float32 grad
  split into a TF32-exact high part and the rest, two GEMMs and an add).

Every row is checked against float64 per group; the floor is grad's bytes
read once at the measured copy bandwidth (read + write of a large copy).
The columns of a row are timed in --rounds interleaved rounds (the order
rotates each round), each a median of --runs calls; a row's time is the
median of its rounds. Writes bias_grad.md and bias_grad.json into --out.

    python3 tools/bench_bias_grad.py --out results/bias_grad
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grouped_mm_cases import DEFAULT_SUITE, group_sizes, load_suite  # noqa: E402

import overlap_ops  # noqa: E402,F401  (registers the ops)

TF32_MASK = ~0x1FFF


def gemm_reduction(grad: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """The previous CUDA bias gradient (GroupedMMBackward.cpp before the
    column-sums kernel)."""
    mm = torch.ops.overlap_ops.grouped_mm
    ones = torch.ones(1, grad.shape[0], device=grad.device, dtype=grad.dtype)

    def row_sums(rows):
        return mm(ones, rows, offs, None, torch.float32).squeeze(1)

    if grad.dtype != torch.float32:
        return row_sums(grad)
    high = torch.bitwise_and(grad.view(torch.int32), TF32_MASK).view(torch.float32)
    return row_sums(high).add_(row_sums(grad - high))


def column_sums(grad: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    return torch.ops.overlap_ops._group_column_sums(grad, offs, torch.float32)


# The kernel's switches a variant column sets (the env is read per call).
VARIANTS = {
    "scalar": ("OVERLAP_OPS_COLUMN_SUMS_LOADS", "scalar"),
}


def variant_column_sums(variant: str):
    name, value = VARIANTS[variant]

    def run(grad: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        previous = os.environ.get(name)
        os.environ[name] = value
        try:
            return column_sums(grad, offs)
        finally:
            if previous is None:
                del os.environ[name]
            else:
                os.environ[name] = previous
    return run


def dense_column_sum(grad: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """torch's reduction of the same bytes, all rows into one (1, N) row."""
    del offs
    return grad.sum(0, dtype=torch.float32, keepdim=True)


def reference(grad: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    ends = offs.long()
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    prefix = torch.cat([grad.new_zeros(1, grad.shape[1], dtype=torch.float64),
                        grad.double().cumsum(0)])
    return prefix[ends] - prefix[starts]


def time_us(fn, scrub: torch.Tensor, runs: int = 20,
            warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        scrub.zero_()  # L2 not warm across runs
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def copy_bandwidth(scrub: torch.Tensor) -> float:
    src = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us = time_us(lambda: dst.copy_(src), scrub)
    return 2 * src.numel() / (us * 1e-6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shapes", default=str(DEFAULT_SUITE))
    parser.add_argument("--dtypes", default="bf16,fp32")
    parser.add_argument("--dists", default="balanced,skewed,sparse")
    parser.add_argument("--cases", default="",
                        help="comma-separated case names (default: all)")
    parser.add_argument("--with-gemm", action="store_true",
                        help="also time the grouped-GEMM reduction (slow)")
    parser.add_argument("--variants", default="scalar",
                        help="comma-separated kernel variants to time "
                        f"beside it: {', '.join(VARIANTS)} (or empty)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown_variants = set(variants) - set(VARIANTS)
    if unknown_variants:
        parser.error(f"unknown variants: {sorted(unknown_variants)}")
    torch.backends.cuda.matmul.allow_tf32 = True
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    suite = load_suite(args.shapes)
    wanted = {c for c in args.cases.split(",") if c}
    cases = [c for c in suite.cases if not wanted or c.name in wanted]
    unknown = wanted - {c.name for c in suite.cases}
    if unknown:
        parser.error(f"unknown cases: {sorted(unknown)}")
    scrub = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    bandwidth = copy_bandwidth(scrub)
    print(f"copy bandwidth {bandwidth / 1e9:.0f} GB/s", flush=True)
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16,
              "fp32": torch.float32}
    # Columns checked against float64 per group (dense is not grouped).
    checked = [("kernel", column_sums)] + [
        (v, variant_column_sums(v)) for v in variants]
    if args.with_gemm:
        checked.append(("gemm", gemm_reduction))
    timed = checked + [("dense", dense_column_sum)]
    labels = [label for label, _ in timed]
    rows = []
    total = len(cases) * len(args.dists.split(",")) * len(args.dtypes.split(","))
    for case in cases:
        for dist in args.dists.split(","):
            sizes = group_sizes(dist, case.M, case.E)
            offs = torch.tensor(sizes, device="cuda").cumsum(0).to(torch.int32)
            for name in args.dtypes.split(","):
                dtype = dtypes[name]
                grad = torch.randn(case.M, case.N, device="cuda", dtype=dtype)
                want = reference(grad, offs)
                row = {"case": case.name, "dist": dist, "dtype": name,
                       "M": case.M, "N": case.N, "E": case.E}
                for label, fn in checked:
                    got = fn(grad, offs).double()
                    row[f"{label}_rel_err"] = (
                        (got - want).norm(dim=1)
                        / want.norm(dim=1).clamp_min(1e-30)).max().item()
                rounds = {label: [] for label, _ in timed}
                for r in range(args.rounds):
                    shift = r % len(timed)
                    for label, fn in timed[shift:] + timed[:shift]:
                        rounds[label].append(time_us(
                            lambda fn=fn: fn(grad, offs), scrub,
                            runs=args.runs, warmup=3 if r == 0 else 1))
                for label, _ in timed:
                    row[f"{label}_us"] = statistics.median(rounds[label])
                    row[f"{label}_rounds_us"] = rounds[label]
                row["floor_us"] = (grad.numel() * grad.element_size()
                                   / bandwidth * 1e6)
                for label in labels:
                    if label != "kernel":
                        row[f"kernel/{label}"] = (row["kernel_us"]
                                                  / row[f"{label}_us"])
                row["kernel/floor"] = row["kernel_us"] / row["floor_us"]
                rows.append(row)
                print(f"[{len(rows)}/{total}] {case.name:22s} {dist:9s} "
                      f"{name:5s} " + "  ".join(
                          f"{label} {row[f'{label}_us']:8.1f}"
                          for label in labels)
                      + f"  floor {row['floor_us']:8.1f} us  "
                      + "  ".join(f"kernel/{v} {row[f'kernel/{v}']:.2f}"
                                  for v in variants)
                      + f"  err {row['kernel_rel_err']:.1e}", flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "copy_gbps": bandwidth / 1e9, "shapes": args.shapes,
            "tf32_allowed": True, "columns": labels,
            "rounds": args.rounds, "runs": args.runs,
            "source_commit": os.environ.get("OVERLAP_OPS_SOURCE_COMMIT", "")}
    (out_dir / "bias_grad.json").write_text(
        json.dumps({"meta": meta, "rows": rows}, indent=1))
    ratios = [f"kernel/{label}" for label in labels if label != "kernel"]
    ratios.append("kernel/floor")
    lines = [
        "# Bias gradient: the column-sums kernel against "
        + (", ".join(f"its {v} variant" for v in variants) + ", "
           if variants else "")
        + "torch's dense column sum and the floor", "",
        f"- GPU: {meta['gpu']}; torch {meta['torch']}; sources "
        f"{meta['source_commit'] or 'unknown'}; copy bandwidth "
        f"{meta['copy_gbps']:.0f} GB/s (read + write); TF32 allowed; "
        f"{args.rounds} interleaved rounds of {args.runs} calls per column",
        "- kernel = overlap_ops::_group_column_sums (float32 result, "
        "default switches); "
        + "".join(f"{v} = the same with {VARIANTS[v][0]}={VARIANTS[v][1]}; "
                  for v in variants)
        + "dense = grad.sum(0) in float32, not grouped;"
        + (" gemm = ones (1, M) @ grad grouped along K;" if args.with_gemm
           else "")
        + " floor = grad's bytes at the copy bandwidth; rel err = worst "
        "group's relative error against float64", "",
        "| case | dist | dtype | " + " | ".join(f"{l} us" for l in labels)
        + " | floor us | " + " | ".join(ratios) + " | rel err kernel |",
        "|---|---|---|" + "---:|" * (len(labels) + 1 + len(ratios) + 1)]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['dist']} | {r['dtype']} | "
            + " | ".join(f"{r[f'{l}_us']:.1f}" for l in labels)
            + f" | {r['floor_us']:.1f} | "
            + " | ".join(f"{r[k]:.2f}" for k in ratios)
            + f" | {r['kernel_rel_err']:.1e} |")
    for name in args.dtypes.split(","):
        sel = [r for r in rows if r["dtype"] == name]
        if not sel:
            continue
        lines.append("")
        for key in ratios:
            gm = statistics.geometric_mean([r[key] for r in sel])
            worst = max(sel, key=lambda r: r[key])
            lines.append(
                f"- {name}: {key} geometric mean {gm:.2f}, worst "
                f"{worst[key]:.2f} ({worst['case']} {worst['dist']})")
            print(lines[-1])
    (out_dir / "bias_grad.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
