# Owner(s): ["module: autograd"]
"""Autograd, fake/meta kernels and torch.compile of _grouped_mm.

Gradients of self, mat2 and bias in every layout against a float64
reference (gradcheck on the CPU), with expanded upstream gradients such as
the one out.sum().backward() produces; opcheck (fake tensor, autograd
registration); torch.compile(fullgraph=True) forward and backward; and a
whole MoE forward + backward step, eager and, on CUDA, without host syncs
and captured in one CUDA graph replayed with new routing. On CUDA, the bias
gradient's column sums (_grouped_mm_bias_column_sums) and the cast of an
out_dtype=float32 gradient (_grouped_mm_grad_to).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    onlyCPU,
    onlyCUDA,
)
from torch.testing._internal.common_utils import parametrize, run_tests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grouped_mm_reference import make_offsets, tolerance  # noqa: E402
from launched_kernels import (  # noqa: E402
    carveout_set,
    launched_kernels,
    launched_kernels_under_carveout,
)
from test_grouped_mm import (  # noqa: E402
    _grouped_mm,
    _poison_allocator,
    _randn,
    GroupedMMTestCase,
)


def _column_sums(grad, offs, dtype):
    """The bias gradient's per-group column sums (CUDA)."""
    return torch.ops.aten._grouped_mm_bias_column_sums(grad, offs, dtype)


def _grad_to(grad, dtype):
    """The backward's cast of an out_dtype=float32 gradient (CUDA)."""
    return torch.ops.aten._grouped_mm_grad_to(grad, dtype)


# Group sizes of _leaf_operands: an empty group, and 2 rows past offs[-1]
# that must get zero gradient.
_LEAF_SIZES = [4, 0, 7, 3]
_LEAF_GROUPS = len(_LEAF_SIZES)


def _leaf_operands(layout, device, dtype):
    """a, b (random, requiring grad) and offs (None for 3d x 3d) of a small
    call in `layout`, grouped by _LEAF_SIZES; K = 12, N = 10, M = 9."""
    offs = make_offsets(_LEAF_SIZES, device)
    total = sum(_LEAF_SIZES) + 2
    groups = _LEAF_GROUPS
    shapes = {
        "2d_3d": ((total, 12), (groups, 12, 10)),
        "3d_2d": ((groups, 9, 12), (12, total)),
        "2d_2d": ((9, total), (total, 10)),
        "3d_3d": ((groups, 9, 12), (groups, 12, 10)),
    }[layout]
    a = _randn(*shapes[0], device=device, dtype=dtype).requires_grad_()
    b = _randn(*shapes[1], device=device, dtype=dtype).requires_grad_()
    return a, b, None if layout == "3d_3d" else offs


