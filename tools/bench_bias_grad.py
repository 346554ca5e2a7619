#!/usr/bin/env python3
"""Bias-gradient benchmark: the per-group column sums of the output
gradient (sum M, N), as the CUDA backward computes them now
(overlap_ops::_group_column_sums, one kernel within the SM carveout)
against the grouped-GEMM reduction it replaced (ones (1, M) @ grad grouped
along K; with TF32 allowed, float32 grad split into a TF32-exact high part
and the rest, two GEMMs and an add), on the shared suite's forward outputs.

Every row is checked against float64 per group; the floor is grad's bytes
read once at the measured copy bandwidth (read + write of a large copy).
Writes bias_grad.md and bias_grad.json into --out.

    python3 tools/bench_bias_grad.py --out results/bias_grad
"""

from __future__ import annotations

import argparse
import json
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


def reference(grad: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    ends = offs.long()
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    prefix = torch.cat([grad.new_zeros(1, grad.shape[1], dtype=torch.float64),
                        grad.double().cumsum(0)])
    return prefix[ends] - prefix[starts]


def time_us(fn, scrub: torch.Tensor, runs: int = 20) -> float:
    for _ in range(3):
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
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    suite = load_suite(args.shapes)
    scrub = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    bandwidth = copy_bandwidth(scrub)
    print(f"copy bandwidth {bandwidth / 1e9:.0f} GB/s", flush=True)
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16,
              "fp32": torch.float32}
    rows = []
    for case in suite.cases:
        for dist in args.dists.split(","):
            sizes = group_sizes(dist, case.M, case.E)
            offs = torch.tensor(sizes, device="cuda").cumsum(0).to(torch.int32)
            for name in args.dtypes.split(","):
                dtype = dtypes[name]
                grad = torch.randn(case.M, case.N, device="cuda", dtype=dtype)
                want = reference(grad, offs)
                errors = {}
                for label, fn in (("kernel", column_sums),
                                  ("gemm", gemm_reduction)):
                    got = fn(grad, offs).double()
                    err = ((got - want).norm(dim=1)
                           / want.norm(dim=1).clamp_min(1e-30)).max().item()
                    errors[label] = err
                kernel_us = time_us(lambda: column_sums(grad, offs), scrub)
                gemm_us = time_us(lambda: gemm_reduction(grad, offs), scrub)
                floor_us = grad.numel() * grad.element_size() / bandwidth * 1e6
                row = {"case": case.name, "dist": dist, "dtype": name,
                       "M": case.M, "N": case.N, "E": case.E,
                       "kernel_us": kernel_us, "gemm_us": gemm_us,
                       "floor_us": floor_us,
                       "kernel/gemm": kernel_us / gemm_us,
                       "kernel/floor": kernel_us / floor_us,
                       "kernel_rel_err": errors["kernel"],
                       "gemm_rel_err": errors["gemm"]}
                rows.append(row)
                print(f"{case.name:22s} {dist:9s} {name:5s} kernel "
                      f"{kernel_us:8.1f} us  gemm {gemm_us:8.1f} us  floor "
                      f"{floor_us:8.1f} us  kernel/gemm "
                      f"{row['kernel/gemm']:.2f}  err {errors['kernel']:.1e}"
                      f" / {errors['gemm']:.1e}", flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "copy_gbps": bandwidth / 1e9, "shapes": args.shapes,
            "tf32_allowed": True}
    (out_dir / "bias_grad.json").write_text(
        json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        "# Bias gradient: column-sums kernel vs grouped-GEMM reduction", "",
        f"- GPU: {meta['gpu']}; torch {meta['torch']}; copy bandwidth "
        f"{meta['copy_gbps']:.0f} GB/s (read + write); TF32 allowed",
        "- kernel = overlap_ops::_group_column_sums (float32 result); gemm ="
        " ones (1, M) @ grad grouped along K (fp32: TF32 split, two GEMMs);"
        " floor = grad's bytes at the copy bandwidth; rel err = worst group's"
        " relative error against float64", "",
        "| case | dist | dtype | kernel us | gemm us | floor us | kernel/gemm"
        " | kernel/floor | rel err kernel | rel err gemm |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['dist']} | {r['dtype']} | "
            f"{r['kernel_us']:.1f} | {r['gemm_us']:.1f} | {r['floor_us']:.1f}"
            f" | {r['kernel/gemm']:.2f} | {r['kernel/floor']:.2f} | "
            f"{r['kernel_rel_err']:.1e} | {r['gemm_rel_err']:.1e} |")
    for name in args.dtypes.split(","):
        sel = [r for r in rows if r["dtype"] == name]
        if sel:
            gm = statistics.geometric_mean([r["kernel/gemm"] for r in sel])
            worst = max(sel, key=lambda r: r["kernel/gemm"])
            lines.append("")
            lines.append(
                f"{name}: kernel/gemm geometric mean {gm:.2f}, worst "
                f"{worst['kernel/gemm']:.2f} ({worst['case']} {worst['dist']})")
            print(lines[-1])
    (out_dir / "bias_grad.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
