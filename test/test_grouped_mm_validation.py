# Owner(s): ["module: linear algebra"]
"""Every host-side check of _grouped_mm's shared validation, triggered in
every layout where it applies, with its whole message. On CUDA these checks
are what keeps the kernels in bounds, so a check that no test triggers can
be lost without a test failing. tools/checks/validation_coverage.py fails
when a check in GroupedMMValidation.cpp has no test here."""

from __future__ import annotations

import contextlib
import os
import sys
import unittest.mock

import torch
from torch.testing._internal.common_device_type import (
    instantiate_device_type_tests,
    onlyCUDA,
)
from torch.testing._internal.common_utils import parametrize, run_tests, TestCase

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402
if HAS_EXTENSION:
    from overlap_ops import _testing
    _OP = torch.ops.overlap_ops.grouped_mm
else:
    _OP = torch.ops.aten._grouped_mm

_GROUPS = 3
# Per layout: (self shape, mat2 shape, whether offs is taken, the grouped
# extent, mat2 with a different K, the name in messages).
_LAYOUTS = {
    "2d_3d": ((10, 8), (3, 8, 4), True, 10, (3, 9, 4), "2d x 3d"),
    "3d_2d": ((3, 4, 8), (8, 10), True, 10, (9, 10), "3d x 2d"),
    "2d_2d": ((4, 10), (10, 6), True, 10, (11, 6), "2d x 2d"),
    "3d_3d": ((3, 4, 8), (3, 8, 5), False, 0, (3, 9, 5), "3d x 3d"),
}
_OFFS_LAYOUTS = [name for name, spec in _LAYOUTS.items() if spec[2]]


def _shape(sizes) -> str:
    return "[" + ", ".join(str(s) for s in sizes) + "]"


