# Owner(s): ["module: build"]
"""CPU tests of the extension build's nvcc wrapper (torch_ext/nvcc_targets.py).

torch_ext/setup.py compiles every source in one ninja run and lets this
wrapper give each CUDA file its own -gencode flags. Checked here without a
compiler: the flags per kind of file and OVERLAP_OPS_ARCHS, the command the
wrapper runs (with `echo` as the real nvcc) and its refusal without the
marker or a source. (A build through it is what tools/checks/check_cuda_compile.sh
runs, in CI.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import unittest.mock
from pathlib import Path

from torch.testing._internal.common_utils import run_tests, TestCase

REPO = Path(__file__).resolve().parent.parent
WRAPPER = REPO / "torch_ext" / "nvcc_targets.py"
sys.path.insert(0, str(WRAPPER.parent))

import nvcc_targets  # noqa: E402

SM90 = "-gencode=arch=compute_90a,code=sm_90a"
SM80 = "-gencode=arch=compute_80,code=sm_80"
PTX80 = "-gencode=arch=compute_80,code=compute_80"


class TestCudaTargets(TestCase):
    def _targets(self, name, archs=None):
        env = {} if archs is None else {"OVERLAP_OPS_ARCHS": archs}
        with unittest.mock.patch.dict(os.environ, env):
            if archs is None:
                os.environ.pop("OVERLAP_OPS_ARCHS", None)
            return nvcc_targets.cuda_targets(name)

    def test_default_archs_per_kind_of_file(self):
        # Hopper kernels: sm_90a only; SM80 kernels: sm_80 SASS and PTX
        # (the H200 JITs them), but the TF32 one also has Hopper SASS; the
        # rest both, with PTX.
        self.assertEqual(self._targets("GroupedMMSm90_bf16_cr.cu"), [SM90])
        self.assertEqual(self._targets("GroupedMMSm80_bf16.cu"),
                         [SM80, PTX80])
        self.assertEqual(self._targets("GroupedMMSm80_tf32.cu"),
                         [SM90, SM80, PTX80])
        self.assertEqual(self._targets("GroupedMMEpilogue.cu"),
                         [SM90, SM80, PTX80])

    def test_archs_from_the_environment(self):
        # Hopper only: the SM80 kernels keep their PTX, the rest none.
        self.assertEqual(self._targets("GroupedMMSm90_fp16_rr.cu", "90a"),
                         [SM90])
        self.assertEqual(self._targets("GroupedMMSm80_fp16.cu", "90a"),
                         [PTX80])
        self.assertEqual(self._targets("GroupedMMRelayout.cu", "90a"),
                         [SM90])
        # No Hopper target listed: the Hopper kernels take what is listed
        # (and compile to empty bodies there).
        self.assertEqual(self._targets("GroupedMMSm90_bf16_cr.cu", "80;86"),
                         [SM80, "-gencode=arch=compute_86,code=sm_86"])
        self.assertEqual(self._targets("GroupedMMGeneric.cu", " 80 ; ;86"),
                         [SM80, "-gencode=arch=compute_86,code=sm_86",
                          PTX80])


class TestNvccWrapper(TestCase):
    def _run(self, args, real="echo"):
        env = dict(os.environ, OVERLAP_OPS_REAL_NVCC=real)
        env.pop("OVERLAP_OPS_ARCHS", None)
        return subprocess.run([sys.executable, str(WRAPPER), *args],
                              env=env, capture_output=True, text=True)

    def test_appends_the_files_targets_in_place_of_the_marker(self):
        args = ["--generate-dependencies-with-compile", "-O3",
                nvcc_targets.ARCH_MARKER, "-c",
                "/src/aten/GroupedMMSm90_bf16_cr.cu", "-o", "x.o",
                "--compiler-options", "'-fPIC'"]
        done = self._run(args)
        self.assertEqual(done.returncode, 0, done.stderr)
        words = done.stdout.split()
        self.assertNotIn(nvcc_targets.ARCH_MARKER, words)
        self.assertEqual(words, [a for a in args
                                 if a != nvcc_targets.ARCH_MARKER] + [SM90])

    def test_real_compiler_given_as_shell_words(self):
        # A user's PYTORCH_NVCC such as "ccache nvcc" becomes the command.
        done = self._run([nvcc_targets.ARCH_MARKER, "-c", "a/GroupedMMEpilogue.cu"],
                         real="echo ccache /usr/local/cuda/bin/nvcc")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(done.stdout.startswith(
            "ccache /usr/local/cuda/bin/nvcc -c a/GroupedMMEpilogue.cu"),
            done.stdout)

    def test_refuses_without_marker_or_source(self):
        done = self._run(["-c", "a/GroupedMMEpilogue.cu"])
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("expected --overlap-ops-arch-flags-per-file",
                      done.stderr)
        done = self._run([nvcc_targets.ARCH_MARKER, "-c", "a.cpp"])
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("0 source(s)", done.stderr)
        done = subprocess.run(
            [sys.executable, str(WRAPPER), nvcc_targets.ARCH_MARKER],
            env={k: v for k, v in os.environ.items()
                 if k != "OVERLAP_OPS_REAL_NVCC"},
            capture_output=True, text=True)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("OVERLAP_OPS_REAL_NVCC is not set", done.stderr)


if __name__ == "__main__":
    run_tests()
