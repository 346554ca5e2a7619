"""MoE FFN layer benchmark: overlap_ops vs stock ``torch._grouped_mm``.

One MoE feed-forward layer as torchtitan builds it (``moe.py``: router,
token-choice top-k, ``GroupedExperts``), everything on the device:

    router    logits = x @ w_router^T; probs = softmax(logits.float());
              top_p, top_e = probs.topk(top_k)            (no renormalisation)
    permute   slots sorted by expert (stable argsort), counts per expert
              (scatter_add), int32 end offsets (cumsum); optional padding of
              every group to `align` rows, as torchtitan does for the stock
              kernel; rows gathered with index_select
    experts   h = grouped_mm(x_perm, w13^T, offs)   2d x 3d, (R, 2 * hidden)
              h = silu(h[:, :hidden]) * h[:, hidden:]           (SwiGLU)
              y = grouped_mm(h, w2^T, offs)          2d x 3d, (R, dim)
    combine   y gathered back to (tokens, top_k, dim), weighted by top_p, summed

No ``.item()``, ``.tolist()``, ``nonzero`` or ``bincount`` (its CUDA kernel
reads the input's max on the host to size the output: a sync). The weights
are stored as torchtitan stores them, w13 (E, 2 * hidden, dim) and w2
(E, dim, hidden), and passed transposed.

Shapes come from the suite (``bench/moe_shapes.json``): a layer pairs the
``<name>_w13`` and ``<name>_w2`` cases; dim = w13.K, hidden = w2.K (or
w13.N / 2 without a w2 case), E = w13.E, rows M = w13.M and
tokens = M / top_k. The layer always fuses w1 | w3, so w13 has 2 * hidden
columns even where the suite's w13 case is w1 alone (mixtral_8x7b: N = hidden).
top_k per model is ``TOP_K`` below.

For each layer and each implementation (ours: ``torch.ops.overlap_ops.
grouped_mm``; stock: ``torch._grouped_mm`` with routing to ours off) it
times forward (autograd recording, as in training) and forward + backward
(``out.backward(dout)`` with a dense random ``dout``), eager and under
``torch.compile(fullgraph=True)``. Step time is the median of per-step
CUDA-event timings after warm-up, rotating among input sets (new tokens,
so new routing, every step). A failure is reported as n/a with the first
line of its error. By default every (layer, implementation) runs in its own
process, so a failure that kills the CUDA context (a device-side assert in
the stock kernel) cannot take the other rows with it.

Host syncs: one extra step of each mode runs under
``torch.cuda.set_sync_debug_mode("warn")``; c10 then issues one warning per
synchronising CUDA call it knows about (stream/device synchronize,
device-to-host copies incl. ``.item()``, ``nonzero``, ...), and the
warnings are counted with ``warnings.catch_warnings(record=True)``. Syncs
hidden from c10 (raw CUDA calls inside a library) are not counted.

    python3 tools/bench/bench_moe_layer.py --out /tmp/moe            # GPU
    python3 tools/bench/bench_moe_layer.py --quick --out results/tmp    # smoke
    python3 tools/bench/bench_moe_layer.py --device cpu --quick --dtype fp32

Writes ``moe_layer_results.json`` and ``moe_layer_results.md`` under
``--out``; progress goes to stderr and a short table is printed last.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch
import torch.nn.functional as F

from overlap_ops.moe import MoE

REPO = Path(__file__).resolve().parents[2]
JSON_NAME = "moe_layer_results.json"
MD_NAME = "moe_layer_results.md"
IMPLS = ("ours", "stock")
MODES = ("eager", "compiled")
PASSES = ("fwd", "fwd_bwd")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16,
           "fp32": torch.float32}

# Experts each token is routed to, per model of the suite.
TOP_K = {
    "mixtral_8x7b": 2,      # 2 of 8 experts
    "deepseek_v3_ep8": 8,   # 8 routed experts per token; one EP-8 rank
                            # holds 32 of 256, here top-8 of those 32
    "qwen3_30b_a3b": 8,     # 8 of 128 experts
    "gpt_oss_120b": 4,      # 4 of 128 experts
}
DEFAULT_LAYERS = tuple(TOP_K)
# Rows each expert group is padded to for the stock kernel, as torchtitan
# does (TOKEN_GROUP_ALIGN_SIZE_M = 8 for bf16: 16-byte aligned groups; the
# stock 2d x 2d weight-gradient kernel needs it). Ours needs no padding.
_DEFAULT_ALIGN = {"ours": 1, "stock": 8}


@dataclasses.dataclass(frozen=True)
class LayerShape:
    """One MoE FFN layer: tokens x dim in, experts of width hidden."""

    name: str
    tokens: int
    dim: int
    hidden: int
    experts: int
    top_k: int
    note: str = ""

    @property
    def rows(self) -> int:
        """Rows the grouped GEMMs see (tokens * top_k, before padding)."""
        return self.tokens * self.top_k

    def flops(self, backward: bool) -> float:
        """GEMM FLOPs of the experts (router and elementwise ignored)."""
        fwd = 2.0 * self.rows * self.dim * 3 * self.hidden
        return fwd * 3 if backward else fwd


QUICK_SHAPE = LayerShape("quick", tokens=256, dim=128, hidden=192,
                         experts=8, top_k=2, note="synthetic smoke test")


def load_layer_shapes(path: Path,
                      names: Optional[Sequence[str]] = None
                      ) -> list[LayerShape]:
    """Layers built from the suite's ``<name>_w13`` / ``<name>_w2`` pairs.

    Raises ValueError for an unknown layer or an inconsistent pair.
    """
    cases = {c["name"]: c for c in json.loads(Path(path).read_text())["cases"]}
    shapes = []
    for name in names or DEFAULT_LAYERS:
        if name not in TOP_K:
            raise ValueError(f"unknown layer {name!r}: expected one of "
                             f"{', '.join(TOP_K)}")
        w13 = cases.get(f"{name}_w13")
        if w13 is None:
            raise ValueError(f"{path}: no case {name}_w13")
        w2 = cases.get(f"{name}_w2")
        shapes.append(_layer_from_cases(name, w13, w2, TOP_K[name]))
    return shapes


def _layer_from_cases(name: str, w13: dict, w2: Optional[dict],
                      top_k: int) -> LayerShape:
    notes = []
    if w2 is None:
        hidden = w13["N"] // 2
        notes.append("no w2 case: hidden = w13.N / 2")
    else:
        hidden = w2["K"]
        for field, want in (("N", w13["K"]), ("E", w13["E"]),
                            ("M", w13["M"])):
            if w2[field] != want:
                raise ValueError(f"{name}: w2.{field} = {w2[field]} does not "
                                 f"match the w13 case ({want})")
    if w13["N"] != 2 * hidden:
        notes.append(f"w13 case N = {w13['N']} is w1 alone; the layer fuses "
                     f"w1|w3 (N = {2 * hidden})")
    if w13["M"] % top_k:
        raise ValueError(f"{name}: M = {w13['M']} is not a multiple of "
                         f"top_k = {top_k}")
    return LayerShape(name, tokens=w13["M"] // top_k, dim=w13["K"],
                      hidden=hidden, experts=w13["E"], top_k=top_k,
                      note="; ".join(notes))


# --- the layer ---------------------------------------------------------------


GroupedMM = Callable[[torch.Tensor, torch.Tensor, torch.Tensor],
                     torch.Tensor]


def ours_grouped_mm(a: torch.Tensor, b: torch.Tensor,
                    offs: torch.Tensor) -> torch.Tensor:
    """torch.ops.overlap_ops.grouped_mm."""
    return torch.ops.overlap_ops.grouped_mm(a, b, offs, None, None)


def stock_grouped_mm(a: torch.Tensor, b: torch.Tensor,
                     offs: torch.Tensor) -> torch.Tensor:
    """torch._grouped_mm as shipped (the caller keeps routing off)."""
    return torch._grouped_mm(a, b, offs=offs)


# --- measuring ---------------------------------------------------------------


def host_sync_sites(fn: Callable[[], Any]) -> list[str]:
    """Synchronising CUDA calls fn makes, as c10's sync debug mode sees them:
    one entry per sync, the innermost Python frame (file:line function) that
    issued it, so a forward sync can be traced to its op. Syncs inside
    backward are counted too, but the autograd engine re-raises their
    warnings after backward, so they all point at the backward() call."""
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    sites: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        original = warnings.showwarning

        def record(message, category, filename, lineno, file=None,
                   line=None):
            if "synchronizing" not in str(message):
                return original(message, category, filename, lineno, file,
                                line)
            frame = traceback.extract_stack()[-3]
            sites.append(f"{Path(frame.filename).name}:{frame.lineno} "
                         f"{frame.name}")
            return None

        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
            warnings.showwarning = original
    torch.cuda.synchronize()
    return sites


def count_host_syncs(fn: Callable[[], Any]) -> int:
    """Number of synchronising CUDA calls fn makes (see host_sync_sites)."""
    return len(host_sync_sites(fn))


def time_steps(step: Callable[[int], Any], iters: int, warmup: int,
               device: torch.device) -> list[float]:
    """Milliseconds of each of `iters` calls step(i) after `warmup` calls:
    CUDA events on the GPU, perf_counter on the CPU."""
    for i in range(warmup):
        step(i)
    times = []
    if device.type == "cuda":
        torch.cuda.synchronize()
        pairs = []
        for i in range(iters):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            step(warmup + i)
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in pairs]
    else:
        for i in range(iters):
            t0 = time.perf_counter()
            step(warmup + i)
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def _first_line(exc: BaseException) -> str:
    """First line of the error, and of its root cause when it differs
    (torch.compile wraps the kernel's own message)."""
    def line(e: BaseException) -> str:
        text = str(e).strip()
        return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"

    root = exc
    while (root.__cause__ or root.__context__) is not None:
        root = root.__cause__ or root.__context__
    if root is exc:
        return line(exc)[:300]
    cause = line(root)
    if len(cause) > 200:  # the wrapped kernel message sits at the end
        cause = "..." + cause[-197:]
    return f"{line(exc)[:100]} <- {cause}"


def bench_layer(shape: LayerShape, impl: str, args: argparse.Namespace
                ) -> dict[str, Any]:
    """Times every mode x pass of one layer and implementation."""
    device = torch.device(args.device)
    dtype = _DTYPES[args.dtype]
    if impl == "ours":
        import overlap_ops  # noqa: F401  (registers the op)
        grouped_mm = ours_grouped_mm
    else:
        _routing_off()
        grouped_mm = stock_grouped_mm
    align = args.align_ours if impl == "ours" else args.align_stock
    torch.manual_seed(args.seed)
    layer = MoE(shape.dim, shape.hidden, shape.experts, shape.top_k,
                align=align, grouped_mm=grouped_mm, device=device,
                dtype=dtype)
    inputs = [torch.randn(shape.tokens, shape.dim, device=device, dtype=dtype)
              for _ in range(args.input_sets)]
    dout = torch.randn(shape.tokens, shape.dim, device=device, dtype=dtype)
    result: dict[str, Any] = {"layer": shape.name, "impl": impl,
                              "align": align, "runs": {}}
    for mode in args.modes:
        fn = layer if mode == "eager" else torch.compile(layer, fullgraph=True)
        for pass_name in PASSES:
            key = f"{mode}/{pass_name}"
            _progress(f"{shape.name} {impl} {key}")
            try:
                result["runs"][key] = _measure(fn, layer, inputs, dout,
                                               pass_name, device, args)
            except Exception as exc:  # reported as n/a, the run goes on
                result["runs"][key] = {"error": _first_line(exc)}
                _progress(f"  n/a: {_first_line(exc)}")
    return result


def _measure(fn: Callable, layer: MoE, inputs: list[torch.Tensor],
             dout: torch.Tensor, pass_name: str, device: torch.device,
             args: argparse.Namespace) -> dict[str, Any]:
    backward = pass_name == "fwd_bwd"

    def step(i: int) -> None:
        out = fn(inputs[i % len(inputs)])
        if backward:
            out.backward(dout)

    def clean_step(i: int) -> None:
        layer.zero_grad(set_to_none=True)
        step(i)

    clean_step(0)  # compiles, if compiled; errors surface here
    if device.type == "cuda":
        torch.cuda.synchronize()
    times = time_steps(clean_step, args.iters, args.warmup, device)
    # Twice: a first call in sync debug mode can meet one-time setup (a
    # lazily created handle or stream) that syncs once per process.
    sites = (host_sync_sites(lambda: step(1)) if device.type == "cuda"
             else None)
    again = (host_sync_sites(lambda: step(2)) if device.type == "cuda"
             else None)
    syncs = None if again is None else len(again)
    median = statistics.median(times)
    return {"median_ms": median, "min_ms": min(times), "runs": len(times),
            "host_syncs": syncs, "host_sync_sites": again,
            "first_call_sync_sites": sites}


def _routing_off() -> None:
    """Stock means stock: make sure torch._grouped_mm is not routed to ours."""
    try:
        import overlap_ops
    except ImportError:
        return
    overlap_ops.route_torch_grouped_mm(False)


def _progress(msg: str) -> None:
    print(f"[bench_moe_layer] {msg}", file=sys.stderr, flush=True)


# --- running each (layer, impl) in its own process ---------------------------


def _child_argv(shape: LayerShape, impl: str,
                args: argparse.Namespace) -> list[str]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--_child",
            json.dumps(dataclasses.asdict(shape)), "--_impl", impl,
            "--device", args.device, "--dtype", args.dtype,
            "--modes", ",".join(args.modes), "--iters", str(args.iters),
            "--warmup", str(args.warmup), "--input-sets",
            str(args.input_sets), "--align-ours", str(args.align_ours),
            "--align-stock", str(args.align_stock), "--seed", str(args.seed)]
    return argv


