# Owner(s): ["module: benchmarks"]
"""CPU tests of the grouped-GEMM benchmark (tools/bench/bench_grouped_mm.py).

Covers what does not need a GPU: argument parsing and the run plan, the
group sizes of each distribution, FLOPs/bytes/floor math, input rotation,
the float64 per-group check (on CPU tensors), and the markdown/PNG reports
rendered from fake timings, including ``--render``.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest.mock
from typing import Optional
from pathlib import Path

import torch
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools" / "bench"))

import bench_grouped_mm as bench  # noqa: E402
import grouped_mm_cases as cases  # noqa: E402
import grouped_mm_report as report  # noqa: E402
import compare_grouped_mm_runs as compare_runs  # noqa: E402
import merge_grouped_mm_runs as merge_runs  # noqa: E402
import bench_host_overhead as host_overhead  # noqa: E402
import bench_carveout  # noqa: E402
import bench_overlap  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402,F401

_SUITES = [REPO / "bench" / "moe_shapes.json",
           REPO / "bench" / "moe_shapes_extra.json"]
_SHARED_SUITE = REPO.parent / "shared" / "bench" / "moe_shapes.json"


def _parse_fails(argv: list[str]) -> bool:
    """True when argparse rejects argv (its message is swallowed)."""
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            bench._parse_args(argv)
        except SystemExit:
            return True
    return False


class TestBenchArgs(TestCase):
    def test_defaults(self) -> None:
        args = bench._parse_args([])
        self.assertEqual(args.passes, ["fwd"])
        self.assertEqual(args.dtypes, ["bf16", "fp16"])
        self.assertEqual(Path(args.shapes), REPO / "bench" /
                         "moe_shapes.json")
        self.assertFalse(args.inductor)
        self.assertEqual(args.backend_env, [])
        self.assertEqual(Path(args.out), REPO / "results" / "tmp")

    def test_lists_keep_order_and_drop_repeats(self) -> None:
        args = bench._parse_args(["--passes", "wgrad,fwd,wgrad",
                                  "--dtypes", "fp32,bf16"])
        self.assertEqual(args.passes, ["wgrad", "fwd"])
        self.assertEqual(args.dtypes, ["fp32", "bf16"])

    def test_bad_lists_are_rejected(self) -> None:
        self.assertTrue(_parse_fails(["--dtypes", "bf16,int8"]))
        self.assertTrue(_parse_fails(["--passes", "bwd"]))
        self.assertTrue(_parse_fails(["--passes", ","]))
        self.assertTrue(_parse_fails(["--dists", "uniform"]))

    def test_backend_env(self) -> None:
        args = bench._parse_args([
            "--backend-env", "TORCH_GROUPED_MM_BACKEND=sm80",
            "--backend-env", "X=a=b"])
        self.assertEqual(args.backend_env,
                         [("TORCH_GROUPED_MM_BACKEND", "sm80"),
                          ("X", "a=b")])
        self.assertEqual(bench._ours_label(args.backend_env),
                         "ours[TORCH_GROUPED_MM_BACKEND=sm80,X=a=b]")
        self.assertEqual(bench._ours_label([]), "ours")
        self.assertTrue(_parse_fails(["--backend-env", "NOVALUE"]))
        self.assertTrue(_parse_fails(["--backend-env", "=x"]))

    def test_variants(self) -> None:
        args = bench._parse_args([
            "--variant", "sm80:TORCH_GROUPED_MM_BACKEND=sm80",
            "--variant", "checked:TORCH_GROUPED_MM_BACKEND=generic,"
            "TORCH_GROUPED_MM_CHECK_OFFSETS=1"])
        self.assertEqual(args.variant, [
            ("sm80", {"TORCH_GROUPED_MM_BACKEND": "sm80"}),
            ("checked", {"TORCH_GROUPED_MM_BACKEND": "generic",
                         "TORCH_GROUPED_MM_CHECK_OFFSETS": "1"})])
        self.assertEqual(list(bench._callables(False, args.variant)),
                         ["ours", "stock", "ours@sm80", "ours@checked"])
        for bad in ("nolabel", "x:", "x:NOVALUE", "a b:X=1"):
            self.assertTrue(_parse_fails(["--variant", bad]), bad)
        self.assertTrue(_parse_fails(["--variant", "v:A=1",
                                      "--variant", "v:A=2"]))

    def test_aa_control_column(self) -> None:
        args = bench._parse_args(["--aa", "--variant", "off:X=1"])
        self.assertEqual(args.variant, [("off", {"X": "1"}), ("again", {})])
        # Stock is timed twice too, so the repeat carries its noise.
        self.assertEqual(list(bench._callables(False, args.variant)),
                         ["ours", "stock", "ours@off", "ours@again",
                          "stock@again"])
        self.assertEqual(list(bench._callables(False, [("off", {"X": "1"})])),
                         ["ours", "stock", "ours@off"])
        # Its label is kept for it: a variant of that name is refused,
        # with or without --aa.
        self.assertTrue(_parse_fails(["--aa", "--variant", "again:X=1"]))
        self.assertTrue(_parse_fails(["--variant", "again:X=1"]))

    def test_aa_band_line(self) -> None:
        def row(ours, again, check="pass"):
            return {"case": "c", "dist": "d", "ours_us": ours,
                    "ours_check": "pass", "ours@again_us": again,
                    "ours@again_check": check}

        self.assertIsNone(report.aa_band_line([{"ours_us": 1.0}]))
        # 0.97 and 1.05 -> geomean sqrt(0.97 * 1.05) = 1.009; the failed
        # row (3.0) is left out.
        line = report.aa_band_line([row(100.0, 97.0), row(100.0, 105.0),
                                    row(100.0, 300.0, "fail")])
        self.assertIn("0.970-1.050 over 2 rows, geometric mean 1.009", line)
        self.assertNotIn("Stock's", line)
        with_stock = [dict(row(100.0, 97.0), stock_us=200.0,
                           **{"stock@again_us": 190.0}),
                      dict(row(100.0, 105.0), stock_us=200.0,
                           **{"stock@again_us": 206.0})]
        self.assertIn("Stock's (stock@again over stock): 0.950-1.030.",
                      report.aa_band_line(with_stock))

    def test_variant_summary_against_ours(self) -> None:
        def row(case, ours, variant):
            return {"case": case, "dist": "d", "stock_us": 100.0,
                    "ours_us": ours, "ours_check": "pass",
                    "ours@v_us": variant, "ours@v_check": "pass"}

        # variant / ours: 0.5, 2.0 and 1.02 -> geomean 1.02**(1/3).
        table = report._variant_table([row("a", 100.0, 50.0),
                                       row("b", 50.0, 100.0),
                                       row("c", 100.0, 102.0)])
        self.assertIn("| geomean of time / ours' |  |  |  |  | 1.00 | 1.01 "
                      "|  |", table)
        # ours against itself moves no row; the variant: one faster, one
        # slower (1.02 is within 3%).
        self.assertIn("| rows < 0.97 / > 1.03 of ours' |  |  |  |  | 0 / 0 | "
                      "1 / 1 |  |", table)

    def test_a_failed_variant_is_not_best(self) -> None:
        row = {"case": "c", "dist": "d", "stock_us": 10.0, "ours_us": 12.0,
               "ours_check": "pass", "ours@v_us": 5.0, "ours@v_check": "fail"}
        table = "\n".join(report._variant_table([row]))
        self.assertIn("| c | d | 10.0 | 12.0 | 5.0 | 1.20 | n/a | ours |",
                      table)

    def test_render_writes_next_to_its_json_by_default(self) -> None:
        self.assertEqual(bench._parse_args(["--render", "/r"]).out, "/r")
        self.assertEqual(
            bench._parse_args(["--render", "/r", "--out", "/o"]).out, "/o")


class TestBenchPlan(TestCase):
    def setUp(self) -> None:
        self.suite = cases.load_suite(_SUITES[0])

    def test_full_plan_covers_every_case_dist_dtype_pass(self) -> None:
        args = bench._parse_args(["--passes", "fwd,dgrad,wgrad",
                                  "--dtypes", "bf16,fp16,fp32"])
        plan = bench._plan(self.suite, args)
        self.assertEqual(len(plan), 10 * 3 * 3 * 3)
        self.assertEqual(len({(r.case.name, r.dist, r.dtype, r.pass_name)
                              for r in plan}), len(plan))
        self.assertEqual({r.label for r in plan}, {"bf16", "fp16", "tf32"})

    def test_quick_is_two_cases_one_dist(self) -> None:
        plan = bench._plan(self.suite, bench._parse_args(["--quick"]))
        self.assertEqual(len({r.case.name for r in plan}), 2)
        self.assertEqual({r.dist for r in plan}, {"balanced"})
        self.assertEqual(len(plan), 2 * 2)  # x bf16, fp16; fwd

    def test_case_and_dist_filters(self) -> None:
        args = bench._parse_args(["--cases", "qwen3_decode,grin_moe",
                                  "--dists", "sparse"])
        plan = bench._plan(self.suite, args)
        self.assertEqual([(r.case.name, r.dist, r.dtype) for r in plan],
                         [("grin_moe", "sparse", "bf16"),
                          ("grin_moe", "sparse", "fp16"),
                          ("qwen3_decode", "sparse", "bf16"),
                          ("qwen3_decode", "sparse", "fp16")])
        with self.assertRaises(SystemExit):
            bench._plan(self.suite, bench._parse_args(["--cases", "nope"]))


class TestSuites(TestCase):
    def test_bench_copy_matches_shared_suite(self) -> None:
        if not _SHARED_SUITE.exists():
            self.skipTest("no ../shared checkout")
        self.assertEqual(_SUITES[0].read_bytes(), _SHARED_SUITE.read_bytes())

    def test_suites_load_and_differ(self) -> None:
        shared, extra = (cases.load_suite(p) for p in _SUITES)
        self.assertEqual(len(shared.cases), 10)
        self.assertEqual(set(shared.dists), set(cases.DISTS))
        self.assertEqual(set(extra.dists), set(cases.DISTS))
        self.assertFalse({c.name for c in shared.cases}
                         & {c.name for c in extra.cases})
        self.assertFalse({(c.M, c.K, c.N, c.E) for c in shared.cases}
                         & {(c.M, c.K, c.N, c.E) for c in extra.cases})
        self.assertIn("config.json", extra.about)
        for case in extra.cases:  # stock stops at 1024 groups
            self.assertLessEqual(case.E, 1024)

    def test_unknown_dist_is_rejected(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "s.json"
            path.write_text(json.dumps({
                "dists": {"zipf": "?"},
                "cases": [{"name": "x", "M": 1, "K": 1, "N": 1, "E": 1}]}))
            with self.assertRaisesRegex(ValueError, "zipf"):
                cases.load_suite(path)


class TestGroupSizes(TestCase):
    def test_balanced_remainder_to_group_zero(self) -> None:
        self.assertEqual(cases.group_sizes("balanced", 10, 3), [4, 3, 3])
        self.assertEqual(cases.group_sizes("balanced", 2, 4), [2, 0, 0, 0])

    def test_sparse_every_fourth_group_empty(self) -> None:
        self.assertEqual(cases.group_sizes("sparse", 1000, 8),
                         [170, 166, 166, 0, 166, 166, 166, 0])
        self.assertEqual(cases.group_sizes("sparse", 7, 3), [3, 2, 2])
        sizes = cases.group_sizes("sparse", 65536, 128)
        self.assertEqual([g for g, s in enumerate(sizes) if s == 0],
                         list(range(3, 128, 4)))

    def test_skewed_matches_formula(self) -> None:
        gen = torch.Generator().manual_seed(0)
        u = torch.rand(32, generator=gen, dtype=torch.float64)
        weight = u ** 3 + 1e-3
        expected = torch.floor(weight / weight.sum() * 32768).long()
        sizes = cases.group_sizes("skewed", 32768, 32)
        self.assertEqual(sizes[1:], expected[1:].tolist())
        self.assertEqual(sizes[0] - int(expected[0]),
                         32768 - int(expected.sum()))
        self.assertEqual(sizes, cases.group_sizes("skewed", 32768, 32))
        self.assertGreater(max(sizes), 3 * 32768 / 32)  # really skewed

    @parametrize("dist", cases.DISTS)
    def test_every_suite_case_sums_to_m(self, dist: str) -> None:
        for path in _SUITES:
            for case in cases.load_suite(path).cases:
                sizes = cases.group_sizes(dist, case.M, case.E)
                self.assertEqual(len(sizes), case.E)
                self.assertEqual(sum(sizes), case.M)
                self.assertGreaterEqual(min(sizes), 0)
                self.assertEqual(cases.offsets(sizes)[-1], case.M)

    def test_bad_arguments(self) -> None:
        with self.assertRaisesRegex(ValueError, "dist"):
            cases.group_sizes("zipf", 10, 2)
        with self.assertRaisesRegex(ValueError, "groups"):
            cases.group_sizes("balanced", 10, 0)


class TestFloor(TestCase):
    _CASE = cases.Case("t", M=1000, K=64, N=32, E=8)

    def test_fwd_counts_live_weights_once(self) -> None:
        sizes = cases.group_sizes("sparse", 1000, 8)  # 6 live groups
        work = cases.cost(self._CASE, sizes, "fwd", 2)
        self.assertEqual(work.flops, 2 * 1000 * 32 * 64)
        self.assertEqual(work.bytes,
                         2 * (1000 * 64 + 1000 * 32 + 6 * 64 * 32))

    def test_dgrad_and_wgrad_bytes(self) -> None:
        sizes = cases.group_sizes("sparse", 1000, 8)
        dgrad = cases.cost(self._CASE, sizes, "dgrad", 4)
        self.assertEqual(dgrad.bytes,
                         4 * (1000 * 32 + 1000 * 64 + 6 * 32 * 64))
        wgrad = cases.cost(self._CASE, sizes, "wgrad", 2)
        self.assertEqual(wgrad.flops, 2 * 1000 * 32 * 64)
        # the whole (E, K, N) output: empty groups are written as zeros
        self.assertEqual(wgrad.bytes,
                         2 * (1000 * 64 + 1000 * 32 + 8 * 64 * 32))
        with self.assertRaisesRegex(ValueError, "pass"):
            cases.cost(self._CASE, sizes, "bwd", 2)

    def test_floor_is_the_larger_term(self) -> None:
        work = cases.Cost(flops=2 * 10 ** 12, bytes=10 ** 9)
        compute = cases.floor(work, peak_flops=1e15, copy_bytes_per_s=1e12)
        self.assertEqual(compute.bound, "compute")
        self.assertAlmostEqual(compute.us, 2000.0)
        self.assertAlmostEqual(compute.memory_us, 1000.0)
        memory = cases.floor(work, peak_flops=1e16, copy_bytes_per_s=1e12)
        self.assertEqual(memory.bound, "memory")
        self.assertAlmostEqual(memory.us, 1000.0)
        self.assertAlmostEqual(memory.compute_us, 200.0)

    def test_decode_case_is_memory_bound(self) -> None:
        case = cases.Case("qwen3_decode", 1024, 2048, 1536, 128)
        sizes = cases.group_sizes("balanced", case.M, case.E)
        f = cases.floor(cases.cost(case, sizes, "fwd", 2), 800e12, 4e12)
        self.assertEqual(f.bound, "memory")
        self.assertAlmostEqual(
            f.us, 2 * (1024 * 2048 + 1024 * 1536 + 128 * 2048 * 1536)
            / 4e12 * 1e6)

    def test_rotation_sets(self) -> None:
        l2 = 60 << 20
        self.assertEqual(cases.rotation_sets(2 * l2, l2), 1)
        self.assertEqual(cases.rotation_sets(l2, l2), 3)
        self.assertEqual(cases.rotation_sets(68 << 20, l2), 3)
        self.assertEqual(cases.rotation_sets(1, l2), 256)
        # between two uses of a set, >= 2x L2 of other sets is touched
        for size in (1 << 20, 7 << 20, 50 << 20, 119 << 20):
            n = cases.rotation_sets(size, l2)
            self.assertGreaterEqual((n - 1) * size, 2 * l2)


class TestReferenceCheck(TestCase):
    """The float64 per-group check, on CPU tensors."""

    def _setup(self, pass_name: str, dtype: str = "fp32",
               dist: str = "sparse"):
        case = cases.Case("t", 96, 16, 24, 8)
        spec = bench.RowSpec(case, dist, dtype, pass_name)
        sizes = cases.group_sizes(dist, case.M, case.E)
        a, b = bench._operands(spec, torch.Generator().manual_seed(1))
        return spec, sizes, a, b, bench._reference(spec, a, b, sizes)

    @parametrize("pass_name", cases.PASSES)
    def test_operand_layouts(self, pass_name: str) -> None:
        spec, sizes, a, b, ref = self._setup(pass_name, "bf16")
        shapes = {"fwd": ((96, 16), (8, 16, 24), (96, 24)),
                  "dgrad": ((96, 24), (8, 24, 16), (96, 16)),
                  "wgrad": ((16, 96), (96, 24), (8, 16, 24))}[pass_name]
        self.assertEqual((a.shape, b.shape, ref.shape), shapes)
        self.assertEqual(a.dtype, torch.bfloat16)
        self.assertNotEqual(a.abs().sum().item(), 0)  # random, not zeros
        if pass_name == "dgrad":
            self.assertFalse(b.is_contiguous())  # w^T is a view
        if pass_name == "wgrad":
            self.assertFalse(a.is_contiguous())  # a^T is a view

    @parametrize("pass_name", cases.PASSES)
    def test_exact_and_wrong_group(self, pass_name: str) -> None:
        spec, sizes, a, b, ref = self._setup(pass_name)
        out = ref.float()
        self.assertLess(bench._group_error(spec, out, ref, sizes), 1e-6)
        # one wrong group stands out even though the tensor is mostly right
        bad = out.clone()
        if pass_name == "wgrad":
            bad[1] *= 1.1
        else:
            bad[sizes[0]:sizes[0] + sizes[1]] *= 1.1
        self.assertAlmostEqual(bench._group_error(spec, bad, ref, sizes),
                               0.1, places=5)

    def test_nan_and_nonzero_empty_group_fail(self) -> None:
        spec, sizes, a, b, ref = self._setup("wgrad")
        out = ref.float()
        out[3, 0, 0] = 1e-6  # group 3 is empty: must be exact zeros
        self.assertEqual(bench._group_error(spec, out, ref, sizes), math.inf)
        out[3, 0, 0] = float("nan")
        self.assertTrue(math.isnan(bench._group_error(spec, out, ref, sizes)))

    def test_check_column_records_failures(self) -> None:
        spec, sizes, a, b, ref = self._setup("fwd")
        offs = torch.tensor(cases.offsets(sizes), dtype=torch.int32)

        def broken(*args):
            raise RuntimeError("grouped_mm: fp32 is not supported\nmore")

        result = bench._check_column("stock", broken, spec, a, b, offs,
                                     sizes, ref)
        self.assertEqual(result["stock_check"], "n/a")
        self.assertEqual(result["stock_error"],
                         "RuntimeError: grouped_mm: fp32 is not supported")
        wrong = bench._check_column(
            "ours", lambda a, b, offs: torch.zeros(96, 24), spec, a, b,
            offs, sizes, ref)
        self.assertEqual(wrong["ours_check"], "fail")

    @parametrize("pass_name", cases.PASSES)
    def test_stock_cpu_passes_check(self, pass_name: str) -> None:
        spec, sizes, a, b, ref = self._setup(pass_name, "bf16")
        offs = torch.tensor(cases.offsets(sizes), dtype=torch.int32)
        fn = bench._callables(False)["stock"]
        result = bench._check_column("stock", fn, spec, a, b, offs, sizes,
                                     ref)
        if result["stock_check"] == "n/a":
            self.skipTest(f"no CPU _grouped_mm: {result['stock_error']}")
        self.assertEqual(result["stock_check"], "pass")


    @parametrize("pass_name", cases.PASSES)
    def test_loop_column_passes_check_without_rereading_offsets(
            self, pass_name: str) -> None:
        # sparse: every fourth group empty (k = 0 groups in wgrad).
        spec, sizes, a, b, ref = self._setup(pass_name, "fp32")
        offs = torch.tensor(cases.offsets(sizes), dtype=torch.int32)
        loop = bench._callables(False, loop=True)["loop"]
        result = bench._check_column("loop", loop, spec, a, b, offs, sizes,
                                     ref)
        self.assertEqual(result["loop_check"], "pass")
        self.assertLess(result["loop_rel_err"], 1e-5)
        # The timed calls reuse the sizes read at the check: the offsets
        # are not read again (on the GPU that read is a sync).
        with unittest.mock.patch.object(
                torch.Tensor, "tolist",
                side_effect=AssertionError("offsets read again")):
            again = loop(a, b, offs)
        self.assertLess(bench._group_error(spec, again, ref, sizes), 1e-5)

    @parametrize("pass_name", ["fwd", "dgrad"])
    def test_per_group_column_checks_then_times_the_gemms_alone(
            self, pass_name: str) -> None:
        spec, sizes, a, b, ref = self._setup(pass_name, "fp32")
        offs = torch.tensor(cases.offsets(sizes), dtype=torch.int32)
        column = bench.PerGroupColumn()
        seen = []

        def fake_ours(a, b, offs):  # ours on one group, on the CPU
            self.assertEqual((b.shape[0], offs.tolist()), (1, [a.shape[0]]))
            seen.append(a.shape[0])
            return a @ b[0]

        with unittest.mock.patch.object(bench, "_ours", fake_ours):
            result = bench._check_column("pergroup", column, spec, a, b,
                                         offs, sizes, ref)
            self.assertEqual(result["pergroup_check"], "pass")
            self.assertEqual(seen, [s for s in sizes if s])  # no empty launch
            last = column(a, b, offs)  # a timed call: no assembly
        # the last non-empty group's rows (sparse: the last group is empty)
        self.assertEqual(last.shape, (seen[-1], ref.shape[1]))
        with self.assertRaisesRegex(ValueError, "2d x 3d only"):
            column(a.t(), a, offs)

    def test_loop_column_zeroes_rows_past_the_last_offset(self) -> None:
        a, b = torch.randn(10, 4), torch.randn(2, 4, 3)
        out = bench.LoopColumn()(a, b, torch.tensor([3, 7]))
        self.assertEqual(out[7:], torch.zeros(3, 3))
        self.assertEqual(out[3:7], a[3:7] @ b[1])
        with self.assertRaisesRegex(ValueError, "3d x 3d"):
            bench.LoopColumn()(torch.randn(2, 3, 4), torch.randn(2, 4, 5),
                               torch.tensor([1]))


def _fake_results(inductor: bool = False) -> dict:
    """Results as the benchmark writes them, with made-up timings."""
    rows = []
    timings = {  # case, dist -> ours, stock, floor
        ("a", "balanced"): (110.0, 120.0, 100.0),
        ("a", "skewed"): (150.0, 300.0, 100.0),
        ("b", "balanced"): (40.0, None, 20.0),
    }
    for dtype in ("bf16", "fp16"):
        for (case, dist), (ours, stock, fl) in timings.items():
            row = {"case": case, "dist": dist, "dtype": dtype,
                   "pass": "fwd", "floor_us": fl, "bound": "compute",
                   "ours_us": ours, "ours_check": "pass",
                   "ours_rel_err": 1e-3, "ours_error": None,
                   "stock_us": stock, "stock_rel_err": None,
                   "stock_check": "pass" if stock else "n/a",
                   "stock_error": None if stock else
                   "RuntimeError: fp16 unsupported"}
            if inductor:
                row.update({"inductor_us": 2 * fl, "inductor_check": "pass",
                            "inductor_error": None})
            rows.append(row)
    rows[1]["ours_check"], rows[1]["ours_rel_err"] = "fail", 0.5
    return {"gpu": "Fake H200", "torch": "2.11.0", "timestamp": "now",
            "command": "bench", "ours_label": "ours", "complete": True,
            "floor_peak_tflops": 800.0, "copy_gbps": 4000.0,
            "peak_tflops": {"bf16": 800.0, "fp16": 790.0},
            "timer": "fake", "rows": rows}


class TestReport(TestCase):
    def test_targets(self) -> None:
        lines = report.target_lines(_fake_results()["rows"])
        self.assertEqual(lines[0], "| target (issue) | this run | met | "
                         "worst rows missing it |")
        self.assertIn("| (9) bf16 fwd: gm ours/floor <= 1.10 | 1.49 | **no** |"
                      "  |", lines)
        self.assertIn("| (9) bf16 fwd: every row ours/floor <= 1.25 | 2 of 3 "
                      "rows above | **no** | b balanced 2.00, a skewed 1.50 |",
                      lines)
        self.assertIn("| (9) fp16 fwd: every row within 1.03x of our bf16 | "
                      "max 1.000, 0 rows above | yes |  |", lines)
        self.assertIn("| (3) fp16 fwd: every row within 1.05x of our bf16 | "
                      "max 1.000, 0 rows above | yes |  |", lines)
        self.assertIn("| (9) bf16 fwd: never slower than stock | 0 rows > 1.00 "
                      "(0 > 1.03) | yes |  |", lines)
        self.assertIn("| (3) bf16 fwd: no row slower than stock by more than "
                      "1.03x | 0 rows | yes |  |", lines)
        # Issue 3's bound names the rows past noise only.
        slow = [dict(r) for r in _fake_results()["rows"]]
        slow[0]["ours_us"] = slow[0]["stock_us"] * 1.02
        slow[1]["ours_us"] = slow[1]["stock_us"] * 1.10
        lines = report.target_lines(slow)
        missing = [l for l in lines if l.startswith("| (3) bf16 fwd: no row")]
        self.assertEqual(len(missing), 1, lines)
        self.assertIn("| 1 rows | **no** |", missing[0])
        # No row a target needs: no section.
        self.assertEqual(report.target_lines([]), [])

    def test_targets_count_the_misses_the_aa_column_repeats(self) -> None:
        # --aa: a row past a bound in ours is counted again where ours@again
        # (the same kernels, same rounds) is past it too.
        rows = [dict(r) for r in _fake_results()["rows"]]
        for r in rows:
            r["ours@again_us"], r["ours@again_check"] = r["ours_us"], "pass"
        bf16_a, bf16_a_skewed, _, fp16_a, fp16_a_skewed, _ = rows
        # Against stock: (a, balanced) 1.10 and 1.10 again; (a, skewed)
        # passes its check this time, 1.10 in ours, 1.01 again.
        bf16_a["ours_us"] = bf16_a["ours@again_us"] = 132.0
        bf16_a_skewed["ours_check"] = "pass"
        bf16_a_skewed["ours_us"] = 330.0
        bf16_a_skewed["ours@again_us"] = 303.0
        # fp16 over bf16: 1.10 in both columns on (a, balanced); 1.10 in
        # ours, 1.00 again on (a, skewed).
        fp16_a["ours_us"] = fp16_a["ours@again_us"] = 132.0 * 1.10
        fp16_a_skewed["ours_us"] = 330.0 * 1.10
        fp16_a_skewed["ours@again_us"] = 303.0
        lines = report.target_lines(rows)
        self.assertIn("| (3) bf16 fwd: no row slower than stock by more than "
                      "1.03x | 2 rows; 1 also in ours@again | **no** | "
                      "a balanced 1.10, a skewed 1.10 |", lines)
        self.assertIn("| (3) fp16 fwd: every row within 1.05x of our bf16 | "
                      "max 1.100, 2 rows above; 1 also in ours@again | **no** "
                      "| a balanced 1.10, a skewed 1.10 |", lines)
        # Where stock was timed twice, the repeat is ours@again over
        # stock@again: (a, skewed) 303 / 290 = 1.045 now counts.
        bf16_a_skewed["stock@again_us"] = 290.0
        lines = report.target_lines(rows)
        self.assertIn("| (3) bf16 fwd: no row slower than stock by more than "
                      "1.03x | 2 rows; 2 also in ours@again | **no** | "
                      "a balanced 1.10, a skewed 1.10 |", lines)
        del bf16_a_skewed["stock@again_us"]
        # A repeat whose check failed is no repeat.
        bf16_a["ours@again_check"] = "fail"
        lines = report.target_lines(rows)
        self.assertIn("| (3) bf16 fwd: no row slower than stock by more than "
                      "1.03x | 2 rows; 0 also in ours@again | **no** | "
                      "a balanced 1.10, a skewed 1.10 |", lines)
        self.assertIn("| (3) fp16 fwd: every row within 1.05x of our bf16 | "
                      "max 1.100, 2 rows above; 0 also in ours@again | **no** "
                      "| a balanced 1.10, a skewed 1.10 |", lines)

    def test_ratios_and_geomean(self) -> None:
        rows = _fake_results()["rows"]
        self.assertAlmostEqual(report.ratio(rows[1], "ours/floor"), 1.5)
        self.assertAlmostEqual(report.ratio(rows[1], "ours/stock"), 0.5)
        self.assertIsNone(report.ratio(rows[2], "stock/floor"))
        self.assertIsNone(report.ratio(rows[0], "inductor/floor"))
        self.assertAlmostEqual(report.geomean([1.0, 4.0, None]), 2.0)
        self.assertIsNone(report.geomean([None]))

    def test_summary(self) -> None:
        summaries = report.summarize(_fake_results()["rows"])
        self.assertEqual([(s.dtype, s.pass_name) for s in summaries],
                         [("bf16", "fwd"), ("fp16", "fwd")])
        s = summaries[0]
        self.assertEqual(s.rows, 3)
        self.assertAlmostEqual(s.geomean["ours/floor"],
                               (1.1 * 1.5 * 2.0) ** (1 / 3))
        self.assertAlmostEqual(s.geomean["stock/floor"], math.sqrt(1.2 * 3))
        self.assertEqual(s.worst["ours/floor"],
                         {"case": "b", "dist": "balanced", "value": 2.0})
        self.assertEqual(s.worst["ours/stock"]["case"], "a")
        self.assertEqual(s.worst["ours/stock"]["dist"], "balanced")
        self.assertEqual(s.check_failures, ["a skewed ours"])
        self.assertEqual(summaries[1].check_failures, [])

    def test_markdown(self) -> None:
        text = report.markdown(_fake_results())
        self.assertIn("## bf16 fwd", text)
        self.assertIn("## fp16 fwd", text)
        self.assertIn("| case | dist | ours us | stock us | floor us |", text)
        self.assertIn("| a | skewed | 150.0 | 300.0 | 100.0 | compute | "
                      "1.50 | 3.00 | 0.50 | FAIL 5.0e-01 | pass |", text)
        self.assertIn("| b | balanced | 40.0 | n/a |", text)
        self.assertIn("stock n/a on 1 row(s) (first: b balanced): "
                      "`RuntimeError: fp16 unsupported`", text)
        self.assertIn("worst ours/floor: 2.00 (b balanced)", text)
        self.assertIn("correctness FAIL: a skewed ours", text)
        self.assertNotIn("inductor", text)
        self.assertIn("inductor", report.markdown(_fake_results(True)))

    def test_fp16_over_bf16_per_column(self) -> None:
        rows = _fake_results()["rows"]
        for row in rows:  # a loop column on two rows
            if row["case"] == "a" and row["dist"] == "balanced":
                row.update({"loop_us": 100.0 if row["dtype"] == "bf16"
                            else 102.0, "loop_check": "pass"})
        lines = report.dtype_pair_lines(rows)
        self.assertEqual(lines[:4], [
            "**fwd**", "",
            "| case | dist | ours fp16/bf16 | stock fp16/bf16 | "
            "loop fp16/bf16 |", "|---|---|---:|---:|---:|"])
        # same fake ours/stock times in both dtypes: 1.000
        self.assertIn("| a | balanced | 1.000 | 1.000 | 1.020 |", lines)
        self.assertIn("| b | balanced | 1.000 | n/a | n/a |", lines)
        self.assertIn("| geomean | | 1.000 | 1.000 | 1.020 |", lines)
        self.assertIn("## fp16 over bf16, each column on the same rows",
                      report.markdown({**_fake_results(), "rows": rows}))
        self.assertEqual(report.dtype_pair_lines(
            [r for r in rows if r["dtype"] == "bf16"]), [])

    def test_summary_table_labels_backend(self) -> None:
        results = _fake_results(inductor=True)
        results["ours_label"] = "ours[B=sm80]"
        caption, *table = report.summary_table(results).splitlines()
        self.assertIn("ours = ours[B=sm80], Fake H200", caption)
        self.assertEqual(len(table), 4)
        self.assertIn("gm ours/floor", table[0])
        self.assertIn("gm inductor/floor", table[0])
        self.assertTrue(table[2].startswith("| bf16 | fwd | 3 | 1.49 |"))
        self.assertIn("| ours[B=sm80] us |", report.markdown(results))

    def test_render_mode_writes_md_and_png(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(tmp) / "src", Path(tmp) / "dst"
            src.mkdir()
            (src / bench.JSON_NAME).write_text(
                json.dumps(_fake_results(inductor=True)))
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), \
                    contextlib.redirect_stderr(stderr):
                status = bench.main(["--render", str(src), "--out",
                                     str(dst)])
            self.assertEqual(status, 0)
            self.assertIn("| fp16 | fwd |", stdout.getvalue().splitlines()[-1])
            self.assertTrue((dst / report.MD_NAME).read_text()
                            .startswith("# Grouped GEMM benchmark"))
            self.assertFalse((src / report.PNG_NAME).exists())
            if not report.have_matplotlib():
                self.assertFalse((dst / report.PNG_NAME).exists())
                self.skipTest("no matplotlib: PNG not drawn")
            png = (dst / report.PNG_NAME).read_bytes()
            self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")

    def test_render_without_matplotlib_writes_md_only(self) -> None:
        with tempfile.TemporaryDirectory() as tmp, \
                unittest.mock.patch.object(report, "have_matplotlib",
                                           return_value=False):
            paths = report.render(_fake_results(), tmp)
            self.assertEqual([p.name for p in paths], [report.MD_NAME])
            self.assertFalse((Path(tmp) / report.PNG_NAME).exists())


def _tiny_suite(folder: str, dists: tuple[str, ...] = ("balanced",)) -> Path:
    """A one-case suite file (M 40, K 16, N 8, E 4) in folder."""
    suite = Path(folder) / "suite.json"
    suite.write_text(json.dumps({
        "about": "tiny", "dists": {dist: "" for dist in dists},
        "cases": [{"name": "tiny", "M": 40, "K": 16, "N": 8, "E": 4}]}))
    return suite


@unittest.skipIf(not HAS_EXTENSION, "the benchmark times overlap_ops "
                 "against stock torch._grouped_mm (extension mode only)")
class TestBenchLoop(TestCase):
    """The whole run loop on CPU: timer, GPU queries and peaks faked."""

    _MACHINE = {"device": "cpu", "gpu": "fake", "sm_count": 132,
                "l2_bytes": 60 << 20, "peak_tflops": {"bf16": 800.0},
                "floor_peak_tflops": 800.0, "floor_peak_note": "fake",
                "copy_gbps": 4000.0}

    def _main_faked(self, argv: list[str], time_us,
                    stdout: Optional[io.StringIO] = None,
                    stderr: Optional[io.StringIO] = None) -> int:
        """bench.main(argv) with the GPU, the machine and the timer faked."""
        with unittest.mock.patch.object(
                torch.cuda, "is_available", return_value=True), \
                unittest.mock.patch.object(
                    bench, "_machine", return_value=dict(self._MACHINE)), \
                unittest.mock.patch.object(
                    bench, "_peak_again", return_value=780.0), \
                unittest.mock.patch.object(
                    bench, "_time_us", side_effect=time_us), \
                unittest.mock.patch.object(
                    bench, "_context_alive", return_value=True), \
                contextlib.redirect_stdout(stdout or io.StringIO()), \
                contextlib.redirect_stderr(stderr or io.StringIO()):
            return bench.main(argv)

    def test_loop_writes_json_md_png_and_summary(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            suite = _tiny_suite(tmp, ("balanced", "sparse"))
            out = Path(tmp) / "out"
            stdout, stderr = io.StringIO(), io.StringIO()
            status = self._main_faked(
                ["--shapes", str(suite), "--out", str(out), "--passes",
                 "fwd,wgrad", "--dtypes", "bf16"],
                lambda fns, timer: 10.0 * len(fns), stdout, stderr)
            self.assertEqual(status, 0)
            results = json.loads((out / bench.JSON_NAME).read_text())
            self.assertTrue(results["complete"])
            self.assertEqual(results["bf16_peak_tflops_end"], 780.0)
            self.assertIn("bf16 800; bf16 again after the last row: 780",
                          (out / report.MD_NAME).read_text())
            self.assertEqual(len(results["rows"]), 4)
            self.assertEqual(results["group_sizes"]["tiny/sparse"],
                             [14, 13, 13, 0])
            for row in results["rows"]:
                self.assertEqual(row["ours_check"], "pass")
                # tiny inputs: rotated through many sets (cap 256)
                self.assertEqual(row["input_sets"], 256)
                self.assertEqual(row["ours_us"], 2560.0)
            self.assertIn("[4/4] tiny sparse bf16 wgrad", stderr.getvalue())
            self.assertIn("| bf16 | wgrad | 2 |",
                          stdout.getvalue().splitlines()[-1])
            self.assertTrue((out / report.MD_NAME).exists())
            self.assertEqual((out / report.PNG_NAME).exists(),
                             report.have_matplotlib())

    def test_loop_with_a_variant_reports_it_against_stock(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            suite = _tiny_suite(tmp)
            out = Path(tmp) / "out"
            # ours 20 us, ours@half 10 us, stock 16 us (per the fake timer)
            us = {"ours": 20.0, "ours@half": 10.0, "stock": 16.0}
            column = iter(["ours", "stock", "ours@half"])
            status = self._main_faked(
                ["--shapes", str(suite), "--out", str(out), "--dtypes",
                 "bf16", "--rounds", "1", "--column-order", "fixed",
                 "--variant", "half:TORCH_GROUPED_MM_BACKEND=generic"],
                lambda fns, timer: us[next(column)])
            self.assertEqual(status, 0)
            results = json.loads((out / bench.JSON_NAME).read_text())
            self.assertEqual(results["variants"],
                             {"ours@half": {
                                 "TORCH_GROUPED_MM_BACKEND": "generic"}})
            row = results["rows"][0]
            self.assertEqual(row["ours@half_check"], "pass")
            self.assertEqual(row["ours@half_us"], 10.0)
            md = (out / report.MD_NAME).read_text()
            self.assertIn(
                "- ours@half: `TORCH_GROUPED_MM_BACKEND=generic`", md)
            self.assertIn("| tiny | balanced | 16.0 | 20.0 | 10.0 | 1.25 | "
                          "0.62 | ours@half |", md)
            self.assertIn("| rows > 1.03 |  |  |  |  | 1 | 0 |  |", md)

    def test_aa_times_ours_and_stock_twice_and_prints_the_band(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            suite = _tiny_suite(tmp)
            out = Path(tmp) / "out"
            us = {"ours": 20.0, "stock": 16.0, "ours@again": 21.0,
                  "stock@again": 15.0}
            column = iter(["ours", "stock", "ours@again", "stock@again"])
            status = self._main_faked(
                ["--shapes", str(suite), "--out", str(out), "--dtypes",
                 "bf16", "--rounds", "1", "--column-order", "fixed",
                 "--aa"],
                lambda fns, timer: us[next(column)])
            self.assertEqual(status, 0)
            results = json.loads((out / bench.JSON_NAME).read_text())
            row = results["rows"][0]
            for name, time in us.items():
                self.assertEqual(row[f"{name}_check"], "pass", name)
                self.assertEqual(row[f"{name}_us"], time, name)
            md = (out / report.MD_NAME).read_text()
            self.assertIn("time over ours' 1.050-1.050 over 1 rows", md)
            self.assertIn("Stock's (stock@again over stock): 0.938-0.938.",
                          md)
            # ours 1.25 of stock; the repeat 21 / 15 = 1.40 too.
            self.assertIn("| 1 rows; 1 also in ours@again | **no** |", md)


    def test_paired_dtypes_share_rounds_in_balanced_order(self) -> None:
        # --pair-dtypes: bf16 and fp16 of one case x dist x pass are timed
        # in the same rounds, in the balanced orders; each row keeps its
        # own columns, check and ratios.
        with tempfile.TemporaryDirectory() as tmp:
            suite = _tiny_suite(tmp)
            out = Path(tmp) / "out"
            seen: list[torch.dtype] = []

            def time_us(fns, timer):
                out_tensor = fns[0]()
                seen.append(out_tensor.dtype)
                return 10.0 if out_tensor.dtype == torch.bfloat16 else 11.0

            stderr = io.StringIO()
            status = self._main_faked(
                ["--shapes", str(suite), "--out", str(out), "--dtypes",
                 "bf16,fp16", "--passes", "fwd,wgrad", "--pair-dtypes"],
                time_us, stderr=stderr)
            self.assertEqual(status, 0)
            results = json.loads((out / bench.JSON_NAME).read_text())
            self.assertIn("a Williams design", results["timer"])
            self.assertIn("a case x dist x pass in the same rounds",
                          results["timer"])
            rows = results["rows"]
            self.assertEqual([(r["dtype"], r["pass"]) for r in rows],
                             [("bf16", "fwd"), ("fp16", "fwd"),
                              ("bf16", "wgrad"), ("fp16", "wgrad")])
            for row in rows:
                self.assertEqual(row["ours_check"], "pass")
                self.assertEqual(row["stock_check"], "pass")
                self.assertEqual(row["ours_us"],
                                 10.0 if row["dtype"] == "bf16" else 11.0)
                self.assertEqual(row["ours/stock"], 1.0)
            # Per pass, 4 rounds (3 rounded up to the 4 columns) of (bf16
            # ours, bf16 stock, fp16 ours, fp16 stock) in the balanced
            # orders 0 1 3 2, 1 2 0 3, 2 3 1 0, 3 0 2 1.
            bf, fp = torch.bfloat16, torch.float16
            one_pass = [bf, bf, fp, fp, bf, fp, bf, fp,
                        fp, fp, bf, bf, fp, bf, fp, bf]
            self.assertEqual(seen, one_pass * 2)
            self.assertIn("[4/4] tiny balanced fp16 wgrad", stderr.getvalue())

    def test_batches_group_dtypes_only_when_paired(self) -> None:
        suite = cases.load_suite(_SUITES[0])
        args = bench._parse_args(["--dtypes", "bf16,fp16", "--passes",
                                  "fwd,dgrad", "--cases", "grin_moe",
                                  "--dists", "balanced"])
        plan = bench._plan(suite, args)
        self.assertEqual([len(b) for b in bench._batches(plan, False)],
                         [1] * 4)
        paired = bench._batches(plan, True)
        self.assertEqual([[(s.dtype, s.pass_name) for s in b] for b in paired],
                         [[("bf16", "fwd"), ("fp16", "fwd")],
                          [("bf16", "dgrad"), ("fp16", "dgrad")]])

    def test_row_failure_marks_columns_na(self) -> None:
        spec = bench.RowSpec(cases.Case("t", 40, 16, 8, 4), "balanced",
                             "bf16", "fwd")
        with unittest.mock.patch.object(
                bench, "_reference",
                side_effect=RuntimeError("CUDA out of memory. Tried")), \
                unittest.mock.patch.object(torch.cuda, "empty_cache"):
            row = bench._run_row(spec, bench._callables(False),
                                 dict(self._MACHINE), None, 0)
        self.assertEqual(row["ours_check"], "n/a")
        self.assertIsNone(row["stock_us"])
        self.assertEqual(row["ours_error"], "row failed: RuntimeError: "
                         "CUDA out of memory. Tried")
        self.assertGreater(row["floor_us"], 0)
        self.assertIsNone(row["ours/floor"])

    def test_median(self) -> None:
        self.assertEqual(bench._median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(bench._median([4.0, 1.0, 2.0, 3.0]), 2.5)


class TestInterleavedRounds(TestCase):
    def test_fixed_order_reports_the_median_round(self) -> None:
        order: list[str] = []
        times = {"ours": iter([30.0, 10.0, 20.0]),
                 "stock": iter([5.0, 7.0, 6.0])}

        def fake_time(fns, timer):
            name = fns[0]()
            order.append(name)
            self.assertAlmostEqual(timer.rep_ms, 100.0 / 3)
            self.assertEqual(timer.min_runs, 7)
            return next(times[name])

        calls = {"ours": [lambda: "ours"], "stock": [lambda: "stock"],
                 "inductor": []}
        results = {"ours": {"ours_us": None}, "stock": {"stock_us": None},
                   "inductor": {"inductor_us": None}}
        timer = bench.Timer(25.0, 100.0, 20, 2000, rounds=3, order="fixed")
        with unittest.mock.patch.object(bench, "_time_us",
                                        side_effect=fake_time):
            bench._time_columns(calls, results, timer)
        self.assertEqual(order, ["ours", "stock"] * 3)
        self.assertEqual(results["ours"]["ours_us"], 20.0)
        self.assertEqual(results["ours"]["ours_rounds_us"], [30.0, 10.0, 20.0])
        self.assertEqual(results["stock"]["stock_us"], 6.0)
        self.assertIsNone(results["inductor"]["inductor_us"])

    def test_rotation_puts_every_column_in_every_position(self) -> None:
        # 3 rounds over 2 columns round up to 4 (each column first twice);
        # the budget per round shrinks so a row takes as long as before.
        order: list[str] = []
        times = {"ours": iter([30.0, 10.0, 20.0, 40.0]),
                 "stock": iter([5.0, 7.0, 6.0, 8.0])}

        def fake_time(fns, timer):
            name = fns[0]()
            order.append(name)
            self.assertAlmostEqual(timer.rep_ms, 100.0 / 4)
            self.assertEqual(timer.min_runs, 5)
            return next(times[name])

        calls = {"ours": [lambda: "ours"], "stock": [lambda: "stock"],
                 "inductor": []}
        results = {"ours": {"ours_us": None}, "stock": {"stock_us": None},
                   "inductor": {"inductor_us": None}}
        with unittest.mock.patch.object(bench, "_time_us",
                                        side_effect=fake_time):
            bench._time_columns(calls, results,
                                bench.Timer(25.0, 100.0, 20, 2000, rounds=3))
        self.assertEqual(order, ["ours", "stock", "stock", "ours"] * 2)
        self.assertEqual(results["ours"]["ours_us"], 25.0)  # median of 4
        self.assertEqual(results["ours"]["ours_rounds_us"],
                         [30.0, 10.0, 20.0, 40.0])
        self.assertEqual(results["stock"]["stock_us"], 6.5)
        self.assertIsNone(results["inductor"]["inductor_us"])

    def test_round_orders(self) -> None:
        timer = bench.Timer(25.0, 90.0, 20, 2000, rounds=3)
        rotate = dataclasses.replace(timer, order="rotate")
        self.assertEqual(bench.round_orders("abc", rotate),
                         [list("abc"), list("bca"), list("cab")])
        # The default: whole Williams designs (2n rounds for an odd n).
        self.assertEqual(bench.round_orders("abcd", timer),
                         [list("abdc"), list("bcad"), list("cdba"),
                          list("dacb")])
        self.assertEqual(len(bench.round_orders("abc", timer)), 6)
        self.assertEqual(bench.round_orders("ab", timer),
                         [list("ab"), list("ba")] * 2)
        self.assertEqual(bench.round_orders("a", timer), [["a"]] * 3)
        fixed = dataclasses.replace(timer, order="fixed")
        self.assertEqual(bench.round_orders("ab", fixed), [["a", "b"]] * 3)

    def test_balanced_orders_balance_positions_and_predecessors(self) -> None:
        # Rotation keeps each column after the same one (with paired dtypes:
        # fp16 ours always after bf16 stock); the balanced design does not.
        for n in range(2, 9):
            orders = bench.balanced_orders(n)
            self.assertEqual(len(orders), n if n % 2 == 0 else 2 * n)
            per_column = len(orders) // n
            for order in orders:
                self.assertEqual(sorted(order), list(range(n)))
            for position in range(n):
                counts = collections.Counter(o[position] for o in orders)
                self.assertEqual(set(counts.values()), {per_column}, n)
            pairs = collections.Counter(
                (o[i], o[i + 1]) for o in orders for i in range(n - 1))
            self.assertEqual(len(pairs), n * (n - 1), n)
            self.assertEqual(set(pairs.values()), {1 if n % 2 == 0 else 2},
                             n)

    def test_rotation_names_fields_of_several_rows(self) -> None:
        # Keys of two rows' columns, named by `names`.
        order: list[tuple[int, str]] = []

        def fake_time(fns, timer):
            key = fns[0]()
            order.append(key)
            return 2.0 if key[0] else 1.0

        keys = [(0, "ours"), (1, "ours")]
        calls = {key: [lambda key=key: key] for key in keys}
        results = {key: {} for key in keys}
        with unittest.mock.patch.object(bench, "_time_us",
                                        side_effect=fake_time):
            bench._time_columns(calls, results,
                                bench.Timer(25.0, 90.0, 20, 2000, rounds=2),
                                names={key: "ours" for key in keys})
        self.assertEqual(order, [keys[0], keys[1], keys[1], keys[0]])
        self.assertEqual(results[keys[0]]["ours_us"], 1.0)
        self.assertEqual(results[keys[1]]["ours_rounds_us"], [2.0] * 2)

    def test_a_column_that_raises_is_na_and_the_others_go_on(self) -> None:
        def fake_time(fns, timer):
            if fns[0]() == "ours":
                raise RuntimeError("boom\nmore")
            return 4.0

        calls = {"ours": [lambda: "ours"], "stock": [lambda: "stock"]}
        results = {"ours": {"ours_us": None}, "stock": {"stock_us": None}}
        with unittest.mock.patch.object(bench, "_time_us",
                                        side_effect=fake_time):
            bench._time_columns(calls, results,
                                bench.Timer(25.0, 90.0, 20, 2000, rounds=2))
        self.assertIsNone(results["ours"]["ours_us"])
        self.assertEqual(results["ours"]["ours_error"], "RuntimeError: boom")
        self.assertEqual(results["stock"]["stock_us"], 4.0)

    def test_a_variant_column_times_under_its_environment(self) -> None:
        name = "OVERLAP_OPS_TEST_VARIANT_ENV"
        os.environ.pop(name, None)
        seen: dict[str, Optional[str]] = {}

        def fake_time(fns, timer):
            column = fns[0]()
            seen[column] = os.environ.get(name)
            return 1.0

        fns = bench._callables(False, [("v", {name: "on"})])
        calls = {"ours": [lambda: "ours"], "ours@v": [lambda: "ours@v"]}
        results = {"ours": {"ours_us": None}, "ours@v": {"ours@v_us": None}}
        with unittest.mock.patch.object(bench, "_time_us",
                                        side_effect=fake_time):
            bench._time_columns(calls, results,
                                bench.Timer(25.0, 90.0, 20, 2000, rounds=1),
                                fns)
        self.assertEqual(seen, {"ours": None, "ours@v": "on"})
        self.assertNotIn(name, os.environ)  # restored
        self.assertEqual(results["ours@v"]["ours@v_us"], 1.0)

    def test_rounds_must_be_positive(self) -> None:
        with contextlib.redirect_stderr(io.StringIO()):
            with self.assertRaises(SystemExit):
                bench._parse_args(["--rounds", "0"])


class TestInputsAs(TestCase):
    def test_fp16_inputs_hold_bf16_values(self) -> None:
        args = bench._parse_args(["--dtypes", "fp16", "--inputs-as", "bf16"])
        suite = cases.load_suite(args.shapes)
        spec = bench._plan(suite, args)[0]
        tiny = dataclasses.replace(spec, case=dataclasses.replace(
            spec.case, M=64, K=16, N=8, E=4))
        a, b = bench._operands(tiny, torch.Generator().manual_seed(0))
        self.assertEqual(a.dtype, torch.float16)
        for t in (a, b):
            self.assertTrue(torch.equal(t, t.to(torch.bfloat16).half()))
        plain = dataclasses.replace(tiny, inputs_as=None)
        a, _ = bench._operands(plain, torch.Generator().manual_seed(0))
        self.assertFalse(torch.equal(a, a.to(torch.bfloat16).half()))


class TestHostOverhead(TestCase):
    def test_cpu_run_writes_both_impls_and_grad_modes(self) -> None:
        if not HAS_EXTENSION:
            self.skipTest("needs the overlap_ops extension")
        routing = overlap_ops.route_torch_grouped_mm(True)
        overlap_ops.route_torch_grouped_mm(routing)
        with tempfile.TemporaryDirectory() as tmp, \
                contextlib.redirect_stdout(io.StringIO()) as stdout:
            status = host_overhead.main(["--calls", "20", "--repeats", "2",
                                         "--out", tmp])
            data = json.loads((Path(tmp) / "host_overhead.json").read_text())
        self.assertEqual(status, 0)
        self.assertIn("| ours | off |", stdout.getvalue())
        seen = {(r["impl"], r["grad_mode"]) for r in data["rows"]}
        self.assertEqual(seen, {(impl, grad) for impl in ("ours", "routed",
                                                          "stock")
                                for grad in (False, True)})
        for row in data["rows"]:
            self.assertIsNotNone(row["us"], row)
            self.assertGreater(row["us"], 0, row)
            self.assertIsNone(row["gpu_held"], row)  # no hold on the CPU
        self.assertIn("| routed | on |", stdout.getvalue())
        # The routing the run found is restored.
        self.assertEqual(overlap_ops.route_torch_grouped_mm(routing), routing)

    def test_cuda_calls_stay_under_the_launch_queue(self) -> None:
        most = (host_overhead.MAX_CUDA_LAUNCHES_PER_ROUND
                // host_overhead.LAUNCHES_PER_CALL)
        with contextlib.redirect_stderr(io.StringIO()) as stderr:
            with self.assertRaises(SystemExit):
                host_overhead.main(["--device", "cuda", "--calls",
                                    str(most + 1)])
        self.assertIn("launch queue", stderr.getvalue())

    def test_render_flags_a_round_the_gpu_was_not_held_for(self) -> None:
        meta = {"device": "fake", "torch": "x", "dtype": "bf16",
                "shape": [4, 16, 32, 16], "repeats": 1, "calls": 1}
        text = host_overhead.render(meta, [
            {"impl": "ours", "grad_mode": False, "us": 10.0,
             "gpu_held": False, "error": None},
            {"impl": "stock", "grad_mode": False, "us": 9.0,
             "gpu_held": True, "error": None}])
        self.assertIn("| ours | off | 10.0 | no: the host waited", text)
        self.assertIn("| stock | off | 9.0 | yes |", text)

    def test_bad_counts_are_refused(self) -> None:
        with contextlib.redirect_stderr(io.StringIO()):
            with self.assertRaises(SystemExit):
                host_overhead.main(["--calls", "0"])


class TestCarveoutBenchDtype(TestCase):
    def test_dtype_option_and_tf32_switch(self) -> None:
        self.assertEqual(bench_carveout.gemm_dtype(None, {}), torch.bfloat16)
        self.assertEqual(bench_carveout.gemm_dtype(None, {"dtype": "float16"}),
                         torch.float16)
        matmul = torch.backends.cuda.matmul
        previous = getattr(matmul, "fp32_precision", None)
        previous_tf32 = matmul.allow_tf32
        try:
            self.assertEqual(bench_carveout.gemm_dtype("tf32", {}),
                             torch.float32)
            self.assertTrue(torch.backends.cuda.matmul.allow_tf32)
            self.assertEqual(bench_carveout.gemm_dtype("fp32", {}),
                             torch.float32)
            self.assertFalse(torch.backends.cuda.matmul.allow_tf32)
        finally:
            # Newer torch keeps the state as fp32_precision ('none' unset).
            matmul.allow_tf32 = previous_tf32
            if previous is not None:
                matmul.fp32_precision = previous
        args = bench_carveout._parse_args(["--dtype", "fp32"])
        self.assertEqual(args.dtype, "fp32")
        with contextlib.redirect_stderr(io.StringIO()):
            with self.assertRaises(SystemExit):
                bench_carveout._parse_args(["--dtype", "fp64"])


class TestOverlapBenchMatchedK(TestCase):
    """The overlap bench reports the hand-tuned (best) k against the k
    matched to the communication's CTAs."""

    def _result(self, k: int, step: float) -> "bench_overlap.Result":
        return bench_overlap.Result("case", "synthetic", "ours", k, 1, 1.0,
                                    1.0, 1.0, 1.0, 1.0, step)

    def test_matched_k_is_always_measured(self) -> None:
        args = bench_overlap._parse_args(
            ["--single-gpu", "--synthetic-ctas", "20", "--carveouts", "0,16"])
        self.assertEqual(bench_overlap.matched_k(args), 20)
        self.assertEqual(bench_overlap.carveout_list(args), [0, 16, 20])
        args = bench_overlap._parse_args(["--carveouts", "0,8", "--nccl-ctas",
                                          "8"])
        self.assertEqual(bench_overlap.carveout_list(args), [0, 8])
        args = bench_overlap._parse_args(["--carveouts", "0,8"])
        self.assertIsNone(bench_overlap.matched_k(args))

    def test_best_and_matched_steps(self) -> None:
        results = [self._result(0, 3.0), self._result(16, 1.5),
                   self._result(32, 1.8)]
        best = bench_overlap.best_k(results, matched_k=32)["case/synthetic/ours"]
        self.assertEqual(best["k"], 16)
        self.assertAlmostEqual(best["speedup_vs_k0"], 2.0)
        self.assertEqual(best["matched_k"], 32)
        self.assertAlmostEqual(best["matched_over_best"], 1.2)
        meta = {"mode": "synthetic kernel", "device": "fake", "sms": 132,
                "torch": "x", "matched_k": 32}
        text = bench_overlap.markdown(results, {"case/synthetic/ours": best},
                                      meta)
        self.assertIn("| case/synthetic/ours | 16 | 1.500 | 3.000 | 2.00 | "
                      "1.800 | 1.20 |", text)
        unmatched = bench_overlap.best_k(results, matched_k=48)
        self.assertIsNone(unmatched["case/synthetic/ours"]["step_ms_matched"])


