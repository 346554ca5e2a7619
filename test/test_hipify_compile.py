# Owner(s): ["module: rocm"]
"""tools/checks/hipify_compile.py's pure parts (the compiling itself runs in
tools/checks/check_hip_compile.sh, which needs hipcc)."""

from __future__ import annotations

import sys
from pathlib import Path

from torch.testing._internal.common_utils import run_tests, TestCase

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools" / "checks"))

import hipify_compile  # noqa: E402


class TestHipifyCompile(TestCase):
    def test_cuda_dispatch_kernels_of_the_series(self):
        # Registered for the CUDA key, which ROCm builds use too.
        self.assertEqual(
            hipify_compile.cuda_dispatch_kernels(),
            {"group_column_sums_cuda", "grouped_mm_grad_to_cuda"})

    def test_own_code_leaves_out_includes_and_empty_namespaces(self):
        unit = Path("/t/native/hip/GroupedMMSm90_bf16_cr.hip")
        preprocessed = "\n".join([
            '# 1 "/t/native/hip/GroupedMMSm90_bf16_cr.hip"',
            '# 1 "/usr/include/hip/hip_runtime.h" 1',
            "struct dim3 { int x; };",
            '# 5 "/t/native/hip/GroupedMMSm90_bf16_cr.hip" 2',
            "namespace at::native::grouped_mm::sm90 {",
            "}",
        ])
        self.assertEqual(hipify_compile._own_code(preprocessed, unit), "")
        kept = preprocessed + "\nvoid f() {}"
        self.assertEqual(hipify_compile._own_code(kept, unit),
                         "void f() {}")


if __name__ == "__main__":
    run_tests()
