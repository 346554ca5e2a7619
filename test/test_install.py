# Owner(s): ["module: build"]
"""What a fresh machine's install relies on, checked on CPU.

- torch_ext/pyproject.toml declares every requirement once, and everything
  the tests and tools load comes from torch or from what it declares.
- One version source; the torch a build compiled against is recorded, and
  importing into another torch minor release says to rebuild.
- setup.py without torch (pip's isolated build) says what to do.
- build.sh's error check: passes on this build, and explains a crash or a
  garbled message (the faults of a compiler whose C++ runtime is not
  torch's), with a stand-in Python that shows them.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

try:
    import tomllib
except ImportError:  # Python 3.10
    from pip._vendor import tomli as tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402,F401

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "torch_ext" / "pyproject.toml").read_text())
needs_extension = unittest.skipIf(
    not HAS_EXTENSION, "needs the overlap_ops extension installed")


def _name(requirement: str) -> str:
    # PEP 503 normalised distribution name of a requirement string.
    found = re.match(r"[A-Za-z0-9._-]+", requirement)
    return re.sub(r"[-_.]+", "-", found.group(0)).lower()


def _declared() -> dict[str, list[str]]:
    groups = dict(PYPROJECT["project"]["optional-dependencies"])
    groups["build"] = PYPROJECT["build-system"]["requires"]
    groups["run"] = PYPROJECT["project"]["dependencies"]
    return groups


def _closure(names: set[str]) -> set[str]:
    # The installed distributions `names` pull in, extras left out.
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in requires if "extra ==" not in r]
    return seen


class TestDeclaredRequirements(TestCase):
    def test_each_requirement_is_declared(self) -> None:
        names = {group: sorted(_name(r) for r in reqs)
                 for group, reqs in _declared().items()}
        self.assertEqual(names, {
            "build": ["ninja", "nvidia-cutlass", "setuptools", "wheel"],
            "run": ["torch"],
            # PyYAML: torchgen (tools/patches/check_patches.py) needs it.
            "test": ["expecttest", "numpy", "pytest", "pyyaml"],
            "bench": ["matplotlib"],
        })

    def test_torch_has_a_floor_and_no_cap(self) -> None:
        # The extension compiles against whatever torch is installed; a
        # cap would only stop users of the newest release.
        self.assertEqual(_declared()["run"], ["torch>=2.11"])

    def test_cutlass_is_pinned_to_the_tested_minor(self) -> None:
        # The CUDA kernels derive from CUTLASS 4.2 internals.
        cutlass = [r for r in _declared()["build"]
                   if _name(r) == "nvidia-cutlass"]
        self.assertEqual(cutlass, ["nvidia-cutlass>=4.2,<4.3"])
        try:
            installed = importlib.metadata.version("nvidia-cutlass")
        except importlib.metadata.PackageNotFoundError:
            self.skipTest("nvidia-cutlass is not installed here")
        self.assertTrue(installed.startswith("4.2."), installed)

    def test_what_tests_and_tools_load_is_declared(self) -> None:
        # Imports every test and tool module (and torchgen, which
        # tools/patches/check_patches.py runs) in a fresh process. A third-party
        # module it loads that neither torch nor the declared requirements
        # bring must be optional: the same imports pass with it blocked,
        # as on a fresh machine without it.
        done = self._import_all(blocked=[])
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        owners = importlib.metadata.packages_distributions()
        declared = {_name(r) for reqs in _declared().values() for r in reqs}
        allowed = _closure(declared) | {"overlap-ops"}
        undeclared = sorted(
            module for module in done.stdout.split()
            if module not in sys.stdlib_module_names
            and {_name(d) for d in owners.get(module, [])} - allowed)
        if undeclared:
            done = self._import_all(blocked=undeclared)
            self.assertEqual(done.returncode, 0,
                             f"without {undeclared}: {done.stderr[-3000:]}")

    def _import_all(self, blocked: list[str]) -> subprocess.CompletedProcess:
        code = textwrap.dedent(f"""
            import importlib, pathlib, sys

            class Blocked:  # these modules are not installed
                def find_spec(self, name, path=None, target=None):
                    if name.split(".")[0] in {blocked!r}:
                        raise ModuleNotFoundError(name, name=name)

            sys.meta_path.insert(0, Blocked())
            import overlap_ops  # the installed one, before test paths
            import torchgen.gen
            sys.path[:0] = ["test", "tools"]
            for folder in ("tools", "test"):
                for path in sorted(pathlib.Path(folder).glob("*.py")):
                    importlib.import_module(path.stem)
            for name, module in list(sys.modules.items()):
                where = str(getattr(module, "__file__", None)
                            or list(getattr(module, "__path__", [])))
                if module and "." not in name and "/_vendor/" not in where:
                    print(name)
            """)
        return subprocess.run([sys.executable, "-c", code], cwd=REPO,
                              capture_output=True, text=True)


class TestVersion(TestCase):
    def test_one_version_source(self) -> None:
        # pyproject reads overlap_ops/_version.py; no other file says it.
        self.assertEqual(PYPROJECT["project"]["dynamic"], ["version"])
        self.assertEqual(
            PYPROJECT["tool"]["setuptools"]["dynamic"]["version"],
            {"attr": "overlap_ops._version.__version__"})
        version = re.search(
            r'__version__ = "(.+)"',
            (REPO / "torch_ext/overlap_ops/_version.py").read_text())[1]
        for path in ("torch_ext/setup.py", "torch_ext/pyproject.toml",
                     "torch_ext/overlap_ops/__init__.py"):
            self.assertNotIn(version, (REPO / path).read_text(), path)

    @needs_extension
    def test_installed_metadata_and_build_record(self) -> None:
        from overlap_ops import _build_info

        self.assertEqual(importlib.metadata.version("overlap_ops"),
                         overlap_ops.__version__)
        self.assertEqual(_build_info.TORCH_VERSION, str(torch.__version__))
        cuda = torch.version.cuda if overlap_ops.has_cuda_kernels() else None
        self.assertEqual(_build_info.CUDA_VERSION, cuda)

    def test_another_torch_minor_says_to_rebuild(self) -> None:
        from overlap_ops._version import _check_versions

        with self.assertRaises(ImportError) as ctx:
            _check_versions("2.14.1+cu130", "13.0", "2.15.0+cu130", "13.0")
        self.assertExpectedInline(str(ctx.exception), """\