class _AutogradTests:
    """The autograd tests, device-generic. A plain class: entry_copy()
    turns a copy into a TestCase for instantiate_device_type_tests, which
    consumes the test methods of the class it instantiates."""

    # Which entry point the tests call: the op (grouped_mm_op) or
    # F.grouped_mm ("functional"), which must train exactly as the op does.
    ENTRY = "op"

    def _mm(self, a, b, offs=None, bias=None, out_dtype=None):
        if self.ENTRY == "functional":
            return F.grouped_mm(a, b, offs=offs, bias=bias,
                                out_dtype=out_dtype)
        return self.grouped_mm_op(a, b, offs, bias, out_dtype)

    def _check_rounded_grad_backward(self, a, b, offs, grad_out):
        """a.grad and b.grad (those that require grad; the others stay None),
        after a backward of grad_out (float32) through an out_dtype=float32
        call, against float64 of grad_out rounded to the inputs' dtype:
        within tolerance, and exact zeros where the reference has them (rows
        past offs[-1], empty groups)."""
        dtype = a.dtype
        a64 = a.detach().cpu().double().requires_grad_()
        b64 = b.detach().cpu().double().requires_grad_()
        reference_grouped_mm_autograd(a64, b64, offs, None).backward(
            grad_out.detach().to(dtype).cpu().double())
        tol = tolerance(dtype, self.device_type)
        for leaf, want in ((a, a64.grad), (b, b64.grad)):
            if not leaf.requires_grad:
                self.assertIsNone(leaf.grad)
                continue
            got = leaf.grad
            self.assertEqual(got.dtype, dtype)
            self.assertFalse(got.isnan().any().item())
            got = got.detach().cpu().double()
            err = ((got - want).norm() / want.norm()).item()
            self.assertLessEqual(err, tol)
            self.assertEqual(torch.count_nonzero(got[want == 0]).item(), 0)

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
            torch.library.opcheck(self.grouped_mm_op.default,
                                  (a, b, o, bias, out_dtype))

    @dtypes(torch.float32)
    @parametrize("layout", ["2d_3d", "3d_2d", "2d_2d", "3d_3d"])
    def test_backward_matches_reference(self, device, dtype, layout):
        a, b, offs = _leaf_operands(layout, device, dtype)
        groups = _LEAF_GROUPS
        with_bias = layout in ("2d_3d", "2d_2d", "3d_3d")
        bias = (torch.randn(groups, b.shape[-1], device=device, dtype=dtype)
                .requires_grad_() if with_bias else None)
        out = self._mm(a, b, offs, bias)
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

    @dtypes(torch.float32)
    @parametrize("layout", ["2d_3d", "3d_2d", "2d_2d", "3d_3d"])
    def test_mat2_grad_keeps_mat2_layout(self, device, dtype, layout):
        # torchtitan passes w.transpose(-2, -1): a column-major mat2. Its
        # gradient must come back column-major too, or autograd copies
        # (transposes) a weight-sized tensor into the parameter's layout.
        sizes = [5, 0, 6, 3]
        groups = len(sizes)
        offs = make_offsets(sizes, device)
        total = sum(sizes) + 2
        shapes = {
            "2d_3d": ((total, 16), (groups, 16, 8)),
            "3d_2d": ((groups, 8, 16), (16, total)),
            "2d_2d": ((8, total), (total, 16)),
            "3d_3d": ((groups, 8, 16), (groups, 16, 8)),
        }[layout]
        if layout == "3d_3d":
            offs = None
        a = _randn(*shapes[0], device=device, dtype=dtype).requires_grad_()
        b_shape = shapes[1]
        weight = _randn(*b_shape[:-2], b_shape[-1], b_shape[-2],
                        device=device, dtype=dtype).requires_grad_()
        b = weight.transpose(-2, -1)  # column-major view of the parameter
        seen = []
        b.register_hook(lambda g: seen.append(g.stride()))
        out = self._mm(a, b, offs)
        grad_out = _randn(*out.shape, device=device, dtype=dtype)
        out.backward(grad_out)
        self.assertEqual(seen, [b.stride()])
        self.assertTrue(weight.grad.is_contiguous())

        a64 = a.detach().cpu().double()
        b64 = b.detach().cpu().double().requires_grad_()
        reference_grouped_mm_autograd(a64, b64, offs, None).backward(
            grad_out.cpu().double())
        want = b64.grad
        got = weight.grad.transpose(-2, -1).cpu().double()
        err = ((got - want).norm() / want.norm()).item()
        self.assertLessEqual(err, tolerance(dtype, self.device_type))

    @dtypes(torch.float32, torch.bfloat16)
    @parametrize("layout", ["2d_3d", "3d_2d", "2d_2d", "3d_3d"])
    @parametrize("needs", ["self", "mat2", "both", "bias"])
    def test_saves_only_the_operands_backward_reads(self, device, dtype,
                                                    layout, needs):
        # self is read only for mat2's gradient and mat2 only for self's,
        # so each is saved only when the other requires grad (upstream's
        # wrap_opt_if): an MoE with frozen experts keeps no activations
        # alive. Both operands are column-major views, so the gradient of
        # an operand that was not saved must still take its layout.
        a, b, offs = _leaf_operands(layout, device, dtype)
        a = a.detach().transpose(-2, -1).contiguous().transpose(-2, -1)
        b = b.detach().transpose(-2, -1).contiguous().transpose(-2, -1)
        a.requires_grad_(needs in ("self", "both"))
        b.requires_grad_(needs in ("mat2", "both"))
        bias = None
        if needs == "bias":
            if layout == "3d_2d":
                self.skipTest("3d x 2d takes no bias")
            bias = _randn(_LEAF_GROUPS, b.shape[-1], device=device,
                          dtype=dtype).requires_grad_()
        saved = []

        def pack(t):
            saved.append((t.data_ptr(), t.shape))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = self._mm(a, b, offs, bias)
        self.assertEqual((a.data_ptr(), a.shape) in saved, b.requires_grad)
        self.assertEqual((b.data_ptr(), b.shape) in saved, a.requires_grad)
        # Nothing else but the offsets.
        self.assertEqual(len(saved), int(a.requires_grad)
                         + int(b.requires_grad) + (offs is not None))

        strides = {}
        for name, leaf in (("self", a), ("mat2", b)):
            if leaf.requires_grad:
                leaf.register_hook(
                    lambda g, name=name: strides.__setitem__(name, g.stride()))
        grad_out = _randn(*out.shape, device=device, dtype=out.dtype)
        out.backward(grad_out)
        self.assertEqual(
            strides, {name: leaf.stride() for name, leaf in
                      (("self", a), ("mat2", b)) if leaf.requires_grad})
        self._check_rounded_grad_backward(a, b, offs, grad_out)

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
            lambda *t: self._mm(*t), tuple(args)))

    @onlyCPU
    @parametrize("layout", ["2d_3d", "2d_2d", "3d_3d"])
    def test_grad_only_where_required_and_double_backward(self, device,
                                                           layout):
        # The C++ autograd Function finds bias's edge by counting only the
        # tensor arguments given (offs is absent for 3d x 3d), so every
        # subset of {self, mat2, bias} requiring grad is checked, and the
        # backward, itself grouped_mm calls, is differentiated again.
        sizes = [2, 0, 3]
        offs = make_offsets(sizes, device)
        total = sum(sizes) + 1
        shapes = {
            "2d_3d": ((total, 4), (3, 4, 5)),
            "2d_2d": ((4, total), (total, 5)),
            "3d_3d": ((3, 4, 5), (3, 5, 2)),
        }[layout]
        if layout == "3d_3d":
            offs = None
        full = [torch.randn(*shapes[0], dtype=torch.float64),
                torch.randn(*shapes[1], dtype=torch.float64),
                torch.randn(3, shapes[1][-1], dtype=torch.float64)]
        grad_out = None
        want = None
        for mask in range(1, 8):
            leaves = [t.clone().requires_grad_(bool(mask >> i & 1))
                      for i, t in enumerate(full)]
            out = self._mm(leaves[0], leaves[1], offs, leaves[2])
            if grad_out is None:
                grad_out = torch.randn_like(out)
                all_leaves = [t.clone().requires_grad_() for t in full]
                want = torch.autograd.grad(
                    self._mm(all_leaves[0], all_leaves[1], offs,
                                all_leaves[2]),
                    all_leaves, grad_out)
            out.backward(grad_out)
            for i, leaf in enumerate(leaves):
                if mask >> i & 1:
                    self.assertEqual(leaf.grad, want[i])
                else:
                    self.assertIsNone(leaf.grad)
        args = tuple(t.clone().requires_grad_() for t in full)
        self.assertTrue(torch.autograd.gradgradcheck(
            lambda a, b, bias: self._mm(a, b, offs, bias), args))

    @dtypes(torch.bfloat16)
    @parametrize("layout", ["2d_3d", "2d_2d", "3d_3d"])
    def test_float32_bias_grad_with_float32_out_dtype(self, device, dtype,
                                                      layout):
        # bf16 inputs, out_dtype=float32 and a float32 bias: the bias
        # gradient is a float32 reduction of the float32 output gradient,
        # not of that gradient rounded to bf16 (rel. error ~1e-3).
        sizes = [40, 0, 24]
        offs = make_offsets(sizes, device)
        total = sum(sizes)
        shapes = {
            "2d_3d": ((total, 8), (3, 8, 16)),
            "2d_2d": ((32, total), (total, 16)),
            "3d_3d": ((3, 32, 8), (3, 8, 16)),
        }[layout]
        if layout == "3d_3d":
            offs = None
        a = _randn(*shapes[0], device=device, dtype=dtype)
        b = _randn(*shapes[1], device=device, dtype=dtype)
        bias = torch.randn(3, 16, device=device, requires_grad=True)
        out = self._mm(a, b, offs, bias, torch.float32)
        grad_out = torch.randn_like(out)
        out.backward(grad_out)
        g = grad_out.cpu().double()
        if layout == "2d_3d":
            want = torch.stack([rows.sum(0) for rows in g.split(sizes)])
        else:
            want = g.sum(1)
        err = ((bias.grad.cpu().double() - want).norm() / want.norm()).item()
        self.assertLessEqual(err, 1e-5)

    @dtypes(torch.bfloat16, torch.float16)
    @parametrize("layout", ["2d_3d", "3d_2d", "2d_2d", "3d_3d"])
    @parametrize("needs", ["self", "mat2", "both", "double"])
    def test_float32_out_dtype_backward(self, device, dtype, layout, needs):
        # bf16/fp16 inputs, out_dtype=float32: the self and mat2 gradients
        # are grouped GEMMs of the float32 output gradient rounded once to
        # the inputs' dtype. Upstream's formulas pass it as it is, so a
        # patched wheel's backward called _grouped_mm with a float32 and a
        # bf16 operand; the bias (float32) takes the unrounded gradient.
        # Each of self and mat2 alone (the other is then not saved in a
        # patched wheel), both, and a backward that builds a graph (grad
        # requiring grad: Tensor.to, which has a derivative).
        a, b, offs = _leaf_operands(layout, device, dtype)
        a.requires_grad_(needs != "mat2")
        b.requires_grad_(needs != "self")
        groups = _LEAF_GROUPS
        bias = (None if layout == "3d_2d" else torch.randn(
            groups, b.shape[-1], device=device, requires_grad=True))
        out = self._mm(a, b, offs, bias, torch.float32)
        self.assertEqual(out.dtype, torch.float32)
        grad_out = _randn(*out.shape, device=device, dtype=torch.float32)
        if needs == "double":
            grad_out.requires_grad_()
        out.backward(grad_out, create_graph=needs == "double")
        if needs == "double":
            self.assertIsNotNone(a.grad.grad_fn)

        self._check_rounded_grad_backward(a, b, offs, grad_out)
        if bias is not None:
            bias64 = torch.zeros(groups, b.shape[-1], dtype=torch.float64,
                                 requires_grad=True)
            reference_grouped_mm_autograd(
                a.detach().cpu().double(), b.detach().cpu().double(), offs,
                bias64).backward(grad_out.cpu().double())
            self.assertEqual(bias.grad.dtype, torch.float32)
            err = ((bias.grad.cpu().double() - bias64.grad).norm()
                   / bias64.grad.norm()).item()
            self.assertLessEqual(err, 1e-5)

    @onlyCUDA
    @parametrize("expanded", [False, True])
    def test_float32_bias_grad_exact_with_tf32(self, device, expanded):
        # With TF32 allowed, the float32 GEMMs may read TF32; the bias
        # gradient is a sum and stays float32-accurate (nn.Linear's is an
        # exact sum; a TF32 reduction was off by 2.6e-4). Also for an
        # expanded (stride 0) gradient.
        sizes = [40, 0, 24, 3]
        offs = make_offsets(sizes, device)
        a = torch.randn(sum(sizes), 16, device=device)
        b = torch.randn(4, 16, 32, device=device)
        bias = torch.randn(4, 32, device=device, requires_grad=True)
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            out = self._mm(a, b, offs, bias)
            if expanded:  # stride 0 along the rows
                grad = torch.randn(32, device=device).expand(out.shape)
            else:
                grad = torch.randn_like(out)
            out.backward(grad)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        g = grad.cpu().double()
        want = torch.stack([rows.sum(0) for rows in g.split(sizes)])
        err = ((bias.grad.cpu().double() - want).norm() / want.norm()).item()
        self.assertLessEqual(err, 2e-6)

    @onlyCPU
    @parametrize("dynamic", [False, True])
    def test_compile_fullgraph_forward_backward(self, device, dynamic):
        def step(x, w, offs):
            out = self._mm(x, w, offs)
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

    @onlyCPU
    @parametrize("needs", ["self", "mat2", "both"])
    def test_compiled_autograd_one_capture_across_token_counts(self, device,
                                                               needs):
        # An MoE's token counts change every step, so compiled autograd must
        # not capture the backward again for each: sizes kept as one list in
        # the autograd node's saved data were hashed into its cache key (one
        # capture per shape). mat2 is a column-major view, so the layout
        # kept for a gradient is exercised too.
        from torch._dynamo import compiled_autograd
        from torch._dynamo.utils import counters

        counters.clear()
        calls = []
        with compiled_autograd._enable(
                lambda gm: torch.compile(gm, backend="aot_eager")):
            for total in (9, 13, 20, 27):
                sizes = [total // 3, 0, total - total // 3 - 1]
                offs = make_offsets(sizes, device)
                a = _randn(total, 8, device=device, dtype=torch.float32)
                b = _randn(3, 6, 8, device=device,
                           dtype=torch.float32).transpose(-2, -1)
                a.requires_grad_(needs != "mat2")
                b.requires_grad_(needs != "self")
                out = self._mm(a, b, offs)
                grad_out = _randn(*out.shape, device=device,
                                  dtype=out.dtype)
                out.backward(grad_out)
                calls.append((a, b, offs, grad_out))
        self.assertEqual(counters["compiled_autograd"]["captures"], 1)
        for a, b, offs, grad_out in calls:
            self._check_rounded_grad_backward(a, b, offs, grad_out)
            if b.requires_grad:
                self.assertEqual(b.grad.stride(), b.stride())

    @onlyCUDA
    @dtypes(torch.bfloat16)
    def test_compile_float32_out_dtype_backward(self, device, dtype):
        # A compiled backward of an out_dtype=float32 call keeps the
        # carveout-bounded cast (its fake kernel traces) and computes what
        # eager does.
        from torch._dynamo.testing import AotEagerAndRecordGraphs

        def step(x, w, offs, bias):
            out = self._mm(x, w, offs, bias, torch.float32)
            return out.square().sum()

        backend = AotEagerAndRecordGraphs()
        compiled = torch.compile(step, fullgraph=True, backend=backend)
        offs = make_offsets([70, 0, 130, 56], device)
        leaves = [_randn(260, 64, device=device, dtype=dtype),
                  _randn(4, 64, 96, device=device, dtype=dtype),
                  torch.randn(4, 96, device=device)]
        eager = [t.clone().requires_grad_() for t in leaves]
        traced = [t.clone().requires_grad_() for t in leaves]
        step(eager[0], eager[1], offs, eager[2]).backward()
        compiled(traced[0], traced[1], offs, traced[2]).backward()
        self.assertEqual(len(backend.bw_graphs), 1)
        self.assertIn("_grouped_mm_grad_to", backend.bw_graphs[0].code)
        for got, want in zip(traced, eager):
            self.assertEqual(got.grad, want.grad)

    @dtypes(torch.bfloat16, torch.float32)
    def test_moe_step_matches_reference(self, device, dtype):
        # The MoE step the graph tests capture, eager, on every device.
        static = _MoEStepInputs.make(device, dtype, self._mm)
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
        static = _MoEStepInputs.make(device, dtype, self._mm)
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
        static = _MoEStepInputs.make(device, dtype, self._mm)
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
    @dtypes(torch.bfloat16, torch.float16)
    @parametrize("layout", ["2d_3d", "2d_2d"])
    def test_float32_out_dtype_backward_within_carveout(self, device, dtype,
                                                        layout):
        # bf16/fp16 inputs with out_dtype=float32: the backward casts the
        # float32 output gradient to the inputs' dtype for its GEMMs. That
        # cast, like every other kernel of the backward, stays within
        # SMs - k (torch's cast would launch ~770 blocks for this gradient),
        # and the gradients match float64 of the rounded gradient.
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        carveout = 16
        sizes = [300, 0, 411, 57]
        offs = make_offsets(sizes, device)
        total = sum(sizes)
        shapes = {
            "2d_3d": ((total, 64), (len(sizes), 64, 512)),
            "2d_2d": ((256, total), (total, 384)),
        }[layout]
        a = _randn(*shapes[0], device=device, dtype=dtype).requires_grad_()
        b = _randn(*shapes[1], device=device, dtype=dtype).requires_grad_()
        out = self._mm(a, b, offs, None, torch.float32)
        self.assertEqual(out.dtype, torch.float32)
        grad_out = _randn(*out.shape, device=device, dtype=torch.float32)

        def backward():
            a.grad = None
            b.grad = None
            torch.autograd.backward(out, grad_out, retain_graph=True)

        kernels = launched_kernels_under_carveout(backward, carveout)
        names = [name for name, _ in kernels]
        self.assertTrue(any("flat_copy_kernel" in n for n in names), names)
        for name, blocks in kernels:
            self.assertLessEqual(blocks, sms - carveout, name)
            self.assertNotIn("elementwise_kernel", name)
        self._check_rounded_grad_backward(a, b, offs, grad_out)

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float16)
    def test_grad_to_matches_torch_cast(self, device, dtype):
        # The backward's cast: bit-equal to .to() (round to nearest even)
        # with and without a carveout, values past the dtype's range
        # included. Contiguous gradients take the flat copy (16-byte
        # vectors; single elements when misaligned; a tail past the last
        # vector), the others the tile kernel (strided, transposed,
        # expanded).
        op = _grad_to
        base = _randn(70, 130, device=device, dtype=torch.float32) * 3e4
        odd = _randn(37, 59, device=device, dtype=torch.float32)
        misaligned = base.flatten()[1:1 + 69 * 131].view(69, 131)
        grads = (base, odd, misaligned, base[:, 1:129:2], base.t(),
                 torch.full((1, 1), 1.5, device=device).expand(40, 96),
                 base[:60, :120].reshape(3, 20, 120))
        for carveout in (None, 16):
            with carveout_set(carveout):
                for grad in grads:
                    got = op(grad, dtype)
                    self.assertTrue(got.is_contiguous())
                    self.assertEqual(got.dtype, dtype)
                    self.assertEqual(got, grad.to(dtype), atol=0, rtol=0,
                                     exact_dtype=True)
        same = op(base, torch.float32)
        self.assertNotEqual(same.data_ptr(), base.data_ptr())
        self.assertEqual(same, base, atol=0, rtol=0)
        torch.library.opcheck(torch.ops.aten._grouped_mm_grad_to.default,
                              (base[:, :64], dtype))
        with self.assertRaisesRegex(RuntimeError, "casts float32 to"):
            op(base.to(dtype), torch.float32)


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
    def make(cls, device, dtype, grouped_mm=_grouped_mm):
        self = cls()
        self.dtype = dtype
        self.grouped_mm = grouped_mm
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
                          self.grouped_mm)
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


