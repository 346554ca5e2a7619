"""The CUDA kernels one call launches, with their grid sizes, read from the
profiler's chrome trace (``args.grid``). Shared by the carveout tests."""

from __future__ import annotations

import contextlib
import json
import tempfile
import unittest
from typing import Callable, Iterator

import torch


def launched_kernels(fn: Callable[[], object]) -> list[tuple[str, int]]:
    """(name, CTAs launched) for every CUDA kernel of one call of fn. fn runs
    once before, so one-time setup kernels stay out of the trace."""
    return [(name, ctas) for name, ctas, _ in launched_kernels_on_streams(fn)]


@contextlib.contextmanager
def carveout_set(carveout: int | None) -> Iterator[None]:
    """torch._C._set_sm_carveout_experimental(carveout) (None or 0: none)
    inside a with block; the previous setting after it, also after an
    exception."""
    previous = torch._C._get_sm_carveout_experimental()
    torch._C._set_sm_carveout_experimental(carveout or None)
    try:
        yield
    finally:
        torch._C._set_sm_carveout_experimental(previous)


def launched_kernels_under_carveout(
        fn: Callable[[], object], carveout) -> list[tuple[str, int]]:
    """launched_kernels(fn) with the SM carveout set to carveout (None or 0:
    none), then the previous setting."""
    with carveout_set(carveout):
        return launched_kernels(fn)


def _traced_kernels(fn: Callable[[], object]) -> list[tuple[str, int, int]]:
    from torch.profiler import profile, ProfilerActivity

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        with open(f.name) as trace_file:
            trace = json.load(trace_file)
    kernels = []
    for event in trace["traceEvents"]:
        if event.get("cat") == "kernel" and "grid" in event.get("args", {}):
            x, y, z = event["args"]["grid"]
            kernels.append((event["name"], x * y * z,
                            int(event["args"].get("stream", -1))))
    return kernels


def launched_kernels_on_streams(
        fn: Callable[[], object]) -> list[tuple[str, int, int]]:
    """(name, CTAs launched, stream id) for every CUDA kernel of one call of
    fn, as launched_kernels. The stream id is the profiler's (CUPTI's), not
    a cudaStream_t: compare it only with other kernels of the same trace.

    Skips only when the profiler records nothing at all, not even a fill
    (CUPTI has one subscriber, and compute-sanitizer takes it). A call that
    launches no kernel while the profiler works is a failure."""
    fn()
    torch.cuda.synchronize()
    kernels = _traced_kernels(fn)
    if not kernels:
        probe = _traced_kernels(lambda: torch.ones(1, device="cuda").add_(1))
        if not probe:
            raise unittest.SkipTest(
                "the profiler records no CUDA kernels (CUPTI unavailable, "
                "e.g. under compute-sanitizer)")
        raise AssertionError("the call launched no CUDA kernel")
    return kernels
