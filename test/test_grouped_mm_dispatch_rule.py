# Owner(s): ["module: cuda"]
"""The rule that decides which kernel takes a CUDA _grouped_mm call, for
every GPU family, on the CPU: upstream's sync-free paths (its bf16 CUTLASS
kernel, cuBLASLt's grouped GEMM in torch built with CUDA 13.3 or later) keep
the calls they run where this project has no tuned kernels (SM100, SM11x);
the device-offset kernels take the rest, on SM90 the SM80 kernels where the
binary lacks the Hopper kernels' sm_90a code."""

from __future__ import annotations

import os
import sys
import unittest

import torch
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402
if HAS_EXTENSION:
    # With the extension installed, a missing test module is an error.
    import overlap_ops._testing  # noqa: F401  (registers overlap_ops_testing)

# (major, minor) -> whether upstream takes a plain aligned bf16 call.
_FAMILIES = {
    (7, 5): False,   # Turing: upstream syncs, ours runs the portable kernel
    (8, 0): False,   # A100: ours (SM80 kernels); upstream syncs
    (8, 6): False,
    (8, 9): False,   # Ada
    (9, 0): False,   # Hopper: both sync-free, ours measured faster
    (10, 0): True,   # B200: upstream sync-free, no tuned kernel here
    (10, 3): True,   # B300
    (12, 0): False,  # RTX Blackwell: upstream syncs, ours (SM80 kernels)
}


def _takes(major, minor, dtype=torch.bfloat16, out_dtype=None, bias=False,
           offs_int32=True, groups=8, aligned=True, cublaslt=False) -> bool:
    return torch.ops.overlap_ops_testing._grouped_mm_upstream_takes(
        major, minor, dtype, out_dtype or dtype, bias, offs_int32, groups,
        aligned, cublaslt)


def _sm80_by_default(major, tf32=False, hopper_built=True) -> bool:
    return torch.ops.overlap_ops_testing._grouped_mm_sm80_by_default(
        major, tf32, hopper_built)


@unittest.skipIf(not HAS_EXTENSION, "the rule is tested through the "
                 "extension's test module")
class TestGroupedMMDispatchRule(TestCase):
    @parametrize("family", list(_FAMILIES))
    def test_plain_bf16_call(self, family):
        self.assertEqual(_takes(*family), _FAMILIES[family])

    @parametrize("family", [(10, 0), (10, 3)])
    def test_what_upstream_cannot_take_stays_ours(self, family):
        self.assertTrue(_takes(*family, groups=1024))
        self.assertTrue(_takes(*family, groups=1))
        self.assertFalse(_takes(*family, groups=1025))
        # No group: upstream's CUTLASS scheduler reads problem 0 regardless.
        self.assertFalse(_takes(*family, groups=0))
        self.assertFalse(_takes(*family, dtype=torch.float16))
        self.assertFalse(_takes(*family, dtype=torch.float32))
        self.assertFalse(_takes(*family, out_dtype=torch.float32))
        self.assertFalse(_takes(*family, bias=True))
        self.assertFalse(_takes(*family, offs_int32=False))
        self.assertFalse(_takes(*family, aligned=False))

    @parametrize("family", [f for f, up in _FAMILIES.items() if not up])
    def test_other_families_never_take_upstream(self, family):
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            for cublaslt in (False, True):
                self.assertFalse(_takes(*family, dtype=dtype,
                                        cublaslt=cublaslt))

    @parametrize("family", [(10, 0), (10, 3), (11, 0)])
    def test_cublaslt_keeps_fp16_where_torch_has_it(self, family):
        fp16 = dict(dtype=torch.float16, cublaslt=True)
        self.assertTrue(_takes(*family, **fp16))
        self.assertTrue(_takes(*family, **fp16, groups=1))
        self.assertTrue(_takes(*family, **fp16, groups=1024))
        self.assertFalse(_takes(*family, dtype=torch.float16))
        self.assertFalse(_takes(*family, **fp16, groups=0))
        self.assertFalse(_takes(*family, **fp16, groups=1025))
        self.assertFalse(_takes(*family, **fp16, out_dtype=torch.float32))
        self.assertFalse(_takes(*family, **fp16, bias=True))
        self.assertFalse(_takes(*family, **fp16, offs_int32=False))
        self.assertFalse(_takes(*family, **fp16, aligned=False))
        self.assertFalse(_takes(*family, dtype=torch.float32, cublaslt=True))

    def test_sm11x_bf16_stays_ours(self):
        # Upstream's CUTLASS kernel runs on SM90 and SM100 only, and its
        # cuBLASLt path takes bf16 only when preferred.
        self.assertFalse(_takes(11, 0))
        self.assertFalse(_takes(11, 0, cublaslt=True))

    @parametrize("major", [7, 8, 9, 10, 11, 12])
    def test_sm80_kernels_by_default(self, major):
        for tf32 in (False, True):
            self.assertEqual(_sm80_by_default(major, tf32),
                             major in (8, 12) or (major == 9 and tf32))
            # Without the Hopper kernels' sm_90a code, SM90 runs the SM80
            # kernels for every call; other GPUs are not affected.
            self.assertEqual(_sm80_by_default(major, tf32, False),
                             major in (8, 9, 12))


instantiate_parametrized_tests(TestGroupedMMDispatchRule)

if __name__ == "__main__":
    run_tests()
