# Owner(s): ["module: build"]
"""CPU tests of the extension build's nvcc wrapper (torch_ext/nvcc_targets.py).

torch_ext/setup.py compiles every source in one ninja run and lets this
wrapper give each CUDA file its own -gencode flags. Checked here without a
compiler: the targets a build takes from OVERLAP_OPS_ARCHS,
TORCH_CUDA_ARCH_LIST or the default, the flags per kind of file, the
command the wrapper runs (with `echo` as the real nvcc) and its refusal
without the arch flag or a source. (A build through it is what
tools/checks/check_cuda_compile.sh runs, in CI.)
"""

from __future__ import annotations

import os
import subprocess
import importlib.util
import sys
from pathlib import Path

from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)

REPO = Path(__file__).resolve().parent.parent
WRAPPER = REPO / "torch_ext" / "nvcc_targets.py"
# Loaded from its file: torch_ext/ on sys.path would make `import
# overlap_ops` find the source package (no _C) instead of the installed one.
_spec = importlib.util.spec_from_file_location("nvcc_targets", WRAPPER)
nvcc_targets = importlib.util.module_from_spec(_spec)
sys.modules["nvcc_targets"] = nvcc_targets
_spec.loader.exec_module(nvcc_targets)

SM90 = "-gencode=arch=compute_90a,code=sm_90a"
SM80 = "-gencode=arch=compute_80,code=sm_80"
SM86 = "-gencode=arch=compute_86,code=sm_86"
PTX80 = "-gencode=arch=compute_80,code=compute_80"
PTX90 = "-gencode=arch=compute_90,code=compute_90"
DEFAULT_FLAG = "--overlap-ops-archs=90a,80"


def _archs(**environ: str) -> list[str]:
    return nvcc_targets.resolve_archs(environ)[0]


class TestCudaTargets(TestCase):
    def test_default_archs_per_kind_of_file(self):
        # Hopper kernels: sm_90a only; SM80 kernels: sm_80 SASS and PTX
        # (the H200 JITs them), but the TF32 one also has Hopper SASS; the
        # rest both, with PTX.
        archs = _archs()
        self.assertEqual(archs, ["90a", "80"])
        targets = nvcc_targets.cuda_targets
        self.assertEqual(targets("GroupedMMSm90_bf16_cr.cu", archs), [SM90])
        self.assertEqual(targets("GroupedMMSm80_bf16.cu", archs),
                         [SM80, PTX80])
        self.assertEqual(targets("GroupedMMSm80_tf32.cu", archs),
                         [SM90, SM80, PTX80])
        self.assertEqual(targets("GroupedMMEpilogue.cu", archs),
                         [SM90, SM80, PTX80])

    def test_archs_from_overlap_ops_archs(self):
        # Hopper only: the SM80 kernels keep their PTX, the rest none.
        archs = _archs(OVERLAP_OPS_ARCHS="90a")
        targets = nvcc_targets.cuda_targets
        self.assertEqual(targets("GroupedMMSm90_fp16_rr.cu", archs), [SM90])
        self.assertEqual(targets("GroupedMMSm80_fp16.cu", archs), [PTX80])
        self.assertEqual(targets("GroupedMMRelayout.cu", archs), [SM90])
        # No Hopper target listed: the Hopper kernels take what is listed
        # (and compile to empty bodies there).
        archs = _archs(OVERLAP_OPS_ARCHS="80;86")
        self.assertEqual(targets("GroupedMMSm90_bf16_cr.cu", archs),
                         [SM80, SM86])
        self.assertEqual(
            targets("GroupedMMGeneric.cu",
                    _archs(OVERLAP_OPS_ARCHS=" 80 ; ;86")),
            [SM80, SM86, PTX80])

    @parametrize("value, expected", [
        # 9.0 is Hopper's arch-specific target: WGMMA and TMA need sm_90a.
        ("9.0", ["90a"]),
        ("9.0a", ["90a"]),
        ("8.0;9.0", ["80", "90a"]),
        ("8.0 8.6 9.0+PTX", ["80", "86", "90a+PTX"]),
        ("10.0a;12.0", ["100a", "120"]),
        ("Hopper", ["90a+PTX"]),
        ("Ampere;Hopper", ["80", "86+PTX", "90a+PTX"]),
        ("9.0;9.0a", ["90a"]),
    ])
    def test_torch_cuda_arch_list(self, value, expected):
        self.assertEqual(_archs(TORCH_CUDA_ARCH_LIST=value), expected)

    def test_torch_cuda_arch_list_ptx_is_generic(self):
        # +PTX serves GPUs newer than every target, so it is compute_90,
        # never compute_90a (which only runs on SM90); Hopper kernels get
        # none (only SM90 runs them).
        archs = _archs(TORCH_CUDA_ARCH_LIST="8.0;9.0+PTX")
        targets = nvcc_targets.cuda_targets
        self.assertEqual(targets("GroupedMMGeneric.cu", archs),
                         [SM80, SM90, PTX80, PTX90])
        self.assertEqual(targets("GroupedMMSm90_bf16_rr.cu", archs), [SM90])
        self.assertEqual(targets("GroupedMMSm80_bf16.cu", archs),
                         [SM80, PTX80])

    def test_overlap_ops_archs_wins_over_torch_cuda_arch_list(self):
        self.assertEqual(
            nvcc_targets.resolve_archs({"OVERLAP_OPS_ARCHS": "80",
                                        "TORCH_CUDA_ARCH_LIST": "9.0"}),
            (["80"], "OVERLAP_OPS_ARCHS"))
        self.assertEqual(
            nvcc_targets.resolve_archs({"TORCH_CUDA_ARCH_LIST": "9.0"}),
            (["90a"], "TORCH_CUDA_ARCH_LIST"))
        self.assertEqual(nvcc_targets.resolve_archs({}),
                         (["90a", "80"], "default"))

    def test_native_takes_the_visible_gpus(self):
        archs, _ = nvcc_targets.resolve_archs(
            {"TORCH_CUDA_ARCH_LIST": "native"}, lambda: [(9, 0), (8, 0)])
        self.assertEqual(archs, ["80", "90a+PTX"])
        with self.assertRaisesRegex(SystemExit, "no GPU is visible"):
            nvcc_targets.resolve_archs({"TORCH_CUDA_ARCH_LIST": "native"})

    def test_bad_values_name_the_variable(self):
        with self.assertRaises(SystemExit) as ctx:
            _archs(TORCH_CUDA_ARCH_LIST="9.0;sm_90")
        self.assertExpectedInline(str(ctx.exception), """\
overlap_ops: TORCH_CUDA_ARCH_LIST has 'sm_90': expected entries such as 8.0, 9.0, 10.0a or 9.0+PTX, or a name such as Hopper, separated by ';' or spaces""")
        with self.assertRaises(SystemExit) as ctx:
            _archs(OVERLAP_OPS_ARCHS="9.0")
        self.assertExpectedInline(str(ctx.exception), """\
overlap_ops: OVERLAP_OPS_ARCHS='9.0': expected nvcc targets separated by ';', such as 90a;80 or 90a;86+PTX""")


