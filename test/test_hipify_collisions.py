# Owner(s): ["module: rocm"]
"""tools/checks/hipify_collisions.py: no file of the series is overwritten
by PyTorch's ROCm build, and the check catches a file that would be."""

from __future__ import annotations

import sys
from pathlib import Path

from torch.testing._internal.common_utils import run_tests, TestCase

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools" / "checks"))

import hipify_collisions  # noqa: E402


class TestHipifyCollisions(TestCase):
    def test_series_has_none(self):
        files = hipify_collisions.series_files()
        self.assertIn("aten/src/ATen/hip/CarveoutStreamHIP.cpp", files)
        self.assertIn("aten/src/ATen/cuda/CUDABlas.cpp", files)  # an edit
        self.assertEqual(hipify_collisions.collisions(files), [])

    def test_cpp_tests_are_hipified_too(self):
        files = {"aten/src/ATen/test/cuda_cu_mask_test.cpp",
                 "aten/src/ATen/test/hip/hip_cu_mask_test.cpp"}
        self.assertEqual(
            hipify_collisions.collisions(files),
            ["aten/src/ATen/test/cuda_cu_mask_test.cpp -> "
             "aten/src/ATen/test/hip/hip_cu_mask_test.cpp, which the series "
             "writes by hand"])

    def test_a_cuda_file_over_a_rocm_file_is_caught(self):
        files = {"aten/src/ATen/cuda/CarveoutStreamCUDA.cpp",
                 "aten/src/ATen/hip/CarveoutStreamHIP.cpp"}
        self.assertEqual(
            hipify_collisions.collisions(files),
            ["aten/src/ATen/cuda/CarveoutStreamCUDA.cpp -> "
             "aten/src/ATen/hip/CarveoutStreamHIP.cpp, which the series "
             "writes by hand"])


if __name__ == "__main__":
    run_tests()
