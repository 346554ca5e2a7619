# Owner(s): ["module: linear algebra"]
"""Tests for the _grouped_mm contract (DESIGN.md), CPU and CUDA.

Mode by feature detection: with the overlap_ops extension installed the
tests run torch.ops.overlap_ops.grouped_mm; without it they run
torch._grouped_mm itself, which is what a wheel built by `./build.sh wheel`
patches (tests of extension-only switches then skip). Extension mode covers
torch.ops.overlap_ops.grouped_mm and
torch._grouped_mm routed to it). CUDA tests are generated only when a GPU is
present and skip when the extension was built without its CUDA kernels.
"""

from __future__ import annotations

import os
import sys
import unittest

import torch
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    onlyCPU,
    onlyCUDA,
)
from torch.testing._internal.common_utils import parametrize, run_tests, TestCase

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grouped_mm_reference import (  # noqa: E402
    assert_matches_reference,
    group_sizes,
    make_offsets,
    POISON,
    reference_grouped_mm,
    tolerance,
)
from launched_kernels import launched_kernels  # noqa: E402

try:
    import overlap_ops  # noqa: E402
except ImportError:  # a patched PyTorch wheel: test torch._grouped_mm
    overlap_ops = None

HAS_EXTENSION = overlap_ops is not None
HAS_CUDA_KERNELS = not HAS_EXTENSION or overlap_ops.has_cuda_kernels()
_OP = (torch.ops.overlap_ops.grouped_mm if HAS_EXTENSION
       else torch.ops.aten._grouped_mm)
needs_extension = unittest.skipIf(
    not HAS_EXTENSION, "tests an overlap_ops switch (extension mode only)")
DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _grouped_mm(a, b, offs=None, bias=None, out_dtype=None):
    return _OP(a, b, offs, bias, out_dtype)


def _randn(*shape, device, dtype, transposed=False):
    """Random data (never zeros); optionally a transposed (column-major) view."""
    if transposed:
        return torch.randn(*shape[:-2], shape[-1], shape[-2], device=device,
                           dtype=dtype).transpose(-2, -1)
    return torch.randn(*shape, device=device, dtype=dtype)


def _poison_allocator(shape, device, dtype):
    """Leaves a NaN-filled block in the caching allocator, so an output that
    reuses it shows every element the kernel forgot to write."""
    if torch.device(device).type == "cuda":
        torch.full(shape, POISON, device=device, dtype=dtype)