class TestNvccWrapper(TestCase):
    def _run(self, args, real="echo"):
        env = dict(os.environ, OVERLAP_OPS_REAL_NVCC=real)
        return subprocess.run([sys.executable, str(WRAPPER), *args],
                              env=env, capture_output=True, text=True)

    def test_appends_the_files_targets_in_place_of_the_arch_flag(self):
        args = ["--generate-dependencies-with-compile", "-O3",
                DEFAULT_FLAG, "-c",
                "/src/aten/GroupedMMSm90_bf16_cr.cu", "-o", "x.o",
                "--compiler-options", "'-fPIC'"]
        done = self._run(args)
        self.assertEqual(done.returncode, 0, done.stderr)
        words = done.stdout.split()
        self.assertNotIn(DEFAULT_FLAG, words)
        self.assertEqual(words, [a for a in args if a != DEFAULT_FLAG]
                         + [SM90])
        # The flag carries the targets, whatever the environment says.
        args[2] = "--overlap-ops-archs=80,86+PTX"
        done = self._run(args[:3] + ["-c", "a/GroupedMMGeneric.cu"])
        self.assertEqual(done.stdout.split()[-4:],
                         [SM80, SM86, PTX80,
                          "-gencode=arch=compute_86,code=compute_86"])

    def test_real_compiler_given_as_shell_words(self):
        # A user's PYTORCH_NVCC such as "ccache nvcc" becomes the command.
        done = self._run([DEFAULT_FLAG, "-c", "a/GroupedMMEpilogue.cu"],
                         real="echo ccache /usr/local/cuda/bin/nvcc")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(done.stdout.startswith(
            "ccache /usr/local/cuda/bin/nvcc -c a/GroupedMMEpilogue.cu"),
            done.stdout)

    def test_refuses_without_arch_flag_or_source(self):
        done = self._run(["-c", "a/GroupedMMEpilogue.cu"])
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("expected one --overlap-ops-archs=... flag",
                      done.stderr)
        self.assertIn("0 flag(s)", done.stderr)
        done = self._run([DEFAULT_FLAG, "-c", "a.cpp"])
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("0 source(s)", done.stderr)
        done = subprocess.run(
            [sys.executable, str(WRAPPER), DEFAULT_FLAG],
            env={k: v for k, v in os.environ.items()
                 if k != "OVERLAP_OPS_REAL_NVCC"},
            capture_output=True, text=True)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("OVERLAP_OPS_REAL_NVCC is not set", done.stderr)


instantiate_parametrized_tests(TestCudaTargets)

if __name__ == "__main__":
    run_tests()
