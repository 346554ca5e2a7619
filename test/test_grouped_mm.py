# Owner(s): ["module: linear algebra"]
"""Tests for the _grouped_mm contract: layouts, dtypes, bias, out_dtype,
zeroed tail past offs[-1], host-side validation messages (CPU kernel).

One file per patch of the series: this one goes with the validation and
CPU kernel patch and runs on the CPU; test_grouped_mm_cuda.py (device-offset
CUDA kernels) runs the same contract tests on CUDA plus the CUDA-only ones;
test_grouped_mm_autograd.py covers autograd, fake/meta kernels and
torch.compile.

On CUDA the kernel family is chosen per call, and
TORCH_GROUPED_MM_BACKEND (auto | sm90 | sm80 | generic) is read at
every call, so the CUDA files run on another path by setting it for the
process (test_grouped_mm_cuda.py says more). GROUPED_MM_TEST_TF32=1 allows
TF32 for a whole run, so that float32 takes the tensor-core kernels too.
"""

from __future__ import annotations

import contextlib
import os
import sys

import torch
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    onlyCPU,
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

_OP = torch.ops.aten._grouped_mm
DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _grouped_mm(a, b, offs=None, bias=None, out_dtype=None):
    return _OP(a, b, offs, bias, out_dtype)


def _randn(*shape, device, dtype, transposed=False):
    """Random data (never zeros); optionally a transposed (column-major) view."""
    if transposed:
        return torch.randn(*shape[:-2], shape[-1], shape[-2], device=device,
                           dtype=dtype).transpose(-2, -1)
    return torch.randn(*shape, device=device, dtype=dtype)


_BACKEND_ENV = "TORCH_GROUPED_MM_BACKEND"

if os.environ.get("GROUPED_MM_TEST_TF32") == "1":
    # For a whole run (the forced SM80 run): float32 then takes the TF32
    # tensor-core kernels. Tests that need it off still say so.
    torch.backends.cuda.matmul.allow_tf32 = True


