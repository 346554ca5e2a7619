"""Runs one grouped-mm row of the suite a few times, for `ncu` to profile.

    ncu --launch-skip 3 --launch-count 1 -k regex:GemmUniversal|cutlass|Kernel \
        python3 tools/profile_grouped_mm.py --case deepseek_v3_decode \
        --dist sparse --impl ours

The data, sizes and offsets are those of tools/bench_grouped_mm.py, so a
kernel profiled here is the one timed there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_grouped_mm as bench  # noqa: E402
import grouped_mm_cases as cases  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=str(bench.REPO / "bench" / "moe_shapes.json"))
    parser.add_argument("--case", required=True)
    parser.add_argument("--dist", default="balanced")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--pass", dest="pass_name", default="fwd",
                        choices=["fwd", "dgrad", "wgrad"])
    parser.add_argument("--impl", default="ours", choices=["ours", "stock"])
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()

    suite = cases.load_suite(args.shapes)
    case = next((c for c in suite.cases if c.name == args.case), None)
    if case is None:
        parser.error(f"--case {args.case!r} is not in {args.shapes}; it has "
                     + ", ".join(c.name for c in suite.cases))
    if args.impl == "ours":
        import overlap_ops  # noqa: F401  (registers torch.ops.overlap_ops)
    spec = bench.RowSpec(case, args.dist, args.dtype, args.pass_name)
    gen = torch.Generator(device="cuda").manual_seed(0)
    a, b = bench._operands(spec, gen)
    sizes = cases.group_sizes(args.dist, case.M, case.E)
    offs = torch.tensor(cases.offsets(sizes), device="cuda", dtype=torch.int32)
    fn = bench._callables(inductor=False)[args.impl]
    for _ in range(args.calls):
        fn(a, b, offs)
    torch.cuda.synchronize()
    print(f"{args.impl} {case.name} {args.dist} {args.dtype} {args.pass_name}: "
          f"{args.calls} calls done")


if __name__ == "__main__":
    main()