class TestGroupedMM(TestCase):
    def setUp(self):
        super().setUp()
        if self.device_type == "cuda" and not HAS_CUDA_KERNELS:
            self.skipTest("overlap_ops was built without its CUDA kernels")

    def _run_and_check(self, a, b, offs=None, bias=None, out_dtype=None):
        out_shape = reference_grouped_mm(a, b, offs, bias).shape
        _poison_allocator(out_shape, a.device, out_dtype or a.dtype)
        out = _grouped_mm(a, b, offs, bias, out_dtype)
        self.assertEqual(out.dtype, out_dtype or a.dtype)
        self.assertEqual(out.device, a.device)
        ref = reference_grouped_mm(a, b, offs, bias)
        assert_matches_reference(self, out, ref, a.dim(), b.dim(), offs,
                                 tolerance(a.dtype, self.device_type))
        return out

    @dtypes(*DTYPES)
    @parametrize("dist", ["balanced", "skewed", "sparse", "empty_ends"])
    @parametrize("offs_dtype", [torch.int32, torch.int64])
    @parametrize("a_transposed", [False, True])
    @parametrize("b_transposed", [False, True])
    def test_grouped_gemm_2d_3d(self, device, dtype, dist, offs_dtype,
                                a_transposed, b_transposed):
        groups, k, n = 6, 40, 24
        sizes = group_sizes(dist, 90, groups)
        a = _randn(sum(sizes) + 7, k, device=device, dtype=dtype,
                   transposed=a_transposed)  # 7 tail rows past offs[-1]
        b = _randn(groups, k, n, device=device, dtype=dtype,
                   transposed=b_transposed)
        self._run_and_check(a, b, make_offsets(sizes, device, offs_dtype))

    @dtypes(*DTYPES)
    @parametrize("dist", ["balanced", "skewed", "sparse"])
    @parametrize("a_transposed", [False, True])
    @parametrize("b_transposed", [False, True])
    def test_grouped_gemm_3d_2d(self, device, dtype, dist, a_transposed,
                                b_transposed):
        groups, m, k = 5, 33, 48
        sizes = group_sizes(dist, 70, groups)
        a = _randn(groups, m, k, device=device, dtype=dtype,
                   transposed=a_transposed)
        b = _randn(k, sum(sizes) + 5, device=device, dtype=dtype,
                   transposed=b_transposed)
        self._run_and_check(a, b, make_offsets(sizes, device))

    @dtypes(*DTYPES)
    @parametrize("dist", ["balanced", "skewed", "sparse", "empty_ends"])
    @parametrize("a_transposed", [False, True])
    @parametrize("b_transposed", [False, True])
    def test_grouped_gemm_2d_2d(self, device, dtype, dist, a_transposed,
                                b_transposed):
        groups, m, n = 7, 24, 40
        sizes = group_sizes(dist, 100, groups)
        a = _randn(m, sum(sizes) + 3, device=device, dtype=dtype,
                   transposed=a_transposed)
        b = _randn(sum(sizes) + 3, n, device=device, dtype=dtype,
                   transposed=b_transposed)
        out = self._run_and_check(a, b, make_offsets(sizes, device))
        for g, size in enumerate(sizes):
            if size == 0:  # k = 0 groups give exact zeros
                self.assertTrue(bool((out[g] == 0).all()), f"group {g}")

    @dtypes(*DTYPES)
    @parametrize("a_transposed", [False, True])
    @parametrize("b_transposed", [False, True])
    def test_grouped_gemm_3d_3d(self, device, dtype, a_transposed,
                                b_transposed):
        a = _randn(4, 20, 36, device=device, dtype=dtype,
                   transposed=a_transposed)
        b = _randn(4, 36, 28, device=device, dtype=dtype,
                   transposed=b_transposed)
        self._run_and_check(a, b)

    @dtypes(*DTYPES)
    @parametrize("layout", ["2d_3d", "2d_2d", "3d_3d"])
    @parametrize("out_fp32", [False, True])
    def test_bias_and_out_dtype(self, device, dtype, layout, out_fp32):
        if out_fp32 and dtype == torch.float32:
            self.skipTest("out_dtype=float32 is the default for float32")
        groups, m, k, n = 4, 18, 32, 20
        sizes = group_sizes("skewed", 60, groups)
        offs = make_offsets(sizes, device)
        out_dtype = torch.float32 if out_fp32 else None
        bias = torch.randn(groups, n, device=device, dtype=dtype)
        if layout == "2d_3d":
            a = _randn(60, k, device=device, dtype=dtype)
            b = _randn(groups, k, n, device=device, dtype=dtype)
        elif layout == "2d_2d":
            a = _randn(m, 60, device=device, dtype=dtype)
            b = _randn(60, n, device=device, dtype=dtype)
        else:
            a = _randn(groups, m, k, device=device, dtype=dtype)
            b = _randn(groups, k, n, device=device, dtype=dtype)
            offs = None
        self._run_and_check(a, b, offs, bias, out_dtype)

    @dtypes(torch.bfloat16, torch.float32)
    def test_grouped_gemm_more_than_1024_groups(self, device, dtype):
        groups, k, n = 1100, 16, 8
        sizes = [(g * 7) % 5 for g in range(groups)]  # includes empty groups
        a = _randn(sum(sizes), k, device=device, dtype=dtype)
        b = _randn(groups, k, n, device=device, dtype=dtype)
        self._run_and_check(a, b, make_offsets(sizes, device))

    @dtypes(torch.bfloat16)
    def test_grouped_gemm_odd_strides(self, device, dtype):
        groups, k, n = 3, 24, 16
        sizes = [5, 0, 9]
        # Every other column of a wider matrix, and an expanded weight.
        a = _randn(14, 2 * k, device=device, dtype=dtype)[:, ::2]
        b = _randn(1, k, n, device=device, dtype=dtype).expand(groups, k, n)
        self._run_and_check(a, b, make_offsets(sizes, device))

    @dtypes(torch.float32)
    def test_empty_operands(self, device, dtype):
        # No rows at all, and all groups empty.
        a = _randn(0, 8, device=device, dtype=dtype)
        b = _randn(3, 8, 4, device=device, dtype=dtype)
        out = _grouped_mm(a, b, make_offsets([0, 0, 0], device))
        self.assertEqual(out.shape, (0, 4))
        a = _randn(6, 8, device=device, dtype=dtype)
        self._run_and_check(a, b, make_offsets([0, 0, 0], device))

    @dtypes(torch.bfloat16, torch.float32)
    def test_zero_k_gives_zeros_plus_bias(self, device, dtype):
        # K = 0 in every layout: the product is empty, the output is the bias.
        offs = make_offsets([2, 0, 3], device)
        bias = torch.randn(3, 4, device=device, dtype=dtype)
        self._run_and_check(_randn(6, 0, device=device, dtype=dtype),
                            _randn(3, 0, 4, device=device, dtype=dtype),
                            offs, bias)
        self._run_and_check(_randn(3, 5, 0, device=device, dtype=dtype),
                            _randn(3, 0, 4, device=device, dtype=dtype),
                            None, bias)

    @dtypes(torch.bfloat16)
    def test_opcheck(self, device, dtype):
        sizes = [3, 0, 5]
        offs = make_offsets(sizes, device)
        cases = [
            (_randn(8, 16, device=device, dtype=dtype),
             _randn(3, 16, 8, device=device, dtype=dtype), offs, None, None),
            (_randn(3, 8, 16, device=device, dtype=dtype),
             _randn(16, 8, device=device, dtype=dtype), offs, None, None),
            (_randn(8, 8, device=device, dtype=dtype),
             _randn(8, 16, device=device, dtype=dtype), offs,
             torch.randn(3, 16, device=device, dtype=dtype), torch.float32),
        ]
        for a, b, o, bias, out_dtype in cases:
            torch.library.opcheck(_OP.default,
                                  (a, b, o, bias, out_dtype))

    @dtypes(torch.float32)
    @parametrize("layout", ["2d_3d", "3d_2d", "2d_2d", "3d_3d"])
    def test_backward_matches_reference(self, device, dtype, layout):
        sizes = [4, 0, 7, 3]
        groups = len(sizes)
        offs = make_offsets(sizes, device)
        total = sum(sizes) + 2  # a tail that must get zero gradient
        shapes = {
            "2d_3d": ((total, 12), (groups, 12, 10)),
            "3d_2d": ((groups, 9, 12), (12, total)),
            "2d_2d": ((9, total), (total, 10)),
            "3d_3d": ((groups, 9, 12), (groups, 12, 10)),
        }[layout]
        if layout == "3d_3d":
            offs = None
        with_bias = layout in ("2d_3d", "2d_2d", "3d_3d")
        a = _randn(*shapes[0], device=device, dtype=dtype).requires_grad_()
        b = _randn(*shapes[1], device=device, dtype=dtype).requires_grad_()
        bias = (torch.randn(groups, shapes[1][-1], device=device, dtype=dtype)
                .requires_grad_() if with_bias else None)
        out = _grouped_mm(a, b, offs, bias)
        # sum() gives an expanded, zero-stride gradient: upstream fails here.
        (out * 1.5).sum().backward()

        a64 = a.detach().cpu().double().requires_grad_()
        b64 = b.detach().cpu().double().requires_grad_()
        bias64 = (bias.detach().cpu().double().requires_grad_()
                  if with_bias else None)
        (reference_grouped_mm_autograd(a64, b64, offs, bias64) * 1.5).sum() \
            .backward()
        tol = tolerance(dtype, self.device_type)
        for got, want in ((a.grad, a64.grad), (b.grad, b64.grad)) + (
                ((bias.grad, bias64.grad),) if with_bias else ()):
            self.assertFalse(got.isnan().any().item())
            err = ((got.cpu().double() - want).norm() / want.norm()).item()
            self.assertLessEqual(err, tol)

    @needs_extension
    @dtypes(torch.float32)
    def test_route_torch_grouped_mm(self, device, dtype):
        a = _randn(10, 8, device=device, dtype=dtype)
        b = _randn(3, 8, 4, device=device, dtype=dtype)
        bad = torch.tensor([4, 2, 10], device=device, dtype=torch.int32)
        with overlap_ops.routed_torch_grouped_mm(), \
                overlap_ops.checked_offsets():
            # Our validation message shows the call reached our kernel.
            with self.assertRaisesRegex(RuntimeError, r"non-decreasing \(group 1\)"):
                torch._grouped_mm(a, b, bad)
            offs = make_offsets([4, 0, 5], device)
            out = torch._grouped_mm(a, b, offs)
        ref = reference_grouped_mm(a, b, offs)
        assert_matches_reference(self, out, ref, 2, 3, offs,
                                 tolerance(dtype, self.device_type))
        self.assertFalse(overlap_ops.route_torch_grouped_mm(False))

    @onlyCPU
    def test_bad_offsets_name_the_group(self, device):
        a = torch.randn(10, 8)
        b = torch.randn(3, 8, 4)
        cases = {
            (4, 2, 10): "offs[1] = 2 is less than offs[0] = 4; offsets must "
                        "be non-decreasing (group 1)",
            (4, 6, 11): "offs[2] = 11 is past the end of the grouped dimension "
                        "(size 10) (group 2)",
            (-1, 6, 9): "offs[0] = -1 is negative (group 0)",
        }
        for values, message in cases.items():
            offs = torch.tensor(values, dtype=torch.int32)
            with self.assertRaises(RuntimeError) as ctx:
                _grouped_mm(a, b, offs)
            self.assertIn(message, str(ctx.exception))

    @onlyCPU
    def test_validation_messages(self, device):
        a = torch.randn(10, 8)
        b = torch.randn(3, 8, 4)
        offs = torch.tensor([2, 5, 10], dtype=torch.int32)

        def message(*args):
            with self.assertRaises(RuntimeError) as ctx:
                _grouped_mm(*args)
            return str(ctx.exception).split("\n")[0]

        self.assertExpectedInline(
            message(torch.randn(2, 3, 4, 5), b, offs),
            """grouped_mm: self must be a 2d or 3d tensor, got a 4d tensor of shape [2, 3, 4, 5]""")
        self.assertExpectedInline(
            message(a.long(), b.long(), offs),
            """grouped_mm: self must be bfloat16, float16 or float32 (or float64 on the CPU), got Long on cpu""")
        self.assertExpectedInline(
            message(a, b.half(), offs),
            """grouped_mm: mat2 must have the same dtype as self (Float), got Half""")
        self.assertExpectedInline(
            message(a, torch.randn(3, 9, 4), offs),
            """grouped_mm: contraction sizes differ for the 2d x 3d layout: self [10, 8] has K = 8 but mat2 [3, 9, 4] has K = 9""")
        self.assertExpectedInline(
            message(a, b),
            """grouped_mm: offs is required for the 2d x 3d layout (1-D int32 cumulative end offsets on cpu)""")
        self.assertExpectedInline(
            message(a, b, offs[:2]),
            """grouped_mm: offs must have one entry per group (3 for the 2d x 3d layout), got 2""")
        self.assertExpectedInline(
            message(a, b, offs.float()),
            """grouped_mm: offs must be int32 (or int64), got Float""")
        self.assertExpectedInline(
            message(a, b, offs.view(3, 1)),
            """grouped_mm: offs must be 1-D, got shape [3, 1]""")
        self.assertExpectedInline(
            message(torch.randn(3, 4, 8), b, offs),
            """grouped_mm: offs must be None for the batched 3d x 3d layout""")
        self.assertExpectedInline(
            message(a, b, offs, None, torch.float16),
            """grouped_mm: out_dtype must be None, Float or (for bfloat16/float16 inputs) Float, got Half""")
        self.assertExpectedInline(
            message(a, b, offs, torch.randn(3, 5)),
            """grouped_mm: bias must have shape (G, N) = (3, 4), got [3, 5]""")
        self.assertExpectedInline(
            message(torch.randn(3, 4, 8), torch.randn(8, 10), offs,
                    torch.randn(3, 4)),
            """grouped_mm: bias is not supported for the 3d x 2d layout, where each group owns different output columns; add it to the output instead""")

    @onlyCPU
    @parametrize("layout", ["2d_3d", "3d_2d", "2d_2d", "3d_3d"])
    def test_gradcheck_float64(self, device, layout):
        sizes = [2, 0, 3]
        offs = make_offsets(sizes, device)
        total = sum(sizes) + 1
        shapes = {
            "2d_3d": ((total, 4), (3, 4, 5)),
            "3d_2d": ((3, 4, 5), (5, total)),
            "2d_2d": ((4, total), (total, 5)),
            "3d_3d": ((3, 4, 5), (3, 5, 2)),
        }[layout]
        if layout == "3d_3d":
            offs = None
        a = torch.randn(*shapes[0], dtype=torch.float64, requires_grad=True)
        b = torch.randn(*shapes[1], dtype=torch.float64, requires_grad=True)
        args = [a, b, offs]
        if layout != "3d_2d":
            n = shapes[1][-1]
            args.append(torch.randn(3, n, dtype=torch.float64,
                                    requires_grad=True))
        self.assertTrue(torch.autograd.gradcheck(
            lambda *t: _grouped_mm(*t), tuple(args)))

    @onlyCPU
    @parametrize("dynamic", [False, True])
    def test_compile_fullgraph_forward_backward(self, device, dynamic):
        def step(x, w, offs):
            out = _grouped_mm(x, w, offs)
            return out.float().square().sum()

        compiled = torch.compile(step, fullgraph=True, dynamic=dynamic,
                                 backend="aot_eager")
        for sizes in ([3, 0, 5], [4, 4, 1]):
            offs = make_offsets(sizes, device)
            x = torch.randn(9, 8, dtype=torch.float16, requires_grad=True)
            w = torch.randn(3, 8, 6, dtype=torch.float16, requires_grad=True)
            loss = compiled(x, w, offs)
            loss.backward()
            x2 = x.detach().clone().requires_grad_()
            w2 = w.detach().clone().requires_grad_()
            step(x2, w2, offs).backward()
            self.assertEqual(loss, step(x2.detach(), w2.detach(), offs))
            self.assertEqual(x.grad, x2.grad)
            self.assertEqual(w.grad, w2.grad)

    @needs_extension
    @onlyCPU
    @parametrize("dtype_name", ["float16", "float32", "bfloat16"])
    def test_compile_routed_torch_grouped_mm(self, device, dtype_name):
        # Stock's meta kernel rejects fp16/fp32 and unaligned strides; with
        # routing on, torch._grouped_mm traces in every dtype.
        dtype = getattr(torch, dtype_name)

        def step(x, w, offs):
            return torch._grouped_mm(x, w, offs)

        offs = make_offsets([3, 0, 6], device)
        x = torch.randn(9, 8, dtype=dtype, requires_grad=True)
        w = torch.randn(3, 8, 6, dtype=dtype, requires_grad=True)
        with overlap_ops.routed_torch_grouped_mm():
            out = torch.compile(step, fullgraph=True, backend="aot_eager")(
                x, w, offs)
            out.float().sum().backward()
            self.assertEqual(out, step(x.detach(), w.detach(), offs))
        self.assertEqual(x.grad.shape, x.shape)
        self.assertEqual(w.grad.shape, w.shape)
        stock_meta = torch.ops.aten._grouped_mm.default.py_kernels.get(
            torch._C.DispatchKey.Meta)
        self.assertIsNot(stock_meta, overlap_ops._fake._grouped_mm_fake)

    @needs_extension
    @onlyCPU
    def test_checked_offsets_switch(self, device):
        with overlap_ops.checked_offsets(True):
            self.assertTrue(torch.ops.overlap_ops._checked_offsets())
            with overlap_ops.checked_offsets(False):
                self.assertFalse(torch.ops.overlap_ops._checked_offsets())
            self.assertTrue(torch.ops.overlap_ops._checked_offsets())

    @onlyCUDA
    @dtypes(*DTYPES)
    def test_no_host_sync(self, device, dtype):
        sizes = [5, 0, 12, 3]
        offs = make_offsets(sizes, device)
        total = sum(sizes)
        calls = [
            (_randn(total, 32, device=device, dtype=dtype),
             _randn(4, 32, 16, device=device, dtype=dtype), offs),
            (_randn(4, 16, 32, device=device, dtype=dtype),
             _randn(32, total, device=device, dtype=dtype), offs),
            (_randn(16, total, device=device, dtype=dtype),
             _randn(total, 24, device=device, dtype=dtype), offs),
            (_randn(4, 16, 32, device=device, dtype=dtype),
             _randn(4, 32, 24, device=device, dtype=dtype), None),
        ]
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            outs = [_grouped_mm(a, b, o) for a, b, o in calls]
        finally:
            torch.cuda.set_sync_debug_mode(0)
        for (a, b, o), out in zip(calls, outs):
            assert_matches_reference(self, out, reference_grouped_mm(a, b, o),
                                     a.dim(), b.dim(), o,
                                     tolerance(dtype, self.device_type))

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float32)
    @parametrize("layout", ["2d_3d", "2d_2d"])
    def test_graph_replay_after_offsets_change(self, device, dtype, layout):
        groups = 8
        first = group_sizes("balanced", 256, groups)
        second = group_sizes("skewed", 256, groups, seed=3)
        offs = make_offsets(first, device)
        if layout == "2d_3d":
            a = _randn(256, 64, device=device, dtype=dtype)
            b = _randn(groups, 64, 48, device=device, dtype=dtype)
        else:
            a = _randn(32, 256, device=device, dtype=dtype)
            b = _randn(256, 48, device=device, dtype=dtype)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            _grouped_mm(a, b, offs)  # warm-up outside capture
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = _grouped_mm(a, b, offs)
        offs.copy_(make_offsets(second, device))
        a.copy_(torch.randn_like(a))
        graph.replay()
        torch.cuda.synchronize()
        assert_matches_reference(self, out, reference_grouped_mm(a, b, offs),
                                 a.dim(), b.dim(), offs,
                                 tolerance(dtype, self.device_type))

    @dtypes(torch.bfloat16, torch.float32)
    def test_moe_step_matches_reference(self, device, dtype):
        # The MoE step the graph tests capture, eager, on every device.
        static = _MoEStepInputs.make(device, dtype)
        static.route([1, 0, 2, 1, 1, 0])
        out, grads = static.step()
        static.check(self, out, grads)

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float32)
    def test_moe_step_graph_replay(self, device, dtype):
        # A whole MoE forward + backward (routing on the device, grouped w13,
        # SwiGLU, grouped w2, combine, autograd.grad) in one CUDA graph,
        # replayed after new routing (new offsets, empty experts) and new
        # data were copied into the static inputs.
        static = _MoEStepInputs.make(device, dtype)
        static.route([1, 1, 1, 1, 1, 1])
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm-up outside capture, as autograd needs
                static.step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out, grads = static.step()
        for seed, weights in enumerate(([1, 1, 1, 1, 1, 1],
                                        [0, 4, 1, 0, 9, 1],
                                        [5, 0, 0, 1, 0, 0.2])):
            static.route(weights, seed=seed + 1)
            graph.replay()
            torch.cuda.synchronize()
            static.check(self, out, grads)

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float16, torch.float32)
    def test_moe_step_no_host_sync(self, device, dtype):
        static = _MoEStepInputs.make(device, dtype)
        static.route([0, 4, 1, 0, 9, 1])
        static.step()  # first-call setup (handles, workspaces) may sync
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            out, grads = static.step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        static.check(self, out, grads)

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float16, torch.float32)
    @parametrize("carveout", [8, 16, 32, 66])
    def test_carveout_limits_grid(self, device, dtype, carveout):
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        sizes = group_sizes("skewed", 4096, 16)
        a = _randn(4096, 256, device=device, dtype=dtype)
        b = _randn(16, 256, 512, device=device, dtype=dtype)
        offs = make_offsets(sizes, device)
        grids = _launched_grids(lambda: _grouped_mm(a, b, offs),
                                carveout=carveout)
        self.assertTrue(grids, "no kernel was traced")
        for name, blocks in grids:
            self.assertLessEqual(blocks, sms - carveout, name)
        grids = _launched_grids(lambda: _grouped_mm(a, b, offs), carveout=0)
        self.assertEqual(max(blocks for _, blocks in grids) <= sms, True)

    @onlyCUDA
    def test_carveout_out_of_range_raises(self, device):
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        a = _randn(8, 16, device=device, dtype=torch.bfloat16)
        b = _randn(2, 16, 8, device=device, dtype=torch.bfloat16)
        offs = make_offsets([3, 5], device)
        torch._C._set_sm_carveout_experimental(sms)
        try:
            with self.assertRaisesRegex(RuntimeError, r"0 <= k < \d+"):
                _grouped_mm(a, b, offs)
        finally:
            torch._C._set_sm_carveout_experimental(None)

    @onlyCUDA
    @dtypes(torch.bfloat16)
    def test_bad_offsets_do_not_crash(self, device, dtype):
        a = _randn(64, 32, device=device, dtype=dtype)
        b = _randn(4, 32, 16, device=device, dtype=dtype)
        for values in ([10, 5, 64, 64], [-7, 20, 30, 40], [10, 20, 30, 500],
                       [2**31 - 1, 0, -5, 10]):
            offs = torch.tensor(values, device=device, dtype=torch.int32)
            out = _grouped_mm(a, b, offs)
            torch.cuda.synchronize()
            self.assertEqual(out.shape, (64, 16))
        # The context is still alive and correct afterwards.
        offs = make_offsets([16, 16, 16, 16], device)
        self._run_and_check(a, b, offs)

    @needs_extension
    @onlyCUDA
    @dtypes(torch.bfloat16)
    def test_checked_mode_names_the_group(self, device, dtype):
        a = _randn(64, 32, device=device, dtype=dtype)
        b = _randn(4, 32, 16, device=device, dtype=dtype)
        offs = torch.tensor([10, 30, 20, 64], device=device, dtype=torch.int32)
        with overlap_ops.checked_offsets():
            with self.assertRaisesRegex(
                    RuntimeError, r"offs\[2\] = 20 is less than offs\[1\] = 30"):
                _grouped_mm(a, b, offs)