class TestCompareRuns(TestCase):
    """tools/bench/compare_grouped_mm_runs.py on two small fake runs."""

    @staticmethod
    def _run(rows):
        return {"rows": [dict(case=c, dist="balanced", dtype=d, **{
            "pass": "fwd", "ours_us": ours, "stock_us": stock})
            for c, d, ours, stock in rows]}

    def test_ratios_summary_and_unmatched_rows(self):
        first = self._run([("a", "bf16", 300.0, 150.0), ("b", "bf16", 100.0, 100.0),
                           ("c", "tf32", 50.0, 25.0)])
        second = self._run([("a", "bf16", 150.0, 150.0), ("b", "bf16", 100.0, 90.0)])
        with tempfile.TemporaryDirectory() as tmp:
            paths = [Path(tmp) / "first.json", Path(tmp) / "second.json"]
            for path, run in zip(paths, (first, second)):
                path.write_text(json.dumps(run))
            out = Path(tmp) / "cmp.md"
            self.assertEqual(compare_runs.main(
                [str(paths[0]), str(paths[1]), "--labels", "sm80,hopper",
                 "--out", str(out)]), 0)
            text = out.read_text()
        # bf16: sm80/stock = gm(2, 1) = 1.41; sm80/hopper = gm(2, 1) = 1.41,
        # worst 2.00 on case a. tf32 has no hopper row: its ratio is "-".
        self.assertIn("| bf16 | fwd | 2 | 1.41 | 1.41 | 2.00 (a balanced) |", text)
        self.assertIn("| tf32 | fwd | 1 | 2.00 | - | - |", text)
        self.assertIn("| c | balanced | tf32 | fwd | 50.0 | - | 25.0 | 2.00 | - |",
                      text)

    def test_bad_labels_and_missing_file_are_rejected(self):
        with contextlib.redirect_stderr(io.StringIO()) as err:
            with self.assertRaises(SystemExit):
                compare_runs.main(["x.json", "y.json", "--labels", "one"])
        self.assertIn("--labels needs two names", err.getvalue())
        with contextlib.redirect_stderr(io.StringIO()) as err:
            with self.assertRaises(SystemExit):
                compare_runs.main(["/nonexistent.json", "/nonexistent2.json"])
        self.assertIn("does not exist", err.getvalue())


