#!/usr/bin/env python3
"""GEMM overlapped with a collective, with and without an SM carveout.

The pattern FSDP issues: the compute stream launches the layer's GEMM first,
then the communication stream launches the all-gather of the next layer's
weights (or the reduce-scatter of the previous layer's gradients). Without a
carveout the GEMM takes every SM and the collective's CTAs wait for it; with
``overlap_ops.sm_carveout(k)`` the GEMM leaves k SMs free and the collective
runs beside it. Reported per case, collective and k (median of --iters):

* comm alone / comm under load: the collective's latency without and with
  the GEMM running (from the step's start to the collective's end);
* gemm: the GEMM's time under load;
* step: until both are done; best k = the k with the shortest step.

Two GPUs (NVLink SHARP left off: NCCL_NVLS_ENABLE=0):

    torchrun --nproc-per-node 2 tools/bench/bench_overlap.py --out /tmp/overlap

One GPU: a memory-bound copy kernel with a fixed, NCCL-like number of CTAs
(--synthetic-ctas) on a second stream stands in for the collective:

    python tools/bench/bench_overlap.py --single-gpu --out /tmp/overlap

Writes overlap.json and overlap.md (overlap_single_gpu.* with --single-gpu)
to --out and prints a short table last (rank 0 only).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Callable, Optional

import torch

from grouped_mm_cases import DEFAULT_SUITE

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CASES = "mixtral_8x7b_w13,deepseek_v3_ep8_w2,qwen3_30b_a3b_w13"
DEFAULT_CARVEOUTS = "0,8,16,24,32,48,66"


@dataclasses.dataclass
class Result:
    """Median timings (ms) of one case x collective x carveout k."""

    case: str
    collective: str
    impl: str  # ours (overlap_ops.sm_carveout) | stock (context only)
    k: int
    comm_bytes: int
    gemm_tflop: float
    comm_alone_ms: float
    gemm_alone_ms: float
    comm_under_load_ms: float
    gemm_under_load_ms: float
    step_ms: float


def _parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", type=Path, default=DEFAULT_SUITE)
    p.add_argument("--cases", default=DEFAULT_CASES,
                   help="comma-separated case names of the shapes file")
    p.add_argument("--collectives", default="all_gather,reduce_scatter")
    p.add_argument("--carveouts", default=DEFAULT_CARVEOUTS)
    p.add_argument("--stock", action="store_true",
                   help="also run stock PyTorch with only the context set")
    p.add_argument("--gemms-per-step", type=int, default=1)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--single-gpu", action="store_true",
                   help="synthetic memory-bound kernel instead of NCCL")
    p.add_argument("--synthetic-ctas", type=int, default=32,
                   help="CTAs of the synthetic kernel (NCCL-like channels)")
    p.add_argument("--nccl-ctas", type=int, default=None, metavar="K",
                   help="cap NCCL at K CTAs (overlap_ops.nccl_options), so "
                   "k = K is the partition matched to the communicator")
    p.add_argument("--out", type=Path, default=REPO / "results" / "overlap")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------
# The stand-ins for communication
# ---------------------------------------------------------------------------


def _synthetic_copy(ctas: int) -> Callable[[torch.Tensor, torch.Tensor], None]:
    """A memory-bound copy with exactly `ctas` CTAs (a grid-stride loop), so
    it needs free SMs the way NCCL's channels do. Falls back to copy_ (many
    CTAs) without Triton."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return lambda dst, src: dst.copy_(src)

    @triton.jit
    def copy_kernel(src, dst, n, BLOCK: tl.constexpr, CTAS: tl.constexpr):
        pid = tl.program_id(0)
        for start in range(pid * BLOCK, n, CTAS * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)

    def launch(dst: torch.Tensor, src: torch.Tensor) -> None:
        copy_kernel[(ctas,)](src, dst, src.numel(), BLOCK=4096, CTAS=ctas,
                             num_warps=8)

    return launch


