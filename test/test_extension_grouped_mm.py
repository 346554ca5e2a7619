# Owner(s): ["module: linear algebra"]
"""The overlap_ops extension's grouped-mm API beside the series' tests.

The series' tests (test_grouped_mm.py, test_grouped_mm_autograd.py) call
torch._grouped_mm, which extension mode routes to the extension
(test/extension_mode.py). This file tests what only the extension has: its
own op torch.ops.overlap_ops.grouped_mm (the contract tests and the autograd
tests again, through it), the routing switch, the checked-offsets switch,
the routed meta kernel under torch.compile, and host rules reached through
its test-only module (overlap_ops._testing). Not part of the patch series.
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
)
from torch.testing._internal.common_utils import parametrize, run_tests, TestCase

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402
from grouped_mm_reference import (  # noqa: E402
    assert_matches_reference,
    make_offsets,
    reference_grouped_mm,
    tolerance,
)
from test_grouped_mm import _randn, make_contract_tests  # noqa: E402
from test_grouped_mm_autograd import entry_copy  # noqa: E402

if HAS_EXTENSION:  # with the extension, its test-only ops must load
    from overlap_ops import _testing
else:
    _testing = None

needs_extension = unittest.skipIf(
    not HAS_EXTENSION, "tests the overlap_ops extension's API")

# The contract tests through the extension's own op: one of each kind (the
# routed torch._grouped_mm runs them all in test_grouped_mm.py).
_CONTRACT_SUBSET = (
    "test_grouped_gemm_3d_3d",
    "test_bias_and_out_dtype",
    "test_grouped_gemm_more_than_1024_groups",
    "test_grouped_gemm_2d_2d_many_empty_groups",
    "test_grouped_gemm_odd_strides",
    "test_empty_operands",
    "test_no_groups_gives_zeros",
    "test_zero_k_gives_zeros_plus_bias",
    "test_bad_offsets_name_the_group",
    "test_validation_messages",
)


def _routed() -> bool:
    """Whether torch._grouped_mm is routed now (asked without changing it)."""
    routed = overlap_ops.route_torch_grouped_mm(True)
    overlap_ops.route_torch_grouped_mm(routed)
    return routed


def _testing_ops():
    """The extension's test-only ops (torch_ext/csrc/testing/)."""
    return torch.ops.overlap_ops_testing


