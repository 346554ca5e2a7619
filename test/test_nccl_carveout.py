# Owner(s): ["oncall: distributed"]
"""overlap_ops.nccl_options and sm_carveout("auto"): the NCCL communicator's
CTA cap and the GEMM carveout set from one k, tested on the CPU through the
options object and a stand-in process group."""

from __future__ import annotations

import os
import sys
import unittest
import unittest.mock

import torch
import torch.distributed as dist
from torch.testing._internal.common_utils import run_tests, TestCase

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402


class _Group:
    """What carveout_of reads of a process group."""

    def __init__(self, options):
        self._backend = unittest.mock.Mock(options=options)

    def _get_backend(self, device):
        assert device == torch.device("cuda")
        return self._backend


@unittest.skipIf(not HAS_EXTENSION, "the helper is the extension's")
@unittest.skipIf(not hasattr(dist, "ProcessGroupNCCL"),
                 "torch built without NCCL")
class TestNcclCarveout(TestCase):
    def test_options_cap_the_ctas(self):
        options = overlap_ops.nccl_options(16)
        self.assertEqual((options.config.max_ctas, options.config.min_ctas),
                         (16, 1))
        given = dist.ProcessGroupNCCL.Options()
        self.assertIs(overlap_ops.nccl_options(4, given), given)
        self.assertEqual(given.config.max_ctas, 4)

    def test_options_lower_a_larger_minimum(self):
        # A minimum above the cap would make NCCL ignore the cap.
        given = dist.ProcessGroupNCCL.Options()
        config = given.config
        config.min_ctas = 32
        given.config = config
        options = overlap_ops.nccl_options(8, given)
        self.assertEqual((options.config.min_ctas, options.config.max_ctas),
                         (8, 8))

    def test_carveout_of_refuses_a_zero_cap(self):
        options = dist.ProcessGroupNCCL.Options()
        config = options.config
        config.max_ctas = 0
        options.config = config
        with self.assertRaisesRegex(RuntimeError, "no CTA cap"):
            overlap_ops.carveout_of(_Group(options))

    def test_bad_k_is_refused(self):
        for k in (0, -3, 2.5, True, None):
            with self.assertRaisesRegex(ValueError, "k must be an int >= 1"):
                overlap_ops.nccl_options(k)

    def test_carveout_of_reads_the_cap(self):
        group = _Group(overlap_ops.nccl_options(24))
        self.assertEqual(overlap_ops.carveout_of(group), 24)
        with self.assertRaisesRegex(RuntimeError, "no CTA cap"):
            overlap_ops.carveout_of(_Group(dist.ProcessGroupNCCL.Options()))

    def test_auto_sets_the_context_to_the_cap(self):
        group = _Group(overlap_ops.nccl_options(8))
        before = torch._C._get_sm_carveout_experimental()
        # The carveout's own checks need a GPU's SM count: stand one in.
        with unittest.mock.patch.object(
                overlap_ops.carveout, "check_sm_carveout",
                side_effect=lambda k: k), \
                unittest.mock.patch.object(
                    overlap_ops.carveout, "_route_carveout_gemms_once"):
            with overlap_ops.sm_carveout("auto", group) as k:
                self.assertEqual(k, 8)
                self.assertEqual(torch._C._get_sm_carveout_experimental(), 8)
        self.assertEqual(torch._C._get_sm_carveout_experimental(), before)


if __name__ == "__main__":
    run_tests()