def reference_grouped_mm_autograd(a, b, offs, bias):
    """Differentiable float64 reference (same math as reference_grouped_mm)."""
    ends = [] if offs is None else offs.cpu().tolist()
    starts = [0] + ends[:-1]
    if a.dim() == 2 and b.dim() == 3:
        pieces = [a[s:e] @ b[g] + (bias[g] if bias is not None else 0)
                  for g, (s, e) in enumerate(zip(starts, ends))]
        tail = a[ends[-1]:] @ b[0] * 0
        return torch.cat(pieces + [tail])
    if a.dim() == 3 and b.dim() == 2:
        pieces = [a[g] @ b[:, s:e] for g, (s, e) in enumerate(zip(starts, ends))]
        return torch.cat(pieces + [a[0] @ b[:, ends[-1]:] * 0], dim=1)
    if a.dim() == 2 and b.dim() == 2:
        return torch.stack([
            a[:, s:e] @ b[s:e] + (bias[g] if bias is not None else 0)
            for g, (s, e) in enumerate(zip(starts, ends))])
    out = a @ b
    return out + bias.unsqueeze(1) if bias is not None else out



def moe_forward(x, top_e, top_p, w13, w2, grouped_mm):
    """MoE FFN with the routing decided: x (T, D), top_e / top_p (T, k)
    experts and weights, w13 (G, D, 2H), w2 (G, H, D) -> (T, D).

    Permutation on the device (stable argsort, scatter_add counts, int32
    cumsum offsets), grouped w13, SwiGLU, grouped w2, weighted combine.
    """
    tokens, top_k = top_e.shape
    groups, hidden = w13.shape[0], w2.shape[1]
    flat = top_e.reshape(-1)
    order = flat.argsort(stable=True)
    counts = torch.zeros(groups, dtype=torch.int64, device=x.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    offs = counts.cumsum(0).to(torch.int32)
    h = grouped_mm(x.index_select(0, order // top_k), w13, offs)
    h = torch.nn.functional.silu(h[:, :hidden]) * h[:, hidden:]
    y = grouped_mm(h, w2, offs)
    rows = torch.arange(order.numel(), device=x.device)
    row_of_slot = torch.empty_like(order).index_copy_(0, order, rows)
    per_slot = y.index_select(0, row_of_slot).view(tokens, top_k, -1)
    return (per_slot * top_p.unsqueeze(-1).to(y.dtype)).sum(1)


class _MoEStepInputs:
    """Static inputs of one MoE training step, refilled in place by route()
    so that a captured CUDA graph sees new routing and new data."""

    kTokens, kDim, kHidden, kExperts, kTopK = 24, 32, 16, 6, 2

    @classmethod
    def make(cls, device, dtype):
        self = cls()
        self.dtype = dtype
        t, d, h, e, k = (cls.kTokens, cls.kDim, cls.kHidden, cls.kExperts,
                         cls.kTopK)
        self.x = torch.randn(t, d, device=device, dtype=dtype,
                             requires_grad=True)
        self.w13 = (torch.randn(e, d, 2 * h, device=device, dtype=dtype)
                    * d ** -0.5).requires_grad_()
        self.w2 = (torch.randn(e, h, d, device=device, dtype=dtype)
                   * h ** -0.5).requires_grad_()
        self.top_e = torch.zeros(t, k, device=device, dtype=torch.int64)
        self.top_p = torch.zeros(t, k, device=device, dtype=torch.float32)
        self.dout = torch.randn(t, d, device=device, dtype=dtype)
        return self

    def route(self, expert_weights, seed=0):
        """New experts (drawn without replacement, weight 0 = never chosen),
        router weights and data, copied into the static tensors."""
        gen = torch.Generator().manual_seed(seed)
        w = torch.tensor(expert_weights, dtype=torch.float64)
        top_e = torch.multinomial(w.expand(self.kTokens, -1), self.kTopK,
                                  generator=gen)
        top_p = torch.rand(self.kTokens, self.kTopK, generator=gen)
        with torch.no_grad():
            self.top_e.copy_(top_e)
            self.top_p.copy_(top_p)
            self.x.copy_(torch.randn(self.x.shape, generator=gen))
            self.dout.copy_(torch.randn(self.dout.shape, generator=gen))

    def step(self):
        """Forward + backward: (out, (dx, dw13, dw2))."""
        out = moe_forward(self.x, self.top_e, self.top_p, self.w13, self.w2,
                          _grouped_mm)
        grads = torch.autograd.grad(out, (self.x, self.w13, self.w2),
                                    self.dout)
        return out, grads

    def check(self, testcase, out, grads):
        """out and grads vs float64 on the CPU; expert weight gradients per
        group (exact zeros for an expert no token chose)."""
        leaves = [t.detach().cpu().double().requires_grad_()
                  for t in (self.x, self.w13, self.w2)]
        top_e, top_p = self.top_e.cpu(), self.top_p.cpu().double()
        ref = moe_forward(leaves[0], top_e, top_p, leaves[1], leaves[2],
                          lambda a, b, o: reference_grouped_mm_autograd(
                              a, b, o, None))
        ref_grads = torch.autograd.grad(ref, leaves,
                                        self.dout.cpu().double())
        tol = 3 * tolerance(self.dtype, out.device.type)
        chosen = torch.bincount(top_e.flatten(), minlength=self.kExperts)
        for name, got, want in (("out", out, ref), ("dx", grads[0],
                                                    ref_grads[0])):
            got = got.detach().cpu().double()
            err = ((got - want).norm() / want.norm()).item()
            testcase.assertLessEqual(err, tol, f"{name}: {err:.3e}")
        for name, got, want in (("dw13", grads[1], ref_grads[1]),
                                ("dw2", grads[2], ref_grads[2])):
            got = got.cpu().double()
            for g in range(self.kExperts):
                if chosen[g] == 0:
                    testcase.assertTrue(bool((got[g] == 0).all()),
                                        f"{name} expert {g}: expected zeros")
                    continue
                err = ((got[g] - want[g]).norm() / want[g].norm()).item()
                testcase.assertLessEqual(err, tol,
                                         f"{name} expert {g}: {err:.3e}")


def _launched_grids(fn, carveout: int) -> list[tuple[str, int]]:
    """launched_kernels(fn) with the SM carveout set to carveout."""
    torch._C._set_sm_carveout_experimental(carveout or None)
    try:
        return launched_kernels(fn)
    finally:
        torch._C._set_sm_carveout_experimental(None)


instantiate_device_type_tests(TestGroupedMM, globals(), only_for=("cpu", "cuda"))

if __name__ == "__main__":
    run_tests()