@needs_extension
class TestExtensionGroupedMMSwitches(TestCase):
    """overlap_ops' switches: routing of torch._grouped_mm, checked
    offsets, and the routed meta kernel."""

    def setUp(self):
        super().setUp()
        # test/conftest.py routes torch._grouped_mm for every test; these
        # tests start without it and hand it back.
        self.addCleanup(overlap_ops.route_torch_grouped_mm,
                        overlap_ops.route_torch_grouped_mm(False))

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
    def test_checked_offsets_switch(self, device):
        with overlap_ops.checked_offsets(True):
            self.assertTrue(_testing.checked_offsets())
            with overlap_ops.checked_offsets(False):
                self.assertFalse(_testing.checked_offsets())
            self.assertTrue(_testing.checked_offsets())

    @onlyCPU
    def test_switches_inside_compiled_code(self, device):
        # The routing and checked-offsets switches are process state:
        # torch.compile must run them eagerly, never at trace time, so that
        # neither a failed fullgraph trace nor the first compiled call
        # leaves them changed (docs/DESIGN.md, torch.compile and the
        # carveout).
        x = torch.randn(4, 4)
        seen = []

        @torch.compiler.disable
        def probe():
            seen.append((_testing.checked_offsets(),
                         overlap_ops.route_torch_grouped_mm(True)))
            overlap_ops.route_torch_grouped_mm(seen[-1][1])

        def switched(t):
            with overlap_ops.routed_torch_grouped_mm(False), \
                    overlap_ops.checked_offsets(True):
                probe()
                t = t * 2
            return t + 1

        def state():
            return _testing.checked_offsets(), _routed()

        overlap_ops.set_checked_offsets(False)
        overlap_ops.route_torch_grouped_mm(True)
        before = state()
        torch._dynamo.reset()
        try:
            with self.assertRaises(Exception):
                torch.compile(switched, fullgraph=True)(x)
            self.assertEqual(state(), before)
            torch._dynamo.reset()
            compiled = torch.compile(switched)
            for _ in range(2):
                self.assertEqual(compiled(x), x * 2 + 1)
                self.assertEqual(state(), before)
            self.assertEqual(seen, [(True, False), (True, False)])
        finally:
            torch._dynamo.reset()
            overlap_ops.set_checked_offsets(None)

    @onlyCPU
    def test_set_checked_offsets_inside_compiled_code(self, device):
        # The setter itself, not only the block, runs eagerly: a fullgraph
        # trace refuses it and leaves the switch as it was.
        def f(t):
            overlap_ops.set_checked_offsets(True)
            return t + 1

        overlap_ops.set_checked_offsets(False)
        torch._dynamo.reset()
        try:
            with self.assertRaises(Exception):
                torch.compile(f, fullgraph=True)(torch.randn(2))
            self.assertFalse(_testing.checked_offsets())
        finally:
            torch._dynamo.reset()
            overlap_ops.set_checked_offsets(None)

    @onlyCPU
    def test_checked_offsets_block_defaults_to_on(self, device):
        overlap_ops.set_checked_offsets(False)
        try:
            with overlap_ops.checked_offsets():
                self.assertTrue(_testing.checked_offsets())
            self.assertFalse(_testing.checked_offsets())
        finally:
            overlap_ops.set_checked_offsets(None)

    @onlyCPU
    def test_blocks_restore_and_reraise(self, device):
        # Each block hands its switch back when its body raises, and lets
        # the exception through.
        overlap_ops.set_checked_offsets(False)
        try:
            for block, state, inside in (
                    (overlap_ops.checked_offsets(True),
                     _testing.checked_offsets, True),
                    (overlap_ops.routed_torch_grouped_mm(True),
                     _routed, True),
                    (overlap_ops.sm_carveout(0),
                     torch._C._get_sm_carveout_experimental, None)):
                before = state()
                with self.assertRaisesRegex(ValueError, "boom"):
                    with block:
                        self.assertEqual(state(), inside)
                        raise ValueError("boom")
                self.assertEqual(state(), before)
        finally:
            overlap_ops.set_checked_offsets(None)

    @onlyCPU
    def test_reused_routing_block_nests(self, device):
        # One block object entered twice restores in last-in, first-out
        # order.
        off = overlap_ops.routed_torch_grouped_mm(False)
        with off:
            overlap_ops.route_torch_grouped_mm(True)
            with off:
                self.assertFalse(_routed())
            self.assertTrue(_routed())
        self.assertFalse(_routed())

    @onlyCPU
    def test_routing_swaps_the_meta_kernel_and_restores_stock(self, device):
        op = torch.ops.aten._grouped_mm.default
        # Stock's own Python meta kernel, where this torch has one.
        stock = getattr(torch._meta_registrations, "meta_grouped_mm", None)
        if stock is None:
            stock = op.py_kernels.get(torch._C.DispatchKey.Meta)
        self.assertIs(op.py_kernels.get(torch._C.DispatchKey.Meta), stock)
        with overlap_ops.routed_torch_grouped_mm():
            self.assertIs(op.py_kernels.get(torch._C.DispatchKey.Meta),
                          overlap_ops._fake._grouped_mm_fake)
        self.assertIs(op.py_kernels.get(torch._C.DispatchKey.Meta), stock)

    @onlyCPU
    def test_routed_fake_call_after_a_stock_one(self, device):
        # A fake call made before routing (stock's meta kernel, which
        # rejects float32) does not keep stock's kernel for later calls.
        from torch._dispatch.python import enable_python_dispatcher
        from torch._subclasses.fake_tensor import FakeTensorMode
        op = torch.ops.aten._grouped_mm.default
        with enable_python_dispatcher():
            with FakeTensorMode():
                op(torch.empty(8, 8, dtype=torch.bfloat16),
                   torch.empty(3, 8, 16, dtype=torch.bfloat16),
                   torch.empty(3, dtype=torch.int32))
            with overlap_ops.routed_torch_grouped_mm(), FakeTensorMode():
                out = op(torch.empty(8, 8), torch.empty(3, 8, 6),
                         torch.empty(3, dtype=torch.int32))
            self.assertEqual((out.shape, out.dtype),
                             ((8, 6), torch.float32))

    @dtypes(torch.bfloat16)
    def test_python_entry_passes_bias_and_out_dtype(self, device, dtype):
        if device.startswith("cuda") and not overlap_ops.has_cuda_kernels():
            self.skipTest("a CPU-only build of overlap_ops")
        a = _randn(9, 8, device=device, dtype=dtype)
        b = _randn(3, 8, 6, device=device, dtype=dtype)
        bias = _randn(3, 6, device=device, dtype=dtype)
        offs = make_offsets([3, 0, 6], device)
        out = overlap_ops.grouped_mm(a, b, offs=offs, bias=bias,
                                     out_dtype=torch.float32)
        self.assertEqual(out.dtype, torch.float32)
        ref = reference_grouped_mm(a, b, offs, bias)
        assert_matches_reference(
            self, out, ref, 2, 3, offs,
            tolerance(dtype, self.device_type, torch.float32))

    @onlyCPU
    def test_checked_offsets_environment(self, device):
        # The switch falls back to TORCH_GROUPED_MM_CHECK_OFFSETS, read at every
        # call, and the context manager hands it back on exit (it used to
        # leave the value it found pinned, so the variable was never read
        # again). A value it does not know raises instead of turning on.
        read = _testing.checked_offsets
        saved = os.environ.get("TORCH_GROUPED_MM_CHECK_OFFSETS")
        try:
            with overlap_ops.checked_offsets(True):
                self.assertTrue(read())
            for value, want in (("1", True), ("on", True), ("yes", True),
                                ("0", False), ("off", False), ("", False)):
                os.environ["TORCH_GROUPED_MM_CHECK_OFFSETS"] = value
                self.assertEqual(read(), want, value)
                with overlap_ops.checked_offsets(not want):
                    self.assertEqual(read(), not want, value)
                self.assertEqual(read(), want, value)
            os.environ["TORCH_GROUPED_MM_CHECK_OFFSETS"] = "auto"
            with self.assertRaisesRegex(
                    RuntimeError, "TORCH_GROUPED_MM_CHECK_OFFSETS must be 1, on"):
                read()
            overlap_ops.set_checked_offsets(False)  # overrides the variable
            self.assertFalse(read())
        finally:
            overlap_ops.set_checked_offsets(None)
            if saved is None:
                os.environ.pop("TORCH_GROUPED_MM_CHECK_OFFSETS", None)
            else:
                os.environ["TORCH_GROUPED_MM_CHECK_OFFSETS"] = saved

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

    @onlyCPU
    def test_vector_loads_rule(self, device):
        # GroupColumnSumsLoads.h: 16-byte loads per lane only where every
        # vector is aligned and inside a row; the kernel falls back to
        # single-element loads otherwise.
        rule = _testing_ops().column_sums_vector_loads

        def vector(element_size=2, address=4096, n=14336, row_stride=14336,
                   col_stride=1, group_stride=0):
            return rule(element_size, address, n, row_stride, col_stride,
                        group_stride)
        self.assertTrue(vector())  # contiguous bf16 (sum M, N)
        self.assertTrue(vector(element_size=4, n=300, row_stride=300))
        self.assertTrue(vector(element_size=8, n=2, row_stride=2))
        self.assertTrue(vector(row_stride=0))  # expanded rows
        self.assertTrue(vector(n=8, row_stride=24, group_stride=240))
        self.assertFalse(vector(n=300, row_stride=300))  # 300 % 8 bf16
        self.assertFalse(vector(row_stride=14337))
        self.assertFalse(vector(group_stride=20))
        self.assertFalse(vector(address=4096 + 8))
        self.assertFalse(vector(col_stride=2))
        self.assertFalse(vector(n=0, row_stride=0))
        self.assertFalse(vector(element_size=3))
        with self.assertRaisesRegex(RuntimeError, "must be >= 0"):
            vector(row_stride=-8)


if HAS_EXTENSION:
    TestExtensionGroupedMM = make_contract_tests(
        "TestExtensionGroupedMM", op=torch.ops.overlap_ops.grouped_mm,
        only=_CONTRACT_SUBSET)
    instantiate_device_type_tests(TestExtensionGroupedMM, globals(),
                                  only_for=("cpu",))
    TestExtensionGroupedMMAutograd = entry_copy(
        "TestExtensionGroupedMMAutograd",
        op=torch.ops.overlap_ops.grouped_mm)
    instantiate_device_type_tests(TestExtensionGroupedMMAutograd, globals(),
                                  only_for=("cpu", "cuda"))
instantiate_device_type_tests(TestExtensionGroupedMMSwitches, globals(),
                              only_for=("cpu", "cuda"))

if __name__ == "__main__":
    run_tests()