@contextlib.contextmanager
def _env(name, value):
    """Sets environment variable `name` for the block (the C++ reads the
    grouped-mm switches at every call), then restores it."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous


def _backend(value):
    """Sets TORCH_GROUPED_MM_BACKEND for the block."""
    return _env(_BACKEND_ENV, value)


def _poison_allocator(shape, device, dtype):
    """Leaves a NaN-filled block in the caching allocator, so an output that
    reuses it shows every element the kernel forgot to write."""
    if torch.device(device).type == "cuda":
        torch.full(shape, POISON, device=device, dtype=dtype)


class GroupedMMTestCase(TestCase):
    """The check every grouped-mm test file uses: output (allocated over a
    NaN-poisoned block on CUDA) against a float64 reference per group. No
    tests of its own."""

    # The op (a, b, offs, bias, out_dtype) -> out that the contract tests
    # call: aten::_grouped_mm; make_contract_tests() can give another op of
    # the same schema.
    grouped_mm_op = staticmethod(_OP)

    def _run_and_check(self, a, b, offs=None, bias=None, out_dtype=None,
                       op=None):
        """op: the grouped mm to check (a, b, offs, bias, out_dtype) ->
        out; grouped_mm_op unless given."""
        out_shape = reference_grouped_mm(a, b, offs, bias).shape
        _poison_allocator(out_shape, a.device, out_dtype or a.dtype)
        out = (op or self.grouped_mm_op)(a, b, offs, bias, out_dtype)
        self.assertEqual(out.dtype, out_dtype or a.dtype)
        self.assertEqual(out.device, a.device)
        ref = reference_grouped_mm(a, b, offs, bias)
        assert_matches_reference(self, out, ref, a.dim(), b.dim(), offs,
                                 tolerance(a.dtype, self.device_type,
                                           out_dtype))
        return out


class _ContractTests:
    """The _grouped_mm contract tests, device-generic. A plain class:
    make_contract_tests() turns a copy into a TestCase for
    instantiate_device_type_tests, which consumes the test methods of the
    class it instantiates. This file instantiates it for the CPU,
    test_grouped_mm_cuda.py (the CUDA kernels' patch) for CUDA."""

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

    @dtypes(torch.bfloat16, torch.float32)
    @parametrize("with_bias", [False, True])
    def test_grouped_gemm_2d_2d_many_empty_groups(self, device, dtype,
                                                  with_bias):
        # More groups than one block lists at a time (256 in the filling
        # kernel, 1024 in the finishing kernel), a third of them k = 0.
        groups, m, n = 1100, 8, 16
        sizes = [0 if g % 3 == 1 else 1 + g % 4 for g in range(groups)]
        a = _randn(m, sum(sizes), device=device, dtype=dtype)
        b = _randn(sum(sizes), n, device=device, dtype=dtype)
        bias = (torch.randn(groups, n, device=device, dtype=dtype)
                if with_bias else None)
        out = self._run_and_check(a, b, make_offsets(sizes, device), bias)
        if bias is None:
            empty = [g for g, size in enumerate(sizes) if size == 0]
            self.assertTrue(bool((out[empty] == 0).all()))

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
        out = self.grouped_mm_op(a, b, make_offsets([0, 0, 0], device))
        self.assertEqual(out.shape, (0, 4))
        a = _randn(6, 8, device=device, dtype=dtype)
        self._run_and_check(a, b, make_offsets([0, 0, 0], device))

    @dtypes(torch.bfloat16, torch.float32)
    def test_no_groups_gives_zeros(self, device, dtype):
        # G = 0 with rows (or columns) to fill: every one is past offs[-1].
        # (CUDA: CUTLASS's grouped scheduler must not launch on 0 problems.)
        offs = make_offsets([], device)
        self._run_and_check(_randn(6, 8, device=device, dtype=dtype),
                            _randn(0, 8, 4, device=device, dtype=dtype), offs)
        self._run_and_check(_randn(0, 5, 8, device=device, dtype=dtype),
                            _randn(8, 7, device=device, dtype=dtype), offs)

    @dtypes(torch.bfloat16, torch.float32)
    @parametrize("with_bias", [False, True])
    def test_zero_k_gives_zeros_plus_bias(self, device, dtype, with_bias):
        # K = 0 in every layout: the product is empty, the output is the bias
        # (zeros without one: on the tensor-core paths the filling kernel
        # writes them, and on Hopper the bias rows too; on SM80 the
        # finishing kernel writes those).
        offs = make_offsets([2, 0, 3], device)
        bias = (torch.randn(3, 4, device=device, dtype=dtype)
                if with_bias else None)
        self._run_and_check(_randn(6, 0, device=device, dtype=dtype),
                            _randn(3, 0, 4, device=device, dtype=dtype),
                            offs, bias)
        self._run_and_check(_randn(3, 5, 0, device=device, dtype=dtype),
                            _randn(3, 0, 4, device=device, dtype=dtype),
                            None, bias)

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
                self.grouped_mm_op(a, b, offs)
            self.assertIn(message, str(ctx.exception))

    @onlyCPU
    def test_validation_messages(self, device):
        a = torch.randn(10, 8)
        b = torch.randn(3, 8, 4)
        offs = torch.tensor([2, 5, 10], dtype=torch.int32)

        def message(*args):
            with self.assertRaises(RuntimeError) as ctx:
                self.grouped_mm_op(*args)
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
            """grouped_mm: out_dtype must be None or Float (the inputs' dtype), got Half""")
        self.assertExpectedInline(
            message(a.bfloat16(), b.bfloat16(), offs, None, torch.float16),
            """grouped_mm: out_dtype must be None, BFloat16 (the inputs' dtype) or Float, got Half""")
        self.assertExpectedInline(
            message(a, b, offs, torch.randn(3, 4).half()),
            """grouped_mm: bias must have dtype Float (the inputs' dtype), got Half""")
        self.assertExpectedInline(
            message(a.half(), b.half(), offs, torch.randn(3, 4).bfloat16(),
                    torch.float32),
            """grouped_mm: bias must have dtype Half (the inputs' dtype) or Float (out_dtype), got BFloat16""")
        self.assertExpectedInline(
            message(a, b, offs, torch.randn(3, 5)),
            """grouped_mm: bias must have shape (G, N) = (3, 4), got [3, 5]""")
        self.assertExpectedInline(
            message(torch.randn(3, 4, 8), torch.randn(8, 10), offs,
                    torch.randn(3, 4)),
            """grouped_mm: bias is not supported for the 3d x 2d layout, where each group owns different output columns; add it to the output instead""")

    @onlyCPU
    def test_backend_override_ignored_on_cpu(self, device):
        # The override picks among CUDA kernels; CPU calls never read it.
        a = _randn(12, 8, device=device, dtype=torch.float32)
        b = _randn(2, 8, 4, device=device, dtype=torch.float32)
        with _backend("no-such-backend"):
            self._run_and_check(a, b, make_offsets([5, 7], device))


def make_contract_tests(name: str = "TestGroupedMM", op=None,
                        only: tuple[str, ...] = ()) -> type:
    """A fresh device-generic class holding the contract tests, ready for
    instantiate_device_type_tests. op: the op they call, of _grouped_mm's
    schema (an OpOverloadPacket; default aten::_grouped_mm); only: the test
    names to keep (default: all)."""
    members = {key: value for key, value in vars(_ContractTests).items()
               if not key.startswith("__")
               and (not only or not key.startswith("test_") or key in only)}
    members["__doc__"] = _ContractTests.__doc__
    if op is not None:
        members["grouped_mm_op"] = staticmethod(op)
    return type(name, (GroupedMMTestCase,), members)


TestGroupedMM = make_contract_tests()
# CPU here; the CUDA instances come with the CUDA kernels
# (test_grouped_mm_cuda.py), so this file passes with this patch alone.
instantiate_device_type_tests(TestGroupedMM, globals(), only_for=("cpu",))

if __name__ == "__main__":
    run_tests()
