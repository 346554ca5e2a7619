# Owner(s): ["module: custom-operators"]
"""opcheck (schema, fake kernel, autograd registration) and
torch.compile(fullgraph=True) of grouped_mm for every layout x dtype x
bias / out_dtype, and opcheck of the auxiliary ops' fake kernels."""

from __future__ import annotations

import os
import sys
import unittest

import torch
from torch.testing._internal.common_device_type import (
    instantiate_device_type_tests,
    onlyCUDA,
)
from torch.testing._internal.common_utils import parametrize, run_tests, TestCase

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402

_SIZES = [3, 0, 5]
_SHAPES = {  # self, mat2 for groups of _SIZES (K = 8, N = 6, M = 4)
    "2d_3d": ((8, 8), (3, 8, 6)),
    "3d_2d": ((3, 4, 8), (8, 8)),
    "2d_2d": ((4, 8), (8, 6)),
    "3d_3d": ((3, 4, 8), (3, 8, 6)),
}
_VARIANTS = ["plain", "bias", "out_dtype", "bias_out_dtype"]


def _call_args(layout, variant, dtype, device):
    a_shape, b_shape = _SHAPES[layout]
    a = torch.randn(a_shape, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(b_shape, device=device, dtype=dtype, requires_grad=True)
    offs = (None if layout == "3d_3d" else
            torch.tensor([3, 3, 8], dtype=torch.int32, device=device))
    bias = None
    if "bias" in variant:
        bias = torch.randn(3, b_shape[-1], device=device, dtype=dtype,
                           requires_grad=True)
    out_dtype = torch.float32 if "out_dtype" in variant else None
    return a, b, offs, bias, out_dtype


def _skip_reason(layout, variant, dtype):
    if "bias" in variant and layout == "3d_2d":
        return "the 3d x 2d layout takes no bias"
    if "out_dtype" in variant and dtype == torch.float32:
        return "out_dtype float32 is the inputs' dtype already"
    return None


@unittest.skipIf(not HAS_EXTENSION, "opchecks the extension's op")
class TestGroupedMMOpcheck(TestCase):
    @parametrize("layout", list(_SHAPES))
    @parametrize("variant", _VARIANTS)
    @parametrize("dtype_name", ["bfloat16", "float16", "float32"])
    def test_opcheck(self, device, layout, variant, dtype_name):
        dtype = getattr(torch, dtype_name)
        reason = _skip_reason(layout, variant, dtype)
        if reason:
            self.skipTest(reason)
        args = _call_args(layout, variant, dtype, device)
        torch.library.opcheck(torch.ops.overlap_ops.grouped_mm.default, args)

    @parametrize("layout", list(_SHAPES))
    @parametrize("variant", _VARIANTS)
    @parametrize("dtype_name", ["bfloat16", "float16", "float32"])
    def test_compile_fullgraph(self, device, layout, variant, dtype_name):
        dtype = getattr(torch, dtype_name)
        reason = _skip_reason(layout, variant, dtype)
        if reason:
            self.skipTest(reason)
        a, b, offs, bias, out_dtype = _call_args(layout, variant, dtype,
                                                 device)

        def step(a, b, bias):
            return overlap_ops.grouped_mm(a, b, offs, bias, out_dtype)

        torch._dynamo.reset()
        compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
        out = compiled(a, b, bias)
        leaves = [t for t in (a, b, bias) if t is not None]
        grads = torch.autograd.grad(out.float().square().sum(), leaves)
        want = step(a, b, bias)
        want_grads = torch.autograd.grad(want.float().square().sum(), leaves)
        self.assertEqual(out, want)
        for got, expected in zip(grads, want_grads):
            self.assertEqual(got, expected)

    @onlyCUDA
    def test_auxiliary_ops(self, device):
        if not overlap_ops.has_cuda_kernels():
            self.skipTest("a CPU-only build of overlap_ops")
        grad = torch.randn(8, 6, device=device)
        offs = torch.tensor([3, 3, 8], dtype=torch.int32, device=device)
        torch.library.opcheck(
            torch.ops.overlap_ops._group_column_sums.default,
            (grad, offs, torch.float32))
        torch.library.opcheck(
            torch.ops.overlap_ops._grouped_mm_grad_to.default,
            (grad, torch.bfloat16))

    def test_auxiliary_fake_kernels(self, device):
        # The fake kernels alone (their real kernels are CUDA only).
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode():
            grad = torch.empty(8, 6, device=device)
            offs = torch.empty(3, dtype=torch.int32, device=device)
            sums = torch.ops.overlap_ops._group_column_sums(
                grad, offs, torch.bfloat16)
            cast = torch.ops.overlap_ops._grouped_mm_grad_to(
                grad, torch.float16)
        self.assertEqual((sums.shape, sums.dtype), ((3, 6), torch.bfloat16))
        self.assertEqual((cast.shape, cast.dtype), ((8, 6), torch.float16))
        # Batched (3d x 3d) column sums: one row per batch entry. The cast
        # of a transposed gradient is contiguous, as the real kernel's.
        with FakeTensorMode():
            batched = torch.ops.overlap_ops._group_column_sums(
                torch.empty(3, 4, 6, device=device), None, torch.float32)
            cast_t = torch.ops.overlap_ops._grouped_mm_grad_to(
                torch.empty(6, 8, device=device).t(), torch.bfloat16)
        self.assertEqual(batched.shape, (3, 6))
        self.assertEqual(cast_t.shape, (8, 6))
        self.assertTrue(cast_t.is_contiguous())


instantiate_device_type_tests(TestGroupedMMOpcheck, globals(),
                              only_for=("cpu", "cuda"))

if __name__ == "__main__":
    run_tests()