class TestMergeRuns(TestCase):
    """tools/bench/merge_grouped_mm_runs.py: parts of one suite run in separate
    device calls, merged into one report."""

    @staticmethod
    def _run(rows, **extra):
        run = {"schema": 1, "gpu": "H200", "torch": "2.11", "complete": True,
               "shapes_path": "bench/moe_shapes.json", "timestamp": "t",
               "command": "bench", "rows": [
                   dict(case=c, dist="balanced", dtype="bf16", M=1, K=1,
                        N=1, E=1, floor_us=100.0, **{"pass": p,
                        "ours_us": ours, "stock_us": stock,
                        "ours/floor": ours / 100.0,
                        "stock/floor": stock / 100.0,
                        "ours/stock": ours / stock})
                   for c, p, ours, stock in rows]}
        run.update(extra)
        return run

    def test_rows_of_every_part_and_variants_dropped(self):
        first = self._run([("a", "fwd", 200.0, 100.0)])
        first["rows"][0]["ours@x_us"] = 50.0
        second = self._run([("b", "fwd", 100.0, 200.0)], complete=False)
        merged = merge_runs.merge([first, second])
        self.assertEqual([r["case"] for r in merged["rows"]], ["a", "b"])
        self.assertNotIn("ours@x_us", merged["rows"][0])
        self.assertFalse(merged["complete"])
        # gm ours/stock over both parts: sqrt(2 * 0.5) = 1.
        summary = report.summarize(merged["rows"])[0]
        self.assertAlmostEqual(summary.geomean["ours/stock"], 1.0)

    def test_shared_variants_kept(self):
        # --aa's columns, in both parts with the same (empty) settings,
        # stay with stock's second column; a variant only one part has,
        # or with other settings in each, goes.
        def part(case, ours, stock, variants):
            run = self._run([(case, "fwd", ours, stock)],
                            variants=variants)
            run["rows"][0].update({
                "ours@again_us": ours * 1.01, "ours@again_check": "pass",
                "stock@again_us": stock * 0.99,
                "ours@large_solo_us": 7.0, "ours@m_us": 8.0})
            return run
        first = part("a", 200.0, 100.0, {"ours@again": {},
                                          "ours@large_solo": {"T": "1"},
                                          "ours@m": {"R": "m"}})
        second = part("b", 100.0, 200.0, {"ours@again": {},
                                           "ours@m": {"R": "n"}})
        merged = merge_runs.merge([first, second])
        self.assertEqual(merged["variants"], {"ours@again": {}})
        for row, (ours, stock) in zip(merged["rows"],
                                      [(200.0, 100.0), (100.0, 200.0)]):
            self.assertAlmostEqual(row["ours@again_us"], ours * 1.01)
            self.assertAlmostEqual(row["stock@again_us"], stock * 0.99)
            self.assertNotIn("ours@large_solo_us", row)
            self.assertNotIn("ours@m_us", row)
        # The report's A/A line reads them: ours again over ours is 1.01.
        self.assertIn("time over ours' 1.010-1.010 over 2 rows",
                      report.markdown(merged))
        # A promoted variant is ours, not a column kept beside it.
        promoted = merge_runs.promote_variant(first, "m")
        self.assertNotIn("ours@m", promoted["variants"])
        again = merge_runs.merge([promoted, second])
        self.assertEqual(again["variants"], {"ours@again": {}})
        self.assertNotIn("ours@m_us", again["rows"][0])

    def test_header_names_each_parts_floor(self):
        first = self._run([("a", "fwd", 200.0, 100.0)], timestamp="t1",
                          floor_peak_tflops=687.0, copy_gbps=4227.0,
                          peak_tflops={"bf16": 687.0, "fp16": 728.0})
        second = self._run([("b", "fwd", 100.0, 200.0)], timestamp="t2",
                           floor_peak_tflops=706.0, copy_gbps=4232.0,
                           peak_tflops={"bf16": 706.0})
        second["source_commit"] = "abc1234"
        second["write_gbps"] = 3900.0
        second["bf16_peak_tflops_end"] = 655.0
        merged = merge_runs.merge([first, second])
        self.assertEqual([p["floor_peak_tflops"] for p in merged["parts"]],
                         [687.0, 706.0])
        header = "\n".join(report._header(merged))
        self.assertIn("  - part 1 (t1): P = 687 TFLOP/s, B = 4227 GB/s; "
                      "dense mm peaks (8192^3): bf16 687, fp16 728", header)
        # Each part names the sources it was built from, where recorded.
        self.assertIn("  - part 2 (t2, sources abc1234): P = 706", header)
        self.assertNotIn("overlap_ops.grouped_mm` (sources", header)
        # The write-only bandwidth where the part measured it (part 1,
        # from before it was recorded, has none).
        self.assertIn("B = 4232 GB/s; write-only (fill_) 3900 GB/s, not "
                      "used by the floor; dense mm peaks", header)
        self.assertIn("B = 4227 GB/s; dense mm peaks", header)
        # The peak measured again after the last row, where it was.
        self.assertIn("(8192^3): bf16 706; bf16 again after the last row: "
                      "655", header)
        self.assertNotIn("fp16 728; bf16 again", header)
        self.assertNotIn("used for every dtype), bytes", header)
        self.assertNotIn("timed differently", header)  # neither has a timer
        # A merge of a merge keeps every part; differing timers are named.
        third = self._run([("c", "fwd", 1.0, 1.0)], timestamp="t3",
                          timer="fixed order")
        again = merge_runs.merge([merged, third])
        self.assertEqual([p["timestamp"] for p in again["parts"]],
                         ["t1", "t2", "t3"])
        self.assertIn("part 3: fixed order",
                      "\n".join(report._header(again)))
        # One run keeps the one-line form.
        single = "\n".join(report._header(first))
        self.assertIn("- floor = max(FLOPs / 687 TFLOP/s", single)
        self.assertIn("overlap_ops.grouped_mm` (sources abc1234); stock",
                      "\n".join(report._header(second)))
        self.assertIn("read + write)); write-only (fill_) 3900 GB/s",
                      "\n".join(report._header(second)))
        self.assertNotIn("write-only", single)
        self.assertNotIn("again after", single)
        self.assertIn("TFLOP/s (8192^3): bf16 706; bf16 again after the "
                      "last row: 655", "\n".join(report._header(second)))

    def test_a_variant_promoted_to_ours(self):
        # PATH@VARIANT: the part's ours column is its variant's, ratios
        # recomputed, and the header says which settings it ran with.
        first = self._run([("a", "fwd", 200.0, 100.0)], timestamp="t1",
                          variants={"ours@m": {"RASTER": "m"}})
        first["rows"][0].update({"ours@m_us": 50.0, "ours@m_check": "pass"})
        second = self._run([("b", "fwd", 100.0, 200.0)], timestamp="t2")
        promoted = merge_runs.promote_variant(first, "m")
        self.assertEqual(first["rows"][0]["ours_us"], 200.0)  # not changed
        merged = merge_runs.merge([promoted, second])
        row = merged["rows"][0]
        self.assertEqual((row["ours_us"], row["ours_check"]), (50.0, "pass"))
        self.assertAlmostEqual(row["ours/stock"], 0.5)
        self.assertAlmostEqual(row["ours/floor"], 0.5)
        self.assertIn("  - part 1 (t1, ours = variant m (RASTER=m)): P = ",
                      "\n".join(report._header(merged)))
        self.assertNotIn("ours_from", merged["parts"][1])
        with self.assertRaisesRegex(ValueError, "no variant 'n'.*has: m"):
            merge_runs.promote_variant(first, "n")
        # A failed variant keeps nothing of the default column.
        first["rows"][0].update({"ours@m_us": None, "ours@m_check": "error",
                                 "ours@m_error": "boom"})
        failed = merge_runs.promote_variant(first, "m")["rows"][0]
        self.assertIsNone(failed["ours_us"])
        self.assertEqual(failed["ours_error"], "boom")
        self.assertNotIn("ours/stock", failed)
        self.assertNotIn("ours/floor", failed)

    def test_mismatched_runs_and_duplicate_rows_are_refused(self):
        first = self._run([("a", "fwd", 1.0, 1.0)])
        with self.assertRaisesRegex(ValueError, "run 2 has gpu"):
            merge_runs.merge([first, self._run([("b", "fwd", 1.0, 1.0)],
                                               gpu="A100")])
        with self.assertRaisesRegex(ValueError, "row a balanced bf16 fwd"):
            merge_runs.merge([first, self._run([("a", "fwd", 1.0, 1.0)])])
        with self.assertRaisesRegex(ValueError, "at least two"):
            merge_runs.merge([first])
        # A part with our kernels forced onto another path is another column.
        forced = self._run([("b", "fwd", 1.0, 1.0)],
                           backend_env={"TORCH_GROUPED_MM_BACKEND":
                                        "sm80"})
        with self.assertRaisesRegex(ValueError, "run 2 has backend_env"):
            merge_runs.merge([first, forced])
        broken = self._run([("b", "fwd", 1.0, 1.0)])
        del broken["rows"][0]["dist"]
        with self.assertRaisesRegex(ValueError, "a row of run 2 has no dist"):
            merge_runs.merge([first, broken])

    def test_main_writes_the_report(self):
        with tempfile.TemporaryDirectory() as tmp:
            parts = []
            for index, case in enumerate(("a", "b")):
                part = Path(tmp) / f"part{index}"
                part.mkdir()
                (part / "grouped_mm_results.json").write_text(json.dumps(
                    self._run([(case, "fwd", 100.0, 100.0)])))
                parts.append(str(part))
            out = Path(tmp) / "merged"
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(merge_runs.main(parts + ["--out", str(out)]),
                                 0)
            text = (out / "grouped_mm_results.md").read_text()
            self.assertIn("| a | balanced |", text)
            self.assertIn("| b | balanced |", text)
            with contextlib.redirect_stderr(io.StringIO()) as err:
                self.assertEqual(merge_runs.main(
                    [parts[0], parts[0], "--out", str(out)]), 1)
            self.assertIn("is in run 1 and run 2", err.getvalue())