def _run_isolated(shape: LayerShape, impl: str,
                  args: argparse.Namespace) -> dict[str, Any]:
    try:
        proc = subprocess.run(_child_argv(shape, impl, args),
                              stdout=subprocess.PIPE, stderr=None, text=True,
                              timeout=args.child_timeout)
    except subprocess.TimeoutExpired:
        why = f"timed out after {args.child_timeout:.0f} s"
    else:
        for line in reversed(proc.stdout.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        why = f"process exited with {proc.returncode} (see stderr)"
    return {"layer": shape.name, "impl": impl, "runs": {
        f"{m}/{p}": {"error": why} for m in args.modes for p in PASSES}}


# --- reports -----------------------------------------------------------------


def _cell(run: Optional[dict]) -> str:
    if not run:
        return "-"
    if "error" in run:
        return f"n/a ({run['error']})"
    syncs = run.get("host_syncs")
    sync_text = "" if syncs is None else f", {syncs} sync"
    return f"{run['median_ms']:.3f} ms{sync_text}"


def render_markdown(data: dict[str, Any]) -> str:
    """Markdown report: shapes, then one table per pass."""
    meta = data["meta"]
    lines = [
        "# MoE FFN layer: overlap_ops vs stock torch._grouped_mm", "",
        f"{meta['device_name']}, torch {meta['torch']}, {meta['dtype']}. "
        f"Median step time of {meta['iters']} CUDA-event "
        "timed steps; host syncs counted in one extra step with "
        "torch.cuda.set_sync_debug_mode('warn'). Groups padded to "
        f"{meta['align']['stock']} rows for stock (as torchtitan), "
        f"{meta['align']['ours']} for ours.", "",
        "| layer | tokens | dim | hidden | E | top_k | note |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for s in data["shapes"]:
        lines.append(f"| {s['name']} | {s['tokens']} | {s['dim']} | "
                     f"{s['hidden']} | {s['experts']} | {s['top_k']} | "
                     f"{s['note']} |")
    for pass_name in PASSES:
        lines += ["", f"## {pass_name}", "",
                  "| layer | mode | ours | stock | stock / ours |",
                  "|---|---|---|---|---:|"]
        for layer, mode, ours, stock in _rows(data, pass_name):
            lines.append(f"| {layer} | {mode} | {_cell(ours)} | "
                         f"{_cell(stock)} | {_ratio(ours, stock)} |")
    return "\n".join(lines) + "\n"


def _rows(data: dict[str, Any], pass_name: str):
    by_key = {(r["layer"], r["impl"]): r for r in data["results"]}
    for s in data["shapes"]:
        for mode in data["meta"]["modes"]:
            key = f"{mode}/{pass_name}"
            ours = by_key.get((s["name"], "ours"), {}).get("runs", {}).get(key)
            stock = by_key.get((s["name"], "stock"), {}).get("runs", {}).get(
                key)
            yield s["name"], mode, ours, stock


def _ratio(ours: Optional[dict], stock: Optional[dict]) -> str:
    if not ours or not stock or "error" in ours or "error" in stock:
        return "-"
    return f"{stock['median_ms'] / ours['median_ms']:.2f}"


def summary_table(data: dict[str, Any]) -> str:
    """The short table printed last: ms (host syncs) per layer and mode."""
    head = f"{'layer':<18} {'mode':<9} {'pass':<8} {'ours':>18} {'stock':>18}"
    lines = [head, "-" * len(head)]

    def short(run: Optional[dict]) -> str:
        if not run:
            return "-"
        if "error" in run:
            return "n/a"
        syncs = run.get("host_syncs")
        return f"{run['median_ms']:.3f} ({'-' if syncs is None else syncs})"

    for pass_name in PASSES:
        for layer, mode, ours, stock in _rows(data, pass_name):
            lines.append(f"{layer:<18} {mode:<9} {pass_name:<8} "
                         f"{short(ours):>18} {short(stock):>18}")
    lines.append("ms per step, median (host syncs per step); n/a: see "
                 f"{MD_NAME}")
    return "\n".join(lines)


def write_reports(data: dict[str, Any], out: Path) -> None:
    """JSON (full data) and markdown under out."""
    out.mkdir(parents=True, exist_ok=True)
    (out / JSON_NAME).write_text(json.dumps(data, indent=1) + "\n")
    (out / MD_NAME).write_text(render_markdown(data))


# --- command line ------------------------------------------------------------


def _csv(choices: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        items = [t for t in text.split(",") if t]
        bad = [t for t in items if t not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated subset of {', '.join(choices)}")
        return items
    return parse


def _parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description="MoE FFN layer: overlap_ops vs torch._grouped_mm")
    parser.add_argument("--shapes", default=str(REPO / "bench" /
                                                "moe_shapes.json"))
    parser.add_argument("--layers", type=_csv(tuple(TOP_K)),
                        default=list(DEFAULT_LAYERS))
    parser.add_argument("--impls", type=_csv(IMPLS), default=list(IMPLS))
    parser.add_argument("--modes", type=_csv(MODES), default=list(MODES))
    parser.add_argument("--dtype", choices=tuple(_DTYPES), default="bf16")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--input-sets", type=int, default=4,
                        help="token batches rotated through (new routing "
                        "every step)")
    parser.add_argument("--align-ours", type=int, default=_DEFAULT_ALIGN["ours"])
    parser.add_argument("--align-stock", type=int,
                        default=_DEFAULT_ALIGN["stock"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: one small synthetic layer, few steps")
    parser.add_argument("--no-isolate", action="store_true",
                        help="run every layer in this process")
    parser.add_argument("--child-timeout", type=float, default=300.0)
    parser.add_argument("--out", default=str(REPO / "results" / "tmp"))
    parser.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_impl", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.iters, args.warmup, args.input_sets = 3, 1, 2
    return args


def _shapes(args: argparse.Namespace) -> list[LayerShape]:
    if args.quick:
        return [QUICK_SHAPE]
    return load_layer_shapes(Path(args.shapes), args.layers)


def _meta(args: argparse.Namespace) -> dict[str, Any]:
    device = torch.device(args.device)
    name = (torch.cuda.get_device_name(device) if device.type == "cuda"
            else "cpu")
    return {"device_name": name, "torch": torch.__version__,
            "dtype": args.dtype, "modes": args.modes, "iters": args.iters,
            "warmup": args.warmup, "input_sets": args.input_sets,
            "align": {"ours": args.align_ours, "stock": args.align_stock},
            "top_k": TOP_K, "quick": args.quick,
            "sync_count_method": "set_sync_debug_mode('warn') + "
            "warnings.catch_warnings, one step per mode"}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parse_args(argv)
    if args._child:
        shape = LayerShape(**json.loads(args._child))
        print(json.dumps(bench_layer(shape, args._impl, args)), flush=True)
        return 0
    shapes = _shapes(args)
    data = {"meta": _meta(args), "shapes": [dataclasses.asdict(s)
                                            for s in shapes], "results": []}
    out = Path(args.out)
    isolate = not args.no_isolate and torch.device(args.device).type == "cuda"
    for shape in shapes:
        for impl in args.impls:
            run = (_run_isolated(shape, impl, args) if isolate
                   else bench_layer(shape, impl, args))
            data["results"].append(run)
            write_reports(data, out)  # a run cut short keeps what it measured
    write_reports(data, out)
    print(summary_table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
