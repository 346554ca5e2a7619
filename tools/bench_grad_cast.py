#!/usr/bin/env python3
"""Gradient-cast benchmark: the backward of an out_dtype=float32
_grouped_mm casts the float32 output gradient (sum M, N) to the inputs'
dtype. overlap_ops::_grouped_mm_grad_to does it in a grid within the SM
carveout; torch's .to() sizes its grid by the element count. Both timed on
the shared suite's forward outputs, with no carveout and under
torch._C._set_sm_carveout_experimental(k), in the same interleaved rounds,
against the floor (4 bytes read + 2 written per element at the measured
copy bandwidth). Every result is checked bit-equal to .to().

    python3 tools/bench_grad_cast.py --out results/grad_cast
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bias_grad import copy_bandwidth, time_us  # noqa: E402
from grouped_mm_cases import DEFAULT_SUITE, load_suite  # noqa: E402

import overlap_ops  # noqa: E402,F401  (registers the ops)


def with_carveout(k, fn):
    """fn under torch's carveout alone (not overlap_ops.sm_carveout, whose
    GEMM routing would add host work to every timed call)."""
    def run():
        previous = torch._C._get_sm_carveout_experimental()
        torch._C._set_sm_carveout_experimental(k)
        try:
            return fn()
        finally:
            torch._C._set_sm_carveout_experimental(previous)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shapes", default=str(DEFAULT_SUITE))
    parser.add_argument("--carveout", type=int, default=16)
    parser.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    scrub = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    bandwidth = copy_bandwidth(scrub)
    print(f"copy bandwidth {bandwidth / 1e9:.0f} GB/s", flush=True)
    op = torch.ops.overlap_ops._grouped_mm_grad_to
    k = args.carveout
    rows = []
    cases = load_suite(args.shapes).cases
    for i, case in enumerate(cases):
        grad = torch.randn(case.M, case.N, device="cuda")
        want = grad.to(dtype)
        columns = [
            ("torch", lambda: grad.to(dtype)),
            ("ours", lambda: op(grad, dtype)),
            (f"torch@k{k}", with_carveout(k, lambda: grad.to(dtype))),
            (f"ours@k{k}", with_carveout(k, lambda: op(grad, dtype))),
        ]
        for label, fn in columns:
            if not torch.equal(fn(), want):
                raise SystemExit(f"{case.name}: {label} differs from .to()")
        timed = {label: [] for label, _ in columns}
        for r in range(args.rounds):
            shift = r % len(columns)
            for label, fn in columns[shift:] + columns[:shift]:
                timed[label].append(time_us(fn, scrub, runs=args.runs,
                                            warmup=3 if r == 0 else 1))
        row = {"case": case.name, "M": case.M, "N": case.N,
               "floor_us": grad.numel() * (4 + want.element_size())
               / bandwidth * 1e6}
        for label, _ in columns:
            row[f"{label}_us"] = statistics.median(timed[label])
            row[f"{label}_rounds_us"] = timed[label]
        row["ours/torch"] = row["ours_us"] / row["torch_us"]
        row[f"ours@k{k}/torch"] = row[f"ours@k{k}_us"] / row["torch_us"]
        row[f"ours@k{k}/floor"] = row[f"ours@k{k}_us"] / row["floor_us"]
        rows.append(row)
        print(f"[{i + 1}/{len(cases)}] {case.name:22s} "
              + "  ".join(f"{label} {row[f'{label}_us']:7.1f}"
                          for label, _ in columns)
              + f"  floor {row['floor_us']:7.1f} us", flush=True)
    ratios = ["ours/torch", f"ours@k{k}/torch", f"ours@k{k}/floor"]
    labels = ["torch", "ours", f"torch@k{k}", f"ours@k{k}"]
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "sms": torch.cuda.get_device_properties(0).multi_processor_count,
            "carveout": k, "dtype": args.dtype, "copy_gbps": bandwidth / 1e9,
            "rounds": args.rounds, "runs": args.runs}
    (out_dir / "grad_cast.json").write_text(
        json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        "# Gradient cast of an out_dtype=float32 backward: ours within the "
        "SM carveout against torch's .to()", "",
        f"- GPU: {meta['gpu']} ({meta['sms']} SMs); torch {meta['torch']}; "
        f"float32 -> {args.dtype}; carveout k = {k} (torch@k, ours@k: "
        "timed under torch._C._set_sm_carveout_experimental(k)); "
        f"{args.rounds} interleaved rounds of {args.runs} calls per column; "
        f"floor = 4 + {want.element_size()} bytes per element at the copy "
        f"bandwidth ({meta['copy_gbps']:.0f} GB/s); every result bit-equal "
        "to .to()", "",
        "| case | M x N | " + " | ".join(f"{l} us" for l in labels)
        + " | floor us | " + " | ".join(ratios) + " |",
        "|---|---|" + "---:|" * (len(labels) + 1 + len(ratios))]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['M']} x {r['N']} | "
            + " | ".join(f"{r[f'{l}_us']:.1f}" for l in labels)
            + f" | {r['floor_us']:.1f} | "
            + " | ".join(f"{r[key]:.2f}" for key in ratios) + " |")
    lines.append("")
    for key in ratios:
        gm = statistics.geometric_mean([r[key] for r in rows])
        worst = max(rows, key=lambda r: r[key])
        lines.append(f"- {key}: geometric mean {gm:.2f}, worst "
                     f"{worst[key]:.2f} ({worst['case']})")
        print(lines[-1])
    (out_dir / "grad_cast.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