class TestInductorKernel(TestCase):
    """The bench records which kernel Inductor's max-autotune picked, from
    the report Inductor writes to stderr."""

    _LOG = ("noise\nAutotune Choices Stats:\n"
            '{"num_choices": 55, "best_kernel": "triton_grouped_mm_130", '
            '"best_kernel_desc": "BLOCK_M=32, BLOCK_N=256", '
            '"best_time": 0.19}\nmore noise\n')

    def test_winner_from_the_report(self):
        self.assertEqual(bench.autotune_winner(self._LOG),
                         "triton_grouped_mm_130: BLOCK_M=32, BLOCK_N=256")
        self.assertIsNone(bench.autotune_winner("no report here\n"))
        self.assertIsNone(bench.autotune_winner(
            "Autotune Choices Stats:\nnot json\n"))

    def test_check_column_keeps_the_winner(self):
        ref = torch.ones(2, 2, dtype=torch.float64)

        def compiled(a, b, offs):
            sys.stderr.write(self._LOG)
            return torch.ones(2, 2)

        spec = bench._plan(cases.load_suite(_SUITES[0]),
                           bench._parse_args(["--quick"]))[0]
        with unittest.mock.patch.object(bench, "_group_error",
                                        return_value=0.0), \
                contextlib.redirect_stderr(io.StringIO()):
            result = bench._check_column("inductor", compiled, spec, None,
                                         None, None, [2], ref)
        self.assertEqual(result["inductor_check"], "pass")
        self.assertEqual(result["inductor_kernel"],
                         "triton_grouped_mm_130: BLOCK_M=32, BLOCK_N=256")
        row = {"case": "c", "dist": "skewed", "dtype": "bf16", "pass": "fwd",
               "ours_us": 200.0, "inductor_us": 150.0,
               "inductor_kernel": result["inductor_kernel"]}
        lines = report._inductor_kernel_lines([row])
        self.assertIn("| c | skewed | bf16 | fwd | 0.75 | triton_grouped_mm_130:"
                      " BLOCK_M=32, BLOCK_N=256 |", lines)
        # A "|" in a description would split the markdown cell.
        row["inductor_kernel"] = "k: A|B"
        self.assertIn("| c | skewed | bf16 | fwd | 0.75 | k: A\\|B |",
                      report._inductor_kernel_lines([row]))

    def test_inductor_without_a_report_says_so(self):
        # A cached compile writes no report: the row says so instead of
        # leaving the kernel out.
        spec = bench._plan(cases.load_suite(_SUITES[0]),
                           bench._parse_args(["--quick"]))[0]
        with unittest.mock.patch.object(bench, "_group_error",
                                        return_value=0.0):
            result = bench._check_column(
                "inductor", lambda a, b, offs: torch.ones(2, 2), spec, None,
                None, None, [2], torch.ones(2, 2, dtype=torch.float64))
            ours = bench._check_column(
                "ours", lambda a, b, offs: torch.ones(2, 2), spec, None,
                None, None, [2], torch.ones(2, 2, dtype=torch.float64))
        self.assertEqual(result["inductor_kernel"], "(no autotuning report)")
        self.assertNotIn("ours_kernel", ours)

    def test_inductor_compiles_uncached_once_per_shapes(self):
        # Only a call that compiles new shapes turns Inductor's caches off
        # (so it autotunes and reports); timed calls run as compiled.
        seen = []

        def fake_compile(fn, **kwargs):
            def run(a, b, offs):
                seen.append(torch._inductor.config.fx_graph_cache)
                return a
            return run

        a, b = torch.ones(4, 3), torch.ones(2, 3, 5)
        offs = torch.tensor([1, 4], dtype=torch.int32)
        import torch._inductor.config as inductor_config
        with unittest.mock.patch.object(torch, "compile", fake_compile), \
                unittest.mock.patch.dict(bench._INDUCTOR_WINNERS,
                                         clear=True), \
                inductor_config.patch(fx_graph_cache=True):
            fn = bench._inductor_fn()
            fn(a, b, offs)
            fn(a, b, offs)
            bench._INDUCTOR_WINNERS[bench._shape_key(a, b, offs)] = "k"
            bench._inductor_fn()(a, b, offs)  # a later row, same shapes
        self.assertEqual(seen, [False, True, True])

    def test_inductor_winner_reused_for_the_same_shapes(self):
        # Another dist of a case has the same input shapes: Inductor's
        # cache answers without a report, and the row gets the winner
        # recorded for those shapes.
        spec = bench._plan(cases.load_suite(_SUITES[0]),
                           bench._parse_args(["--quick"]))[0]
        a, b = torch.ones(4, 3), torch.ones(2, 3, 5)
        offs = torch.tensor([1, 4], dtype=torch.int32)
        ref = torch.ones(2, 2, dtype=torch.float64)

        def tuned(a, b, offs):
            sys.stderr.write(TestInductorKernel._LOG)
            return torch.ones(2, 2)

        with unittest.mock.patch.object(bench, "_group_error",
                                        return_value=0.0), \
                unittest.mock.patch.dict(bench._INDUCTOR_WINNERS, clear=True), \
                contextlib.redirect_stderr(io.StringIO()):
            first = bench._check_column("inductor", tuned, spec, a, b, offs,
                                        [1, 3], ref)
            again = bench._check_column(
                "inductor", lambda a, b, offs: torch.ones(2, 2), spec, a, b,
                offs, [1, 3], ref)
        winner = "triton_grouped_mm_130: BLOCK_M=32, BLOCK_N=256"
        self.assertEqual(first["inductor_kernel"], winner)
        self.assertEqual(again["inductor_kernel"],
                         winner + " (cached: tuned on an earlier row)")