overlap_ops was built against torch 2.14.1+cu130, but this is torch 2.15.0+cu130: its C++ extension loads only into the torch minor release it was built against. Rebuild it against this torch: `pip install --no-build-isolation ./torch_ext` (or `./build.sh`) in the overlap_ops repository.""")  # noqa: B950
        with self.assertRaises(ImportError) as ctx:
            _check_versions("2.14.1+cu130", "13.0", "2.14.1+cu128", "12.8")
        self.assertExpectedInline(str(ctx.exception), """\
overlap_ops's CUDA kernels were built against CUDA 13.0, but this torch (2.14.1+cu128) has CUDA 12.8. Rebuild it against this torch: `pip install --no-build-isolation ./torch_ext` (or `./build.sh`) in the overlap_ops repository.""")  # noqa: B950
        # A patch release, or a CPU-only build in a CPU torch, loads.
        _check_versions("2.14.0", None, "2.14.1+cu130", "13.0")
        _check_versions("2.14.1+cu130", None, "2.14.1+cpu", None)

    @needs_extension
    def test_import_checks_before_loading_the_extension(self) -> None:
        code = ("import torch; torch.__version__ = '2.99.0'\n"
                "import overlap_ops")
        done = subprocess.run([sys.executable, "-c", code],
                              capture_output=True, text=True)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("ImportError: overlap_ops was built against torch "
                      f"{torch.__version__}, but this is torch 2.99.0",
                      done.stderr)


class TestSetupWithoutTorch(TestCase):
    def test_says_to_install_torch_and_turn_off_isolation(self) -> None:
        # What pip's default isolated build environment sees.
        code = ("import runpy, sys\n"
                "sys.modules['torch'] = None  # import torch fails\n"
                "sys.argv = ['setup.py', '--version']\n"
                "runpy.run_path('setup.py', run_name='__main__')")
        done = subprocess.run([sys.executable, "-c", code],
                              cwd=REPO / "torch_ext", capture_output=True,
                              text=True)
        self.assertEqual(done.returncode, 1)
        self.assertExpectedInline(done.stderr, """\
overlap_ops: torch is not installed in this build environment.
The extension compiles against the torch it will run with, and pip builds
in an isolated environment without it unless told otherwise. Install torch
first, then build without isolation:
    pip install torch
    pip install --no-build-isolation ./torch_ext
""")


