"""Runs one grouped-mm row of the suite a few times, for `ncu` to profile,
or (--kernels) times each kernel a call launches with torch.profiler.

    ncu --launch-skip 3 --launch-count 1 -k regex:GemmUniversal|cutlass|Kernel \
        python3 tools/bench/profile_grouped_mm.py --case deepseek_v3_decode \
        --dist sparse --impl ours
    python3 tools/bench/profile_grouped_mm.py --case grin_moe --dist balanced \
        --kernels    # fill, GEMM(s), finish: launches and us per call
    python3 tools/bench/profile_grouped_mm.py --case grin_moe --host-path
                     # CUDA API calls per call, host us to the first launch
    python3 tools/bench/profile_grouped_mm.py --case gpt_oss_120b_w13 --kernels \
        --bias       # ours with a per-group bias: its kernels and their cost

The data, sizes and offsets are those of tools/bench/bench_grouped_mm.py, so a
kernel profiled here is the one timed there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_grouped_mm as bench  # noqa: E402
import grouped_mm_cases as cases  # noqa: E402


# Fragments of kernel names -> short labels; the first match wins.
_KERNEL_LABELS = (
    ("fill_group_arguments", "fill arguments (+ zeros)"),
    ("finish_groups", "finish (bias)"),
    ("zero_tail", "zero tail"),
    ("relayout_kernel", "bounded copy (relayout)"),
    ("flat_copy_kernel", "bounded copy (flat)"),
    ("padded_k_gather", "padded-K copy (register gather)"),
    ("generic_grouped_mm", "generic GEMM"),
    ("Cooperative", "SM90 GEMM, cooperative 128x256 (large/large_solo)"),
    ("Pingpong", "SM90 GEMM, pingpong (medium/small/wide)"),
    ("GemmGrouped", "SM80 GEMM"),
)


def short_kernel_name(name: str) -> str:
    """A readable label for a (often mangled) kernel name."""
    for fragment, label in _KERNEL_LABELS:
        if fragment in name:
            return label
    # cuBLAS's kernel names (nvjet_..., sm90_xmma_...) carry the tile, the
    # cluster and the schedule: kept whole. Mangled templates are cut.
    if name.startswith(("nvjet", "sm90_xmma", "sm80_xmma")):
        return name
    return name if len(name) <= 60 else name[:57] + "..."


def kernel_table(events: list[dict[str, Any]], calls: int
                 ) -> list[tuple[str, float, float]]:
    """(label, launches per call, GPU us per call) from chrome-trace events
    of `calls` calls, in the order each label first ran. A label launched
    k > 1 times per call on average, with a whole k, is split by its place
    in the call: "label, launch 1 of k", and so on, so each launch's time
    shows (a TF32 token split runs two cooperative GEMMs: launch 1 is the
    128-token kernel, launch 2 the 256-token one). The places assume every
    call launched it k times; the trace's call marks are not read."""
    kernels = sorted((e for e in events if e.get("cat") == "kernel"),
                     key=lambda e: float(e.get("ts", 0.0)))
    labels = [short_kernel_name(e.get("name", "?")) for e in kernels]
    per_call: dict[str, int] = defaultdict(int)
    for label in labels:
        per_call[label] += 1
    seen: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    total_us: dict[str, float] = defaultdict(float)
    for event, label in zip(kernels, labels):
        launches, left = divmod(per_call[label], calls)
        if launches > 1 and left == 0:
            place = seen[label] % launches + 1
            seen[label] += 1
            label = f"{label}, launch {place} of {launches}"
        count[label] += 1
        total_us[label] += float(event.get("dur", 0.0))
    return [(label, count[label] / calls, total_us[label] / calls)
            for label in count]


_CALL_MARK = "grouped_mm call"
_LAUNCH_APIS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                "cuLaunchKernelEx")