class TestProfileTool(TestCase):
    """tools/bench/profile_grouped_mm.py (the ncu driver) refuses an unknown case
    with the list of known ones, before it touches a GPU."""

    def test_unknown_case_lists_the_suite(self):
        import profile_grouped_mm
        with unittest.mock.patch.object(sys, "argv", [
                "profile_grouped_mm.py", "--case", "no_such_case"]), \
                contextlib.redirect_stderr(io.StringIO()) as err:
            with self.assertRaises(SystemExit):
                profile_grouped_mm.main()
        self.assertIn("--case 'no_such_case' is not in", err.getvalue())
        self.assertIn("deepseek_v3_decode", err.getvalue())

    def test_bias_needs_ours(self):
        # Stock rejects a bias: refused before anything touches a GPU.
        import profile_grouped_mm
        with unittest.mock.patch.object(sys, "argv", [
                "profile_grouped_mm.py", "--case", "grin_moe", "--bias",
                "--impl", "stock"]), \
                contextlib.redirect_stderr(io.StringIO()) as err:
            with self.assertRaises(SystemExit):
                profile_grouped_mm.main()
        self.assertIn("--bias: stock torch._grouped_mm rejects a bias",
                      err.getvalue())

    def test_kernel_table(self):
        import profile_grouped_mm as prof
        events = [
            {"cat": "kernel", "name": "void at::native::grouped_mm::"
             "fill_group_arguments<int, W, unsigned short>(...)", "dur": 3.0},
            {"cat": "kernel", "name": "_ZN7cutlass13device_kernelI..."
             "KernelPtrArrayTmaWarpSpecializedPingpong...", "dur": 90.0},
            {"cat": "kernel", "name": "_ZN7cutlass13device_kernelI..."
             "KernelPtrArrayTmaWarpSpecializedCooperative...", "dur": 5.0},
            {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "dur": 4.0},
        ] * 2
        self.assertEqual(prof.kernel_table(events, calls=2), [
            ("fill arguments (+ zeros)", 1.0, 3.0),
            ("SM90 GEMM, pingpong (medium/small/wide)", 1.0, 90.0),
            ("SM90 GEMM, cooperative 128x256 (large/large_solo)", 1.0, 5.0)])
        self.assertEqual(prof.short_kernel_name("x" * 70), "x" * 57 + "...")
        # A TF32 token split: two fills and two cooperative GEMMs a call;
        # each GEMM launch keeps its own row, by its place in the call
        # (out of time order in the trace, as the profiler may write it).
        coop = ("_ZN7cutlass13device_kernelI..."
                "KernelPtrArrayTmaWarpSpecializedCooperative...")
        fill = "fill_group_arguments<float, W, float>(...)"
        split = []
        for call in range(3):
            start = 1000.0 * call
            split += [
                {"cat": "kernel", "name": coop, "ts": start + 30, "dur": 400.0},
                {"cat": "kernel", "name": fill, "ts": start, "dur": 2.0},
                {"cat": "kernel", "name": coop, "ts": start + 10, "dur": 8.0},
                {"cat": "kernel", "name": fill, "ts": start + 20, "dur": 3.0},
            ]
        label = "SM90 GEMM, cooperative 128x256 (large/large_solo)"
        self.assertEqual(prof.kernel_table(split, calls=3), [
            ("fill arguments (+ zeros), launch 1 of 2", 1.0, 2.0),
            (f"{label}, launch 1 of 2", 1.0, 8.0),
            ("fill arguments (+ zeros), launch 2 of 2", 1.0, 3.0),
            (f"{label}, launch 2 of 2", 1.0, 400.0)])
        # Launches that do not divide evenly among the calls stay one row
        # (here the last call's second GEMM is missing).
        uneven = split[:-4] + split[-3:]
        self.assertEqual(prof.kernel_table(uneven, calls=3), [
            ("fill arguments (+ zeros), launch 1 of 2", 1.0, 2.0),
            (label, 5 / 3, (3 * 8.0 + 2 * 400.0) / 3),
            ("fill arguments (+ zeros), launch 2 of 2", 1.0, 3.0)])
        cublas = ("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x256x64_"
                  "warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas")
        self.assertEqual(prof.short_kernel_name(cublas), cublas)

    def test_host_path_tables(self):
        import profile_grouped_mm as prof

        def call(start, first_launch_at, second_launch_at, duration):
            return [
                {"ph": "X", "cat": "user_annotation", "name": prof._CALL_MARK,
                 "ts": start, "dur": duration},
                {"cat": "cuda_runtime", "name": "cudaFuncSetAttribute",
                 "ts": start + 1.0, "dur": 2.0},
                {"cat": "cuda_runtime", "name": "cudaLaunchKernel",
                 "ts": start + first_launch_at, "dur": 3.0},
                {"cat": "cuda_driver", "name": "cuLaunchKernelEx",
                 "ts": start + second_launch_at, "dur": 5.0},
                # The same mark on the GPU, over the call's kernels (later,
                # and overlapping the next call's host launches): ignored.
                {"ph": "X", "cat": "gpu_user_annotation",
                 "name": prof._CALL_MARK, "ts": start + 40.0, "dur": 90.0},
                {"cat": "kernel", "name": "k", "ts": start + 40.0,
                 "dur": 90.0},
            ]

        # Three calls; the medians are those of the middle values. A sync
        # after the last call is outside every mark: not per-call time.
        events = (call(0.0, 10.0, 20.0, 25.0) + call(100.0, 14.0, 22.0, 31.0)
                  + call(200.0, 30.0, 35.0, 40.0)
                  + [{"cat": "cuda_runtime", "name": "cudaDeviceSynchronize",
                      "ts": 300.0, "dur": 60.0}])
        self.assertEqual(prof.call_host_times(events), (14.0, 31.0))
        self.assertEqual(prof.runtime_table(events, calls=3), [
            ("cuLaunchKernelEx", 1.0, 5.0),
            ("cudaLaunchKernel", 1.0, 3.0),
            ("cudaFuncSetAttribute", 1.0, 2.0)])
        no_marks = [e for e in events if e.get("name") != prof._CALL_MARK]
        self.assertIsNone(prof.call_host_times(no_marks))


instantiate_parametrized_tests(TestGroupSizes)
instantiate_parametrized_tests(TestReferenceCheck)

if __name__ == "__main__":
    run_tests()