def _column_sums_reference(grad, offs):
    """float64 per-group column sums: grad (sum M, N) split by offs,
    clamped as every grouped-mm kernel does (GroupedMMArguments.cuh):
    start = clamp(offs[g-1], 0, rows), end = clamp(offs[g], start, rows), so
    after a decreasing offset groups may overlap; or grad (G, M, N) without
    offs."""
    g64 = grad.double().cpu()
    if offs is None:
        return g64.sum(1)
    rows = g64.shape[0]
    ends = offs.tolist()
    out = torch.zeros(len(ends), g64.shape[1], dtype=torch.float64)
    for g, end in enumerate(ends):
        start = min(max(ends[g - 1], 0), rows) if g > 0 else 0
        end = min(max(end, start), rows)
        out[g] = g64[start:end].sum(0)
    return out


def _unaligned_copy(grad):
    """grad's values in a view whose data starts one element past a
    16-byte boundary, with an odd row stride: the kernel reads it with
    single-element loads."""
    base = torch.empty(grad.shape[0], grad.shape[1] + 1,
                       device=grad.device, dtype=grad.dtype)
    view = base[:, 1:]
    view.copy_(grad)
    return view


class TestGroupColumnSums(GroupedMMTestCase):
    """The bias gradient's CUDA kernel (GroupColumnSums.cu) through
    _grouped_mm_bias_column_sums, and the backward that uses it."""

    def _sums(self, grad, offs, dtype):
        groups = offs.numel() if offs is not None else grad.shape[0]
        _poison_allocator((groups, grad.shape[-1]), grad.device, dtype)
        return _column_sums(grad, offs, dtype)

    def _check(self, grad, offs, dtype=None):
        dtype = dtype or (torch.float64 if grad.dtype == torch.float64
                          else torch.float32)
        got = self._sums(grad, offs, dtype)
        self.assertEqual(got.dtype, dtype)
        want = _column_sums_reference(grad, offs)
        self.assertEqual(got.shape, want.shape)
        # Sums of up to ~1e5 rows of N(0, 1): float32 accumulation, plus the
        # result's own rounding when it is bf16/fp16.
        rtol = {torch.bfloat16: 1e-2, torch.float16: 2e-3}.get(dtype, 2e-5)
        scale = max(grad.shape[-2] if offs is None else grad.shape[0], 1)
        for g in range(want.shape[0]):
            self.assertFalse(got[g].isnan().any().item(), f"group {g}")
            err = (got[g].double().cpu() - want[g]).abs().max().item()
            self.assertLessEqual(
                err, rtol * (want[g].abs().max().item() + scale ** 0.5),
                f"group {g}")
        return got

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float16, torch.float32, torch.float64)
    @parametrize("offs_dtype", [torch.int32, torch.int64])
    def test_matches_reference(self, device, dtype, offs_dtype):
        # Empty groups, skewed sizes, a tail past offs[-1] poisoned with a
        # huge value (it must not count), N not a multiple of the 128-column
        # slab.
        sizes = [0, 700, 3, 0, 1, 129, 2500, 0]
        total = sum(sizes)
        grad = _randn(total + 5, 300, device=device, dtype=dtype)
        grad[total:] = 1e4
        offs = make_offsets(sizes, device).to(offs_dtype)
        self._check(grad, offs)
        self._check(grad, offs, dtype)  # the result in grad's dtype

    def _loads_of_call(self, fn):
        """The ColumnLoads template argument (0 scalar, 1 vector) of the
        column-sums kernel fn launches, from the profiler's kernel name."""
        import re
        names = [n for n, _ in launched_kernels(fn)
                 if "group_column_sums_kernel" in n]
        self.assertEqual(len(names), 1, names)
        found = re.search(r"ColumnLoads\)\s*(\d)", names[0])
        self.assertIsNotNone(found, names[0])
        return int(found.group(1))

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float16, torch.float32, torch.float64)
    def test_vector_loads_match_scalar_loads(self, device, dtype):
        # Aligned rows take 16-byte loads; the same values in an unaligned
        # view, summed with single-element loads, are added in the same
        # order: bit-identical. N = 264 leaves a partly filled last slab; a
        # view with padded rows (row stride 272) keeps the vector path, one
        # starting 1 element in does not.
        sizes = [0, 700, 3, 0, 1, 129, 2500, 0]
        total = sum(sizes)
        offs = make_offsets(sizes, device)
        padded = _randn(total + 5, 272, device=device, dtype=dtype)
        padded[total:] = 1e4  # past offs[-1]: must not count
        cases = ((padded[:, :264], 1), (padded[:, 8:], 1),
                 (padded[:, 1:265], 0))
        for grad, want_loads in cases:
            got = self._check(grad, offs)
            self.assertEqual(self._loads_of_call(
                lambda: _column_sums(grad, offs, got.dtype)), want_loads)
            unaligned = _unaligned_copy(grad)
            scalar = self._sums(unaligned, offs, got.dtype)
            self.assertEqual(self._loads_of_call(
                lambda: _column_sums(unaligned, offs, got.dtype)), 0)
            self.assertEqual(got, scalar, atol=0, rtol=0)
        # Batched (G, M, N) with aligned group and row strides.
        batched = _randn(3, 50, 264, device=device, dtype=dtype)
        self._check(batched, None)
        self.assertEqual(self._loads_of_call(
            lambda: _column_sums(batched, None, got.dtype)), 1)

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float32)
    def test_one_group_many_rows_splits_parts(self, device, dtype):
        # One group of 70000 rows by 96 columns: one slab, so the rows are
        # split into parts added by the second kernel, in order.
        grad = _randn(70000, 96, device=device, dtype=dtype)
        offs = make_offsets([70000], device)
        got = self._check(grad, offs)
        self.assertEqual(got, self._sums(grad, offs, got.dtype), atol=0,
                         rtol=0)  # deterministic
        self._check(grad, offs, dtype)

    @onlyCUDA
    @dtypes(torch.float32)
    def test_strided_and_expanded_grad(self, device, dtype):
        sizes = [5, 0, 17, 40]
        offs = make_offsets(sizes, device)
        base = _randn(70, sum(sizes), device=device, dtype=dtype)
        self._check(base.t(), offs)  # column-major
        self._check(base[::2, ::3].t(), make_offsets([5, 0, 9, 6], device))
        # out.sum().backward()'s gradient: every stride 0.
        expanded = torch.tensor(0.75, device=device).expand(sum(sizes), 33)
        got = self._check(expanded, offs)
        self.assertEqual(got[:, 0].cpu(),
                         torch.tensor(sizes, dtype=torch.float32) * 0.75)

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float32)
    def test_batched(self, device, dtype):
        self._check(_randn(3, 50, 130, device=device, dtype=dtype), None)
        self._check(_randn(4, 9, 20, device=device, dtype=dtype)
                    .transpose(1, 2), None)
        self._check(_randn(2, 0, 20, device=device, dtype=dtype), None)
        self._check(_randn(1, 3000, 64, device=device, dtype=dtype), None)

    @onlyCUDA
    @dtypes(torch.bfloat16)
    def test_many_groups(self, device, dtype):
        sizes = [(g * 7) % 5 for g in range(1500)]
        grad = _randn(sum(sizes), 40, device=device, dtype=dtype)
        self._check(grad, make_offsets(sizes, device))

    @onlyCUDA
    @dtypes(torch.float32)
    def test_bad_offsets_are_clamped(self, device, dtype):
        # Decreasing and past-the-end offsets: empty or cut groups, no
        # out-of-bounds read (memcheck runs this file's CUDA tests too).
        grad = _randn(50, 24, device=device, dtype=dtype)
        offs = torch.tensor([10, 4, 30, 90, 20], device=device,
                            dtype=torch.int32)
        self._check(grad, offs)

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float32)
    def test_opcheck(self, device, dtype):
        # The meta kernel against the CUDA one: shapes, dtypes, strides, and
        # the schema (no aliasing, no mutation).
        offs = make_offsets([5, 0, 11], device)
        grad = _randn(20, 24, device=device, dtype=dtype)
        batched = _randn(3, 7, 24, device=device, dtype=dtype)
        for args in ((grad, offs, torch.float32), (grad, offs, dtype),
                     (batched, None, torch.float32)):
            torch.library.opcheck(
                torch.ops.aten._grouped_mm_bias_column_sums.default, args)

    @onlyCUDA
    @dtypes(torch.bfloat16)
    def test_no_host_sync(self, device, dtype):
        grad = _randn(300, 64, device=device, dtype=dtype)
        offs = make_offsets([100, 0, 200], device)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            _column_sums(grad, offs, torch.float32)
        finally:
            torch.cuda.set_sync_debug_mode(0)

    @onlyCUDA
    def test_rejects_bad_input(self, device):
        grad = _randn(8, 4, device=device, dtype=torch.float32)
        offs = make_offsets([8], device)
        op = _column_sums
        with self.assertRaisesRegex(RuntimeError, "dtype must be"):
            op(grad, offs, torch.float16)
        with self.assertRaisesRegex(RuntimeError, "grad must be 3-D"):
            op(grad, None, torch.float32)
        with self.assertRaisesRegex(RuntimeError, "offs must be a 1-D int32"):
            op(grad, offs.float(), torch.float32)

    @onlyCUDA
    @dtypes(torch.bfloat16, torch.float32)
    @parametrize("layout", ["2d_3d", "3d_3d"])
    def test_bias_backward_within_carveout(self, device, dtype, layout):
        # The whole bias gradient is one kernel within SMs - k: no torch
        # elementwise or reduction kernel (the ones row, the TF32 split, the
        # cast to bias's dtype) runs, and it matches float64.
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        carveout = 16
        sizes = [40, 0, 300, 7]
        offs = make_offsets(sizes, device)
        if layout == "2d_3d":
            a = _randn(sum(sizes) + 3, 32, device=device, dtype=dtype)
            b = _randn(len(sizes), 32, 48, device=device, dtype=dtype)
        else:
            a = _randn(4, 20, 32, device=device, dtype=dtype)
            b = _randn(4, 32, 48, device=device, dtype=dtype)
            offs = None
        bias = _randn(4, 48, device=device, dtype=dtype).requires_grad_()
        out = _grouped_mm(a, b, offs, bias)
        grad_out = _randn(*out.shape, device=device, dtype=dtype)
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True

        def backward():
            bias.grad = None
            torch.autograd.backward(out, grad_out, retain_graph=True)

        try:
            kernels = launched_kernels_under_carveout(backward, carveout)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        names = [name for name, _ in kernels]
        self.assertTrue(
            any("group_column_sums_kernel" in n for n in names), names)
        for name, blocks in kernels:
            self.assertLessEqual(blocks, sms - carveout, name)
            self.assertNotIn("elementwise_kernel", name)
            self.assertNotIn("reduce_kernel", name)
        self.assertEqual(bias.grad.dtype, dtype)
        want = _column_sums_reference(grad_out, offs)
        # Exact float32 sums even with TF32 allowed; bf16's own rounding.
        tol = 1e-5 if dtype == torch.float32 else 1e-2
        self.assertEqual(bias.grad.double().cpu(), want, rtol=tol,
                         atol=tol * want.abs().max().item())


