# Owner(s): ["module: nn"]
"""overlap_ops.gmm, the adapter for code written against the grouped_gemm
package, against a float64 per-group loop."""

from __future__ import annotations

import os
import sys
import unittest

import torch
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
)
from torch.testing._internal.common_utils import parametrize, run_tests, TestCase

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402


@unittest.skipIf(not HAS_EXTENSION, "gmm is the extension's")
class TestGmm(TestCase):
    @dtypes(torch.float32, torch.bfloat16)
    @parametrize("trans_b", [False, True])
    def test_matches_loop(self, device, dtype, trans_b):
        if device.startswith("cuda") and not overlap_ops.has_cuda_kernels():
            self.skipTest("a CPU-only build of overlap_ops")
        sizes = [3, 0, 5, 2]
        a = torch.randn(sum(sizes), 8, device=device, dtype=dtype,
                        requires_grad=True)
        shape = (4, 6, 8) if trans_b else (4, 8, 6)
        b = torch.randn(*shape, device=device, dtype=dtype,
                        requires_grad=True)
        batch_sizes = torch.tensor(sizes, device=device)
        out = overlap_ops.gmm(a, b, batch_sizes, trans_b=trans_b)
        weights = b.detach().double()
        if trans_b:
            weights = weights.transpose(-2, -1)
        pieces = a.detach().double().split(sizes)
        want = torch.cat([p @ weights[g] for g, p in enumerate(pieces)])
        tol = 1e-5 if dtype == torch.float32 and device == "cpu" else 2e-2
        err = ((out.double() - want).norm() / want.norm()).item()
        self.assertLessEqual(err, tol)
        out.float().sum().backward()
        self.assertEqual(b.grad.shape, b.shape)
        self.assertEqual(a.grad.shape, a.shape)

    def test_trans_b_defaults_to_false(self, device):
        a = torch.randn(6, 8, device=device)
        b = torch.randn(2, 8, 5, device=device)
        out = overlap_ops.gmm(a, b, torch.tensor([2, 4], device=device))
        want = torch.cat([a[:2].double() @ b[0].double(),
                          a[2:].double() @ b[1].double()])
        self.assertEqual(out.double(), want, atol=1e-5, rtol=1e-5)

    def test_rejects_a_scalar(self, device):
        with self.assertRaisesRegex(ValueError, "1-D integer tensor, got "
                                    "0-D"):
            overlap_ops.gmm(torch.randn(3, 2, device=device),
                            torch.randn(1, 2, 2, device=device),
                            torch.tensor(3, device=device))

    def test_rejects_float_sizes(self, device):
        with self.assertRaisesRegex(ValueError, "1-D integer tensor, got "
                                    "1-D torch.float32"):
            overlap_ops.gmm(torch.randn(2, 2, device=device),
                            torch.randn(1, 2, 2, device=device),
                            torch.tensor([2.0], device=device))


instantiate_device_type_tests(TestGmm, globals(), only_for=("cpu", "cuda"))

if __name__ == "__main__":
    run_tests()
