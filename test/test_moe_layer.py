# Owner(s): ["module: benchmarks"]
"""CPU tests of the MoE layer benchmark (tools/bench/bench_moe_layer.py).

Covers what needs no GPU: layer shapes from the suite, the device-side
permutation against a plain per-token loop, the layer (forward, backward,
torch.compile) against float64 per-token references with our CPU kernel in
float32, and the reports rendered from a CPU run.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
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

import bench_moe_layer as moe  # noqa: E402

try:
    import overlap_ops  # noqa: F401  (registers torch.ops.overlap_ops)
    HAS_EXTENSION = True
except ImportError:
    HAS_EXTENSION = False

_SUITE = REPO / "bench" / "moe_shapes.json"
# torch._grouped_mm itself in a patched wheel, ours in extension mode.
_GROUPED_MM = {"ours": moe.ours_grouped_mm if HAS_EXTENSION
               else moe.stock_grouped_mm, "stock": moe.stock_grouped_mm}


def _expected_permutation(top_e: torch.Tensor, experts: int, align: int):
    """Per-token loop: (source row list, row of every slot, group ends)."""
    tokens, top_k = top_e.shape
    source, row_of_slot, ends = [], [0] * (tokens * top_k), []
    for e in range(experts):
        for t in range(tokens):
            for j in range(top_k):
                if int(top_e[t, j]) == e:
                    row_of_slot[t * top_k + j] = len(source)
                    source.append(t)
        while len(source) % align:
            source.append(tokens)  # padding reads the appended zero row
        ends.append(len(source))
    return source, row_of_slot, ends


def _layer(impl: str, tokens_dim=16, hidden=12, experts=6, top_k=2,
           align=1, dtype=torch.float32) -> moe.MoELayer:
    torch.manual_seed(0)
    return moe.MoELayer(tokens_dim, hidden, experts, top_k, _GROUPED_MM[impl],
                        align=align, device="cpu", dtype=dtype)


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.double() - want).norm() / want.norm()).item()


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


class TestMoEPermutation(TestCase):
    @parametrize("align", [1, 4])
    @parametrize("tokens,experts,top_k", [(13, 6, 2), (3, 8, 2), (20, 4, 4)])
    def test_permute_matches_loop(self, align, tokens, experts, top_k) -> None:
        torch.manual_seed(tokens)
        logits = torch.randn(tokens, experts)
        _, top_e = logits.softmax(-1).topk(top_k, dim=-1)
        perm = moe.permute(top_e, experts, align)
        source, row_of_slot, ends = _expected_permutation(top_e, experts, align)
        # Static capacity: the tail past offs[-1] reads the zero row too.
        capacity = tokens * top_k + (experts * (align - 1) if align > 1 else 0)
        self.assertEqual(perm.source.shape, (capacity,))
        self.assertEqual(perm.source[:len(source)].tolist(), source)
        self.assertTrue(bool((perm.source[len(source):] == tokens).all()))
        self.assertEqual(perm.row_of_slot.tolist(), row_of_slot)
        self.assertEqual(perm.offs.dtype, torch.int32)
        self.assertEqual(perm.offs.tolist(), ends)
        self.assertEqual(perm.counts.tolist(),
                         torch.bincount(top_e.flatten(), minlength=experts)
                         .tolist())

    def test_gather_and_combine_round_trip(self) -> None:
        tokens, experts, top_k = 9, 5, 3
        x = torch.randn(tokens, 7)
        top_p, top_e = torch.randn(tokens, experts).softmax(-1).topk(top_k)
        for align in (1, 8):
            perm = moe.permute(top_e, experts, align)
            rows = moe.gather_rows(x, perm)
            pad = perm.source == tokens
            self.assertEqual(rows[pad], torch.zeros_like(rows[pad]))
            self.assertEqual(rows[~pad], x[perm.source[~pad]])
            # Identity experts: combine gives x * sum of the chosen weights.
            out = moe.combine(rows, perm, top_p)
            self.assertEqual(out, x * top_p.sum(-1, keepdim=True))


class TestMoELayer(TestCase):
    @parametrize("impl", ["ours", "stock"])
    @parametrize("align", [1, 8])
    def test_forward_matches_per_token_loop(self, impl, align) -> None:
        layer = _layer(impl, align=align)
        x = torch.randn(11, 16)
        out = layer(x)
        self.assertEqual(out.shape, x.shape)
        self.assertEqual(out.dtype, x.dtype)
        self.assertLessEqual(_rel_err(out, moe.reference_moe(layer, x)), 1e-5)

    def test_forward_with_empty_experts(self) -> None:
        # 3 tokens x top-2 of 8 experts: at least two groups are empty.
        layer = _layer("ours", experts=8)
        x = torch.randn(3, 16)
        out = layer(x)
        self.assertLessEqual(_rel_err(out, moe.reference_moe(layer, x)), 1e-5)

    @parametrize("impl", ["ours", "stock"])
    def test_backward_matches_float64(self, impl) -> None:
        layer = _layer(impl)
        # Stock rejects float64; the float64 reference runs on our kernel.
        layer64 = _layer("ours", dtype=torch.float64)
        layer64.load_state_dict({k: v.double()
                                 for k, v in layer.state_dict().items()})
        x = torch.randn(10, 16, requires_grad=True)
        x64 = x.detach().double().requires_grad_()
        dout = torch.randn(10, 16)
        layer(x).backward(dout)
        layer64(x64).backward(dout.double())
        for (name, p), p64 in zip(layer.named_parameters(),
                                  layer64.parameters()):
            self.assertLessEqual(_rel_err(p.grad, p64.grad), 1e-4, name)
        self.assertLessEqual(_rel_err(x.grad, x64.grad), 1e-4)

    def test_compile_fullgraph_forward_backward(self) -> None:
        layer = _layer("ours", align=4)
        compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
        x = torch.randn(12, 16)
        dout = torch.randn(12, 16)
        out = compiled(x)
        out.backward(dout)
        grads = [p.grad.clone() for p in layer.parameters()]
        layer.zero_grad(set_to_none=True)
        eager = layer(x)
        eager.backward(dout)
        self.assertEqual(out, eager)
        for got, p in zip(grads, layer.parameters()):
            self.assertEqual(got, p.grad)


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


instantiate_parametrized_tests(TestMoEPermutation)
instantiate_parametrized_tests(TestMoELayer)

if __name__ == "__main__":
    run_tests()
