# Owner(s): ["module: benchmarks"]
"""CPU tests of the MoE layer benchmark (tools/bench/bench_moe_layer.py).

Covers what needs no GPU: layer shapes from the suite, the device-side
reports rendered from a CPU run. The layer itself is overlap_ops.moe,
tested in test_moe.py.
"""

from __future__ import annotations

import os
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

import torch
from torch.testing._internal.common_utils import (
    run_tests,
    TestCase,
)

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools" / "bench"))

import bench_moe_layer as moe  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402,F401

_SUITE = REPO / "bench" / "moe_shapes.json"
class TestSyncSites(TestCase):
    def test_each_sync_names_the_frame_that_issued_it(self) -> None:
        import unittest.mock
        import warnings

        def layer_op() -> None:
            warnings.warn("called a synchronizing CUDA operation")
            warnings.warn("called a synchronizing CUDA operation")

        with unittest.mock.patch.object(torch.cuda, "synchronize"), \
                unittest.mock.patch.object(torch.cuda, "get_sync_debug_mode",
                                           return_value=0), \
                unittest.mock.patch.object(torch.cuda, "set_sync_debug_mode"):
            sites = moe.host_sync_sites(layer_op)
            count = moe.count_host_syncs(lambda: None)
        self.assertEqual(len(sites), 2)
        self.assertTrue(all(site.endswith(" layer_op") for site in sites),
                        sites)
        self.assertTrue(sites[0].startswith("test_moe_layer.py:"), sites)
        self.assertEqual(count, 0)


class TestMoELayerShapes(TestCase):
    def test_suite_layers(self) -> None:
        shapes = {s.name: s for s in moe.load_layer_shapes(_SUITE)}
        self.assertEqual(list(shapes), list(moe.DEFAULT_LAYERS))
        mixtral = shapes["mixtral_8x7b"]
        self.assertEqual((mixtral.tokens, mixtral.dim, mixtral.hidden,
                          mixtral.experts, mixtral.top_k),
                         (16384, 4096, 14336, 8, 2))
        self.assertIn("w1 alone", mixtral.note)
        ds = shapes["deepseek_v3_ep8"]
        self.assertEqual((ds.tokens, ds.dim, ds.hidden, ds.experts),
                         (4096, 7168, 2048, 32))
        self.assertEqual(ds.note, "")
        qwen = shapes["qwen3_30b_a3b"]
        self.assertEqual((qwen.tokens, qwen.hidden, qwen.experts),
                         (8192, 768, 128))
        gpt = shapes["gpt_oss_120b"]
        self.assertEqual((gpt.tokens, gpt.dim, gpt.hidden), (8192, 2880, 2880))
        self.assertIn("no w2 case", gpt.note)
        for s in shapes.values():
            self.assertEqual(s.rows, s.tokens * s.top_k)

    def test_bad_layers_raise(self) -> None:
        with self.assertRaisesRegex(ValueError, "unknown layer 'llama'"):
            moe.load_layer_shapes(_SUITE, ["llama"])
        w13 = {"name": "x_w13", "M": 64, "K": 32, "N": 48, "E": 4}
        w2 = {"name": "x_w2", "M": 64, "K": 24, "N": 16, "E": 4}
        with self.assertRaisesRegex(ValueError, r"w2.N = 16 does not match"):
            moe._layer_from_cases("x", w13, w2, 2)
        with self.assertRaisesRegex(ValueError, "not a multiple of top_k"):
            moe._layer_from_cases("x", w13, None, 3)

    def test_args(self) -> None:
        args = moe._parse_args([])
        self.assertEqual(args.dtype, "bf16")
        self.assertEqual(args.impls, ["ours", "stock"])
        self.assertEqual(args.modes, ["eager", "compiled"])
        self.assertEqual((args.align_ours, args.align_stock), (1, 8))
        self.assertEqual(moe._shapes(moe._parse_args(["--quick"])),
                         [moe.QUICK_SHAPE])
        with contextlib.redirect_stderr(io.StringIO()):
            with self.assertRaises(SystemExit):
                moe._parse_args(["--modes", "eager,jit"])


class TestMoEReports(TestCase):
    def test_cpu_run_writes_reports(self) -> None:
        with tempfile.TemporaryDirectory() as out:
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), \
                    contextlib.redirect_stderr(stderr):
                moe.main(["--device", "cpu", "--quick", "--dtype", "fp32",
                          "--modes", "eager", "--out", out])
            data = json.loads((Path(out) / moe.JSON_NAME).read_text())
            md = (Path(out) / moe.MD_NAME).read_text()
        self.assertEqual([r["impl"] for r in data["results"]],
                         ["ours", "stock"])
        for r in data["results"]:
            for key in ("eager/fwd", "eager/fwd_bwd"):
                run = r["runs"][key]
                self.assertGreater(run["median_ms"], 0)
                self.assertIsNone(run["host_syncs"])  # counted on CUDA only
        self.assertIn("| quick | eager |", md)
        self.assertIn("[bench_moe_layer] quick ours eager/fwd",
                      stderr.getvalue())
        last = stdout.getvalue().strip().splitlines()
        self.assertTrue(last[-1].startswith("ms per step"))

    def test_errors_render_as_na(self) -> None:
        data = {
            "meta": {"device_name": "H200", "torch": "2.14.1",
                     "dtype": "bf16", "date": "today", "iters": 20,
                     "modes": ["eager"], "align": {"ours": 1, "stock": 8}},
            "shapes": [moe.dataclasses.asdict(moe.QUICK_SHAPE)],
            "results": [
                {"layer": "quick", "impl": "ours", "runs": {
                    "eager/fwd": {"median_ms": 2.0, "host_syncs": 0},
                    "eager/fwd_bwd": {"median_ms": 6.0, "host_syncs": 0}}},
                {"layer": "quick", "impl": "stock", "runs": {
                    "eager/fwd": {"median_ms": 3.0, "host_syncs": 1},
                    "eager/fwd_bwd": {"error": "RuntimeError: Invalid"}}},
            ],
        }
        md = moe.render_markdown(data)
        self.assertIn("| quick | eager | 2.000 ms, 0 sync | 3.000 ms, 1 sync "
                      "| 1.50 |", md)
        self.assertIn("n/a (RuntimeError: Invalid) | - |", md)
        table = moe.summary_table(data)
        self.assertIn("n/a", table)

    def test_first_line_of_wrapped_error(self) -> None:
        try:
            try:
                raise RuntimeError("Invalid strides/sizes\nmore detail")
            except RuntimeError as inner:
                raise ValueError("wrapper") from inner
        except ValueError as exc:
            self.assertEqual(moe._first_line(exc), "ValueError: wrapper <- "
                             "RuntimeError: Invalid strides/sizes")



if __name__ == "__main__":
    run_tests()