# Tests of the op itself, not of an entry point: not repeated through
# F.grouped_mm.
_OP_ONLY = {"test_opcheck"}


def entry_copy(name: str, entry: str = "op", op=None) -> type:
    """A fresh device-generic class holding the autograd tests through an
    entry point (ENTRY) and an op of _grouped_mm's schema (op, an
    OpOverloadPacket; default aten::_grouped_mm), ready for
    instantiate_device_type_tests."""
    members = {key: value for key, value in vars(_AutogradTests).items()
               if not key.startswith("__")
               and (entry == "op" or key not in _OP_ONLY)}
    members["__doc__"] = _AutogradTests.__doc__
    members["ENTRY"] = entry
    if op is not None:
        members["grouped_mm_op"] = staticmethod(op)
    return type(name, (GroupedMMTestCase,), members)


TestGroupedMMAutograd = entry_copy("TestGroupedMMAutograd")
TestGroupedMMAutogradFunctional = entry_copy(
    "TestGroupedMMAutogradFunctional", "functional")
for _cls in (TestGroupedMMAutograd, TestGroupedMMAutogradFunctional):
    instantiate_device_type_tests(_cls, globals(), only_for=("cpu", "cuda"))
instantiate_device_type_tests(TestGroupColumnSums, globals(),
                              only_for=("cpu", "cuda"))

if __name__ == "__main__":
    run_tests()