def _call_marks(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(start, duration) of each marked call on the host. With CUDA
    activity the profiler also writes each mark as a "gpu_user_annotation"
    spanning the call's kernels on the GPU: those are not host time."""
    return sorted((float(e["ts"]), float(e.get("dur", 0.0)))
                  for e in events if e.get("name") == _CALL_MARK
                  and e.get("ph") == "X"
                  and e.get("cat") == "user_annotation")


def _inside(ts: float, marks: list[tuple[float, float]]) -> bool:
    return any(start <= ts <= start + duration for start, duration in marks)


def runtime_table(events: list[dict[str, Any]], calls: int
                  ) -> list[tuple[str, float, float]]:
    """(CUDA runtime or driver API, calls per grouped-mm call, host us per
    grouped-mm call) from chrome-trace events inside the marked calls, most
    host time first."""
    marks = _call_marks(events)
    count: dict[str, int] = defaultdict(int)
    total_us: dict[str, float] = defaultdict(float)
    for event in events:
        if event.get("cat") not in ("cuda_runtime", "cuda_driver"):
            continue
        if not _inside(float(event.get("ts", 0.0)), marks):
            continue
        name = event.get("name", "?")
        count[name] += 1
        total_us[name] += float(event.get("dur", 0.0))
    rows = [(name, count[name] / calls, total_us[name] / calls)
            for name in count]
    return sorted(rows, key=lambda row: -row[2])


def call_host_times(events: list[dict[str, Any]]
                    ) -> tuple[float, float] | None:
    """Medians over the marked calls that launch a kernel (record_function(
    _CALL_MARK), host side) of the host us from the call's start to its
    first kernel launch, and of the call's host duration; None without
    such calls. When the GPU waits for the host, the first is what
    per-call CUDA events add to the GPU time."""
    launches = sorted(float(e["ts"]) for e in events
                      if e.get("cat") in ("cuda_runtime", "cuda_driver")
                      and str(e.get("name", "")).startswith(_LAUNCH_APIS))
    to_first, durations = [], []
    for start, duration in _call_marks(events):
        inside = [t for t in launches if start <= t <= start + duration]
        if inside:
            to_first.append(inside[0] - start)
            durations.append(duration)
    if not to_first:
        return None
    return statistics.median(to_first), statistics.median(durations)


def _trace_events(prof: Any) -> list[dict[str, Any]]:
    """The chrome-trace events of a finished torch.profiler run."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        with open(f.name) as trace_file:
            return json.load(trace_file)["traceEvents"]


def time_host_path(fn: Callable[[], Any], calls: int) -> tuple[
        list[tuple[str, float, float]], tuple[float, float] | None]:
    """CUDA API calls of `calls` profiled calls (after warm-up), and the
    medians of call_host_times."""
    from torch.profiler import profile, record_function, ProfilerActivity

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU,
                             ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            with record_function(_CALL_MARK):
                fn()
        torch.cuda.synchronize()
    events = _trace_events(prof)
    return runtime_table(events, calls), call_host_times(events)


def time_kernels(fn: Callable[[], Any], calls: int) -> tuple[
        list[tuple[str, float, float]], float]:
    """Per-kernel table of `calls` profiled calls (after warm-up), and the
    host time per call of unprofiled calls (no sync between calls)."""
    from torch.profiler import profile, ProfilerActivity

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host_us = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    events = _trace_events(prof)
    return kernel_table(events, calls), host_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=str(bench.REPO / "bench" / "moe_shapes.json"))
    parser.add_argument("--case", required=True)
    parser.add_argument("--dist", default="balanced")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"],
                        help="fp32 runs as tf32, as in the bench")
    parser.add_argument("--pass", dest="pass_name", default="fwd",
                        choices=["fwd", "dgrad", "wgrad"])
    parser.add_argument("--impl", default="ours",
                        choices=["ours", "stock", "loop", "pergroup"],
                        help="loop: one cuBLAS mm per group, sizes read "
                        "on the host once (bench_grouped_mm.py --loop); "
                        "pergroup: ours launched once per group "
                        "(--per-group)")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--kernels", action="store_true",
                        help="print each kernel's launches and GPU time per "
                        "call (torch.profiler), and the host time per call")
    parser.add_argument("--host-path", action="store_true",
                        help="print the CUDA API calls per call with their "
                        "host time, and the host time from a call's start "
                        "to its first kernel launch (torch.profiler)")
    parser.add_argument("--bias", action="store_true",
                        help="ours with a per-group bias (G, N) in the "
                        "inputs' dtype: what the bias costs (stock rejects "
                        "a bias, so --impl ours only)")
    args = parser.parse_args()
    if args.bias and args.impl != "ours":
        parser.error("--bias: stock torch._grouped_mm rejects a bias; "
                     "use --impl ours")

    suite = cases.load_suite(args.shapes)
    case = next((c for c in suite.cases if c.name == args.case), None)
    if case is None:
        parser.error(f"--case {args.case!r} is not in {args.shapes}; it has "
                     + ", ".join(c.name for c in suite.cases))
    if args.impl in ("ours", "pergroup"):
        import overlap_ops  # noqa: F401  (registers torch.ops.overlap_ops)
    if args.dtype == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = True  # as the bench runs it
    spec = bench.RowSpec(case, args.dist, args.dtype, args.pass_name)
    gen = torch.Generator(device="cuda").manual_seed(0)
    a, b = bench._operands(spec, gen)
    sizes = cases.group_sizes(args.dist, case.M, case.E)
    offs = torch.tensor(cases.offsets(sizes), device="cuda", dtype=torch.int32)
    fn = bench._callables(inductor=False, loop=True,
                          per_group=True)[args.impl]
    if args.bias:
        bias = torch.randn(len(sizes), b.shape[-1], device="cuda",
                           dtype=a.dtype, generator=gen)  # (G, N)

        def fn(a, b, offs, bias=bias):  # noqa: F811  (ours with a bias)
            return torch.ops.overlap_ops.grouped_mm(a, b, offs, bias, None)
    title = (f"{args.impl}{' +bias' if args.bias else ''} {case.name} "
             f"{args.dist} {args.dtype} {args.pass_name}")
    if args.host_path:
        table, times = time_host_path(lambda: fn(a, b, offs), args.calls)
        print(f"{title}: {args.calls} calls (profiled, CPU + CUDA)")
        if times is not None:
            print(f"host us per call: {times[1]:.1f}; from the call's start "
                  f"to its first kernel launch: {times[0]:.1f}")
        print("| CUDA API | calls / call | host us / call |")
        print("|---|---:|---:|")
        for name, count, us in table:
            print(f"| {name} | {count:g} | {us:.1f} |")
        return
    if args.kernels:
        table, host_us = time_kernels(lambda: fn(a, b, offs), args.calls)
        print(f"{title}: {args.calls} calls, host {host_us:.1f} us per call")
        print("| kernel | launches / call | GPU us / call |")
        print("|---|---:|---:|")
        for label, launches, us in table:
            print(f"| {label} | {launches:g} | {us:.1f} |")
        return
    for _ in range(args.calls):
        fn(a, b, offs)
    torch.cuda.synchronize()
    print(f"{title}: {args.calls} calls done")


if __name__ == "__main__":
    main()
