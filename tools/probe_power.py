#!/usr/bin/env python3
"""SM clock, board power and time per call of each column of one benchmark
row, each column run alone for a few seconds (GPU only).

Why: on the compute-bound Mixtral rows our later timing rounds ran 7-9%
slower than our first while stock's slowed about 2% (results/NOTES.md,
tenth session). If a column draws more power per call, the GPU lowers its
clock for it once it is hot; this shows whether ours does.

    python3 tools/probe_power.py --case mixtral_8x7b_w2 --dist balanced \\
        --dtype bf16 --pass fwd --seconds 3 \\
        --variant large:OVERLAP_OPS_SM90_TILE=large --out results/power

Columns (ours, stock, each --variant) run in the benchmark's balanced order
for --rounds rounds (rounded up to whole designs, so each column runs
equally often in every position and after every other column), each for
--seconds after a 1.2 s warm-up (power.draw
is a 1 s average on Hopper), while nvidia-smi samples
the SM clock, the power draw and the temperature every 50 ms. Each column
is checked against the float64 reference first (as in the benchmark).
Writes power.json and power.md under --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

import bench_grouped_mm as bench
import grouped_mm_cases as cases

_QUERY = "clocks.sm,power.draw,temperature.gpu"
_SAMPLE_MS = 50
# power.draw is a 1 s running average on Hopper: each column runs this
# long before sampling starts, so its samples do not carry the previous
# column's power.
_WARMUP_S = 1.2


@dataclasses.dataclass(frozen=True)
class Sample:
    sm_mhz: float
    watts: float
    celsius: float


def parse_samples(text: str) -> list[Sample]:
    """nvidia-smi's `--format=csv,noheader,nounits` lines of _QUERY; lines
    it could not measure ("[N/A]") or cut short are skipped."""
    samples = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3:
            continue
        try:
            samples.append(Sample(*(float(f) for f in fields)))
        except ValueError:
            continue
    return samples


def summarize(samples: Sequence[Sample]) -> dict[str, Optional[float]]:
    """Median SM clock, mean power, highest temperature (None without
    samples)."""
    if not samples:
        return {"sm_mhz": None, "watts": None, "max_celsius": None}
    return {"sm_mhz": statistics.median(s.sm_mhz for s in samples),
            "watts": statistics.fmean(s.watts for s in samples),
            "max_celsius": max(s.celsius for s in samples)}


def joules_per_call(watts: Optional[float], us: float) -> Optional[float]:
    return None if watts is None else watts * us * 1e-6


def _parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=str(bench.REPO / "bench" /
                                                "moe_shapes.json"))
    parser.add_argument("--case", required=True)
    parser.add_argument("--dist", default="balanced")
    parser.add_argument("--dtype", choices=sorted(cases.DTYPES),
                        default="bf16")
    parser.add_argument("--pass", dest="pass_name", default="fwd",
                        choices=("fwd", "dgrad", "wgrad"))
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="time each column runs per round (default 3)")
    parser.add_argument("--rounds", type=bench._positive_int, default=2)
    parser.add_argument("--variant", type=bench._variant, action="append",
                        default=[], metavar="LABEL:NAME=VALUE",
                        help="an extra column ours@LABEL (repeatable)")
    parser.add_argument("--loop", action="store_true",
                        help="a column 'loop': one cuBLAS mm per group "
                        "(tools/bench_grouped_mm.py --loop)")
    parser.add_argument("--out", default=str(bench.REPO / "results" / "tmp"))
    return parser.parse_args(argv)


def _sampler() -> subprocess.Popen:
    return subprocess.Popen(
        ["nvidia-smi", f"--query-gpu={_QUERY}",
         "--format=csv,noheader,nounits", f"--loop-ms={_SAMPLE_MS}",
         f"--id={torch.cuda.current_device()}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _run_for(calls: Sequence[Any], seconds: float) -> tuple[int, float]:
    """Runs the calls round robin for about `seconds`; returns the call
    count and the time per call in microseconds (from CUDA events around
    the whole run, so it includes the host's short waits every 8 calls:
    meant for rows of milliseconds)."""
    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
    count, begin = 0, time.monotonic()
    start.record()
    while time.monotonic() - begin < seconds:
        for _ in range(8):
            calls[count % len(calls)]()
            count += 1
        torch.cuda.synchronize()  # keeps the host at most 8 calls ahead
    end.record()
    end.synchronize()
    return count, start.elapsed_time(end) * 1e3 / count


def _probe(args: argparse.Namespace) -> dict[str, Any]:
    suite = cases.load_suite(args.shapes)
    case = next((c for c in suite.cases if c.name == args.case), None)
    if case is None:
        raise SystemExit(f"probe_power: no case {args.case!r} in "
                         f"{args.shapes}")
    spec = bench.RowSpec(case, args.dist, args.dtype, args.pass_name)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    machine = {"floor_peak_tflops": 1.0, "copy_gbps": 1.0,
               "l2_bytes": int(getattr(props, "L2_cache_size", 0)
                               or bench._FALLBACK_L2_BYTES)}
    row, sizes, n_sets = bench._row_header(spec, machine)
    fns = bench._callables(False, args.variant, args.loop)
    checks, calls = bench._prepare_columns(spec, fns, "cuda", sizes, n_sets,
                                           seed=1)
    columns = [name for name in fns if calls.get(name)]
    timer = bench.Timer(0, 0, 0, 0, rounds=args.rounds)
    results = []
    for round_index, order in enumerate(bench.round_orders(columns, timer)):
        for name in order:
            with bench._column_env(fns[name]):
                _run_for(calls[name], _WARMUP_S)
                sampler = _sampler()
                count, us = _run_for(calls[name], args.seconds)
                sampler.terminate()
                text, _ = sampler.communicate(timeout=10)
            stats = summarize(parse_samples(text))
            if stats["sm_mhz"] is None:
                bench._progress(f"round {round_index} {name}: nvidia-smi "
                                "gave no samples")
            results.append({"column": name, "round": round_index,
                            "calls": count, "us_per_call": us, **stats,
                            "joules_per_call":
                                joules_per_call(stats["watts"], us)})
            bench._progress(f"round {round_index} {name}: {us:.1f} us/call, "
                            f"{stats['sm_mhz']} MHz, {stats['watts']} W")
    return {"gpu": props.name, "torch": torch.__version__,
            "source_commit": bench.source_commit(),
            "row": {k: row[k] for k in ("case", "dist", "dtype", "pass",
                                        "flops", "bytes")},
            "checks": {name: (checks[name].get(f"{name}_check"),
                              checks[name].get(f"{name}_error"))
                       for name in fns},
            "seconds": args.seconds, "sample_ms": _SAMPLE_MS,
            "variants": {f"ours@{label}": env
                         for label, env in args.variant},
            "results": results}


def render(probe: dict[str, Any]) -> str:
    """The probe as a markdown table, one line per column and round."""
    r = probe["row"]
    lines = [f"# Power probe: {r['case']} {r['dist']} {r['dtype']} "
             f"{r['pass']}", "",
             f"- GPU: {probe['gpu']}; torch {probe['torch']}; sources "
             f"{probe.get('source_commit', 'not recorded')}; each column "
             f"{probe['seconds']} s per round, nvidia-smi every "
             f"{probe['sample_ms']} ms",
             f"- checks: {probe['checks']}", "",
             "| column | round | us/call | SM MHz (median) | W (mean) | "
             "max C | J/call |",
             "|---|---:|---:|---:|---:|---:|---:|"]

    def cell(value: Optional[float], digits: int) -> str:
        return "n/a" if value is None else f"{value:.{digits}f}"

    for x in probe["results"]:
        lines.append(
            f"| {x['column']} | {x['round']} | {x['us_per_call']:.1f} | "
            f"{cell(x['sm_mhz'], 0)} | {cell(x['watts'], 1)} | "
            f"{cell(x['max_celsius'], 0)} | "
            f"{cell(x['joules_per_call'], 3)} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parse_args(argv)
    if not torch.cuda.is_available() or shutil.which("nvidia-smi") is None:
        print("probe_power: needs a CUDA GPU and nvidia-smi", file=sys.stderr)
        return 1
    bench._import_ours([])
    if args.dtype == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = True  # as the benchmark
    probe = _probe(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "power.json").write_text(json.dumps(probe, indent=1) + "\n")
    (out / "power.md").write_text(render(probe))
    print(render(probe))
    return 0


if __name__ == "__main__":
    sys.exit(main())