def _make_comm(kind: str, nbytes: int, args: argparse.Namespace,
               device: torch.device) -> Callable[[], None]:
    """Enqueues one collective (or the synthetic kernel) on the current
    stream. nbytes: the gathered (all-gather output) or reduced
    (reduce-scatter input) size, as FSDP's per-layer weights."""
    if args.single_gpu:
        src = torch.randn(nbytes // 2, device=device, dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        copy = _synthetic_copy(args.synthetic_ctas)
        return lambda: copy(dst, src)
    import torch.distributed as dist

    world = dist.get_world_size()
    numel = nbytes // 2 // world * world
    full = torch.randn(numel, device=device, dtype=torch.bfloat16)
    shard = torch.randn(numel // world, device=device, dtype=torch.bfloat16)
    if kind == "all_gather":
        return lambda: dist.all_gather_into_tensor(full, shard)
    if kind == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(shard, full)
    raise ValueError(f"unknown collective {kind!r}")


# ---------------------------------------------------------------------------
# Timing one step
# ---------------------------------------------------------------------------


def _align_ranks() -> None:
    torch.cuda.synchronize()
    if not _single_process():
        import torch.distributed as dist

        dist.barrier()


def _single_process() -> bool:
    import torch.distributed as dist

    return not (dist.is_available() and dist.is_initialized())


def _time_alone(fn: Callable[[], None], iters: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        _align_ranks()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _time_overlapped(gemm: Callable[[], None], comm: Callable[[], None],
                     comm_stream: torch.cuda.Stream, iters: int,
                     warmup: int) -> tuple[float, float, float]:
    """(comm, gemm, step) medians in ms: GEMM launched first, then the
    collective on comm_stream, both starting at the same event."""
    main = torch.cuda.current_stream()
    comm_t, gemm_t, step_t = [], [], []
    for i in range(warmup + iters):
        _align_ranks()
        start, gemm_done, comm_done, end = (
            torch.cuda.Event(enable_timing=True) for _ in range(4))
        start.record(main)
        comm_stream.wait_event(start)
        gemm()
        gemm_done.record(main)
        with torch.cuda.stream(comm_stream):
            comm()
            comm_done.record(comm_stream)
        main.wait_stream(comm_stream)
        end.record(main)
        end.synchronize()
        if i >= warmup:
            comm_t.append(start.elapsed_time(comm_done))
            gemm_t.append(start.elapsed_time(gemm_done))
            step_t.append(start.elapsed_time(end))
    return (statistics.median(comm_t), statistics.median(gemm_t),
            statistics.median(step_t))


def _in_carveout(impl: str, k: int, fn: Callable[[], object]) -> object:
    if impl == "ours":
        import overlap_ops

        with overlap_ops.sm_carveout(k):
            return fn()
    previous = torch._C._get_sm_carveout_experimental()
    torch._C._set_sm_carveout_experimental(k if k else None)
    try:
        return fn()
    finally:
        torch._C._set_sm_carveout_experimental(previous)


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------


def run(args: argparse.Namespace, device: torch.device) -> list[Result]:
    """Every case x collective x impl x k; returns all results."""
    suite = json.loads(args.shapes.read_text())
    cases = {c["name"]: c for c in suite["cases"]}
    ks = carveout_list(args)
    impls = ["ours"] + (["stock"] if args.stock else [])
    collectives = (["synthetic"] if args.single_gpu
                   else [c for c in args.collectives.split(",") if c])
    comm_stream = torch.cuda.Stream(device=device)
    results = []
    for name in [c for c in args.cases.split(",") if c]:
        case = cases[name]
        m, k_dim, n, e = case["M"], case["K"], case["N"], case["E"]
        x = torch.randn(m, k_dim, device=device, dtype=torch.bfloat16)
        w = torch.randn(k_dim, n, device=device, dtype=torch.bfloat16)

        def gemm() -> None:
            for _ in range(args.gemms_per_step):
                torch.mm(x, w)

        tflop = 2.0 * m * n * k_dim * args.gemms_per_step / 1e12
        nbytes = e * k_dim * n * 2  # the layer's bf16 expert weights
        for collective in collectives:
            comm = _make_comm(collective, nbytes, args, device)
            with torch.cuda.stream(comm_stream):
                comm_alone = _time_alone(comm, args.iters, args.warmup)
            for impl in impls:
                for k in ks:
                    gemm_alone = _in_carveout(impl, k, lambda: _time_alone(
                        gemm, args.iters, args.warmup))
                    comm_t, gemm_t, step_t = _in_carveout(
                        impl, k, lambda: _time_overlapped(
                            gemm, comm, comm_stream, args.iters,
                            args.warmup))
                    results.append(Result(
                        name, collective, impl, k, nbytes, tflop, comm_alone,
                        gemm_alone, comm_t, gemm_t, step_t))
            del comm
        del x, w
        torch.cuda.empty_cache()
    return results


def best_k(results: list[Result],
           matched_k: Optional[int] = None) -> dict[str, dict[str, object]]:
    """Per case/collective/impl: the k with the shortest step (the
    hand-tuned k), its gain over k = 0, and the step at ``matched_k``, the
    k that matches the communication's CTAs (what ``sm_carveout("auto")``
    picks)."""
    best = {}
    keys = sorted({(r.case, r.collective, r.impl) for r in results})
    for case, collective, impl in keys:
        group = [r for r in results if (r.case, r.collective, r.impl)
                 == (case, collective, impl)]
        top = min(group, key=lambda r: r.step_ms)
        base = next((r for r in group if r.k == 0), None)
        matched = next((r for r in group if r.k == matched_k), None)
        best[f"{case}/{collective}/{impl}"] = {
            "k": top.k, "step_ms": top.step_ms,
            "step_ms_k0": base.step_ms if base else None,
            "speedup_vs_k0": (base.step_ms / top.step_ms) if base else None,
            "matched_k": matched_k if matched else None,
            "step_ms_matched": matched.step_ms if matched else None,
            "matched_over_best": (matched.step_ms / top.step_ms)
            if matched else None,
        }
    return best


def markdown(results: list[Result], best: dict[str, dict[str, object]],
             meta: dict[str, object]) -> str:
    lines = [
        f"# GEMM + {meta['mode']} overlap under an SM carveout "
        f"({meta['device']}, {meta['sms']} SMs, torch {meta['torch']})",
        "",
        "GEMM launched first on the compute stream, then the collective on "
        "the communication stream. Times in ms (median); comm is measured "
        "from the step's start.",
        "",
        "| case | collective | impl | k | comm alone | comm under load | "
        "gemm alone | gemm under load | step | GEMM TFLOP/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.case} | {r.collective} | {r.impl} | {r.k} | "
            f"{r.comm_alone_ms:.3f} | {r.comm_under_load_ms:.3f} | "
            f"{r.gemm_alone_ms:.3f} | {r.gemm_under_load_ms:.3f} | "
            f"{r.step_ms:.3f} | {r.gemm_tflop / (r.gemm_under_load_ms * 1e-3):.0f} |")
    def cell(value: object, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    lines += ["", "## Best k (shortest step) and the matched k", "",
              "Matched k: the communication's CTAs "
              f"({meta.get('matched_k') or 'none given'}), the k "
              "`sm_carveout(\"auto\")` takes.", "",
              "| case/collective/impl | best k | step | step at k=0 | "
              "speedup | step at matched k | matched / best |",
              "|---|---|---|---|---|---|---|"]
    for key, b in best.items():
        lines.append(
            f"| {key} | {b['k']} | {b['step_ms']:.3f} | "
            f"{cell(b['step_ms_k0'], '.3f')} | "
            f"{cell(b['speedup_vs_k0'], '.2f')} | "
            f"{cell(b['step_ms_matched'], '.3f')} | "
            f"{cell(b['matched_over_best'], '.2f')} |")
    return "\n".join(lines) + "\n"


def matched_k(args: argparse.Namespace) -> Optional[int]:
    """The k that matches the communication's CTAs: the synthetic kernel's
    on one GPU, NCCL's cap (--nccl-ctas) on several."""
    return args.synthetic_ctas if args.single_gpu else args.nccl_ctas


def carveout_list(args: argparse.Namespace) -> list[int]:
    """--carveouts, with the matched k added so it is always measured."""
    ks = [int(k) for k in args.carveouts.split(",") if k.strip()]
    matched = matched_k(args)
    if matched is not None and matched not in ks:
        ks.append(matched)
    return sorted(ks)


def _init_distributed(nccl_ctas: Optional[int] = None) -> torch.device:
    # NVLink SHARP (NVLS, multicast) stays off: the measurement is about
    # NCCL's SM-driven channels, and multicast use can put the GPUs of a
    # shared host out of service. Set before NCCL initialises.
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    options = None
    if nccl_ctas:
        import overlap_ops

        options = overlap_ops.nccl_options(nccl_ctas)
    dist.init_process_group("nccl", device_id=device, pg_options=options)
    return device


def main(argv: Optional[list[str]] = None) -> int:
    args = _parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_overlap: needs CUDA GPUs", file=sys.stderr)
        return 2
    import overlap_ops  # noqa: F401  (registers the carveout routes)

    if args.single_gpu:
        device = torch.device("cuda", torch.cuda.current_device())
        rank = 0
    else:
        device = _init_distributed(args.nccl_ctas)
        import torch.distributed as dist

        rank = dist.get_rank()
    props = torch.cuda.get_device_properties(device)
    meta = {"device": props.name, "sms": props.multi_processor_count,
            "torch": torch.__version__,
            "mode": "synthetic kernel" if args.single_gpu else "NCCL",
            "world_size": 1 if args.single_gpu else
            torch.distributed.get_world_size(),
            "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"),
            "synthetic_ctas": args.synthetic_ctas if args.single_gpu else None,
            "matched_k": matched_k(args),
            "iters": args.iters}
    results = run(args, device)
    best = best_k(results, meta["matched_k"])
    if rank == 0:
        stem = "overlap_single_gpu" if args.single_gpu else "overlap"
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{stem}.json").write_text(json.dumps(
            {"meta": meta, "results": [dataclasses.asdict(r) for r in results],
             "best": best}, indent=1))
        (args.out / f"{stem}.md").write_text(markdown(results, best, meta))
        print(f"wrote {args.out}/{stem}.json, {stem}.md\n")
        print(f"{'case/collective/impl':48s} {'k':>3s} {'comm':>8s} "
              f"{'gemm':>8s} {'step':>8s}")
        for r in results:
            print(f"{r.case + '/' + r.collective + '/' + r.impl:48s} "
                  f"{r.k:3d} {r.comm_under_load_ms:8.3f} "
                  f"{r.gemm_under_load_ms:8.3f} {r.step_ms:8.3f}")
        print()
        for key, b in best.items():
            speedup = b["speedup_vs_k0"]
            print(f"best k {key}: k={b['k']} step {b['step_ms']:.3f} ms"
                  + ("" if speedup is None else f" ({speedup:.2f}x vs k=0)")
                  + ("" if b["step_ms_matched"] is None else
                     f"; matched k={b['matched_k']} step "
                     f"{b['step_ms_matched']:.3f} ms "
                     f"({b['matched_over_best']:.2f}x best)"))
    if not args.single_gpu:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
