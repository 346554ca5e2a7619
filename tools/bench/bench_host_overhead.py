#!/usr/bin/env python3
"""Host time of one grouped-mm call: ours, routed and stock.

On small inputs the kernels take microseconds, so what a call costs the CPU
(Python entry, dispatch, autograd wrapper, validation, argument setup,
launches) decides how fast a small layer can go: once it exceeds the GPU
time, the GPU waits for the host. Columns:

* ours: ``torch.ops.overlap_ops.grouped_mm`` (the op through ``torch.ops``);
* routed: ``torch._grouped_mm`` with ``overlap_ops.route_torch_grouped_mm``
  on, the path users of ``torch._grouped_mm`` and ``F.grouped_mm`` get;
* stock: ``torch._grouped_mm`` with the routing off.

Reports the median of --repeats rounds, each the mean over --calls
back-to-back calls, in microseconds per call. On CUDA a sleep kernel holds
the GPU through each round, and a round's launches stay well under the
launch queue's depth, so the host never waits for the device: the number is
the host's cost alone, not the kernels' throughput. Each row says whether
the GPU was still held when the round ended (it must be).

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


# Launches per round on CUDA stay under this, well below the depth of the
# launch queue (about a thousand small launches), so a launch never blocks.
MAX_CUDA_LAUNCHES_PER_ROUND = 300
# Launches one call makes at most (argument fill, GEMM, a copy).
LAUNCHES_PER_CALL = 3


class GpuHold:
    """Keeps the GPU busy for a round with torch.cuda._sleep, so that the
    calls of the round only queue work. Calibrated once: cycles per us."""

    def __init__(self) -> None:
        torch.cuda._sleep(1000)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        cycles = 20_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        self.cycles_per_us = cycles / (start.elapsed_time(end) * 1e3)

    def __call__(self, us: float) -> None:
        torch.cuda._sleep(int(self.cycles_per_us * us))


def host_us_per_call(fn: Callable[[], Any], calls: int, repeats: int,
                     sync: Callable[[], None],
                     hold: Optional[GpuHold] = None) -> tuple[float, bool]:
    """Median over rounds of the mean host time of one call, microseconds,
    and whether every round ended with the GPU still held (always True
    without a hold)."""
    for _ in range(max(10, calls // 10)):
        fn()
    sync()
    rounds = []
    held = True
    for _ in range(repeats):
        hold_ended = None
        if hold is not None:
            # 200 us of GPU time per call: far more than any call here costs
            # the host.
            hold(200.0 * calls + 1000.0)
            hold_ended = torch.cuda.Event()
            hold_ended.record()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
        if hold_ended is not None:
            # Still sleeping: no call of the round can have waited for the
            # device.
            held = held and not hold_ended.query()
        sync()
    return statistics.median(rounds), held


def measure(device: str, dtype: torch.dtype, calls: int, repeats: int,
            shape: Sequence[int]) -> list[dict[str, Any]]:
    """One row per (implementation, grad mode).

    Grad mode on means a training forward: self and mat2 require grad, so
    each call also records its autograd node and saves its inputs. (With
    grad mode on but no input requiring grad, a call costs what it costs
    with grad mode off: the autograd kernel runs either way.)
    """
    import overlap_ops

    routing_was = overlap_ops.route_torch_grouped_mm(False)
    a, b, offs = _inputs(device, dtype, *shape)
    on_cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if on_cuda else (lambda: None)
    hold = GpuHold() if on_cuda else None
    rows = []
    try:
        for grad_mode in (False, True):
            x, w = (a.detach().requires_grad_(grad_mode),
                    b.detach().requires_grad_(grad_mode))
            impls = {
                "ours": (False, lambda x=x, w=w: torch.ops.overlap_ops
                         .grouped_mm(x, w, offs, None, None)),
                "routed": (True, lambda x=x, w=w: torch._grouped_mm(
                    x, w, offs=offs)),
                "stock": (False, lambda x=x, w=w: torch._grouped_mm(
                    x, w, offs=offs)),
            }
            for name, (routed, fn) in impls.items():
                overlap_ops.route_torch_grouped_mm(routed)
                with torch.set_grad_enabled(grad_mode):
                    try:
                        us, held = host_us_per_call(fn, calls, repeats, sync,
                                                    hold)
                        error = None
                    except Exception as exc:  # stock may reject the dtype
                        us, held = None, None
                        error = f"{type(exc).__name__}: {exc}"[:200]
                rows.append({"impl": name, "grad_mode": grad_mode, "us": us,
                             "gpu_held": held if on_cuda else None,
                             "error": error})
    finally:
        overlap_ops.route_torch_grouped_mm(routing_was)
    return rows


def render(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = [f"# Host time per grouped-mm call ({meta['device']}, "
             f"torch {meta['torch']})", "",
             f"{meta['dtype']}, groups x rows x K x N = {meta['shape']}; "
             f"median of {meta['repeats']} rounds of {meta['calls']} calls; "
             "grad mode on: self and mat2 require grad (forward only).",
             "", "| impl | grad mode | us / call | GPU held |",
             "|---|---|---:|---|"]
    for row in rows:
        cell = f"{row['us']:.1f}" if row["us"] is not None else (
            f"n/a ({row['error']})")
        held = {None: "-", True: "yes",
                False: "no: the host waited, not a host time"}[
                    row.get("gpu_held")]
        lines.append(f"| {row['impl']} | {'on' if row['grad_mode'] else 'off'}"
                     f" | {cell} | {held} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"),
                        default="fp32")
    parser.add_argument("--shape", type=int, nargs=4, default=(4, 16, 32, 16),
                        metavar=("GROUPS", "ROWS", "K", "N"))
    parser.add_argument("--calls", type=int, default=None,
                        help="calls per round (default 2000 on the CPU, "
                        f"{MAX_CUDA_LAUNCHES_PER_ROUND // LAUNCHES_PER_CALL} "
                        "on CUDA, its most)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch.set_num_threads for the run (default 1: "
                        "a woken CPU thread pool makes host times noisy)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    on_cuda = args.device.startswith("cuda")
    most = MAX_CUDA_LAUNCHES_PER_ROUND // LAUNCHES_PER_CALL
    if args.calls is None:
        args.calls = most if on_cuda else 2000
    if args.calls < 1 or args.repeats < 1 or args.threads < 1:
        parser.error("--calls, --repeats and --threads must be >= 1")
    if on_cuda and args.calls > most:
        parser.error(f"--calls: at most {most} on CUDA, so that a round's "
                     "launches never fill the launch queue")
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