# A stand-in overlap_ops whose grouped_mm fails as the real one does for
# build.sh's bad call, from C++ built by the test (the real build takes
# minutes).
STAND_IN_CPP = r"""
#include <torch/library.h>

void check_groups(int64_t expected, int64_t got) {
  TORCH_CHECK(
      expected == got, "grouped_mm: offs must have one entry per group (",
      expected, " for the 2d x 3d layout), got ", got);
}

TORCH_LIBRARY(overlap_ops_stand_in, m) {
  m.def("check_groups(int expected, int got) -> ()", check_groups);
}
"""
STAND_IN_PY = """
import os, torch
torch.ops.load_library(os.path.join(os.path.dirname(__file__), "_C.so"))
def grouped_mm(a, b, offs):
    torch.ops.overlap_ops_stand_in.check_groups(b.size(0), offs.size(0))
"""
SYSTEM_CXX = "/usr/bin/g++"


class TestErrorCheck(TestCase):
    """./build.sh check: the call it makes must raise RuntimeError with
    its whole message. Stand-ins play the faulty builds: a stand-in Python
    for a crash, and C++ linked with its own libstdc++ (the GPU image's
    default compiler does that) for the garbled message."""

    def _check(self, python: str, path: str = "") -> \
            subprocess.CompletedProcess:
        env = dict(os.environ, PYTHON=python, CXX=SYSTEM_CXX,
                   PYTHONPATH=path)
        return subprocess.run([str(REPO / "build.sh"), "check"], env=env,
                              capture_output=True, text=True)

    def _folder(self) -> Path:
        folder = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", folder]))
        return Path(folder)

    def _stand_in(self, body: str) -> str:
        path = self._folder() / "python"
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(0o755)
        return str(path)

    def _stand_in_package(self, link_flags: list[str]) -> str:
        from torch.utils import cpp_extension

        folder = self._folder()
        package = folder / "overlap_ops"
        package.mkdir()
        (package / "__init__.py").write_text(STAND_IN_PY)
        (folder / "check.cpp").write_text(STAND_IN_CPP)
        abi = int(torch.compiled_with_cxx11_abi())
        includes = [f"-I{p}" for p in cpp_extension.include_paths()]
        lib = Path(torch.__file__).parent / "lib"
        subprocess.run(
            [SYSTEM_CXX, "-shared", "-fPIC", "-std=c++20", "-O1",
             f"-D_GLIBCXX_USE_CXX11_ABI={abi}", *includes,
             str(folder / "check.cpp"), f"-L{lib}", "-lc10", "-ltorch_cpu",
             *link_flags, "-o", str(package / "_C.so")], check=True)
        return str(folder)

    @unittest.skipIf(not Path(SYSTEM_CXX).exists(), f"needs {SYSTEM_CXX}")
    def test_a_static_libstdcxx_build_fails_the_check(self) -> None:
        # Built as torch is, the stand-in passes; linked with its own
        # libstdc++, its message is cut at the first number (or, on the GPU
        # image, the process dies), and the check says why.
        done = self._check(sys.executable, self._stand_in_package([]))
        self.assertEqual(done.returncode, 0, done.stderr)
        done = self._check(sys.executable, self._stand_in_package(
            ["-static-libstdc++", "-static-libgcc"]))
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn("whose C++ runtime does not match torch's",
                      done.stderr)

    @needs_extension
    def test_this_build_passes(self) -> None:
        done = self._check(sys.executable)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("raised RuntimeError with its whole message",
                      done.stdout)

    def test_a_crash_names_the_compiler(self) -> None:
        done = self._check(self._stand_in("kill -SEGV $$"))
        self.assertEqual(done.returncode, 1)
        self.assertIn("a bad call killed the process (signal 11) instead "
                      "of raising RuntimeError", done.stderr)
        self.assertIn("built with CXX=", done.stderr)
        self.assertIn("whose C++ runtime does not match torch's",
                      done.stderr)

    def test_a_message_cut_at_its_first_number(self) -> None:
        # What a statically linked libstdc++ does to c10::str here.
        done = self._check(self._stand_in(
            "echo 'grouped_mm: offs must have one entry per group ('"))
        self.assertEqual(done.returncode, 1)
        self.assertIn('a bad call raised a garbled error: got "grouped_mm: '
                      'offs must have one entry per group (", expected '
                      '"grouped_mm: offs must have one entry per group (3 '
                      'for the 2d x 3d layout), got 2"', done.stderr)
        self.assertIn("does not match torch's", done.stderr)

    def test_another_failure_is_not_blamed_on_the_compiler(self) -> None:
        for body in ("echo 'ModuleNotFoundError: overlap_ops'; exit 1",
                     "echo 'no error raised'; exit 1"):
            done = self._check(self._stand_in(body))
            self.assertEqual(done.returncode, 2)
            self.assertIn("the error check itself failed (exit status 1)",
                          done.stderr)
            self.assertNotIn("C++ runtime", done.stderr)


if __name__ == "__main__":
    run_tests()