class TestGroupedMMValidation(TestCase):
    def _operands(self, layout, device, dtype=torch.float32):
        a_shape, b_shape, takes_offs = _LAYOUTS[layout][:3]
        a = torch.randn(a_shape, device=device, dtype=dtype)
        b = torch.randn(b_shape, device=device, dtype=dtype)
        offs = (torch.tensor([2, 5, 10], dtype=torch.int32, device=device)
                if takes_offs else None)
        return a, b, offs

    def _message(self, *args, error=RuntimeError) -> str:
        with self.assertRaises(error) as ctx:
            _OP(*args)
        return str(ctx.exception).split("\n")[0]

    def _checked(self, device):
        # The CPU kernel checks every call; CUDA only in checked mode.
        if device == "cpu" or not HAS_EXTENSION:
            return contextlib.nullcontext()
        return overlap_ops.checked_offsets()

    @parametrize("layout", list(_LAYOUTS))
    def test_contraction_sizes(self, device, layout):
        a, _, offs = self._operands(layout, device)
        bad = torch.randn(_LAYOUTS[layout][4], device=device)
        k_self = a.shape[-1]
        k_mat2 = bad.shape[-2] if bad.dim() == 3 else bad.shape[0]
        self.assertEqual(
            self._message(a, bad, offs),
            f"grouped_mm: contraction sizes differ for the "
            f"{_LAYOUTS[layout][5]} layout: self {_shape(a.shape)} has K = "
            f"{k_self} but mat2 {_shape(bad.shape)} has K = {k_mat2}")

    def test_batch_sizes_3d_3d(self, device):
        a = torch.randn(3, 4, 8, device=device)
        b = torch.randn(2, 8, 5, device=device)
        self.assertEqual(
            self._message(a, b),
            "grouped_mm: batch sizes differ for the 3d x 3d layout: self "
            "[3, 4, 8] vs mat2 [2, 8, 5]")

    @parametrize("layout", list(_LAYOUTS))
    def test_operand_rank_and_dtype(self, device, layout):
        a, b, offs = self._operands(layout, device)
        self.assertEqual(
            self._message(a.flatten(), b, offs),
            f"grouped_mm: self must be a 2d or 3d tensor, got a 1d tensor of "
            f"shape [{a.numel()}]")
        self.assertEqual(
            self._message(a, b.unsqueeze(0).unsqueeze(0), offs),
            f"grouped_mm: mat2 must be a 2d or 3d tensor, got a "
            f"{b.dim() + 2}d tensor of shape {_shape((1, 1) + b.shape)}")
        self.assertEqual(
            self._message(a.int(), b.int(), offs),
            f"grouped_mm: self must be bfloat16, float16 or float32 (or "
            f"float64 on the CPU), got Int on {a.device}")
        self.assertEqual(
            self._message(a, b.half(), offs),
            "grouped_mm: mat2 must have the same dtype as self (Float), got "
            "Half")

    @parametrize("layout", _OFFS_LAYOUTS)
    def test_offs_metadata(self, device, layout):
        a, b, offs = self._operands(layout, device)
        name = _LAYOUTS[layout][5]
        self.assertEqual(
            self._message(a, b, None),
            f"grouped_mm: offs is required for the {name} layout (1-D int32 "
            f"cumulative end offsets on {a.device})")
        self.assertEqual(
            self._message(a, b, offs.view(3, 1)),
            "grouped_mm: offs must be 1-D, got shape [3, 1]")
        self.assertEqual(
            self._message(a, b, offs.float()),
            "grouped_mm: offs must be int32 (or int64), got Float")
        if layout != "2d_2d":  # 2d x 2d takes its group count from offs
            for wrong in (offs[:2], torch.cat([offs, offs[-1:]])):
                self.assertEqual(
                    self._message(a, b, wrong),
                    f"grouped_mm: offs must have one entry per group (3 for "
                    f"the {name} layout), got {wrong.numel()}")

    def test_offs_with_3d_3d(self, device):
        a, b, _ = self._operands("3d_3d", device)
        offs = torch.tensor([1, 2, 3], dtype=torch.int32, device=device)
        self.assertEqual(
            self._message(a, b, offs),
            "grouped_mm: offs must be None for the batched 3d x 3d layout")

    @parametrize("layout", _OFFS_LAYOUTS)
    def test_offset_values(self, device, layout):
        a, b, _ = self._operands(layout, device)
        cases = {
            (5, 1, 10): "grouped_mm: offs[1] = 1 is less than offs[0] = 5; "
                        "offsets must be non-decreasing (group 1)",
            (-1, 5, 10): "grouped_mm: offs[0] = -1 is negative (group 0)",
            (2, 5, 11): "grouped_mm: offs[2] = 11 is past the end of the "
                        "grouped dimension (size 10) (group 2)",
        }
        for values, want in cases.items():
            offs = torch.tensor(values, dtype=torch.int32, device=device)
            with self._checked(device):
                self.assertEqual(self._message(a, b, offs), want)

    @parametrize("layout", list(_LAYOUTS))
    def test_out_dtype(self, device, layout):
        a, b, offs = self._operands(layout, device)
        self.assertEqual(
            self._message(a, b, offs, None, torch.float16),
            "grouped_mm: out_dtype must be None or Float (the inputs' dtype),"
            " got Half")
        self.assertEqual(
            self._message(a.bfloat16(), b.bfloat16(), offs, None,
                          torch.float16),
            "grouped_mm: out_dtype must be None, BFloat16 (the inputs' "
            "dtype) or Float, got Half")
        if device == "cpu":  # float64 is the CPU reference's only
            self.assertEqual(
                self._message(a.double(), b.double(), offs, None,
                              torch.float32),
                "grouped_mm: out_dtype must be None or Double (the inputs' "
                "dtype), got Float")

    @parametrize("layout", ["2d_3d", "2d_2d", "3d_3d"])
    def test_bias(self, device, layout):
        a, b, offs = self._operands(layout, device)
        n = b.shape[-1]
        self.assertEqual(
            self._message(a, b, offs, torch.randn(_GROUPS, n + 1,
                                                  device=device)),
            f"grouped_mm: bias must have shape (G, N) = ({_GROUPS}, {n}), "
            f"got [{_GROUPS}, {n + 1}]")
        self.assertEqual(
            self._message(a, b, offs, torch.randn(_GROUPS + 1, n,
                                                  device=device)),
            f"grouped_mm: bias must have shape (G, N) = ({_GROUPS}, {n}), "
            f"got [{_GROUPS + 1}, {n}]")
        self.assertEqual(
            self._message(a, b, offs, torch.randn(_GROUPS, n, device=device)
                          .half()),
            "grouped_mm: bias must have dtype Float (the inputs' dtype), got "
            "Half")
        self.assertEqual(
            self._message(a.half(), b.half(), offs,
                          torch.randn(_GROUPS, n, device=device).bfloat16(),
                          torch.float32),
            "grouped_mm: bias must have dtype Half (the inputs' dtype) or "
            "Float (out_dtype), got BFloat16")

    def test_bias_with_3d_2d(self, device):
        a, b, offs = self._operands("3d_2d", device)
        self.assertEqual(
            self._message(a, b, offs, torch.randn(3, 4, device=device)),
            "grouped_mm: bias is not supported for the 3d x 2d layout, where "
            "each group owns different output columns; add it to the output "
            "instead")

    @onlyCUDA
    @parametrize("layout", list(_LAYOUTS))
    def test_devices(self, device, layout):
        a, b, offs = self._operands(layout, device)
        self.assertEqual(
            self._message(a, b.cpu(), offs),
            f"grouped_mm: mat2 must be on the same device as self ({a.device}"
            "), got cpu")
        if offs is not None:
            self.assertEqual(
                self._message(a, b, offs.cpu()),
                f"grouped_mm: offs must be on the same device as self "
                f"({a.device}), got cpu")
        if layout != "3d_2d":
            bias = torch.randn(_GROUPS, b.shape[-1])
            self.assertEqual(
                self._message(a, b, offs, bias),
                f"grouped_mm: bias must be on the same device as self "
                f"({a.device}), got cpu")

    @unittest.skipIf(not HAS_EXTENSION, "the switch is the extension's")
    def test_checked_offsets_variable(self, device):
        with unittest.mock.patch.dict(os.environ,
                                      {"TORCH_GROUPED_MM_CHECK_OFFSETS": "maybe"}):
            with self.assertRaises(RuntimeError) as ctx:
                _testing.checked_offsets()
        self.assertEqual(
            str(ctx.exception).split("\n")[0],
            "grouped_mm: TORCH_GROUPED_MM_CHECK_OFFSETS must be 1, on, true or "
            "yes (checked), or empty, 0, off, false or no; got 'maybe'")


instantiate_device_type_tests(TestGroupedMMValidation, globals(),
                              only_for=("cpu", "cuda"))

if __name__ == "__main__":
    run_tests()
