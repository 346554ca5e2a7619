#!/usr/bin/env python3
"""Host time of one grouped-mm call: ours vs stock torch._grouped_mm.

On tiny inputs the kernels take microseconds, so what a call costs the CPU
(dispatch, autograd wrapper, validation, argument setup, launches) decides
how fast a small layer can go: once it exceeds the GPU time, the GPU waits
for the host. Reports the median of --repeats rounds, each the mean over
--calls back-to-back calls, in microseconds per call. On CUDA the calls
are only enqueued (no synchronisation inside a round), so the number is the
host's cost, not the kernel's.

    python3 tools/bench/bench_host_overhead.py                # CPU
    python3 tools/bench/bench_host_overhead.py --device cuda  # host cost of CUDA calls

Writes host_overhead.json and host_overhead.md to --out when given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch


def _inputs(device: str, dtype: torch.dtype, groups: int, rows: int,
            k: int, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """a (groups * rows, k), b (groups, k, n), int32 end offsets."""
    a = torch.randn(groups * rows, k, device=device, dtype=dtype)
    b = torch.randn(groups, k, n, device=device, dtype=dtype)
    offs = torch.arange(1, groups + 1, device=device,
                        dtype=torch.int32) * rows
    return a, b, offs


def host_us_per_call(fn: Callable[[], Any], calls: int, repeats: int,
                     sync: Callable[[], None]) -> float:
    """Median over rounds of the mean host time of one call, microseconds."""
    for _ in range(max(10, calls // 10)):
        fn()
    sync()
    rounds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
        sync()
    return statistics.median(rounds)


def measure(device: str, dtype: torch.dtype, calls: int, repeats: int,
            shape: Sequence[int]) -> list[dict[str, Any]]:
    """One row per (implementation, grad mode).

    Grad mode on means a training forward: self and mat2 require grad, so
    each call also records its autograd node and saves its inputs. (With
    grad mode on but no input requiring grad, a call costs what it costs
    with grad mode off: the autograd kernel runs either way.)
    """
    import overlap_ops

    overlap_ops.route_torch_grouped_mm(False)
    a, b, offs = _inputs(device, dtype, *shape)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (
        lambda: None)
    rows = []
    for grad_mode in (False, True):
        x, w = (a.detach().requires_grad_(grad_mode),
                b.detach().requires_grad_(grad_mode))
        impls = {
            "ours": lambda x=x, w=w: torch.ops.overlap_ops.grouped_mm(
                x, w, offs, None, None),
            "stock": lambda x=x, w=w: torch._grouped_mm(x, w, offs=offs),
        }
        for name, fn in impls.items():
            with torch.set_grad_enabled(grad_mode):
                try:
                    us = host_us_per_call(fn, calls, repeats, sync)
                    error = None
                except Exception as exc:  # stock may reject the dtype
                    us, error = None, f"{type(exc).__name__}: {exc}"[:200]
            rows.append({"impl": name, "grad_mode": grad_mode, "us": us,
                         "error": error})
    return rows


def render(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = [f"# Host time per grouped-mm call ({meta['device']}, "
             f"torch {meta['torch']})", "",
             f"{meta['dtype']}, groups x rows x K x N = {meta['shape']}; "
             f"median of {meta['repeats']} rounds of {meta['calls']} calls; "
             "grad mode on: self and mat2 require grad (forward only).",
             "", "| impl | grad mode | us / call |", "|---|---|---:|"]
    for row in rows:
        cell = f"{row['us']:.1f}" if row["us"] is not None else (
            f"n/a ({row['error']})")
        lines.append(f"| {row['impl']} | {'on' if row['grad_mode'] else 'off'}"
                     f" | {cell} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"),
                        default="fp32")
    parser.add_argument("--shape", type=int, nargs=4, default=(4, 16, 32, 16),
                        metavar=("GROUPS", "ROWS", "K", "N"))
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch.set_num_threads for the run (default 1: "
                        "a woken CPU thread pool makes host times noisy)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.calls < 1 or args.repeats < 1 or args.threads < 1:
        parser.error("--calls, --repeats and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16,
             "fp32": torch.float32}[args.dtype]
    rows = measure(args.device, dtype, args.calls, args.repeats, args.shape)
    meta = {"device": (torch.cuda.get_device_name(args.device)
                       if args.device.startswith("cuda") else "CPU"),
            "torch": torch.__version__, "dtype": args.dtype,
            "shape": list(args.shape), "calls": args.calls,
            "threads": args.threads,
            "repeats": args.repeats}
    text = render(meta, rows)
    print(text, end="")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "host_overhead.json").write_text(
            json.dumps({**meta, "rows": rows}, indent=1) + "\n")
        (out / "host_overhead.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
